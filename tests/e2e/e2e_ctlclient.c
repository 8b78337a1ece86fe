/*
 * The caller's side of the control rails (lib/wire/ctlclient.h) against a real
 * broker, without the daemon: the test plays the responder itself with the
 * space's delivery credential, which may subscribe to the rail subjects and
 * publish to their reply subjects (WIRE.md §7).
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/wire/ctlclient.h"
#include "lib/creds/jwt.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define SEEN_MAX 64
#define CLOSE_BOUND_MS 3000     /* a closed connection fails a call this fast */
#define RECONNECT_WAIT_MS 20000
#define SLACK_MS 1000           /* a loaded host's lateness, on top of a deadline */

/* A timing check that says what it measured. */
#define EXPECT_MS(what, ms, lo, hi)                                                   \
	do {                                                                           \
		int64_t v_ = (ms);                                                     \
		if (v_ < (lo) || v_ >= (hi))                                           \
			fail_msg("%s took %" PRId64 " ms, want [%d, %d)", (what), v_,  \
			    (int)(lo), (int)(hi));                                      \
	} while (0)

static struct mesh mesh;
static struct h_fixture fx = { .mesh = &mesh };
static struct agent alice;

/* ---- the responder: the test's stand-in for the daemon's rails ---- */

enum mode {
	ANSWER,        /* ok:true echoing op and from; op "refuse" is refused */
	SILENT,        /* never answers */
	SCRIPT,        /* silent for the first `ignore` requests, then refuses */
};

struct seen {
	char subject[512];
	char reply[768];
	bool bound;        /* reply is "<subject>.reply.<x>" */
	int64_t at;        /* mono_ms() on arrival */
	char op[64];
	char from_id[256], from_name[128];
	char args[512];
};

/* A canned reply (verbatim JSON text) to one op. */
#define CANNED_MAX 8
struct canned {
	const char *op, *reply;
};

struct responder {
	pthread_mutex_t mu;
	struct canned canned[CANNED_MAX];
	natsConnection *nc;
	struct creds creds;
	natsSubscription *subs[RAIL_COUNT];
	enum mode mode;
	int ignore;
	const char *live;  /* the liveness reply's responder, or "garbage" */
	int n;
	struct seen seen[SEEN_MAX];
};

static struct responder resp = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void
answer(natsConnection *nc, const char *reply, json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT);

	natsConnection_Publish(nc, reply, text, (int)strlen(text));
	free(text);
	json_decref(v);
}

static void
on_request(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg)
{
	struct responder *r = arg;
	const char *subject = natsMsg_GetSubject(msg), *reply = natsMsg_GetReply(msg);
	json_t *body = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), 0,
	    NULL);
	const char *op = json_string_value(json_object_get(body, "op"));
	json_t *from = json_object_get(body, "from");
	struct seen *s = NULL;
	enum mode mode;
	int n;

	(void)sub;
	pthread_mutex_lock(&r->mu);
	n = ++r->n;
	mode = r->mode;
	if (n <= SEEN_MAX) {
		s = &r->seen[n - 1];
		memset(s, 0, sizeof(*s));
		snprintf(s->subject, sizeof(s->subject), "%s", subject);
		snprintf(s->reply, sizeof(s->reply), "%s", reply ? reply : "");
		s->bound = rail_reply_bound(subject, reply);
		s->at = mono_ms();
		snprintf(s->op, sizeof(s->op), "%s", op ? op : "");
		snprintf(s->from_id, sizeof(s->from_id), "%s",
		    json_string_value(json_object_get(from, "id")) ?: "");
		snprintf(s->from_name, sizeof(s->from_name), "%s",
		    json_string_value(json_object_get(from, "name")) ?: "");
		char *args = json_dumps(json_object_get(body, "args"), JSON_COMPACT);
		snprintf(s->args, sizeof(s->args), "%s", args ? args : "");
		free(args);
	}
	const char *live = r->live, *canned = NULL;
	int ignore = r->ignore;
	for (int i = 0; op != NULL && i < CANNED_MAX && r->canned[i].op != NULL; i++)
		if (strcmp(r->canned[i].op, op) == 0)
			canned = r->canned[i].reply;
	pthread_mutex_unlock(&r->mu);

	/* WIRE.md §5: a reply subject not under "<subject>.reply." is dropped,
	 * unanswered. */
	if (s == NULL || !rail_reply_bound(subject, reply) || mode == SILENT ||
	    (mode == SCRIPT && n <= ignore))
		goto out;
	if (strstr(subject, ".live.delivery.") != NULL) {
		if (live != NULL && strcmp(live, "garbage") == 0)
			natsConnection_PublishString(nc, reply, "not a liveness reply");
		else if (live != NULL)
			answer(nc, reply, json_pack("{s:s, s:s, s:s}", "plane", "delivery",
			    "responder", live, "instance", "inst-1"));
	} else if (canned != NULL) {
		natsConnection_PublishString(nc, reply, canned);
	} else if (mode == SCRIPT || (op != NULL && strcmp(op, "refuse") == 0)) {
		answer(nc, reply, json_pack("{s:b, s:s}", "ok", 0, "error", "scripted refusal"));
	} else if (op != NULL && strcmp(op, "evictPrincipals") == 0) {
		/* As the daemon answers: an EvictionResult per principal, in
		 * order, each verified gone (nobody is connected). */
		json_t *res = json_array(), *p;
		size_t i;
		json_array_foreach(json_object_get(json_object_get(body, "args"), "principals"), i, p)
			json_array_append_new(res, json_pack("{s:O, s:i, s:i, s:b, s:b}", "principal", p,
			    "kicked", 0, "remaining", 0, "verifiedGone", 1, "scanComplete", 1));
		answer(nc, reply, json_pack("{s:b, s:o}", "ok", 1, "data", res));
	} else {
		answer(nc, reply, json_pack("{s:b, s:{s:s, s:O}}", "ok", 1, "data", "op",
		    op ? op : "", "from", from ? from : json_null()));
	}
out:
	json_decref(body);
	natsMsg_Destroy(msg);
}

static void
responder_reset(enum mode mode, int ignore, const char *live)
{
	pthread_mutex_lock(&resp.mu);
	resp.mode = mode;
	resp.ignore = ignore;
	resp.live = live;
	resp.n = 0;
	memset(resp.seen, 0, sizeof(resp.seen));
	memset(resp.canned, 0, sizeof(resp.canned));
	pthread_mutex_unlock(&resp.mu);
}

static void
responder_can(const char *op, const char *reply)
{
	pthread_mutex_lock(&resp.mu);
	for (int i = 0; i < CANNED_MAX; i++) {
		if (resp.canned[i].op == NULL) {
			resp.canned[i].op = op;
			resp.canned[i].reply = reply;
			break;
		}
	}
	pthread_mutex_unlock(&resp.mu);
}

static int
responder_count(void)
{
	pthread_mutex_lock(&resp.mu);
	int n = resp.n;
	pthread_mutex_unlock(&resp.mu);
	return n;
}

static struct seen
responder_seen(int i)
{
	pthread_mutex_lock(&resp.mu);
	struct seen s = resp.seen[i];
	pthread_mutex_unlock(&resp.mu);
	return s;
}

static bool
wait_count(int n, int ms)
{
	for (int64_t end = mono_ms() + ms; mono_ms() < end; usleep(10 * 1000))
		if (responder_count() >= n)
			return true;
	return responder_count() >= n;
}

static void
creds_path(const char *profile, char *out, size_t len)
{
	char key[512];

	space_key(mesh.space, key, sizeof(key));
	snprintf(out, len, "%s/.cotal/space.%s/%s.creds", mesh.dir, key, profile);
}

/* The responder subscribes the three rails as the daemon would (queue
 * groups of WIRE.md §5), on a connection that reconnects forever. */
static void
responder_up(enum mode mode, int ignore, const char *live)
{
	struct conn_opts o = { .url = mesh.url, .name = "e2e responder", .timeout_ms = 5000,
		.max_reconnect = -1 };
	char path[H_PATH_MAX * 2], err[2048], subj[512];

	responder_reset(mode, ignore, live);
	creds_path("delivery", path, sizeof(path));
	if (creds_load(path, &resp.creds, err, sizeof(err)) != 0 ||
	    conn_open(&o, &resp.creds, &resp.nc, err, sizeof(err)) != 0)
		fail_msg("responder: %s", err);
	for (int r = 0; r < RAIL_COUNT; r++) {
		snprintf(subj, sizeof(subj), "cotal.%s.%s.*.*", mesh.token, rail_kind(r));
		assert_int_equal(natsConnection_QueueSubscribe(&resp.subs[r], resp.nc, subj,
		    rail_queue(r), on_request, &resp), NATS_OK);
	}
	assert_int_equal(natsConnection_FlushTimeout(resp.nc, 5000), NATS_OK);
}

static void
responder_down(void)
{
	for (int r = 0; r < RAIL_COUNT; r++) {
		natsSubscription_Destroy(resp.subs[r]);
		resp.subs[r] = NULL;
	}
	natsConnection_Destroy(resp.nc);
	resp.nc = NULL;
	if (resp.creds.jwt != NULL)
		creds_free(&resp.creds);
	memset(&resp.creds, 0, sizeof(resp.creds));
}

/* ---- the caller ---- */

struct caller {
	struct ctl_client *client;
	struct creds creds;
	natsConnection *nc;
};

static void
caller_open(struct caller *c, const char *creds_file, const char *owner, const char *actor,
	    const char *name, int max_reconnect)
{
	struct conn_opts o = { .url = mesh.url, .name = "e2e caller", .timeout_ms = 5000,
		.max_reconnect = max_reconnect };
	char err[2048];

	memset(c, 0, sizeof(*c));
	c->client = ctl_client_new(mesh.space, owner, actor, name);
	assert_non_null(c->client);
	ctl_client_conn_opts(c->client, &o);
	if (creds_load(creds_file, &c->creds, err, sizeof(err)) != 0 ||
	    conn_open(&o, &c->creds, &c->nc, err, sizeof(err)) != 0)
		fail_msg("caller: %s", err);
	ctl_client_attach(c->client, c->nc);
}

static void
caller_open_alice(struct caller *c, int max_reconnect)
{
	caller_open(c, alice.creds, alice.owner, alice.actor, "alice", max_reconnect);
}

static void
caller_close(struct caller *c)
{
	natsConnection_Destroy(c->nc);
	ctl_client_free(c->client);
	if (c->creds.jwt != NULL)
		creds_free(&c->creds);
	memset(c, 0, sizeof(*c));
}

/* A call or probe run on a thread, so the test can act while it waits. */
struct pending {
	pthread_t thread;
	struct ctl_client *client;
	bool liveness;
	int timeout_ms;
	struct ctl_result res;
	enum liveness live;
	int64_t begun, ended;
	bool started;      /* a thread runs until pending_join */
};

static void *
pending_run(void *arg)
{
	struct pending *p = arg;
	char inst[64], why[512];

	if (p->liveness)
		p->live = ctl_liveness(p->client, p->timeout_ms, inst, sizeof(inst), why,
		    sizeof(why));
	else
		ctl_call(p->client, RAIL_CTL, "durableJoin", NULL, p->timeout_ms, &p->res);
	p->ended = mono_ms();
	return NULL;
}

static void
pending_start(struct pending *p, struct ctl_client *client, bool liveness, int timeout_ms)
{
	memset(p, 0, sizeof(*p));
	p->client = client;
	p->liveness = liveness;
	p->timeout_ms = timeout_ms;
	p->begun = mono_ms();
	assert_int_equal(pthread_create(&p->thread, NULL, pending_run, p), 0);
	p->started = true;
}

static void
pending_join(struct pending *p)
{
	if (p->started)
		pthread_join(p->thread, NULL);
	p->started = false;
}

/*
 * What a test holds lives here, not on its stack, and the teardown after
 * each test lets go of whatever is still held: an assertion that ends a
 * test early is never followed by a leak report. c and mgr are callers, r
 * a call's result, call and probe requests run on threads.
 */
static struct caller c, mgr, spare;
static struct ctl_result r;
static struct pending call, probe;

static int
tidy(void **state)
{
	(void)state;
	pending_join(&call);
	pending_join(&probe);
	ctl_result_free(&call.res);
	ctl_result_free(&r);
	caller_close(&c);
	caller_close(&mgr);
	caller_close(&spare);
	if (resp.nc != NULL)
		responder_down();
	return 0;
}

static bool
wait_connected(natsConnection *nc, int ms)
{
	for (int64_t end = mono_ms() + ms; mono_ms() < end; usleep(20 * 1000))
		if (natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED)
			return true;
	return false;
}

static void
sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* The broker is started again and both the caller c and the responder are
 * connected to it, everything they sent before now handled. */
static void
broker_back(void)
{
	assert_int_equal(h_broker_start(&mesh), 0);
	assert_true(wait_connected(c.nc, RECONNECT_WAIT_MS));
	assert_true(wait_connected(resp.nc, RECONNECT_WAIT_MS));
	assert_int_equal(natsConnection_FlushTimeout(c.nc, 5000), NATS_OK);
	assert_int_equal(natsConnection_FlushTimeout(resp.nc, 5000), NATS_OK);
}

/* ---- setup ---- */

static int
setup(void **state)
{
	*state = &fx;
	if (h_mesh_up(&mesh, "ctl client", true) != 0 ||
	    h_agent_add(&mesh, "alice", "general", &alice) != 0)
		return -1;
	return 0;
}

/* Each test starts with the broker up and no responder, whatever an
 * earlier failed test left behind. */
static int
fresh(void **state)
{
	(void)state;
	if (resp.nc != NULL)
		responder_down();
	responder_reset(ANSWER, 0, NULL);
	return mesh.broker > 0 ? 0 : h_broker_start(&mesh);
}

/* ---- tests ---- */

/* WIRE.md §5: "Request: {op, args?, from:{id, name, ...}}. Reply: {ok,
 * data?, error?, details?}." A reply is read, an ok one and a refusal. */
static void
test_reply_is_read_ok_and_refusal(void **state)
{
	char id[256];

	(void)state;
	responder_up(ANSWER, 0, NULL);
	caller_open_alice(&c, 0);

	json_t *args = json_pack("{s:s}", "channel", "general");
	ctl_call(c.client, RAIL_CTL, "durableJoin", args, 5000, &r);
	/* args is not stolen; it went out as given. */
	size_t kept = json_object_size(args);
	json_decref(args);
	assert_int_equal(kept, 1);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_true(r.ok);
	assert_null(r.error);
	assert_string_equal(json_string_value(json_object_get(r.data, "op")), "durableJoin");
	snprintf(id, sizeof(id), "%s.%s", alice.owner, alice.actor);
	assert_string_equal(json_string_value(json_object_get(json_object_get(r.data, "from"),
	    "id")), id);
	ctl_result_free(&r);
	struct seen s = responder_seen(0);
	assert_string_equal(s.from_name, "alice");
	assert_string_equal(s.args, "{\"channel\":\"general\"}");

	ctl_call(c.client, RAIL_CTL, "refuse", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_false(r.ok);
	assert_non_null(r.error);
	assert_string_equal(r.error, "scripted refusal");
	ctl_result_free(&r);
	/* No args: none sent. */
	assert_string_equal(responder_seen(1).args, "");

	caller_close(&c);
	responder_down();
}

/* WIRE.md §5: "the caller names its own reply subject
 * `<request subject>.reply.<random>` (not `_INBOX`)" — on every rail,
 * for an agent and for the manager. */
static void
test_reply_subject_is_request_subject_reply_random(void **state)
{
	char path[H_PATH_MAX * 2], err[1024], want[512], owner[64] = "", actor[128] = "";
	struct creds sc = { 0 };
	struct jwt j;
	json_t *t;
	size_t i;

	(void)state;
	responder_up(ANSWER, 0, "bound");
	caller_open_alice(&c, 0);
	ctl_call(c.client, RAIL_CTL, "listMemberships", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_REPLIED);
	ctl_result_free(&r);
	assert_int_equal(ctl_liveness(c.client, 5000, NULL, 0, NULL, 0), LIVE_BOUND);

	/* The manager's principal is its JWT's principal:<o>.<a> tag. */
	creds_path("supervisor", path, sizeof(path));
	if (creds_load(path, &sc, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	int decoded = jwt_decode(sc.jwt, strlen(sc.jwt), &j, err, sizeof(err));
	creds_free(&sc);
	if (decoded != 0)
		fail_msg("%s", err);
	json_array_foreach(json_object_get(j.nats, "tags"), i, t) {
		const char *v = json_string_value(t);
		if (v != NULL && strncmp(v, "principal:", 10) == 0 &&
		    principal_parse(v + 10, owner, sizeof(owner), actor, sizeof(actor)) != 0)
			*owner = '\0';
	}
	jwt_free(&j);
	assert_true(*owner != '\0');
	caller_open(&mgr, path, owner, actor, "manager", 0);
	ctl_call(mgr.client, RAIL_ADMIN, "lifecycleMemberships", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_true(r.ok);
	ctl_result_free(&r);

	assert_int_equal(responder_count(), 3);
	const char *kinds[] = { "ctl.delivery", "live.delivery", "ctl.delivery-admin" };
	const char *owners[] = { alice.owner, alice.owner, owner };
	const char *actors[] = { alice.actor, alice.actor, actor };
	for (int k = 0; k < 3; k++) {
		struct seen s = responder_seen(k);
		snprintf(want, sizeof(want), "cotal.%s.%s.%s.%s", mesh.token, kinds[k], owners[k],
		    actors[k]);
		assert_string_equal(s.subject, want);
		assert_true(s.bound);
		assert_true(strncmp(s.reply, want, strlen(want)) == 0);
		assert_true(strncmp(s.reply + strlen(want), ".reply.", 7) == 0);
		assert_true(strlen(s.reply + strlen(want) + 7) >= 16);
	}
	/* Two requests never share a reply subject. */
	assert_string_not_equal(responder_seen(0).reply, responder_seen(1).reply);

	caller_close(&mgr);
	caller_close(&c);
	responder_down();
}

/* WIRE.md §5: "Caller side: no responders = `unbound`"; the seed: "Normal
 * replies, timeouts and broker no-responder answers keep their usual
 * classification." */
static void
test_no_responders_is_unbound(void **state)
{
	char why[512];

	(void)state;
	caller_open_alice(&c, 0);
	int64_t t0 = mono_ms();
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_NO_RESPONDERS);
	assert_null(r.reply);
	ctl_result_free(&r);
	assert_int_equal(ctl_liveness(c.client, 5000, NULL, 0, why, sizeof(why)), LIVE_UNBOUND);
	/* The broker answers at once: neither waited out its timeout. */
	assert_true(mono_ms() - t0 < 2000);
	caller_close(&c);
}

/* The seed: "Normal replies, timeouts and broker no-responder answers keep
 * their usual classification." A silent responder is a timeout, and a
 * liveness probe that times out is unknown. */
static void
test_timeout_is_timeout_and_liveness_unknown(void **state)
{

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, 0);
	int64_t t0 = mono_ms();
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 500, &r);
	assert_int_equal(r.outcome, CTL_TIMEOUT);
	assert_true(mono_ms() - t0 >= 500);
	ctl_result_free(&r);
	assert_int_equal(ctl_liveness(c.client, 500, NULL, 0, NULL, 0), LIVE_UNKNOWN);
	caller_close(&c);
	responder_down();
}

/* WIRE.md §5: Reply {"plane":"delivery","responder":"bound"|"unbound"|
 * "stale"|"unknown","instance":"<opaque>"}; an unreadable reply is unknown. */
static void
test_liveness_reads_the_responder_field(void **state)
{
	static const struct {
		const char *responder;
		enum liveness want;
	} cases[] = {
		{ "bound", LIVE_BOUND }, { "stale", LIVE_STALE }, { "unbound", LIVE_UNBOUND },
		{ "unknown", LIVE_UNKNOWN }, { "sideways", LIVE_UNKNOWN }, { "garbage", LIVE_UNKNOWN },
	};
	char inst[64], why[512];

	(void)state;
	responder_up(ANSWER, 0, NULL);
	caller_open_alice(&c, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		responder_reset(ANSWER, 0, cases[i].responder);
		enum liveness l = ctl_liveness(c.client, 5000, inst, sizeof(inst), why, sizeof(why));
		if (l != cases[i].want)
			fail_msg("responder \"%s\": %s, want %s (%s)", cases[i].responder,
			    liveness_name(l), liveness_name(cases[i].want), why);
		if (strcmp(cases[i].responder, "garbage") != 0)
			assert_string_equal(inst, "inst-1");
	}
	caller_close(&c);
	responder_down();
}

/*
 * The seed: "An endpoint's pending control and delivery requests reject if
 * their connection closes ... The request is not replayed on the new
 * connection: a lost reply does not prove that the operation did not run.
 * A liveness probe interrupted this way returns unknown, not unbound."
 *
 * A call with a 10 s timeout to a responder that never answers, and a
 * liveness probe beside it, on a connection that does not reconnect; the
 * broker is killed, the connection closes: both end well before their
 * timeout. The broker comes back: the responder still has seen each
 * request exactly once, and the client works on a new connection.
 */
static void
test_pending_requests_reject_when_connection_closes_and_are_not_replayed(void **state)
{
	struct conn_opts o = { .url = mesh.url, .name = "e2e caller 2", .timeout_ms = 5000 };
	char err[1024];

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, 0);
	pending_start(&call, c.client, false, 10000);
	pending_start(&probe, c.client, true, 10000);
	assert_true(wait_count(2, 5000));

	int64_t killed = mono_ms();
	assert_int_equal(h_broker_kill(&mesh), 0);
	pending_join(&call);
	pending_join(&probe);
	assert_int_equal(natsConnection_Status(c.nc), NATS_CONN_STATUS_CLOSED);
	assert_int_equal(call.res.outcome, CTL_CLOSED);
	EXPECT_MS("the call after the kill", call.ended - killed, 0, CLOSE_BOUND_MS);
	ctl_result_free(&call.res);
	assert_int_equal(probe.live, LIVE_UNKNOWN);
	EXPECT_MS("the probe after the kill", probe.ended - killed, 0, CLOSE_BOUND_MS);

	/* The broker is back; the responder reconnects on its own. */
	assert_int_equal(h_broker_start(&mesh), 0);
	assert_true(wait_connected(resp.nc, RECONNECT_WAIT_MS));
	assert_int_equal(natsConnection_FlushTimeout(resp.nc, 5000), NATS_OK);

	/* The client goes on working on a new connection. */
	ctl_client_conn_opts(c.client, &o);
	if (creds_load(alice.creds, &spare.creds, err, sizeof(err)) != 0 ||
	    conn_open(&o, &spare.creds, &spare.nc, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	ctl_client_attach(c.client, spare.nc);
	natsConnection_Destroy(c.nc);
	c.nc = spare.nc;
	spare.nc = NULL;
	sleep_ms(1000);
	assert_int_equal(responder_count(), 2);
	responder_reset(ANSWER, 0, "bound");
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_true(r.ok);
	ctl_result_free(&r);
	assert_int_equal(responder_count(), 1);

	caller_close(&c);
	caller_close(&spare);
	responder_down();
}

/*
 * The seed: "Normal replies, timeouts and broker no-responder answers keep
 * their usual classification." A broker that goes away under a connection
 * that nats.c reconnects does not close it: a call and a probe pending
 * through the outage end at their timeout, as a timeout (the probe as
 * unknown), never as a closed connection, and neither is replayed when the
 * broker is back.
 */
static void
test_pending_requests_time_out_while_the_connection_reconnects(void **state)
{
	const int timeout = 4000;

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, -1);
	pending_start(&call, c.client, false, timeout);
	pending_start(&probe, c.client, true, timeout);
	assert_true(wait_count(2, 5000));

	assert_int_equal(h_broker_kill(&mesh), 0);
	pending_join(&call);
	pending_join(&probe);
	assert_int_equal(call.res.outcome, CTL_TIMEOUT);
	EXPECT_MS("the call", call.ended - call.begun, timeout - 50, timeout + SLACK_MS);
	ctl_result_free(&call.res);
	assert_int_equal(probe.live, LIVE_UNKNOWN);
	EXPECT_MS("the probe", probe.ended - probe.begun, timeout - 50, timeout + SLACK_MS);
	assert_int_not_equal(natsConnection_Status(c.nc), NATS_CONN_STATUS_CLOSED);

	broker_back();
	sleep_ms(1000);
	assert_int_equal(responder_count(), 2);
	caller_close(&c);
	responder_down();
}

/*
 * A request pending through a broker restart gets its reply: the client's
 * reply subscription is renewed on the rebuilt connection, so a responder
 * that answers after the outage reaches the caller still waiting.
 */
static void
test_pending_request_is_answered_after_a_reconnect(void **state)
{
	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, -1);
	pending_start(&call, c.client, false, RECONNECT_WAIT_MS + 10000);
	assert_true(wait_count(1, 5000));
	struct seen s = responder_seen(0);

	assert_int_equal(h_broker_kill(&mesh), 0);
	broker_back();
	int64_t answered = mono_ms();
	assert_int_equal(natsConnection_PublishString(resp.nc, s.reply,
	    "{\"ok\":true,\"data\":{\"late\":true}}"), NATS_OK);
	assert_int_equal(natsConnection_FlushTimeout(resp.nc, 5000), NATS_OK);
	pending_join(&call);
	assert_int_equal(call.res.outcome, CTL_REPLIED);
	assert_true(call.res.ok);
	assert_true(json_is_true(json_object_get(call.res.data, "late")));
	EXPECT_MS("the reply after the reconnect", call.ended - answered, 0, CLOSE_BOUND_MS);
	ctl_result_free(&call.res);
	assert_int_equal(responder_count(), 1);
	caller_close(&c);
	responder_down();
}

/*
 * What "nothing is sent after the wait" rests on: a client's connection
 * keeps no reconnect buffer, so a publish while it reconnects is refused
 * by nats.c at once (never queued for the rebuilt connection), and a call
 * made then waits for the connection and ends as a timeout having sent
 * nothing.
 */
static void
test_nothing_is_queued_while_the_connection_reconnects(void **state)
{
	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, -1);
	assert_int_equal(h_broker_kill(&mesh), 0);
	for (int64_t end = mono_ms() + CLOSE_BOUND_MS;
	    natsConnection_Status(c.nc) != NATS_CONN_STATUS_RECONNECTING && mono_ms() < end;)
		sleep_ms(10);
	assert_int_equal(natsConnection_Status(c.nc), NATS_CONN_STATUS_RECONNECTING);
	char subj[256];
	snprintf(subj, sizeof(subj), "cotal.%s.ctl.delivery.%s.%s", mesh.token, alice.owner,
	    alice.actor);
	assert_int_equal(natsConnection_PublishString(c.nc, subj, "{}"),
	    NATS_INSUFFICIENT_BUFFER);
	int64_t t0 = mono_ms();
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 500, &r);
	assert_int_equal(r.outcome, CTL_TIMEOUT);
	assert_non_null(strstr(r.why, "nothing sent"));
	ctl_result_free(&r);
	EXPECT_MS("the call while reconnecting", mono_ms() - t0, 450, 500 + SLACK_MS);

	broker_back();
	sleep_ms(1000);
	assert_int_equal(responder_count(), 0);
	caller_close(&c);
	responder_down();
}

/* The seed: "An endpoint's pending control and delivery requests reject if
 * their connection closes, including when the endpoint stops ... it." */
static void
test_pending_request_rejects_when_endpoint_stops(void **state)
{

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, 0);
	pending_start(&call, c.client, false, 10000);
	assert_true(wait_count(1, 5000));
	int64_t closed = mono_ms();
	natsConnection_Close(c.nc);
	pending_join(&call);
	assert_int_equal(call.res.outcome, CTL_CLOSED);
	EXPECT_MS("the call after the close", call.ended - closed, 0, CLOSE_BOUND_MS);
	ctl_result_free(&call.res);
	/* A call on the closed connection fails at once and sends nothing. */
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 5000, &call.res);
	assert_int_equal(call.res.outcome, CTL_CLOSED);
	ctl_result_free(&call.res);
	assert_int_equal(ctl_liveness(c.client, 5000, NULL, 0, NULL, 0), LIVE_UNKNOWN);
	assert_int_equal(responder_count(), 1);
	caller_close(&c);
	responder_down();
}

/* The seed: "... including when the endpoint stops or replaces it. The
 * request is not replayed on the new connection". */
static void
test_pending_request_rejects_when_connection_replaced(void **state)
{
	struct conn_opts o = { .url = mesh.url, .name = "e2e caller 2", .timeout_ms = 5000 };
	char err[1024];

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, 0);
	pending_start(&call, c.client, false, 10000);
	pending_start(&probe, c.client, true, 10000);
	assert_true(wait_count(2, 5000));

	/* The new connection, held by spare until the client owns it. */
	ctl_client_conn_opts(c.client, &o);
	if (creds_load(alice.creds, &spare.creds, err, sizeof(err)) != 0 ||
	    conn_open(&o, &spare.creds, &spare.nc, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	int64_t replaced = mono_ms();
	ctl_client_attach(c.client, spare.nc);
	pending_join(&call);
	pending_join(&probe);
	assert_int_equal(call.res.outcome, CTL_CLOSED);
	EXPECT_MS("the call after the attach", call.ended - replaced, 0, CLOSE_BOUND_MS);
	ctl_result_free(&call.res);
	assert_int_equal(probe.live, LIVE_UNKNOWN);

	/* Nothing is replayed on the new connection; it serves new calls. */
	sleep_ms(1000);
	assert_int_equal(responder_count(), 2);
	responder_reset(ANSWER, 0, NULL);
	ctl_call(c.client, RAIL_CTL, "durableJoin", NULL, 5000, &r);
	assert_int_equal(r.outcome, CTL_REPLIED);
	ctl_result_free(&r);
	assert_int_equal(responder_count(), 1);
	/* Closing the old connection now touches nothing pending on the new. */
	natsConnection_Destroy(c.nc);
	c.nc = spare.nc;
	spare.nc = NULL;
	caller_close(&c);
	caller_close(&spare);
	responder_down();
}

/* Starts the responder after a delay, on its own thread. */
static void *
late_responder(void *arg)
{
	sleep_ms(*(int *)arg);
	responder_up(SCRIPT, 1, NULL);
	return NULL;
}

/*
 * The seed: "Only a request that times out or finds no responder is
 * retried. The first retry runs at once. Later retries are at most one
 * second apart ... A daemon that answers fails the start at once if it
 * refuses or its reply cannot be read."
 *
 * No responder for 2 s (no-responder answers, retried); then one that lets
 * the first request time out and refuses the second: the call ends on that
 * refusal, having sent exactly two requests to it.
 */
static void
test_retry_retries_timeout_and_no_responders_and_stops_on_refusal(void **state)
{
	pthread_t t;
	int delay = 2000;

	(void)state;
	caller_open_alice(&c, 0);
	responder_reset(SCRIPT, 1, NULL);
	int64_t t0 = mono_ms();
	assert_int_equal(pthread_create(&t, NULL, late_responder, &delay), 0);
	ctl_call_retry(c.client, RAIL_CTL, "durableJoin", NULL, 500, 15000, &r);
	int64_t took = mono_ms() - t0;
	pthread_join(t, NULL);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_false(r.ok);
	assert_string_equal(r.error, "scripted refusal");
	ctl_result_free(&r);
	assert_int_equal(responder_count(), 2);
	/* The responder was asked within a retry gap of binding, and the
	 * second request came at once after the first timed out. */
	struct seen first = responder_seen(0), second = responder_seen(1);
	EXPECT_MS("the first request to the late responder", first.at - t0, delay,
	    delay + CTL_RETRY_GAP_MS + SLACK_MS);
	EXPECT_MS("the retry after a timeout", second.at - first.at, 450,
	    CTL_RETRY_GAP_MS + SLACK_MS);
	EXPECT_MS("the retried call", took, delay, delay + 2 * CTL_RETRY_GAP_MS + 500 + SLACK_MS);
	/* Nothing more after the refusal. */
	sleep_ms(1500);
	assert_int_equal(responder_count(), 2);
	caller_close(&c);
	responder_down();
}

/*
 * The seed: "Later retries are at most one second apart, shortened as the
 * wait runs out, so a daemon that binds in its last seconds is still
 * asked. The wait ends on time even while a retry is still connecting, and
 * nothing is sent after it."
 */
static void
test_retry_sends_nothing_after_the_wait(void **state)
{
	const int total = 3000;

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, 0);
	int64_t t0 = mono_ms();
	ctl_call_retry(c.client, RAIL_CTL, "durableJoin", NULL, 300, total, &r);
	int64_t took = mono_ms() - t0;
	assert_int_equal(r.outcome, CTL_TIMEOUT);
	ctl_result_free(&r);
	EXPECT_MS("the retry loop", took, total - 50, total + SLACK_MS);
	sleep_ms(1500);
	int n = responder_count();
	if (n < 4)
		fail_msg("%d requests in %d ms, want at least 4", n, total);
	for (int i = 0; i < n; i++) {
		struct seen s = responder_seen(i);
		EXPECT_MS("a request's send", s.at - t0, 0, total);
		if (i > 0)
			EXPECT_MS("the gap between two requests", s.at - responder_seen(i - 1).at,
			    0, CTL_RETRY_GAP_MS + 200);
	}
	/* The first retry ran at once after the first try's 300 ms, not a
	 * retry gap after its send. */
	EXPECT_MS("the first retry", responder_seen(1).at - responder_seen(0).at, 250,
	    CTL_RETRY_GAP_MS - 300);
	caller_close(&c);
	responder_down();
}

/* The seed: "The wait ends on time even while a retry is still connecting,
 * and nothing is sent after it." The broker is gone for the whole wait: the
 * retry loop ends on time, and the client's reconnect after it sends
 * nothing. */
static void
test_retry_ends_on_time_while_reconnecting(void **state)
{
	const int total = 3000;

	(void)state;
	responder_up(SILENT, 0, NULL);
	caller_open_alice(&c, -1);
	assert_int_equal(h_broker_kill(&mesh), 0);
	int64_t t0 = mono_ms();
	ctl_call_retry(c.client, RAIL_CTL, "durableJoin", NULL, 1000, total, &r);
	int64_t took = mono_ms() - t0;
	assert_int_equal(r.outcome, CTL_TIMEOUT);
	ctl_result_free(&r);
	EXPECT_MS("the retry loop", took, total - 50, total + SLACK_MS);

	broker_back();
	sleep_ms(1000);
	assert_int_equal(responder_count(), 0);
	caller_close(&c);
	responder_down();
}

/* ---- the CLI ---- */

#define EXPECT_OUT(rc_want, needle)                                                       \
	do {                                                                               \
		if (rc != (rc_want) || strstr(out, (needle)) == NULL)                      \
			fail_msg("exit %d (want %d), output lacks \"%s\":\n%s", rc, (rc_want), \
			    (needle), out);                                                \
	} while (0)

/* The seed: "Agents' durable join, leave and membership-list requests go
 * over its ctl.delivery rail." The CLI's agent commands call it as the
 * agent itself. */
static void
test_cli_agent_commands_call_ctl_delivery_as_the_agent(void **state)
{
	char out[H_OUT_MAX], want[512], id[256];
	int rc;

	(void)state;
	snprintf(id, sizeof(id), "%s.%s", alice.owner, alice.actor);
	responder_up(ANSWER, 0, NULL);
	responder_can("durableJoin", "{\"ok\":true,\"data\":{\"durable\":true,\"generation\":1}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "join", "alice", "general", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(0, "alice joined general durably (generation 1)");
	struct seen s = responder_seen(0);
	snprintf(want, sizeof(want), "cotal.%s.ctl.delivery.%s.%s", mesh.token, alice.owner,
	    alice.actor);
	assert_string_equal(s.subject, want);
	assert_true(s.bound);
	assert_string_equal(s.op, "durableJoin");
	assert_string_equal(s.args, "{\"channel\":\"general\"}");
	assert_string_equal(s.from_id, id);
	assert_string_equal(s.from_name, "alice");

	/* --json: the raw reply. */
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "join", "alice", "general", "--space",
	    mesh.space, "--json", NULL);
	EXPECT_OUT(0, "{\"ok\":true,\"data\":{\"durable\":true,\"generation\":1}}");

	/* Leave finds the generation through listMemberships. */
	responder_reset(ANSWER, 0, NULL);
	responder_can("listMemberships", "{\"ok\":true,\"data\":{\"memberships\":["
	    "{\"channel\":\"ops\",\"generation\":2,\"activated\":true},"
	    "{\"channel\":\"general\",\"generation\":3,\"activated\":false}]}}");
	responder_can("durableLeave", "{\"ok\":true,\"data\":{\"channel\":\"general\"}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "leave", "alice", "general", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(0, "alice left general (generation 3)");
	assert_int_equal(responder_count(), 2);
	snprintf(want, sizeof(want), "{\"lifecycleUid\":\"%s\"}", alice.uid);
	assert_string_equal(responder_seen(0).op, "listMemberships");
	assert_string_equal(responder_seen(0).args, want);
	snprintf(want, sizeof(want), "\"lifecycleUid\":\"%s\"", alice.uid);
	s = responder_seen(1);
	assert_string_equal(s.op, "durableLeave");
	assert_non_null(strstr(s.args, "\"generation\":3"));
	assert_non_null(strstr(s.args, "\"channel\":\"general\""));
	assert_non_null(strstr(s.args, want));
	/* With --generation, no list. */
	responder_reset(ANSWER, 0, NULL);
	responder_can("durableLeave", "{\"ok\":true,\"data\":{\"channel\":\"general\","
	    "\"alreadyLeft\":true}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "leave", "alice", "general", "--space",
	    mesh.space, "--generation", "7", NULL);
	EXPECT_OUT(0, "alice had already left general (generation 7)");
	assert_int_equal(responder_count(), 1);
	/* No open row of that channel. */
	responder_reset(ANSWER, 0, NULL);
	responder_can("listMemberships", "{\"ok\":true,\"data\":{\"memberships\":[]}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "leave", "alice", "general", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(1, "alice has no open durable membership of general");

	responder_reset(ANSWER, 0, NULL);
	responder_can("listMemberships", "{\"ok\":true,\"data\":{\"memberships\":["
	    "{\"channel\":\"ops\",\"generation\":2,\"activated\":true},"
	    "{\"channel\":\"general\",\"generation\":3,\"activated\":false}]}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "memberships", "alice", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(0, "ops generation 2 activated\ngeneral generation 3 not activated\n");

	responder_can("readHistory", "{\"ok\":true,\"data\":{\"items\":[{\"id\":\"m1\","
	    "\"channel\":\"general\",\"from\":{\"id\":\"local.B\",\"name\":\"bob\"},"
	    "\"parts\":[{\"kind\":\"text\",\"text\":\"hi there\"}]}],\"complete\":false}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "history", "alice", "general", "--space",
	    mesh.space, "--limit", "5", NULL);
	EXPECT_OUT(0, "general bob: hi there\nmore history exists\n");
	s = responder_seen(responder_count() - 1);
	assert_string_equal(s.op, "readHistory");
	assert_string_equal(s.args, "{\"channel\":\"general\",\"limit\":5}");

	/* A refusal: exit 1 with the daemon's words. */
	responder_reset(ANSWER, 0, NULL);
	responder_can("durableJoin", "{\"ok\":false,\"error\":\"channel \\\"secret\\\" is not "
	    "within your read ACL [general]\"}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "join", "alice", "secret", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(1, "agent join: channel \"secret\" is not within your read ACL [general]");
	/* Not durable: the reason, and not a success. */
	responder_reset(ANSWER, 0, NULL);
	responder_can("durableJoin", "{\"ok\":true,\"data\":{\"durable\":false,\"reason\":"
	    "\"activation superseded by a concurrent leave or rejoin\"}}");
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "join", "alice", "general", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(1, "alice did not join general durably: activation superseded by a "
	    "concurrent leave or rejoin");
	responder_down();

	/* Nobody serves the rail. */
	rc = h_cotal(&mesh, out, sizeof(out), "agent", "join", "alice", "general", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(1, "no responders on the ctl.delivery rail");
}

/* The seed: "The manager needs this daemon ... the verified eviction a
 * restart performs all go over the daemon's ctl.delivery-admin rail." The
 * CLI's admin commands call it as the manager (the space's supervisor
 * credential, its principal tag). Issue 43: "Prose by default, --json for
 * scripts": each answer both ways, --json the reply as it came. */
static void
test_cli_admin_commands_call_the_admin_rail_as_the_manager(void **state)
{
	char out[H_OUT_MAX], want[512], uid[] = "abcdefghijklmnopqrstuvwxyz";
	int rc;

	(void)state;
	responder_up(ANSWER, 0, "bound");
	responder_can("evictPrincipal", "{\"ok\":true,\"data\":{\"principal\":\"local.ABC\","
	    "\"kicked\":1,\"remaining\":0,\"verifiedGone\":true,\"scanComplete\":true}}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "--space", mesh.space,
	    "--json", NULL);
	EXPECT_OUT(0, "{\"principal\":\"local.ABC\",\"kicked\":1,\"remaining\":0,"
	    "\"verifiedGone\":true,\"scanComplete\":true}}\n");
	struct seen s = responder_seen(0);
	snprintf(want, sizeof(want), "cotal.%s.ctl.delivery-admin.", mesh.token);
	assert_true(strncmp(s.subject, want, strlen(want)) == 0);
	assert_true(s.bound);
	/* from.id is the subject's caller: the supervisor's principal tag. */
	assert_string_equal(s.subject + strlen(want), s.from_id);
	assert_string_equal(s.args, "{\"principal\":\"local.ABC\"}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "--space", mesh.space,
	    NULL);
	EXPECT_OUT(0, "local.ABC: gone, verified (1 connection kicked)\n");
	assert_null(strchr(out, '{'));

	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "local.DEF",
	    "--space", mesh.space, "--json", NULL);
	EXPECT_OUT(0, "[{\"principal\":\"local.ABC\",\"kicked\":0,\"remaining\":0,"
	    "\"verifiedGone\":true,\"scanComplete\":true},{\"principal\":\"local.DEF\"");
	s = responder_seen(2);
	assert_string_equal(s.args, "{\"principals\":[\"local.ABC\",\"local.DEF\"]}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "local.DEF",
	    "--space", mesh.space, NULL);
	EXPECT_OUT(0, "local.ABC: gone, verified (0 connections kicked)\n");
	EXPECT_OUT(0, "local.DEF: ");

	/* What a daemon's answers hold, prose and --json. */
	responder_can("lifecycleMemberships", "{\"ok\":true,\"data\":{\"memberships\":["
	    "{\"channel\":\"general\",\"generation\":2,\"joinCursor\":10,\"activated\":true},"
	    "{\"channel\":\"o\\u001b[2Jps\",\"generation\":1,\"joinCursor\":3,\"leaveCursor\":7,"
	    "\"activated\":false}]}}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "inventory", "local.ABC", uid, "--space",
	    mesh.space, "--json", NULL);
	EXPECT_OUT(0, "{\"channel\":\"general\",\"generation\":2,\"joinCursor\":10,"
	    "\"activated\":true}");
	snprintf(want, sizeof(want), "{\"principal\":\"local.ABC\",\"lifecycleUid\":\"%s\"}", uid);
	assert_string_equal(responder_seen(4).args, want);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "inventory", "local.ABC", uid, "--space",
	    mesh.space, NULL);
	EXPECT_OUT(0, "2 membership rows:\n  general  generation 2, joined at 10, activated\n"
	    "  o\\x1b[2Jps  generation 1, joined at 3, left at 7, not activated yet\n");

	rc = h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", mesh.space,
	    "--expect", "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789",
	    "--json", NULL);
	EXPECT_OUT(0, "\"op\":\"reloadCreds\"");
	assert_string_equal(responder_seen(6).args, "{\"expected\":{\"delivery\":"
	    "\"abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"}}");
	responder_can("reloadCreds", "{\"ok\":true,\"data\":{\"delivery\":{\"ok\":true,"
	    "\"brokerAccepted\":true,\"residentSwap\":\"scheduled\"}}}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", mesh.space, NULL);
	EXPECT_OUT(0, "the daemon holds the credential its file holds now, proved with the broker "
	    "(accepted); a renewed one is adopted and the resident connection moves onto it "
	    "250 ms after this answer (the daemon's log says which)\n");

	rc = h_cotal(&mesh, out, sizeof(out), "admin", "liveness", "--space", mesh.space, NULL);
	EXPECT_OUT(0, "bound (instance inst-1)");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "liveness", "local.ABC", "--space",
	    mesh.space, "--json", NULL);
	EXPECT_OUT(0, "\"op\":\"principalLiveness\"");
	responder_can("principalLiveness", "{\"ok\":true,\"data\":{\"principal\":\"local.ABC\","
	    "\"state\":\"gone\",\"sweepComplete\":false,\"note\":\"CONNZ page 2 timed out\"}}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "liveness", "local.ABC", "--space",
	    mesh.space, NULL);
	EXPECT_OUT(0, "local.ABC: gone (the sweep was incomplete); CONNZ page 2 timed out\n");

	responder_can("reloadCreds", "{\"ok\":false,\"error\":\"delivery: the daemon has not "
	    "finished starting; nothing adopted\"}");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", mesh.space, NULL);
	EXPECT_OUT(1, "admin reload: delivery: the daemon has not finished starting; "
	    "nothing adopted");
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", mesh.space, "--json",
	    NULL);
	EXPECT_OUT(1, "{\"ok\":false,\"error\":\"delivery: the daemon has not finished starting;");
	responder_down();

	rc = h_cotal(&mesh, out, sizeof(out), "admin", "liveness", "--space", mesh.space, NULL);
	EXPECT_OUT(1, "unbound");
}

static void *
late_evict_responder(void *arg)
{
	sleep_ms(*(int *)arg);
	responder_up(ANSWER, 0, NULL);
	return NULL;
}

/* The seed: "A manager retiring a static agent uses the same retry cadence
 * for an unanswered verified-eviction request, within a 15-second total
 * wait." --wait bounds it; a daemon that binds within it is asked. */
static void
test_cli_admin_waits_with_the_retry_cadence(void **state)
{
	char out[H_OUT_MAX];
	pthread_t t;
	int rc, delay = 1500;

	(void)state;
	int64_t t0 = mono_ms();
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "--space", mesh.space,
	    "--wait", "1500", NULL);
	int64_t took = mono_ms() - t0;
	EXPECT_OUT(1, "no responders on the ctl.delivery-admin rail");
	/* It may end up to one shortest gap (100 ms, lib/wire/ctlclient.c) early:
	 * when no further try fits, it stops rather than send after the wait. */
	EXPECT_MS("cotal admin evict --wait 1500", took, 1500 - 100, 1500 + 2 * SLACK_MS);

	assert_int_equal(pthread_create(&t, NULL, late_evict_responder, &delay), 0);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.ABC", "--space", mesh.space,
	    "--wait", "6000", "--json", NULL);
	pthread_join(t, NULL);
	EXPECT_OUT(0, "\"op\":\"evictPrincipal\"");
	assert_int_equal(responder_count(), 1);
	responder_down();
}

/* 600 principals, one per line of a --from file: local.p0 … local.p599. */
static void
write_principals(const char *path, int n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "# holders to retire\n\n");
	for (int i = 0; i < n; i++)
		fprintf(f, "local.p%d\n", i);
	fclose(f);
}

/*
 * Issue 31, the seed: "The manager sends those holders as one
 * evictPrincipals request per 256 [...] The manager records the holders
 * each request verified before it sends the next, so a restart cut short by
 * its executor window resumes after the last recorded request. A daemon
 * that does not serve that verb refuses it."
 */
static void
test_cli_admin_evict_sends_batches_and_resumes_from_its_ledger(void **state)
{
	char out[H_OUT_MAX], from[H_PATH_MAX], ledger[H_PATH_MAX];
	struct stat st;
	int rc;

	(void)state;
	snprintf(from, sizeof(from), "%s/holders.txt", mesh.dir);
	snprintf(ledger, sizeof(ledger), "%s/evict.ledger", mesh.dir);
	write_principals(from, 600);
	responder_up(ANSWER, 0, "bound");

	/* Cut short (SIGKILL) right after the first request's ledger write. */
	setenv("COTAL_TEST_EVICT_KILL_AFTER", "1", 1);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	unsetenv("COTAL_TEST_EVICT_KILL_AFTER");
	assert_int_not_equal(rc, 0);
	assert_int_equal(responder_count(), 1);
	assert_non_null(strstr(responder_seen(0).args, "{\"principals\":[\"local.p0\",\"local.p1\","));
	assert_int_equal(stat(ledger, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	json_t *l = json_load_file(ledger, 0, NULL);
	assert_non_null(l);
	assert_int_equal(json_integer_value(json_object_get(l, "batches")), 3);
	json_decref(l);
	size_t first;
	assert_int_equal(h_evict_ledger(ledger, &first), 1);
	assert_int_equal(first, 256);

	/* Run again with the same ledger: exactly the two requests left. */
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	EXPECT_OUT(0, "records 1 of 3 batches sent; resuming with batch 2");
	assert_int_equal(responder_count(), 3);
	assert_non_null(strstr(responder_seen(1).args, "{\"principals\":[\"local.p256\","));
	assert_non_null(strstr(responder_seen(2).args, "{\"principals\":[\"local.p512\","));
	assert_non_null(strstr(out, "batch 3 of 3: 88 principals, 88 verified gone"));
	size_t verified;
	assert_int_equal(h_evict_ledger(ledger, &verified), 3);
	assert_int_equal(verified, 600);
	/* A third run sends nothing; another eviction's list is refused. */
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	EXPECT_OUT(0, "all 3 batches were sent before");
	assert_int_equal(responder_count(), 3);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "local.other", "--from", from,
	    "--ledger", ledger, "--space", mesh.space, NULL);
	EXPECT_OUT(1, "records another eviction");
	assert_int_equal(responder_count(), 3);
	/* A ledger that cut the same list otherwise (another build's batch
	 * size) could skip principals: refused. */
	json_t *other = json_load_file(ledger, 0, NULL);
	json_object_set_new(other, "batches", json_integer(4));
	json_object_set_new(other, "sent", json_integer(1));
	json_array_clear(json_object_get(other, "verified"));
	json_array_append_new(json_object_get(other, "verified"), json_array());
	assert_int_equal(json_dump_file(other, ledger, 0), 0);
	json_decref(other);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	EXPECT_OUT(1, "cut this eviction into 4 batches, this cotal into 3");
	assert_int_equal(responder_count(), 3);

	/* A daemon that does not serve the verb refuses it: quoted, the
	 * batch named, nothing sent after it. */
	responder_reset(ANSWER, 0, "bound");
	responder_can("evictPrincipals", "{\"ok\":false,\"error\":\"op \\\"evictPrincipals\\\" not "
	    "supported on the delivery admin service\"}");
	unlink(ledger);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	EXPECT_OUT(1, "admin evict: op \"evictPrincipals\" not supported on the delivery admin "
	    "service");
	EXPECT_OUT(1, "batch 1 of 3 (principals 1-256) not done: nothing after it was sent");
	assert_int_equal(responder_count(), 1);
	assert_int_not_equal(access(ledger, F_OK), 0);
	responder_down();

	/* A bad line is refused by its place, before anything is sent. */
	FILE *f = fopen(from, "a");
	fprintf(f, "nobody\n");
	fclose(f);
	rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--space",
	    mesh.space, NULL);
	snprintf(ledger, sizeof(ledger), "admin evict: --from %s:603 \"nobody\" is not", from);
	EXPECT_OUT(1, ledger);
}

/* Every command refuses a bad argument, naming it, before it dials. */
static void
test_cli_refuses_bad_arguments_naming_them(void **state)
{
	static const struct {
		int rc;
		const char *needle;
		const char *argv[8];
	} cases[] = {
		{ 2, "agent join: missing arguments", { "agent", "join", "alice", "--space", "S" } },
		{ 2, "agent join: --space is required", { "agent", "join", "alice", "general" } },
		{ 2, "agent join: unexpected argument \"extra\"",
		  { "agent", "join", "alice", "general", "extra", "--space", "S" } },
		{ 2, "agent join: unknown or incomplete option \"--bogus\"",
		  { "agent", "join", "alice", "general", "--bogus", "--space", "S" } },
		{ 1, "agent join: CHANNEL \"gen.*\" must be a concrete channel",
		  { "agent", "join", "alice", "gen.*", "--space", "S" } },
		{ 2, "agent history: --limit \"0\" must be a whole number from 1 to 200",
		  { "agent", "history", "alice", "general", "--limit", "0", "--space", "S" } },
		{ 2, "agent leave: --generation \"x\" must be a whole number",
		  { "agent", "leave", "alice", "general", "--generation", "x", "--space", "S" } },
		{ 2, "agent join: unknown or incomplete option \"--generation\"",
		  { "agent", "join", "alice", "general", "--generation", "1", "--space", "S" } },
		{ 2, "admin evict: --wait \"-1\" must be a whole number",
		  { "admin", "evict", "local.ABC", "--wait", "-1", "--space", "S" } },
		{ 1, "admin evict: PRINCIPAL \"nobody\" is not <owner>.<actor>",
		  { "admin", "evict", "nobody", "--space", "S" } },
		{ 1, "admin inventory: UID \"BAD\" must match",
		  { "admin", "inventory", "local.ABC", "BAD", "--space", "S" } },
		{ 2, "admin reload: --expect \"abc\" must be the SHA-256",
		  { "admin", "reload", "--expect", "abc", "--space", "S" } },
	};
	char out[H_OUT_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *const *a = cases[i].argv;
		int rc = h_cotal(&mesh, out, sizeof(out), a[0], a[1], a[2], a[3], a[4], a[5], a[6],
		    a[7], NULL);
		EXPECT_OUT(cases[i].rc, cases[i].needle);
	}
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reply_is_read_ok_and_refusal, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_reply_subject_is_request_subject_reply_random, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_no_responders_is_unbound, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_timeout_is_timeout_and_liveness_unknown, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_liveness_reads_the_responder_field, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_pending_requests_reject_when_connection_closes_and_are_not_replayed, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_pending_requests_time_out_while_the_connection_reconnects, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_pending_request_is_answered_after_a_reconnect, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_nothing_is_queued_while_the_connection_reconnects, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_pending_request_rejects_when_endpoint_stops, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_pending_request_rejects_when_connection_replaced, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_retry_retries_timeout_and_no_responders_and_stops_on_refusal, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_retry_sends_nothing_after_the_wait, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_retry_ends_on_time_while_reconnecting, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_cli_agent_commands_call_ctl_delivery_as_the_agent, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_cli_admin_commands_call_the_admin_rail_as_the_manager,
		    fresh, tidy),
		cmocka_unit_test_setup_teardown(test_cli_admin_waits_with_the_retry_cadence, fresh, tidy),
		cmocka_unit_test_setup_teardown(test_cli_admin_evict_sends_batches_and_resumes_from_its_ledger,
		    fresh, tidy),
		cmocka_unit_test_setup_teardown(test_cli_refuses_bad_arguments_naming_them, fresh, tidy),
	};

	signal(SIGPIPE, SIG_IGN);
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
