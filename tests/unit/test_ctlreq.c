/* The control rails' messages: WIRE.md §1 and §5 (lib/wire/ctlreq.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "lib/wire/ctlreq.h"
#include "lib/wire/tokens.h"

#define PREFIX "cotal.demo"
#define U_OWNER "u_abcdefghijklmnopqrstuvwxyz"        /* u_ + 26 of [a-z2-7] */
#define NKEY_OWNER "UAB3EFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVWX"
#define SUBJ "cotal.demo.ctl.delivery.local.alice"
#define UID_26 "abcdefghijklmnopqrstuvwxyz"
#define UID_32 "0123456789abcdefghijklmnopqrstuv"
#define WILDCARD_TAIL "must be a concrete channel (durable membership is " \
	"per-concrete-channel, not wildcard)"

/* ---- helpers ---------------------------------------------------------- */

static struct rail_caller
caller(enum rail r, const char *owner, const char *actor)
{
	struct rail_caller c;

	memset(&c, 0, sizeof(c));
	c.rail = r;
	snprintf(c.owner, sizeof(c.owner), "%s", owner);
	snprintf(c.actor, sizeof(c.actor), "%s", actor);
	return c;
}

/* Parse the body text s for local.alice on the ctl rail. */
static enum ctl_verdict
parse_str(const char *s, struct ctl_request *r, char *why, size_t whylen)
{
	struct rail_caller c = caller(RAIL_CTL, "local", "alice");

	return ctl_request_parse(s, strlen(s), &c, r, why, whylen);
}

/* Parse body (stolen) for caller c. */
static enum ctl_verdict
parse_as(json_t *body, const struct rail_caller *c, struct ctl_request *r, char *why,
	 size_t whylen)
{
	char *s;
	enum ctl_verdict v;

	assert_non_null(body);
	s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	assert_non_null(s);
	v = ctl_request_parse(s, strlen(s), c, r, why, whylen);
	free(s);
	return v;
}

/* A request of local.alice with op and args (stolen; NULL: none) that
 * parses. */
static void
request(const char *op, json_t *args, struct ctl_request *r)
{
	struct rail_caller c = caller(RAIL_CTL, "local", "alice");
	char why[CTL_WHY_MAX];
	json_t *body = json_pack("{s:s, s:{s:s, s:s}}", "op", op, "from", "id", "local.alice",
	    "name", "Alice");

	assert_non_null(body);
	if (args != NULL)
		json_object_set_new(body, "args", args);
	assert_int_equal(parse_as(body, &c, r, why, sizeof(why)), CTL_OK);
}

/* A request built by hand, args {key: val} (val stolen): what no decoded
 * request holds (jansson refuses \u0000 unless asked). */
static void
handmade(const char *op, const char *key, json_t *val, struct ctl_request *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->op, sizeof(r->op), "%s", op);
	r->root = json_pack("{s:{}}", "args");
	assert_non_null(r->root);
	r->args = json_object_get(r->root, "args");
	assert_int_equal(json_object_set_new(r->args, key, val), 0);
}

/* A request whose args are {"channel": ch}. */
static void
channel_request(const char *op, const char *ch, struct ctl_request *r)
{
	request(op, json_pack("{s:s}", "channel", ch), r);
}

/* ctl_arg_channel of ch for op: 0, or -1 with why checked against want. */
static void
expect_channel(const char *op, const char *ch, const char *want)
{
	struct ctl_request r;
	char out[CHANNEL_MAX + 1], why[CTL_WHY_MAX];

	channel_request(op, ch, &r);
	why[0] = '\0';
	if (want == NULL) {
		assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), 0);
		assert_string_equal(out, ch);
	} else {
		assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), -1);
		assert_string_equal(why, want);
	}
	ctl_request_free(&r);
}

/* A string of n copies of c, malloc'd. */
static char *
repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- rails ------------------------------------------------------------ */

/* WIRE §5: "The daemon subscribes `P.ctl.delivery.*.*` (queue `delivery`),
 * `P.ctl.delivery-admin.*.*` (queue `delivery-admin`), `P.live.delivery.*.*`
 * (queue `live.delivery`)." */
static void
test_rail_names(void **state)
{
	(void)state;
	assert_string_equal(rail_kind(RAIL_CTL), "ctl.delivery");
	assert_string_equal(rail_kind(RAIL_ADMIN), "ctl.delivery-admin");
	assert_string_equal(rail_kind(RAIL_LIVE), "live.delivery");
	assert_string_equal(rail_queue(RAIL_CTL), "delivery");
	assert_string_equal(rail_queue(RAIL_ADMIN), "delivery-admin");
	assert_string_equal(rail_queue(RAIL_LIVE), "live.delivery");
	assert_string_equal(rail_service(RAIL_CTL), "the delivery control service");
	assert_string_equal(rail_service(RAIL_ADMIN), "the delivery admin service");
	assert_null(rail_service(RAIL_LIVE));
	assert_null(rail_kind(RAIL_COUNT));
	assert_null(rail_queue(RAIL_COUNT));
	assert_null(rail_service(RAIL_COUNT));
}

/* WIRE §1: "control rails | `P.ctl.delivery.<o>.<a>`, `P.ctl.delivery-admin.<o>.<a>` |
 * caller = tokens 4,5" and "liveness | `P.live.delivery.<o>.<a>` | caller = tokens 4,5" */
static void
test_rail_subject_parse_each_rail(void **state)
{
	struct rail_caller c;
	char why[WHY_MAX];

	(void)state;
	assert_int_equal(rail_subject_parse(SUBJ, PREFIX, &c, why, sizeof(why)), 0);
	assert_int_equal(c.rail, RAIL_CTL);
	assert_string_equal(c.owner, "local");
	assert_string_equal(c.actor, "alice");

	assert_int_equal(rail_subject_parse("cotal.demo.ctl.delivery-admin." U_OWNER ".mgr",
	    PREFIX, &c, why, sizeof(why)), 0);
	assert_int_equal(c.rail, RAIL_ADMIN);
	assert_string_equal(c.owner, U_OWNER);
	assert_string_equal(c.actor, "mgr");

	assert_int_equal(rail_subject_parse("cotal.demo.live.delivery.local.bob_2", PREFIX, &c,
	    why, sizeof(why)), 0);
	assert_int_equal(c.rail, RAIL_LIVE);
	assert_string_equal(c.actor, "bob_2");
}

/* WIRE §1: "Anything else in the owner slot (e.g. a raw `U…` nkey) parses but is NOT a
 * principal and is dropped at every surfacing boundary." */
static void
test_rail_subject_parse_non_principal_owner_parses(void **state)
{
	struct rail_caller c;
	char why[WHY_MAX];

	(void)state;
	assert_int_equal(rail_subject_parse("cotal.demo.ctl.delivery." NKEY_OWNER ".alice",
	    PREFIX, &c, why, sizeof(why)), 0);
	assert_string_equal(c.owner, NKEY_OWNER);
	assert_false(principal_owner_valid(c.owner));
}

/* WIRE §1: "Identity tokens are validated, never rewritten: owner and actor match
 * `^[A-Za-z0-9_]+$`." and "A subject that fits none of these shapes has no sender" */
static void
test_rail_subject_parse_refuses_other_shapes(void **state)
{
	static const struct {
		const char *subject, *why;
	} bad[] = {
		{ "cotal.other.ctl.delivery.local.alice", "subject is not under cotal.demo" },
		{ "cotal.demox.ctl.delivery.local.alice", "subject is not under cotal.demo" },
		{ "cotal.demo", "subject is not under cotal.demo" },
		{ "cotal.demo.chat.local.alice.general",
		  "subject is not of a control rail's shape" },
		{ "cotal.demo.ctl.deliveryx.local.alice",
		  "subject is not of a control rail's shape" },
		{ "cotal.demo.ctl.delivery-adminx.local.alice",
		  "subject is not of a control rail's shape" },
		{ "cotal.demo.live.delivery", "subject is not of a control rail's shape" },
		{ "cotal.demo.ctl.delivery.local", "subject: bad owner token" },
		{ "cotal.demo.ctl.delivery..alice", "subject: bad owner token" },
		{ "cotal.demo.ctl.delivery.lo-cal.alice", "subject: bad owner token" },
		{ "cotal.demo.ctl.delivery.*.alice", "subject: bad owner token" },
		{ "cotal.demo.ctl.delivery.local.", "subject: bad actor token" },
		{ "cotal.demo.ctl.delivery.local.alice.x", "subject: bad actor token" },
		{ "cotal.demo.ctl.delivery.local.al ice", "subject: bad actor token" },
		{ "cotal.demo.ctl.delivery.local.>", "subject: bad actor token" },
	};
	struct rail_caller c;
	char why[WHY_MAX], *long_owner, subject[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(rail_subject_parse(bad[i].subject, PREFIX, &c, why, sizeof(why)),
		    -1);
		assert_string_equal(why, bad[i].why);
	}
	/* A token longer than IDENT_MAX is refused, not cut. */
	long_owner = repeat('o', IDENT_MAX + 1);
	snprintf(subject, sizeof(subject), "cotal.demo.ctl.delivery.%s.alice", long_owner);
	assert_int_equal(rail_subject_parse(subject, PREFIX, &c, why, sizeof(why)), -1);
	assert_string_equal(why, "subject: bad owner token");
	long_owner[IDENT_MAX] = '\0';
	snprintf(subject, sizeof(subject), "cotal.demo.ctl.delivery.%s.alice", long_owner);
	assert_int_equal(rail_subject_parse(subject, PREFIX, &c, why, sizeof(why)), 0);
	free(long_owner);
	/* why may be NULL. */
	assert_int_equal(rail_subject_parse("x", PREFIX, &c, NULL, 0), -1);
	assert_int_equal(rail_subject_parse(NULL, PREFIX, &c, why, sizeof(why)), -1);
	assert_string_equal(why, "subject is not under cotal.demo");
}

static void
test_rail_subject_format_round_trips(void **state)
{
	struct rail_caller c;
	char buf[128], why[WHY_MAX];

	(void)state;
	for (int r = 0; r < RAIL_COUNT; r++) {
		assert_true(rail_subject_format((enum rail)r, PREFIX, "local", "alice", buf,
		    sizeof(buf)));
		assert_int_equal(rail_subject_parse(buf, PREFIX, &c, why, sizeof(why)), 0);
		assert_int_equal(c.rail, r);
		assert_string_equal(c.owner, "local");
		assert_string_equal(c.actor, "alice");
	}
	assert_true(rail_subject_format(RAIL_CTL, PREFIX, "local", "alice", buf, sizeof(buf)));
	assert_string_equal(buf, SUBJ);
	/* Exactly fits, one short. */
	assert_true(rail_subject_format(RAIL_CTL, PREFIX, "local", "alice", buf,
	    sizeof(SUBJ)));
	assert_false(rail_subject_format(RAIL_CTL, PREFIX, "local", "alice", buf,
	    sizeof(SUBJ) - 1));
	assert_false(rail_subject_format(RAIL_COUNT, PREFIX, "local", "alice", buf,
	    sizeof(buf)));
}

/* ---- reply subjects ----------------------------------------------------- */

/* WIRE §5: "the caller names its own reply subject `<request subject>.reply.<random>`
 * (not `_INBOX`)." */
static void
test_reply_bound_accepts_own_reply(void **state)
{
	char reply[512], *suffix;

	(void)state;
	assert_true(rail_reply_bound(SUBJ, SUBJ ".reply.abc123"));
	assert_true(rail_reply_bound(SUBJ, SUBJ ".reply.a.b-c_d"));
	assert_true(rail_reply_bound(SUBJ, SUBJ ".reply.x"));
	/* CTL_REPLY_SUFFIX_MAX chars fit, one more does not. */
	suffix = repeat('r', CTL_REPLY_SUFFIX_MAX);
	snprintf(reply, sizeof(reply), "%s.reply.%s", SUBJ, suffix);
	assert_true(rail_reply_bound(SUBJ, reply));
	free(suffix);
	suffix = repeat('r', CTL_REPLY_SUFFIX_MAX + 1);
	snprintf(reply, sizeof(reply), "%s.reply.%s", SUBJ, suffix);
	assert_false(rail_reply_bound(SUBJ, reply));
	free(suffix);
}

/* WIRE §5: "A request whose reply subject is missing or not under `<subject>.reply.` is
 * dropped with a log line, unanswered." */
static void
test_reply_bound_refuses_forged_targets(void **state)
{
	static const char *const bad[] = {
		"_INBOX.abc.def",
		"_INBOX_ABCDEFGHIJKLMNOP.x",
		/* another principal's reply subject */
		"cotal.demo.ctl.delivery.local.bob.reply.x",
		/* another rail's */
		"cotal.demo.ctl.delivery-admin.local.alice.reply.x",
		/* a principal whose name starts with alice's */
		"cotal.demo.ctl.delivery.local.alicex.reply.x",
		/* the request subject itself, or a sibling of .reply. */
		SUBJ,
		SUBJ ".reply",
		SUBJ ".replyx.y",
		SUBJ ".x.reply.y",
		"cotal.demo.chat.local.alice.general",
	};

	(void)state;
	assert_false(rail_reply_bound(SUBJ, NULL));
	assert_false(rail_reply_bound(NULL, SUBJ ".reply.x"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(rail_reply_bound(SUBJ, bad[i]));
}

/* WIRE §5: "A request whose reply subject is missing or not under `<subject>.reply.` is
 * dropped" — the suffix must be real tokens: none empty, no wildcard, no white space. */
static void
test_reply_bound_refuses_bad_suffixes(void **state)
{
	static const char *const bad[] = {
		SUBJ ".reply.",        /* empty suffix */
		SUBJ ".reply..x",      /* empty first token */
		SUBJ ".reply.a..b",    /* empty middle token */
		SUBJ ".reply.a.",      /* trailing '.' */
		SUBJ ".reply.*",
		SUBJ ".reply.>",
		SUBJ ".reply.a.*",
		SUBJ ".reply.a.>",
		SUBJ ".reply.a*b",
		SUBJ ".reply.a>b",
		SUBJ ".reply.a b",
		SUBJ ".reply.a\tb",
		SUBJ ".reply.a\nb",
		SUBJ ".reply.a\rb",
		SUBJ ".reply.a\x01",
		SUBJ ".reply.a\x7f",
		SUBJ ".reply. ",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(rail_reply_bound(SUBJ, bad[i]));
}

/* ---- requests ------------------------------------------------------------ */

/* WIRE §5: "Request: `{op, args?, from:{id, name, ...}}`." */
static void
test_request_parse_good(void **state)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	/* args absent: an empty object, borrowed from root. */
	assert_int_equal(parse_str("{\"op\":\"listMemberships\",\"from\":{\"id\":\"local.alice\","
	    "\"name\":\"Alice\",\"role\":\"x\"},\"extra\":[1,2]}", &r, why, sizeof(why)), CTL_OK);
	assert_string_equal(r.op, "listMemberships");
	assert_true(json_is_object(r.args));
	assert_int_equal(json_object_size(r.args), 0);
	assert_ptr_equal(r.args, json_object_get(r.root, "args"));
	ctl_request_free(&r);
	assert_null(r.root);
	assert_null(r.args);

	/* args null: the same. */
	assert_int_equal(parse_str("{\"op\":\"x\",\"args\":null,\"from\":{\"id\":\"local.alice\"}}",
	    &r, why, sizeof(why)), CTL_OK);
	assert_true(json_is_object(r.args));
	assert_int_equal(json_object_size(r.args), 0);
	ctl_request_free(&r);

	/* args an object: kept. */
	assert_int_equal(parse_str("{\"args\":{\"channel\":\"general\"},\"op\":\"durableJoin\","
	    "\"from\":{\"id\":\"local.alice\",\"name\":\"A\"}}", &r, why, sizeof(why)), CTL_OK);
	assert_string_equal(r.op, "durableJoin");
	assert_string_equal(json_string_value(json_object_get(r.args, "channel")), "general");
	ctl_request_free(&r);
	/* Freeing twice (or a zeroed request) is harmless. */
	ctl_request_free(&r);
}

/* WIRE §5: "Malformed JSON, wrong types, oversized fields: a refusal naming the field,
 * never a crash." — the body itself: "request: …". */
static void
test_request_parse_malformed_body(void **state)
{
	static const char *const bad[] = {
		"not json",
		"[]",
		"\"op\"",
		"42",
		"null",
		"{\"op\":\"x\",\"from\":{\"id\":\"local.alice\"}",  /* cut short */
		"{\"op\":\"x\",\"op\":\"y\",\"from\":{\"id\":\"local.alice\"}}", /* duplicate */
		"{\"op\":\"x\",\"from\":{\"id\":\"local.alice\",\"id\":\"local.alice\"}}",
	};
	struct ctl_request r;
	char why[CTL_WHY_MAX];
	struct rail_caller c = caller(RAIL_CTL, "local", "alice");

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(parse_str(bad[i], &r, why, sizeof(why)), CTL_MALFORMED);
		assert_memory_equal(why, "request: ", 9);
		assert_null(r.root);
	}
	assert_int_equal(parse_str("[]", &r, why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "request: must be a JSON object");
	assert_int_equal(ctl_request_parse(NULL, 0, &c, &r, why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "request: empty body");
	assert_int_equal(ctl_request_parse("{}", 0, &c, &r, why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "request: empty body");
	/* Only len bytes are read: a valid prefix of a longer buffer. */
	assert_int_equal(ctl_request_parse(
	    "{\"op\":\"x\",\"from\":{\"id\":\"local.alice\"}}garbage", 38, &c, &r, why,
	    sizeof(why)), CTL_OK);
	ctl_request_free(&r);
}

/* WIRE §5: "oversized fields: a refusal naming the field, never a crash." — at most
 * CTL_REQUEST_MAX bytes are decoded. */
static void
test_request_parse_size_bound(void **state)
{
	static const char head[] = "{\"op\":\"x\",\"from\":{\"id\":\"local.alice\"},\"pad\":\"";
	struct ctl_request r;
	char why[CTL_WHY_MAX], want[128], *body;
	size_t n;

	(void)state;
	/* Exactly CTL_REQUEST_MAX bytes decodes. */
	n = CTL_REQUEST_MAX;
	body = repeat('p', n);
	memcpy(body, head, sizeof(head) - 1);
	memcpy(body + n - 2, "\"}", 2);
	assert_int_equal(parse_str(body, &r, why, sizeof(why)), CTL_OK);
	ctl_request_free(&r);
	free(body);
	/* One more is refused before decoding. */
	n = CTL_REQUEST_MAX + 1;
	body = repeat('p', n);
	memcpy(body, head, sizeof(head) - 1);
	memcpy(body + n - 2, "\"}", 2);
	assert_int_equal(parse_str(body, &r, why, sizeof(why)), CTL_MALFORMED);
	snprintf(want, sizeof(want), "request: body of %d bytes exceeds %d", CTL_REQUEST_MAX + 1,
	    CTL_REQUEST_MAX);
	assert_string_equal(why, want);
	free(body);
}

/* A request of local.alice whose args.a is n arrays deep. */
static enum ctl_verdict
nested(size_t n, struct ctl_request *r, char *why, size_t whylen)
{
	char body[512];
	size_t o;

	o = (size_t)snprintf(body, sizeof(body),
	    "{\"op\":\"x\",\"from\":{\"id\":\"local.alice\"},\"args\":{\"a\":");
	assert_true(o + 2 * n + 3 < sizeof(body));
	memset(body + o, '[', n);
	memset(body + o + n, ']', n);
	memcpy(body + o + 2 * n, "}}", 3);
	return parse_str(body, r, why, whylen);
}

/* Nesting is bounded (like records.c): a request is shallow. */
static void
test_request_parse_depth_bound(void **state)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	/* root, args and 30 arrays: 32 levels, accepted. */
	assert_int_equal(nested(30, &r, why, sizeof(why)), CTL_OK);
	ctl_request_free(&r);
	/* 33 levels: refused. */
	assert_int_equal(nested(31, &r, why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "request: nested deeper than 32 levels");
	assert_null(r.root);
	/* Far deeper than jansson's own limit: still a refusal. */
	assert_int_equal(nested(200, &r, why, sizeof(why)), CTL_MALFORMED);
	assert_null(r.root);
}

/* WIRE §5: "`from.id` must equal the subject caller and the owner must be a principal
 * owner, else `{ok:false,error:"sender mismatch - request rejected"}`." */
static void
test_request_sender_mismatch(void **state)
{
	static const char *const bad[] = {
		"{\"op\":\"x\"}",                                        /* from missing */
		"{\"op\":\"x\",\"from\":null}",
		"{\"op\":\"x\",\"from\":\"local.alice\"}",               /* not an object */
		"{\"op\":\"x\",\"from\":{\"name\":\"Alice\"}}",          /* id missing */
		"{\"op\":\"x\",\"from\":{\"id\":42}}",
		"{\"op\":\"x\",\"from\":{\"id\":\"local.bob\"}}",        /* id differs */
		"{\"op\":\"x\",\"from\":{\"id\":\"local.alicex\"}}",
		"{\"op\":\"x\",\"from\":{\"id\":\"local.alic\"}}",
		"{\"op\":\"x\",\"from\":{\"id\":\"" U_OWNER ".alice\"}}", /* another owner */
		"{\"op\":\"x\",\"from\":{\"id\":\"\"}}",
	};
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	assert_string_equal(CTL_ERR_SENDER, "sender mismatch - request rejected");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(parse_str(bad[i], &r, why, sizeof(why)), CTL_SENDER_MISMATCH);
		assert_string_equal(why, CTL_ERR_SENDER);
		assert_null(r.root);
	}
}

/* WIRE §5: "the owner must be a principal owner" — a raw U… nkey owner is refused even
 * when from.id names it; a u_ owner is a principal. */
static void
test_request_sender_owner_must_be_principal(void **state)
{
	struct rail_caller c;
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	c = caller(RAIL_CTL, NKEY_OWNER, "alice");
	assert_int_equal(parse_as(json_pack("{s:s, s:{s:s}}", "op", "x", "from", "id",
	    NKEY_OWNER ".alice"), &c, &r, why, sizeof(why)), CTL_SENDER_MISMATCH);
	assert_string_equal(why, CTL_ERR_SENDER);
	c = caller(RAIL_ADMIN, "Local", "alice");
	assert_int_equal(parse_as(json_pack("{s:s, s:{s:s}}", "op", "x", "from", "id",
	    "Local.alice"), &c, &r, why, sizeof(why)), CTL_SENDER_MISMATCH);
	c = caller(RAIL_ADMIN, U_OWNER, "mgr");
	assert_int_equal(parse_as(json_pack("{s:s, s:{s:s}}", "op", "x", "from", "id",
	    U_OWNER ".mgr"), &c, &r, why, sizeof(why)), CTL_OK);
	ctl_request_free(&r);
}

/* WIRE §5: "Malformed JSON, wrong types, oversized fields: a refusal naming the field"
 * — op: a string of 1..CTL_OP_MAX bytes. */
static void
test_request_op_checked(void **state)
{
	static const char *const bad[] = {
		"{\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":null,\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":7,\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":[\"x\"],\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":\"\",\"from\":{\"id\":\"local.alice\"}}",
	};
	struct ctl_request r;
	struct rail_caller c = caller(RAIL_CTL, "local", "alice");
	char why[CTL_WHY_MAX], *op;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse_str(bad[i], &r, why, sizeof(why)), CTL_MALFORMED);
		assert_string_equal(why, "op: must be a string of 1 to 64 bytes");
		assert_null(r.root);
	}
	op = repeat('o', CTL_OP_MAX);
	assert_int_equal(parse_as(json_pack("{s:s, s:{s:s}}", "op", op, "from", "id",
	    "local.alice"), &c, &r, why, sizeof(why)), CTL_OK);
	assert_string_equal(r.op, op);
	ctl_request_free(&r);
	free(op);
	op = repeat('o', CTL_OP_MAX + 1);
	assert_int_equal(parse_as(json_pack("{s:s, s:{s:s}}", "op", op, "from", "id",
	    "local.alice"), &c, &r, why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "op: must be a string of 1 to 64 bytes");
	free(op);
}

/* ctlreq.h: "args absent, null or an object (else "args: must be an object")" */
static void
test_request_args_must_be_object(void **state)
{
	static const char *const bad[] = {
		"{\"op\":\"x\",\"args\":[],\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":\"x\",\"args\":\"channel\",\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":\"x\",\"args\":0,\"from\":{\"id\":\"local.alice\"}}",
		"{\"op\":\"x\",\"args\":false,\"from\":{\"id\":\"local.alice\"}}",
	};
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse_str(bad[i], &r, why, sizeof(why)), CTL_MALFORMED);
		assert_string_equal(why, "args: must be an object");
		assert_null(r.root);
	}
}

/* ctlreq.h: the checks run in order — body, sender, op, args. A forged request hears
 * "sender mismatch" whatever else is wrong with it. */
static void
test_request_check_order(void **state)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX];

	(void)state;
	/* A duplicate key beats a forged sender. */
	assert_int_equal(parse_str("{\"from\":{\"id\":\"local.bob\"},\"from\":{}}", &r, why,
	    sizeof(why)), CTL_MALFORMED);
	assert_memory_equal(why, "request: ", 9);
	/* A forged sender beats a bad op and bad args. */
	assert_int_equal(parse_str("{\"op\":5,\"args\":[],\"from\":{\"id\":\"local.bob\"}}", &r,
	    why, sizeof(why)), CTL_SENDER_MISMATCH);
	assert_string_equal(why, CTL_ERR_SENDER);
	/* A bad op beats bad args. */
	assert_int_equal(parse_str("{\"op\":5,\"args\":[],\"from\":{\"id\":\"local.alice\"}}", &r,
	    why, sizeof(why)), CTL_MALFORMED);
	assert_string_equal(why, "op: must be a string of 1 to 64 bytes");
}

/* WIRE §5: "Unknown op: `{ok:false,error:"op \"<op>\" not supported on the delivery
 * control service"}` (admin rail: "… delivery admin service")." */
static void
test_unknown_op_texts(void **state)
{
	char buf[256];

	(void)state;
	ctl_unknown_op(RAIL_CTL, "frobnicate", buf, sizeof(buf));
	assert_string_equal(buf, "op \"frobnicate\" not supported on the delivery control service");
	ctl_unknown_op(RAIL_ADMIN, "durableJoin", buf, sizeof(buf));
	assert_string_equal(buf, "op \"durableJoin\" not supported on the delivery admin service");
	ctl_unknown_op(RAIL_LIVE, "x", buf, sizeof(buf));
	assert_string_equal(buf, "op \"x\" not supported on the delivery liveness rail");
	/* Cut to the buffer, still terminated. */
	ctl_unknown_op(RAIL_CTL, "frobnicate", buf, 8);
	assert_string_equal(buf, "op \"fro");
}

/* WIRE §5: "While the daemon re-checks its lease: `{ok:false,error:"delivery: this daemon
 * is not serving this shard (it is re-checking ownership); retry"}`." and "`reloadCreds`
 * is refused until start-up is finished (lease watch bound): `{ok:false,error:"delivery:
 * the daemon has not finished starting; nothing adopted"}`." */
static void
test_refusal_constants_verbatim(void **state)
{
	(void)state;
	assert_string_equal(CTL_ERR_RECHECKING, "delivery: this daemon is not serving this shard "
	    "(it is re-checking ownership); retry");
	assert_string_equal(CTL_ERR_NOT_STARTED,
	    "delivery: the daemon has not finished starting; nothing adopted");
}

/* WIRE §5: "Malformed JSON, wrong types, oversized fields: a refusal naming the field,
 * never a crash." — a NUL inside a string is no C string: the decoder refuses it, and
 * an argument holding one (a request built by hand) is refused too. */
static void
test_nul_in_strings_refused(void **state)
{
	struct ctl_request r;
	char out[CHANNEL_MAX + 1], why[CTL_WHY_MAX];

	(void)state;
	assert_int_equal(parse_str("{\"op\":\"a\\u0000b\",\"from\":{\"id\":\"local.alice\"}}",
	    &r, why, sizeof(why)), CTL_MALFORMED);
	assert_memory_equal(why, "request: ", 9);
	assert_int_equal(parse_str("{\"op\":\"x\",\"from\":{\"id\":\"local.alice\\u0000\"}}",
	    &r, why, sizeof(why)), CTL_MALFORMED);
	assert_memory_equal(why, "request: ", 9);

	handmade("durableJoin", "channel", json_stringn("gen\0eral", 8), &r);
	assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, "durableJoin: channel must be a non-blank string");
	ctl_request_free(&r);

	handmade("listMemberships", "lifecycleUid", json_stringn(UID_26 "\0x", 28), &r);
	assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, "listMemberships: lifecycleUid must match ^[a-z0-9]{26,32}$");
	ctl_request_free(&r);
}

/* ---- arguments ------------------------------------------------------------ */

/* WIRE §1: "Channel: dotted, each segment `[A-Za-z0-9_-]+` … at most 4096 chars.
 * Publish targets and durable memberships are concrete (no wildcards)." */
static void
test_arg_channel_accepts_concrete(void **state)
{
	char *ch;

	(void)state;
	expect_channel("durableJoin", "general", NULL);
	expect_channel("durableJoin", "team.ops-1.x_Y9", NULL);
	ch = repeat('c', CHANNEL_MAX);
	expect_channel("durableJoin", ch, NULL);
	ch[1] = '.';
	expect_channel("durableJoin", ch, NULL);
	free(ch);
}

/* WIRE §5: "Channel argument refusals (any op taking a channel): `<op>: channel must be a
 * non-blank string`" */
static void
test_arg_channel_blank_refused(void **state)
{
	static const char want[] = "durableJoin: channel must be a non-blank string";
	static const char *const args[] = {
		"{}", "{\"channel\":null}", "{\"channel\":42}", "{\"channel\":[\"a\"]}",
		"{\"channel\":\"\"}", "{\"channel\":\"   \"}", "{\"channel\":\" \\t\\n\\r\"}",
	};
	struct ctl_request r;
	char out[CHANNEL_MAX + 1], why[CTL_WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		request("durableJoin", json_loads(args[i], 0, NULL), &r);
		assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), -1);
		assert_string_equal(why, want);
		ctl_request_free(&r);
	}
	/* No args at all: the same. */
	request("durableJoin", NULL, &r);
	assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, want);
	ctl_request_free(&r);
}

/* WIRE §5: "`<op>: "<ch>" must be a concrete channel (durable membership is
 * per-concrete-channel, not wildcard)`" */
static void
test_arg_channel_wildcard_refused(void **state)
{
	(void)state;
	expect_channel("durableJoin", "*", "durableJoin: \"*\" " WILDCARD_TAIL);
	expect_channel("durableJoin", "team.*", "durableJoin: \"team.*\" " WILDCARD_TAIL);
	expect_channel("durableJoin", "*.ops.x", "durableJoin: \"*.ops.x\" " WILDCARD_TAIL);
	expect_channel("readHistory", ">", "readHistory: \">\" " WILDCARD_TAIL);
	expect_channel("durableLeave", "team.>", "durableLeave: \"team.>\" " WILDCARD_TAIL);
	expect_channel("durableJoin", "a.*.>", "durableJoin: \"a.*.>\" " WILDCARD_TAIL);
}

/* WIRE §5: "and a grammar violation names the bad segment." (WIRE §1: "each segment
 * `[A-Za-z0-9_-]+` … no empty segment") */
static void
test_arg_channel_grammar_names_segment(void **state)
{
	(void)state;
	expect_channel("durableJoin", "a..b",
	    "durableJoin: channel \"a..b\" has an empty segment 2");
	expect_channel("durableJoin", ".a", "durableJoin: channel \".a\" has an empty segment 1");
	expect_channel("durableJoin", "a.", "durableJoin: channel \"a.\" has an empty segment 2");
	expect_channel("durableJoin", ".", "durableJoin: channel \".\" has an empty segment 1");
	expect_channel("durableJoin", "a b",
	    "durableJoin: channel \"a b\" segment 1 \"a b\" is not [A-Za-z0-9_-]+");
	expect_channel("registerChannel", "team.caf\xc3\xa9.x",
	    "registerChannel: channel \"team.caf\xc3\xa9.x\" segment 2 \"caf\xc3\xa9\" is not "
	    "[A-Za-z0-9_-]+");
	expect_channel("durableJoin", "a.b*",
	    "durableJoin: channel \"a.b*\" segment 2 \"b*\" is not [A-Za-z0-9_-]+");
	/* '>' not last is no pattern: a grammar violation, not a wildcard. */
	expect_channel("durableJoin", "a.>.b",
	    "durableJoin: channel \"a.>.b\" segment 2 \">\" is not [A-Za-z0-9_-]+");
	/* A wildcard in a channel that breaks the grammar elsewhere: the first bad
	 * segment is named. */
	expect_channel("durableJoin", "*..a",
	    "durableJoin: channel \"*..a\" segment 1 \"*\" is not [A-Za-z0-9_-]+");
	expect_channel("durableJoin", " general",
	    "durableJoin: channel \" general\" segment 1 \" general\" is not [A-Za-z0-9_-]+");
}

/* WIRE §1: "at most 4096 chars." */
static void
test_arg_channel_too_long(void **state)
{
	struct ctl_request r;
	char out[16], why[CTL_WHY_MAX], *ch;

	(void)state;
	ch = repeat('c', CHANNEL_MAX + 1);
	expect_channel("durableJoin", ch, "durableJoin: channel is longer than 4096 characters");
	ch[0] = '*', ch[1] = '.';
	expect_channel("durableJoin", ch, "durableJoin: channel is longer than 4096 characters");
	free(ch);
	/* The caller's buffer bounds it too. */
	channel_request("durableJoin", "a-rather-long-channel", &r);
	assert_int_equal(ctl_arg_channel(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, "durableJoin: channel is longer than 15 characters");
	ctl_request_free(&r);
}

/* ctl_arg_uint of args (stolen) for readHistory's limit: 0 and the value, or -1 and why. */
static int
limit_of(json_t *args, uint64_t *out, char *why, size_t whylen)
{
	struct ctl_request r;
	int rc;

	request("readHistory", args, &r);
	rc = ctl_arg_uint(&r, "limit", false, 100, 1, 200, out, why, whylen);
	ctl_request_free(&r);
	return rc;
}

/* WIRE §5: "`readHistory` | `{channel, limit?}` (default 100, max 200)" */
static void
test_arg_uint_limit(void **state)
{
	static const char want[] = "readHistory: limit must be a whole number from 1 to 200";
	static const char *const bad[] = {
		"{\"limit\":2.5}", "{\"limit\":\"2\"}", "{\"limit\":0}", "{\"limit\":201}",
		"{\"limit\":-1}", "{\"limit\":true}", "{\"limit\":[2]}", "{\"limit\":200.5}",
		"{\"limit\":0.5}", "{\"limit\":1e300}", "{\"limit\":-0.0}", "{\"limit\":{}}",
	};
	char why[CTL_WHY_MAX];
	uint64_t v;

	(void)state;
	assert_int_equal(limit_of(NULL, &v, why, sizeof(why)), 0);
	assert_int_equal(v, 100);
	assert_int_equal(limit_of(json_pack("{s:n}", "limit"), &v, why, sizeof(why)), 0);
	assert_int_equal(v, 100);
	assert_int_equal(limit_of(json_pack("{s:i}", "limit", 2), &v, why, sizeof(why)), 0);
	assert_int_equal(v, 2);
	assert_int_equal(limit_of(json_loads("{\"limit\":2.0}", 0, NULL), &v, why,
	    sizeof(why)), 0);
	assert_int_equal(v, 2);
	assert_int_equal(limit_of(json_loads("{\"limit\":1e2}", 0, NULL), &v, why,
	    sizeof(why)), 0);
	assert_int_equal(v, 100);
	assert_int_equal(limit_of(json_pack("{s:i}", "limit", 1), &v, why, sizeof(why)), 0);
	assert_int_equal(v, 1);
	assert_int_equal(limit_of(json_pack("{s:i}", "limit", 200), &v, why, sizeof(why)), 0);
	assert_int_equal(v, 200);
	assert_int_equal(limit_of(json_loads("{\"limit\":200.0}", 0, NULL), &v, why,
	    sizeof(why)), 0);
	assert_int_equal(v, 200);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *a = json_loads(bad[i], 0, NULL);
		assert_non_null(a);
		why[0] = '\0';
		v = 7;
		assert_int_equal(limit_of(a, &v, why, sizeof(why)), -1);
		assert_string_equal(why, want);
		assert_int_equal(v, 7);
	}
}

/* WIRE §5: "`durableLeave` | `{channel, generation, lifecycleUid}`" — a required whole
 * number, over the full range. */
static void
test_arg_uint_required_and_range(void **state)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX];
	uint64_t v;

	(void)state;
	request("durableLeave", NULL, &r);
	assert_int_equal(ctl_arg_uint(&r, "generation", true, 0, 0, UINT64_MAX, &v, why,
	    sizeof(why)), -1);
	assert_string_equal(why, "durableLeave: generation is required");
	ctl_request_free(&r);

	request("durableLeave", json_pack("{s:n}", "generation"), &r);
	assert_int_equal(ctl_arg_uint(&r, "generation", true, 0, 0, UINT64_MAX, &v, why,
	    sizeof(why)), -1);
	assert_string_equal(why, "durableLeave: generation is required");
	ctl_request_free(&r);

	request("durableLeave", json_pack("{s:I}", "generation", (json_int_t)INT64_MAX), &r);
	assert_int_equal(ctl_arg_uint(&r, "generation", true, 0, 0, UINT64_MAX, &v, why,
	    sizeof(why)), 0);
	assert_true(v == (uint64_t)INT64_MAX);
	ctl_request_free(&r);

	request("durableLeave", json_pack("{s:i}", "generation", 0), &r);
	assert_int_equal(ctl_arg_uint(&r, "generation", true, 0, 0, UINT64_MAX, &v, why,
	    sizeof(why)), 0);
	assert_int_equal(v, 0);
	ctl_request_free(&r);

	/* A real at 2^64 is out of every range (and no undefined cast). */
	request("durableLeave", json_pack("{s:f}", "generation", 18446744073709551616.0), &r);
	assert_int_equal(ctl_arg_uint(&r, "generation", true, 0, 0, UINT64_MAX, &v, why,
	    sizeof(why)), -1);
	assert_string_equal(why, "durableLeave: generation must be a whole number from 0 to "
	    "18446744073709551615");
	ctl_request_free(&r);
}

/* WIRE §5: "Malformed JSON, wrong types, oversized fields: a refusal naming the field" —
 * a string argument. */
static void
test_arg_string(void **state)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX];
	const char *s;

	(void)state;
	request("registerChannel", NULL, &r);
	s = "x";
	assert_int_equal(ctl_arg_string(&r, "description", false, 8, &s, why, sizeof(why)), 0);
	assert_null(s);
	assert_int_equal(ctl_arg_string(&r, "description", true, 8, &s, why, sizeof(why)), -1);
	assert_string_equal(why, "registerChannel: description is required");
	ctl_request_free(&r);

	request("registerChannel", json_pack("{s:n}", "description"), &r);
	assert_int_equal(ctl_arg_string(&r, "description", false, 8, &s, why, sizeof(why)), 0);
	assert_null(s);
	ctl_request_free(&r);

	request("registerChannel", json_pack("{s:i}", "description", 3), &r);
	assert_int_equal(ctl_arg_string(&r, "description", false, 8, &s, why, sizeof(why)), -1);
	assert_string_equal(why, "registerChannel: description must be a string");
	ctl_request_free(&r);

	handmade("registerChannel", "description", json_stringn("a\0b", 3), &r);
	assert_int_equal(ctl_arg_string(&r, "description", false, 8, &s, why, sizeof(why)), -1);
	assert_string_equal(why, "registerChannel: description must be a string");
	ctl_request_free(&r);

	request("registerChannel", json_pack("{s:s}", "description", "12345678"), &r);
	assert_int_equal(ctl_arg_string(&r, "description", false, 8, &s, why, sizeof(why)), 0);
	assert_string_equal(s, "12345678");
	assert_ptr_equal(s, json_string_value(json_object_get(r.args, "description")));
	assert_int_equal(ctl_arg_string(&r, "description", false, 7, &s, why, sizeof(why)), -1);
	assert_string_equal(why, "registerChannel: description is longer than 7 bytes");
	ctl_request_free(&r);

	request("registerChannel", json_pack("{s:s}", "description", ""), &r);
	assert_int_equal(ctl_arg_string(&r, "description", true, 8, &s, why, sizeof(why)), 0);
	assert_string_equal(s, "");
	ctl_request_free(&r);
}

/* WIRE §1: "Lifecycle UID: `^[a-z0-9]{26,32}$`." and §5 "`listMemberships` |
 * `{lifecycleUid}`" */
static void
test_arg_uid(void **state)
{
	static const char want[] = "listMemberships: lifecycleUid must match ^[a-z0-9]{26,32}$";
	static const char *const bad[] = {
		"{\"lifecycleUid\":\"abcdefghijklmnopqrstuvwxy\"}",          /* 25 */
		"{\"lifecycleUid\":\"0123456789abcdefghijklmnopqrstuvw\"}",  /* 33 */
		"{\"lifecycleUid\":\"ABCDEFGHIJKLMNOPQRSTUVWXYZ\"}",
		"{\"lifecycleUid\":\"abcdefghijklmnopqrstuvwxy-\"}",
		"{\"lifecycleUid\":1234}",
		"{\"lifecycleUid\":\"\"}",
		"{\"lifecycleUid\":[]}",
	};
	struct ctl_request r;
	char out[UID_MAX + 1], why[CTL_WHY_MAX];

	(void)state;
	request("listMemberships", json_pack("{s:s}", "lifecycleUid", UID_26), &r);
	assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), 0);
	assert_string_equal(out, UID_26);
	/* The caller's buffer bounds it. */
	assert_int_equal(ctl_arg_uid(&r, out, 26, why, sizeof(why)), -1);
	ctl_request_free(&r);

	request("listMemberships", json_pack("{s:s}", "lifecycleUid", UID_32), &r);
	assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), 0);
	assert_string_equal(out, UID_32);
	ctl_request_free(&r);

	request("listMemberships", NULL, &r);
	assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, "listMemberships: lifecycleUid is required");
	ctl_request_free(&r);

	request("listMemberships", json_pack("{s:n}", "lifecycleUid"), &r);
	assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), -1);
	assert_string_equal(why, "listMemberships: lifecycleUid is required");
	ctl_request_free(&r);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *a = json_loads(bad[i], 0, NULL);
		assert_non_null(a);
		request("listMemberships", a, &r);
		why[0] = '\0';
		assert_int_equal(ctl_arg_uid(&r, out, sizeof(out), why, sizeof(why)), -1);
		assert_string_equal(why, want);
		ctl_request_free(&r);
	}
}

/* WIRE §1: "A principal has a dot-form `<o>.<a>`" and "Principal owner tokens: `local`
 * (dev/static) or `u_` + 26 chars of `[a-z2-7]`. Anything else in the owner slot (e.g. a
 * raw `U…` nkey) parses but is NOT a principal" */
static void
test_principal_parse(void **state)
{
	static const char *const bad[] = {
		NKEY_OWNER ".alice",   /* a raw nkey owner */
		"Local.alice",
		"u_abcdefghijklmnopqrstuvwxy1.alice",  /* '1' is no base32 char */
		"u_abc.alice",
		"local",
		"local.",
		".alice",
		"local.alice.x",
		"local.al-ice",
		"local.al ice",
		"local.*",
		"",
	};
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1], *s;

	(void)state;
	assert_int_equal(principal_parse("local.alice", owner, sizeof(owner), actor,
	    sizeof(actor)), 0);
	assert_string_equal(owner, "local");
	assert_string_equal(actor, "alice");
	assert_int_equal(principal_parse(U_OWNER ".Mgr_1", owner, sizeof(owner), actor,
	    sizeof(actor)), 0);
	assert_string_equal(owner, U_OWNER);
	assert_string_equal(actor, "Mgr_1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(principal_parse(bad[i], owner, sizeof(owner), actor,
		    sizeof(actor)), -1);
	assert_int_equal(principal_parse(NULL, owner, sizeof(owner), actor, sizeof(actor)), -1);
	/* The buffers bound the tokens. */
	assert_int_equal(principal_parse("local.alice", owner, 5, actor, sizeof(actor)), -1);
	assert_int_equal(principal_parse("local.alice", owner, sizeof(owner), actor, 5), -1);
	s = repeat('a', IDENT_MAX + 7);
	memcpy(s, "local.", 6);
	assert_int_equal(principal_parse(s, owner, sizeof(owner), actor, sizeof(actor)), -1);
	s[IDENT_MAX + 6] = '\0';
	assert_int_equal(principal_parse(s, owner, sizeof(owner), actor, sizeof(actor)), 0);
	free(s);
}

/* ---- replies -------------------------------------------------------------- */

/* WIRE §5: "Reply: `{ok, data?, error?, details?}`." */
static void
test_reply_ok_and_error_serialized(void **state)
{
	char *s;
	size_t len = 0;

	(void)state;
	s = ctl_reply_ok(NULL, &len);
	assert_string_equal(s, "{\"ok\":true}");
	assert_int_equal(len, strlen(s));
	free(s);
	s = ctl_reply_ok(json_pack("{s:s, s:b}", "channel", "general", "created", 1), &len);
	assert_string_equal(s, "{\"ok\":true,\"data\":{\"channel\":\"general\",\"created\":true}}");
	assert_int_equal(len, strlen(s));
	free(s);
	s = ctl_reply_ok(json_pack("[i]", 1), NULL);
	assert_string_equal(s, "{\"ok\":true,\"data\":[1]}");
	free(s);
	s = ctl_reply_error(CTL_ERR_SENDER, &len);
	assert_string_equal(s, "{\"ok\":false,\"error\":\"sender mismatch - request rejected\"}");
	assert_int_equal(len, strlen(s));
	free(s);
	s = ctl_reply_error("op \"x\" not supported", &len);
	assert_string_equal(s, "{\"ok\":false,\"error\":\"op \\\"x\\\" not supported\"}");
	free(s);
	s = ctl_reply_error(NULL, &len);
	assert_string_equal(s, "{\"ok\":false,\"error\":\"\"}");
	free(s);
}

/* WIRE §5: "a refusal naming the field, never a crash." — a refusal cut inside a UTF-8
 * sequence by its buffer is still answered. */
static void
test_reply_error_cut_utf8_still_answers(void **state)
{
	char *s;
	size_t len;

	(void)state;
	s = ctl_reply_error("bad caf\xc3", &len);
	assert_non_null(s);
	assert_string_equal(s, "{\"ok\":false,\"error\":\"bad caf?\"}");
	free(s);
	s = ctl_reply_error("caf\xc3\xa9", &len);
	assert_string_equal(s, "{\"ok\":false,\"error\":\"caf\xc3\xa9\"}");
	free(s);
}

/* WIRE §5: "**Reply too large**: a reply longer than the broker's `max_payload` is replaced
 * by `{ok:false,error:"reply of <N> bytes exceeds the broker max_payload of <M> bytes"}`" */
static void
test_reply_fit(void **state)
{
	char *s, *fit, want[256];
	size_t len, n;

	(void)state;
	s = ctl_reply_ok(json_pack("{s:s}", "x", "0123456789012345678901234567890123456789"),
	    &len);
	n = len;
	/* Exactly max_payload: sent as is. */
	fit = ctl_reply_fit(s, &len, (int64_t)n);
	assert_ptr_equal(fit, s);
	assert_int_equal(len, n);
	/* Unknown max_payload: as is. */
	fit = ctl_reply_fit(fit, &len, 0);
	assert_ptr_equal(fit, s);
	fit = ctl_reply_fit(fit, &len, -1);
	assert_ptr_equal(fit, s);
	/* One over: replaced, naming the original length. */
	fit = ctl_reply_fit(fit, &len, (int64_t)n - 1);
	snprintf(want, sizeof(want), "{\"ok\":false,\"error\":\"reply of %zu bytes exceeds the "
	    "broker max_payload of %zu bytes\"}", n, n - 1);
	assert_string_equal(fit, want);
	assert_int_equal(len, strlen(want));
	free(fit);
	/* NULL (out of memory upstream) passes through. */
	len = 5;
	assert_null(ctl_reply_fit(NULL, &len, 1));
}

/* ctl_reply_parse of text s: 0 with the parts, or -1 and why. */
static int
reply_parse(const char *s, json_t **root, bool *ok, json_t **data, const char **error,
	    char *why, size_t whylen)
{
	return ctl_reply_parse(s, s != NULL ? strlen(s) : 0, root, ok, data, error, why,
	    whylen);
}

/* WIRE §5: "Reply: `{ok, data?, error?, details?}`." */
static void
test_reply_parse_good(void **state)
{
	json_t *root, *data;
	const char *error;
	char why[WHY_MAX], *s;
	bool ok;

	(void)state;
	assert_int_equal(reply_parse("{\"ok\":true,\"data\":{\"channel\":\"general\"}}", &root,
	    &ok, &data, &error, why, sizeof(why)), 0);
	assert_true(ok);
	assert_null(error);
	assert_string_equal(json_string_value(json_object_get(data, "channel")), "general");
	assert_ptr_equal(data, json_object_get(root, "data"));
	json_decref(root);

	assert_int_equal(reply_parse("{\"ok\":false,\"error\":\"no\",\"details\":{\"a\":1}}",
	    &root, &ok, &data, &error, why, sizeof(why)), 0);
	assert_false(ok);
	assert_string_equal(error, "no");
	assert_null(data);
	json_decref(root);

	/* null members count as absent; unknown members are kept. */
	assert_int_equal(reply_parse("{\"ok\":true,\"data\":null,\"error\":null,\"x\":[]}",
	    &root, &ok, &data, &error, why, sizeof(why)), 0);
	assert_true(ok);
	assert_null(data);
	assert_null(error);
	json_decref(root);

	/* What we send parses back. */
	s = ctl_reply_error(CTL_ERR_RECHECKING, NULL);
	assert_int_equal(reply_parse(s, &root, &ok, &data, &error, why, sizeof(why)), 0);
	assert_false(ok);
	assert_string_equal(error, CTL_ERR_RECHECKING);
	json_decref(root);
	free(s);
	s = ctl_reply_ok(json_pack("{s:[]}", "memberships"), NULL);
	assert_int_equal(reply_parse(s, &root, &ok, &data, &error, why, sizeof(why)), 0);
	assert_true(ok);
	assert_true(json_is_array(json_object_get(data, "memberships")));
	json_decref(root);
	free(s);
}

/* WIRE §5 (caller side): something that is no `{ok, data?, error?}` is no reply. */
static void
test_reply_parse_bad(void **state)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "[]", "reply: must be a JSON object" },
		{ "{}", "reply: ok must be a boolean" },
		{ "{\"ok\":\"true\"}", "reply: ok must be a boolean" },
		{ "{\"ok\":1}", "reply: ok must be a boolean" },
		{ "{\"ok\":null}", "reply: ok must be a boolean" },
		{ "{\"ok\":false,\"error\":42}", "reply: error must be a string" },
		{ "{\"ok\":false,\"error\":{}}", "reply: error must be a string" },
		{ "", "reply: empty body" },
	};
	static const char *const undecodable[] = {
		"{\"ok\":true,\"ok\":false}",
		"{\"ok\":true",
		"nope",
		"true",
		"{\"ok\":false,\"error\":\"a\\u0000b\"}",
	};
	json_t *root, *data;
	const char *error;
	char why[WHY_MAX], *big;
	bool ok;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(reply_parse(bad[i].text, &root, &ok, &data, &error, why,
		    sizeof(why)), -1);
		assert_string_equal(why, bad[i].why);
		assert_null(root);
		assert_null(data);
		assert_null(error);
		assert_false(ok);
	}
	for (size_t i = 0; i < sizeof(undecodable) / sizeof(undecodable[0]); i++) {
		why[0] = '\0';
		assert_int_equal(reply_parse(undecodable[i], &root, &ok, &data, &error, why,
		    sizeof(why)), -1);
		assert_memory_equal(why, "reply: ", 7);
		assert_null(root);
	}
	assert_int_equal(reply_parse(NULL, &root, &ok, &data, &error, why, sizeof(why)), -1);
	assert_string_equal(why, "reply: empty body");
	/* Past NATS' ceiling on max_payload (64 MiB) nothing is decoded. */
	big = malloc(64 * 1024 * 1024 + 1);
	assert_non_null(big);
	memset(big, ' ', 64 * 1024 * 1024 + 1);
	assert_int_equal(ctl_reply_parse(big, 64 * 1024 * 1024 + 1, &root, &ok, &data, &error, why,
	    sizeof(why)), -1);
	assert_string_equal(why, "reply: body of 67108865 bytes exceeds 67108864");
	assert_null(root);
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rail_names),
		cmocka_unit_test(test_rail_subject_parse_each_rail),
		cmocka_unit_test(test_rail_subject_parse_non_principal_owner_parses),
		cmocka_unit_test(test_rail_subject_parse_refuses_other_shapes),
		cmocka_unit_test(test_rail_subject_format_round_trips),
		cmocka_unit_test(test_reply_bound_accepts_own_reply),
		cmocka_unit_test(test_reply_bound_refuses_forged_targets),
		cmocka_unit_test(test_reply_bound_refuses_bad_suffixes),
		cmocka_unit_test(test_request_parse_good),
		cmocka_unit_test(test_request_parse_malformed_body),
		cmocka_unit_test(test_request_parse_size_bound),
		cmocka_unit_test(test_request_parse_depth_bound),
		cmocka_unit_test(test_request_sender_mismatch),
		cmocka_unit_test(test_request_sender_owner_must_be_principal),
		cmocka_unit_test(test_request_op_checked),
		cmocka_unit_test(test_request_args_must_be_object),
		cmocka_unit_test(test_request_check_order),
		cmocka_unit_test(test_unknown_op_texts),
		cmocka_unit_test(test_refusal_constants_verbatim),
		cmocka_unit_test(test_nul_in_strings_refused),
		cmocka_unit_test(test_arg_channel_accepts_concrete),
		cmocka_unit_test(test_arg_channel_blank_refused),
		cmocka_unit_test(test_arg_channel_wildcard_refused),
		cmocka_unit_test(test_arg_channel_grammar_names_segment),
		cmocka_unit_test(test_arg_channel_too_long),
		cmocka_unit_test(test_arg_uint_limit),
		cmocka_unit_test(test_arg_uint_required_and_range),
		cmocka_unit_test(test_arg_string),
		cmocka_unit_test(test_arg_uid),
		cmocka_unit_test(test_principal_parse),
		cmocka_unit_test(test_reply_ok_and_error_serialized),
		cmocka_unit_test(test_reply_error_cut_utf8_still_answers),
		cmocka_unit_test(test_reply_fit),
		cmocka_unit_test(test_reply_parse_good),
		cmocka_unit_test(test_reply_parse_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
