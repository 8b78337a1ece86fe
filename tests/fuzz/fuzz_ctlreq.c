/*
 * Fuzz target: the control rails' messages of lib/wire/ctlreq.c.
 *
 * The input is split at its first two newlines: a request subject, a reply
 * subject, and the body (the rest, exact bytes). A subject that parses is
 * checked and formatted back; the reply is checked against it (and against
 * a fixed subject) for the binding the daemon relies on. The body goes to
 * ctl_request_parse for the parsed caller (or local.alice), every argument
 * reader runs on what parses, the refusals become replies that must parse
 * back, and the body is read as a reply too.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/ctlreq.h"
#include "tests/fuzz/fuzz_lines.h"
#include "lib/wire/tokens.h"

#define PREFIX "cotal.demo"
#define FIXED "cotal.demo.ctl.delivery.local.alice"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The binding, from WIRE.md §5, written out again: reply is
 * "<subject>.reply." and a suffix of non-empty tokens without wildcards
 * or white space. */
static bool
ref_bound(const char *subject, const char *reply)
{
	size_t sl = strlen(subject), n;
	const char *s;

	if (strncmp(reply, subject, sl) != 0 || strncmp(reply + sl, ".reply.", 7) != 0)
		return false;
	s = reply + sl + 7;
	n = strlen(s);
	if (n == 0 || n > CTL_REPLY_SUFFIX_MAX || s[0] == '.' || s[n - 1] == '.' ||
	    strstr(s, "..") != NULL)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c == 0x7f || c == '*' || c == '>')
			return false;
	}
	return true;
}

/* A reply we built parses back to what we put in. */
static void
reply_round_trip(char *s, size_t len, bool ok, const char *error)
{
	json_t *root, *d;
	const char *e;
	char why[WHY_MAX];
	bool got;

	if (s == NULL)
		return;
	if (len != strlen(s))
		abort();
	if (ctl_reply_parse(s, len, &root, &got, &d, &e, why, sizeof(why)) != 0) {
		fprintf(stderr, "a reply we built does not parse: %s\n", why);
		abort();
	}
	if (got != ok || (error != NULL && (e == NULL || strcmp(e, error) != 0)))
		abort();
	json_decref(root);
	/* Fitting into a payload one byte too small replaces it, naming its
	 * length. */
	if (len > 1) {
		if ((s = ctl_reply_fit(s, &len, (int64_t)len - 1)) == NULL)
			abort();
		if (ctl_reply_parse(s, len, &root, &got, &d, &e, why, sizeof(why)) != 0 || got ||
		    e == NULL || strncmp(e, "reply of ", 9) != 0)
			abort();
		json_decref(root);
	}
	free(s);
}

static void
arguments(const struct ctl_request *r)
{
	char ch[CHANNEL_MAX + 1], uid[UID_MAX + 1], owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	char why[CTL_WHY_MAX];
	const char *s;
	char *rs;
	uint64_t v;
	size_t len;

	if (ctl_arg_channel(r, ch, sizeof(ch), why, sizeof(why)) == 0) {
		if (!channel_concrete_valid(ch))
			abort();
	} else {
		rs = ctl_reply_error(why, &len);
		reply_round_trip(rs, len, false, NULL);
	}
	if (ctl_arg_uint(r, "limit", false, 100, 1, 200, &v, why, sizeof(why)) == 0 &&
	    (v < 1 || v > 200))
		abort();
	if (ctl_arg_uint(r, "generation", true, 0, 0, UINT64_MAX, &v, why, sizeof(why)) != 0 &&
	    strncmp(why, r->op, strlen(r->op)) != 0)
		abort();
	if (ctl_arg_string(r, "description", false, 1024, &s, why, sizeof(why)) == 0 &&
	    s != NULL && strlen(s) > 1024)
		abort();
	if (ctl_arg_uid(r, uid, sizeof(uid), why, sizeof(why)) == 0 && !lifecycle_uid_valid(uid))
		abort();
	if (ctl_arg_string(r, "principal", true, PRINCIPAL_MAX, &s, why, sizeof(why)) == 0 &&
	    principal_parse(s, owner, sizeof(owner), actor, sizeof(actor)) == 0) {
		char back[PRINCIPAL_MAX + 1];
		if (!principal_owner_valid(owner) || !identity_token_valid(actor) ||
		    !principal_format(owner, actor, back, sizeof(back)) || strcmp(back, s) != 0)
			abort();
	}
	/* The arguments echoed back as data. */
	rs = ctl_reply_ok(json_deep_copy(r->args), &len);
	reply_round_trip(rs, len, true, NULL);
}

static void
body(const char *data, size_t size, const struct rail_caller *c)
{
	struct ctl_request r;
	char why[CTL_WHY_MAX], text[CTL_WHY_MAX];
	json_t *root, *d;
	const char *e;
	char *rs;
	size_t len;
	bool ok;

	switch (ctl_request_parse(data, size, c, &r, why, sizeof(why))) {
	case CTL_OK:
		if (r.root == NULL || !json_is_object(r.args) || r.op[0] == '\0' ||
		    strlen(r.op) > CTL_OP_MAX || !principal_owner_valid(c->owner))
			abort();
		arguments(&r);
		ctl_unknown_op(c->rail, r.op, text, sizeof(text));
		rs = ctl_reply_error(text, &len);
		reply_round_trip(rs, len, false, text);
		ctl_request_free(&r);
		break;
	case CTL_SENDER_MISMATCH:
		if (r.root != NULL || strcmp(why, CTL_ERR_SENDER) != 0)
			abort();
		break;
	case CTL_MALFORMED:
		if (r.root != NULL)
			abort();
		rs = ctl_reply_error(why, &len);
		reply_round_trip(rs, len, false, NULL);
		break;
	default:
		abort();
	}
	if (ctl_reply_parse(data, size, &root, &ok, &d, &e, why, sizeof(why)) == 0) {
		if (root == NULL || (d != NULL && d != json_object_get(root, "data")))
			abort();
		json_decref(root);
	} else if (root != NULL || d != NULL || e != NULL) {
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct rail_caller c;
	char why[WHY_MAX], buf[256], owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	char *subject = fuzz_line(&p, end), *reply = fuzz_line(&p, end);
	bool parsed = rail_subject_parse(subject, PREFIX, &c, why, sizeof(why)) == 0;

	if (parsed) {
		if ((unsigned)c.rail >= RAIL_COUNT || !identity_token_valid(c.owner) ||
		    !identity_token_valid(c.actor))
			abort();
		/* A subject that parses is the one we would format. */
		if (!rail_subject_format(c.rail, PREFIX, c.owner, c.actor, buf, sizeof(buf)) ||
		    strcmp(buf, subject) != 0)
			abort();
	} else {
		memset(&c, 0, sizeof(c));
		c.rail = RAIL_CTL;
		strcpy(c.owner, "local");
		strcpy(c.actor, "alice");
	}
	if (rail_reply_bound(subject, reply) != ref_bound(subject, reply) ||
	    rail_reply_bound(FIXED, reply) != ref_bound(FIXED, reply) ||
	    rail_reply_bound(subject, NULL))
		abort();
	if (principal_parse(subject, owner, sizeof(owner), actor, sizeof(actor)) == 0 &&
	    (!principal_owner_valid(owner) || !identity_token_valid(actor)))
		abort();
	/* The body gets the exact bytes, so ASan sees any read past them. */
	body(p, (size_t)(end - p), &c);
	/* And the whole input, as one more body. */
	body((const char *)data, size, &c);
	free(subject);
	free(reply);
	return 0;
}
