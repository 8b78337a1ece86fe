/*
 * The daemon on a TLS-required mesh (seed: "A TLS-required mesh always
 * starts it with TLS demanded, so it refuses a plaintext listener rather
 * than upgrading on the server's unauthenticated greeting"): a plaintext
 * broker is refused; a TLS broker with the mesh's CA brings every worker up
 * over TLS; a wrong CA, a certificate for another host, a missing CA are
 * refused. The CA and the broker's certificate are made with `openssl`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
#define NROLES 4

static struct mesh mesh;
static struct h_fixture fx = { .mesh = &mesh };
/* good: the mesh's CA and a broker certificate for 127.0.0.1; other: a CA
 * the broker's certificate does not chain to; elsewhere: a certificate for
 * another host, from its own CA. */
static struct tls_files good, other, elsewhere;
static char reg[H_PATH_MAX * 2];
static int http_port;

static const char refusal[] = "does not offer TLS, and this mesh demands it; "
    "refusing to dial in plaintext";

static int
setup(void **state)
{
	char key[512];

	*state = &fx;
	if (h_mesh_up(&mesh, "tlsmesh", true) != 0 ||
	    h_tls_make(&mesh, "good", "DNS:localhost,IP:127.0.0.1", &good) != 0 ||
	    h_tls_make(&mesh, "other", "DNS:localhost,IP:127.0.0.1", &other) != 0 ||
	    h_tls_make(&mesh, "elsewhere", "DNS:broker.elsewhere.example", &elsewhere) != 0)
		return -1;
	space_key(mesh.space, key, sizeof(key));
	snprintf(reg, sizeof(reg), "%s/meshes/space.%s.json", mesh.home, key);
	/* The mesh as an operator records a TLS-required one. */
	json_t *doc = json_load_file(reg, 0, NULL);
	if (doc == NULL)
		return -1;
	json_object_set_new(doc, "tlsRequired", json_true());
	json_object_set_new(doc, "tlsCa", json_string(good.ca));
	int rc = json_dump_file(doc, reg, 0);
	json_decref(doc);
	http_port = h_free_port();
	return rc;
}

/* The broker serving the certificate of t (NULL: plaintext), CONNZ on
 * http_port. */
static void
broker_serving(const struct tls_files *t)
{
	char extra[64];

	snprintf(extra, sizeof(extra), "http: \"127.0.0.1:%d\"", http_port);
	assert_int_equal(h_broker_tls(&mesh, t, extra), 0);
}

/* The broker's /connz, parsed. */
static json_t *
connz(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_port) };
	static char buf[1024 * 1024];
	const char req[] = "GET /connz?limit=1024 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	size_t got = 0;
	ssize_t r;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	while (got < sizeof(buf) - 1 && ((r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0 ||
	    (r < 0 && errno == EINTR)))
		if (r > 0)
			got += (size_t)r;
	close(fd);
	buf[got] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	assert_non_null(body);
	json_t *doc = json_loads(body + 4, 0, NULL);
	assert_non_null(doc);
	return doc;
}

/* The daemon's connections in CONNZ: how many, and how many over TLS. */
static void
daemon_conns(int *all, int *tls, bool *every_role)
{
	json_t *doc = connz(), *c;
	bool seen[NROLES] = { false };
	size_t i;

	*all = *tls = 0;
	json_array_foreach(json_object_get(doc, "connections"), i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *v = json_string_value(json_object_get(c, "tls_version"));
		if (name == NULL || strncmp(name, "cotal-deliveryd", 15) != 0)
			continue;
		(*all)++;
		if (v != NULL && *v != '\0')
			(*tls)++;
		for (int k = 0; k < NROLES; k++) {
			char want[64];
			snprintf(want, sizeof(want), "cotal-deliveryd %s", roles[k]);
			if (strcmp(name, want) == 0 && v != NULL && *v != '\0')
				seen[k] = true;
		}
	}
	json_decref(doc);
	*every_role = true;
	for (int k = 0; k < NROLES; k++)
		*every_role = *every_role && seen[k];
}

static void
expect_refused(const char *want, ...)
{
	char out[H_OUT_MAX], *argv[8];
	const char *a;
	int n = 0;
	va_list ap;

	va_start(ap, want);
	while ((a = va_arg(ap, const char *)) != NULL && n < 6)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	int rc = h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space, "--root",
	    mesh.dir, n > 0 ? argv[0] : NULL, n > 1 ? argv[1] : NULL, NULL);
	if (rc != 1 || strstr(out, want) == NULL)
		fail_msg("expected exit 1 and \"%s\"; got exit %d:\n%s", want, rc, out);
	/* Refused before any worker was started. */
	if (strstr(out, "starting workers") != NULL)
		fail_msg("workers were started:\n%s", out);
}

/* "it refuses a plaintext listener rather than upgrading": the broker's
 * greeting offers no TLS, so nothing is sent and the daemon exits 1. */
static void
test_plaintext_broker_is_refused(void **state)
{
	char line[512];

	(void)state;
	broker_serving(NULL);
	snprintf(line, sizeof(line), "✗ delivery: the broker at nats://127.0.0.1:%d %s",
	    mesh.port, refusal);
	expect_refused(line, NULL);
	/* --tls demands it as well when the record does not. */
	assert_int_equal(h_registry_set(&mesh, "tlsRequired", json_false()), 0);
	expect_refused(refusal, "--tls", NULL);
	assert_int_equal(h_registry_set(&mesh, "tlsRequired", json_true()), 0);
}

/* "A TLS-required mesh always starts it with TLS demanded": with the CA of
 * the registry record, the supervisor and its four workers connect over
 * TLS (CONNZ shows a TLS version on each). */
static void
test_tls_broker_with_the_ca_brings_every_worker_up(void **state)
{
	struct daemon d;
	int all = 0, tls = 0;
	bool every_role = false;

	(void)state;
	broker_serving(&good);
	assert_int_equal(h_daemon_start(&mesh, &d, NULL), 0);
	if (h_daemon_wait_connected(&d, 30000) != 0)
		fail_msg("the workers did not come up over TLS; see %s", d.log);
	assert_true(h_log_has(d.log, "TLS demanded (mesh registry tlsRequired)", 0));
	for (int waited = 0; waited < 5000 && !every_role; waited += 100) {
		daemon_conns(&all, &tls, &every_role);
		if (!every_role)
			usleep(100 * 1000);
	}
	assert_true(every_role);
	assert_true(all >= NROLES + 1); /* the workers and the supervisor's own */
	assert_int_equal(tls, all);

	/* The broker turns plaintext under a running daemon: its workers and
	 * the supervisor keep reconnecting (nats.c waits 1-2 s between tries)
	 * and none of them does so in plaintext. */
	broker_serving(NULL);
	for (int waited = 0; waited < 5000; waited += 250) {
		daemon_conns(&all, &tls, &every_role);
		if (all != 0)
			fail_msg("%d connection(s) of the daemon on a plaintext broker", all);
		usleep(250 * 1000);
	}
	kill(d.pid, SIGTERM);
	assert_true(h_daemon_wait_exit(&d, 10000) != -1);
}

/* A CA the broker's certificate does not chain to: refused at start. */
static void
test_wrong_ca_is_refused(void **state)
{
	(void)state;
	broker_serving(&good);
	expect_refused("did not prove itself as 127.0.0.1 with the mesh's CA", "--tls-ca",
	    other.ca, NULL);
}

/* The certificate must name the host the URL names (the supervisor dials
 * an IP literal, nats.c checks the name it is given). */
static void
test_certificate_for_another_host_is_refused(void **state)
{
	(void)state;
	broker_serving(&elsewhere);
	expect_refused("did not prove itself as 127.0.0.1", "--tls-ca", elsewhere.ca, NULL);
	expect_refused("IP address mismatch", "--tls-ca", elsewhere.ca, NULL);
}

/* Demanded TLS without a CA, or a key where the CA belongs: refused
 * before anything is dialled. */
static void
test_missing_or_wrong_ca_file_is_refused(void **state)
{
	(void)state;
	broker_serving(&good);
	assert_int_equal(h_registry_set(&mesh, "tlsCa", NULL), 0);
	expect_refused("demands TLS (mesh registry tlsRequired), and no CA to verify the broker "
	    "with is given", NULL);
	assert_int_equal(h_registry_set(&mesh, "tlsCa", json_string("relative/ca.pem")), 0);
	expect_refused("field \"tlsCa\" is not an absolute path", NULL);
	assert_int_equal(h_registry_set(&mesh, "tlsCa", json_string(good.ca)), 0);
	expect_refused("holds a private key; a CA file holds certificates only", "--tls-ca",
	    good.key, NULL);
	expect_refused("holds no PEM certificate", "--tls-ca", reg, NULL);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plaintext_broker_is_refused),
		cmocka_unit_test(test_tls_broker_with_the_ca_brings_every_worker_up),
		cmocka_unit_test(test_wrong_ca_is_refused),
		cmocka_unit_test(test_certificate_for_another_host_is_refused),
		cmocka_unit_test(test_missing_or_wrong_ca_file_is_refused),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
