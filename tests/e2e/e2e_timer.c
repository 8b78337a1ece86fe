/*
 * The checkpoint timer writer against a real broker and the real daemon
 * (issue 7; seed, "The daemon also hosts the space's checkpoint timer
 * writer"; WIRE.md §6). On a broker older than 2.12 (2.9, 2.10) the worker
 * is the scheduler: it publishes each .fire itself. On 2.12 and later (the
 * 2.14 run) the .armed publish carries the schedule and the broker fires:
 * its .fire carries "Nats-Schedule-Next: purge" (which the worker never
 * writes), purges the .armed, and the worker's own fire count stays 0.
 * Checkpoint records are written with the provisioner's credential; the
 * .schedule requests come from a workflow host's credential minted here
 * (no standing profile publishes them), as the CLI's dev signer would.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/dev_signer.h"
#include "cli/mint.h"
#include "lib/creds/creds.h"
#include "lib/creds/nkeys.h"
#include "lib/wire/timers.h"
#include "lib/wire/tokens.h"
#include "lib/workspace.h"
#include "tests/harness/harness.h"

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;
static struct conn host; /* publishes .schedule requests */
static struct h_fixture fx = { &mesh, &dmn, NULL, { &host, &prov } };
static char ept[160];
static int64_t pre_deadline;
static bool broker_fires; /* nats-server >= 2.12 */

#define UP_LINE "✓ timer writer up (space timers) — workflow pauses on this space expire"
#define ARM_MS 10000   /* a request is armed within this */
#define LATE_MS 1000   /* a fire is this close to its deadline */

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(int64_t ms)
{
	if (ms > 0) {
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
		nanosleep(&ts, NULL);
	}
}

static void
subject(const char *tid, const char *kind, char *out, size_t len)
{
	snprintf(out, len, "cotal.%s.ept.wf.inst1.1.%s.%s", mesh.token, tid, kind);
}

/* The checkpoint record cp.wf.<tid> in cotal_records_<s>. */
static int
checkpoint(const char *tid, const char *state, int gen, int64_t deadline)
{
	char key[128], val[256], err[512];

	snprintf(key, sizeof(key), "cp.wf.%s", tid);
	snprintf(val, sizeof(val), "{\"state\":\"%s\",\"deadlineGeneration\":%d,\"deadline\":%"
	    PRId64 ",\"endpoint\":\"wf\"}", state, gen, deadline);
	if (h_kv_put(&prov, &mesh, "records", key, val, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ checkpoint %s: %s\n", key, err);
		return -1;
	}
	return 0;
}

/* A .schedule request for subject token tid with body timerId id. */
static int
schedule(const char *tid, const char *id, int gen, int64_t deadline, const char *hname)
{
	char subj[256], body[256];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	subject(tid, "schedule", subj, sizeof(subj));
	snprintf(body, sizeof(body), "{\"v\":1,\"timerId\":\"%s\",\"generation\":%d,\"deadline\":%"
	    PRId64 "}", id, gen, deadline);
	s = natsMsg_Create(&m, subj, NULL, body, (int)strlen(body));
	if (s == NATS_OK && hname != NULL)
		s = natsMsgHeader_Set(m, hname, "@at 2030-01-01T00:00:00Z");
	if (s == NATS_OK)
		s = js_PublishMsg(&pa, host.js, m, NULL, &jerr);
	if (s != NATS_OK)
		fprintf(stderr, "✗ schedule %s: %s (JetStream error %d)\n", subj, natsStatus_GetText(s),
		    (int)jerr);
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return s == NATS_OK ? 0 : -1;
}

/* Messages EPT_<s> holds on subj. */
static int64_t
count_on(const char *subj)
{
	return h_stream_subject_msgs(&prov, ept, subj);
}

/* The last message on subj, waiting up to ms for one; NULL when none. */
static natsMsg *
last_on(const char *subj, int ms)
{
	for (int64_t end = now_ms() + ms;; sleep_ms(50)) {
		natsMsg *m = NULL;
		jsErrCode jerr = 0;
		if (js_GetLastMsg(&m, prov.js, ept, subj, NULL, &jerr) == NATS_OK)
			return m;
		if (now_ms() >= end)
			return NULL;
	}
}

static json_int_t
body_int(natsMsg *m, const char *field)
{
	json_t *j = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	json_int_t v = json_integer_value(json_object_get(j, field));

	json_decref(j);
	return v;
}

static const char *
header(natsMsg *m, const char *name)
{
	const char *v = NULL;

	return natsMsgHeader_Get(m, name, &v) == NATS_OK ? v : NULL;
}

/* The schedule an .armed message carries for deadline and its .fire. */
static void
expect_schedule(natsMsg *m, int64_t deadline, const char *fire)
{
	char iso[TIMER_ISO_MAX], at[TIMER_ISO_MAX + 8];

	if (!broker_fires) {
		/* Older brokers: the worker schedules, the broker is told nothing. */
		assert_null(header(m, "Nats-Schedule"));
		assert_null(header(m, "Nats-Schedule-Target"));
		return;
	}
	assert_true(timer_iso_utc(deadline, iso, sizeof(iso)));
	snprintf(at, sizeof(at), "@at %s", iso);
	assert_non_null(header(m, "Nats-Schedule"));
	assert_string_equal(header(m, "Nats-Schedule"), at);
	assert_non_null(header(m, "Nats-Schedule-Target"));
	assert_string_equal(header(m, "Nats-Schedule-Target"), fire);
}

/* A .fire as whoever fires on this broker publishes it: the broker marks
 * its one-shot fire "Nats-Schedule-Next: purge"; the worker never does. */
static void
expect_fired_by(natsMsg *m, const char *armed)
{
	assert_non_null(header(m, "Nats-Scheduler"));
	assert_string_equal(header(m, "Nats-Scheduler"), armed);
	if (broker_fires) {
		assert_non_null(header(m, "Nats-Schedule-Next"));
		assert_string_equal(header(m, "Nats-Schedule-Next"), "purge");
	} else {
		assert_null(header(m, "Nats-Schedule-Next"));
	}
}

/* The .armed messages left on a subject once its timer fired: the broker
 * purges a one-shot schedule when it fires it. */
static int64_t
armed_after_fire(int64_t armed_count)
{
	return broker_fires ? 0 : armed_count;
}

/* Wait for the fire of tid; the time it was seen, or 0. */
static int64_t
wait_fire(const char *tid, int ms)
{
	char subj[256];

	subject(tid, "fire", subj, sizeof(subj));
	for (int64_t end = now_ms() + ms; now_ms() < end; sleep_ms(20))
		if (count_on(subj) > 0)
			return now_ms();
	return 0;
}

/*
 * A workflow host of the space: may publish .schedule requests (and read
 * its own inbox), signed by the space account's dev signing key.
 */
static int
host_connect(char *err, size_t errlen)
{
	char key[SPACE_KEY_MAX + 1], path[WS_PATH_MAX + 64], upub[NKEY_PUBLIC_LEN + 1];
	char seed[NKEY_SEED_LEN + 1], why[256] = "out of memory", inbox[INBOX_PREFIX_MAX];
	json_t *mesh_doc = NULL, *claims, *pub = json_array(), *sub = json_array();
	struct nkey signer, user;
	struct workspace ws;
	char *jwt = NULL, *text = NULL;
	int rc = -1;

	memset(&signer, 0, sizeof(signer));
	memset(&user, 0, sizeof(user));
	space_key(mesh.space, key, sizeof(key));
	json_array_append_new(pub, json_sprintf("cotal.%s.ept.*.*.*.*.schedule", mesh.token));
	if (ws_locate(mesh.dir, &ws, err, errlen) != 0 ||
	    (mesh_doc = ws_dev_mesh(&ws, err, errlen)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "%s/keys/space.%s-signing.nk", ws.mesh, key);
	if (devkey_load(path, NKEY_ACCOUNT, 0, &signer, err, errlen) != 0)
		goto out;
	if (nkey_generate(NKEY_USER, &user) != 0) {
		snprintf(err, errlen, "cannot generate a user key");
		goto out;
	}
	nkey_public(&user, upub);
	inbox_prefix(upub, inbox, sizeof(inbox));
	json_array_append_new(sub, json_sprintf("%s.>", inbox));
	struct dev_user_spec spec = {
		.name = "workflow-host", .sub_pub = upub, .pub_allow = pub, .sub_allow = sub,
		.issuer_account = json_string_value(json_object_get(json_object_get(json_object_get(
		    mesh_doc, "spaces"), mesh.space), "account")),
	};
	if ((claims = dev_user_claims(&spec)) != NULL)
		jwt = dev_jwt_sign(claims, &signer, why, sizeof(why));
	json_decref(claims);
	nkey_seed_text(&user, seed);
	snprintf(path, sizeof(path), "%s/workflow-host.creds", mesh.dir);
	if (jwt == NULL || (text = creds_format(jwt, seed)) == NULL) {
		snprintf(err, errlen, "cannot sign the host's credential: %s", why);
		goto out;
	}
	if (ws_write_file(path, text, strlen(text), 0600, err, errlen) != 0)
		goto out;
	rc = h_connect(&mesh, path, &host, err, errlen);
out:
	nkey_wipe(&signer);
	nkey_wipe(&user);
	free(text);
	free(jwt);
	json_decref(mesh_doc);
	json_decref(pub);
	json_decref(sub);
	return rc;
}

static int
daemon_up(void)
{
	if (h_daemon_start(&mesh, &dmn, NULL) != 0)
		return -1;
	return h_daemon_ready(&dmn, 20000, NULL);
}

/* SIGTERM: the daemon releases its lease and exits; within ms? */
static bool
daemon_stop(int ms)
{
	kill(dmn.pid, SIGTERM);
	return h_daemon_wait_exit(&dmn, ms) != -1;
}

static int
setup(void **state)
{
	char err[1024];

	*state = &fx;
	broker_fires = h_broker_version() >= 212;
	if (h_mesh_up(&mesh, "timers", true) != 0)
		return -1;
	snprintf(ept, sizeof(ept), "EPT_%s", mesh.token);
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	if (host_connect(err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ workflow host: %s\n", err);
		return -1;
	}
	/* Rate-limited log lines count over 10 s windows here, not 60 s. */
	setenv("COTAL_TEST_LOG_WINDOW_MS", "10000", 1);
	/* A request sitting in the stream before the daemon starts. */
	pre_deadline = now_ms() + 12000;
	if (checkpoint("pre", "waiting", 1, pre_deadline) != 0 ||
	    schedule("pre", "pre", 1, pre_deadline, NULL) != 0 || daemon_up() != 0 ||
	    !h_log_has(dmn.log, UP_LINE, 20000)) {
		fprintf(stderr, "✗ the timer writer did not come up; see %s\n", dmn.log);
		return -1;
	}
	return 0;
}

/*
 * "A .schedule sitting in the stream before the daemon starts → .armed
 * within seconds with the right target; .fire at the deadline (±1 s) with
 * Nats-Scheduler = the .armed subject."
 */
static void
test_request_before_start_is_armed_and_fires(void **state)
{
	char armed[256], fire[256];
	natsMsg *m;
	int64_t seen;

	(void)state;
	subject("pre", "armed", armed, sizeof(armed));
	subject("pre", "fire", fire, sizeof(fire));
	assert_non_null(m = last_on(armed, ARM_MS));
	assert_int_equal(body_int(m, "generation"), 1);
	assert_int_equal(body_int(m, "deadline"), pre_deadline);
	expect_schedule(m, pre_deadline, fire);
	natsMsg_Destroy(m);
	assert_int_equal(count_on(fire), 0);

	seen = wait_fire("pre", 30000);
	assert_true(seen > 0);
	assert_true(seen >= pre_deadline - LATE_MS && seen <= pre_deadline + LATE_MS);
	assert_non_null(m = last_on(fire, 0));
	expect_fired_by(m, armed);
	assert_int_equal(body_int(m, "generation"), 1);
	natsMsg_Destroy(m);
	sleep_ms(1000);
	assert_int_equal(count_on(fire), 1);
	assert_int_equal(count_on(armed), armed_after_fire(1));
}

/* "Re-arm with a newer generation moves the deadline; the old one never fires." */
static void
test_rearm_moves_the_deadline(void **state)
{
	char armed[256], fire[256];
	int64_t d1 = now_ms() + 3000, d2 = now_ms() + 6000, seen;
	natsMsg *m;

	(void)state;
	subject("re", "armed", armed, sizeof(armed));
	subject("re", "fire", fire, sizeof(fire));
	assert_int_equal(checkpoint("re", "waiting", 1, d1), 0);
	assert_int_equal(schedule("re", "re", 1, d1, NULL), 0);
	assert_non_null(m = last_on(armed, ARM_MS));
	natsMsg_Destroy(m);
	assert_int_equal(checkpoint("re", "waiting", 2, d2), 0);
	assert_int_equal(schedule("re", "re", 2, d2, NULL), 0);
	/* The same generation again is a no-op. */
	assert_int_equal(schedule("re", "re", 2, d2, NULL), 0);
	/* A schedule rolls its subject up: the broker keeps the newest only. */
	const int64_t both = broker_fires ? 1 : 2;
	natsMsg *last = NULL;
	for (int64_t end = now_ms() + ARM_MS; now_ms() < end; sleep_ms(50)) {
		natsMsg_Destroy(last);
		if ((last = last_on(armed, 0)) != NULL && body_int(last, "generation") == 2)
			break;
	}
	assert_non_null(last);
	assert_int_equal(body_int(last, "generation"), 2);
	expect_schedule(last, d2, fire);
	natsMsg_Destroy(last);
	assert_int_equal(count_on(armed), both);

	sleep_ms(d1 + LATE_MS - now_ms());
	assert_int_equal(count_on(fire), 0);
	seen = wait_fire("re", 10000);
	assert_true(seen >= d2 - LATE_MS && seen <= d2 + LATE_MS);
	assert_non_null(m = last_on(fire, 0));
	assert_int_equal(body_int(m, "generation"), 2);
	assert_int_equal(body_int(m, "deadline"), d2);
	expect_fired_by(m, armed);
	natsMsg_Destroy(m);
	sleep_ms(1000);
	assert_int_equal(count_on(fire), 1);
	assert_int_equal(count_on(armed), armed_after_fire(both));
	/* This daemon's worker saw both timers (pre and re) fire: it published
	 * them itself where the broker does not fire, none where it does. */
	if (broker_fires) {
		/* Two reports later, still none of its own. */
		sleep_ms(2500);
		assert_int_equal(h_daemon_counter_reaches(&dmn, "timer", "fired", 0, 5000), 0);
	} else {
		assert_int_equal(h_daemon_counter_reaches(&dmn, "timer", "fired", 2, 5000), 2);
	}
}

/*
 * "Poison (timerId ≠ subject token) → terminated, nothing armed, consumer
 * has nothing pending"; a scheduling header is a permission denial; no
 * checkpoint (unknown), a settled one or a mismatch (stale) is acked and
 * never armed.
 */
static void
test_poison_and_fenced_requests_are_not_armed(void **state)
{
	const char *tids[] = { "poison", "hdr", "unknown", "settled", "stale" };
	char subj[256], durable[160], req[160];
	int64_t d = now_ms() + 60000;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	bool idle = false;

	(void)state;
	assert_int_equal(checkpoint("poison", "waiting", 1, d), 0);
	assert_int_equal(schedule("poison", "someone_else", 1, d, NULL), 0);
	assert_int_equal(checkpoint("hdr", "waiting", 1, d), 0);
	/* A broker that runs schedules refuses a schedule on EPT_REQ itself
	 * (it does not allow them); a header it lets through reaches the
	 * worker, which refuses it. */
	if (broker_fires)
		assert_int_equal(schedule("hdr", "hdr", 1, d, "Nats-Schedule"), -1);
	assert_int_equal(schedule("hdr", "hdr", 1, d, "Nats-Schedule-Target"), 0);
	assert_int_equal(schedule("unknown", "unknown", 1, d, NULL), 0);
	assert_int_equal(checkpoint("settled", "completed", 1, d), 0);
	assert_int_equal(schedule("settled", "settled", 1, d, NULL), 0);
	assert_int_equal(checkpoint("stale", "waiting", 2, d), 0);
	assert_int_equal(schedule("stale", "stale", 1, d, NULL), 0);

	assert_true(h_log_has(dmn.log, "! timer writer: refused a .schedule request permanently "
	    "(timerId does not equal the subject's token poison)", ARM_MS));
	assert_true(h_log_has(dmn.log, "! timer writer: refused a .schedule request permanently "
	    "(permission-denied", ARM_MS));
	snprintf(req, sizeof(req), "EPT_REQ_%s", mesh.token);
	snprintf(durable, sizeof(durable), "timerw_%s", mesh.token);
	for (int64_t end = now_ms() + ARM_MS; !idle && now_ms() < end; sleep_ms(100)) {
		if (js_GetConsumerInfo(&ci, prov.js, req, durable, NULL, &jerr) != NATS_OK)
			continue;
		idle = ci->NumPending == 0 && ci->NumAckPending == 0 && ci->NumRedelivered == 0;
		jsConsumerInfo_Destroy(ci);
	}
	assert_true(idle);
	for (size_t i = 0; i < sizeof(tids) / sizeof(tids[0]); i++) {
		subject(tids[i], "armed", subj, sizeof(subj));
		assert_int_equal(count_on(subj), 0);
	}
}

/*
 * Issue 28: "10,000 poison .schedule requests leave ≤ 100 log lines", and
 * "Repeated lines from one cause are rate-limited with a count". Every one
 * is refused (the timer's counter); the lines stop at ten a window and the
 * first line after it says how many were not written.
 */
static void
test_poison_requests_do_not_fill_the_log(void **state)
{
	int64_t d = now_ms() + 600000;
	const char *line = "refused a .schedule request permanently";

	(void)state;
	assert_int_equal(checkpoint("flood", "waiting", 1, d), 0);
	int before = h_log_count(dmn.log, line);
	int64_t refused = (int64_t)h_daemon_counter(&dmn, "timer", "refused");
	int64_t t0 = now_ms();
	for (int i = 0; i < 10000; i++)
		assert_int_equal(schedule("flood", "not-flood", 1, d, NULL), 0);
	printf("• 10,000 poison requests published in %lld ms\n", (long long)(now_ms() - t0));
	/* (The status file is a second behind: what was read before may
	 * still miss the last test's refusals.) */
	assert_true(h_daemon_counter_reaches(&dmn, "timer", "refused", refused + 10000, 60000) >=
	    refused + 10000);
	int lines = h_log_count(dmn.log, line) - before;
	printf("• %d log lines for 10,000 refusals\n", lines);
	assert_true(lines >= 1);
	assert_true(lines <= 100);
	/* A window later, one more: the count of the rest is said first. */
	sleep_ms(10100);
	assert_int_equal(schedule("flood", "not-flood", 1, d, NULL), 0);
	assert_true(h_log_has(dmn.log, "more like this in the last 10 s", ARM_MS));
	assert_true(h_log_count(dmn.log, line) - before <= 100);
}

/*
 * "Daemon killed before a deadline and restarted after it → the fire is
 * published once" (stopped with SIGTERM, which releases the lease: within
 * 2 s with the writer running), and once more across another restart.
 */
static void
test_fire_due_while_down_is_published_once(void **state)
{
	char armed[256], fire[256];
	int64_t d = now_ms() + 4000, t0;
	natsMsg *m;

	(void)state;
	subject("down", "armed", armed, sizeof(armed));
	subject("down", "fire", fire, sizeof(fire));
	assert_int_equal(checkpoint("down", "waiting", 1, d), 0);
	assert_int_equal(schedule("down", "down", 1, d, NULL), 0);
	assert_non_null(m = last_on(armed, ARM_MS));
	natsMsg_Destroy(m);

	t0 = now_ms();
	assert_true(daemon_stop(2000));
	assert_true(now_ms() - t0 <= 2000);
	if (broker_fires) {
		/* The broker is the scheduler: it fires on time, daemon or not. */
		int64_t seen = wait_fire("down", 15000);
		assert_true(seen >= d - LATE_MS && seen <= d + LATE_MS);
		assert_int_equal(daemon_up(), 0);
	} else {
		sleep_ms(d + 1500 - now_ms());
		assert_int_equal(count_on(fire), 0);
		assert_int_equal(daemon_up(), 0);
		assert_true(wait_fire("down", 15000) > 0);
	}
	assert_non_null(m = last_on(fire, 0));
	expect_fired_by(m, armed);
	natsMsg_Destroy(m);

	assert_true(daemon_stop(2000));
	assert_int_equal(daemon_up(), 0);
	/* The same request again, the worker restarted twice: nothing new
	 * is armed or fired for a generation that fired. */
	assert_int_equal(schedule("down", "down", 1, d, NULL), 0);
	sleep_ms(3000);
	assert_int_equal(count_on(fire), 1);
	assert_int_equal(count_on(armed), armed_after_fire(1));
}

/*
 * EPT_<s> allows message schedules where the broker runs them (WIRE.md §6),
 * and provisioning the space again changes nothing and refuses nothing.
 */
static void
test_ept_allows_schedules_where_the_broker_runs_them(void **state)
{
	char out[H_OUT_MAX], subj[256];
	natsMsg *reply = NULL;

	(void)state;
	snprintf(subj, sizeof(subj), "$JS.API.STREAM.INFO.%s", ept);
	assert_int_equal(natsConnection_RequestString(&reply, prov.nc, subj, "", 5000), NATS_OK);
	json_t *info = json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
	    JSON_DECODE_INT_AS_REAL, NULL);
	natsMsg_Destroy(reply);
	json_t *cfg = json_object_get(info, "config");
	bool allows = json_is_true(json_object_get(cfg, "allow_msg_schedules"));
	bool rollup = json_is_true(json_object_get(cfg, "allow_rollup_hdrs"));
	json_decref(info);
	assert_true(allows == broker_fires);
	assert_true(rollup == broker_fires);

	int rc = h_cotal(&mesh, out, sizeof(out), "space", "provision", mesh.space, NULL);
	if (rc != 0 || strstr(out, "✗") != NULL || strstr(out, "allows message schedules") != NULL)
		fail_msg("provision again: exit %d\n%s", rc, out);
}

/* The worker's pid once it is other than old and running. */
static pid_t
timer_pid_after(pid_t old, int ms)
{
	for (int64_t end = now_ms() + ms; now_ms() < end; sleep_ms(100)) {
		pid_t p = h_daemon_worker_pid(&dmn, "timer");
		if (p > 0 && p != old)
			return p;
	}
	return 0;
}

/*
 * "A timer worker killed in a loop does not disturb delivery (a durable
 * post still arrives), and the backoff grows as specified": 5 s doubling.
 */
static void
test_killed_writer_leaves_delivery_alone(void **state)
{
	static const char *const lines[] = {
		"! timer writer: down (killed by SIGKILL) — retrying in 5s; pauses on this space "
		"do not expire until it is back",
		"! timer writer: down (killed by SIGKILL) — retrying in 10s; pauses on this space "
		"do not expire until it is back",
		"! timer writer: down (killed by SIGKILL) — retrying in 20s; pauses on this space "
		"do not expire until it is back",
	};
	struct agent ann, ben;
	struct conn ca, cb;
	uint64_t last = 0;
	char err[1024];
	bool hdr = false;
	pid_t pid = 0;

	(void)state;
	assert_int_equal(h_agent_add(&mesh, "ann", "room1", &ann), 0);
	assert_int_equal(h_agent_add(&mesh, "ben", "room1", &ben), 0);
	assert_int_equal(h_connect(&mesh, ann.creds, &ca, err, sizeof(err)), 0);
	assert_int_equal(h_connect(&mesh, ben.creds, &cb, err, sizeof(err)), 0);
	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	assert_int_equal(h_member_put(&prov, &mesh, &ben, "room1", last, 0, 1, err, sizeof(err)), 0);

	for (int i = 0; i < 3; i++) {
		assert_true((pid = timer_pid_after(pid, 15000)) > 0);
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_true(h_log_has(dmn.log, lines[i], 3000));
		if (i == 0)
			assert_int_equal(h_post(&ca, &mesh, &ann, "room1", "while-down", "hi", NULL),
			    0);
	}
	json_t *frames = h_dlv_drain(&cb, &mesh, &ben, 8000, 1500, &hdr, err, sizeof(err));
	assert_non_null(frames);
	assert_int_equal(json_array_size(frames), 1);
	json_decref(frames);
	assert_int_equal(waitpid(dmn.pid, NULL, WNOHANG), 0); /* the daemon runs on */
	h_close(&ca);
	h_close(&cb);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_before_start_is_armed_and_fires),
		cmocka_unit_test(test_ept_allows_schedules_where_the_broker_runs_them),
		cmocka_unit_test(test_rearm_moves_the_deadline),
		cmocka_unit_test(test_poison_and_fenced_requests_are_not_armed),
		cmocka_unit_test(test_poison_requests_do_not_fill_the_log),
		cmocka_unit_test(test_fire_due_while_down_is_published_once),
		cmocka_unit_test(test_killed_writer_leaves_delivery_alone),
	};

	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
