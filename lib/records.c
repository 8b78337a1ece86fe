/*
 * Subjects and records of the data path (see records.h). Every field read
 * from the network is type-checked and bounded before use.
 */
#include "lib/records.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tokens.h"
#include "lib/refuse.h"

/* After "<prefix>.<kind>." return the rest of subject, or NULL. */
static const char *
after_kind(const char *subject, const char *prefix, const char *kind)
{
	size_t pl = strlen(prefix), kl = strlen(kind);

	if (strncmp(subject, prefix, pl) != 0 || subject[pl] != '.')
		return NULL;
	subject += pl + 1;
	if (strncmp(subject, kind, kl) != 0 || subject[kl] != '.')
		return NULL;
	return subject + kl + 1;
}

/* Next dot-terminated token of *p; advances past the dot. */
static bool
next_token(const char **p, char *out, size_t outlen)
{
	const char *dot = strchr(*p, '.');

	if (dot == NULL)
		return false;
	if (!take(*p, (size_t)(dot - *p), out, outlen))
		return false;
	*p = dot + 1;
	return true;
}

int
chat_subject_parse(const char *subject, const char *prefix, struct chat_subject *out,
		   char *why, size_t whylen)
{
	const char *p = after_kind(subject, prefix, "chat");

	if (p == NULL)
		return refuse(why, whylen, "subject is not of the chat shape");
	if (!next_token(&p, out->owner, sizeof(out->owner)) || !identity_token_valid(out->owner))
		return refuse(why, whylen, "subject: bad owner token");
	if (!next_token(&p, out->actor, sizeof(out->actor)) || !identity_token_valid(out->actor))
		return refuse(why, whylen, "subject: bad actor token");
	if (strlen(p) > CHANNEL_MAX || !channel_concrete_valid(p))
		return refuse(why, whylen, "subject: channel is not a concrete channel");
	strcpy(out->channel, p);
	return 0;
}

int
dinbox_subject_parse(const char *subject, const char *prefix, struct lifecycle *out,
		     char *why, size_t whylen)
{
	const char *p = after_kind(subject, prefix, "dinbox");

	if (p == NULL)
		return refuse(why, whylen, "subject is not of the dinbox shape");
	/* Exactly 6 tokens: cotal, <s>, dinbox, <o>, <a>, <uid>. The space
	 * token has no dots, so three are left after the kind. */
	if (strncmp(prefix, "cotal.", 6) != 0 || strchr(prefix + 6, '.') != NULL)
		return refuse(why, whylen, "subject: bad space prefix");
	if (!next_token(&p, out->owner, sizeof(out->owner)) || !identity_token_valid(out->owner))
		return refuse(why, whylen, "subject: bad owner token");
	if (!next_token(&p, out->actor, sizeof(out->actor)) || !identity_token_valid(out->actor))
		return refuse(why, whylen, "subject: bad actor token");
	if (strchr(p, '.') != NULL || !take(p, strlen(p), out->uid, sizeof(out->uid)) ||
	    !lifecycle_uid_valid(out->uid))
		return refuse(why, whylen, "subject: bad lifecycle uid");
	return 0;
}

bool
principal_format(const char *owner, const char *actor, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.%s", owner, actor);

	return n > 0 && (size_t)n < len;
}

bool
lifecycle_format(const struct lifecycle *l, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s.%s.%s", l->owner, l->actor, l->uid);

	return n > 0 && (size_t)n < len;
}

int
lifecycle_parse(const char *s, struct lifecycle *out)
{
	const char *p = s;

	if (!next_token(&p, out->owner, sizeof(out->owner)) || !identity_token_valid(out->owner))
		return -1;
	if (!next_token(&p, out->actor, sizeof(out->actor)) || !identity_token_valid(out->actor))
		return -1;
	if (strchr(p, '.') != NULL || !take(p, strlen(p), out->uid, sizeof(out->uid)) ||
	    !lifecycle_uid_valid(out->uid))
		return -1;
	return 0;
}

/* Decode a bounded JSON object; NULL when it is not one. */
static json_t *
decode_object(const char *data, size_t len)
{
	json_t *v;

	if (data == NULL || len == 0 || len > RECORD_MAX)
		return NULL;
	v = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
	if (v != NULL && !json_is_object(v)) {
		json_decref(v);
		return NULL;
	}
	return v;
}

/* Nesting depth of v: a scalar 0, a container one more than its deepest
 * member. Bounded by the parser's own limit. */
static size_t
json_depth(json_t *v)
{
	size_t d = 0, i;
	const char *k;
	json_t *x;

	if (json_is_object(v)) {
		json_object_foreach(v, k, x) {
			size_t c = json_depth(x);
			d = c > d ? c : d;
		}
		return d + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, x) {
			size_t c = json_depth(x);
			d = c > d ? c : d;
		}
		return d + 1;
	}
	return 0;
}

/* What an entry or a frame adds around its msg: keys, a concrete channel
 * (no escapes), two 20-digit numbers, the longer reason. */
#define ENVELOPE_MAX (CHANNEL_MAX + 128)

enum post_verdict
post_decode(const char *data, size_t len, const struct chat_subject *cs, json_t **msg,
	    char *why, size_t whylen)
{
	char sender[PRINCIPAL_MAX + 1];
	json_t *m, *from, *fid, *id;

	*msg = NULL;
	if (len > RECORD_MAX) {
		refuse(why, whylen, "payload of %zu bytes exceeds %d", len, RECORD_MAX);
		return POST_UNDECODABLE;
	}
	if ((m = decode_object(data, len)) == NULL) {
		refuse(why, whylen, "payload is not a JSON object");
		return POST_UNDECODABLE;
	}
	id = json_object_get(m, "id");
	if (!json_is_string(id)) {
		refuse(why, whylen, "id: not a string");
		goto undecodable;
	}
	if (json_string_length(id) > MSG_ID_MAX) {
		refuse(why, whylen, "id: longer than %d bytes", MSG_ID_MAX);
		goto undecodable;
	}
	if (!json_is_number(json_object_get(m, "ts"))) {
		refuse(why, whylen, "ts: not a number");
		goto undecodable;
	}
	if (!json_is_string(json_object_get(m, "space"))) {
		refuse(why, whylen, "space: not a string");
		goto undecodable;
	}
	if (!json_is_array(json_object_get(m, "parts"))) {
		refuse(why, whylen, "parts: not an array");
		goto undecodable;
	}
	from = json_object_get(m, "from");
	fid = json_object_get(from, "id");
	if (!json_is_object(from) || !json_is_string(fid)) {
		refuse(why, whylen, "from.id: not a string");
		goto undecodable;
	}
	if (!json_is_string(json_object_get(from, "name"))) {
		refuse(why, whylen, "from.name: not a string");
		goto undecodable;
	}
	/* WIRE.md §2: authentic only if from.id is the subject's sender and the
	 * owner is a principal owner. */
	if (!principal_format(cs->owner, cs->actor, sender, sizeof(sender)) ||
	    strcmp(json_string_value(fid), sender) != 0) {
		refuse(why, whylen, "from.id is not the subject's sender %s.%s", cs->owner, cs->actor);
		json_decref(m);
		return POST_INAUTHENTIC;
	}
	if (!principal_owner_valid(cs->owner)) {
		refuse(why, whylen, "sender owner \"%s\" is not a principal owner", cs->owner);
		json_decref(m);
		return POST_INAUTHENTIC;
	}
	/* Normalization: the channel is the subject's; to/toService go. */
	/* The channel goes last, so the reader can check it without decoding
	 * the message again (entry_view). */
	json_object_del(m, "channel");
	json_object_set_new(m, "channel", json_string(cs->channel));
	json_object_del(m, "to");
	json_object_del(m, "toService");
	/* The entry and the frame wrap the message one level deeper and carry
	 * it re-serialized (a real is written with 17 digits), so a post must
	 * leave room for both, or its entry would not decode. */
	if (json_depth(m) >= JSON_PARSER_MAX_DEPTH) {
		refuse(why, whylen, "payload nested deeper than %d levels",
		    JSON_PARSER_MAX_DEPTH - 1);
		goto undecodable;
	}
	size_t need = json_dumpb(m, NULL, 0, JSON_COMPACT);
	if (need == 0 || need > RECORD_MAX - ENVELOPE_MAX) {
		refuse(why, whylen, "payload serializes to %zu bytes, over %d", need,
		    RECORD_MAX - ENVELOPE_MAX);
		goto undecodable;
	}
	*msg = m;
	return POST_OK;
undecodable:
	json_decref(m);
	return POST_UNDECODABLE;
}

const char *
post_id(const json_t *msg)
{
	const char *id = json_string_value(json_object_get(msg, "id"));

	return id != NULL ? id : "";
}

size_t
post_mentions(const json_t *msg, const char **names, size_t max)
{
	json_t *arr = json_object_get(msg, "mentions"), *v;
	size_t i, n = 0;

	if (!json_is_array(arr))
		return 0;
	json_array_foreach(arr, i, v) {
		if (n == max)
			break;
		if (json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= 256)
			names[n++] = json_string_value(v);
	}
	return n;
}

/* deliveryClass of a config row: 1 live, 0 durable, -1 not set. */
static int
row_class(const char *row, size_t len)
{
	json_t *v = decode_object(row, len);
	const char *c;
	int r = -1;

	if (v == NULL)
		return -1;
	c = json_string_value(json_object_get(v, "deliveryClass"));
	if (c != NULL && strcmp(c, "live") == 0)
		r = 1;
	else if (c != NULL && strcmp(c, "durable") == 0)
		r = 0;
	json_decref(v);
	return r;
}

enum delivery_class
channel_class(const char *row, size_t rowlen, const char *defaults, size_t defaultslen)
{
	int c = row_class(row, rowlen);

	if (c < 0)
		c = row_class(defaults, defaultslen);
	return c == 1 ? CLASS_LIVE : CLASS_DURABLE;
}

void
acl_row_parse(const char *data, size_t len, struct acl_row *out)
{
	json_t *v = decode_object(data, len), *arr, *p;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (v == NULL)
		return;
	arr = json_object_get(v, "allowSubscribe");
	if (!json_is_array(arr))
		goto out;
	if (json_is_true(json_object_get(v, "retired"))) {
		/* A tombstone reads nothing, whatever its list says. */
		out->state = ACL_RETIRED;
		goto out;
	}
	out->state = ACL_LIVE;
	size_t n = json_array_size(arr);
	if (n > ACL_PATTERNS_MAX)
		n = ACL_PATTERNS_MAX;
	if (n > 0 && (out->patterns = calloc(n, sizeof(char *))) == NULL) {
		out->state = ACL_UNKNOWN;
		goto out;
	}
	json_array_foreach(arr, i, p) {
		if (out->npatterns == n)
			break;
		const char *s = json_string_value(p);
		/* An entry that is not a valid pattern grants nothing. */
		if (s == NULL || strlen(s) > CHANNEL_MAX || !channel_pattern_valid(s))
			continue;
		if ((out->patterns[out->npatterns] = strdup(s)) == NULL)
			break;
		out->npatterns++;
	}
out:
	json_decref(v);
}

void
acl_row_free(struct acl_row *r)
{
	for (size_t i = 0; i < r->npatterns; i++)
		free(r->patterns[i]);
	free(r->patterns);
	memset(r, 0, sizeof(*r));
}

bool
channel_pattern_match(const char *pattern, const char *channel)
{
	const char *p = pattern, *c = channel;

	for (;;) {
		size_t pl = strcspn(p, "."), cl = strcspn(c, ".");

		if (pl == 1 && p[0] == '>' && p[1] == '\0')
			return cl > 0; /* '>' needs at least one token */
		if (!(pl == 1 && p[0] == '*') && (pl != cl || strncmp(p, c, pl) != 0))
			return false;
		if (cl == 0)
			return false;
		p += pl, c += cl;
		if (*p == '\0' || *c == '\0')
			return *p == '\0' && *c == '\0';
		p++, c++;
	}
}

bool
acl_covers(const struct acl_row *r, const char *channel)
{
	if (r->state != ACL_LIVE)
		return false;
	for (size_t i = 0; i < r->npatterns; i++)
		if (channel_pattern_match(r->patterns[i], channel))
			return true;
	return false;
}

int
member_key_parse(const char *key, char *channel, size_t chlen, struct lifecycle *who)
{
	const char *slash = strrchr(key, '/');
	size_t n;

	if (slash == NULL)
		return -1;
	n = (size_t)(slash - key);
	if (!take(key, n, channel, chlen) || !channel_concrete_valid(channel))
		return -1;
	return lifecycle_parse(slash + 1, who);
}

bool
member_key_format(const char *channel, const struct lifecycle *who, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.%s.%s", channel, who->owner, who->actor, who->uid);

	return n > 0 && (size_t)n < len;
}

/* A cursor: a non-negative integer. */
static int
get_cursor(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

size_t
member_row_size(const struct member_row *r)
{
	return offsetof(struct member_row, channel) + strnlen(r->channel, CHANNEL_MAX) + 1;
}

struct member_row *
member_row_compact(const struct member_row *r)
{
	size_t n = strnlen(r->channel, CHANNEL_MAX);
	char *p = malloc(offsetof(struct member_row, channel) + n + 1);

	if (p == NULL)
		return NULL;
	memcpy(p, r, offsetof(struct member_row, channel));
	memcpy(p + offsetof(struct member_row, channel), r->channel, n);
	p[offsetof(struct member_row, channel) + n] = '\0';
	return (struct member_row *)(void *)p;
}

int
member_row_parse(const char *key, const char *data, size_t len, struct member_row *out,
		 char *why, size_t whylen)
{
	char principal[PRINCIPAL_MAX + 1];
	json_t *v, *lc;
	const char *s;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (member_key_parse(key, out->channel, sizeof(out->channel), &out->who) != 0)
		return refuse(why, whylen, "key is not <channel>/<o>.<a>.<uid>");
	if ((v = decode_object(data, len)) == NULL)
		return refuse(why, whylen, "value is not a JSON object");
	s = json_string_value(json_object_get(v, "channel"));
	if (s == NULL || strcmp(s, out->channel) != 0) {
		refuse(why, whylen, "channel: does not match the key");
		goto out;
	}
	principal_format(out->who.owner, out->who.actor, principal, sizeof(principal));
	s = json_string_value(json_object_get(v, "owner"));
	if (s == NULL || strcmp(s, principal) != 0) {
		refuse(why, whylen, "owner: does not match the key");
		goto out;
	}
	s = json_string_value(json_object_get(v, "lifecycleUid"));
	if (s == NULL || strcmp(s, out->who.uid) != 0) {
		refuse(why, whylen, "lifecycleUid: does not match the key");
		goto out;
	}
	if (get_cursor(json_object_get(v, "joinCursor"), &out->join_cursor) != 0) {
		refuse(why, whylen, "joinCursor: not a non-negative integer");
		goto out;
	}
	lc = json_object_get(v, "leaveCursor");
	if (lc != NULL && !json_is_null(lc)) {
		if (get_cursor(lc, &out->leave_cursor) != 0) {
			refuse(why, whylen, "leaveCursor: not a non-negative integer");
			goto out;
		}
		out->has_leave = true;
	}
	if (get_cursor(json_object_get(v, "generation"), &out->generation) != 0) {
		refuse(why, whylen, "generation: not a non-negative integer");
		goto out;
	}
	s = json_string_value(json_object_get(v, "state"));
	if (s == NULL || (strcmp(s, "durable-active") != 0 && strcmp(s, "live-confirmed") != 0)) {
		refuse(why, whylen, "state: not durable-active or live-confirmed");
		goto out;
	}
	out->active = strcmp(s, "durable-active") == 0;
	out->activated = json_is_true(json_object_get(v, "activated"));
	rc = 0;
out:
	json_decref(v);
	return rc;
}

static char *dump(json_t *v, size_t *len);

char *
member_row_build(const struct member_row *r, const char *writer, int64_t updated_at, size_t *len)
{
	char owner[PRINCIPAL_MAX + 1];
	json_t *v;

	principal_format(r->who.owner, r->who.actor, owner, sizeof(owner));
	v = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:s, s:I}", "channel", r->channel,
	    "owner", owner, "lifecycleUid", r->who.uid, "state",
	    r->active ? "durable-active" : "live-confirmed", "joinCursor",
	    (json_int_t)r->join_cursor, "generation", (json_int_t)r->generation, "activated",
	    r->activated, "writerIdentity", writer, "updatedAt", (json_int_t)updated_at);
	if (v != NULL && r->has_leave &&
	    json_object_set_new(v, "leaveCursor", json_integer((json_int_t)r->leave_cursor)) != 0) {
		json_decref(v);
		return NULL;
	}
	char *text = v != NULL ? dump(v, len) : NULL;
	json_decref(v);
	return text;
}

bool
membership_eligible(const struct member_row *r, uint64_t seq)
{
	return r->join_cursor < seq && (!r->has_leave || seq <= r->leave_cursor);
}

int
presence_row_parse(const char *key, const char *data, size_t len, char *name, size_t namelen,
		   char *uid, size_t uidlen)
{
	json_t *v = decode_object(data, len), *card;
	const char *id, *n, *u;
	int rc = -1;

	if (v == NULL)
		return -1;
	card = json_object_get(v, "card");
	id = json_string_value(json_object_get(card, "id"));
	n = json_string_value(json_object_get(card, "name"));
	/* WIRE.md §4: a row whose card.id differs from its key is ignored. */
	if (id == NULL || n == NULL || strcmp(id, key) != 0 || strlen(n) >= namelen)
		goto out;
	for (size_t i = 0; n[i] != '\0'; i++)
		name[i] = (char)tolower((unsigned char)n[i]);
	name[strlen(n)] = '\0';
	uid[0] = '\0';
	u = json_string_value(json_object_get(v, "lifecycleUid"));
	if (u != NULL && strlen(u) < uidlen && lifecycle_uid_valid(u))
		strcpy(uid, u);
	rc = 0;
out:
	json_decref(v);
	return rc;
}

bool
dedup_key(const char *id, const struct lifecycle *to, uint64_t generation, char *buf, size_t len)
{
	int n;

	if (id == NULL || id[0] == '\0')
		return false;
	n = snprintf(buf, len, "%s:%s.%s:%s:%" PRIu64, id, to->owner, to->actor, to->uid,
	    generation);
	return n > 0 && (size_t)n < len;
}

static char *
dump(json_t *v, size_t *len)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (s != NULL && len != NULL)
		*len = strlen(s);
	return s;
}

char *
entry_prefix(const json_t *msg, const char *channel, uint64_t seq, enum entry_reason reason,
	     size_t *len)
{
	char *m = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_t *ch = json_string(channel);
	char *c = ch ? json_dumps(ch, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	char *out = NULL;
	int n;

	if (m != NULL && c != NULL) {
		n = asprintf(&out, "{\"msg\":%s,\"channel\":%s,\"seq\":%" PRIu64
		    ",\"reason\":\"%s\",\"generation\":", m, c, seq,
		    reason == REASON_MENTION ? "live-mention" : "durable-channel");
		if (n < 0)
			out = NULL;
		else if (len != NULL)
			*len = (size_t)n;
	}
	free(m);
	free(c);
	json_decref(ch);
	return out;
}

char *
entry_build(const json_t *msg, const char *channel, uint64_t seq, enum entry_reason reason,
	    uint64_t generation, size_t *len)
{
	size_t pl;
	char *p = entry_prefix(msg, channel, seq, reason, &pl), *out = NULL;
	int n;

	if (p == NULL)
		return NULL;
	n = asprintf(&out, "%s%" PRIu64 "}", p, generation);
	free(p);
	if (n < 0)
		return NULL;
	if (len != NULL)
		*len = (size_t)n;
	return out;
}

int
entry_parse(const char *data, size_t len, struct entry *out, char *why, size_t whylen)
{
	json_t *v, *msg;
	const char *ch, *reason;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if ((v = decode_object(data, len)) == NULL)
		return refuse(why, whylen, "entry is not a JSON object");
	msg = json_object_get(v, "msg");
	if (!json_is_object(msg)) {
		refuse(why, whylen, "msg: not an object");
		goto out;
	}
	ch = json_string_value(json_object_get(v, "channel"));
	if (ch == NULL || strlen(ch) > CHANNEL_MAX || !channel_concrete_valid(ch)) {
		refuse(why, whylen, "channel: not a concrete channel");
		goto out;
	}
	if (get_cursor(json_object_get(v, "seq"), &out->seq) != 0 || out->seq == 0) {
		refuse(why, whylen, "seq: not a positive integer");
		goto out;
	}
	reason = json_string_value(json_object_get(v, "reason"));
	if (reason != NULL && strcmp(reason, "durable-channel") == 0)
		out->reason = REASON_DURABLE;
	else if (reason != NULL && strcmp(reason, "live-mention") == 0)
		out->reason = REASON_MENTION;
	else {
		refuse(why, whylen, "reason: not durable-channel or live-mention");
		goto out;
	}
	if (get_cursor(json_object_get(v, "generation"), &out->generation) != 0) {
		refuse(why, whylen, "generation: not a non-negative integer");
		goto out;
	}
	strcpy(out->channel, ch);
	out->msg = json_incref(msg);
	rc = 0;
out:
	json_decref(v);
	return rc;
}

void
entry_free(struct entry *e)
{
	json_decref(e->msg);
	e->msg = NULL;
}

char *
frame_build(json_t *msg, const char *channel, size_t *len)
{
	json_t *f = json_object();
	char *s;

	/* The channel rides the subject the fan-out parsed, never the
	 * payload's word for it. */
	json_object_set_new(msg, "channel", json_string(channel));
	json_object_set_new(f, "version", json_integer(1));
	json_object_set_new(f, "channel", json_string(channel));
	json_object_set(f, "msg", msg);
	s = dump(f, len);
	json_decref(f);
	return s;
}

/*
 * Past one JSON value starting at p (whitespace-free, as jansson's compact
 * output is), or NULL when it is not one. Bounded by end and by depth.
 */
static const char *
skip_value(const char *p, const char *end)
{
	int depth = 0;

	do {
		if (p >= end)
			return NULL;
		switch (*p) {
		case '{':
		case '[':
			if (++depth > 4096)
				return NULL;
			p++;
			continue;
		case '}':
		case ']':
			if (--depth < 0)
				return NULL;
			p++;
			break;
		case '"':
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\' && ++p == end)
					return NULL;
			if (p >= end)
				return NULL;
			p++;
			break;
		default:
			/* A number, true, false, null, or a separator inside a
			 * container. */
			if (depth == 0) {
				while (p < end && *p != ',' && *p != '}' && *p != ']')
					p++;
				return p;
			}
			p++;
			continue;
		}
	} while (depth > 0);
	return p;
}

/* A JSON integer as the fan-out writes it (no sign, no leading zero, at
 * most INT64_MAX), or NULL. */
static const char *
canon_uint(const char *p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = p;

	while (p < end && *p >= '0' && *p <= '9' && p - s < 19)
		v = v * 10 + (uint64_t)(*p++ - '0');
	if (p == s || (p < end && *p >= '0' && *p <= '9') || (*s == '0' && p - s > 1) ||
	    v > (uint64_t)INT64_MAX)
		return NULL;
	*out = v;
	return p;
}

static const char *
canon_lit(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

/*
 * The tail after the message exactly as entry_prefix and entry_build lay
 * it out, ,"channel":"<c>","seq":N,"reason":"…","generation":G}, read in
 * place (issue 18: no decode per entry). 0, or -1 when it is laid out any
 * other way: the caller then decodes it.
 */
static int
tail_canonical(const char *p, const char *end, struct entry_view *v, const char **reason)
{
	const char *c;

	if ((p = canon_lit(p, end, ",\"channel\":\"")) == NULL)
		return -1;
	for (c = p; p < end && *p != '"'; p++)
		if (*p == '\\' || (unsigned char)*p < 0x20 || p - c >= CHANNEL_MAX)
			return -1;
	if (p == end)
		return -1;
	memcpy(v->channel, c, (size_t)(p - c));
	v->channel[p - c] = '\0';
	if ((p = canon_lit(p, end, "\",\"seq\":")) == NULL ||
	    (p = canon_uint(p, end, &v->seq)) == NULL ||
	    (p = canon_lit(p, end, ",\"reason\":\"")) == NULL)
		return -1;
	if ((c = canon_lit(p, end, "durable-channel\"")) != NULL)
		*reason = "durable-channel";
	else if ((c = canon_lit(p, end, "live-mention\"")) != NULL)
		*reason = "live-mention";
	else
		return -1;
	if ((p = canon_lit(c, end, ",\"generation\":")) == NULL ||
	    (p = canon_uint(p, end, &v->generation)) == NULL || p + 1 != end || *p != '}')
		return -1;
	return 0;
}

int
entry_view(const char *data, size_t len, struct entry_view *v)
{
	static const char head[] = "{\"msg\":{";
	const char *end = data + len, *m, *me, *reason = NULL;
	char tail[CHANNEL_MAX + 256], suffix[CHANNEL_MAX + 32];
	json_t *t = NULL;
	int rc = -1;

	memset(v, 0, sizeof(*v));
	if (len < sizeof(head) || len > RECORD_MAX || memcmp(data, head, sizeof(head) - 1) != 0)
		return -1;
	m = data + sizeof(head) - 2;
	if ((me = skip_value(m, end)) == NULL || (size_t)(end - me) >= sizeof(tail) - 1 ||
	    end - me < 2 || *me != ',')
		return -1;
	if (tail_canonical(me, end, v, &reason) != 0) {
		/* The rest, {"channel":…,"seq":…,…}, is small: decode it. */
		tail[0] = '{';
		memcpy(tail + 1, me + 1, (size_t)(end - me - 1));
		t = json_loadb(tail, (size_t)(end - me), JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(t))
			goto out;
		const char *c = json_string_value(json_object_get(t, "channel"));
		reason = json_string_value(json_object_get(t, "reason"));
		if (c == NULL || strlen(c) > CHANNEL_MAX || json_object_get(t, "msg") != NULL ||
		    get_cursor(json_object_get(t, "seq"), &v->seq) != 0 ||
		    get_cursor(json_object_get(t, "generation"), &v->generation) != 0 ||
		    reason == NULL)
			goto out;
		strcpy(v->channel, c);
	}
	if (!channel_concrete_valid(v->channel) || v->seq == 0)
		goto out;
	if (strcmp(reason, "durable-channel") == 0)
		v->reason = REASON_DURABLE;
	else if (strcmp(reason, "live-mention") == 0)
		v->reason = REASON_MENTION;
	else
		goto out;
	/* The message's own channel must be the entry's, and last: a concrete
	 * channel needs no escaping. */
	int n = snprintf(suffix, sizeof(suffix), "\"channel\":\"%s\"}", v->channel);
	size_t ml = (size_t)(me - m);
	if (n <= 0 || (size_t)n + 1 > ml || memcmp(m + ml - (size_t)n, suffix, (size_t)n) != 0 ||
	    (m[ml - (size_t)n - 1] != ',' && m[ml - (size_t)n - 1] != '{'))
		goto out;
	v->msg = m;
	v->msglen = ml;
	rc = 0;
out:
	json_decref(t);
	if (rc != 0)
		v->channel[0] = '\0';
	return rc;
}

char *
frame_build_raw(const char *msg, size_t msglen, const char *channel, size_t *len)
{
	char *out = NULL;
	int n = asprintf(&out, "{\"version\":1,\"channel\":\"%s\",\"msg\":%.*s}", channel,
	    (int)msglen, msg);

	if (n < 0)
		return NULL;
	if (len != NULL)
		*len = (size_t)n;
	return out;
}
