/*
 * One broker: which nats-server binary, its version, a free loopback port,
 * starting, stopping and killing it (a cluster's nodes too, through
 * hi_broker_spawn and hi_pid_signal), and restarting it serving TLS with a
 * CA and certificate made by the openssl command.
 */
#include "tests/harness/harness_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef COTAL_BUNDLED_NATS_SERVER
#define COTAL_BUNDLED_NATS_SERVER ""
#endif

#define BROKER_WAIT_MS 10000
#define STOP_WAIT_MS 10000

const char *
hi_broker_binary(void)
{
	static const char *const env[] = {
		[H_BROKER_210] = "COTAL_TEST_NATS_SERVER",
		[H_BROKER_29] = "COTAL_TEST_NATS_SERVER_29",
		[H_BROKER_214] = "COTAL_TEST_NATS_SERVER_214",
	};
	static const char *const bundled[] = {
		[H_BROKER_210] = COTAL_BUNDLED_NATS_SERVER,
		[H_BROKER_29] = "/usr/sbin/nats-server",
		[H_BROKER_214] = COTAL_BUNDLED_NATS_SERVER_214,
	};
	const char *v = getenv(env[hi_broker]);

	if (v != NULL && *v != '\0')
		return v;
	if (access(bundled[hi_broker], X_OK) == 0)
		return bundled[hi_broker];
	return "/usr/sbin/nats-server";
}

int
h_broker_version(void)
{
	char cmd[H_PATH_MAX + 32], line[256];
	int major = 0, minor = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' --version 2>&1", hi_broker_binary());
	if ((f = popen(cmd, "r")) == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "nats-server: v%d.%d", &major, &minor) != 2)
		major = minor = 0;
	pclose(f);
	return major * 100 + minor;
}

int
h_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static bool
port_accepts(const char *addr, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	inet_pton(AF_INET, addr, &a.sin_addr);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

int
hi_broker_spawn(struct mesh *m, const char *conf, int port, const char *logname, pid_t *pidp)
{
	return hi_broker_spawn_at(m, conf, NULL, "127.0.0.1", port, logname, pidp);
}

int
hi_broker_spawn_at(struct mesh *m, const char *conf, const char *netns, const char *addr,
		   int port, const char *logname, pid_t *pidp)
{
	char logp[H_PATH_MAX + 32];
	char *argv[] = { m->nats_bin, (char *)"-c", (char *)conf, NULL };
	pid_t pid;

	snprintf(logp, sizeof(logp), "%s/%s", m->dir, logname);
	if ((pid = hi_spawn_in(m, argv, logp, netns)) < 0)
		return -1;
	hi_track(pid, true);
	*pidp = pid;
	for (int waited = 0; waited < BROKER_WAIT_MS; waited += 20) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			hi_track(pid, false);
			*pidp = 0;
			fprintf(stderr, "✗ harness: %s exited at start (see %s)\n", m->nats_bin, logp);
			return -1;
		}
		if (port_accepts(addr, port))
			return 0;
		hi_sleep_ms(20);
	}
	fprintf(stderr, "✗ harness: broker did not listen on %s:%d within %d ms\n", addr, port,
	    BROKER_WAIT_MS);
	return -1;
}

int
h_broker_start(struct mesh *m)
{
	return hi_broker_spawn(m, m->conf, m->port, "broker.log", &m->broker);
}

int
hi_pid_signal(pid_t *pidp, int sig)
{
	int status;

	if (*pidp <= 0)
		return 0;
	kill(*pidp, sig);
	for (int waited = 0; waited < STOP_WAIT_MS; waited += 20) {
		if (waitpid(*pidp, &status, WNOHANG) == *pidp) {
			hi_track(*pidp, false);
			*pidp = 0;
			return 0;
		}
		hi_sleep_ms(20);
	}
	kill(*pidp, SIGKILL);
	waitpid(*pidp, &status, 0);
	hi_track(*pidp, false);
	*pidp = 0;
	return -1;
}

static int
broker_signal(struct mesh *m, int sig)
{
	return hi_pid_signal(&m->broker, sig);
}

int
h_broker_stop(struct mesh *m)
{
	return broker_signal(m, SIGTERM);
}

int
h_broker_kill(struct mesh *m)
{
	return broker_signal(m, SIGKILL);
}

int
h_broker_restart(struct mesh *m)
{
	if (h_broker_stop(m) != 0)
		return -1;
	return h_broker_start(m);
}

/* ---- TLS ---- */

int
h_tls_make(struct mesh *m, const char *name, const char *sans, struct tls_files *t)
{
	char script[8 * H_PATH_MAX], out[H_OUT_MAX];
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", script, NULL };

	snprintf(t->dir, sizeof(t->dir), "%s/tls-%s", m->dir, name);
	snprintf(t->ca, sizeof(t->ca), "%s/ca.pem", t->dir);
	snprintf(t->cert, sizeof(t->cert), "%s/server.pem", t->dir);
	snprintf(t->key, sizeof(t->key), "%s/server.key", t->dir);
	/* P-256 keys; a CA with keyCertSign, a server certificate for sans. */
	snprintf(script, sizeof(script),
	    "set -e; mkdir -p '%s'; cd '%s'\n"
	    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout ca.key -out ca.pem -days 2 -subj '/CN=cotal test CA %s' "
	    "-addext basicConstraints=critical,CA:TRUE "
	    "-addext keyUsage=critical,keyCertSign,cRLSign\n"
	    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout server.key -out server.csr -subj '/CN=cotal test broker %s'\n"
	    "printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n"
	    "extendedKeyUsage=serverAuth\\n' > server.ext\n"
	    "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	    "-days 2 -extfile server.ext -out server.pem\n"
	    "chmod 600 ca.key server.key\n",
	    t->dir, t->dir, name, name, sans);
	if (hi_run_capture(m, argv, out, sizeof(out)) != 0) {
		fprintf(stderr, "✗ harness: making the TLS files %s failed:\n%s", t->dir, out);
		return -1;
	}
	return 0;
}

/* Copy the file from to the file to: 0, or -1. */
static int
copy_file(const char *from, const char *to)
{
	char buf[4096];
	size_t n;
	FILE *in = fopen(from, "r"), *out = in ? fopen(to, "w") : NULL;
	int rc = in != NULL && out != NULL ? 0 : -1;

	while (rc == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			rc = -1;
	if (in != NULL && ferror(in))
		rc = -1;
	if (out != NULL && fclose(out) != 0)
		rc = -1;
	if (in != NULL)
		fclose(in);
	return rc;
}

int
h_broker_tls(struct mesh *m, const struct tls_files *t, const char *extra)
{
	char plain[H_PATH_MAX + 16];
	FILE *f;

	/* The config as `cotal mesh init` wrote it, kept aside once. */
	snprintf(plain, sizeof(plain), "%s.plain", m->conf);
	if (access(plain, F_OK) != 0 ? copy_file(m->conf, plain) : copy_file(plain, m->conf))
		return -1;
	if (t != NULL) {
		if ((f = fopen(m->conf, "a")) == NULL)
			return -1;
		fprintf(f, "tls {\n  cert_file: \"%s\"\n  key_file: \"%s\"\n  timeout: 2\n}\n",
		    t->cert, t->key);
		fclose(f);
	}
	if (extra != NULL) {
		if ((f = fopen(m->conf, "a")) == NULL)
			return -1;
		fprintf(f, "%s\n", extra);
		fclose(f);
	}
	return h_broker_restart(m);
}
