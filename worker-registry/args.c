/*
 * The registry's rail requests read and checked (args.h): the op on its
 * rail, then each op's arguments with WIRE.md §5's refusals.
 */
#include "worker-registry/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	enum rail rail;
	enum reg_op op;
} ops[] = {
	{ "durableJoin", RAIL_CTL, REG_OP_JOIN },
	{ "durableLeave", RAIL_CTL, REG_OP_LEAVE },
	{ "listMemberships", RAIL_CTL, REG_OP_LIST },
	{ "readHistory", RAIL_CTL, REG_OP_HISTORY },
	{ "registerChannel", RAIL_CTL, REG_OP_REGISTER },
	{ "lifecycleMemberships", RAIL_ADMIN, REG_OP_INVENTORY },
	{ "evictPrincipals", RAIL_ADMIN, REG_OP_EVICT_MANY },
	{ "evictPrincipal", RAIL_ADMIN, REG_OP_EVICT },
	{ "principalLiveness", RAIL_ADMIN, REG_OP_LIVENESS },
	{ "reloadCreds", RAIL_ADMIN, REG_OP_RELOAD },
};

enum reg_op
reg_op_find(enum rail rail, const char *name)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].rail == rail && strcmp(ops[i].name, name) == 0)
			return ops[i].op;
	return REG_OP_NONE;
}

/* args.<name> a principal "<o>.<a>" into out. */
static int
arg_principal(const struct ctl_request *req, const char *name, char *out, size_t outlen,
	      char *why, size_t whylen)
{
	char o[IDENT_MAX + 1], a[IDENT_MAX + 1];
	const char *p;

	if (ctl_arg_string(req, name, true, PRINCIPAL_MAX, &p, why, whylen) != 0)
		return -1;
	if (principal_parse(p, o, sizeof(o), a, sizeof(a)) != 0) {
		snprintf(why, whylen, "%s: \"%s\" is not a principal", req->op, p);
		return -1;
	}
	snprintf(out, outlen, "%s", p);
	return 0;
}

/* evictPrincipals: args.principals, an array of at most REG_EVICT_MAX. */
static int
arg_principals(const struct ctl_request *req, struct reg_args *a, char *why, size_t whylen)
{
	char o[IDENT_MAX + 1], ac[IDENT_MAX + 1];
	json_t *v = json_object_get(req->args, "principals"), *e;
	size_t i;

	if (!json_is_array(v)) {
		snprintf(why, whylen, "evictPrincipals: principals must be an array");
		return -1;
	}
	if (json_array_size(v) > REG_EVICT_MAX) {
		snprintf(why, whylen, "evictPrincipals: at most %d principals per request (got %zu)",
		    REG_EVICT_MAX, json_array_size(v));
		return -1;
	}
	if (json_array_size(v) > 0 &&
	    (a->principals = calloc(json_array_size(v), sizeof(*a->principals))) == NULL) {
		snprintf(why, whylen, "evictPrincipals: out of memory");
		return -1;
	}
	json_array_foreach(v, i, e) {
		const char *p = json_string_value(e);
		if (p == NULL || strlen(p) > PRINCIPAL_MAX ||
		    principal_parse(p, o, sizeof(o), ac, sizeof(ac)) != 0) {
			snprintf(why, whylen, "evictPrincipals: principals[%zu] %s%.200s%s is not a "
			    "principal", i, p ? "\"" : "", p ? p : "(not a string)", p ? "\"" : "");
			return -1;
		}
		snprintf(a->principals[a->nprincipals++], sizeof(a->principals[0]), "%s", p);
	}
	return 0;
}

static bool
sha256_hex(const char *s)
{
	if (strlen(s) != REG_SHA256_HEX)
		return false;
	for (size_t i = 0; i < REG_SHA256_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* reloadCreds: args.expected absent, null, or {delivery?: sha256 hex}. */
static int
arg_expected(const struct ctl_request *req, struct reg_args *a, char *why, size_t whylen)
{
	json_t *exp = json_object_get(req->args, "expected"), *d;

	if (exp == NULL || json_is_null(exp))
		return 0;
	d = json_object_get(exp, "delivery");
	if (!json_is_object(exp) || (d != NULL && (!json_is_string(d) ||
	    !sha256_hex(json_string_value(d))))) {
		snprintf(why, whylen, "reloadCreds: expected.delivery must be the SHA-256 of the JWT "
		    "in lowercase hex");
		return -1;
	}
	if (d != NULL)
		snprintf(a->expected, sizeof(a->expected), "%s", json_string_value(d));
	return 0;
}

static int
args_read(const struct ctl_request *req, struct reg_args *a, char *why, size_t whylen)
{
	switch (a->op) {
	case REG_OP_JOIN:
		return ctl_arg_channel(req, a->channel, sizeof(a->channel), why, whylen);
	case REG_OP_LEAVE:
		if (ctl_arg_channel(req, a->channel, sizeof(a->channel), why, whylen) != 0 ||
		    ctl_arg_uint(req, "generation", true, 0, 1, INT64_MAX, &a->generation, why,
		    whylen) != 0)
			return -1;
		return ctl_arg_uid(req, a->uid, sizeof(a->uid), why, whylen);
	case REG_OP_LIST:
		return ctl_arg_uid(req, a->uid, sizeof(a->uid), why, whylen);
	case REG_OP_HISTORY:
		if (ctl_arg_channel(req, a->channel, sizeof(a->channel), why, whylen) != 0)
			return -1;
		return ctl_arg_uint(req, "limit", false, REG_HISTORY_DEFAULT, 1, REG_HISTORY_MAX,
		    &a->limit, why, whylen);
	case REG_OP_REGISTER:
		if (ctl_arg_channel(req, a->channel, sizeof(a->channel), why, whylen) != 0)
			return -1;
		return ctl_arg_string(req, "description", false, REG_DESCRIPTION_MAX,
		    &a->description, why, whylen);
	case REG_OP_INVENTORY:
		if (arg_principal(req, "principal", a->principal, sizeof(a->principal), why,
		    whylen) != 0)
			return -1;
		return ctl_arg_uid(req, a->uid, sizeof(a->uid), why, whylen);
	case REG_OP_EVICT:
	case REG_OP_LIVENESS:
		return arg_principal(req, "principal", a->principal, sizeof(a->principal), why,
		    whylen);
	case REG_OP_EVICT_MANY:
		return arg_principals(req, a, why, whylen);
	case REG_OP_RELOAD:
		return arg_expected(req, a, why, whylen);
	case REG_OP_NONE:
		break;
	}
	snprintf(why, whylen, "%s: no such op", req->op);
	return -1;
}

int
reg_request_read(const char *body, size_t len, const struct rail_caller *caller,
		 struct ctl_request *req, struct reg_args *args, char *why, size_t whylen)
{
	memset(args, 0, sizeof(*args));
	memset(req, 0, sizeof(*req));
	switch (ctl_request_parse(body, len, caller, req, why, whylen)) {
	case CTL_OK:
		break;
	case CTL_SENDER_MISMATCH:
		snprintf(why, whylen, "%s", CTL_ERR_SENDER);
		return -1;
	case CTL_MALFORMED:
		return -1;
	}
	if ((args->op = reg_op_find(caller->rail, req->op)) == REG_OP_NONE) {
		ctl_unknown_op(caller->rail, req->op, why, whylen);
		reg_request_free(req, args);
		return -1;
	}
	if (args_read(req, args, why, whylen) != 0) {
		reg_request_free(req, args);
		return -1;
	}
	return 0;
}

void
reg_request_free(struct ctl_request *req, struct reg_args *args)
{
	if (args != NULL) {
		free(args->principals);
		args->principals = NULL;
		args->nprincipals = 0;
		args->description = NULL;
	}
	if (req != NULL)
		ctl_request_free(req);
}
