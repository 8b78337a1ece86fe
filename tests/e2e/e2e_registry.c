/*
 * The membership registry and the control rails against a real broker and
 * the real daemon (WIRE.md §5; the seed's "Where it runs" and "The three
 * pieces"): agents call ctl.delivery as themselves, the manager calls
 * ctl.delivery-admin with the space's supervisor credential, all through
 * lib/ctlclient.
 */
#include <pthread.h>
#include <setjmp.h>
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

#include "lib/clock.h"
#include "lib/wire/ctlclient.h"
#include "lib/creds/jwt.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define CALL_MS 10000
#define WAIT_MS 8000
#define QUIET_MS 1500
#define SLOW_SWEEP_MS 3000 /* the test hook's hold on a sweep naming local.slow0 */
#define JOIN_GAP_MS 3000   /* the test hook's hold on a join of "narrowgap" */

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;     /* the provisioner: test rows */
static struct conn mgr;      /* the manager (supervisor credential) */
static struct ctl_client *mgr_cl;
static struct h_fixture fx = { &mesh, &dmn, &mgr_cl, { &mgr, &prov } };
static bool broker29;        /* nats-server 2.9: no KICK */


static int
setup(void **state)
{
	char err[1024];

	*state = &fx;
	if (h_mesh_up(&mesh, "registry", true) != 0)
		return -1;
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	if (h_connect_manager(&mesh, &mgr, &mgr_cl, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ manager: %s\n", err);
		return -1;
	}
	/* Issue 39: the registry decides among a space at CI's scale, 20,000
	 * live lifecycles and 60,000 tombstones beside each test's own. */
	if (h_space_rows(&prov, &mesh, 20000, 60000, 0, 0, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ a space of 20,000 live lifecycles and 60,000 tombstones: %s\n",
		    err);
		return -1;
	}
	/* Test hooks of the daemon's test build (worker-registry). */
	setenv("COTAL_TEST_SWEEP_DELAY", "local.slow0:3000", 1);
	setenv("COTAL_TEST_JOIN_DELAY", "narrowgap:3000", 1);
	setenv("COTAL_TEST_ACTIVATE_DELAY", "leavegap:3000", 1);
	if (h_daemon_start(&mesh, &dmn, NULL) != 0)
		return -1;
	return h_daemon_ready(&dmn, 20000, "serving cotal.", "fan-out bound", "reader bound", NULL);
}

static void
peer_up(struct h_peer *p, const char *name, const char *allow)
{
	char err[1024];

	if (h_peer_up(&mesh, name, allow, p, err, sizeof(err)) != 0)
		fail_msg("%s: %s", name, err);
}

/* One call; args is JSON text or NULL. */
static void
call(struct ctl_client *cl, enum rail rail, const char *op, const char *args,
     struct ctl_result *r)
{
	json_t *a = args ? json_loads(args, 0, NULL) : NULL;

	if (args != NULL && a == NULL)
		fail_msg("bad test args %s", args);
	ctl_call(cl, rail, op, a, CALL_MS, r);
	json_decref(a);
	if (r->outcome != CTL_REPLIED)
		fail_msg("%s: %s (%s)", op, ctl_outcome_name(r->outcome), r->why);
}

/* The data of an ok reply (caller decrefs). */
static json_t *
call_ok(struct ctl_client *cl, enum rail rail, const char *op, const char *args)
{
	struct ctl_result r;

	call(cl, rail, op, args, &r);
	if (!r.ok)
		fail_msg("%s %s refused: %s", op, args ? args : "", r.error ? r.error : "?");
	json_t *d = json_incref(r.data);
	ctl_result_free(&r);
	return d;
}

/* The error text of a refusal (caller frees). */
static char *
call_err(struct ctl_client *cl, enum rail rail, const char *op, const char *args)
{
	struct ctl_result r;

	call(cl, rail, op, args, &r);
	if (r.ok)
		fail_msg("%s %s was not refused", op, args ? args : "");
	char *e = strdup(r.error ? r.error : "");
	ctl_result_free(&r);
	return e;
}

static void
assert_refused(struct ctl_client *cl, enum rail rail, const char *op, const char *args,
	       const char *want)
{
	char *e = call_err(cl, rail, op, args);

	if (strcmp(e, want) != 0)
		fail_msg("%s: refusal\n  got  %s\n  want %s", op, e, want);
	free(e);
}

static json_t *
join(struct h_peer *p, const char *channel)
{
	char args[512];

	snprintf(args, sizeof(args), "{\"channel\":\"%s\"}", channel);
	return call_ok(p->cl, RAIL_CTL, "durableJoin", args);
}

static json_t *
drain(struct h_peer *p, int ms)
{
	char err[1024];
	bool hdr = false;
	json_t *frames = h_dlv_drain(&p->c, &mesh, &p->a, ms, QUIET_MS, &hdr, err, sizeof(err));

	if (frames == NULL)
		fail_msg("%s", err);
	return frames;
}

static const char *
frame_text(json_t *frame)
{
	json_t *parts = json_object_get(json_object_get(frame, "msg"), "parts");

	return json_string_value(json_object_get(json_array_get(parts, 0), "text"));
}

struct call_thread {
	struct ctl_client *cl;
	json_t *args;
	struct ctl_result *r;
};

static void *
join_in_thread(void *arg)
{
	struct call_thread *ct = arg;

	ctl_call(ct->cl, RAIL_CTL, "durableJoin", ct->args, CALL_MS + JOIN_GAP_MS, ct->r);
	return NULL;
}

static json_t *
row_get(const struct h_peer *p, const char *channel)
{
	char key[1024], err[512];
	char *v;

	snprintf(key, sizeof(key), "%s/%s.%s.%s", channel, p->a.owner, p->a.actor, p->a.uid);
	v = h_kv_get(&prov, &mesh, "members", key, err, sizeof(err));
	json_t *row = v ? json_loads(v, 0, NULL) : NULL;
	free(v);
	return row;
}

/* ---- the guards ---- */

/* Publish a raw request as p on its own rail subject with reply. */
static void
raw_request(struct h_peer *p, enum rail rail, const char *reply, const char *body)
{
	char subj[512], prefix[300];

	snprintf(prefix, sizeof(prefix), "cotal.%s", mesh.token);
	assert_true(rail_subject_format(rail, prefix, p->a.owner, p->a.actor, subj, sizeof(subj)));
	assert_int_equal(natsConnection_PublishRequestString(p->c.nc, subj, reply, body), NATS_OK);
	natsConnection_Flush(p->c.nc);
}

/*
 * WIRE §5: "A request whose reply subject is missing or not under
 * <subject>.reply. is dropped with a log line, unanswered." Another
 * principal's .reply. subject and the sender's own _INBOX get nothing; the
 * same request with its own reply subject is answered.
 */
static void
test_forged_reply_target_is_never_answered(void **state)
{
	struct h_peer a, b;
	natsSubscription *sb = NULL, *sa = NULL;
	natsMsg *m = NULL;
	char victim[512], inbox[128], own[512], body[512], pre[300];

	(void)state;
	peer_up(&a, "forger", "general");
	peer_up(&b, "victim", "general");
	snprintf(pre, sizeof(pre), "cotal.%s", mesh.token);
	snprintf(victim, sizeof(victim), "%s.ctl.delivery.%s.%s.reply.stolen", pre, b.a.owner,
	    b.a.actor);
	assert_int_equal(natsConnection_SubscribeSync(&sb, b.c.nc, victim), NATS_OK);
	/* The forger's own inbox (its actor is its user key): the credential
	 * may subscribe there. */
	assert_true(inbox_prefix(a.a.actor, inbox, sizeof(inbox)));
	strncat(inbox, ".forged", sizeof(inbox) - strlen(inbox) - 1);
	assert_int_equal(natsConnection_SubscribeSync(&sa, a.c.nc, inbox), NATS_OK);
	natsConnection_Flush(a.c.nc);
	natsConnection_Flush(b.c.nc);
	int64_t before = (int64_t)h_daemon_counter(&dmn, "registry", "unanswered");

	snprintf(body, sizeof(body), "{\"op\":\"listMemberships\",\"args\":{\"lifecycleUid\":\"%s\"},"
	    "\"from\":{\"id\":\"%s.%s\",\"name\":\"forger\"}}", a.a.uid, a.a.owner, a.a.actor);
	raw_request(&a, RAIL_CTL, victim, body);
	raw_request(&a, RAIL_CTL, inbox, body);
	assert_int_equal(natsSubscription_NextMsg(&m, sb, 1500), NATS_TIMEOUT);
	assert_int_equal(natsSubscription_NextMsg(&m, sa, 500), NATS_TIMEOUT);
	assert_true(h_daemon_counter_reaches(&dmn, "registry", "unanswered", before + 2, 5000) >=
	    before + 2);
	assert_true(h_log_has(dmn.log, "unanswered: its reply subject", 3000));

	/* The same request with its own reply subject is answered. */
	snprintf(own, sizeof(own), "%s.ctl.delivery.%s.%s.reply.mine", pre, a.a.owner, a.a.actor);
	natsSubscription *so = NULL;
	assert_int_equal(natsConnection_SubscribeSync(&so, a.c.nc, own), NATS_OK);
	raw_request(&a, RAIL_CTL, own, body);
	assert_int_equal(natsSubscription_NextMsg(&m, so, CALL_MS), NATS_OK);
	assert_non_null(strstr(natsMsg_GetData(m), "\"ok\":true"));
	natsMsg_Destroy(m);
	natsSubscription_Destroy(so);
	natsSubscription_Destroy(sa);
	natsSubscription_Destroy(sb);
	h_peer_down(&a);
	h_peer_down(&b);
}

/*
 * WIRE §5: "from.id must equal the subject caller and the owner must be a
 * principal owner, else {ok:false,error:"sender mismatch - request
 * rejected"}"; an unknown op names the service; malformed arguments are a
 * refusal naming the field.
 */
static void
test_sender_op_and_field_guards(void **state)
{
	struct h_peer a;

	(void)state;
	peer_up(&a, "guarded", "general");
	/* A body whose from.id is not the subject's caller (the credential
	 * may publish only on its own rail subject). */
	char pre[300], own[512], body[512];
	natsSubscription *so = NULL;
	natsMsg *m = NULL;
	snprintf(pre, sizeof(pre), "cotal.%s", mesh.token);
	snprintf(own, sizeof(own), "%s.ctl.delivery.%s.%s.reply.g1", pre, a.a.owner, a.a.actor);
	assert_int_equal(natsConnection_SubscribeSync(&so, a.c.nc, own), NATS_OK);
	snprintf(body, sizeof(body), "{\"op\":\"listMemberships\",\"args\":{},"
	    "\"from\":{\"id\":\"local.SOMEBODY_ELSE\",\"name\":\"x\"}}");
	raw_request(&a, RAIL_CTL, own, body);
	assert_int_equal(natsSubscription_NextMsg(&m, so, CALL_MS), NATS_OK);
	assert_string_equal(natsMsg_GetData(m),
	    "{\"ok\":false,\"error\":\"sender mismatch - request rejected\"}");
	natsMsg_Destroy(m);
	raw_request(&a, RAIL_CTL, own, "{not json");
	assert_int_equal(natsSubscription_NextMsg(&m, so, CALL_MS), NATS_OK);
	assert_non_null(strstr(natsMsg_GetData(m), "\"ok\":false"));
	assert_non_null(strstr(natsMsg_GetData(m), "request"));
	natsMsg_Destroy(m);
	natsSubscription_Destroy(so);

	assert_refused(a.cl, RAIL_CTL, "teleport", NULL,
	    "op \"teleport\" not supported on the delivery control service");
	assert_refused(mgr_cl, RAIL_ADMIN, "teleport", NULL,
	    "op \"teleport\" not supported on the delivery admin service");
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{}",
	    "durableJoin: channel must be a non-blank string");
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"team.*\"}",
	    "durableJoin: \"team.*\" must be a concrete channel (durable membership is "
	    "per-concrete-channel, not wildcard)");
	assert_refused(a.cl, RAIL_CTL, "readHistory", "{\"channel\":\"general\",\"limit\":2.5}",
	    "readHistory: limit must be a whole number from 1 to 200");
	assert_refused(a.cl, RAIL_CTL, "readHistory", "{\"channel\":\"general\",\"limit\":201}",
	    "readHistory: limit must be a whole number from 1 to 200");
	h_peer_down(&a);
}

/* ---- ctl.delivery ---- */

/*
 * Join → post → receive: the row is the registry's ("broker-known truth,
 * not self-reported"), a post after it reaches the member, and a second
 * join reuses the open row (idempotent).
 */
static void
test_join_post_receive(void **state)
{
	struct h_peer a, b;
	uint64_t seq;
	json_t *d, *frames, *row;

	(void)state;
	peer_up(&a, "jill", "general");
	peer_up(&b, "jack", "general");
	d = join(&a, "general");
	assert_true(json_is_true(json_object_get(d, "durable")));
	assert_int_equal(json_integer_value(json_object_get(d, "generation")), 1);
	json_decref(d);
	row = row_get(&a, "general");
	assert_non_null(row);
	assert_string_equal(json_string_value(json_object_get(row, "state")), "durable-active");
	assert_true(json_is_true(json_object_get(row, "activated")));
	json_decref(row);
	d = join(&a, "general"); /* idempotent */
	assert_int_equal(json_integer_value(json_object_get(d, "generation")), 1);
	json_decref(d);

	assert_int_equal(h_post(&b.c, &mesh, &b.a, "general", "reg-1", "after the join", &seq), 0);
	frames = drain(&a, WAIT_MS);
	assert_int_equal(json_array_size(frames), 1);
	assert_string_equal(frame_text(json_array_get(frames, 0)), "after the join");
	json_decref(frames);

	assert_refused(a.cl, RAIL_CTL, "listMemberships", NULL,
	    "listMemberships: lifecycleUid is required");
	char args[256];
	snprintf(args, sizeof(args), "{\"lifecycleUid\":\"%s\"}", a.a.uid);
	d = call_ok(a.cl, RAIL_CTL, "listMemberships", args);
	json_t *ms = json_object_get(d, "memberships");
	assert_int_equal(json_array_size(ms), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ms, 0), "channel")),
	    "general");
	assert_true(json_is_true(json_object_get(json_array_get(ms, 0), "activated")));
	json_decref(d);
	h_peer_down(&a);
	h_peer_down(&b);
}

/*
 * WIRE §5 refusals: a channel outside allowSubscribe, no ACL row, an ACL
 * narrowed to [] (join refused, leave still works: "durableLeave never
 * checks the ACL").
 */
static void
test_join_refusals_and_leave_after_narrowing(void **state)
{
	struct h_peer a, ghost;
	char err[512], want[512], args[256];
	json_t *d, *row;

	(void)state;
	peer_up(&a, "narrow", "general,team.*");
	snprintf(want, sizeof(want), "channel \"secret\" is not within your read ACL [general, team.*]");
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"secret\"}", want);

	peer_up(&ghost, "ghost", "general");
	char key[256];
	snprintf(key, sizeof(key), "%s.%s.%s", ghost.a.owner, ghost.a.actor, ghost.a.uid);
	natsConnection *nc = prov.nc;
	(void)nc;
	/* No ACL row at all: delete it as an operator would. */
	jsCtx *js = NULL;
	kvStore *kv = NULL;
	char bucket[256];
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", mesh.token);
	assert_int_equal(natsConnection_JetStream(&js, prov.nc, NULL), NATS_OK);
	assert_int_equal(js_KeyValue(&kv, js, bucket), NATS_OK);
	assert_int_equal(kvStore_Delete(kv, key), NATS_OK);
	kvStore_Destroy(kv);
	jsCtx_Destroy(js);
	snprintf(want, sizeof(want), "durableJoin: no read ACL on record for %s.%s (not provisioned "
	    "for durable delivery)", ghost.a.owner, ghost.a.actor);
	assert_refused(ghost.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}", want);

	d = join(&a, "team.red");
	uint64_t gen = (uint64_t)json_integer_value(json_object_get(d, "generation"));
	json_decref(d);
	if (h_acl_put(&prov, &mesh, &a.a, "[]", false, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}",
	    "channel \"general\" is not within your read ACL []");
	snprintf(args, sizeof(args), "{\"channel\":\"team.red\",\"generation\":%llu,"
	    "\"lifecycleUid\":\"%s\"}", (unsigned long long)gen, a.a.uid);
	d = call_ok(a.cl, RAIL_CTL, "durableLeave", args);
	assert_string_equal(json_string_value(json_object_get(d, "channel")), "team.red");
	assert_null(json_object_get(d, "alreadyLeft"));
	json_decref(d);
	row = row_get(&a, "team.red");
	assert_string_equal(json_string_value(json_object_get(row, "state")), "live-confirmed");
	assert_true(json_is_integer(json_object_get(row, "leaveCursor")));
	json_decref(row);
	d = call_ok(a.cl, RAIL_CTL, "durableLeave", args);
	assert_true(json_is_true(json_object_get(d, "alreadyLeft")));
	json_decref(d);
	h_peer_down(&a);
	h_peer_down(&ghost);
}

/* "A retired lifecycle never comes back" (seed): its alias cannot join. */
static void
test_retired_lifecycle_never_joins_again(void **state)
{
	struct h_peer a;
	char err[512], want[512];

	(void)state;
	peer_up(&a, "retiree", "general");
	if (h_acl_put(&prov, &mesh, &a.a, NULL, true, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(want, sizeof(want), "durableJoin: lifecycle %s.%s.%s is retired and never comes back",
	    a.a.owner, a.a.actor, a.a.uid);
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}", want);
	assert_null(row_get(&a, "general"));
	h_peer_down(&a);
}

/*
 * WIRE.md §4: an alias resolves to its single live row. The manager's
 * mistake, a second live lifecycle of one alias, is refused naming both,
 * and once it is retired the alias resolves again (issue 39: the registry
 * looks the alias up in the index it keeps as rows come and go, not by
 * scanning every row).
 */
static void
test_two_live_rows_of_one_alias_are_refused(void **state)
{
	struct h_peer a;
	struct agent twin;
	char err[512], want[512];

	(void)state;
	peer_up(&a, "twin", "general");
	twin = a.a;
	snprintf(twin.uid, sizeof(twin.uid), "%s", "zz0000000000000000000000zz");
	if (h_acl_put(&prov, &mesh, &twin, "[\"general\"]", false, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	/* In the order the rows came. */
	snprintf(want, sizeof(want), "durableJoin: %s.%s has 2 live read-ACL rows (%s and %s); "
	    "refusing to guess the lifecycle", a.a.owner, a.a.actor, a.a.uid, twin.uid);
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}", want);
	assert_null(row_get(&a, "general"));
	if (h_acl_put(&prov, &mesh, &twin, NULL, true, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	json_decref(join(&a, "general"));
	json_t *row = row_get(&a, "general");
	assert_non_null(row);
	json_decref(row);
	h_peer_down(&a);
}

/* A rejoin after a leave is generation+1 with a new joinCursor (WIRE §4). */
static void
test_rejoin_is_a_new_generation(void **state)
{
	struct h_peer a;
	char args[256];
	json_t *d;

	(void)state;
	peer_up(&a, "rejoiner", "general");
	json_decref(join(&a, "general"));
	snprintf(args, sizeof(args), "{\"channel\":\"general\",\"generation\":2,"
	    "\"lifecycleUid\":\"%s\"}", a.a.uid);
	assert_refused(a.cl, RAIL_CTL, "durableLeave", args,
	    "durableLeave: generation 2 is not the joined generation 1 of \"general\"");
	snprintf(args, sizeof(args), "{\"channel\":\"general\",\"generation\":1,"
	    "\"lifecycleUid\":\"%s\"}", a.a.uid);
	json_decref(call_ok(a.cl, RAIL_CTL, "durableLeave", args));
	d = join(&a, "general");
	assert_int_equal(json_integer_value(json_object_get(d, "generation")), 2);
	json_decref(d);
	h_peer_down(&a);
}

/*
 * History: "readHistory {channel, limit?} (default 100, max 200) →
 * {items, complete}; trimmed to 90 % of max_payload". 6 posts, limit 2:
 * the newest two, oldest first, complete false.
 */
static void
test_history_newest_two_oldest_first(void **state)
{
	struct h_peer a;
	uint64_t seq;
	char id[32], text[32];
	json_t *d, *items;

	(void)state;
	peer_up(&a, "historian", "hist");
	for (int i = 1; i <= 6; i++) {
		snprintf(id, sizeof(id), "h-%d", i);
		snprintf(text, sizeof(text), "history %d", i);
		assert_int_equal(h_post(&a.c, &mesh, &a.a, "hist", id, text, &seq), 0);
	}
	d = call_ok(a.cl, RAIL_CTL, "readHistory", "{\"channel\":\"hist\",\"limit\":2}");
	items = json_object_get(d, "items");
	assert_int_equal(json_array_size(items), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")), "h-5");
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "id")), "h-6");
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "channel")),
	    "hist");
	assert_true(json_is_false(json_object_get(d, "complete")));
	json_decref(d);
	d = call_ok(a.cl, RAIL_CTL, "readHistory", "{\"channel\":\"hist\"}");
	assert_int_equal(json_array_size(json_object_get(d, "items")), 6);
	assert_true(json_is_true(json_object_get(d, "complete")));
	json_decref(d);
	assert_refused(a.cl, RAIL_CTL, "readHistory", "{\"channel\":\"general\"}",
	    "channel \"general\" is not within your read ACL [hist]");
	h_peer_down(&a);
}

/* registerChannel: create only, within the caller's read ACL. */
static void
test_register_channel_is_create_only(void **state)
{
	struct h_peer a;
	json_t *d;
	char err[256];

	(void)state;
	peer_up(&a, "registrar", "projects.>");
	if (getenv("COTAL_TEST_GRANTS") != NULL) {
		/* delivery-grants.json grants no write of channel config rows:
		 * the preflight turned registerChannel off, and the rail says so. */
		char want[512];
		snprintf(want, sizeof(want), "registerChannel: this daemon's credential may not write "
		    "channel config rows ($KV.cotal_channels_%s.>); it is off (cotal creds audit shows "
		    "the grant)", mesh.token);
		assert_refused(a.cl, RAIL_CTL, "registerChannel", "{\"channel\":\"projects.apollo\"}",
		    want);
		assert_true(h_log_has(dmn.log, "(registerChannel needs it); registerChannel is off", 0));
		h_peer_down(&a);
		return;
	}
	d = call_ok(a.cl, RAIL_CTL, "registerChannel",
	    "{\"channel\":\"projects.apollo\",\"description\":\"moon\"}");
	assert_true(json_is_true(json_object_get(d, "created")));
	json_decref(d);
	d = call_ok(a.cl, RAIL_CTL, "registerChannel", "{\"channel\":\"projects.apollo\"}");
	assert_true(json_is_false(json_object_get(d, "created")));
	json_decref(d);
	char *v = h_kv_get(&prov, &mesh, "channels", "projects.apollo", err, sizeof(err));
	assert_non_null(v);
	assert_non_null(strstr(v, "\"description\":\"moon\""));
	free(v);
	assert_refused(a.cl, RAIL_CTL, "registerChannel", "{\"channel\":\"general\"}",
	    "channel \"general\" is not within your read ACL [projects.>]");
	h_peer_down(&a);
}

/* ---- ctl.delivery-admin ---- */

/* WIRE §5 liveness: {"plane":"delivery","responder":"bound","instance":…}. */
static void
test_liveness_is_bound(void **state)
{
	char inst[128], why[256];

	(void)state;
	assert_int_equal(ctl_liveness(mgr_cl, CALL_MS, inst, sizeof(inst), why, sizeof(why)),
	    LIVE_BOUND);
	assert_true(strlen(inst) > 0);
}

/* reloadCreds reaches the supervisor (e2e_reload covers adoption): a
 * malformed expected fingerprint is refused by the registry, naming it; a
 * reload of the credential in use is answered ok with nothing to adopt. */
static void
test_reload_is_forwarded_and_checked(void **state)
{
	json_t *d;

	(void)state;
	assert_refused(mgr_cl, RAIL_ADMIN, "reloadCreds", "{\"expected\":{\"delivery\":\"XYZ\"}}",
	    "reloadCreds: expected.delivery must be the SHA-256 of the JWT in lowercase hex");
	d = call_ok(mgr_cl, RAIL_ADMIN, "reloadCreds", NULL);
	json_t *dv = json_object_get(d, "delivery");
	assert_true(json_is_true(json_object_get(dv, "ok")));
	assert_true(json_is_true(json_object_get(dv, "brokerAccepted")));
	json_decref(d);
}

/*
 * Eviction (WIRE §5): a live agent connection is kicked and verified gone;
 * a principal not connected → kicked 0, verifiedGone true; not a principal
 * refused.
 */
static void
test_evict_kicks_and_verifies(void **state)
{
	struct h_peer a;
	char args[512], principal[256];
	json_t *d;

	(void)state;
	peer_up(&a, "evictee", "general");
	snprintf(principal, sizeof(principal), "%s.%s", a.a.owner, a.a.actor);
	snprintf(args, sizeof(args), "{\"principal\":\"%s\"}", principal);
	d = call_ok(mgr_cl, RAIL_ADMIN, "principalLiveness", args);
	assert_string_equal(json_string_value(json_object_get(d, "state")), "live");
	json_decref(d);
	d = call_ok(mgr_cl, RAIL_ADMIN, "evictPrincipal", args);
	assert_string_equal(json_string_value(json_object_get(d, "principal")), principal);
	assert_true(json_is_true(json_object_get(d, "scanComplete")));
	if (broker29) {
		/* WIRE §5: KICK arrives in 2.10; never verified gone without it. */
		assert_int_equal(json_integer_value(json_object_get(d, "kicked")), 0);
		assert_true(json_integer_value(json_object_get(d, "remaining")) >= 1);
		assert_true(json_is_false(json_object_get(d, "verifiedGone")));
		assert_non_null(strstr(json_string_value(json_object_get(d, "note")), "KICK"));
		json_decref(d);
		h_peer_down(&a);
		return;
	}
	assert_true(json_integer_value(json_object_get(d, "kicked")) >= 1);
	assert_int_equal(json_integer_value(json_object_get(d, "remaining")), 0);
	assert_true(json_is_true(json_object_get(d, "verifiedGone")));
	json_decref(d);
	/* The kicked connection really is gone: liveness says so. */
	d = call_ok(mgr_cl, RAIL_ADMIN, "principalLiveness", args);
	assert_string_equal(json_string_value(json_object_get(d, "state")), "gone");
	assert_true(json_is_true(json_object_get(d, "sweepComplete")));
	json_decref(d);

	snprintf(args, sizeof(args), "{\"principals\":[\"%s\",\"local.NOBODY_HERE\"]}", principal);
	d = call_ok(mgr_cl, RAIL_ADMIN, "evictPrincipals", args);
	assert_int_equal(json_array_size(d), 2);
	json_t *nobody = json_array_get(d, 1);
	assert_string_equal(json_string_value(json_object_get(nobody, "principal")),
	    "local.NOBODY_HERE");
	assert_int_equal(json_integer_value(json_object_get(nobody, "kicked")), 0);
	assert_true(json_is_true(json_object_get(nobody, "verifiedGone")));
	json_decref(d);
	assert_refused(mgr_cl, RAIL_ADMIN, "evictPrincipal", "{\"principal\":\"UABC.def\"}",
	    "evictPrincipal: \"UABC.def\" is not a principal");
	/* More than 256 is refused whole. */
	size_t cap = 300 * 24 + 64, off;
	char *big = malloc(cap);
	off = (size_t)snprintf(big, cap, "{\"principals\":[");
	for (int i = 0; i < 257; i++)
		off += (size_t)snprintf(big + off, cap - off, "%s\"local.p%d\"", i ? "," : "", i);
	snprintf(big + off, cap - off, "]}");
	assert_refused(mgr_cl, RAIL_ADMIN, "evictPrincipals", big,
	    "evictPrincipals: at most 256 principals per request (got 257)");
	free(big);
	h_peer_down(&a);
}

/* An inventory request, subscribed for its reply but not sent yet. */
struct inventory_req {
	char subj[512], reply[600], body[512];
	natsSubscription *sub;
};

static void
inventory_prepare(const struct h_peer *p, const char *tag, struct inventory_req *q)
{
	char pre[300], mactor[128];
	struct jwt j;
	char err[256];

	assert_int_equal(jwt_decode(mgr.creds.jwt, strlen(mgr.creds.jwt), &j, err, sizeof(err)), 0);
	snprintf(mactor, sizeof(mactor), "%s", j.sub);
	jwt_free(&j);
	snprintf(pre, sizeof(pre), "cotal.%s", mesh.token);
	snprintf(q->subj, sizeof(q->subj), "%s.ctl.delivery-admin.local.%s", pre, mactor);
	snprintf(q->reply, sizeof(q->reply), "%s.reply.%s", q->subj, tag);
	snprintf(q->body, sizeof(q->body), "{\"op\":\"lifecycleMemberships\",\"args\":"
	    "{\"principal\":\"%s.%s\",\"lifecycleUid\":\"%s\"},\"from\":{\"id\":\"local.%s\","
	    "\"name\":\"manager\"}}", p->a.owner, p->a.actor, p->a.uid, mactor);
	assert_int_equal(natsConnection_SubscribeSync(&q->sub, mgr.nc, q->reply), NATS_OK);
}

static void
inventory_publish(struct inventory_req *q)
{
	assert_int_equal(natsConnection_PublishRequestString(mgr.nc, q->subj, q->reply, q->body),
	    NATS_OK);
}

/* Send an inventory request without waiting (its reply into *sub). */
static void
inventory_send(const struct h_peer *p, const char *tag, natsSubscription **sub)
{
	struct inventory_req q;

	inventory_prepare(p, tag, &q);
	inventory_publish(&q);
	*sub = q.sub;
}

/*
 * Issue 41, finding 2: "No confined process may be able to cause a KICK of
 * a connection outside the space's account: the process that sends KICK
 * checks, on its own observation from the broker, that each connection id
 * belongs to the space's account and to a principal being evicted, and
 * refuses and logs any other". Test: "A registry made to ask for the KICK
 * of another account's connection (a test hook in a test build [...]):
 * the connection stays, the refusal is logged". The registry (test hook
 * COTAL_TEST_KICK) asks the supervisor, in turn, to KICK a connection of
 * the system account (a $SYS observer's), an agent of the space under
 * another principal's name, and that agent under its own: the first two
 * are refused with the supervisor's reasons and both connections stay;
 * the last is kicked (2.10 and later; 2.9 has no KICK).
 */
static void
test_a_registry_cannot_kick_outside_the_space(void **state)
{
	struct h_peer a;
	struct conn sysc;
	char err[1024], sid[128], principal[256], hook[1024], want[512];
	uint64_t sys_cid = 0, agent_cid = 0;

	(void)state;
	peer_up(&a, "kickvictim", "general");
	snprintf(principal, sizeof(principal), "%s.%s", a.a.owner, a.a.actor);
	if (h_connect_profile(&mesh, "sys-observer", &sysc, err, sizeof(err)) != 0)
		fail_msg("sys-observer: %s", err);
	assert_int_equal(natsConnection_GetClientID(sysc.nc, &sys_cid), NATS_OK);
	assert_int_equal(natsConnection_GetClientID(a.c.nc, &agent_cid), NATS_OK);
	assert_int_equal(natsConnection_GetConnectedServerId(a.c.nc, sid, sizeof(sid)), NATS_OK);
	snprintf(hook, sizeof(hook), "%s:%llu:%s,%s:%llu:local.mallory,%s:%llu:%s", sid,
	    (unsigned long long)sys_cid, principal, sid, (unsigned long long)agent_cid, sid,
	    (unsigned long long)agent_cid, principal);
	h_daemon_stop(&dmn, 10000);
	setenv("COTAL_TEST_KICK", hook, 1);
	int started = h_daemon_start(&mesh, &dmn, NULL);
	unsetenv("COTAL_TEST_KICK");
	assert_int_equal(started, 0);
	snprintf(want, sizeof(want), "test: KICK of connection %llu on %s for %s:",
	    (unsigned long long)agent_cid, sid, principal);
	bool told = h_log_has(dmn.log, want, 30000);
	/* The system account's connection: refused, and it stays. */
	snprintf(want, sizeof(want), "refused the registry's KICK of connection %llu on server %s "
	    "for %s: connection %llu on server %s is of account ", (unsigned long long)sys_cid, sid,
	    principal, (unsigned long long)sys_cid, sid);
	bool refused_sys = h_log_has(dmn.log, want, 0);
	snprintf(want, sizeof(want), "test: KICK of connection %llu on %s for %s: Not Permitted",
	    (unsigned long long)sys_cid, sid, principal);
	bool told_sys = h_log_has(dmn.log, want, 0);
	/* The agent under another's name: refused, and it stays. */
	snprintf(want, sizeof(want), "refused the registry's KICK of connection %llu on server %s "
	    "for local.mallory: connection %llu on server %s is not principal local.mallory's",
	    (unsigned long long)agent_cid, sid, (unsigned long long)agent_cid, sid);
	bool refused_other = h_log_has(dmn.log, want, 0);
	assert_int_equal(natsConnection_FlushTimeout(sysc.nc, 2000), NATS_OK);
	printf("• KICKs asked by the registry: the system account's connection %llu refused%s, "
	    "agent %llu under another name refused%s\n", (unsigned long long)sys_cid,
	    refused_sys ? "" : " (NOT)", (unsigned long long)agent_cid, refused_other ? "" :
	    " (NOT)");
	if (!told || !refused_sys || !told_sys || !refused_other)
		fail_msg("the supervisor's refusals are not in %s", dmn.log);
	/* The agent under its own name: kicked where the broker has KICK. */
	if (!broker29) {
		/* Its connection closed: the client is on another one (its
		 * reconnect gets a new cid) or none. */
		uint64_t now_cid = agent_cid;
		for (int64_t until = mono_ms() + 5000; now_cid == agent_cid && mono_ms() < until;
		    h_nap(50))
			if (natsConnection_GetClientID(a.c.nc, &now_cid) != NATS_OK)
				now_cid = 0;
		snprintf(want, sizeof(want), "test: KICK of connection %llu on %s for %s: OK",
		    (unsigned long long)agent_cid, sid, principal);
		assert_true(h_log_has(dmn.log, want, 0));
		assert_true(now_cid != agent_cid);
	}
	h_close(&sysc);
	h_peer_down(&a);
	assert_int_equal(h_daemon_ready(&dmn, 20000, "serving cotal.", "fan-out bound",
	    "reader bound", NULL), 0);
}

/*
 * The seed: "The daemon answers ctl.delivery-admin requests one at a time,
 * in the order they arrive, with one exception: the lifecycleMemberships
 * inventory [...] answered without waiting for the others" and
 * "Inventories that arrive together share one read of the members
 * bucket". 20 inventories sent while an eviction of 256 principals runs
 * are all answered before it, with one members read between them.
 */
static void
test_inventories_overtake_a_slow_eviction(void **state)
{
	struct h_peer a;
	natsSubscription *inv[20], *slow = NULL;
	natsMsg *m = NULL;
	char pre[300], subj[512], reply[600], mactor[128], err[256];
	struct jwt j;

	(void)state;
	peer_up(&a, "inventoried", "general");
	json_decref(join(&a, "general"));
	assert_int_equal(jwt_decode(mgr.creds.jwt, strlen(mgr.creds.jwt), &j, err, sizeof(err)), 0);
	snprintf(mactor, sizeof(mactor), "%s", j.sub);
	jwt_free(&j);
	snprintf(pre, sizeof(pre), "cotal.%s", mesh.token);
	snprintf(subj, sizeof(subj), "%s.ctl.delivery-admin.local.%s", pre, mactor);
	snprintf(reply, sizeof(reply), "%s.reply.slow", subj);
	size_t cap = 300 * 40, off;
	char *body = malloc(cap);
	off = (size_t)snprintf(body, cap, "{\"op\":\"evictPrincipals\",\"args\":{\"principals\":[");
	for (int i = 0; i < 256; i++)
		off += (size_t)snprintf(body + off, cap - off, "%s\"local.slow%d\"", i ? "," : "", i);
	snprintf(body + off, cap - off, "]},\"from\":{\"id\":\"local.%s\",\"name\":\"manager\"}}",
	    mactor);
	assert_int_equal(natsConnection_SubscribeSync(&slow, mgr.nc, reply), NATS_OK);
	/* Counters travel once a second: a baseline that is current. */
	usleep(1500 * 1000);
	int64_t reads = (int64_t)h_daemon_counter(&dmn, "registry", "member_reads");
	/* Slow: the daemon's test hook holds a sweep naming local.slow0 for
	 * 3 s (setup). Two of them: the second waits behind the first in the
	 * serial queue, so inventories sent now would wait behind both. */
	int64_t t0 = mono_ms();
	assert_int_equal(natsConnection_PublishRequestString(mgr.nc, subj, reply, body), NATS_OK);
	assert_int_equal(natsConnection_PublishRequestString(mgr.nc, subj, reply, body), NATS_OK);
	natsConnection_Flush(mgr.nc);
	free(body);
	struct inventory_req q[20];
	for (int i = 0; i < 20; i++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "inv%d", i);
		inventory_prepare(&a, tag, &q[i]);
		inv[i] = q[i].sub;
	}
	natsConnection_Flush(mgr.nc);
	/* Together: one burst of 20. */
	for (int i = 0; i < 20; i++)
		inventory_publish(&q[i]);
	natsConnection_Flush(mgr.nc);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(natsSubscription_NextMsg(&m, inv[i], CALL_MS), NATS_OK);
		json_t *r = json_loads(natsMsg_GetData(m), 0, NULL);
		assert_true(json_is_true(json_object_get(r, "ok")));
		json_t *ms = json_object_get(json_object_get(r, "data"), "memberships");
		assert_int_equal(json_array_size(ms), 1);
		assert_true(json_is_integer(json_object_get(json_array_get(ms, 0), "joinCursor")));
		json_decref(r);
		natsMsg_Destroy(m);
		natsSubscription_Destroy(inv[i]);
	}
	/* Every inventory is in; the evictions are not. */
	int pending = 0;
	natsSubscription_GetPending(slow, &pending, NULL);
	assert_int_equal(pending, 0);
	assert_true(mono_ms() - t0 < SLOW_SWEEP_MS);
	int64_t after = h_daemon_counter_reaches(&dmn, "registry", "member_reads", reads + 1, 3000);
	if (after != reads + 1)
		fail_msg("20 inventories sent together made %lld members reads (from %lld to %lld; "
		    "inventories counted %lld)", (long long)(after - reads), (long long)reads,
		    (long long)after, (long long)h_daemon_counter(&dmn, "registry", "inventories"));
	for (int i = 0; i < 2; i++) {
		assert_int_equal(natsSubscription_NextMsg(&m, slow, 60000), NATS_OK);
		assert_non_null(strstr(natsMsg_GetData(m), "\"ok\":true"));
		natsMsg_Destroy(m);
	}
	/* One at a time: the second eviction started after the first ended. */
	assert_true(mono_ms() - t0 >= 2 * SLOW_SWEEP_MS);
	natsSubscription_Destroy(slow);
	h_peer_down(&a);
}

/*
 * The seed's fence: "when the inventory request arrives with the
 * lifecycle's ACL row still allowing reads, it refuses every later durable
 * join and leave of that lifecycle from that moment, on that daemon
 * process. A request whose row is already narrowed, or retired, leaves no
 * such mark."
 */
static void
test_inventory_fences_only_while_the_acl_allows_reads(void **state)
{
	struct h_peer a, b;
	char args[512], err[256], want[512];
	json_t *d;

	(void)state;
	peer_up(&a, "fenced", "general,other");
	peer_up(&b, "unfenced", "general,other");
	json_decref(join(&a, "general"));
	snprintf(args, sizeof(args), "{\"principal\":\"%s.%s\",\"lifecycleUid\":\"%s\"}", a.a.owner,
	    a.a.actor, a.a.uid);
	d = call_ok(mgr_cl, RAIL_ADMIN, "lifecycleMemberships", args);
	assert_int_equal(json_array_size(json_object_get(d, "memberships")), 1);
	json_decref(d);
	snprintf(want, sizeof(want), "durableJoin: lifecycle %s.%s.%s is being retired (its "
	    "membership inventory was taken); refused", a.a.owner, a.a.actor, a.a.uid);
	assert_refused(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"other\"}", want);
	snprintf(args, sizeof(args), "{\"channel\":\"general\",\"generation\":1,"
	    "\"lifecycleUid\":\"%s\"}", a.a.uid);
	snprintf(want, sizeof(want), "durableLeave: lifecycle %s.%s.%s is being retired (its "
	    "membership inventory was taken); refused", a.a.owner, a.a.actor, a.a.uid);
	assert_refused(a.cl, RAIL_CTL, "durableLeave", args, want);

	/* A narrowed row leaves no mark: b's row narrowed, inventory taken,
	 * then widened again: b joins. */
	if (h_acl_put(&prov, &mesh, &b.a, "[]", false, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(args, sizeof(args), "{\"principal\":\"%s.%s\",\"lifecycleUid\":\"%s\"}", b.a.owner,
	    b.a.actor, b.a.uid);
	json_decref(call_ok(mgr_cl, RAIL_ADMIN, "lifecycleMemberships", args));
	if (h_acl_put(&prov, &mesh, &b.a, "[\"general\",\"other\"]", false, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	d = join(&b, "other");
	assert_true(json_is_true(json_object_get(d, "durable")));
	json_decref(d);
	h_peer_down(&a);
	h_peer_down(&b);
}

/*
 * A join racing an inventory of the same lifecycle "is either in the
 * inventory or refused" (the seed: "A row of the retiring lifecycle is then
 * either in the inventory or gone").
 */
static void
test_join_racing_an_inventory_is_in_it_or_refused(void **state)
{
	(void)state;
	for (int round = 0; round < 5; round++) {
		struct h_peer a;
		char name[32], args[512];
		natsSubscription *sub = NULL;
		natsMsg *m = NULL;
		struct ctl_result jr;

		snprintf(name, sizeof(name), "racer%d", round);
		peer_up(&a, name, "general");
		inventory_send(&a, name, &sub);
		natsConnection_Flush(mgr.nc);
		if (round % 2)
			usleep(2000 * (unsigned)round);
		call(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}", &jr);
		assert_int_equal(natsSubscription_NextMsg(&m, sub, CALL_MS), NATS_OK);
		json_t *r = json_loads(natsMsg_GetData(m), 0, NULL);
		size_t in_inventory = json_array_size(json_object_get(json_object_get(r, "data"),
		    "memberships"));
		json_decref(r);
		natsMsg_Destroy(m);
		natsSubscription_Destroy(sub);
		if (jr.ok)
			assert_int_equal(in_inventory, 1);
		else
			assert_non_null(strstr(jr.error, "being retired"));
		ctl_result_free(&jr);
		(void)args;
		h_peer_down(&a);
	}
}

/* Wait until the fan-out has acked every post up to seq. */
static void
fanout_passes(uint64_t seq)
{
	char stream[256];

	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	for (int64_t until = mono_ms() + WAIT_MS; mono_ms() < until; usleep(50 * 1000)) {
		jsConsumerInfo *ci = NULL;
		jsErrCode jerr = 0;
		bool done = js_GetConsumerInfo(&ci, prov.js, stream, "fanout", NULL, &jerr) == NATS_OK &&
		    ci->AckFloor.Stream >= seq;
		jsConsumerInfo_Destroy(ci);
		if (done)
			return;
	}
	fail_msg("the fan-out did not pass CHAT seq %llu", (unsigned long long)seq);
}

/* An open, not yet activated row, as a join that died before its
 * catch-up leaves it. */
static void
row_put_unactivated(const struct h_peer *p, const char *channel, uint64_t join_cursor)
{
	char key[1024], body[2048], err[512];

	snprintf(key, sizeof(key), "%s/%s.%s.%s", channel, p->a.owner, p->a.actor, p->a.uid);
	snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"owner\":\"%s.%s\",\"lifecycleUid\":"
	    "\"%s\",\"state\":\"durable-active\",\"joinCursor\":%llu,\"generation\":1,"
	    "\"activated\":false,\"writerIdentity\":\"test\",\"updatedAt\":1}", channel,
	    p->a.owner, p->a.actor, p->a.uid, (unsigned long long)join_cursor);
	if (h_kv_put(&prov, &mesh, "members", key, body, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

/*
 * WIRE §5: "catch-up copies (joinCursor, fence] where fence = max(CHAT last
 * seq, fanout delivered stream seq) through a cu_ consumer". Posts the
 * fan-out routed before the row existed reach the member through the
 * join's catch-up, with the fan-out's dedup keys; the member's own post is
 * not copied back to it; the row is then activated.
 */
static void
test_join_catches_up_what_the_fanout_passed(void **state)
{
	struct h_peer a, b;
	uint64_t first = 0, seq = 0;
	json_t *d, *frames, *row;

	(void)state;
	peer_up(&a, "latecomer", "catchup");
	peer_up(&b, "early", "catchup");
	assert_int_equal(h_chat_last_seq(&prov, &mesh, &first), 0);
	assert_int_equal(h_post(&b.c, &mesh, &b.a, "catchup", "cu-1", "before the row 1", &seq), 0);
	assert_int_equal(h_post(&a.c, &mesh, &a.a, "catchup", "cu-own", "my own", &seq), 0);
	assert_int_equal(h_post(&b.c, &mesh, &b.a, "catchup", "cu-2", "before the row 2", &seq), 0);
	fanout_passes(seq);
	row_put_unactivated(&a, "catchup", first);
	frames = drain(&a, 1000);
	assert_int_equal(json_array_size(frames), 0); /* the fan-out had no row to route by */
	json_decref(frames);

	d = join(&a, "catchup");
	assert_true(json_is_true(json_object_get(d, "durable")));
	assert_int_equal(json_integer_value(json_object_get(d, "generation")), 1);
	json_decref(d);
	frames = drain(&a, WAIT_MS);
	assert_int_equal(json_array_size(frames), 2);
	assert_string_equal(frame_text(json_array_get(frames, 0)), "before the row 1");
	assert_string_equal(frame_text(json_array_get(frames, 1)), "before the row 2");
	json_decref(frames);
	row = row_get(&a, "catchup");
	assert_true(json_is_true(json_object_get(row, "activated")));
	json_decref(row);
	assert_true(h_log_has(dmn.log, "caught", 3000));
	h_peer_down(&a);
	h_peer_down(&b);
}

/*
 * WIRE §5: "if that window lost messages to retention, tombstone at fence
 * and answer {durable:false, reason:"activation catch-up window partially
 * evicted by retention"}". CHAT keeps 1000 posts per subject: 1005 posts
 * of one sender in the window push its oldest out.
 */
static void
test_catchup_window_evicted_by_retention(void **state)
{
	struct h_peer a, b;
	uint64_t first = 0, seq = 0, last = 0;
	char id[32];
	json_t *d, *row;

	(void)state;
	peer_up(&a, "toolate", "flood");
	peer_up(&b, "flooder", "flood");
	assert_int_equal(h_chat_last_seq(&prov, &mesh, &first), 0);
	for (int i = 0; i < 1005; i++) {
		snprintf(id, sizeof(id), "fl-%d", i);
		assert_int_equal(h_post(&b.c, &mesh, &b.a, "flood", id, "flood", &seq), 0);
	}
	fanout_passes(seq);
	row_put_unactivated(&a, "flood", first);
	d = join(&a, "flood");
	assert_true(json_is_false(json_object_get(d, "durable")));
	assert_string_equal(json_string_value(json_object_get(d, "reason")),
	    "activation catch-up window partially evicted by retention");
	json_decref(d);
	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	row = row_get(&a, "flood");
	assert_string_equal(json_string_value(json_object_get(row, "state")), "live-confirmed");
	assert_true((uint64_t)json_integer_value(json_object_get(row, "leaveCursor")) >= seq);
	json_decref(row);
	json_decref(drain(&a, 2000)); /* what the catch-up did copy */
	h_peer_down(&a);
	h_peer_down(&b);
}

/*
 * The seed: "A durable join reads that row again just before it writes its
 * membership row, and once more after. When the channel is no longer
 * allowed, the join writes nothing, or removes the row it just wrote, and
 * is refused." The daemon's test hook holds a join of "narrowgap" between
 * its write and its second read; the ACL is narrowed meanwhile.
 */
static void
test_acl_narrowed_between_the_joins_two_reads(void **state)
{
	struct h_peer a;
	struct ctl_result r;
	char err[256];
	json_t *row;

	(void)state;
	peer_up(&a, "gapper", "narrowgap");
	json_t *args = json_pack("{s:s}", "channel", "narrowgap");
	struct call_thread ct = { a.cl, args, &r };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, join_in_thread, &ct), 0);
	/* The row is written, then held for JOIN_GAP_MS before the re-read. */
	for (int64_t until = mono_ms() + JOIN_GAP_MS; mono_ms() < until; usleep(50 * 1000))
		if ((row = row_get(&a, "narrowgap")) != NULL)
			break;
	assert_non_null(row);
	json_decref(row);
	if (h_acl_put(&prov, &mesh, &a.a, "[]", false, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	pthread_join(t, NULL);
	json_decref(args);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_false(r.ok);
	assert_string_equal(r.error, "channel \"narrowgap\" is not within your read ACL []");
	ctl_result_free(&r);
	assert_null(row_get(&a, "narrowgap"));
	h_peer_down(&a);
}

/*
 * WIRE §5: "else CAS-set activated (refused if a leave/rejoin came in
 * between: {durable:false, reason:"activation superseded by a concurrent
 * leave or rejoin"})". The daemon's test hook holds a join of "leavegap"
 * between its catch-up and its activation; the member leaves meanwhile.
 */
static void
test_activation_superseded_by_a_concurrent_leave(void **state)
{
	struct h_peer a;
	struct ctl_result r;
	char args[256];
	json_t *row = NULL;

	(void)state;
	peer_up(&a, "quitter", "leavegap");
	json_t *j = json_pack("{s:s}", "channel", "leavegap");
	struct call_thread ct = { a.cl, j, &r };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, join_in_thread, &ct), 0);
	for (int64_t until = mono_ms() + JOIN_GAP_MS; mono_ms() < until; usleep(50 * 1000))
		if ((row = row_get(&a, "leavegap")) != NULL)
			break;
	assert_non_null(row);
	json_decref(row);
	snprintf(args, sizeof(args), "{\"channel\":\"leavegap\",\"generation\":1,"
	    "\"lifecycleUid\":\"%s\"}", a.a.uid);
	json_t *d = call_ok(a.cl, RAIL_CTL, "durableLeave", args);
	assert_null(json_object_get(d, "alreadyLeft"));
	json_decref(d);
	pthread_join(t, NULL);
	json_decref(j);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_true(r.ok);
	assert_true(json_is_false(json_object_get(r.data, "durable")));
	assert_string_equal(json_string_value(json_object_get(r.data, "reason")),
	    "activation superseded by a concurrent leave or rejoin");
	ctl_result_free(&r);
	row = row_get(&a, "leavegap");
	assert_string_equal(json_string_value(json_object_get(row, "state")), "live-confirmed");
	assert_false(json_is_true(json_object_get(row, "activated")));
	json_decref(row);
	h_peer_down(&a);
}

/*
 * The seed: "A reply on the ctl.delivery or ctl.delivery-admin rail that
 * is larger than the broker's max_payload cannot be published. The daemon
 * answers that request with a refusal giving the reply's size in bytes, so
 * the caller fails at once". A broker with max_payload 4096 and an
 * inventory of 40 rows with long channel names.
 */
static void
test_reply_over_max_payload_is_refused_at_once(void **state)
{
	struct mesh small;
	struct daemon d2;
	struct conn p2, m2;
	struct agent a;
	struct ctl_client *cl;
	struct ctl_result r;
	char err[1024], actor[128], ch[160], args[512];
	struct jwt j;
	FILE *f;

	(void)state;
	assert_int_equal(h_mesh_up(&small, "tinypayload", true), 0);
	assert_non_null(f = fopen(small.conf, "a"));
	fprintf(f, "max_payload: 4096\n");
	fclose(f);
	assert_int_equal(h_broker_restart(&small), 0);
	assert_int_equal(h_agent_add(&small, "wide", ">", &a), 0);
	assert_int_equal(h_connect_profile(&small, "provisioner", &p2, err, sizeof(err)), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(ch, sizeof(ch), "a.rather.long.channel.name.to.fill.the.reply.number%02d", i);
		if (h_member_put(&p2, &small, &a, ch, 1, 0, 1, err, sizeof(err)) != 0)
			fail_msg("%s", err);
	}
	assert_int_equal(h_daemon_start(&small, &d2, NULL), 0);
	assert_int_equal(h_daemon_wait_connected(&d2, 20000), 0);
	assert_true(h_log_has(d2.log, "(max_payload 4096)", 20000));
	assert_int_equal(h_connect_profile(&small, "supervisor", &m2, err, sizeof(err)), 0);
	assert_int_equal(jwt_decode(m2.creds.jwt, strlen(m2.creds.jwt), &j, err, sizeof(err)), 0);
	snprintf(actor, sizeof(actor), "%s", j.sub);
	jwt_free(&j);
	cl = ctl_client_new(small.space, "local", actor, "manager");
	ctl_client_attach(cl, m2.nc);
	snprintf(args, sizeof(args), "{\"principal\":\"%s.%s\",\"lifecycleUid\":\"%s\"}",
	    a.owner, a.actor, a.uid);
	json_t *aj = json_loads(args, 0, NULL);
	int64_t t0 = mono_ms();
	ctl_call(cl, RAIL_ADMIN, "lifecycleMemberships", aj, 30000, &r);
	json_decref(aj);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_true(mono_ms() - t0 < 10000); /* at once, not at the timeout */
	assert_false(r.ok);
	unsigned long n = 0;
	assert_int_equal(sscanf(r.error, "reply of %lu bytes exceeds the broker max_payload of 4096 "
	    "bytes", &n), 1);
	assert_true(n > 4096);
	char want[128];
	snprintf(want, sizeof(want), "reply of %lu bytes exceeds the broker max_payload of 4096 bytes",
	    n);
	assert_string_equal(r.error, want);
	ctl_result_free(&r);

	/* WIRE §5 readHistory: "refusal if the newest alone does not fit" the
	 * page of 90 % of max_payload. */
	struct conn ac;
	struct ctl_client *acl;
	char text[3700]; /* a post under max_payload, over the page budget */
	uint64_t seq;
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	assert_int_equal(h_connect(&small, a.creds, &ac, err, sizeof(err)), 0);
	assert_int_equal(h_post(&ac, &small, &a, "big", "big-1", text, &seq), 0);
	acl = ctl_client_new(small.space, a.owner, a.actor, "wide");
	ctl_client_attach(acl, ac.nc);
	aj = json_pack("{s:s}", "channel", "big");
	ctl_call(acl, RAIL_CTL, "readHistory", aj, 30000, &r);
	json_decref(aj);
	assert_int_equal(r.outcome, CTL_REPLIED);
	assert_false(r.ok);
	assert_non_null(strstr(r.error, "readHistory: the newest message on \"big\" is "));
	assert_non_null(strstr(r.error, "more than the page budget of 3622 bytes"));
	ctl_result_free(&r);
	ctl_client_free(acl);
	h_close(&ac);

	ctl_client_free(cl);
	h_daemon_kill(&d2);
	h_close(&m2);
	h_close(&p2);
	h_mesh_down(&small);
}

/* The line number (from 1) of the nth line of path holding needle, or 0. */
static int
nth_line(const char *path, const char *needle, int nth)
{
	char *text = h_file_text(path, 0), *p, *e;
	int no = 0, seen = 0, at = 0;

	for (p = text; p != NULL && *p != '\0' && at == 0; p = *e ? e + 1 : e) {
		e = strchr(p, '\n');
		if (e == NULL)
			e = p + strlen(p);
		no++;
		if (memmem(p, (size_t)(e - p), needle, strlen(needle)) != NULL && ++seen == nth)
			at = no;
	}
	free(text);
	return at;
}

/*
 * Issue 31: `cotal admin evict` of 600 principals against the daemon: one
 * evictPrincipals a batch of 256 (3 requests), cut short (SIGKILL) after
 * the first one's ledger write, resumed by a second run that sends exactly
 * the two left; a credential reload lands between the second and the third
 * (the registry's connection replaced), and the retirement completes.
 */
static void
test_cli_eviction_in_batches_resumes_across_a_reload(void **state)
{
	char from[H_PATH_MAX], ledger[H_PATH_MAX], outp[H_PATH_MAX], out[H_OUT_MAX];
	char go[H_PATH_MAX], hold[H_PATH_MAX + 8];
	int before, st;

	(void)state;
	snprintf(from, sizeof(from), "%s/retire.txt", mesh.dir);
	snprintf(ledger, sizeof(ledger), "%s/retire.ledger", mesh.dir);
	FILE *f = fopen(from, "w");
	assert_non_null(f);
	for (int i = 0; i < 600; i++)
		fprintf(f, "local.retired%d\n", i);
	fclose(f);
	before = h_log_count(dmn.log, "evictPrincipals: ");

	setenv("COTAL_TEST_EVICT_KILL_AFTER", "1", 1);
	int rc = h_cotal(&mesh, out, sizeof(out), "admin", "evict", "--from", from, "--ledger",
	    ledger, "--space", mesh.space, NULL);
	unsetenv("COTAL_TEST_EVICT_KILL_AFTER");
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(out, "batch 1 of 3: 256 principals, 256 verified gone"));
	assert_true(h_log_has(dmn.log, "evictPrincipals: 256 principals", 5000));
	assert_int_equal(h_log_count(dmn.log, "evictPrincipals: "), before + 1);

	/* The rest, held after the second batch; then a reload, and the
	 * third sent at once, into the registry's reconnect. */
	snprintf(outp, sizeof(outp), "%s/retire.out", mesh.dir);
	snprintf(go, sizeof(go), "%s/retire.go", mesh.dir);
	snprintf(hold, sizeof(hold), "2:%s", go);
	setenv("COTAL_TEST_EVICT_HOLD", hold, 1);
	pid_t r = h_cotal_spawn(&mesh, outp, "admin", "evict", "--from", from, "--ledger", ledger,
	    "--space", mesh.space, NULL);
	unsetenv("COTAL_TEST_EVICT_HOLD");
	assert_true(r > 0);
	assert_true(h_log_has(outp, "batch 2 of 3", 20000));
	int reloads = h_log_count(dmn.log, "delivery registry: reconnected with the renewed credential");
	/* A renewed credential (the same key, a new JWT; the foreign
	 * variant's grants kept) for the reload to adopt. */
	const char *grants = getenv("COTAL_TEST_GRANTS");
	rc = grants != NULL ?
	    h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space, "--profile",
	    "delivery", "--renew", "--grants", grants, NULL) :
	    h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space, "--profile",
	    "delivery", "--renew", NULL);
	if (rc != 0)
		fail_msg("renew: %s", out);
	if (h_cotal(&mesh, out, sizeof(out), "admin", "reload", "--space", mesh.space, NULL) != 0)
		fail_msg("reload: %s", out);
	FILE *g = fopen(go, "w");
	assert_non_null(g);
	fclose(g);
	assert_int_equal(waitpid(r, &st, 0), r);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char *text = h_file_text(outp, 0);
		fail_msg("the resumed eviction failed:\n%s", text ? text : "");
	}
	assert_true(h_log_has(outp, "resuming with batch 2", 0));
	assert_true(h_log_has(outp, "batch 3 of 3: 88 principals, 88 verified gone", 0));
	assert_true(h_log_has(dmn.log, "evictPrincipals: 88 principals", 5000));
	/* Exactly the two left were sent. */
	assert_int_equal(h_log_count(dmn.log, "evictPrincipals: "), before + 3);
	/* The registry's connection was replaced after the second was
	 * answered (the third went out at the reload's reply). */
	for (int i = 0; i < 200 && h_log_count(dmn.log, "delivery registry: reconnected with the "
	    "renewed credential") == reloads; i++)
		usleep(50 * 1000);
	int reload_at = nth_line(dmn.log, "delivery registry: reconnected with the renewed credential",
	    reloads + 1);
	assert_true(reload_at > 0);
	assert_true(reload_at > nth_line(dmn.log, "evictPrincipals: ", before + 2));
	size_t verified;
	assert_int_equal(h_evict_ledger(ledger, &verified), 3);
	assert_int_equal(verified, 600);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forged_reply_target_is_never_answered),
		cmocka_unit_test(test_sender_op_and_field_guards),
		cmocka_unit_test(test_join_post_receive),
		cmocka_unit_test(test_join_refusals_and_leave_after_narrowing),
		cmocka_unit_test(test_retired_lifecycle_never_joins_again),
		cmocka_unit_test(test_two_live_rows_of_one_alias_are_refused),
		cmocka_unit_test(test_rejoin_is_a_new_generation),
		cmocka_unit_test(test_history_newest_two_oldest_first),
		cmocka_unit_test(test_register_channel_is_create_only),
		cmocka_unit_test(test_liveness_is_bound),
		cmocka_unit_test(test_reload_is_forwarded_and_checked),
		cmocka_unit_test(test_evict_kicks_and_verifies),
		cmocka_unit_test(test_a_registry_cannot_kick_outside_the_space),
		cmocka_unit_test(test_inventories_overtake_a_slow_eviction),
		cmocka_unit_test(test_inventory_fences_only_while_the_acl_allows_reads),
		cmocka_unit_test(test_join_racing_an_inventory_is_in_it_or_refused),
		cmocka_unit_test(test_join_catches_up_what_the_fanout_passed),
		cmocka_unit_test(test_catchup_window_evicted_by_retention),
		cmocka_unit_test(test_acl_narrowed_between_the_joins_two_reads),
		cmocka_unit_test(test_activation_superseded_by_a_concurrent_leave),
		cmocka_unit_test(test_reply_over_max_payload_is_refused_at_once),
		cmocka_unit_test(test_cli_eviction_in_batches_resumes_across_a_reload),
	};
	broker29 = h_broker_arg(argc, argv) == H_BROKER_29;
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
