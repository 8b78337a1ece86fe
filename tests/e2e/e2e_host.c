/*
 * Issue 17: one host, many spaces (`cotal-deliveryd --spaces MANIFEST`),
 * against a real broker and the real daemon. The seed:
 *
 *   "One process can also serve every space on a host [...] A lane is
 *    that space's daemon. It reads the space's own credential from the
 *    root, dials on its own connections, which authenticate into that
 *    space's account, and holds its own lease [...] so a second daemon for
 *    the space is refused by the lease as before. A lane that loses the
 *    broker, its credential or its lease closes alone and the host reopens
 *    it; the other lanes keep serving."
 *   "A lane of cotal deliver --spaces is the exception: it writes no
 *    record."
 *
 * One broker, four spaces (four accounts: h1 to h4) in one workspace; in
 * each space ann posts to room and ben, a member, reads his dlv_ durable.
 * Post ids carry their space, so a frame in the wrong space shows.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define NLANES 4
#define SERVE_MS 30000
#define REOPEN_MS 45000 /* a reopen's backoff: 1, 2, 4, 8, 16 s */
#define SEQ_MAX 20000   /* post ids of one run */

struct lane_rig {
	struct mesh m;
	struct agent ann, ben;
	struct conn ca, cb, prov;
	int posted;
	unsigned char sent[SEQ_MAX], seen[SEQ_MAX]; /* by post id */
};

static struct mesh base;
static struct lane_rig L[NLANES];
static const char *const NAMES[NLANES] = { "h1", "h2", "h3", "h4" };
static char manifest[H_PATH_MAX * 2], rundir[H_PATH_MAX * 2], hoststat[H_PATH_MAX * 3];
static pid_t hosts[2];
static int seq;

static void
nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The manifest: the lanes of mask (bit i: NAMES[i], root the workspace),
 * then extra (a JSON entry, or NULL). */
static void
manifest_write(const char *path, unsigned mask, const char *extra)
{
	FILE *f = fopen(path, "w");
	bool first = true;

	assert_non_null(f);
	fprintf(f, "{\"spaces\":[");
	for (int i = 0; i < NLANES; i++)
		if (mask & (1u << i)) {
			fprintf(f, "%s{\"space\":\"%s\",\"root\":\"%s\"}", first ? "" : ",", NAMES[i],
			    base.dir);
			first = false;
		}
	if (extra != NULL)
		fprintf(f, "%s%s", first ? "" : ",", extra);
	fprintf(f, "]}\n");
	fclose(f);
}

/* The host's status entry for lane i: its pid and reopens (-1: none). */
static pid_t
host_lane(const char *statpath, int i, long *reopens)
{
	json_t *doc = json_load_file(statpath, 0, NULL), *l;
	pid_t pid = -1;
	size_t k;

	json_array_foreach(json_object_get(doc, "lanes"), k, l)
		if (strcmp(json_string_value(json_object_get(l, "space")), NAMES[i]) == 0) {
			pid = (pid_t)json_integer_value(json_object_get(l, "pid"));
			if (reopens != NULL)
				*reopens = (long)json_integer_value(json_object_get(l, "reopens"));
		}
	json_decref(doc);
	return pid;
}

/* The host's status has no entry for lane i within ms: the host logs a
 * lane's close as it reaps it and rewrites its status file after that,
 * in the same turn of its loop. */
static bool
host_lane_gone(const char *statpath, int i, int ms)
{
	for (int64_t end = mono_ms() + ms;; nap(50)) {
		if (host_lane(statpath, i, NULL) == -1)
			return true;
		if (mono_ms() >= end)
			return false;
	}
}

/* Lane i serves: its own status file names the pid the host gave it and a
 * serving shard. */
static bool
lane_serving_in(const char *statpath, int i, int ms, const char *root)
{
	char key[512], path[H_PATH_MAX * 3];

	space_key(NAMES[i], key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.status.json", root, key);
	for (int64_t end = mono_ms() + ms;; nap(100)) {
		pid_t pid = host_lane(statpath, i, NULL);
		json_t *doc = json_load_file(path, 0, NULL);
		const char *shard = json_string_value(json_object_get(doc, "shard"));
		bool ok = pid > 0 && json_integer_value(json_object_get(doc, "pid")) == pid &&
		    shard != NULL && strcmp(shard, "serving") == 0;
		json_decref(doc);
		if (ok)
			return true;
		if (mono_ms() >= end)
			return false;
	}
}

static bool
lane_serving(const char *statpath, int i, int ms)
{
	return lane_serving_in(statpath, i, ms, base.dir);
}

/* The next host_up's --metrics port (0: none). */
static int metrics_port;

/* A host for manifest, run directory dir, output in <base>/<name>.out;
 * waits for the lanes of mask to serve. */
static pid_t
host_up(int slot, const char *name, const char *man, const char *dir, unsigned mask,
	char *outp, size_t len)
{
	char statp[H_PATH_MAX * 3];
	const char *b = strrchr(man, '/') + 1;

	snprintf(outp, len, "%s/%s.out", base.dir, name);
	if (metrics_port > 0) {
		char addr[32];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", metrics_port);
		hosts[slot] = h_daemon_spawn(&base, outp, "--spaces", man, "--run-dir", dir,
		    "--metrics", addr, NULL);
	} else
		hosts[slot] = h_daemon_spawn(&base, outp, "--spaces", man, "--run-dir", dir, NULL);
	assert_true(hosts[slot] > 0);
	snprintf(statp, sizeof(statp), "%s/%.*s.host.json", dir, (int)(strlen(b) - 5), b);
	for (int i = 0; i < NLANES; i++)
		if ((mask & (1u << i)) && !lane_serving(statp, i, SERVE_MS))
			fail_msg("lane %s is not serving; see %s", NAMES[i], outp);
	return hosts[slot];
}

static int
host_down(int slot)
{
	int status = -1;

	if (hosts[slot] <= 0)
		return -1;
	kill(hosts[slot], SIGTERM);
	if (waitpid(hosts[slot], &status, 0) != hosts[slot])
		status = -1;
	hosts[slot] = 0;
	return status;
}

/* A post in space i (false when its connection is down: a test kicks a
 * whole account). */
static bool
post(int i, const char *text, char *id, size_t idlen)
{
	int n = seq++;

	assert_true(n < SEQ_MAX);
	snprintf(id, idlen, "%s-%d", NAMES[i], n);
	if (h_post(&L[i].ca, &L[i].m, &L[i].ann, "room", id, text, NULL) != 0)
		return false;
	L[i].sent[n] = 1;
	L[i].posted++;
	return true;
}

/* One post in each lane of mask. */
static void
post_round(unsigned mask)
{
	char id[64];

	for (int i = 0; i < NLANES; i++)
		if (mask & (1u << i))
			assert_true(post(i, "hi", id, sizeof(id)));
}

/* A frame ben of space i read: one of this test's posts in his own space
 * (never another space's, never one nobody sent), counted by id. */
static void
frame_seen(json_t *frame, int i)
{
	const char *id = json_string_value(json_object_get(json_object_get(frame, "msg"), "id"));
	size_t n = strlen(NAMES[i]);
	char *end;
	long k;

	if (id == NULL || strncmp(id, NAMES[i], n) != 0 || id[n] != '-')
		fail_msg("lane %s: a frame of another space: %s", NAMES[i], id ? id : "?");
	k = strtol(id + n + 1, &end, 10);
	if (*end != '\0' || k < 0 || k >= SEQ_MAX || !L[i].sent[k])
		fail_msg("lane %s: a frame of no post of this test: %s", NAMES[i], id);
	if (L[i].seen[k] < 255)
		L[i].seen[k]++;
}

/* Lane i delivers now: a probe posted in its space reaches ben within 10 s
 * (the frames before it are counted). */
static void
serves_now(int i)
{
	char id[64], err[1024];

	assert_true(post(i, "probe", id, sizeof(id)));
	for (int64_t end = mono_ms() + 10000; mono_ms() < end;) {
		natsMsg *msg = NULL;
		assert_int_equal(h_dlv_fetch(&L[i].cb, &L[i].m, &L[i].ben, 1000, true, &msg, err,
		    sizeof(err)), 0);
		if (msg == NULL)
			continue;
		json_t *frame = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), 0,
		    NULL);
		const char *got = json_string_value(json_object_get(json_object_get(frame, "msg"),
		    "id"));
		bool probe = got != NULL && strcmp(got, id) == 0;
		frame_seen(frame, i);
		json_decref(frame);
		natsMsg_Destroy(msg);
		if (probe)
			return;
	}
	fail_msg("lane %s delivered no probe within 10 s", NAMES[i]);
}

/* Every post of the lanes of mask reached its ben, and only his space's
 * posts did, printed per space. At least once: a lane in `closed` (one that
 * closed mid-batch) may deliver a post twice; any other, exactly once. */
static void
all_delivered(unsigned mask, unsigned closed, const char *what)
{
	char err[1024];
	bool hdr = false;

	for (int i = 0; i < NLANES; i++) {
		if (!(mask & (1u << i)))
			continue;
		json_t *frames = h_dlv_drain(&L[i].cb, &L[i].m, &L[i].ben, 20000, 2000, &hdr, err,
		    sizeof(err));
		size_t k;
		json_t *f;
		if (frames == NULL)
			fail_msg("%s", err);
		int missing = 0, twice = 0;
		json_array_foreach(frames, k, f)
			frame_seen(f, i);
		json_decref(frames);
		for (int n = 0; n < SEQ_MAX; n++)
			if (L[i].sent[n]) {
				missing += L[i].seen[n] == 0;
				twice += L[i].seen[n] > 1 ? L[i].seen[n] - 1 : 0;
			}
		printf("• %s: space %s: %d of %d posts delivered, %d again\n", what, NAMES[i],
		    L[i].posted - missing, L[i].posted, twice);
		assert_int_equal(missing, 0);
		if (!(closed & (1u << i)))
			assert_int_equal(twice, 0);
	}
}

static int
lease_purge(int i)
{
	char stream[256], subj[300];
	jsOptions o;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "KV_cotal_delivery_%s", L[i].m.token);
	snprintf(subj, sizeof(subj), "$KV.cotal_delivery_%s.lease.0", L[i].m.token);
	jsOptions_Init(&o);
	o.Stream.Purge.Subject = subj;
	return js_PurgeStream(L[i].prov.js, stream, &o, &jerr) == NATS_OK ? 0 : -1;
}

static int
setup(void **state)
{
	char out[H_OUT_MAX], err[1024], key[512], prov[H_PATH_MAX * 2];
	uint64_t last = 0;

	(void)state;
	if (h_mesh_up(&base, NAMES[0], true) != 0)
		return -1;
	/* The other spaces: their accounts load when the broker restarts. */
	if (h_cotal(&base, out, sizeof(out), "mesh", "init", "--dev", "--space", NAMES[1],
	    "--space", NAMES[2], "--space", NAMES[3], "--nats-server", base.nats_bin, NULL) != 0 ||
	    h_broker_restart(&base) != 0) {
		fprintf(stderr, "✗ mesh init of the other spaces:\n%s", out);
		return -1;
	}
	for (int i = 0; i < NLANES; i++) {
		struct lane_rig *r = &L[i];
		h_space_view(&base, NAMES[i], &r->m);
		if ((i > 0 && h_cotal(&r->m, out, sizeof(out), "space", "provision", NAMES[i],
		    NULL) != 0) ||
		    h_agent_add(&r->m, "ann", "room", &r->ann) != 0 ||
		    h_agent_add(&r->m, "ben", "room", &r->ben) != 0 ||
		    /* Redialling connections: a test kicks a whole account. */
		    h_connect_url(&r->m, NULL, r->ann.creds, &r->ca, err, sizeof(err)) != 0 ||
		    h_connect_url(&r->m, NULL, r->ben.creds, &r->cb, err, sizeof(err)) != 0 ||
		    !space_key(NAMES[i], key, sizeof(key)) ||
		    snprintf(prov, sizeof(prov), "%s/.cotal/space.%s/provisioner.creds", base.dir,
		    key) <= 0 ||
		    h_connect_url(&r->m, NULL, prov, &r->prov, err, sizeof(err)) != 0 ||
		    h_chat_last_seq(&r->prov, &r->m, &last) != 0 ||
		    h_member_put(&r->prov, &r->m, &r->ben, "room", last, 0, 1, err, sizeof(err)) != 0) {
			fprintf(stderr, "✗ space %s: %s\n%s", NAMES[i], err, out);
			return -1;
		}
	}
	snprintf(manifest, sizeof(manifest), "%s/spaces.json", base.dir);
	snprintf(rundir, sizeof(rundir), "%s/run", base.dir);
	snprintf(hoststat, sizeof(hoststat), "%s/spaces.host.json", rundir);
	mkdir(rundir, 0700);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NLANES; i++) {
		h_close(&L[i].ca);
		h_close(&L[i].cb);
		h_close(&L[i].prov);
	}
	h_mesh_down(&base);
	return 0;
}

/* After each test: no host, no lease row, every count even. */
static int
after(void **state)
{
	(void)state;
	host_down(0);
	host_down(1);
	for (int i = 0; i < NLANES; i++) {
		char err[1024];
		bool hdr;
		/* What a failed test left in ben's store: not the next test's. */
		json_decref(h_dlv_drain(&L[i].cb, &L[i].m, &L[i].ben, 300, 300, &hdr, err,
		    sizeof(err)));
		lease_purge(i);
		L[i].posted = 0;
		memset(L[i].sent, 0, sizeof(L[i].sent));
		memset(L[i].seen, 0, sizeof(L[i].seen));
	}
	return 0;
}

/*
 * Issue 29: "--metrics ... for the --spaces host (one endpoint for all
 * lanes, each series labelled with its space)": one family header, every
 * lane's series under it, and /healthz 200 once all of them serve.
 */
static void
host_metrics_show_every_lane(int port)
{
	static char body[H_HTTP_BODY_MAX];
	char line[160];
	int status = 0;

	for (int64_t end = mono_ms() + 10000; mono_ms() < end; nap(200))
		if ((status = h_http_get(port, "/healthz", NULL, body, sizeof(body), NULL, 0)) == 200)
			break;
	assert_int_equal(status, 200);
	assert_string_equal(body, "serving all 3 spaces\n");
	/* Every lane's copies (delivered above) reach the endpoint within a
	 * snapshot (1 s). */
	bool counted = false;
	for (int64_t end = mono_ms() + 10000; !counted && mono_ms() < end; nap(200)) {
		assert_int_equal(h_http_get(port, "/metrics", NULL, body, sizeof(body), NULL, 0), 200);
		counted = true;
		for (int i = 0; i < 3; i++) {
			snprintf(line, sizeof(line), "\ncotal_delivery_fanout_copies_total{space=\"%s\"} ",
			    NAMES[i]);
			const char *at = strstr(body, line);
			counted = counted && at != NULL && atoi(at + strlen(line)) > 0;
		}
	}
	if (!counted)
		fail_msg("not every lane's copies in the host's scrape:\n%s", body);
	for (int i = 0; i < 3; i++) {
		snprintf(line, sizeof(line), "\ncotal_delivery_serving{space=\"%s\"} 1\n", NAMES[i]);
		if (strstr(body, line) == NULL)
			fail_msg("no \"%s\" in the host's scrape:\n%s", line + 1, body);
		snprintf(line, sizeof(line), "\ncotal_delivery_worker_up{space=\"%s\",role=\"reader\"} 1\n",
		    NAMES[i]);
		assert_non_null(strstr(body, line));
	}
	const char *type = "# TYPE cotal_delivery_serving gauge\n";
	char *first = strstr(body, type);
	assert_non_null(first);
	assert_null(strstr(first + 1, type));
	printf("• the host's one endpoint: every lane serving, its series labelled\n");
}

/*
 * Three spaces, one host: each post reaches only its own space's member;
 * no lane writes a pid record, the host writes its own; cotal status
 * --spaces shows every lane serving; SIGTERM stops each lane the seed's
 * way (its lease released) and the host exits 0.
 */
static void
test_three_spaces_one_host_each_post_reaches_only_its_space(void **state)
{
	char outp[H_PATH_MAX * 2], key[512], path[H_PATH_MAX * 3], cmd[H_PATH_MAX * 8];
	int64_t t0 = mono_ms();
	int st;

	(void)state;
	manifest_write(manifest, 0x7, NULL);
	metrics_port = h_free_port();
	host_up(0, "host-three", manifest, rundir, 0x7, outp, sizeof(outp));
	printf("• 3 lanes serving %lld ms after the host's start\n", (long long)(mono_ms() - t0));
	for (int k = 0; k < 10; k++)
		post_round(0x7);
	all_delivered(0x7, 0, "three lanes");
	host_metrics_show_every_lane(metrics_port);
	metrics_port = 0;
	for (int i = 0; i < 3; i++) {
		space_key(NAMES[i], key, sizeof(key));
		snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.pid", base.dir, key);
		assert_int_not_equal(access(path, F_OK), 0);
	}
	snprintf(path, sizeof(path), "%s/spaces.host.pid", rundir);
	assert_int_equal(access(path, F_OK), 0);
	assert_true(h_log_has(outp, "a lane of the delivery host", 0));

	snprintf(path, sizeof(path), "%s/status.out", base.dir);
	snprintf(cmd, sizeof(cmd), "%s status --spaces '%s' --run-dir '%s' > '%s' 2>&1",
	    COTAL_CLI_PATH, manifest, rundir, path);
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(h_log_has(path, "3 of 3 lanes serving", 0));
	assert_true(h_log_has(path, "lane h2: running, pid", 0));
	assert_true(h_log_has(path, "shard 0 serving since", 0));
	assert_true(h_log_has(path, "fanout   connected", 0));

	st = host_down(0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < 3; i++) {
		char line[128];
		snprintf(line, sizeof(line), "[%s] • delivery: lease of shard 0 released", NAMES[i]);
		assert_true(h_log_has(outp, line, 0));
	}
	assert_true(h_log_has(outp, "host: every lane stopped; exiting", 0));
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
}

/*
 * Lane h1's credential expires without renewal: h1 alone closes (at the
 * backstop: COTAL_DELIVERY_BROKER_GONE_MS 2 s, so 8 s) and is reopened;
 * h2 and h3 deliver while it is down and never close. The operator puts a
 * fresh credential in place; h1 serves again and every post of every
 * space arrives.
 */
static void
test_a_lane_whose_credential_expires_closes_alone(void **state)
{
	char outp[H_PATH_MAX * 2], out[H_OUT_MAX];
	long reopens = -1;
	pid_t p2, p3;

	(void)state;
	assert_int_equal(h_cotal(&L[0].m, out, sizeof(out), "creds", "mint", "--space", "h1",
	    "--profile", "delivery", "--force", "--expires", "8", NULL), 0);
	manifest_write(manifest, 0x7, NULL);
	setenv("COTAL_DELIVERY_BROKER_GONE_MS", "2000", 1);
	host_up(0, "host-expiry", manifest, rundir, 0x7, outp, sizeof(outp));
	unsetenv("COTAL_DELIVERY_BROKER_GONE_MS");
	p2 = host_lane(hoststat, 1, NULL);
	p3 = host_lane(hoststat, 2, NULL);
	int64_t t0 = mono_ms();
	while (!h_log_has(outp, "host: lane h1 exited", 0)) {
		if (mono_ms() - t0 > 40000)
			fail_msg("lane h1 did not close; see %s", outp);
		post_round(0x7);
		nap(250);
	}
	printf("• h1's credential expired: the lane closed %lld ms after the host's start\n",
	    (long long)(mono_ms() - t0));
	assert_true(h_log_has(outp, "[h1] ✗ delivery: credential expired without renewal", 0));
	serves_now(1);
	serves_now(2);
	/* The operator's renewal. */
	assert_int_equal(h_cotal(&L[0].m, out, sizeof(out), "creds", "mint", "--space", "h1",
	    "--profile", "delivery", "--force", NULL), 0);
	int64_t t1 = mono_ms();
	for (int k = 0; k < 4; k++) {
		post_round(0x7);
		nap(250);
	}
	if (!lane_serving(hoststat, 0, REOPEN_MS))
		fail_msg("lane h1 was not reopened; see %s", outp);
	printf("• h1 serving again %lld ms after its new credential\n",
	    (long long)(mono_ms() - t1));
	post_round(0x7);
	all_delivered(0x7, 0x1, "h1's credential expired");
	assert_int_equal(host_lane(hoststat, 1, &reopens), p2);
	assert_int_equal(reopens, 0);
	assert_int_equal(host_lane(hoststat, 2, &reopens), p3);
	assert_int_equal(reopens, 0);
}

/*
 * A foreign write takes h2's lease: h2 alone closes ("another delivery
 * daemon has taken shard 0") and is reopened with backoff; while the other
 * writer's row stands each reopen is refused by it; once it is gone h2
 * serves again. h1 and h3 are never touched.
 */
static void
test_a_lane_whose_lease_is_taken_closes_alone(void **state)
{
	static const char foreign[] = "{\"holder\":\"local.SOMEONE\",\"incarnation\":\"other\","
	    "\"since\":1,\"ready\":true}";
	char outp[H_PATH_MAX * 2], err[1024];
	pid_t p1, p3;
	long reopens = -1;

	(void)state;
	manifest_write(manifest, 0x7, NULL);
	host_up(0, "host-lease", manifest, rundir, 0x7, outp, sizeof(outp));
	p1 = host_lane(hoststat, 0, NULL);
	p3 = host_lane(hoststat, 2, NULL);
	post_round(0x7);
	assert_int_equal(h_kv_put(&L[1].prov, &L[1].m, "delivery", "lease.0", foreign, err,
	    sizeof(err)), 0);
	int64_t t0 = mono_ms();
	while (!h_log_has(outp, "host: lane h2 exited", 0)) {
		if (mono_ms() - t0 > 20000)
			fail_msg("lane h2 did not close; see %s", outp);
		post_round(0x7);
		nap(250);
	}
	printf("• h2's lease taken: the lane closed %lld ms after the foreign write\n",
	    (long long)(mono_ms() - t0));
	assert_true(h_log_has(outp, "[h2] ✗ delivery: another delivery daemon has taken shard 0 "
	    "(holder local.SOMEONE", 0));
	serves_now(0);
	serves_now(2);
	/* A reopen while the row stands is refused by it. */
	if (!h_log_has(outp, "[h2] ✗ delivery: a live lease already exists for shard 0", 10000))
		fail_msg("no reopen refused by the foreign row; see %s", outp);
	/* The other writer is gone. */
	assert_int_equal(lease_purge(1), 0);
	int64_t t1 = mono_ms();
	if (!lane_serving(hoststat, 1, REOPEN_MS))
		fail_msg("lane h2 was not reopened; see %s", outp);
	printf("• h2 serving again %lld ms after the foreign row went\n",
	    (long long)(mono_ms() - t1));
	post_round(0x7);
	all_delivered(0x7, 0x2, "h2's lease taken");
	assert_int_equal(host_lane(hoststat, 0, &reopens), p1);
	assert_int_equal(reopens, 0);
	assert_int_equal(host_lane(hoststat, 2, &reopens), p3);
	assert_int_equal(reopens, 0);
}

/* The account of space i: its connections, KICKed one by one through
 * $SYS (the space's observer lists them, its evictor kicks). The number
 * kicked. */
static int
kick_account(int i)
{
	char path[H_PATH_MAX * 2], subj[256], err[1024], ks[300], body[64];
	struct conn obs, ev;
	natsMsg *reply = NULL;
	json_t *mj, *doc, *c;
	size_t k;
	int kicked = 0;

	snprintf(path, sizeof(path), "%s/.cotal/mesh/dev-mesh.json", base.dir);
	mj = json_load_file(path, 0, NULL);
	const char *acct = json_string_value(json_object_get(json_object_get(json_object_get(mj,
	    "spaces"), NAMES[i]), "account"));
	assert_non_null(acct);
	snprintf(subj, sizeof(subj), "$SYS.REQ.ACCOUNT.%s.CONNZ", acct);
	json_decref(mj);
	if (h_connect_profile(&L[i].m, "sys-observer", &obs, err, sizeof(err)) != 0 ||
	    h_connect_profile(&L[i].m, "sys-evictor", &ev, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(natsConnection_RequestString(&reply, obs.nc, subj,
	    "{\"offset\":0,\"limit\":1024}", 5000), NATS_OK);
	doc = json_loads(natsMsg_GetData(reply), 0, NULL);
	natsMsg_Destroy(reply);
	const char *server = json_string_value(json_object_get(json_object_get(doc, "server"),
	    "id"));
	assert_non_null(server);
	snprintf(ks, sizeof(ks), "$SYS.REQ.SERVER.%s.KICK", server);
	json_array_foreach(json_object_get(json_object_get(doc, "data"), "connections"), k, c) {
		snprintf(body, sizeof(body), "{\"cid\":%lld}",
		    (long long)json_integer_value(json_object_get(c, "cid")));
		if (natsConnection_RequestString(&reply, ev.nc, ks, body, 5000) == NATS_OK) {
			kicked++;
			natsMsg_Destroy(reply);
		}
	}
	json_decref(doc);
	h_close(&obs);
	h_close(&ev);
	return kicked;
}

/*
 * h3's account's connections kicked by the broker (every one of them: the
 * lane's, and its agents'): only h3 is disrupted, h1 and h2 deliver
 * throughout and are never touched, and h3 serves again, every post of
 * the disruption delivered. (The lane's connections redial at once: "a
 * disconnect starts a clock, and a reconnect stops it", so a kick alone
 * closes no lane; kicked again for longer than the broker watchdog's
 * window, it closes and is reopened.)
 */
static void
test_a_lane_whose_connections_are_kicked_is_disrupted_alone(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t p1, p2;
	long reopens = -1;
	int kicked = 0;

	(void)state;
	manifest_write(manifest, 0x7, NULL);
	host_up(0, "host-kick", manifest, rundir, 0x7, outp, sizeof(outp));
	p1 = host_lane(hoststat, 0, NULL);
	p2 = host_lane(hoststat, 1, NULL);
	for (int64_t end = mono_ms() + 6000; mono_ms() < end;) {
		char id[64];
		kicked += kick_account(2);
		post_round(0x3);
		post(2, "hi", id, sizeof(id)); /* while its agent's connection is up */
		nap(200);
	}
	printf("• h3's account: %d connections kicked in 6 s\n", kicked);
	assert_true(kicked >= 5);
	serves_now(0);
	serves_now(1);
	/* h3's agents were kicked too: they redial (nats.c) before posting. */
	if (!lane_serving(hoststat, 2, REOPEN_MS))
		fail_msg("lane h3 does not serve after the kicks; see %s", outp);
	nap(1000);
	post_round(0x7);
	all_delivered(0x7, 0x4, "h3 kicked");
	printf("• h3 %s\n", h_log_has(outp, "host: lane h3 exited", 0) ? "closed and was reopened" :
	    "redialled in place (no lane closed)");
	assert_int_equal(host_lane(hoststat, 0, &reopens), p1);
	assert_int_equal(reopens, 0);
	assert_int_equal(host_lane(hoststat, 1, &reopens), p2);
	assert_int_equal(reopens, 0);
}

/*
 * A lane that cannot start (its root, a workspace of its own, holds no
 * credential) is retried with backoff, each attempt logged with its space
 * and cause; the others serve. Then its credentials appear where a systemd
 * unit's LoadCredential= puts a lane's (CREDENTIALS_DIRECTORY/space.<key>.
 * <file>: one unit, several spaces), and its next reopen serves.
 */
static void
test_a_lane_without_its_credential_is_retried_with_backoff(void **state)
{
	static const char *const files[] = { "delivery.creds", "sys-observer.creds",
		"sys-evictor.creds" };
	char outp[H_PATH_MAX * 2], extra[H_PATH_MAX * 3], empty[H_PATH_MAX * 2];
	char creddir[H_PATH_MAX * 2], key[512], cmd[H_PATH_MAX * 8];

	(void)state;
	snprintf(empty, sizeof(empty), "%s/empty", base.dir);
	snprintf(creddir, sizeof(creddir), "%s/credentials", base.dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.cotal' '%s'", empty, creddir);
	assert_int_equal(system(cmd), 0);
	snprintf(extra, sizeof(extra), "{\"space\":\"h4\",\"root\":\"%s\"}", empty);
	manifest_write(manifest, 0x3, extra);
	setenv("CREDENTIALS_DIRECTORY", creddir, 1);
	host_up(0, "host-nocreds", manifest, rundir, 0x3, outp, sizeof(outp));
	unsetenv("CREDENTIALS_DIRECTORY");
	if (!h_log_has(outp, "host: lane h4 exited (exit status 1); reopening it in 2000 ms", 15000))
		fail_msg("no second retry of h4; see %s", outp);
	assert_true(h_log_has(outp, "host: lane h4 exited (exit status 1); reopening it in 1000 ms",
	    0));
	space_key("h4", key, sizeof(key));
	if (!h_log_has(outp, "[h4] ✗ delivery: no delivery credential:", 0) ||
	    !h_log_has(outp, "and so is $CREDENTIALS_DIRECTORY/space.", 0))
		fail_msg("h4's cause is not named; see %s", outp);
	for (int k = 0; k < 5; k++)
		post_round(0x3);
	all_delivered(0x3, 0, "h4 without a credential");

	for (size_t k = 0; k < 3; k++) {
		snprintf(cmd, sizeof(cmd), "cp '%s/.cotal/space.%s/%s' '%s/space.%s.%s'", base.dir, key,
		    files[k], creddir, key, files[k]);
		assert_int_equal(system(cmd), 0);
	}
	if (!lane_serving_in(hoststat, 3, REOPEN_MS, empty))
		fail_msg("h4 does not serve on its LoadCredential= files; see %s", outp);
	snprintf(cmd, sizeof(cmd), "%s/space.%s.delivery.creds", creddir, key);
	char line[H_PATH_MAX * 3];
	snprintf(line, sizeof(line), "[h4] • delivery: credential %s", cmd);
	assert_true(h_log_has(outp, line, 0));
	post_round(0xb);
	all_delivered(0xb, 0, "h4 given its credential");
}

/*
 * SIGHUP with a manifest that adds h3 and removes h1: h1 is closed the
 * seed's way (its lease released), h3 opened, h2 untouched. A manifest
 * made invalid is refused, naming its field, and nothing changes.
 */
static void
test_sighup_adds_one_space_and_removes_another(void **state)
{
	char outp[H_PATH_MAX * 2];
	pid_t host, p2;
	long reopens = -1;

	(void)state;
	manifest_write(manifest, 0x3, NULL);
	host = host_up(0, "host-hup", manifest, rundir, 0x3, outp, sizeof(outp));
	p2 = host_lane(hoststat, 1, NULL);
	post_round(0x3);
	/* Delivered before h1 is closed: a post its lane had not copied
	 * yet would be (rightly) delivered by the next daemon of h1, in
	 * another test. */
	all_delivered(0x3, 0, "before SIGHUP");
	manifest_write(manifest, 0x6, NULL);
	assert_int_equal(kill(host, SIGHUP), 0);
	if (!lane_serving(hoststat, 2, SERVE_MS))
		fail_msg("h3 was not opened; see %s", outp);
	assert_true(h_log_has(outp, "host: SIGHUP: lane h1 is no longer in the manifest; closing it",
	    5000));
	assert_true(h_log_has(outp, "[h1] • delivery: lease of shard 0 released", 5000));
	assert_true(h_log_has(outp, "host: lane h1 closed (exit status 0)", 5000));
	assert_true(h_log_has(outp, "1 lane to open, 1 to close, the others untouched", 0));
	if (!host_lane_gone(hoststat, 0, 5000))
		fail_msg("h1 closed, still in the host's status 5 s later; see %s", hoststat);
	assert_int_equal(host_lane(hoststat, 1, &reopens), p2);
	assert_int_equal(reopens, 0);
	post_round(0x6);
	all_delivered(0x6, 0, "SIGHUP");

	FILE *f = fopen(manifest, "w");
	assert_non_null(f);
	fprintf(f, "{\"spaces\":[{\"space\":\"h2\",\"root\":\"%s\"},{\"space\":\"h2\","
	    "\"root\":\"%s\"}]}\n", base.dir, base.dir);
	fclose(f);
	assert_int_equal(kill(host, SIGHUP), 0);
	assert_true(h_log_has(outp, "spaces[1].space: \"h2\" is spaces[0]'s too (one lane per "
	    "space); every lane stays as it is", 5000));
	assert_int_equal(host_lane(hoststat, 1, NULL), p2);
	assert_true(lane_serving(hoststat, 2, 0));

	/* h2's server named (it had none): closed and opened again, the new
	 * lane waiting for the old one's exit without the host spinning (its
	 * CPU time a small share of the wait). */
	f = fopen(manifest, "w");
	assert_non_null(f);
	fprintf(f, "{\"spaces\":[{\"space\":\"h2\",\"root\":\"%s\",\"server\":\"%s\"},"
	    "{\"space\":\"h3\",\"root\":\"%s\"}]}\n", base.dir, base.url, base.dir);
	fclose(f);
	long cpu0 = (long)h_proc_ticks(host);
	int64_t t0 = mono_ms();
	assert_int_equal(kill(host, SIGHUP), 0);
	assert_true(h_log_has(outp, "host: SIGHUP: lane h2 changed its root or server; closing it",
	    5000));
	for (int64_t end = mono_ms() + SERVE_MS; mono_ms() < end; nap(100)) {
		pid_t now = host_lane(hoststat, 1, NULL);
		if (now > 0 && now != p2 && lane_serving(hoststat, 1, 0))
			break;
	}
	int64_t wall = mono_ms() - t0;
	long cpu = ((long)h_proc_ticks(host) - cpu0) * 1000 / sysconf(_SC_CLK_TCK);
	printf("• h2 reopened on its new server %lld ms after SIGHUP; the host used %ld ms of CPU\n",
	    (long long)wall, cpu);
	assert_true(lane_serving(hoststat, 1, 0));
	assert_int_not_equal(host_lane(hoststat, 1, NULL), p2);
	assert_true(cpu * 4 < wall);
}

/*
 * A second host for the same manifest (another run directory, as on
 * another machine) is refused lane by lane by the leases, and keeps trying;
 * the first serves on, untouched. In the same run directory it is refused
 * at once, naming the first.
 */
static void
test_a_second_host_is_refused_lane_by_lane(void **state)
{
	char outp[H_PATH_MAX * 2], outb[H_PATH_MAX * 2], other[H_PATH_MAX * 2];
	char out[H_PATH_MAX * 2], cmd[H_PATH_MAX * 8];
	long reopens = -1;
	pid_t p[3];
	int st;

	(void)state;
	manifest_write(manifest, 0x7, NULL);
	host_up(0, "host-first", manifest, rundir, 0x7, outp, sizeof(outp));
	for (int i = 0; i < 3; i++)
		p[i] = host_lane(hoststat, i, NULL);
	snprintf(other, sizeof(other), "%s/run2", base.dir);
	mkdir(other, 0700);
	snprintf(outb, sizeof(outb), "%s/host-second.out", base.dir);
	hosts[1] = h_daemon_spawn(&base, outb, "--spaces", manifest, "--run-dir", other, NULL);
	for (int i = 0; i < 3; i++) {
		char line[128];
		snprintf(line, sizeof(line), "host: lane %s exited (exit status 1); reopening it",
		    NAMES[i]);
		if (!h_log_has(outb, line, 15000))
			fail_msg("the second host's lane %s was not refused; see %s", NAMES[i], outb);
	}
	assert_true(h_log_has(outb, "[h1] ✗ delivery: a live lease already exists for shard 0", 0));
	assert_true(h_log_has(outb, "[h3] ✗ delivery: a live lease already exists for shard 0", 0));
	post_round(0x7);
	all_delivered(0x7, 0, "a second host");
	for (int i = 0; i < 3; i++) {
		assert_int_equal(host_lane(hoststat, i, &reopens), p[i]);
		assert_int_equal(reopens, 0);
	}
	st = host_down(1);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	snprintf(out, sizeof(out), "%s/host-third.out", base.dir);
	snprintf(cmd, sizeof(cmd), "%s --spaces '%s' --run-dir '%s' > '%s' 2>&1", COTAL_DAEMON_PATH,
	    manifest, rundir, out);
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	assert_true(h_log_has(out, "host: another delivery host (pid", 0));
}

/*
 * The host SIGKILLed (an OOM kill, a crash): every lane gets SIGTERM from
 * the kernel (PR_SET_PDEATHSIG) and releases its lease, so the host's
 * restart serves every lane at once instead of waiting out leases, or
 * finding orphans holding them.
 */
static void
test_a_killed_host_leaves_no_lane_behind(void **state)
{
	char outp[H_PATH_MAX * 2], outb[H_PATH_MAX * 2], logs[3][H_PATH_MAX * 3], key[512];
	int released[3];
	pid_t p[3];

	(void)state;
	manifest_write(manifest, 0x7, NULL);
	host_up(0, "host-killed", manifest, rundir, 0x7, outp, sizeof(outp));
	for (int i = 0; i < 3; i++) {
		p[i] = host_lane(hoststat, i, NULL);
		/* Nobody relays a lane's lines once its host is dead: its own
		 * log in its root has them. */
		space_key(NAMES[i], key, sizeof(key));
		snprintf(logs[i], sizeof(logs[i]), "%s/.cotal/delivery.%s.log", base.dir, key);
		released[i] = h_log_count(logs[i], "lease of shard 0 released");
	}
	assert_int_equal(kill(hosts[0], SIGKILL), 0);
	assert_int_equal(waitpid(hosts[0], NULL, 0), hosts[0]);
	hosts[0] = 0;
	for (int i = 0; i < 3; i++) {
		for (int64_t end = mono_ms() + 10000; h_log_count(logs[i],
		    "lease of shard 0 released") == released[i] && mono_ms() < end;)
			nap(50);
		if (h_log_count(logs[i], "lease of shard 0 released") == released[i])
			fail_msg("lane %s did not release its lease; see %s", NAMES[i], logs[i]);
		for (int64_t end = mono_ms() + 10000; kill(p[i], 0) == 0 && mono_ms() < end;)
			nap(50);
		assert_int_not_equal(kill(p[i], 0), 0);
	}
	int64_t t0 = mono_ms();
	host_up(0, "host-restarted", manifest, rundir, 0x7, outb, sizeof(outb));
	printf("• a SIGKILLed host's restart: every lane serving %lld ms later\n",
	    (long long)(mono_ms() - t0));
	assert_false(h_log_has(outb, "a live lease already exists", 0));
	post_round(0x7);
	all_delivered(0x7, 0, "a restarted host");
}

/* A manifest is validated whole before anything starts: a bad entry is
 * refused naming its index and field, a space twice too (the first through
 * `cotal deliver --spaces`, the deprecated entry, which runs the host). */
static void
test_a_bad_manifest_is_refused_before_anything_starts(void **state)
{
	static const struct {
		const char *json, *says;
	} bad[] = {
		{ "{\"spaces\":[{\"space\":\"h1\",\"root\":\"/x\"},{\"space\":\"h2\"}]}",
		  "spaces[1].root: missing" },
		{ "{\"spaces\":[{\"space\":\"h1\",\"root\":\"/x\",\"port\":1}]}",
		  "spaces[0]: unknown field \"port\"" },
		{ "{\"spaces\":[{\"space\":\"h1\",\"root\":\"/x\"},{\"space\":\"h1\",\"root\":\"/y\"}]}",
		  "spaces[1].space: \"h1\" is spaces[0]'s too" },
		{ "{\"spaces\":[{\"space\":\"h1\",\"root\":\"/x\",\"server\":\"http://a\"}]}",
		  "spaces[0].server: \"http://a\" is not a nats:// or tls:// URL" },
		{ "{\"spaces\":[],\"x\":1}", "unknown field \"x\"" },
	};
	char path[H_PATH_MAX * 2], out[H_PATH_MAX * 2], cmd[H_PATH_MAX * 8];

	(void)state;
	snprintf(path, sizeof(path), "%s/bad.json", base.dir);
	snprintf(out, sizeof(out), "%s/bad.out", base.dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(bad[i].json, f);
		fclose(f);
		/* The first through the deprecated entry, the rest direct. */
		if (i == 0)
			snprintf(cmd, sizeof(cmd), "COTAL_DELIVERYD='%s' %s deliver --spaces '%s' "
			    "--run-dir '%s' > '%s' 2>&1", COTAL_DAEMON_PATH, COTAL_CLI_PATH, path,
			    rundir, out);
		else
			snprintf(cmd, sizeof(cmd), "%s --spaces '%s' --run-dir '%s' > '%s' 2>&1",
			    COTAL_DAEMON_PATH, path, rundir, out);
		int st = system(cmd);
		if (i == 0)
			assert_true(h_log_has(out, "cotal deliver is deprecated", 0));
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
		if (!h_log_has(out, bad[i].says, 0))
			fail_msg("manifest %zu: no \"%s\" in %s", i, bad[i].says, out);
		assert_false(h_log_has(out, "host: lane", 0));
	}
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_three_spaces_one_host_each_post_reaches_only_its_space,
		    after),
		cmocka_unit_test_teardown(test_a_bad_manifest_is_refused_before_anything_starts,
		    after),
		cmocka_unit_test_teardown(test_a_lane_without_its_credential_is_retried_with_backoff,
		    after),
		cmocka_unit_test_teardown(test_sighup_adds_one_space_and_removes_another, after),
		cmocka_unit_test_teardown(test_a_second_host_is_refused_lane_by_lane, after),
		cmocka_unit_test_teardown(test_a_killed_host_leaves_no_lane_behind, after),
		cmocka_unit_test_teardown(test_a_lane_whose_lease_is_taken_closes_alone, after),
		cmocka_unit_test_teardown(test_a_lane_whose_credential_expires_closes_alone, after),
		cmocka_unit_test_teardown(
		    test_a_lane_whose_connections_are_kicked_is_disrupted_alone, after),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
