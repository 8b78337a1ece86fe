/*
 * Fuzz target: the registry's request path end to end, as far as an
 * agent's bytes steer it without a broker (issue 28, "a crash is not a
 * lever"): the rail guards (the reply subject bound to the request's, the
 * caller its subject names), the caller's place in the fair queue of the
 * ctl.delivery rail, the body decoded and its op's arguments read and
 * checked (worker-registry/args.c, what the registry runs before an op
 * touches a bucket), and the reply: a refusal naming the field, or the
 * op's answer built from the arguments, fitted to a max_payload and read
 * back as a client reads it.
 *
 * The input is split at its first two newlines: a request subject, a reply
 * subject, and the body (the rest, exact bytes). A subject that does not
 * parse is answered as the registry answers it (the sender refusal) and
 * the body is still read, as a ctl.delivery request of local.alice.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/ctlreq.h"
#include "tests/fuzz/fuzz_lines.h"
#include "lib/wire/tokens.h"
#include "worker-registry/args.h"
#include "worker-registry/fairq.h"

#define PREFIX "cotal.demo"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small bounds, so that a run of inputs reaches every refusal; the same
 * code as the registry's fairq with its bounds (unit_fairq). */
static const struct fairq_limits limits = {
	.caller_max = 3, .caller_serving = 1, .caller_bytes = 4096, .total_max = 8,
	.total_bytes = 16384, .refusals_per_s = 2,
};
static struct fairq q;
static bool q_ready;
static int64_t clock_ms;

/* A refusal that is not UTF-8 (a quote of the caller's bytes cut inside a
 * sequence) is sent in ASCII, every byte from 0x80 up a '?' (ctlreq.h):
 * is e that of error? */
static bool
folded_equal(const char *e, const char *error)
{
	json_t *j = json_string(error);

	json_decref(j);
	if (j != NULL || strlen(e) != strlen(error))
		return false;
	for (size_t i = 0; error[i] != '\0'; i++)
		if (e[i] != ((unsigned char)error[i] >= 0x80 ? '?' : error[i]))
			return false;
	return true;
}

/* A reply we built parses back as the client reads it: ok as sent, the
 * error as sent (or the max_payload refusal that replaced it). */
static void
reply_check(char *body, size_t len, bool ok, const char *error, int64_t max_payload)
{
	json_t *root;
	json_t *d;
	const char *e;
	char why[WHY_MAX];
	bool got;

	size_t sent = len;

	if (body == NULL)
		abort();
	if ((body = ctl_reply_fit(body, &len, max_payload)) == NULL)
		abort();
	if (len != strlen(body))
		abort();
	if (ctl_reply_parse(body, len, &root, &got, &d, &e, why, sizeof(why)) != 0) {
		fprintf(stderr, "a reply we built does not parse: %s\n", why);
		abort();
	}
	if ((int64_t)sent > max_payload) {
		/* Replaced by the refusal that names both sizes. */
		if (got || e == NULL || strncmp(e, "reply of ", 9) != 0)
			abort();
	} else if (len != sent || got != ok || (error != NULL && (e == NULL ||
	    strcmp(e, error) != 0) && !folded_equal(e, error))) {
		abort();
	}
	json_decref(root);
	free(body);
}

/* What an op answers, made from what it took (the registry's shapes). */
static json_t *
answer(const struct reg_args *a)
{
	json_t *v;

	switch (a->op) {
	case REG_OP_JOIN:
		return json_pack("{s:b, s:I}", "durable", 1, "generation", (json_int_t)1);
	case REG_OP_LEAVE:
		return json_pack("{s:s}", "channel", a->channel);
	case REG_OP_LIST:
	case REG_OP_INVENTORY:
		return json_pack("{s:[{s:s, s:I, s:b}]}", "memberships", "channel", "general",
		    "generation", (json_int_t)1, "activated", 1);
	case REG_OP_HISTORY:
		return json_pack("{s:[], s:b}", "items", "complete", a->limit < REG_HISTORY_MAX);
	case REG_OP_REGISTER:
		return json_pack("{s:s, s:b}", "channel", a->channel, "created",
		    a->description != NULL);
	case REG_OP_EVICT:
		return json_pack("{s:s, s:i, s:i, s:b, s:b}", "principal", a->principal, "kicked", 0,
		    "remaining", 0, "verifiedGone", 1, "scanComplete", 1);
	case REG_OP_EVICT_MANY:
		v = json_array();
		for (int i = 0; i < a->nprincipals; i++)
			json_array_append_new(v, json_pack("{s:s, s:i}", "principal",
			    a->principals[i], "kicked", 0));
		return v;
	case REG_OP_LIVENESS:
		return json_pack("{s:s, s:s, s:b}", "principal", a->principal, "state", "unknown",
		    "sweepComplete", 0);
	case REG_OP_RELOAD:
		return json_pack("{s:{s:b, s:b, s:s}}", "delivery", "ok", 1, "brokerAccepted",
		    a->expected[0] != '\0', "residentSwap", "scheduled");
	case REG_OP_NONE:
		break;
	}
	abort();
}

/* What reg_request_read took must be what args.h promises. */
static void
args_check(const struct rail_caller *c, const struct ctl_request *req, const struct reg_args *a)
{
	char o[IDENT_MAX + 1], ac[IDENT_MAX + 1];

	if (reg_op_find(c->rail, req->op) != a->op || a->op == REG_OP_NONE)
		abort();
	switch (a->op) {
	case REG_OP_JOIN:
	case REG_OP_LEAVE:
	case REG_OP_HISTORY:
	case REG_OP_REGISTER:
		if (!channel_concrete_valid(a->channel))
			abort();
		break;
	default:
		break;
	}
	if ((a->op == REG_OP_LEAVE || a->op == REG_OP_LIST || a->op == REG_OP_INVENTORY) &&
	    !lifecycle_uid_valid(a->uid))
		abort();
	if (a->op == REG_OP_LEAVE && a->generation < 1)
		abort();
	if (a->op == REG_OP_HISTORY && (a->limit < 1 || a->limit > REG_HISTORY_MAX))
		abort();
	if (a->op == REG_OP_REGISTER && a->description != NULL &&
	    strlen(a->description) > REG_DESCRIPTION_MAX)
		abort();
	if ((a->op == REG_OP_INVENTORY || a->op == REG_OP_EVICT || a->op == REG_OP_LIVENESS) &&
	    principal_parse(a->principal, o, sizeof(o), ac, sizeof(ac)) != 0)
		abort();
	if (a->nprincipals < 0 || a->nprincipals > REG_EVICT_MAX ||
	    (a->op != REG_OP_EVICT_MANY && a->nprincipals != 0))
		abort();
	for (int i = 0; i < a->nprincipals; i++)
		if (principal_parse(a->principals[i], o, sizeof(o), ac, sizeof(ac)) != 0)
			abort();
	if (a->expected[0] != '\0' && strlen(a->expected) != REG_SHA256_HEX)
		abort();
}

/* The body as the registry reads it when the request's turn comes. */
static void
serve(const struct rail_caller *c, const char *body, size_t len, int64_t max_payload)
{
	struct ctl_request req;
	struct reg_args a;
	char why[CTL_WHY_MAX];
	size_t n;

	if (reg_request_read(body, len, c, &req, &a, why, sizeof(why)) != 0) {
		if (req.root != NULL || a.principals != NULL || why[0] == '\0')
			abort();
		char *rs = ctl_reply_error(why, &n);
		reply_check(rs, n, false, why, max_payload);
		return;
	}
	args_check(c, &req, &a);
	char *rs = ctl_reply_ok(answer(&a), &n);
	reply_check(rs, n, true, NULL, max_payload);
	reg_request_free(&req, &a);
	if (req.root != NULL || a.principals != NULL)
		abort();
}

/* The caller's place on the ctl.delivery rail: admitted (and, every other
 * input, one waiting request served), or refused or shed past its share. */
static void
queue(const struct rail_caller *c, size_t bytes)
{
	char key[2 * IDENT_MAX + 2];
	char *item;

	if (!q_ready) {
		fairq_init(&q, &limits);
		q_ready = true;
	}
	clock_ms += 7;
	snprintf(key, sizeof(key), "%s.%s", c->owner, c->actor);
	enum fairq_verdict v = fairq_admits(&q, key, bytes);
	if (v == FAIRQ_OK) {
		if ((item = strdup(key)) == NULL)
			abort();
		if ((v = fairq_push(&q, key, item, bytes)) != FAIRQ_OK)
			free(item);
	}
	if (v == FAIRQ_NOMEM)
		abort();
	if (v != FAIRQ_OK)
		(void)fairq_refusal_due(&q, key, v, clock_ms);
	if ((clock_ms / 7) % 2 == 0 && (item = fairq_pop(&q)) != NULL) {
		fairq_done(&q, item);
		free(item);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	char *subject = fuzz_line(&p, end), *reply = fuzz_line(&p, end), *body;
	size_t blen = (size_t)(end - p), n;
	struct rail_caller c;
	char why[WHY_MAX];
	/* A broker's max_payload, from 1 byte up (the input picks it). */
	int64_t max_payload = 1 + (int64_t)((size * 2654435761u) % 8192);

	/* The exact bytes, so ASan sees any read past them. */
	if ((body = malloc(blen ? blen : 1)) == NULL)
		abort();
	memcpy(body, p, blen);
	if (!rail_reply_bound(subject, reply)) {
		/* Dropped unanswered (logged, counted); the body is never read. */
	} else if (rail_subject_parse(subject, PREFIX, &c, why, sizeof(why)) != 0) {
		char *rs = ctl_reply_error(CTL_ERR_SENDER, &n);
		reply_check(rs, n, false, CTL_ERR_SENDER, max_payload);
	} else {
		if (c.rail == RAIL_CTL)
			queue(&c, blen);
		if (c.rail != RAIL_LIVE)
			serve(&c, body, blen, max_payload);
	}
	/* The body as a request of a well-formed caller on each rail. */
	memset(&c, 0, sizeof(c));
	strcpy(c.owner, "local");
	strcpy(c.actor, "alice");
	c.rail = RAIL_CTL;
	serve(&c, body, blen, max_payload);
	c.rail = RAIL_ADMIN;
	serve(&c, body, blen, max_payload);
	free(body);
	free(subject);
	free(reply);
	return 0;
}
