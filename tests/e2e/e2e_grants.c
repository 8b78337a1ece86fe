/*
 * Grants, checked against the real broker in operator mode (WIRE.md §7):
 * what an agent and the delivery credential may and may not do.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/nats/kvwatch.h"
#include "lib/creds/perms.h"
#include "tests/harness/harness.h"

#define DENY_WAIT_MS 3000

static struct mesh mesh;
static struct h_fixture fx = { .mesh = &mesh };
static struct agent alice, bob;

static int
setup(void **state)
{
	*state = &fx;
	if (h_mesh_up(&mesh, "grants", true) != 0 ||
	    h_agent_add(&mesh, "alice", "general,ops.*", &alice) != 0 ||
	    h_agent_add(&mesh, "bob", "general", &bob) != 0)
		return -1;
	return 0;
}

static void
connect_agent(const struct agent *a, struct conn *c)
{
	char err[1024];

	if (h_connect(&mesh, a->creds, c, err, sizeof(err)) != 0)
		fail_msg("connect %s: %s", a->name, err);
}

static void
connect_profile(const char *profile, struct conn *c)
{
	char err[1024];

	if (h_connect_profile(&mesh, profile, c, err, sizeof(err)) != 0)
		fail_msg("connect %s: %s", profile, err);
}

/* A JetStream context that gives up quickly: a denied API request is
 * never answered. */
static jsCtx *
quick_js(struct conn *c)
{
	jsOptions o;
	jsCtx *js = NULL;

	jsOptions_Init(&o);
	o.Wait = 1000;
	assert_int_equal(natsConnection_JetStream(&js, c->nc, &o), NATS_OK);
	return js;
}

static void
expect_denied_publish(struct conn *c, const char *subject_prefix)
{
	char needle[1024];

	snprintf(needle, sizeof(needle), "Permissions Violation for Publish to \"%s", subject_prefix);
	if (!h_violation(c, needle, DENY_WAIT_MS))
		fail_msg("expected the broker to refuse a publish to %s…", subject_prefix);
}

static void
test_agent_cannot_create_consumer_on_inbox(void **state)
{
	struct conn c;
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	char stream[128], filter[256];

	(void)state;
	connect_agent(&alice, &c);
	jsCtx *js = quick_js(&c);
	snprintf(stream, sizeof(stream), "INBOX_%s", mesh.token);
	snprintf(filter, sizeof(filter), "cotal.%s.dinbox.%s.%s.%s", mesh.token, alice.owner,
	    alice.actor, alice.uid);
	jsConsumerConfig_Init(&cc);
	cc.Durable = "sneaky";
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	assert_int_not_equal(js_AddConsumer(&ci, js, stream, &cc, NULL, &jerr), NATS_OK);
	assert_null(ci);
	expect_denied_publish(&c, "$JS.API.CONSUMER.");
	jsCtx_Destroy(js);
	h_close(&c);
}

static void
test_agent_cannot_create_consumer_on_dlv(void **state)
{
	struct conn c;
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	char stream[128], filter[256], name[256];

	(void)state;
	connect_agent(&alice, &c);
	jsCtx *js = quick_js(&c);
	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	/* Not even one shaped like its own durable, on its own subject. */
	snprintf(filter, sizeof(filter), "cotal.%s.dlv.%s.%s.%s", mesh.token, alice.owner,
	    alice.actor, alice.uid);
	snprintf(name, sizeof(name), "dlv_%s-%s-%s", alice.owner, alice.actor, alice.uid);
	jsConsumerConfig_Init(&cc);
	cc.Durable = name;
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	assert_int_not_equal(js_AddConsumer(&ci, js, stream, &cc, NULL, &jerr), NATS_OK);
	expect_denied_publish(&c, "$JS.API.CONSUMER.");
	jsCtx_Destroy(js);
	h_close(&c);
}

static void
test_agent_cannot_publish_dinbox_or_dlv(void **state)
{
	struct conn c;
	char subj[512];

	(void)state;
	connect_agent(&alice, &c);
	snprintf(subj, sizeof(subj), "cotal.%s.dinbox.%s.%s.%s", mesh.token, bob.owner, bob.actor,
	    bob.uid);
	assert_int_equal(natsConnection_PublishString(c.nc, subj, "{}"), NATS_OK);
	expect_denied_publish(&c, subj);
	snprintf(subj, sizeof(subj), "cotal.%s.dlv.%s.%s.%s", mesh.token, alice.owner,
	    alice.actor, alice.uid);
	assert_int_equal(natsConnection_PublishString(c.nc, subj, "{}"), NATS_OK);
	expect_denied_publish(&c, subj);
	h_close(&c);
}

/* Hand a frame to an agent's dlv_ subject as the delivery credential. */
static void
handoff(const struct agent *to, const char *body)
{
	struct conn dlv;
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	char subj[512];

	connect_profile("delivery", &dlv);
	snprintf(subj, sizeof(subj), "cotal.%s.dlv.%s.%s.%s", mesh.token, to->owner, to->actor,
	    to->uid);
	assert_int_equal(natsMsg_Create(&m, subj, NULL, body, (int)strlen(body)), NATS_OK);
	natsMsgHeader_Set(m, "Cotal-Delivery-Frame", "1");
	assert_int_equal(js_PublishMsg(&pa, dlv.js, m, NULL, &jerr), NATS_OK);
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	h_close(&dlv);
}

static void
test_agent_cannot_bind_another_agents_durable(void **state)
{
	struct conn c;
	natsMsg *msg = NULL;
	char err[1024];
	const char *body = "{\"version\":1,\"channel\":\"general\",\"msg\":{\"id\":\"for-bob\"}}";

	(void)state;
	/* A frame waits in bob's durable... */
	handoff(&bob, body);
	/* ...alice cannot pull it: the broker refuses her the consumer API. */
	connect_agent(&alice, &c);
	h_dlv_fetch(&c, &mesh, &bob, 1000, true, &msg, err, sizeof(err));
	assert_null(msg);
	expect_denied_publish(&c, "$JS.API.CONSUMER.");
	char durable[256];
	snprintf(durable, sizeof(durable), "DLV_%s.dlv_%s-%s-%s\"", mesh.token, bob.owner, bob.actor,
	    bob.uid);
	assert_true(h_violation(&c, durable, DENY_WAIT_MS));
	h_close(&c);
	/* ...and it is still there for bob. */
	connect_agent(&bob, &c);
	if (h_dlv_fetch(&c, &mesh, &bob, 5000, true, &msg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_non_null(msg);
	assert_string_equal(natsMsg_GetData(msg), body);
	natsMsg_Destroy(msg);
	h_close(&c);
}

/* The positive control: the same agent binds its own durable and receives a
 * frame the delivery credential handed off. */
static void
test_agent_binds_own_durable_and_receives_frame(void **state)
{
	struct conn ag;
	natsMsg *got = NULL;
	char err[1024];
	const char *body = "{\"version\":1,\"channel\":\"general\",\"msg\":{}}";

	(void)state;
	handoff(&alice, body);
	connect_agent(&alice, &ag);
	if (h_dlv_fetch(&ag, &mesh, &alice, 5000, true, &got, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_non_null(got);
	assert_string_equal(natsMsg_GetData(got), body);
	const char *hv = NULL;
	assert_int_equal(natsMsgHeader_Get(got, "Cotal-Delivery-Frame", &hv), NATS_OK);
	assert_string_equal(hv, "1");
	natsMsg_Destroy(got);
	h_close(&ag);
}

static void
test_agent_reads_live_only_within_its_acl(void **state)
{
	struct conn c;
	natsSubscription *ok = NULL, *bad = NULL;
	char subj[512];

	(void)state;
	connect_agent(&bob, &c);
	snprintf(subj, sizeof(subj), "cotal.%s.chat.*.*.general", mesh.token);
	assert_int_equal(natsConnection_SubscribeSync(&ok, c.nc, subj), NATS_OK);
	snprintf(subj, sizeof(subj), "cotal.%s.chat.*.*.ops", mesh.token);
	assert_int_equal(natsConnection_SubscribeSync(&bad, c.nc, subj), NATS_OK);
	char needle[600];
	snprintf(needle, sizeof(needle), "Permissions Violation for Subscription to \"%s\"", subj);
	assert_true(h_violation(&c, needle, DENY_WAIT_MS));
	snprintf(needle, sizeof(needle), "Subscription to \"cotal.%s.chat.*.*.general\"", mesh.token);
	assert_false(h_violation(&c, needle, 200));
	natsSubscription_Destroy(ok);
	natsSubscription_Destroy(bad);
	h_close(&c);
}

static void
test_delivery_writes_lease0_only(void **state)
{
	struct conn c;
	char err[1024], needle[512];

	(void)state;
	connect_profile("delivery", &c);
	if (h_kv_put(&c, &mesh, "delivery", "lease.0", "{\"holder\":\"x\"}", err, sizeof(err)) != 0)
		fail_msg("lease.0 write refused: %s", err);
	assert_int_not_equal(h_kv_put(&c, &mesh, "delivery", "config", "{}", err, sizeof(err)), 0);
	snprintf(needle, sizeof(needle), "$KV.cotal_delivery_%s.config", mesh.token);
	expect_denied_publish(&c, needle);
	h_close(&c);
}

static void
test_delivery_cannot_write_acl(void **state)
{
	struct conn c;
	char err[1024], key[256], needle[512], *v;

	(void)state;
	connect_profile("delivery", &c);
	/* It may read the ACL (the reader re-authorizes against it), the way
	 * the daemon reads a row: the stream's last message of its key... */
	snprintf(key, sizeof(key), "%s.%s", alice.principal, alice.uid);
	{
		char stream[256], subj[512];
		natsMsg *m = NULL;
		jsErrCode jerr = 0;
		snprintf(stream, sizeof(stream), "KV_cotal_acl_%s", mesh.token);
		snprintf(subj, sizeof(subj), "$KV.cotal_acl_%s.%s", mesh.token, key);
		natsStatus st = js_GetLastMsg(&m, c.js, stream, subj, NULL, &jerr);
		if (st != NATS_OK)
			fail_msg("delivery cannot read the ACL row %s: %s (%d)", key,
			    natsStatus_GetText(st), (int)jerr);
		v = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
		natsMsg_Destroy(m);
	}
	assert_non_null(strstr(v, "\"allowSubscribe\""));
	free(v);
	/* ...but never write it. */
	assert_int_not_equal(h_kv_put(&c, &mesh, "acl", key,
	    "{\"allowSubscribe\":[\">\"],\"revision\":2}", err, sizeof(err)), 0);
	snprintf(needle, sizeof(needle), "$KV.cotal_acl_%s.", mesh.token);
	expect_denied_publish(&c, needle);
	h_close(&c);
}

static void
test_delivery_cannot_subscribe_natively_to_content(void **state)
{
	static const char *const kinds[] = { "chat", "dinbox", "dlv" };
	struct conn c;
	natsSubscription *sub = NULL;
	char subj[256], needle[512];

	(void)state;
	connect_profile("delivery", &c);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(subj, sizeof(subj), "cotal.%s.%s.>", mesh.token, kinds[i]);
		assert_int_equal(natsConnection_SubscribeSync(&sub, c.nc, subj), NATS_OK);
		snprintf(needle, sizeof(needle), "Permissions Violation for Subscription to \"%s\"", subj);
		if (!h_violation(&c, needle, DENY_WAIT_MS))
			fail_msg("the delivery credential could subscribe to %s", subj);
		natsSubscription_Destroy(sub);
	}
	h_close(&c);
}

/* The members index is kept by a KV watch: the delivery credential can
 * watch the members bucket the daemon's way, a named ordered consumer
 * (lib/nats/kvwatch.h), and sees a row the manager writes. */
static void
test_delivery_can_watch_members(void **state)
{
	struct conn dlv, sup;
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	char bucket[128], err[1024], inbox[256];
	bool loaded = false, seen = false;

	(void)state;
	connect_profile("delivery", &dlv);
	connect_profile("supervisor", &sup);
	snprintf(bucket, sizeof(bucket), "cotal_members_%s", mesh.token);
	assert_int_equal(jwt_reply_inbox(dlv.creds.jwt, inbox, sizeof(inbox), err, sizeof(err)), 0);
	if (kvwatch_start(&w, dlv.nc, inbox, bucket, err, sizeof(err)) != 0)
		fail_msg("watch %s: %s", bucket, err);
	for (int i = 0; i < 40 && !loaded; i++)
		loaded = kvwatch_next(w, 250, &e, err, sizeof(err)) == KVW_LOADED;
	assert_true(loaded);
	if (h_kv_put(&sup, &mesh, "members", "general/x.y.abcdefghijklmnopqrstuvwxyz", "{}", err,
	    sizeof(err)) != 0)
		fail_msg("%s", err);
	for (int i = 0; i < 20 && !seen; i++) {
		enum kvw_event ev = kvwatch_next(w, 250, &e, err, sizeof(err));
		if (ev == KVW_LOST)
			fail_msg("the watch was lost: %s", err);
		seen = ev == KVW_ENTRY && strcmp(e.key, "general/x.y.abcdefghijklmnopqrstuvwxyz") == 0;
	}
	assert_true(seen);
	assert_false(h_violation(&dlv, "Permissions Violation", 100));
	kvwatch_destroy(w);
	h_close(&sup);
	h_close(&dlv);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_cannot_create_consumer_on_inbox),
		cmocka_unit_test(test_agent_cannot_create_consumer_on_dlv),
		cmocka_unit_test(test_agent_cannot_publish_dinbox_or_dlv),
		cmocka_unit_test(test_agent_cannot_bind_another_agents_durable),
		cmocka_unit_test(test_agent_binds_own_durable_and_receives_frame),
		cmocka_unit_test(test_agent_reads_live_only_within_its_acl),
		cmocka_unit_test(test_delivery_writes_lease0_only),
		cmocka_unit_test(test_delivery_cannot_write_acl),
		cmocka_unit_test(test_delivery_cannot_subscribe_natively_to_content),
		cmocka_unit_test(test_delivery_can_watch_members),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
