/*
 * Issue 43: "a test for the value of every metric family: the e2e metrics
 * test computes each from ground truth it controls [...] and checks the
 * exporter's number within a stated tolerance." This suite takes the
 * daemon's own state and its broker: the build's version, the wall clock
 * around a scrape, the lease row's revisions and times, a standby, a
 * broker stalled across a renewal and one restarted, credentials adopted
 * and refused, each process's memory and CPU time against /proc, and the
 * reader's verdicts on entries the test makes undeliverable. e2e_metrics_flow does the data path and the rails;
 * e2e_metrics the copies seen through Prometheus, the credential expiry
 * against its JWT, the lease gauge against the row, a killed worker's
 * restarts. Every check prints what it compared and its tolerance; none
 * asserts how long anything took.
 */
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
#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/version.h"
#include "tests/e2e/scrape.h"
#include "tests/harness/harness.h"

#define SPACE "mvalues"
#define S "{space=\"" SPACE "\""

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };
static int mport;
static char creds_path[H_PATH_MAX * 2];
static struct scrape sc, sc2;

static int
setup(void **state)
{
	*state = &fx;
	if (h_mesh_prov_up(&mesh, SPACE, &prov) != 0)
		return -1;
	if (h_mint(&mesh, "delivery", "delivery-2d.creds", "--expires", "172800", creds_path,
	    sizeof(creds_path)) != 0)
		return -1;
	setenv("COTAL_TEST_RECHECK_HOLD_MS", "2000", 1);
	int rc = h_metrics_daemon_start(&mesh, &dmn, creds_path, &mport);
	unsetenv("COTAL_TEST_RECHECK_HOLD_MS");
	if (rc != 0 || h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound",
	    "metrics server (pid", "delivery daemon up", NULL) != 0)
		return -1;
	return 0;
}

/* Scrape port into s, retried for up to 10 s (503 before a first snapshot). */
static void
scrape_at(int port, struct scrape *s)
{
	for (int64_t end = mono_ms() + 10000; scrape_get(port, s) != 0; h_nap(100))
		if (mono_ms() > end)
			fail_msg("no scrape of 127.0.0.1:%d within 10 s", port);
}


/* The scrape's snapshot time (Unix seconds). */
static double
snap(const struct scrape *s)
{
	return scrape_need(s, "cotal_delivery_snapshot_timestamp_seconds" S "}");
}

/* Scrape until the sample series has the value want (up to ms): the last value. */
static double
until(int port, struct scrape *s, const char *series, double want, int ms)
{
	double v = NAN;

	for (int64_t end = mono_ms() + ms; mono_ms() < end; h_nap(100)) {
		if (scrape_get(port, s) == 0 && (v = scrape_value(s, series)) == want)
			break;
	}
	return v;
}

/*
 * build_info's version is the daemon's: the version word `cotal-deliveryd
 * --version` prints, which is lib/version's cotal_version() before its
 * " (commit …)" (exact). The snapshot's time lies between the wall clock
 * 3 s before the GET (a snapshot a second, 2 s for a loaded machine) and
 * the wall clock after it (never ahead: 1 ms of rounding). serving 1 and
 * standby 0 on the daemon that holds the lease; broker_server_info's
 * server is the URL of the broker this test started (exact); every
 * connection and worker up (1); and nothing failed that the test did not
 * cause: no renewal failure, reconnect or reload (0, exact).
 */
static void
test_version_clock_state_and_broker_of_a_healthy_daemon(void **state)
{
	char cmd[H_PATH_MAX + 32], line[256] = "", want[128], series[256];
	FILE *p;

	(void)state;
	snprintf(cmd, sizeof(cmd), "%s --version", COTAL_DAEMON_PATH);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	char *word = strchr(line, ' ');
	assert_non_null(word);
	word++;
	word[strcspn(word, " \n")] = '\0';
	assert_int_equal(strncmp(cotal_version(), word, strlen(word)), 0);
	snprintf(series, sizeof(series), "cotal_delivery_build_info" S ",version=\"%s\"}", word);
	scrape_at(mport, &sc);
	printf("• build_info version \"%s\" (--version: %s): %g\n", word, line + 0,
	    scrape_value(&sc, series));
	assert_true(scrape_need(&sc, series) == 1);

	double ts = snap(&sc);
	printf("• snapshot %.3f within [%.3f - 3 s, %.3f + 1 ms] of the GET\n", ts, sc.before,
	    sc.after);
	assert_true(ts >= sc.before - 3.0 && ts <= sc.after + 0.001);

	assert_true(scrape_need(&sc, "cotal_delivery_serving" S "}") == 1);
	assert_true(scrape_need(&sc, "cotal_delivery_standby" S "}") == 0);

	snprintf(want, sizeof(want), "nats://127.0.0.1:%d", mesh.port);
	snprintf(series, sizeof(series), "cotal_delivery_broker_server_info" S ",server=\"%s\"}",
	    want);
	printf("• broker_server_info{server=\"%s\"}: %g (the broker started on port %d)\n", want,
	    scrape_value(&sc, series), mesh.port);
	assert_true(scrape_need(&sc, series) == 1);

	static const char *const conns[] = { "resident", "fanout", "reader", "registry", "timer" };
	for (size_t i = 0; i < 5; i++) {
		snprintf(series, sizeof(series), "cotal_delivery_broker_connected" S
		    ",connection=\"%s\"}", conns[i]);
		assert_true(scrape_need(&sc, series) == 1);
		if (i == 0)
			continue;
		snprintf(series, sizeof(series), "cotal_delivery_worker_up" S ",role=\"%s\"}",
		    conns[i]);
		assert_true(scrape_need(&sc, series) == 1);
		assert_true(h_daemon_worker_pid(&dmn, conns[i]) > 0);
	}
	assert_true(scrape_need(&sc, "cotal_delivery_lease_renewal_failures_total" S "}") == 0);
	assert_true(scrape_need(&sc, "cotal_delivery_broker_reconnects_total" S "}") == 0);
	assert_true(scrape_need(&sc, "cotal_delivery_credential_reloads_total" S ",outcome=\"adopted\"}") ==
	    0);
	assert_true(scrape_need(&sc, "cotal_delivery_credential_reloads_total" S ",outcome=\"refused\"}") ==
	    0);
}

/* ---- the lease row ---- */

static kvStore *
lease_bucket(void)
{
	char bucket[256];
	kvStore *kv = NULL;

	snprintf(bucket, sizeof(bucket), "cotal_delivery_%s", mesh.token);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	return kv;
}

/* The lease row's revision and when the broker stored it (Unix s). */
static uint64_t
lease_row(kvStore *kv, double *at)
{
	kvEntry *e = NULL;

	if (kvStore_Get(&e, kv, "lease.0") != NATS_OK)
		return 0;
	uint64_t rev = kvEntry_Revision(e);
	*at = (double)kvEntry_Created(e) / 1e9;
	kvEntry_Destroy(e);
	return rev;
}

#define WRITES_MAX 16

/*
 * renewals_total against the lease row's revisions: a watch of the row
 * sees every write of it; between two scrapes the counter grows by the
 * writes the broker stored between their snapshots (exact). A scrape is
 * taken where no write is within 1 s of its snapshot (the supervisor
 * counts a renewal once the broker has answered), and retaken otherwise.
 * renewal_failures_total stays 0 meanwhile (exact).
 */
static void
test_renewals_are_the_writes_of_the_lease_row(void **state)
{
	kvStore *kv = lease_bucket();
	kvWatcher *w = NULL;
	double writes[WRITES_MAX];
	int nw = 0;

	(void)state;
	assert_int_equal(kvStore_Watch(&w, kv, "lease.0", NULL), NATS_OK);
	/* Scrape A, then two more writes, then scrape B, each scrape away
	 * from any write. */
	double a = 0, b = 0, ra = 0, rb = 0, t = 0, r = 0;
	int phase = 0;
	bool pending = false;
	for (int64_t end = mono_ms() + 80000; phase < 2 && mono_ms() < end;) {
		kvEntry *e = NULL;
		if (kvWatcher_Next(&e, w, 200) == NATS_OK && e != NULL) {
			if (nw < WRITES_MAX)
				writes[nw++] = (double)kvEntry_Created(e) / 1e9;
			kvEntry_Destroy(e);
			continue;
		}
		if (!pending) {
			/* B once the row was written twice after A (by the
			 * broker's times: a watch may hand a write over late). */
			int after_a = 0;
			for (int i = 0; i < nw; i++)
				after_a += phase == 1 && writes[i] > a;
			if (nw == 0 || (phase == 1 && after_a < 2))
				continue;
			scrape_at(mport, &sc2);
			t = snap(&sc2);
			r = scrape_need(&sc2, "cotal_delivery_lease_renewals_total" S "}");
			pending = true;
			continue;
		}
		/* A write in the 1 s after the snapshot has reached the
		 * watch by then. */
		if (wall_s() < t + 2.0)
			continue;
		pending = false;
		bool clear = true;
		for (int i = 0; i < nw; i++)
			if (writes[i] > t - 1.0 && writes[i] < t + 1.0)
				clear = false;
		if (!clear)
			continue;
		if (phase++ == 0)
			a = t, ra = r;
		else
			b = t, rb = r;
	}
	kvWatcher_Destroy(w);
	kvStore_Destroy(kv);
	assert_int_equal(phase, 2);
	int between = 0;
	for (int i = 0; i < nw; i++)
		between += writes[i] > a && writes[i] < b;
	printf("• the lease row written %d times between snapshots %.3f and %.3f; "
	    "renewals_total %.0f -> %.0f (+%.0f; tolerance 0)\n", between, a, b, ra, rb, rb - ra);
	assert_true(between >= 2);
	assert_true(rb - ra == between);
	assert_true(scrape_need(&sc2, "cotal_delivery_lease_renewal_failures_total" S "}") == 0);
}

/*
 * A second daemon started with --standby while this one holds the lease:
 * its standby is 1 and serving 0, it renewed nothing and has no
 * seconds-since-renewal; the holder says serving 1, standby 0 (exact).
 */
static void
test_a_standby_says_standby_and_the_holder_serving(void **state)
{
	char addr[64], out[H_PATH_MAX * 2], log[H_PATH_MAX * 2];
	int port = h_free_port();

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	snprintf(out, sizeof(out), "%s/standby.out", mesh.dir);
	pid_t sb = h_daemon_spawn(&mesh, out, "--space", SPACE, "--root", mesh.dir, "--creds",
	    creds_path, "--metrics", addr, "--standby", NULL);
	assert_true(sb > 0);
	double v = until(port, &sc2, "cotal_delivery_standby" S "}", 1, 20000);
	printf("• the --standby daemon: standby %g, serving %g, renewals %g\n", v,
	    scrape_value(&sc2, "cotal_delivery_serving" S "}"),
	    scrape_value(&sc2, "cotal_delivery_lease_renewals_total" S "}"));
	if (v != 1) {
		snprintf(log, sizeof(log), "%s", out);
		h_log_print_tail(log, 20);
	}
	assert_true(v == 1);
	assert_true(scrape_need(&sc2, "cotal_delivery_serving" S "}") == 0);
	assert_true(scrape_need(&sc2, "cotal_delivery_lease_renewals_total" S "}") == 0);
	assert_false(scrape_has(&sc2, "cotal_delivery_lease_seconds_since_renewal{"));
	scrape_at(mport, &sc);
	assert_true(scrape_need(&sc, "cotal_delivery_serving" S "}") == 1);
	assert_true(scrape_need(&sc, "cotal_delivery_standby" S "}") == 0);
	kill(sb, SIGTERM);
	for (int i = 0; i < 100 && kill(sb, 0) == 0; i++)
		h_nap(100);
	/* Still the holder's. */
	assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 5000) == 1);
}

/*
 * serving is 0 while the daemon re-checks its lease: the test deletes the
 * row (the re-check held 2 s by the test hook); a scrape shows serving 0
 * and then, once the daemon claimed it again, 1 (exact).
 */
static void
test_serving_is_0_while_the_lease_is_rechecked(void **state)
{
	char err[512];

	(void)state;
	assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 5000) == 1);
	if (h_kv_del(&prov, &mesh, "delivery", "lease.0", err, sizeof(err)) != 0)
		fail_msg("delete the lease row: %s", err);
	double v = until(mport, &sc, "cotal_delivery_serving" S "}", 0, 10000);
	printf("• lease row deleted: serving %g while re-checking\n", v);
	assert_true(v == 0);
	assert_true(scrape_need(&sc, "cotal_delivery_standby" S "}") == 0);
	assert_true(h_log_has(dmn.log, "claimed it again", 20000));
	assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 10000) == 1);
}

/*
 * The broker stalled (SIGSTOP) from just before the lease's next renewal,
 * as the row's own time says it falls due (its write + 15 s), to 3.5 s
 * after it, past the renewal's 3 s wait: renewal_failures_total grows by 1
 * (exact) and broker_reconnects_total does not (the connection outlived
 * the stall; when a ping noticed it first, the renewal is not tried and
 * the stall is repeated at the next renewal, up to three times).
 */
static void
test_a_broker_stalled_across_a_renewal_counts_one_failure(void **state)
{
	kvStore *kv = lease_bucket();
	double f0, f1 = -1, r0, r1 = -1;
	int tries = 0;

	(void)state;
	for (; tries < 3; tries++) {
		double at = 0;
		assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 20000) == 1);
		f0 = scrape_need(&sc, "cotal_delivery_lease_renewal_failures_total" S "}");
		r0 = scrape_need(&sc, "cotal_delivery_broker_reconnects_total" S "}");
		uint64_t rev = lease_row(kv, &at);
		assert_true(rev > 0);
		double due = at + 15.0;
		if (due - wall_s() < 1.0)
			continue; /* too close: the next one */
		h_nap((int)((due - wall_s() - 0.4) * 1000));
		assert_int_equal(kill(mesh.broker, SIGSTOP), 0);
		double stopped = wall_s();
		h_nap((int)((due + 3.5 - wall_s()) * 1000));
		assert_int_equal(kill(mesh.broker, SIGCONT), 0);
		printf("• broker stalled from %.3f to %.3f; the renewal was due at %.3f\n", stopped,
		    wall_s(), due);
		assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 30000) == 1);
		f1 = scrape_need(&sc, "cotal_delivery_lease_renewal_failures_total" S "}");
		r1 = scrape_need(&sc, "cotal_delivery_broker_reconnects_total" S "}");
		if (r1 == r0)
			break;
		printf("  the connection was lost meanwhile (reconnects %.0f -> %.0f): again\n", r0,
		    r1);
	}
	kvStore_Destroy(kv);
	printf("• renewal_failures_total %.0f -> %.0f (+1 expected; tolerance 0), reconnects "
	    "%.0f -> %.0f\n", f0, f1, r0, r1);
	assert_true(tries < 3);
	assert_true(f1 == f0 + 1);
}

/*
 * The broker stopped (SIGTERM) and started again on its port: while it is
 * down a scrape shows the resident connection 0; once it is back the
 * connection is 1 again and broker_reconnects_total grew by 1 (exact).
 */
static void
test_a_broker_restart_counts_one_reconnect(void **state)
{
	(void)state;
	scrape_at(mport, &sc);
	double r0 = scrape_need(&sc, "cotal_delivery_broker_reconnects_total" S "}");
	assert_int_equal(h_broker_stop(&mesh), 0);
	double down = until(mport, &sc, "cotal_delivery_broker_connected" S
	    ",connection=\"resident\"}", 0, 5000);
	assert_int_equal(h_broker_start(&mesh), 0);
	printf("• broker stopped: resident connection %g\n", down);
	assert_true(down == 0);
	double up = until(mport, &sc, "cotal_delivery_broker_connected" S
	    ",connection=\"resident\"}", 1, 20000);
	double r1 = until(mport, &sc, "cotal_delivery_broker_reconnects_total" S "}", r0 + 1, 5000);
	printf("• broker back: resident connection %g; reconnects %.0f -> %.0f (+1; tolerance 0)\n",
	    up, r0, r1);
	assert_true(up == 1);
	assert_true(r1 == r0 + 1);
	/* Let the rest settle: the workers reconnect too; the test's own
	 * provisioner connection is made again (the harness's does not
	 * reconnect). */
	assert_true(until(mport, &sc, "cotal_delivery_serving" S "}", 1, 30000) == 1);
	assert_int_equal(h_daemon_wait_connected(&dmn, 30000), 0);
	char err[1024];
	h_close(&prov);
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0)
		fail_msg("provisioner: %s", err);
}

/* `cotal admin reload` once; its output. */
static void
admin_reload(char *out, size_t len)
{
	h_cotal(&mesh, out, len, "admin", "reload", "--space", SPACE, NULL);
}

/* The JWT's exp of a creds file. */
static int64_t
exp_of(const char *path)
{
	struct creds c;
	struct jwt j;
	char err[512];

	assert_int_equal(creds_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(jwt_decode(c.jwt, strlen(c.jwt), &j, err, sizeof(err)), 0);
	int64_t exp = j.exp;
	jwt_free(&j);
	creds_free(&c);
	return exp;
}

/*
 * credential_reloads_total: the test renews the credential in place (the
 * same user, a new JWT) and asks `cotal admin reload`: adopted +1; then
 * puts another user's credential in the file and asks again: refused +1
 * (each exact). The expiry gauge then says the renewed JWT's exp (plus the
 * snapshot's time: to 2 ms).
 */
static void
test_reloads_count_adopted_and_refused(void **state)
{
	static char out[H_OUT_MAX];
	char path[H_PATH_MAX * 2], other[H_PATH_MAX * 2];

	(void)state;
	scrape_at(mport, &sc);
	double a0 = scrape_need(&sc, "cotal_delivery_credential_reloads_total" S ",outcome=\"adopted\"}");
	double f0 = scrape_need(&sc, "cotal_delivery_credential_reloads_total" S ",outcome=\"refused\"}");
	/* Renewed: 3 days, the same user key. */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", SPACE,
	    "--profile", "delivery", "--out", creds_path, "--renew", "--expires", "259200",
	    NULL), 0);
	int64_t exp = exp_of(creds_path);
	admin_reload(out, sizeof(out));
	double a1 = until(mport, &sc, "cotal_delivery_credential_reloads_total" S
	    ",outcome=\"adopted\"}", a0 + 1, 10000);
	printf("• renewed and reloaded: adopted %.0f -> %.0f (+1; tolerance 0)\n%s", a0, a1, out);
	assert_true(a1 == a0 + 1);
	/* The gauge plus its snapshot's time is the renewed JWT's exp, to 2 ms. */
	double e = NAN, t = 0;
	for (int64_t end = mono_ms() + 10000; mono_ms() < end; h_nap(200)) {
		scrape_at(mport, &sc);
		e = scrape_value_prefix(&sc, "cotal_delivery_credential_expiry_seconds" S
		    ",credential=\"delivery\",");
		t = snap(&sc);
		if (fabs(e + t - (double)exp) < 0.002)
			break;
	}
	printf("• the renewed JWT expires at %lld; the gauge plus its snapshot's time: %.3f "
	    "(tolerance 2 ms)\n", (long long)exp, e + t);
	assert_true(fabs(e + t - (double)exp) < 0.002);
	/* Another user's credential in the file: refused (the identity is pinned). */
	assert_int_equal(h_mint(&mesh, "delivery", "other.creds", "--expires", "259200", other,
	    sizeof(other)), 0);
	snprintf(path, sizeof(path), "%s.renewed", creds_path);
	assert_int_equal(rename(creds_path, path), 0);
	assert_int_equal(rename(other, creds_path), 0);
	admin_reload(out, sizeof(out));
	double f1 = until(mport, &sc, "cotal_delivery_credential_reloads_total" S
	    ",outcome=\"refused\"}", f0 + 1, 10000);
	assert_int_equal(rename(path, creds_path), 0);
	printf("• another user's credential reloaded: refused %.0f -> %.0f (+1; tolerance 0)\n%s",
	    f0, f1, out);
	assert_true(f1 == f0 + 1);
	assert_true(scrape_need(&sc, "cotal_delivery_credential_reloads_total" S ",outcome=\"adopted\"}") ==
	    a0 + 1);
}

/* ---- the processes ---- */

/*
 * Each process's resident memory and CPU time against /proc, read before
 * and after a scrape: the memory within 25 % + 4 MiB of what /proc said
 * (a snapshot is up to a second old; the supervisor reads /proc/<pid>/stat
 * itself); the CPU time no more than /proc says after the scrape (+10 ms
 * of rounding) and no less than before it, less what the process could
 * have used since the snapshot on every core.
 */
static void
test_process_memory_and_cpu_are_the_processes_own(void **state)
{
	static const char *const roles[] = { "supervisor", "fanout", "reader", "registry", "timer" };
	long hz = sysconf(_SC_CLK_TCK), cores = sysconf(_SC_NPROCESSORS_ONLN);
	long page = sysconf(_SC_PAGESIZE);

	(void)state;
	for (int r = 0; r < 5; r++) {
		pid_t pid = r == 0 ? dmn.pid : h_daemon_worker_pid(&dmn, roles[r]);
		char series[256], path[64];
		long pages0 = 0, pages1 = 0, dummy;
		FILE *f;
		assert_true(pid > 0);
		snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
		assert_non_null(f = fopen(path, "r"));
		assert_int_equal(fscanf(f, "%ld %ld", &dummy, &pages0), 2);
		fclose(f);
		uint64_t t0 = h_proc_ticks(pid);
		scrape_at(mport, &sc);
		uint64_t t1 = h_proc_ticks(pid);
		assert_non_null(f = fopen(path, "r"));
		assert_int_equal(fscanf(f, "%ld %ld", &dummy, &pages1), 2);
		fclose(f);
		double age = sc.after - scrape_need(&sc, "cotal_delivery_snapshot_timestamp_seconds" S "}");
		snprintf(series, sizeof(series), "cotal_delivery_process_resident_memory_bytes" S
		    ",process=\"%s\"}", roles[r]);
		double rss = scrape_need(&sc, series);
		double lo = (double)(pages0 < pages1 ? pages0 : pages1) * (double)page;
		double hi = (double)(pages0 > pages1 ? pages0 : pages1) * (double)page;
		snprintf(series, sizeof(series), "cotal_delivery_process_cpu_seconds_total" S
		    ",process=\"%s\"}", roles[r]);
		double cpu = scrape_need(&sc, series);
		double cpu_lo = (double)t0 / (double)hz - age * (double)cores - 0.01;
		double cpu_hi = (double)t1 / (double)hz + 0.01;
		printf("• %s: memory %.0f bytes (/proc: %.0f..%.0f, ±25 %% + 4 MiB), cpu %.2f s "
		    "(/proc: %.2f..%.2f s, snapshot %.2f s old)\n", roles[r], rss, lo, hi, cpu,
		    (double)t0 / (double)hz, (double)t1 / (double)hz, age);
		assert_true(rss >= lo * 0.75 - 4194304.0 && rss <= hi * 1.25 + 4194304.0);
		assert_true(cpu <= cpu_hi && cpu >= cpu_lo);
	}
}

/* ---- the reader's verdicts ---- */


static double
grown(const char *series, double from)
{
	return scrape_need(&sc2, series) - from;
}

/*
 * The reader's verdicts on entries the test makes undeliverable: 3 posts
 * copied while the reader is stopped, then the member's read ACL narrowed
 * to nothing: denied +3; a post to a member whose ACL row the test deleted:
 * retried +9 and gave_up +1 (the contract's ten deliveries, two seconds
 * apart); nothing delivered of either (all exact).
 */
static void
test_the_readers_verdicts_are_the_entries_refused(void **state)
{
	struct member a, b, c, d;
	char err[1024], bucket[256], key[256];
	kvStore *kv = NULL;
	const char *den = "cotal_delivery_reader_denied_total" S "}";
	const char *ret = "cotal_delivery_reader_retried_total" S "}";
	const char *gave = "cotal_delivery_reader_gave_up_total" S "}";
	const char *dlv = "cotal_delivery_reader_delivered_total" S "}";

	(void)state;
	h_member_up(&mesh, &prov, &a, "nar-a", "narrow", false);
	h_member_up(&mesh, &prov, &b, "nar-b", "narrow", true);
	h_member_up(&mesh, &prov, &c, "miss-a", "missing", false);
	h_member_up(&mesh, &prov, &d, "miss-b", "missing", true);
	scrape_at(mport, &sc);
	double d0 = scrape_need(&sc, den), r0 = scrape_need(&sc, ret), g0 = scrape_need(&sc, gave), v0 = scrape_need(&sc, dlv);
	pid_t reader = h_daemon_worker_pid(&dmn, "reader");
	assert_true(reader > 0);
	double e0 = scrape_need(&sc, "cotal_delivery_fanout_copies_total" S "}");
	assert_int_equal(kill(reader, SIGSTOP), 0);
	for (int i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof(id), "n-%d", i);
		if (h_post(&a.c, &mesh, &a.a, "narrow", id, "narrowed", NULL) != 0)
			break;
	}
	/* Copied (the fan-out's count), then the ACL narrowed, then read. */
	double copies = -1;
	for (int64_t end = mono_ms() + 20000; copies < e0 + 3 && mono_ms() < end; h_nap(200))
		if (scrape_get(mport, &sc2) == 0)
			copies = scrape_value(&sc2, "cotal_delivery_fanout_copies_total" S "}");
	int rc = h_acl_put(&prov, &mesh, &b.a, "[]", false, err, sizeof(err));
	kill(reader, SIGCONT);
	if (rc != 0)
		fail_msg("narrow the ACL: %s", err);
	assert_true(copies == e0 + 3);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", mesh.token);
	snprintf(key, sizeof(key), "%s.%s.%s", d.a.owner, d.a.actor, d.a.uid);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	assert_int_equal(kvStore_Delete(kv, key), NATS_OK);
	kvStore_Destroy(kv);
	assert_int_equal(h_post(&c.c, &mesh, &c.a, "missing", "m-1", "to nobody known", NULL), 0);
	double g = -1;
	for (int64_t end = mono_ms() + 60000; g < g0 + 1 && mono_ms() < end; h_nap(500))
		if (scrape_get(mport, &sc2) == 0)
			g = scrape_value(&sc2, gave);
	h_nap(1500); /* a snapshot more: nothing else comes */
	scrape_at(mport, &sc2);
	printf("• 3 entries of a narrowed ACL: denied +%g (3); an owner without an ACL row: "
	    "retried +%g (9), gave_up +%g (1); delivered +%g (0); all exact\n", grown(den, d0),
	    grown(ret, r0), grown(gave, g0), grown(dlv, v0));
	assert_true(grown(den, d0) == 3);
	assert_true(grown(ret, r0) == 9);
	assert_true(grown(gave, g0) == 1);
	assert_true(grown(dlv, v0) == 0);
	h_close(&a.c);
	h_close(&b.c);
	h_close(&c.c);
	h_close(&d.c);
}


int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_clock_state_and_broker_of_a_healthy_daemon),
		cmocka_unit_test(test_renewals_are_the_writes_of_the_lease_row),
		cmocka_unit_test(test_a_standby_says_standby_and_the_holder_serving),
		cmocka_unit_test(test_serving_is_0_while_the_lease_is_rechecked),
		cmocka_unit_test(test_reloads_count_adopted_and_refused),
		cmocka_unit_test(test_process_memory_and_cpu_are_the_processes_own),
		cmocka_unit_test(test_the_readers_verdicts_are_the_entries_refused),
		cmocka_unit_test(test_a_broker_stalled_across_a_renewal_counts_one_failure),
		cmocka_unit_test(test_a_broker_restart_counts_one_reconnect),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
