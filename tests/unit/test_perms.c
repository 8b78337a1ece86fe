/*
 * A credential's permissions as nats-server applies them (lib/creds/perms.h):
 * token-wise wildcard matching, a deny winning over an allow, no allow list
 * meaning everything; the reply inbox a connection takes from its own
 * sub.allow (WIRE.md §7); the grant table's <s>/<inbox>/<account> names
 * and their substitution (lib/creds/needs.h);
 * JetStream's reply-subject metadata (lib/nats/jsack.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli/dev_signer.h"
#include "lib/nats/jsack.h"
#include "lib/creds/needs.h"
#include "lib/creds/nkeys.h"
#include "lib/creds/perms.h"

static void
test_covers_matches_whole_tokens(void **state)
{
	(void)state;
	assert_true(subject_covers("a.b.c", "a.b.c"));
	assert_true(subject_covers("a.*.c", "a.b.c"));
	assert_true(subject_covers("a.*.c", "a.*.c"));
	assert_true(subject_covers("a.>", "a.b.c"));
	assert_true(subject_covers("a.>", "a.*.>"));
	assert_true(subject_covers(">", "a"));
	assert_false(subject_covers("a.>", "a"));         /* '>' needs a token */
	assert_false(subject_covers("a.b", "a.*"));       /* a literal does not cover '*' */
	assert_false(subject_covers("a.*", "a.>"));       /* nor '*' a tail */
	assert_false(subject_covers("a.b.c", "a.b"));
	assert_false(subject_covers("a.b", "a.b.c"));
	assert_false(subject_covers("a.bc", "a.b"));
	/* The grants of delivery-grants.json against the daemon's needs. */
	assert_true(subject_covers("$JS.API.CONSUMER.CREATE.KV_cotal_members_s.>",
	    "$JS.API.CONSUMER.CREATE.KV_cotal_members_s.*.$KV.cotal_members_s.>"));
	assert_false(subject_covers("$JS.API.CONSUMER.CREATE.KV_cotal_members_s",
	    "$JS.API.CONSUMER.CREATE.KV_cotal_members_s.*.$KV.cotal_members_s.>"));
}

static void
test_overlaps_is_symmetric(void **state)
{
	static const char *const pairs[][2] = {
		{ "a.b", "a.*" }, { "a.>", "a.b.c" }, { "*.b", "a.*" }, { ">", "x" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		assert_true(subject_overlaps(pairs[i][0], pairs[i][1]));
		assert_true(subject_overlaps(pairs[i][1], pairs[i][0]));
	}
	assert_false(subject_overlaps("a.b", "a.c"));
	assert_false(subject_overlaps("a.*", "a.b.c"));
	assert_false(subject_overlaps("a.>", "a"));
}

/* A user JWT with these permissions, decoded (any signer will do: the
 * claims are what matters here). */
static void
user_jwt(json_t *pub_allow, json_t *pub_deny, json_t *sub_allow, struct jwt *j)
{
	struct nkey signer, user;
	char upub[NKEY_PUBLIC_LEN + 1], err[256];
	uint8_t seed[32];

	memset(seed, 0x42, sizeof(seed));
	assert_int_equal(nkey_from_raw(NKEY_ACCOUNT, seed, &signer), 0);
	memset(seed, 0x43, sizeof(seed));
	assert_int_equal(nkey_from_raw(NKEY_USER, seed, &user), 0);
	nkey_public(&user, upub);
	struct dev_user_spec spec = { .name = "t", .sub_pub = upub, .pub_allow = pub_allow,
		.pub_deny = pub_deny, .sub_allow = sub_allow };
	json_t *claims = dev_user_claims(&spec);
	char *tok = dev_jwt_sign(claims, &signer, err, sizeof(err));
	assert_non_null(tok);
	assert_int_equal(jwt_decode(tok, strlen(tok), j, err, sizeof(err)), 0);
	free(tok);
	json_decref(claims);
}

static void
test_deny_wins_and_no_allow_list_allows_all(void **state)
{
	struct jwt j;
	struct perms p;
	const char *deny;
	char err[256];

	(void)state;
	json_t *pa = json_pack("[s, s]", "cotal.s.dlv.*.*.*", "$KV.cotal_members_s.>");
	json_t *pd = json_pack("[s]", "cotal.s.dlv.local.*.*");
	user_jwt(pa, pd, NULL, &j);
	assert_int_equal(perms_from_jwt(&j, &p, err, sizeof(err)), 0);
	assert_true(perms_grant(&p, PERMS_PUB, "$KV.cotal_members_s.>", &deny));
	assert_null(deny);
	assert_false(perms_grant(&p, PERMS_PUB, "cotal.s.dlv.*.*.*", &deny));
	assert_string_equal(deny, "cotal.s.dlv.local.*.*");
	assert_false(perms_grant(&p, PERMS_PUB, "cotal.s.dinbox.*.*.*", &deny));
	assert_null(deny);
	/* No sub allow list: every subscription is allowed (and the inbox is
	 * nats.c's own, "_INBOX"). */
	assert_true(perms_grant(&p, PERMS_SUB, "anything.>", &deny));
	char inbox[REPLY_INBOX_MAX];
	assert_int_equal(perms_reply_inbox(&p, inbox, sizeof(inbox), err, sizeof(err)), 0);
	assert_string_equal(inbox, "_INBOX");
	perms_free(&p);
	jwt_free(&j);
	json_decref(pa);
	json_decref(pd);
}

/* WIRE.md §7: "Each connection takes its reply-inbox prefix from its own
 * credential's sub.allow entry that begins with _INBOX and ends with .>". */
static void
test_reply_inbox_comes_from_sub_allow(void **state)
{
	static const struct {
		const char *grant, *want;
	} cases[] = {
		{ "_INBOX_UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUV.>",
		  "_INBOX_UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUV" },
		{ "_INBOX.cotal-membership.>", "_INBOX.cotal-membership" },
		{ "_INBOX.>", "_INBOX" },
	};
	char inbox[REPLY_INBOX_MAX], err[256];
	struct jwt j;
	struct perms p;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *sa = json_pack("[s, s]", "$SYS.ACCOUNT.A.CONNECT", cases[i].grant);
		json_t *pa = json_pack("[s]", "x");
		user_jwt(pa, NULL, sa, &j);
		assert_int_equal(perms_from_jwt(&j, &p, err, sizeof(err)), 0);
		assert_int_equal(perms_reply_inbox(&p, inbox, sizeof(inbox), err, sizeof(err)), 0);
		assert_string_equal(inbox, cases[i].want);
		perms_free(&p);
		jwt_free(&j);
		json_decref(sa);
		json_decref(pa);
	}
	/* No _INBOX….> entry: no reply inbox, said so. */
	json_t *sa = json_pack("[s, s]", "cotal.s.ctl.delivery.*.*", "_INBOX_X.*"), *pa = json_pack("[s]", "x");
	user_jwt(pa, NULL, sa, &j);
	assert_int_equal(perms_from_jwt(&j, &p, err, sizeof(err)), 0);
	assert_int_equal(perms_reply_inbox(&p, inbox, sizeof(inbox), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no reply inbox"));
	perms_free(&p);
	jwt_free(&j);
	json_decref(sa);
	json_decref(pa);
}

static void
test_bad_grants_are_refused_naming_the_field(void **state)
{
	struct jwt j;
	struct perms p;
	char err[256];

	(void)state;
	json_t *pa = json_pack("[s, s]", "ok.subject", "bad..subject");
	user_jwt(pa, NULL, NULL, &j);
	assert_int_equal(perms_from_jwt(&j, &p, err, sizeof(err)), -1);
	assert_string_equal(err, "nats.pub.allow[1]: not a subject");
	jwt_free(&j);
	json_decref(pa);
}

static void
test_need_names_are_filled(void **state)
{
	const struct need *t;
	size_t n;
	char out[512];
	bool inbox = false, account = false;

	(void)state;
	t = needs_table(&n);
	assert_true(n > 40);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(need_subject(&t[i], "tok", "_INBOX_U", "ACC", out, sizeof(out)), 0);
		assert_null(strchr(out, '<'));
		inbox = inbox || strcmp(out, "_INBOX_U.>") == 0;
		account = account || strcmp(out, "$SYS.REQ.ACCOUNT.ACC.CONNZ") == 0;
	}
	assert_true(inbox && account);
	/* A name without a value, and a short buffer, are refused. */
	for (size_t i = 0; i < n; i++)
		if (strstr(t[i].pattern, "<account>") != NULL)
			assert_int_equal(need_subject(&t[i], "tok", "_INBOX_U", NULL, out,
			    sizeof(out)), -1);
	assert_int_equal(need_subject(&t[0], "tok", "_INBOX_U", "ACC", out, 4), -1);
}

static void
test_ack_metadata_both_forms(void **state)
{
	struct js_ack_meta m;

	(void)state;
	assert_true(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1700000000000000000.3", &m));
	assert_int_equal(m.delivered, 1);
	assert_int_equal(m.sseq, 42);
	assert_int_equal(m.dseq, 7);
	assert_int_equal(m.ts_ns, 1700000000000000000LL);
	assert_int_equal(m.pending, 3);
	assert_true(js_ack_meta("$JS.ACK.dom.ACCHASH.KV_b.kvw_x.2.43.8.1700000000000000001.0.tok",
	    &m));
	assert_int_equal(m.sseq, 43);
	assert_int_equal(m.dseq, 8);
	assert_int_equal(m.pending, 0);
	assert_false(js_ack_meta(NULL, &m));
	assert_false(js_ack_meta("_INBOX.x", &m));
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.x.7.1.3", &m));
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.0.7.1.3", &m));  /* sseq 0 */
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1", &m));    /* short */
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.99999999999999999999.3", &m));
	/* Read in place (issue 40): every field whole, 64 bits at most. */
	assert_true(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1.18446744073709551615", &m));
	assert_true(m.pending == UINT64_MAX);
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1.18446744073709551616", &m));
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1.000000000000000000003", &m));
	assert_false(js_ack_meta("$JS.ACK.KV_b..1.42.7.1.3", &m));        /* an empty token */
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1.3.", &m));  /* an empty last one */
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.1.42.7.1.3x", &m));
	assert_false(js_ack_meta("$JS.ACK.a.b.c.d.e.f.1.42.7.1.3.g.h.i.j.k.l", &m)); /* 18 */
	assert_false(js_ack_meta("$JS.ACK.KV_b.kvw_x.-1.42.7.1.3", &m));
	char longer[JS_ACK_SUBJECT_MAX + 64];
	snprintf(longer, sizeof(longer), "$JS.ACK.KV_b.%0*d.1.42.7.1.3", JS_ACK_SUBJECT_MAX, 7);
	assert_false(js_ack_meta(longer, &m));
}

/* Issue 18: the PubAck read in place, and in full where it is not the
 * common answer. */
static void
test_puback_read_in_place_and_in_full(void **state)
{
	static const struct {
		const char *body;
		int rc;
		uint64_t seq;
		const char *why;
	} cases[] = {
		{ "{\"stream\":\"INBOX_s\",\"seq\":42}", 0, 42, NULL },
		{ "{\"stream\":\"INBOX_s\",\"seq\":42,\"duplicate\":true}", 0, 42, NULL },
		{ "{\"stream\":\"INBOX_s\",\"domain\":\"d\",\"seq\":7}", 0, 7, NULL },
		{ "{\"seq\":9,\"stream\":\"INBOX_s\"}", 0, 9, NULL },                  /* decoded */
		{ "{\"stream\":\"error\",\"seq\":5}", 0, 5, NULL },                     /* decoded */
		{ "{\"stream\":\"INBOX_s\",\"seq\": 11}", 0, 11, NULL },               /* decoded */
		{ "{\"error\":{\"code\":503,\"err_code\":10077,\"description\":\"maximum messages "
		  "exceeded\"},\"stream\":\"INBOX_s\",\"seq\":0}", -1, 0,
		  "maximum messages exceeded (err_code 10077)" },
		{ "{\"stream\":\"INBOX_s\",\"seq\":1,\"error\":{\"code\":400}}", -1, 0,
		  "an error without a description (err_code 0)" },
		{ "{\"stream\":\"INBOX_s\",\"seq\":0}", -1, 0, "a PubAck without a stream sequence" },
		{ "{\"stream\":\"INBOX_s\",\"seq\":99999999999999999999}", -1, 0, NULL },
		{ "{\"stream\":\"INBOX_s\"}", -1, 0, "a PubAck without a stream sequence" },
		{ "", -1, 0, "an empty answer (no stream took the message)" },
		{ "+OK", -1, 0, "an answer that is not a PubAck" },
	};
	char why[256];
	uint64_t seq;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		int rc = js_puback_parse(cases[i].body, strlen(cases[i].body), &seq, why, sizeof(why));
		if (rc != cases[i].rc)
			fail_msg("case %zu: %d, want %d: %s (%s)", i, rc, cases[i].rc, cases[i].body, why);
		if (rc == 0)
			assert_true(seq == cases[i].seq);
		else if (cases[i].why != NULL)
			assert_string_equal(why, cases[i].why);
	}
}

/* Issue 40: the answers the brokers send for a stored frame, byte for byte
 * as each writes them (captured from 2.9.10, 2.10.27 and 2.14.0), are read
 * in place. 2.9 and 2.10 put a space after the stream's name: the reading
 * in place had matched none of them, and every PubAck of a 2.10 mesh was
 * decoded with jansson (8 % of the reader's CPU). */
static void
test_puback_of_every_broker_read_in_place(void **state)
{
	static const struct {
		const char *body;
		uint64_t seq;
	} brokers[] = {
		{ "{\"stream\":\"DLV_s\", \"seq\":1}", 1 },                          /* 2.9, 2.10 */
		{ "{\"stream\":\"DLV_s\", \"seq\":1,\"duplicate\": true}", 1 },     /* 2.9, 2.10 */
		{ "{\"stream\":\"DLV_s\",\"seq\":2}", 2 },                           /* 2.14 */
		{ "{\"stream\":\"DLV_s\",\"seq\":2,\"duplicate\": true}", 2 },      /* 2.14 */
		{ "{\"stream\":\"DLV_s\", \"domain\":\"hub\", \"seq\":3}", 3 },
	};
	static const char *const decoded[] = {
		("{\"error\":{\"code\":503,\"err_code\":10077,\"description\":\"x\"},"
		"\"stream\":\"DLV_s\",\"seq\":0}"),
		"{\"stream\":\"DLV_s\", \"seq\":1,\"error\":{\"code\":400}}",
		"{\"stream\":\"DLV_s\", \"seq\":0}",
		"{\"stream\":\"DLV_s\", \"seq\":1,\"duplicate\": yes}",
		"{\"stream\":\"DLV_s\", \"seq\":1} x",
		"{\"stream\":\"DLV_s\", \"seq\":99999999999999999999}",
		"{\"stream\":\"DLV\\u0041\", \"seq\":1}",
	};
	uint64_t seq;

	(void)state;
	for (size_t i = 0; i < sizeof(brokers) / sizeof(brokers[0]); i++) {
		seq = 0;
		if (js_puback_in_place(brokers[i].body, strlen(brokers[i].body), &seq) != 0)
			fail_msg("not read in place: %s", brokers[i].body);
		assert_true(seq == brokers[i].seq);
	}
	for (size_t i = 0; i < sizeof(decoded) / sizeof(decoded[0]); i++)
		if (js_puback_in_place(decoded[i], strlen(decoded[i]), &seq) == 0)
			fail_msg("read in place, not decoded: %s", decoded[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_covers_matches_whole_tokens),
		cmocka_unit_test(test_overlaps_is_symmetric),
		cmocka_unit_test(test_deny_wins_and_no_allow_list_allows_all),
		cmocka_unit_test(test_reply_inbox_comes_from_sub_allow),
		cmocka_unit_test(test_bad_grants_are_refused_naming_the_field),
		cmocka_unit_test(test_need_names_are_filled),
		cmocka_unit_test(test_ack_metadata_both_forms),
		cmocka_unit_test(test_puback_read_in_place_and_in_full),
		cmocka_unit_test(test_puback_of_every_broker_read_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
