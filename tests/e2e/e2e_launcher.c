/*
 * Issue 16: the launcher (`cotal up`, `cotal down`, `cotal deliver`) as a
 * process, against a real broker and the real daemon. The seed's words:
 *
 *   "cotal up reports the daemon only when it is actually serving."
 *   "A daemon it started can exit without taking the single-flight lease
 *    because another daemon holds it, or because a crashed holder's lease
 *    has not expired yet. up then says so and exits non-zero."
 *   "Detached up redirects the daemon's stdout and stderr onto the file."
 *   "A foreground cotal up restarts a daemon it started when that daemon
 *    dies while the broker that up started is still running. It logs
 *    delivery daemon exited (<cause>) while nats-server is running -
 *    restarting it, then delivery daemon running again once the
 *    replacement's responder is bound."
 *   "A failed restart is logged and retried after the 30-second lease TTL."
 *   "A daemon that exits cleanly or on SIGTERM or SIGINT stays stopped. So
 *    does one that bare cotal down stops."
 *   "Ctrl-C on a foreground up, and a broker that exits under it, stop the
 *    daemon with the same stop bare cotal down uses for it."
 *   "cotal deliver is a deprecated entry kept for existing units and
 *    scripts."
 *
 * One mesh for the suite, its broker started by the harness (the test
 * that needs `up` to start the broker stops it first). Every test ends with
 * `cotal down`, so the next finds the lease free, except the last, which
 * leaves a crashed holder's lease on purpose.
 */
#include <setjmp.h>
#include <signal.h>
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define SPACE "up"
#define SERVE_MS 30000
#define RESTART_MS 50000 /* a failed restart waits out the crashed lease: 30 s, and more */

static struct mesh mesh;
static char key[512], pidpath[H_PATH_MAX * 2], logpath[H_PATH_MAX * 2];
static char credspath[H_PATH_MAX * 2], runpath[H_PATH_MAX * 2];

static void
nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static pid_t
recorded_pid(void)
{
	FILE *f = fopen(pidpath, "r");
	long pid = 0;

	if (f != NULL) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return (pid_t)pid;
}

/* Running: not gone, and no zombie (a daemon whose launcher exited is
 * reaped by whoever adopts it, maybe never in a container). */
static bool
alive(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;

	if (pid <= 0 || kill(pid, 0) != 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Wait for the record to name a live daemon other than `not`. */
static pid_t
daemon_after(pid_t not, int ms)
{
	for (int64_t end = mono_ms() + ms; mono_ms() < end; nap(50)) {
		pid_t p = recorded_pid();
		if (p > 0 && p != not && alive(p)) {
			h_track(p);
			return p;
		}
	}
	return 0;
}

static bool
file_has(const char *path, const char *needle, int ms)
{
	return h_log_has(path, needle, ms);
}

/*
 * A case that mostly waits (a lease's TTL, down's 15 s grace): the
 * sanitizer build's run (COTAL_TEST_CORE) skips it, the release build runs
 * every case on 2.10 and 2.14.
 */
static void
waiting_case(void)
{
	if (getenv("COTAL_TEST_CORE") != NULL)
		skip();
}

/*
 * The threads of process pid other than its main one that do not block
 * SIGHUP, SIGINT and SIGTERM (the main thread takes them with sigtimedwait,
 * which unblocks them while it waits). A library thread that did not block
 * them would take a Ctrl-C with its default action: up would die, leaving
 * its daemon running with nobody to stop it.
 */
static int
threads_taking_stop_signals(pid_t pid)
{
	const unsigned long long stops = (1ULL << (SIGHUP - 1)) | (1ULL << (SIGINT - 1)) |
	    (1ULL << (SIGTERM - 1));
	char dir[64], path[128], line[256];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%ld/task", (long)pid);
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || atol(e->d_name) == (long)pid)
			continue;
		snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
		FILE *f = fopen(path, "r");
		unsigned long long blk = 0;
		if (f == NULL)
			continue; /* the thread ended */
		while (fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, "SigBlk: %llx", &blk) == 1)
				break;
		fclose(f);
		n += (blk & stops) != stops;
	}
	closedir(d);
	return n;
}

/*
 * A foreground `cotal up` (opt/val: one more option, or NULL), its output
 * in <dir>/<name>.out (the path into outp), seen reporting the daemon
 * serving: up's pid, the daemon's into *d.
 */
static pid_t
up_serving(const char *name, char *outp, size_t len, const char *opt, const char *val,
	   pid_t *d)
{
	pid_t up;

	snprintf(outp, len, "%s/%s.out", mesh.dir, name);
	up = h_cotal_spawn(&mesh, outp, "up", "--space", SPACE, opt, val, NULL);
	assert_true(up > 0);
	if (!file_has(outp, "delivery daemon serving space up", SERVE_MS))
		fail_msg("up did not report the daemon serving; see %s", outp);
	assert_true((*d = daemon_after(0, 1000)) > 0);
	assert_int_equal(threads_taking_stop_signals(up), 0);
	return up;
}

static void
down(void)
{
	char out[H_OUT_MAX];

	h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL);
}

static int
setup(void **state)
{
	(void)state;
	if (h_mesh_up(&mesh, SPACE, false) != 0)
		return -1;
	space_key(SPACE, key, sizeof(key));
	snprintf(pidpath, sizeof(pidpath), "%s/.cotal/delivery.%s.pid", mesh.dir, key);
	snprintf(logpath, sizeof(logpath), "%s/.cotal/delivery.%s.log", mesh.dir, key);
	snprintf(credspath, sizeof(credspath), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	snprintf(runpath, sizeof(runpath), "%s/.cotal/space.%s/delivery.run.json", mesh.dir, key);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	down();
	h_mesh_down(&mesh);
	return 0;
}

/*
 * After each test: the daemon stopped, the harness's broker running, and
 * the lease row gone, as on a fresh mesh (a daemon killed, or stopped with
 * its broker gone, leaves its row for 30 s; the tests of that wait on
 * their own).
 */
/* The lease row gone, as if it had expired. */
static int
lease_purge(void)
{
	char stream[256], subj[300], err[512];
	struct conn prov;
	jsOptions o;
	jsErrCode jerr = 0;

	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ after the test: the provisioner: %s\n", err);
		return -1;
	}
	snprintf(stream, sizeof(stream), "KV_cotal_delivery_%s", mesh.token);
	snprintf(subj, sizeof(subj), "$KV.cotal_delivery_%s.lease.0", mesh.token);
	jsOptions_Init(&o);
	o.Stream.Purge.Subject = subj;
	natsStatus s = js_PurgeStream(prov.js, stream, &o, &jerr);
	h_close(&prov);
	if (s != NATS_OK)
		fprintf(stderr, "✗ after the test: purging %s of %s: %s (%d)\n", subj, stream,
		    natsStatus_GetText(s), (int)jerr);
	return s == NATS_OK ? 0 : -1;
}

static int
after(void **state)
{
	char out[H_OUT_MAX];

	(void)state;
	down();
	if (mesh.broker <= 0 && h_broker_start(&mesh) != 0) {
		fprintf(stderr, "✗ after the test: the broker did not start again\n");
		return -1;
	}
	if (h_cotal(&mesh, out, sizeof(out), "space", "provision", SPACE, NULL) != 0) {
		fprintf(stderr, "✗ after the test: cotal space provision %s:\n%s", SPACE, out);
		return -1;
	}
	return lease_purge();
}

/*
 * "--detach starts everything, redirects the daemon's stdout and stderr
 * onto .cotal/delivery.<key>.log, reports as above and exits"; the broker
 * found the way a user expects (a bare --nats-server name on PATH); with
 * --metrics (issue 43: "cotal up --metrics ADDR ... prints the URL, and
 * /healthz") the daemon's metrics server where up says it is; a
 * second up while one serves; cotal down stops the daemon, removes the
 * run's credential once the death is confirmed, then the broker up
 * started.
 */
static void
test_detached_up_serves_and_down_stops_it_all(void **state)
{
	char out[H_OUT_MAX], bindir[H_PATH_MAX], path[H_PATH_MAX * 3];
	const char *oldpath = getenv("PATH");
	int64_t t0, t_up, t_down;
	struct stat st;
	pid_t d;

	(void)state;
	/* up starts the broker itself: the harness's goes first. */
	assert_int_equal(h_broker_stop(&mesh), 0);
	mesh.broker = 0;
	snprintf(bindir, sizeof(bindir), "%s", mesh.nats_bin);
	*strrchr(bindir, '/') = '\0';
	snprintf(path, sizeof(path), "%s:%s", bindir, oldpath ? oldpath : "/usr/bin:/bin");
	setenv("PATH", path, 1);
	int mport = h_free_port();
	static char body[H_HTTP_BODY_MAX];
	char maddr[64], said[256];
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", mport);
	t0 = mono_ms();
	int rc = h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach",
	    "--nats-server", "nats-server", "--metrics", maddr, NULL);
	t_up = mono_ms() - t0;
	setenv("PATH", oldpath ? oldpath : "/usr/bin:/bin", 1);
	if (rc != 0)
		fail_msg("cotal up --detach: %d\n%s", rc, out);
	printf("• up --detach: serving, and reported, %lld ms after the command\n",
	    (long long)t_up);
	assert_non_null(strstr(out, "broker up at"));
	assert_non_null(strstr(out, "delivery daemon serving space up"));
	snprintf(said, sizeof(said), "• metrics: http://%s/metrics, health: http://%s/healthz",
	    maddr, maddr);
	if (strstr(out, said) == NULL)
		fail_msg("up --metrics %s: want \"%s\" in:\n%s", maddr, said, out);
	/* Where up said: healthy once the status file shows it serving. */
	int hc = 0;
	for (int64_t until = mono_ms() + 10000; mono_ms() < until && hc != 200; h_nap(200))
		hc = h_http_get(mport, "/healthz", NULL, body, sizeof(body), NULL, 0);
	assert_int_equal(hc, 200);
	assert_int_equal(h_http_get(mport, "/metrics", NULL, body, sizeof(body), NULL, 0), 200);
	assert_non_null(strstr(body, "cotal_delivery_serving{space=\"up\"} 1"));
	/* The daemon's own lines are in the log, none on the launcher's output. */
	assert_null(strstr(out, "delivery: credential"));
	assert_null(strstr(out, "delivery daemon up (space"));
	assert_true(file_has(logpath, "delivery daemon up (space up)", 1000));
	assert_true((d = daemon_after(0, 1000)) > 0);
	/* The run's credential: minted, 0600, bounded to 24 h. */
	assert_int_equal(stat(credspath, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	json_t *run = json_load_file(runpath, 0, NULL);
	assert_non_null(run);
	json_int_t exp = json_integer_value(json_object_get(run, "expires"));
	json_decref(run);
	assert_true(exp > (json_int_t)time(NULL) + 86400 - 120 && exp <= (json_int_t)time(NULL) +
	    86400);

	/* A second up while one serves: detached, nothing to do; in the
	 * foreground, refused naming the running daemon. */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach",
	    NULL), 0);
	assert_non_null(strstr(out, "already running"));
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, NULL), 1);
	assert_non_null(strstr(out, "already runs here"));
	assert_true(alive(d));

	t0 = mono_ms();
	if (h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL) != 0)
		fail_msg("cotal down:\n%s", out);
	t_down = mono_ms() - t0;
	printf("• down: daemon and broker stopped %lld ms after the command\n", (long long)t_down);
	assert_false(alive(d));
	assert_non_null(strstr(out, "removed the run's credential"));
	assert_int_not_equal(access(credspath, F_OK), 0);
	assert_non_null(strstr(out, "broker stopped"));
	assert_true(file_has(logpath, "received SIGTERM, exiting", 1000));
}

/*
 * Foreground: kill -9 of the daemon while the broker runs: both lines, and
 * the replacement serves at once: it takes the killed holder's lease over
 * (issue 42: this machine's dead predecessor, proved by its holder record),
 * where it was refused by it until the TTL before. Then Ctrl-C stops the
 * daemon the way cotal down does, and up exits.
 */
static void
test_foreground_restarts_a_killed_daemon_and_ctrl_c_stops_it(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t up, d1, d2;
	int status;
	int64_t t_kill;

	(void)state;
	up = up_serving("up-restart", outp, sizeof(outp), NULL, NULL, &d1);
	assert_int_equal(kill(d1, SIGKILL), 0);
	t_kill = mono_ms();
	assert_true(file_has(outp, "delivery daemon exited (killed by SIGKILL) while nats-server "
	    "is running - restarting it", 5000));
	/* The first replacement takes the killed holder's lease over. */
	if (!file_has(outp, "delivery daemon running again", RESTART_MS))
		fail_msg("no replacement served; see %s", outp);
	int64_t took = mono_ms() - t_kill;
	printf("• kill -9 of the daemon: serving again %lld ms later (the lease taken over)\n",
	    (long long)took);
	assert_true(file_has(logpath, "took over the lease of shard 0 from this machine's dead "
	    "predecessor", 1000));
	assert_false(file_has(outp, "a live lease already exists for shard 0", 0));
	assert_false(file_has(outp, "the restart failed", 0));
	assert_true((d2 = daemon_after(d1, 1000)) > 0);

	assert_int_equal(kill(up, SIGINT), 0);
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_false(alive(d2));
	assert_true(file_has(outp, "interrupted (Ctrl-C); stopping the delivery daemon", 0));
	assert_true(file_has(outp, "stopped (pid", 0));
	assert_true(file_has(logpath, "received SIGTERM, exiting", 0));
}

/* "... and when the stop lands between two restart attempts": the first
 * replacement refused by the killed holder's lease, then cotal down while
 * up waits to try again; up gives up at once. The holder record is removed
 * before the kill, so that nothing proves the holder dead (as for a holder
 * on another machine) and its lease stands until its TTL. */
static void
test_a_stop_between_two_restart_attempts_wins(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	pid_t up, d;
	int status;
	int64_t t0;

	(void)state;
	waiting_case();
	up = up_serving("up-between", outp, sizeof(outp), NULL, NULL, &d);
	char holder[sizeof(logpath) + 16];
	snprintf(holder, sizeof(holder), "%.*s.holder.json", (int)(strlen(logpath) - 4), logpath);
	assert_int_equal(unlink(holder), 0);
	assert_int_equal(kill(d, SIGKILL), 0);
	if (!file_has(outp, "the restart failed; trying again in 33 s", 15000))
		fail_msg("no failed first restart; see %s", outp);
	t0 = mono_ms();
	if (h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL) != 0)
		fail_msg("cotal down:\n%s", out);
	assert_int_equal(waitpid(up, &status, 0), up);
	printf("• a stop between two restart attempts: up gave up %lld ms after cotal down\n",
	    (long long)(mono_ms() - t0));
	assert_true(mono_ms() - t0 < 5000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(file_has(outp, "stopped by cotal down between two restart attempts", 0));
	assert_false(file_has(outp, "running again", 0));
}

/* "... when it is a replacement that is still starting": the replacement
 * has no pid record yet (it is still claiming its lease, slowed here by the
 * test hook COTAL_TEST_CLAIM_DELAY_MS); cotal down finds it through up's
 * record, stops it, and up leaves it stopped. */
static void
test_a_replacement_still_starting_is_stopped_by_down(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	pid_t up, d;
	int status;

	(void)state;
	setenv("COTAL_TEST_CLAIM_DELAY_MS", "4000", 1);
	up = up_serving("up-starting", outp, sizeof(outp), NULL, NULL, &d);
	unsetenv("COTAL_TEST_CLAIM_DELAY_MS");
	assert_int_equal(kill(d, SIGKILL), 0);
	/* As if its lease had expired: the replacement claims at once, after
	 * the hook's delay. */
	assert_int_equal(lease_purge(), 0);
	if (!file_has(outp, "restarting it", 5000))
		fail_msg("no restart; see %s", outp);
	nap(1000);
	if (h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL) != 0)
		fail_msg("cotal down:\n%s", out);
	assert_non_null(strstr(out, "sent SIGTERM to pid"));
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(file_has(outp, "stopped by cotal down while starting; it stays stopped", 0));
	assert_false(file_has(outp, "running again", 0));
	assert_int_equal(recorded_pid(), 0);
}

/*
 * "... (a replacement that does not bind gets the same not-bound warning as
 * at start)". Every launch is slow to become ready here (the test hook
 * COTAL_TEST_READY_DELAY_MS holds its ready write, so live.delivery does
 * not answer "bound"), and up's wait is cut to 2 s (COTAL_TEST_SERVE_WAIT_MS):
 * the first daemon and its replacement each get the warning, neither a
 * serving line; up keeps supervising, and Ctrl-C stops the replacement.
 */
static void
test_a_daemon_that_does_not_bind_gets_the_warning_at_start_and_as_a_replacement(void **state)
{
	char outp[H_PATH_MAX * 2];
	const char *warning = "started but is not serving yet: its live.delivery responder is "
	    "not bound 2 s after the launch";
	pid_t up, d1, d2;
	int status;

	(void)state;
	snprintf(outp, sizeof(outp), "%s/up-unbound.out", mesh.dir);
	setenv("COTAL_TEST_READY_DELAY_MS", "6000", 1);
	setenv("COTAL_TEST_SERVE_WAIT_MS", "2000", 1);
	/* The replacement claims 1 s late: after the test purged the killed
	 * holder's row, as if it had expired. */
	setenv("COTAL_TEST_CLAIM_DELAY_MS", "1000", 1);
	up = h_cotal_spawn(&mesh, outp, "up", "--space", SPACE, NULL);
	unsetenv("COTAL_TEST_READY_DELAY_MS");
	unsetenv("COTAL_TEST_SERVE_WAIT_MS");
	unsetenv("COTAL_TEST_CLAIM_DELAY_MS");
	assert_true(up > 0);
	if (!file_has(outp, warning, 10000))
		fail_msg("no not-bound warning at start; see %s", outp);
	assert_true((d1 = daemon_after(0, 1000)) > 0);
	assert_false(file_has(outp, "delivery daemon serving space", 0));
	/* The first daemon serves once its hold ends; then it is killed. */
	assert_true(file_has(logpath, "delivery daemon up (space up)", 10000));
	assert_int_equal(kill(d1, SIGKILL), 0);
	assert_int_equal(lease_purge(), 0);
	if (!file_has(outp, "delivery daemon exited (killed by SIGKILL) while nats-server is "
	    "running - restarting it", 5000))
		fail_msg("no restart; see %s", outp);
	assert_true((d2 = daemon_after(d1, 10000)) > 0);
	for (int64_t end = mono_ms() + 10000; h_log_count(outp, warning) < 2 && mono_ms() < end;)
		nap(100);
	if (h_log_count(outp, warning) < 2)
		fail_msg("the replacement got no not-bound warning; see %s", outp);
	assert_false(file_has(outp, "running again", 0));
	assert_true(alive(d2));

	assert_int_equal(kill(up, SIGINT), 0);
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_false(alive(d2));
}

/*
 * "Open dev mode has no delivery daemon. Open mode is deliberately
 * live-only: there is no trusted reader, so there is no durable backstop.
 * Run an auth mesh if you need durable channels." An open mesh (mesh init
 * --dev --open) in its own workspace: up starts its broker and no daemon,
 * and says why; the live path works without any credential; the daemon
 * and the minting refuse it by name; down stops the broker up started.
 */
static void
test_an_open_dev_mesh_starts_no_daemon(void **state)
{
	struct mesh open = mesh;
	char out[H_OUT_MAX], port[16], url[64], path[H_PATH_MAX * 2], okey[512];
	natsConnection *nc = NULL;
	natsSubscription *sub = NULL;
	natsMsg *msg = NULL;
	FILE *f;
	long broker = 0;

	(void)state;
	snprintf(open.dir, sizeof(open.dir), "%s/open", mesh.dir);
	assert_int_equal(mkdir(open.dir, 0700), 0);
	snprintf(port, sizeof(port), "%d", h_free_port());
	snprintf(url, sizeof(url), "nats://127.0.0.1:%s", port);
	if (h_cotal(&open, out, sizeof(out), "mesh", "init", "--dev", "--open", "--port", port,
	    "--space", "o", "--nats-server", mesh.nats_bin, NULL) != 0)
		fail_msg("mesh init --open:\n%s", out);
	assert_non_null(strstr(out, "open mode is live-only"));
	/* A mesh keeps its mode. */
	assert_int_equal(h_cotal(&open, out, sizeof(out), "mesh", "init", "--dev", "--port", port,
	    "--space", "o", NULL), 1);
	assert_non_null(strstr(out, "is an open dev mesh; a mesh keeps its mode"));

	if (h_cotal(&open, out, sizeof(out), "up", "--space", "o", "--nats-server",
	    mesh.nats_bin, NULL) != 0)
		fail_msg("up on the open mesh:\n%s", out);
	snprintf(path, sizeof(path), "%s/.cotal/mesh/nats-server.pid", open.dir);
	if ((f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%ld", &broker) != 1)
			broker = 0;
		fclose(f);
	}
	assert_true(broker > 0);
	h_track((pid_t)broker);
	assert_non_null(strstr(out, "up: space o: an open dev mesh has no delivery daemon: with "
	    "no authentication there is no trusted reader, so no durable backstop (run an auth "
	    "mesh"));
	assert_non_null(strstr(out, "the open mesh's broker started (cotal down stops it); no "
	    "delivery daemon started"));
	space_key("o", okey, sizeof(okey));
	snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.pid", open.dir, okey);
	assert_int_not_equal(access(path, F_OK), 0);

	/* The live path needs no daemon and no credential. */
	assert_int_equal(natsConnection_ConnectTo(&nc, url), NATS_OK);
	assert_int_equal(natsConnection_SubscribeSync(&sub, nc, "live.o"), NATS_OK);
	assert_int_equal(natsConnection_PublishString(nc, "live.o", "hello"), NATS_OK);
	assert_int_equal(natsSubscription_NextMsg(&msg, sub, 5000), NATS_OK);
	assert_string_equal(natsMsg_GetData(msg), "hello");
	natsMsg_Destroy(msg);
	natsSubscription_Destroy(sub);
	natsConnection_Destroy(nc);

	/* The daemon (through the deprecated entry) and the minting refuse. */
	assert_int_equal(h_cotal(&open, out, sizeof(out), "deliver", "--space", "o", NULL), 1);
	assert_non_null(strstr(out, "delivery: an open dev mesh has no delivery daemon"));
	assert_non_null(strstr(out, "not starting (space o"));
	assert_int_not_equal(h_cotal(&open, out, sizeof(out), "creds", "mint", "--space", "o",
	    "--profile", "delivery", NULL), 0);
	assert_non_null(strstr(out, "is open (no authentication): it has no accounts"));

	assert_int_equal(h_cotal(&open, out, sizeof(out), "down", "--space", "o", NULL), 0);
	assert_non_null(strstr(out, "broker stopped"));
	assert_false(alive((pid_t)broker));
}

/*
 * "Ctrl-C on a foreground up ... stop[s] the daemon with the same stop bare
 * cotal down uses for it. It holds the reservation down takes, so the
 * delivery stop of a concurrent cotal down is refused while it runs. It
 * sends SIGKILL to a daemon that has not exited 15 seconds after SIGTERM."
 * The daemon SIGSTOPped, so up's stop lasts its 15 s; a cotal down meanwhile
 * is refused; up ends with the daemon dead.
 */
static void
test_ctrl_c_holds_the_stop_reservation(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	pid_t up, d;
	int status;

	(void)state;
	waiting_case();
	up = up_serving("up-reserved", outp, sizeof(outp), NULL, NULL, &d);
	assert_int_equal(kill(d, SIGSTOP), 0);
	assert_int_equal(kill(up, SIGINT), 0);
	assert_true(file_has(outp, "sent SIGTERM to pid", 5000));
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL), 2);
	assert_non_null(strstr(out, "another stop of the delivery daemon for space up is running"));
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(file_has(outp, "has not exited 15 s after SIGTERM; sending SIGKILL", 0));
	assert_false(alive(d));
}

/* "If the broker exits while that stop is running, up waits for the stop
 * to finish before it exits": Ctrl-C and the broker's SIGTERM together. */
static void
test_ctrl_c_while_the_broker_exits_waits_for_the_stop(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t up, d;
	int status;

	(void)state;
	up = up_serving("up-ctrlc-broker", outp, sizeof(outp), NULL, NULL, &d);
	assert_int_equal(kill(up, SIGINT), 0);
	assert_int_equal(kill(mesh.broker, SIGTERM), 0);
	assert_int_equal(waitpid(up, &status, 0), up);
	/* The daemon is gone when up is. */
	assert_false(alive(d));
	assert_true(WIFEXITED(status));
	assert_true(file_has(outp, "interrupted (Ctrl-C); stopping the delivery daemon", 0));
	assert_true(file_has(outp, "stopped (pid", 0));
	waitpid(mesh.broker, NULL, 0);
	mesh.broker = 0;
}

/* "A daemon that exits cleanly or on SIGTERM or SIGINT stays stopped." */
static void
test_a_daemon_ended_by_sigterm_stays_stopped(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t up, d;
	int status;

	(void)state;
	up = up_serving("up-sigterm", outp, sizeof(outp), NULL, NULL, &d);
	assert_int_equal(kill(d, SIGTERM), 0);
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(file_has(outp, "it stays stopped", 0));
	assert_false(file_has(outp, "restarting it", 0));
	assert_int_equal(recorded_pid(), 0);
}

/* "So does one that bare cotal down stops." */
static void
test_a_daemon_cotal_down_stopped_stays_stopped(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	pid_t up, d;
	int status;

	(void)state;
	up = up_serving("up-down", outp, sizeof(outp), NULL, NULL, &d);
	if (h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL) != 0)
		fail_msg("cotal down:\n%s", out);
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_false(alive(d));
	assert_true(file_has(outp, "stopped by cotal down", 0));
	assert_false(file_has(outp, "restarting it", 0));
}

/* "... and a broker that exits under it, stop the daemon with the same
 * stop bare cotal down uses for it." */
static void
test_a_broker_exiting_under_up_stops_the_daemon(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t up, d;
	int status;

	(void)state;
	up = up_serving("up-broker", outp, sizeof(outp), NULL, NULL, &d);
	assert_int_equal(h_broker_stop(&mesh), 0);
	mesh.broker = 0;
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_false(alive(d));
	assert_true(file_has(outp, "broker is not running; not restarting it", 0) ||
	    file_has(outp, "nats-server exited under cotal up; stopping the delivery daemon", 0));
	assert_false(file_has(outp, "restarting it -", 0));
}

/* "cotal deliver is a deprecated entry kept for existing units and
 * scripts": one line naming the replacement, then the daemon itself
 * (here refusing a --server the registry does not record). */
static void
test_deliver_is_the_daemon_behind_one_deprecation_line(void **state)
{
	char out[H_OUT_MAX];

	(void)state;
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", SPACE,
	    "--profile", "delivery", "--force", NULL), 0);
	int rc = h_cotal(&mesh, out, sizeof(out), "deliver", "--space", SPACE, "--server",
	    "nats://127.0.0.1:1", NULL);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(out, "cotal deliver is deprecated: run cotal-deliveryd"));
	assert_non_null(strstr(out, "refusing to dial"));
}

/*
 * "In the foreground it is also the renewal owner: at 75 % of the
 * credential's lifetime it re-mints it for the same user key and asks the
 * daemon to adopt it (reloadCreds)": a 20 s credential, renewed at 15 s,
 * adopted, and durable posts made before, around and after it all arrive.
 */
static void
test_foreground_renews_the_run_credential_without_a_dropped_delivery(void **state)
{
	char outp[H_PATH_MAX * 2], err[1024], id[32];
	struct agent ann, ben;
	struct conn prov, ca, cb;
	uint64_t last = 0;
	bool hdr = false;
	pid_t up, d;
	int status, posted = 0;

	(void)state;
	up = up_serving("up-renew", outp, sizeof(outp), "--creds-ttl", "20", &d);
	assert_int_equal(h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)), 0);
	assert_int_equal(h_agent_add(&mesh, "ann", "room1", &ann), 0);
	assert_int_equal(h_agent_add(&mesh, "ben", "room1", &ben), 0);
	assert_int_equal(h_connect(&mesh, ann.creds, &ca, err, sizeof(err)), 0);
	assert_int_equal(h_connect(&mesh, ben.creds, &cb, err, sizeof(err)), 0);
	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	assert_int_equal(h_member_put(&prov, &mesh, &ben, "room1", last, 0, 1, err, sizeof(err)),
	    0);
	/* A post every half second from before the renewal (15 s) to after
	 * its adoption. */
	for (int64_t end = mono_ms() + 40000; mono_ms() < end; nap(500)) {
		snprintf(id, sizeof(id), "r-%d", posted);
		assert_int_equal(h_post(&ca, &mesh, &ann, "room1", id, "hi", NULL), 0);
		posted++;
		if (file_has(outp, "delivery daemon adopted the renewed credential", 0) && posted > 40)
			break;
	}
	if (!file_has(outp, "renewed the run's delivery credential", 0) ||
	    !file_has(outp, "delivery daemon adopted the renewed credential (reloadCreds)", 0))
		fail_msg("no renewal adopted; see %s", outp);
	json_t *frames = h_dlv_drain(&cb, &mesh, &ben, 15000, 3000, &hdr, err, sizeof(err));
	assert_non_null(frames);
	printf("• renewal at 75 %% of a 20 s credential adopted; %zu of %d posts delivered\n",
	    json_array_size(frames), posted);
	assert_int_equal(json_array_size(frames), (size_t)posted);
	json_decref(frames);
	assert_int_equal(kill(up, SIGINT), 0);
	assert_int_equal(waitpid(up, &status, 0), up);
	h_close(&ca);
	h_close(&cb);
	h_close(&prov);
}

/* "A record whose pid now belongs to another program is cleared without
 * a signal": up launches over it, the other program untouched. */
static void
test_a_stale_record_is_no_daemon(void **state)
{
	char out[H_OUT_MAX], text[32];
	pid_t other = fork();

	(void)state;
	if (other == 0) {
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	assert_true(other > 0);
	h_track(other);
	snprintf(text, sizeof(text), "%ld\n", (long)other);
	FILE *f = fopen(pidpath, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	if (h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach", NULL) != 0)
		fail_msg("cotal up over a stale record:\n%s", out);
	assert_non_null(strstr(out, "delivery daemon serving space up"));
	assert_true(daemon_after(other, 1000) > 0);
	assert_true(alive(other));
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
}

/*
 * "Only a workspace that holds the dev signer mints; elsewhere up uses the
 * credential the operator put there (auditing it first)", and "a lease
 * write the credential may not make (naming the refused subject and
 * operation, never another daemon)": a host without the signer, whose
 * credential another toolchain minted without the lease grant. Refused
 * before any launch, naming the subject and the operation; the file stays.
 */
static void
test_an_operators_credential_without_the_lease_grant_is_named(void **state)
{
	struct mesh host;
	char out[H_OUT_MAX], cmd[H_PATH_MAX * 4], grants[H_PATH_MAX * 2], creds[H_PATH_MAX * 3];
	json_t *g, *allow, *keep;
	size_t i;
	json_t *v;

	(void)state;
	host = mesh;
	snprintf(host.dir, sizeof(host.dir), "%s/host3", mesh.dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.cotal' && cp -a '%s/.cotal/space.%s' '%s/.cotal/'",
	    host.dir, mesh.dir, key, host.dir);
	assert_int_equal(system(cmd), 0);
	/* The other toolchain's grants, less the lease's. */
	assert_non_null(g = json_load_file(COTAL_TEST_DATA "/delivery-grants.json", 0, NULL));
	allow = json_object_get(json_object_get(json_object_get(g, "delivery"), "pub"), "allow");
	keep = json_array();
	json_array_foreach(allow, i, v)
		if (strstr(json_string_value(v), ".lease.") == NULL)
			json_array_append(keep, v);
	assert_int_equal(json_array_size(keep) + 1, json_array_size(allow));
	json_object_set_new(json_object_get(json_object_get(g, "delivery"), "pub"), "allow", keep);
	snprintf(grants, sizeof(grants), "%s/no-lease-grants.json", mesh.dir);
	assert_int_equal(json_dump_file(g, grants, 0), 0);
	json_decref(g);
	snprintf(creds, sizeof(creds), "%s/.cotal/space.%s/delivery.creds", host.dir, key);
	if (h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", SPACE, "--profile",
	    "delivery", "--grants", grants, "--out", creds, "--force", NULL) != 0)
		fail_msg("creds mint --grants:\n%s", out);

	assert_int_equal(h_cotal(&host, out, sizeof(out), "up", "--space", SPACE, "--detach",
	    NULL), 1);
	assert_non_null(strstr(out, "does not pass its audit"));
	assert_non_null(strstr(out, "✗ publish \"$KV.cotal_delivery_"));
	assert_non_null(strstr(out, ".lease."));
	assert_null(strstr(out, "a live lease already exists"));
	assert_null(strstr(out, "delivery daemon serving"));
	assert_int_equal(access(creds, F_OK), 0); /* the operator's: never removed */
}

/*
 * "a lease write the broker refused for another reason, quoted as the
 * broker gave it (e.g. a store over its max_file_store cap: test it with a
 * broker started with a tiny cap)": the broker restarted with a 256 KB
 * file store, filled by posts; up exits 1 quoting the broker's refusal.
 */
static void
test_a_lease_write_the_broker_refuses_is_quoted(void **state)
{
	char out[H_OUT_MAX], cmd[H_PATH_MAX * 4], err[1024], id[32], stream[256];
	static char big[32 * 1024];
	struct agent cap;
	struct conn ca, prov;
	int posted = 0;
	bool full = false;

	(void)state;
	/* A stream's max_bytes is reserved against the cap when the broker
	 * loads it: under a 256 KB cap the space's streams would not load at
	 * all. They give their limits up first (the provisioner may), so the
	 * posts, not the reservations, fill the store. */
	assert_int_equal(h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)), 0);
	jsStreamNamesList *names = NULL;
	assert_int_equal(js_StreamNames(&names, prov.js, NULL, NULL), NATS_OK);
	snprintf(stream, sizeof(stream), "_%s", mesh.token);
	for (int k = 0; k < names->Count; k++) {
		const char *n = names->List[k];
		size_t nl = strlen(n), tl = strlen(stream);
		if (nl < tl || strcmp(n + nl - tl, stream) != 0)
			continue;
		/* The config as the broker has it, changed in max_bytes only: an
		 * update made from nats.c's struct would drop what it cannot
		 * express (EPT's allow_msg_schedules on 2.14) and be refused. */
		char subj[512], *body;
		natsMsg *r = NULL;
		snprintf(subj, sizeof(subj), "$JS.API.STREAM.INFO.%s", n);
		assert_int_equal(natsConnection_Request(&r, prov.nc, subj, NULL, 0, 5000), NATS_OK);
		json_t *info = json_loadb(natsMsg_GetData(r), (size_t)natsMsg_GetDataLength(r), 0,
		    NULL), *cfg = json_object_get(info, "config");
		natsMsg_Destroy(r);
		assert_non_null(cfg);
		json_object_set_new(cfg, "max_bytes", json_integer(-1));
		assert_non_null(body = json_dumps(cfg, JSON_COMPACT));
		snprintf(subj, sizeof(subj), "$JS.API.STREAM.UPDATE.%s", n);
		assert_int_equal(natsConnection_Request(&r, prov.nc, subj, body, (int)strlen(body),
		    5000), NATS_OK);
		if (strstr(natsMsg_GetData(r), "\"error\"") != NULL)
			fail_msg("%s: could not drop its max_bytes: %.*s", n, natsMsg_GetDataLength(r),
			    natsMsg_GetData(r));
		natsMsg_Destroy(r);
		free(body);
		json_decref(info);
	}
	jsStreamNamesList_Destroy(names);
	h_close(&prov);
	/* The config as mesh init wrote it stays aside for h_broker_tls. */
	snprintf(cmd, sizeof(cmd), "test -f '%s.plain' || cp '%s' '%s.plain'; sed -i "
	    "'s/max_file_store: 1TB/max_file_store: 256KB/' '%s'", mesh.conf, mesh.conf, mesh.conf,
	    mesh.conf);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(h_broker_restart(&mesh), 0);
	assert_int_equal(h_agent_add(&mesh, "cap", "capped", &cap), 0);
	assert_int_equal(h_connect(&mesh, cap.creds, &ca, err, sizeof(err)), 0);
	memset(big, 'x', sizeof(big) - 1);
	for (; posted < 64 && !full; posted++) {
		snprintf(id, sizeof(id), "cap-%d", posted);
		full = h_post(&ca, &mesh, &cap, "capped", id, big, NULL) != 0;
	}
	h_close(&ca);
	assert_true(full);
	printf("• the 256 KB store refused post %d\n", posted);

	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach",
	    NULL), 1);
	if (strstr(out, "without serving: delivery: could not acquire the lease for shard 0: ") ==
	    NULL || strstr(out, "insufficient resources") == NULL)
		fail_msg("expected the broker's refusal quoted in:\n%s", out);
	assert_null(strstr(out, "a live lease already exists"));

	/* The plain broker again, the posts gone. */
	assert_int_equal(h_broker_tls(&mesh, NULL, NULL), 0);
	assert_int_equal(h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)), 0);
	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	jsErrCode jerr = 0;
	assert_int_equal(js_PurgeStream(prov.js, stream, NULL, &jerr), NATS_OK);
	h_close(&prov);
}

/*
 * "It inherits the mesh's transport on every launch: a TLS-required mesh
 * (registry tlsRequired) always starts the daemon with TLS demanded,
 * including a bare up's relaunch": up's own connections (provisioning,
 * the liveness probe) verify the broker with the registry's CA too.
 */
static void
test_a_tls_mesh_launches_and_relaunches_with_tls(void **state)
{
	static struct tls_files good;
	char out[H_OUT_MAX];
	int before, after_relaunch;

	(void)state;
	assert_int_equal(h_tls_make(&mesh, "good", "DNS:localhost,IP:127.0.0.1", &good), 0);
	assert_int_equal(h_registry_set(&mesh, "tlsRequired", json_true()), 0);
	assert_int_equal(h_registry_set(&mesh, "tlsCa", json_string(good.ca)), 0);
	assert_int_equal(h_broker_tls(&mesh, &good, NULL), 0);
	if (h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach", NULL) != 0)
		fail_msg("cotal up on a TLS mesh:\n%s", out);
	assert_non_null(strstr(out, "delivery daemon serving space up"));
	assert_true(daemon_after(0, 1000) > 0);
	before = h_log_count(logpath, "delivery: TLS demanded (mesh registry tlsRequired)");
	assert_true(before >= 1);
	/* The daemon goes missing; a bare up relaunches it, with TLS again. */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL), 0);
	if (h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach", NULL) != 0)
		fail_msg("the relaunch on a TLS mesh:\n%s", out);
	assert_non_null(strstr(out, "delivery daemon serving space up"));
	after_relaunch = h_log_count(logpath, "delivery: TLS demanded (mesh registry tlsRequired)");
	assert_int_equal(after_relaunch, before + 1);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL), 0);
	/* The plaintext mesh again, for the tests after this one. */
	assert_int_equal(h_registry_set(&mesh, "tlsRequired", NULL), 0);
	assert_int_equal(h_registry_set(&mesh, "tlsCa", NULL), 0);
	assert_int_equal(h_broker_tls(&mesh, NULL, NULL), 0);
}

/* A daemon too starved to exit on SIGTERM (SIGSTOPped) under a foreground
 * up: cotal down kills it at 15 s, and up does not restart it. */
static void
test_down_kills_a_stuck_daemon_and_up_leaves_it_stopped(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	pid_t up, d;
	int status;
	int64_t t0;

	(void)state;
	waiting_case();
	up = up_serving("up-stopped", outp, sizeof(outp), NULL, NULL, &d);
	assert_int_equal(kill(d, SIGSTOP), 0);
	t0 = mono_ms();
	if (h_cotal(&mesh, out, sizeof(out), "down", "--space", SPACE, NULL) != 0)
		fail_msg("cotal down:\n%s", out);
	printf("• a SIGSTOPped daemon: cotal down killed it %lld ms after the command\n",
	    (long long)(mono_ms() - t0));
	assert_non_null(strstr(out, "has not exited 15 s after SIGTERM; sending SIGKILL"));
	assert_false(alive(d));
	assert_int_equal(waitpid(up, &status, 0), up);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(file_has(outp, "stopped by cotal down", 0));
	assert_false(file_has(outp, "restarting it", 0));
}

/*
 * Refusals in the seed's words: another daemon holds the lease (a daemon
 * of another host of the space); then that holder is SIGKILLed, and up
 * says the crashed holder's lease has not expired yet, and when it will.
 */
static void
test_a_lease_held_elsewhere_is_named(void **state)
{
	static struct daemon other;
	struct mesh host;
	char out[H_OUT_MAX], cmd[H_PATH_MAX * 4];

	(void)state;
	host = mesh;
	snprintf(host.dir, sizeof(host.dir), "%s/host2", mesh.dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.cotal' && cp -a '%s/.cotal/space.%s' '%s/.cotal/'",
	    host.dir, mesh.dir, key, host.dir);
	/* The space and its credential exist once an up has run. */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "space", "provision", SPACE, NULL), 0);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", SPACE,
	    "--profile", "delivery", "--force", NULL), 0);
	assert_int_equal(system(cmd), 0);
	/* A standby: a lease an earlier test's daemon could not release (its
	 * broker was gone) is waited out, then claimed. */
	assert_int_equal(h_daemon_start(&host, &other, "--standby", NULL), 0);
	if (!h_log_has(other.log, "delivery daemon up", 60000))
		fail_msg("the other host's daemon did not start; see %s", other.log);

	/* up run by a service manager (NOTIFY_SOCKET set): its daemon is no
	 * unit's main process, so it refuses at once, as the seed says, and
	 * does not wait a lease's life as a unit's start does (issue 42). */
	char name[128], log[H_PATH_MAX * 2];
	int nfd = h_notify_listener(name, sizeof(name));
	snprintf(log, sizeof(log), "%s/.cotal/delivery.%s.log", mesh.dir, key);
	setenv("NOTIFY_SOCKET", name, 1);
	int rc = h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach", NULL);
	unsetenv("NOTIFY_SOCKET");
	close(nfd);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "without serving: delivery: a live lease already exists for "
	    "shard 0 — another delivery daemon is running"));
	assert_non_null(strstr(out, "the lease of shard 0 is held by local."));
	assert_int_equal(h_log_count(log, "under the service manager"), 0);

	/* The holder crashes: its row outlives it. */
	h_daemon_kill(&other);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "up", "--space", SPACE, "--detach",
	    NULL), 1);
	assert_non_null(strstr(out, "a live lease already exists for shard 0"));
	assert_non_null(strstr(out, "if that daemon is gone it expires in"));
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_detached_up_serves_and_down_stops_it_all, after),
		cmocka_unit_test_teardown(test_foreground_restarts_a_killed_daemon_and_ctrl_c_stops_it,
		    after),
		cmocka_unit_test_teardown(test_a_daemon_ended_by_sigterm_stays_stopped, after),
		cmocka_unit_test_teardown(test_a_stop_between_two_restart_attempts_wins, after),
		cmocka_unit_test_teardown(test_a_replacement_still_starting_is_stopped_by_down, after),
		cmocka_unit_test_teardown(
		    test_a_daemon_that_does_not_bind_gets_the_warning_at_start_and_as_a_replacement,
		    after),
		cmocka_unit_test_teardown(test_a_daemon_cotal_down_stopped_stays_stopped, after),
		cmocka_unit_test_teardown(test_an_open_dev_mesh_starts_no_daemon, after),
		cmocka_unit_test_teardown(test_a_stale_record_is_no_daemon, after),
		cmocka_unit_test_teardown(test_ctrl_c_while_the_broker_exits_waits_for_the_stop,
		    after),
		cmocka_unit_test_teardown(
		    test_foreground_renews_the_run_credential_without_a_dropped_delivery, after),
		cmocka_unit_test_teardown(test_a_broker_exiting_under_up_stops_the_daemon, after),
		cmocka_unit_test_teardown(test_deliver_is_the_daemon_behind_one_deprecation_line,
		    after),
		cmocka_unit_test_teardown(test_a_tls_mesh_launches_and_relaunches_with_tls, after),
		cmocka_unit_test_teardown(test_a_lease_write_the_broker_refuses_is_quoted, after),
		cmocka_unit_test_teardown(
		    test_an_operators_credential_without_the_lease_grant_is_named, after),
		cmocka_unit_test_teardown(test_ctrl_c_holds_the_stop_reservation, after),
		/* These two leave a killed holder's lease behind them. */
		cmocka_unit_test_teardown(test_down_kills_a_stuck_daemon_and_up_leaves_it_stopped,
		    after),
		cmocka_unit_test_teardown(test_a_lease_held_elsewhere_is_named, after),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
