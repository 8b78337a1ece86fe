/*
 * The control rails' messages (see ctlreq.h, WIRE.md §5). Every field read
 * from the network is type-checked and bounded before use; the refusal
 * texts are the wire's, so callers can match on them.
 */
#include "lib/wire/ctlreq.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/tokens.h"
#include "lib/refuse.h"

/* A request is {op, args, from} with small args: anything deeper is no
 * request of ours, and the workers then walk only shallow trees. */
#define CTL_DEPTH_MAX 32
/* NATS' own ceiling on max_payload: no reply can be longer. */
#define CTL_REPLY_MAX (64 * 1024 * 1024)

static const char *const kinds[RAIL_COUNT] = {
	"ctl.delivery", "ctl.delivery-admin", "live.delivery"
};
static const char *const queues[RAIL_COUNT] = {
	"delivery", "delivery-admin", "live.delivery"
};
static const char *const services[RAIL_COUNT] = {
	"the delivery control service", "the delivery admin service", NULL
};

const char *
rail_kind(enum rail r)
{
	return (unsigned)r < RAIL_COUNT ? kinds[r] : NULL;
}

const char *
rail_queue(enum rail r)
{
	return (unsigned)r < RAIL_COUNT ? queues[r] : NULL;
}

const char *
rail_service(enum rail r)
{
	return (unsigned)r < RAIL_COUNT ? services[r] : NULL;
}

int
rail_subject_parse(const char *subject, const char *prefix, struct rail_caller *out,
		   char *why, size_t whylen)
{
	size_t pl = strlen(prefix);
	const char *p, *dot;
	int r;

	memset(out, 0, sizeof(*out));
	if (subject == NULL || strncmp(subject, prefix, pl) != 0 || subject[pl] != '.')
		return refuse(why, whylen, "subject is not under %s", prefix);
	p = subject + pl + 1;
	/* "ctl.delivery" is a prefix of "ctl.delivery-admin": the '.' after
	 * the kind tells them apart. */
	for (r = 0; r < RAIL_COUNT; r++) {
		size_t kl = strlen(kinds[r]);
		if (strncmp(p, kinds[r], kl) == 0 && p[kl] == '.') {
			p += kl + 1;
			break;
		}
	}
	if (r == RAIL_COUNT)
		return refuse(why, whylen, "subject is not of a control rail's shape");
	out->rail = (enum rail)r;
	if ((dot = strchr(p, '.')) == NULL ||
	    !take(p, (size_t)(dot - p), out->owner, sizeof(out->owner)) ||
	    !identity_token_valid(out->owner))
		return refuse(why, whylen, "subject: bad owner token");
	p = dot + 1;
	if (!take(p, strlen(p), out->actor, sizeof(out->actor)) ||
	    !identity_token_valid(out->actor))
		return refuse(why, whylen, "subject: bad actor token");
	return 0;
}

bool
rail_subject_format(enum rail r, const char *prefix, const char *owner, const char *actor,
		    char *buf, size_t len)
{
	int n;

	if (rail_kind(r) == NULL)
		return false;
	n = snprintf(buf, len, "%s.%s.%s.%s", prefix, kinds[r], owner, actor);
	return n > 0 && (size_t)n < len;
}

bool
rail_reply_bound(const char *subject, const char *reply)
{
	static const char mid[] = ".reply.";
	size_t sl, i;
	const char *s;

	if (subject == NULL || reply == NULL)
		return false;
	sl = strlen(subject);
	if (strncmp(reply, subject, sl) != 0 || strncmp(reply + sl, mid, sizeof(mid) - 1) != 0)
		return false;
	s = reply + sl + sizeof(mid) - 1;
	/* Tokens: no empty one (first, last, or "..") and nothing NATS
	 * would read as a wildcard or a separator. */
	for (i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];
		if (i == CTL_REPLY_SUFFIX_MAX)
			return false;
		if (c <= ' ' || c == 0x7f || c == '*' || c == '>')
			return false;
		if (c == '.' && (i == 0 || s[i - 1] == '.'))
			return false;
	}
	return i > 0 && s[i - 1] != '.';
}

/* Is v nested deeper than n (a scalar is 0 deep, a container one more than
 * its deepest member)? Stops as soon as it knows. */
static bool
too_deep(json_t *v, size_t n)
{
	const char *k;
	json_t *x;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return false;
	if (n == 0)
		return true;
	if (json_is_object(v)) {
		json_object_foreach(v, k, x)
			if (too_deep(x, n - 1))
				return true;
	} else {
		json_array_foreach(v, i, x)
			if (too_deep(x, n - 1))
				return true;
	}
	return false;
}

/* The string value of v, or NULL when v is no string or holds a NUL (a C
 * string could not carry it). */
static const char *
cstring(json_t *v)
{
	const char *s = json_string_value(v);

	if (s == NULL || strlen(s) != json_string_length(v))
		return NULL;
	return s;
}

enum ctl_verdict
ctl_request_parse(const char *data, size_t len, const struct rail_caller *caller,
		  struct ctl_request *out, char *why, size_t whylen)
{
	char sender[PRINCIPAL_MAX + 1];
	json_error_t err;
	json_t *v, *args;
	const char *s;

	memset(out, 0, sizeof(*out));
	if (data == NULL || len == 0) {
		refuse(why, whylen, "request: empty body");
		return CTL_MALFORMED;
	}
	if (len > CTL_REQUEST_MAX) {
		refuse(why, whylen, "request: body of %zu bytes exceeds %d", len, CTL_REQUEST_MAX);
		return CTL_MALFORMED;
	}
	if ((v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err)) == NULL) {
		refuse(why, whylen, "request: %s", err.text);
		return CTL_MALFORMED;
	}
	if (!json_is_object(v)) {
		refuse(why, whylen, "request: must be a JSON object");
		goto malformed;
	}
	if (too_deep(v, CTL_DEPTH_MAX)) {
		refuse(why, whylen, "request: nested deeper than %d levels", CTL_DEPTH_MAX);
		goto malformed;
	}
	/* WIRE.md §5: from.id is the subject's caller, a principal. */
	s = cstring(json_object_get(json_object_get(v, "from"), "id"));
	if (s == NULL || !principal_format(caller->owner, caller->actor, sender, sizeof(sender)) ||
	    strcmp(s, sender) != 0 || !principal_owner_valid(caller->owner)) {
		refuse(why, whylen, "%s", CTL_ERR_SENDER);
		json_decref(v);
		return CTL_SENDER_MISMATCH;
	}
	s = cstring(json_object_get(v, "op"));
	if (s == NULL || s[0] == '\0' || strlen(s) > CTL_OP_MAX) {
		refuse(why, whylen, "op: must be a string of 1 to %d bytes", CTL_OP_MAX);
		goto malformed;
	}
	strcpy(out->op, s);
	args = json_object_get(v, "args");
	if (args == NULL || json_is_null(args)) {
		/* Kept in root, so args is borrowed either way. */
		if (json_object_set_new(v, "args", json_object()) != 0) {
			refuse(why, whylen, "request: out of memory");
			goto malformed;
		}
		args = json_object_get(v, "args");
	} else if (!json_is_object(args)) {
		refuse(why, whylen, "args: must be an object");
		goto malformed;
	}
	out->root = v;
	out->args = args;
	return CTL_OK;
malformed:
	json_decref(v);
	memset(out, 0, sizeof(*out));
	return CTL_MALFORMED;
}

void
ctl_request_free(struct ctl_request *r)
{
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}

void
ctl_unknown_op(enum rail r, const char *op, char *buf, size_t len)
{
	const char *svc = rail_service(r);

	/* The liveness rail has no ops; name it all the same. */
	snprintf(buf, len, "op \"%s\" not supported on %s", op,
	    svc != NULL ? svc : "the delivery liveness rail");
}

static bool
segment_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '_' || c == '-';
}

int
ctl_arg_channel(const struct ctl_request *r, char *out, size_t outlen, char *why,
		size_t whylen)
{
	const char *ch = cstring(json_object_get(r->args, "channel")), *seg;
	size_t n, sl, len;

	/* Blank: empty or white space only. */
	if (ch == NULL || ch[strspn(ch, " \t\n\v\f\r")] == '\0')
		return refuse(why, whylen, "%s: channel must be a non-blank string", r->op);
	if ((len = strlen(ch)) > CHANNEL_MAX)
		return refuse(why, whylen, "%s: channel is longer than %d characters", r->op,
		    CHANNEL_MAX);
	if (channel_pattern_valid(ch) && !channel_concrete_valid(ch))
		return refuse(why, whylen, "%s: \"%s\" must be a concrete channel (durable "
		    "membership is per-concrete-channel, not wildcard)", r->op, ch);
	/* Not even a pattern: name the first segment that breaks the grammar.
	 * One that does not is a concrete channel. */
	for (seg = ch, n = 1;; seg += sl + 1, n++) {
		sl = strcspn(seg, ".");
		if (sl == 0)
			return refuse(why, whylen, "%s: channel \"%s\" has an empty segment %zu",
			    r->op, ch, n);
		for (size_t i = 0; i < sl; i++)
			if (!segment_char((unsigned char)seg[i]))
				return refuse(why, whylen,
				    "%s: channel \"%s\" segment %zu \"%.*s\" is not [A-Za-z0-9_-]+",
				    r->op, ch, n, (int)sl, seg);
		if (seg[sl] == '\0')
			break;
	}
	if (len >= outlen)
		return refuse(why, whylen, "%s: channel is longer than %zu characters", r->op,
		    outlen - 1);
	memcpy(out, ch, len + 1);
	return 0;
}

int
ctl_arg_uint(const struct ctl_request *r, const char *name, bool required, uint64_t def,
	     uint64_t min, uint64_t max, uint64_t *out, char *why, size_t whylen)
{
	json_t *v = json_object_get(r->args, name);
	uint64_t u;

	if (v == NULL || json_is_null(v)) {
		if (required)
			return refuse(why, whylen, "%s: %s is required", r->op, name);
		*out = def;
		return 0;
	}
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		u = (uint64_t)json_integer_value(v);
	} else if (json_is_real(v) && json_real_value(v) >= 0 &&
	    json_real_value(v) < 18446744073709551616.0) {
		/* 2.0 is a whole number (a JavaScript caller cannot tell);
		 * 2.5 is not. In range, so the cast is defined. */
		u = (uint64_t)json_real_value(v);
		if ((double)u != json_real_value(v))
			goto bad;
	} else
		goto bad;
	if (u < min || u > max)
		goto bad;
	*out = u;
	return 0;
bad:
	return refuse(why, whylen, "%s: %s must be a whole number from %" PRIu64 " to %" PRIu64,
	    r->op, name, min, max);
}

int
ctl_arg_string(const struct ctl_request *r, const char *name, bool required, size_t max,
	       const char **out, char *why, size_t whylen)
{
	json_t *v = json_object_get(r->args, name);
	const char *s;

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return refuse(why, whylen, "%s: %s is required", r->op, name);
		return 0;
	}
	if ((s = cstring(v)) == NULL)
		return refuse(why, whylen, "%s: %s must be a string", r->op, name);
	if (strlen(s) > max)
		return refuse(why, whylen, "%s: %s is longer than %zu bytes", r->op, name, max);
	*out = s;
	return 0;
}

int
ctl_arg_uid(const struct ctl_request *r, char *out, size_t outlen, char *why, size_t whylen)
{
	json_t *v = json_object_get(r->args, "lifecycleUid");
	const char *s = cstring(v);

	if (v == NULL || json_is_null(v))
		return refuse(why, whylen, "%s: lifecycleUid is required", r->op);
	if (s == NULL || !lifecycle_uid_valid(s) || !take(s, strlen(s), out, outlen))
		return refuse(why, whylen, "%s: lifecycleUid must match ^[a-z0-9]{26,32}$", r->op);
	return 0;
}

int
principal_parse(const char *s, char *owner, size_t ownerlen, char *actor, size_t actorlen)
{
	const char *dot;

	if (s == NULL || (dot = strchr(s, '.')) == NULL)
		return -1;
	if (!take(s, (size_t)(dot - s), owner, ownerlen) || !principal_owner_valid(owner))
		return -1;
	/* identity_token_valid refuses a second '.'. */
	if (!take(dot + 1, strlen(dot + 1), actor, actorlen) || !identity_token_valid(actor))
		return -1;
	return 0;
}

/* {"ok":ok,key:val} compactly; steals val (NULL: no member). */
static char *
reply(bool ok, const char *key, json_t *val, size_t *len)
{
	json_t *v = json_object();
	char *s = NULL;

	if (v == NULL || json_object_set_new(v, "ok", json_boolean(ok)) != 0) {
		json_decref(val);
		goto out;
	}
	/* set_new steals its value even when it fails. */
	if (val != NULL && json_object_set_new(v, key, val) != 0)
		goto out;
	if ((s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER)) != NULL && len != NULL)
		*len = strlen(s);
out:
	json_decref(v);
	return s;
}

char *
ctl_reply_ok(json_t *data, size_t *len)
{
	return reply(true, "data", data, len);
}

char *
ctl_reply_error(const char *text, size_t *len)
{
	json_t *e = json_string(text != NULL ? text : "");
	char *ascii;

	/* A refusal cut short by its buffer may end inside a UTF-8 sequence,
	 * which JSON cannot carry: fall back to ASCII rather than no reply. */
	if (e == NULL && text != NULL && (ascii = strdup(text)) != NULL) {
		for (char *p = ascii; *p != '\0'; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		e = json_string(ascii);
		free(ascii);
	}
	if (e == NULL)
		return NULL;
	return reply(false, "error", e, len);
}

char *
ctl_reply_fit(char *reply, size_t *len, int64_t max_payload)
{
	char text[128];

	/* max_payload <= 0: not known (no connection); the publish fails
	 * on its own then. */
	if (reply == NULL || max_payload <= 0 || *len <= (uint64_t)max_payload)
		return reply;
	snprintf(text, sizeof(text), "reply of %zu bytes exceeds the broker max_payload of %" PRId64
	    " bytes", *len, max_payload);
	free(reply);
	return ctl_reply_error(text, len);
}

int
ctl_reply_parse(const char *data, size_t len, json_t **root, bool *ok, json_t **out_data,
		const char **error, char *why, size_t whylen)
{
	json_error_t err;
	json_t *v, *e, *d;

	*root = NULL;
	*out_data = NULL;
	*error = NULL;
	*ok = false;
	if (data == NULL || len == 0)
		return refuse(why, whylen, "reply: empty body");
	if (len > CTL_REPLY_MAX)
		return refuse(why, whylen, "reply: body of %zu bytes exceeds %d", len,
		    CTL_REPLY_MAX);
	if ((v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err)) == NULL)
		return refuse(why, whylen, "reply: %s", err.text);
	if (!json_is_object(v)) {
		json_decref(v);
		return refuse(why, whylen, "reply: must be a JSON object");
	}
	if (!json_is_boolean(json_object_get(v, "ok"))) {
		json_decref(v);
		return refuse(why, whylen, "reply: ok must be a boolean");
	}
	e = json_object_get(v, "error");
	if (e != NULL && !json_is_null(e) && cstring(e) == NULL) {
		json_decref(v);
		return refuse(why, whylen, "reply: error must be a string");
	}
	*ok = json_is_true(json_object_get(v, "ok"));
	*error = cstring(e);
	d = json_object_get(v, "data");
	*out_data = json_is_null(d) ? NULL : d;
	*root = v;
	return 0;
}
