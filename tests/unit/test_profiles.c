/*
 * Credential profiles: the delivery credential holds exactly the
 * least-privilege grants of WIRE.md §7, nothing broader, and nothing the
 * grants another Cotal toolchain mints (delivery-grants.json) lack; an agent holds no
 * grant on INBOX and only binds its own dlv_ durable.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli/profiles.h"
#include "lib/creds/needs.h"
#include "lib/creds/perms.h"

#define USER "UDE7OIL6X67UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKL"
#define UID "abcdefghijklmnopqrstuvwxyz"

static bool
has(json_t *arr, const char *subj)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (strcmp(json_string_value(v), subj) == 0)
			return true;
	return false;
}

static void
delivery(struct grants *g)
{
	struct profile_params pp = { .space = "demo", .user_pub = USER, .owner = "local",
		.actor = USER };
	char err[256];

	assert_int_equal(profile_grants(PROFILE_DELIVERY, &pp, g, err, sizeof(err)), 0);
}

/* delivery-grants.json's delivery grants for space "demo" (token "demo")
 * and user USER. */
static json_t *
foreign_grants(const char *dir)
{
	json_error_t je;
	json_t *doc = json_load_file(COTAL_TEST_DATA "/delivery-grants.json", 0, &je), *out, *v;
	size_t i;

	if (doc == NULL)
		fail_msg("delivery-grants.json: %s", je.text);
	out = json_array();
	json_array_foreach(json_object_get(json_object_get(json_object_get(doc, "delivery"), dir),
	    "allow"), i, v) {
		static const char *const names[] = { "<s>", "<user>" };
		const char *const values[] = { "demo", USER };
		char buf[1024];
		assert_int_equal(subject_fill(json_string_value(v), names, values, 2, buf,
		    sizeof(buf)), 0);
		json_array_append_new(out, json_string(buf));
	}
	json_decref(doc);
	return out;
}

static bool
covered(json_t *allow, const char *subj)
{
	size_t i;
	json_t *v;

	json_array_foreach(allow, i, v)
		if (subject_covers(json_string_value(v), subj))
			return true;
	return false;
}

/* Is subj a grant only an optional feature needs (lib/creds/needs.c)? */
static bool
optional(const char *subj)
{
	const struct need *t;
	size_t n;
	char buf[1024];
	bool opt = false;

	t = needs_table(&n);
	for (size_t i = 0; i < n; i++)
		if (t[i].cred == NEED_DELIVERY &&
		    need_subject(&t[i], "demo", "_INBOX_" USER, NULL, buf, sizeof(buf)) == 0 &&
		    strcmp(buf, subj) == 0) {
			if (!t[i].optional)
				return false;
			opt = true;
		}
	return opt;
}

/* WIRE.md §7: the daemon "must serve every feature with exactly" the grants
 * of delivery-grants.json, "and with the project's own narrower profile":
 * so the narrow profile asks only for what the file's grants cover, but for
 * an optional feature's own grants (registerChannel's channel rows). */
static void
test_delivery_asks_only_what_every_toolchain_grants(void **state)
{
	struct grants g;
	size_t i;
	json_t *v;

	(void)state;
	delivery(&g);
	json_t *pub = foreign_grants("pub"), *sub = foreign_grants("sub");
	assert_true(json_array_size(pub) > 50);
	json_array_foreach(g.pub_allow, i, v)
		if (!covered(pub, json_string_value(v)) && !optional(json_string_value(v)))
			fail_msg("delivery publishes %s, which delivery-grants.json does not grant",
			    json_string_value(v));
	json_array_foreach(g.sub_allow, i, v)
		if (!covered(sub, json_string_value(v)))
			fail_msg("delivery subscribes to %s, which delivery-grants.json does not grant",
			    json_string_value(v));
	json_decref(pub);
	json_decref(sub);
	grants_free(&g);
}

/* "Publish: $JS.API.INFO; ... consumer create/info/next and acks pinned to
 * fanout, reader, timerw_<s> and cu_*; KV read ...; writes to
 * $KV.cotal_members_<s>.> and $KV.cotal_delivery_<s>.lease.*; P.dinbox.*.*.*,
 * P.dlv.*.*.*, P.ept.*.*.*.*.armed, P.ept.*.*.*.*.fire;
 * P.ctl.delivery.*.*.reply.>, P.ctl.delivery-admin.*.*.reply.>,
 * P.live.delivery.*.*.reply.>. Subscribe: its own _INBOX_<connId>.>
 * (connId = the credential's user public key, all 56 characters ...) and
 * the three rail subjects." Consumers are created in the named form with
 * their filter; KV watches are named ordered consumers on the bucket. */
static void
test_delivery_holds_every_wire_grant(void **state)
{
	static const char *const want[] = {
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.INBOX_demo",
		"$JS.API.CONSUMER.CREATE.CHAT_demo.fanout.>", "$JS.API.CONSUMER.INFO.CHAT_demo.fanout",
		"$JS.API.CONSUMER.MSG.NEXT.CHAT_demo.fanout", "$JS.ACK.CHAT_demo.fanout.>",
		"$JS.API.CONSUMER.CREATE.INBOX_demo.reader.>",
		"$JS.API.CONSUMER.MSG.NEXT.INBOX_demo.reader", "$JS.ACK.INBOX_demo.reader.>",
		"$JS.API.CONSUMER.CREATE.EPT_REQ_demo.timerw_demo.>",
		"$JS.API.CONSUMER.MSG.NEXT.EPT_REQ_demo.timerw_demo", "$JS.ACK.EPT_REQ_demo.timerw_demo.>",
		"$JS.API.CONSUMER.CREATE.CHAT_demo.*.cotal.demo.chat.*.*.>",
		"$JS.API.STREAM.MSG.GET.EPT_demo",
		"$KV.cotal_members_demo.>", "$KV.cotal_delivery_demo.lease.*",
		"cotal.demo.dinbox.*.*.*", "cotal.demo.dlv.*.*.*",
		"cotal.demo.ept.*.*.*.*.armed", "cotal.demo.ept.*.*.*.*.fire",
		"cotal.demo.ctl.delivery.*.*.reply.>", "cotal.demo.ctl.delivery-admin.*.*.reply.>",
		"cotal.demo.live.delivery.*.*.reply.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_presence_demo.*.$KV.cotal_presence_demo.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_channels_demo.*.$KV.cotal_channels_demo.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_members_demo.*.$KV.cotal_members_demo.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_acl_demo.*.$KV.cotal_acl_demo.>",
		"$JS.API.STREAM.MSG.GET.KV_cotal_records_demo",
	};
	struct grants g;

	(void)state;
	delivery(&g);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!has(g.pub_allow, want[i]))
			fail_msg("delivery lacks publish grant %s", want[i]);
	assert_int_equal(json_array_size(g.sub_allow), 4);
	assert_true(has(g.sub_allow, "_INBOX_" USER ".>"));
	assert_true(has(g.sub_allow, "cotal.demo.ctl.delivery.*.*"));
	assert_true(has(g.sub_allow, "cotal.demo.ctl.delivery-admin.*.*"));
	assert_true(has(g.sub_allow, "cotal.demo.live.delivery.*.*"));
	grants_free(&g);
}

/* "never allow-all": every publish grant has one of the shapes WIRE.md §7
 * names, scoped to this space's streams, buckets and subjects. No stream
 * look-up by subject, no unnamed or durable-form create; flow control
 * answers for the KV watches' own streams only. */
static void
test_delivery_holds_nothing_broader(void **state)
{
	static const char *const shapes =
	    "^(\\$JS\\.API\\.INFO"
	    "|\\$JS\\.API\\.STREAM\\.INFO\\.(CHAT|INBOX|DLV|EPT_REQ|EPT)_demo"
	    "|\\$JS\\.API\\.STREAM\\.MSG\\.DELETE\\.INBOX_demo"
	    /* the timer writer's last-message reads, beyond §7 (docs/security.md) */
	    "|\\$JS\\.API\\.STREAM\\.MSG\\.GET\\.EPT_demo"
	    "|\\$JS\\.API\\.CONSUMER\\.CREATE\\."
	    "(CHAT_demo\\.fanout|INBOX_demo\\.reader|EPT_REQ_demo\\.timerw_demo)\\.>"
	    "|\\$JS\\.API\\.CONSUMER\\.(INFO|MSG\\.NEXT)\\."
	    "(CHAT_demo\\.fanout|INBOX_demo\\.reader|EPT_REQ_demo\\.timerw_demo)"
	    "|\\$JS\\.ACK\\.(CHAT_demo\\.fanout|INBOX_demo\\.reader|EPT_REQ_demo\\.timerw_demo)\\.>"
	    "|\\$JS\\.API\\.CONSUMER\\.CREATE\\.CHAT_demo\\.\\*\\.cotal\\.demo\\.chat\\.\\*\\.\\*\\.>"
	    "|\\$JS\\.API\\.CONSUMER\\.(MSG\\.NEXT|DELETE)\\.CHAT_demo\\.\\*"
	    "|\\$JS\\.API\\.(STREAM\\.INFO|STREAM\\.MSG\\.GET)\\."
	    "KV_cotal_(presence|channels|members|acl|records|delivery)_demo"
	    "|\\$JS\\.API\\.CONSUMER\\.CREATE\\.KV_cotal_(presence|channels|members|acl|delivery)_demo"
	    "\\.\\*\\.\\$KV\\.cotal_(presence|channels|members|acl|delivery)_demo\\.>"
	    "|\\$JS\\.API\\.CONSUMER\\.DELETE\\."
	    "KV_cotal_(presence|channels|members|acl|delivery)_demo\\.\\*"
	    "|\\$KV\\.cotal_members_demo\\.>|\\$KV\\.cotal_delivery_demo\\.lease\\.\\*"
	    /* the watches' flow control answers, within §7's $JS.FC.> (issue 39) */
	    "|\\$JS\\.FC\\.KV_cotal_(presence|channels|members|acl|delivery)_demo\\.>"
	    /* registerChannel's create, beyond §7 (docs/security.md) */
	    "|\\$KV\\.cotal_channels_demo\\.>"
	    "|cotal\\.demo\\.(dinbox|dlv)\\.\\*\\.\\*\\.\\*"
	    "|cotal\\.demo\\.ept\\.\\*\\.\\*\\.\\*\\.\\*\\.(armed|fire)"
	    "|cotal\\.demo\\.(ctl\\.delivery|ctl\\.delivery-admin|live\\.delivery)\\.\\*\\.\\*\\.reply\\.>"
	    ")$";
	struct grants g;
	regex_t re;
	size_t i;
	json_t *v;

	(void)state;
	assert_int_equal(regcomp(&re, shapes, REG_EXTENDED | REG_NOSUB), 0);
	delivery(&g);
	json_array_foreach(g.pub_allow, i, v) {
		const char *s = json_string_value(v);
		if (regexec(&re, s, 0, NULL, 0) != 0)
			fail_msg("delivery holds a publish grant outside WIRE.md §7: %s", s);
	}
	/* No write to the ACL bucket, no native read of content. */
	assert_false(has(g.pub_allow, "$KV.cotal_acl_demo.>"));
	assert_true(has(g.sub_deny, "cotal.demo.chat.>"));
	assert_true(has(g.sub_deny, "cotal.demo.dinbox.>"));
	assert_true(has(g.sub_deny, "cotal.demo.dlv.>"));
	regfree(&re);
	grants_free(&g);
}

/* "Agents hold no grant on INBOX and bind-only on their own dlv_ durable." */
static void
test_agent_binds_only_its_own_durable(void **state)
{
	const char *allow[] = { "general", "ops.*" };
	struct profile_params pp = { .space = "demo", .user_pub = USER, .owner = "local",
		.actor = "UAGENT", .uid = UID, .allow = allow, .nallow = 2 };
	struct grants g;
	char err[256];
	size_t i;
	json_t *v;

	(void)state;
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), 0);
	json_array_foreach(g.pub_allow, i, v) {
		const char *s = json_string_value(v);
		assert_null(strstr(s, "INBOX_demo"));
		assert_null(strstr(s, "dinbox"));
		assert_null(strstr(s, "CONSUMER.CREATE"));
		if (strstr(s, "DLV_demo") != NULL)
			assert_non_null(strstr(s, "dlv_local-UAGENT-" UID));
	}
	assert_true(has(g.pub_allow, "$JS.API.CONSUMER.MSG.NEXT.DLV_demo.dlv_local-UAGENT-" UID));
	/* Of the lease bucket, the lease rows alone, read only (issue 31). */
	json_array_foreach(g.pub_allow, i, v)
		if (strstr(json_string_value(v), "cotal_delivery_") != NULL)
			assert_string_equal(json_string_value(v),
			    "$JS.API.DIRECT.GET.KV_cotal_delivery_demo.$KV.cotal_delivery_demo.lease.*");
	assert_true(has(g.pub_allow,
	    "$JS.API.DIRECT.GET.KV_cotal_delivery_demo.$KV.cotal_delivery_demo.lease.*"));
	assert_true(has(g.pub_deny, "$JS.API.CONSUMER.CREATE.>"));
	assert_true(has(g.sub_allow, "cotal.demo.chat.*.*.general"));
	assert_true(has(g.sub_allow, "cotal.demo.chat.*.*.ops.*"));
	assert_true(has(g.pub_allow, "cotal.demo.chat.local.UAGENT.>"));
	assert_true(has(g.tags, "principal:local.UAGENT"));
	grants_free(&g);
}

static void
test_bad_parameters_are_refused_naming_the_field(void **state)
{
	const char *bad[] = { "ops..x" };
	struct profile_params pp = { .space = "demo", .user_pub = USER, .owner = "local",
		.actor = "UAGENT", .uid = UID, .allow = bad, .nallow = 1 };
	struct grants g;
	char err[256];

	(void)state;
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "allow: \"ops..x\""));
	pp.nallow = 0;
	pp.uid = "short";
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "uid:"));
	pp.uid = UID;
	pp.owner = "Ufoo";
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "owner:"));
	pp.owner = "local";
	pp.actor = "a-b";
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "actor:"));
	pp.actor = "UAGENT";
	pp.user_pub = "nope";
	assert_int_equal(profile_grants(PROFILE_AGENT, &pp, &g, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "user key"));
}

static void
test_sys_users_are_scoped(void **state)
{
	struct profile_params pp = { .space = "demo", .user_pub = USER,
		.space_account = "ACCOUNTKEY" };
	struct grants g;
	char err[256];

	(void)state;
	assert_int_equal(profile_grants(PROFILE_SYS_OBSERVER, &pp, &g, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(g.pub_allow), 1);
	assert_true(has(g.pub_allow, "$SYS.REQ.ACCOUNT.ACCOUNTKEY.CONNZ"));
	grants_free(&g);
	assert_int_equal(profile_grants(PROFILE_SYS_EVICTOR, &pp, &g, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(g.pub_allow), 1);
	assert_true(has(g.pub_allow, "$SYS.REQ.SERVER.*.KICK"));
	grants_free(&g);
	pp.space_account = NULL;
	assert_int_equal(profile_grants(PROFILE_SYS_OBSERVER, &pp, &g, err, sizeof(err)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delivery_holds_every_wire_grant),
		cmocka_unit_test(test_delivery_asks_only_what_every_toolchain_grants),
		cmocka_unit_test(test_delivery_holds_nothing_broader),
		cmocka_unit_test(test_agent_binds_only_its_own_durable),
		cmocka_unit_test(test_bad_parameters_are_refused_naming_the_field),
		cmocka_unit_test(test_sys_users_are_scoped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
