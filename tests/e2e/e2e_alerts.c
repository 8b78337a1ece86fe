/*
 * Issue 43: "The alert rules are run (promtool, and a real Prometheus in
 * e2e) against a real healthy daemon (no alert fires) and against each
 * failure they name (it fires)." Debian's prometheus, started here on a
 * loopback port, scrapes the daemon's --metrics every second and evaluates
 * dist/prometheus/cotal-delivery.rules.yml every second: a copy in which
 * every `for:` is 1s (the rules' own wait for 1 to 5 minutes; nothing else
 * is changed, thresholds and windows included). The healthy daemon fires
 * nothing, pending included; then the test causes each failure and reads
 * /api/v1/alerts until the alert that names it fires:
 *
 *   CotalDeliveryCredentialExpiringSoon, CotalDeliveryCredentialExpiring
 *       a renewal of the delivery credential that lives 30 minutes,
 *       adopted by `cotal admin reload` (and cleared by a 2-day one);
 *   CotalDeliveryWorkerCrashLooping   the timer worker killed 4 times;
 *   CotalDeliveryCopiesLagging        2100 posts behind a stopped fan-out
 *                                     and reader (over 1000 left pending);
 *   CotalDeliveryEntriesGivenUp       an entry for an owner whose ACL row
 *                                     the test deleted (ten deliveries);
 *   CotalDeliveryLeaseLost            the lease row deleted (the re-check
 *                                     held 5 s by the test hook);
 *   CotalDeliveryLeaseRenewalFailing  the broker stalled (SIGSTOP) across a
 *                                     renewal's due time;
 *   CotalDeliveryMetricsStale         the supervisor stopped (SIGSTOP) for
 *                                     more than 30 s;
 *   CotalDeliveryTargetDown, CotalDeliveryNotServing
 *                                     the broker stopped: the daemon exits
 *                                     after its 15 s window.
 *
 * Skipped, saying so, when Debian's prometheus is not installed (make
 * deps installs it).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "tests/e2e/scrape.h"
#include "tests/harness/harness.h"

#define SPACE "malerts"
#define S "{space=\"" SPACE "\""
#define PROMETHEUS "/usr/bin/prometheus"
#define LAG_POSTS 2100
#define LAG_POSTERS 3

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };
static int mport, pport;
static char creds_path[H_PATH_MAX * 2];
static bool absent; /* no prometheus: every case skipped */
static struct scrape sc;

/* ---- Prometheus ---- */

/* dist/prometheus/cotal-delivery.rules.yml with every `for:` 1s. */
static int
rules_copy(const char *out)
{
	char line[4096];
	FILE *in = fopen(COTAL_DIST_DIR "/prometheus/cotal-delivery.rules.yml", "r"), *o;
	int changed = 0;

	if (in == NULL || (o = fopen(out, "w")) == NULL) {
		if (in != NULL)
			fclose(in);
		return -1;
	}
	while (fgets(line, sizeof(line), in) != NULL) {
		char *f = strstr(line, "for: ");
		if (f != NULL && strspn(line, " ") == (size_t)(f - line)) {
			fprintf(o, "%.*sfor: 1s\n", (int)(f - line), line);
			changed++;
		} else {
			fputs(line, o);
		}
	}
	fclose(in);
	fclose(o);
	printf("• the rules' copy: %d `for:` set to 1s\n", changed);
	return changed > 0 ? 0 : -1;
}

static int
prometheus_start(void)
{
	char rules[H_PATH_MAX * 2];

	snprintf(rules, sizeof(rules), "%s/cotal-delivery.rules.yml", mesh.dir);
	if (rules_copy(rules) != 0)
		return -1;
	return h_prometheus_start(PROMETHEUS, mesh.dir, mport, rules, &pport);
}

/* GET path from Prometheus as HTTP/1.0: the whole body, never chunked (an
 * answer over 2 KiB to HTTP/1.1 is). Its status. */
static int
prom_get(const char *path, char *body, size_t len)
{
	char req[4096];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);

	return h_http_exchange(pport, req, (size_t)n, body, len, NULL, 0);
}

/* The active alerts: how many, and "Name{state,role/consumer}" of each in
 * list. -1 when the API did not answer. */
static int
alerts(char *list, size_t len)
{
	static char body[H_HTTP_BODY_MAX];
	json_t *doc, *a;
	size_t i, used = 0;
	int n = 0;

	list[0] = '\0';
	if (prom_get("/api/v1/alerts", body, sizeof(body)) != 200 ||
	    (doc = json_loads(body, 0, NULL)) == NULL)
		return -1;
	json_array_foreach(json_object_get(json_object_get(doc, "data"), "alerts"), i, a) {
		json_t *l = json_object_get(a, "labels");
		const char *extra = json_string_value(json_object_get(l, "role"));
		if (extra == NULL)
			extra = json_string_value(json_object_get(l, "consumer"));
		if (extra == NULL)
			extra = json_string_value(json_object_get(l, "credential"));
		int k = snprintf(list + used, len - used, "%s%s{%s%s%s}", n > 0 ? ", " : "",
		    json_string_value(json_object_get(l, "alertname")),
		    json_string_value(json_object_get(a, "state")), extra ? "," : "",
		    extra ? extra : "");
		if (k > 0 && (size_t)k < len - used)
			used += (size_t)k;
		n++;
	}
	json_decref(doc);
	return n;
}

/* Wait up to ms for alert name to fire (and, when label is not NULL, with
 * label="value"): true once it does. Prints what was active then. */
static bool
fires(const char *name, const char *label, const char *value, int ms)
{
	static char body[H_HTTP_BODY_MAX];
	char list[4096];

	for (int64_t end = mono_ms() + ms; mono_ms() < end; h_nap(250)) {
		json_t *doc, *a;
		size_t i;
		bool found = false;
		if (prom_get("/api/v1/alerts", body, sizeof(body)) != 200 ||
		    (doc = json_loads(body, 0, NULL)) == NULL)
			continue;
		json_array_foreach(json_object_get(json_object_get(doc, "data"), "alerts"), i, a) {
			json_t *l = json_object_get(a, "labels");
			const char *n = json_string_value(json_object_get(l, "alertname"));
			const char *st = json_string_value(json_object_get(a, "state"));
			const char *v = label ? json_string_value(json_object_get(l, label)) : NULL;
			if (n != NULL && strcmp(n, name) == 0 && st != NULL && strcmp(st, "firing") == 0 &&
			    (label == NULL || (v != NULL && strcmp(v, value) == 0)))
				found = true;
		}
		json_decref(doc);
		if (found) {
			alerts(list, sizeof(list));
			printf("  ✓ %s fires (active: %s)\n", name, list);
			return true;
		}
	}
	alerts(list, sizeof(list));
	printf("  ✗ %s did not fire within %d ms (active: %s)\n", name, ms, list);
	return false;
}

/* Wait up to ms for alert name to be neither pending nor firing. */
static bool
clears(const char *name, int ms)
{
	char list[4096];

	for (int64_t end = mono_ms() + ms; mono_ms() < end; h_nap(250))
		if (alerts(list, sizeof(list)) >= 0 && strstr(list, name) == NULL) {
			printf("  ✓ %s cleared (active: %s)\n", name, list[0] ? list : "none");
			return true;
		}
	return false;
}

/* An instant query's first value; -1 on none. */
static double
query1(const char *promql)
{
	static char body[H_HTTP_BODY_MAX];
	char path[2048], enc[1536];
	size_t o = 0;
	double v = -1;

	for (const char *p = promql; *p != '\0' && o + 4 < sizeof(enc); p++) {
		unsigned char c = (unsigned char)*p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-' || c == '.')
			enc[o++] = (char)c;
		else
			o += (size_t)snprintf(enc + o, sizeof(enc) - o, "%%%02X", c);
	}
	enc[o] = '\0';
	snprintf(path, sizeof(path), "/api/v1/query?query=%s", enc);
	if (prom_get(path, body, sizeof(body)) != 200)
		return -1;
	json_t *doc = json_loads(body, 0, NULL);
	json_t *r0 = json_array_get(json_object_get(json_object_get(doc, "data"), "result"), 0);
	if (r0 != NULL)
		v = strtod(json_string_value(json_array_get(json_object_get(r0, "value"), 1)), NULL);
	json_decref(doc);
	return v;
}

/* ---- the group ---- */

static int
setup(void **state)
{
	*state = &fx;
	if (access(PROMETHEUS, X_OK) != 0) {
		printf("• skipped: %s is not installed (Debian's prometheus package; make deps "
		    "installs it)\n", PROMETHEUS);
		absent = true;
		return 0;
	}
	if (h_mesh_prov_up(&mesh, SPACE, &prov) != 0)
		return -1;
	/* Two days: past CotalDeliveryCredentialExpiringSoon's 24 hours. */
	if (h_mint(&mesh, "delivery", "delivery-2d.creds", "--expires", "172800", creds_path,
	    sizeof(creds_path)) != 0)
		return -1;
	setenv("COTAL_TEST_RECHECK_HOLD_MS", "5000", 1);
	setenv("COTAL_TEST_RESTART_MAX_MS", "500", 1);
	int rc = h_metrics_daemon_start(&mesh, &dmn, creds_path, &mport);
	unsetenv("COTAL_TEST_RECHECK_HOLD_MS");
	unsetenv("COTAL_TEST_RESTART_MAX_MS");
	if (rc != 0 || h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound",
	    "metrics server (pid", "delivery daemon up", NULL) != 0)
		return -1;
	return prometheus_start();
}

static int
teardown(void **state)
{
	if (absent)
		return 0;
	return h_teardown(state);
}

#define NEED_PROMETHEUS() \
	do { \
		(void)state; \
		if (absent) \
			skip(); \
	} while (0)

/*
 * The healthy daemon: once Prometheus has scraped it serving for 15 s,
 * 20 evaluations in a row show no alert at all, pending or firing, and
 * the ALERTS series has no sample over that time.
 */
static void
test_a_healthy_daemon_fires_nothing(void **state)
{
	char list[4096];

	NEED_PROMETHEUS();
	double n = -1;
	for (int64_t end = mono_ms() + 60000; n < 15 && mono_ms() < end; h_nap(500))
		n = query1("count_over_time(cotal_delivery_serving{space=\"" SPACE "\"}[15s]) and "
		    "min_over_time(cotal_delivery_serving{space=\"" SPACE "\"}[15s]) == 1");
	assert_true(n >= 15);
	for (int i = 0; i < 20; i++, h_nap(1000)) {
		int k = alerts(list, sizeof(list));
		if (k != 0)
			fail_msg("a healthy daemon: %d alerts active: %s", k, list);
	}
	assert_true(query1("count(max_over_time(ALERTS[30s]))") == -1);
	/* And the rules ran: each evaluated without error, inactive. */
	static char body[H_HTTP_BODY_MAX];
	json_t *doc, *g, *r;
	size_t i, j;
	int ok = 0, rules = 0;
	assert_int_equal(prom_get("/api/v1/rules", body, sizeof(body)), 200);
	assert_non_null(doc = json_loads(body, 0, NULL));
	json_array_foreach(json_object_get(json_object_get(doc, "data"), "groups"), i, g)
		json_array_foreach(json_object_get(g, "rules"), j, r) {
			const char *h = json_string_value(json_object_get(r, "health"));
			const char *st = json_string_value(json_object_get(r, "state"));
			rules++;
			ok += h != NULL && strcmp(h, "ok") == 0 && st != NULL && strcmp(st, "inactive") == 0;
		}
	json_decref(doc);
	printf("• healthy: 20 evaluations, no alert; %d of the %d rules evaluated ok and "
	    "inactive\n", ok, rules);
	assert_int_equal(rules, 10);
	assert_int_equal(ok, rules);
}

/* Renew the delivery credential in place to live secs, and have the
 * daemon adopt it (`cotal admin reload`). */
static void
renew_to(const char *secs)
{
	static char out[H_OUT_MAX];

	if (h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", SPACE, "--profile",
	    "delivery", "--out", creds_path, "--renew", "--expires", secs, NULL) != 0 ||
	    h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", SPACE, NULL) != 0)
		fail_msg("renew and reload: %s", out);
}

static void
test_a_credential_expiring_fires_both_expiry_alerts(void **state)
{
	NEED_PROMETHEUS();
	scrape_get(mport, &sc);
	double a0 = scrape_value(&sc, "cotal_delivery_credential_reloads_total" S
	    ",outcome=\"adopted\"}");
	renew_to("1800");
	printf("• the delivery credential renewed to live 30 minutes (adopted: %g before)\n", a0);
	assert_true(fires("CotalDeliveryCredentialExpiringSoon", "credential", "delivery", 20000));
	assert_true(fires("CotalDeliveryCredentialExpiring", "credential", "delivery", 20000));
	renew_to("172800");
	printf("• renewed again to live 2 days\n");
	assert_true(clears("CotalDeliveryCredentialExpiring", 20000));
	assert_true(clears("CotalDeliveryCredentialExpiringSoon", 20000));
}

/* The timer worker killed four times, each time once it is back. */
static void
test_a_worker_killed_four_times_fires_crash_looping(void **state)
{
	NEED_PROMETHEUS();
	for (int i = 0; i < 4; i++) {
		pid_t pid = 0;
		for (int64_t end = mono_ms() + 30000; pid <= 0 && mono_ms() < end; h_nap(100))
			pid = h_daemon_worker_pid(&dmn, "timer");
		assert_true(pid > 0);
		assert_int_equal(kill(pid, SIGKILL), 0);
		for (int64_t end = mono_ms() + 30000; mono_ms() < end; h_nap(100)) {
			pid_t now = h_daemon_worker_pid(&dmn, "timer");
			if (now > 0 && now != pid)
				break;
		}
	}
	printf("• the timer worker killed 4 times\n");
	assert_true(fires("CotalDeliveryWorkerCrashLooping", "role", "timer", 30000));
}


/*
 * LAG_POSTS posts (from LAG_POSTERS agents: CHAT keeps 1000 a subject, and
 * a subject is one poster's on one channel) published while the fan-out
 * and the reader are stopped; the fan-out resumes alone and waits at its
 * lead (640 posts) with more than 1000 still pending:
 * CotalDeliveryCopiesLagging fires for the fanout consumer. The reader
 * resumed, it all drains and the alert clears.
 */
static void
test_a_backlog_past_1000_fires_copies_lagging(void **state)
{
	struct member m, posters[LAG_POSTERS];
	char id[32], name[32];
	int posted = 0;

	NEED_PROMETHEUS();
	h_member_up(&mesh, &prov, &m, "lagm", "lag", true);
	for (int p = 0; p < LAG_POSTERS; p++) {
		snprintf(name, sizeof(name), "lagp%d", p);
		h_member_up(&mesh, &prov, &posters[p], name, "lag", false);
	}
	pid_t fanout = h_daemon_worker_pid(&dmn, "fanout"), reader = h_daemon_worker_pid(&dmn,
	    "reader");
	assert_true(fanout > 0 && reader > 0);
	assert_int_equal(kill(reader, SIGSTOP), 0);
	assert_int_equal(kill(fanout, SIGSTOP), 0);
	for (; posted < LAG_POSTS; posted++) {
		struct member *p = &posters[posted % LAG_POSTERS];
		snprintf(id, sizeof(id), "l-%d", posted);
		if (h_post(&p->c, &mesh, &p->a, "lag", id, "x", NULL) != 0)
			break;
	}
	kill(fanout, SIGCONT);
	if (posted < LAG_POSTS) {
		kill(reader, SIGCONT);
		fail_msg("post %d of %d refused", posted + 1, LAG_POSTS);
	}
	printf("• %d posts from %d agents behind a stopped reader\n", LAG_POSTS, LAG_POSTERS);
	bool fired = fires("CotalDeliveryCopiesLagging", "consumer", "fanout", 30000);
	kill(reader, SIGCONT);
	assert_true(fired);
	assert_true(clears("CotalDeliveryCopiesLagging", 60000));
	h_close(&m.c);
	for (int p = 0; p < LAG_POSTERS; p++)
		h_close(&posters[p].c);
}

/* An entry for a member whose ACL row the test deleted: given up after
 * ten deliveries two seconds apart. */
static void
test_an_entry_given_up_fires_entries_given_up(void **state)
{
	struct member a, b;
	char bucket[256], key[256];
	kvStore *kv = NULL;

	NEED_PROMETHEUS();
	h_member_up(&mesh, &prov, &a, "miss-a", "missing", false);
	h_member_up(&mesh, &prov, &b, "miss-b", "missing", true);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", mesh.token);
	snprintf(key, sizeof(key), "%s.%s.%s", b.a.owner, b.a.actor, b.a.uid);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	assert_int_equal(kvStore_Delete(kv, key), NATS_OK);
	kvStore_Destroy(kv);
	assert_int_equal(h_post(&a.c, &mesh, &a.a, "missing", "m-1", "to nobody known", NULL), 0);
	printf("• a post to a member without an ACL row\n");
	assert_true(fires("CotalDeliveryEntriesGivenUp", NULL, NULL, 90000));
	h_close(&a.c);
	h_close(&b.c);
}

/* The lease row deleted: the daemon re-checks (held 5 s), serving 0. */
static void
test_the_lease_row_deleted_fires_lease_lost(void **state)
{
	char err[512];

	NEED_PROMETHEUS();
	if (h_kv_del(&prov, &mesh, "delivery", "lease.0", err, sizeof(err)) != 0)
		fail_msg("delete the lease row: %s", err);
	printf("• the lease row deleted\n");
	assert_true(fires("CotalDeliveryLeaseLost", NULL, NULL, 20000));
	assert_true(h_log_has(dmn.log, "claimed it again", 20000));
	assert_true(clears("CotalDeliveryLeaseLost", 30000));
}

/*
 * The broker stalled from just before the lease's next renewal (the row's
 * write + 15 s) to 3.5 s after it, past the renewal's 3 s wait: the
 * renewal fails. (When a ping noticed the stall first, no renewal is
 * tried: the stall is repeated at the next renewal, up to three times.)
 */
static void
test_a_broker_stalled_across_a_renewal_fires_renewal_failing(void **state)
{
	char bucket[256];
	kvStore *kv = NULL;
	bool fired = false;

	NEED_PROMETHEUS();
	snprintf(bucket, sizeof(bucket), "cotal_delivery_%s", mesh.token);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	for (int tries = 0; !fired && tries < 3; tries++) {
		kvEntry *e = NULL;
		for (int64_t end = mono_ms() + 30000; mono_ms() < end; h_nap(200))
			if (scrape_get(mport, &sc) == 0 &&
			    scrape_value(&sc, "cotal_delivery_serving" S "}") == 1)
				break;
		assert_int_equal(kvStore_Get(&e, kv, "lease.0"), NATS_OK);
		double due = (double)kvEntry_Created(e) / 1e9 + 15.0;
		kvEntry_Destroy(e);
		if (due - wall_s() < 1.0) {
			h_nap(2000);
			continue;
		}
		h_nap((int)((due - wall_s() - 0.4) * 1000));
		assert_int_equal(kill(mesh.broker, SIGSTOP), 0);
		h_nap((int)((due + 3.5 - wall_s()) * 1000));
		assert_int_equal(kill(mesh.broker, SIGCONT), 0);
		printf("• the broker stalled across the renewal due at %.3f\n", due);
		fired = fires("CotalDeliveryLeaseRenewalFailing", NULL, NULL, 15000);
	}
	kvStore_Destroy(kv);
	assert_true(fired);
}

/* The supervisor stopped (SIGSTOP): its metrics server answers with the
 * last snapshot, older and older. */
static void
test_a_stopped_supervisor_fires_metrics_stale(void **state)
{
	NEED_PROMETHEUS();
	assert_int_equal(kill(dmn.pid, SIGSTOP), 0);
	printf("• the supervisor stopped\n");
	bool fired = fires("CotalDeliveryMetricsStale", NULL, NULL, 60000);
	kill(dmn.pid, SIGCONT);
	assert_true(fired);
	assert_true(clears("CotalDeliveryMetricsStale", 30000));
	/* It serves again (its lease may have lapsed meanwhile: claimed again). */
	for (int64_t end = mono_ms() + 40000; mono_ms() < end; h_nap(250))
		if (scrape_get(mport, &sc) == 0 && scrape_value(&sc, "cotal_delivery_serving" S "}") == 1)
			break;
	assert_true(scrape_value(&sc, "cotal_delivery_serving" S "}") == 1);
}

/* The broker stopped: the daemon exits after its 15 s window, and its
 * target goes down with the space unserved. */
static void
test_the_broker_stopped_fires_target_down_and_not_serving(void **state)
{
	NEED_PROMETHEUS();
	assert_int_equal(h_broker_stop(&mesh), 0);
	printf("• the broker stopped\n");
	bool down = fires("CotalDeliveryTargetDown", NULL, NULL, 60000);
	bool unserved = fires("CotalDeliveryNotServing", NULL, NULL, 30000);
	int st = h_daemon_wait_exit(&dmn, 5000);
	h_broker_start(&mesh);
	printf("• the daemon exited (wait status %d)\n", st);
	assert_true(down && unserved);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_healthy_daemon_fires_nothing),
		cmocka_unit_test(test_a_credential_expiring_fires_both_expiry_alerts),
		cmocka_unit_test(test_a_worker_killed_four_times_fires_crash_looping),
		cmocka_unit_test(test_a_backlog_past_1000_fires_copies_lagging),
		cmocka_unit_test(test_an_entry_given_up_fires_entries_given_up),
		cmocka_unit_test(test_the_lease_row_deleted_fires_lease_lost),
		cmocka_unit_test(test_a_broker_stalled_across_a_renewal_fires_renewal_failing),
		cmocka_unit_test(test_a_stopped_supervisor_fires_metrics_stale),
		cmocka_unit_test(test_the_broker_stopped_fires_target_down_and_not_serving),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
