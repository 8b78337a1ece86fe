/*
 * Subjects and records of the data path (see records.h). Every field read
 * from the network is type-checked and bounded before use.
 */
#include "lib/wire/records.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/tokens.h"
#include "lib/wire/records_int.h"
#include "lib/log.h"
#include "lib/refuse.h"
#include "lib/subject.h"

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

/*
 * The n strings of part one after the other into buf, as snprintf would
 * write them (cut to fit, NUL-terminated): whether they fit. Keys are
 * made per copy on the data path, where vfprintf cost the reader 5 % of
 * its CPU (issue 40).
 */
static bool
join(char *buf, size_t len, const char *const *part, int n)
{
	size_t at = 0;

	if (len == 0)
		return false;
	for (int i = 0; i < n; i++) {
		size_t l = strlen(part[i]);
		if (at + l >= len) {
			memcpy(buf + at, part[i], len - 1 - at);
			buf[len - 1] = '\0';
			return false;
		}
		memcpy(buf + at, part[i], l);
		at += l;
	}
	buf[at] = '\0';
	return at > 0;
}

bool
principal_format(const char *owner, const char *actor, char *buf, size_t len)
{
	return join(buf, len, (const char *[]){ owner, ".", actor }, 3);
}

bool
lifecycle_format(const struct lifecycle *l, char *buf, size_t len)
{
	return join(buf, len, (const char *[]){ l->owner, ".", l->actor, ".", l->uid }, 5);
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
json_t *
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

int
acl_row_copy(const struct acl_row *from, struct acl_row *to)
{
	memset(to, 0, sizeof(*to));
	to->state = from->state;
	if (from->npatterns == 0)
		return 0;
	if ((to->patterns = calloc(from->npatterns, sizeof(char *))) == NULL)
		return -1;
	for (size_t i = 0; i < from->npatterns; i++) {
		if ((to->patterns[i] = strdup(from->patterns[i])) == NULL) {
			acl_row_free(to);
			return -1;
		}
		to->npatterns = i + 1;
	}
	return 0;
}

bool
channel_pattern_match(const char *pattern, const char *channel)
{
	return subject_match(pattern, channel);
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
	return join(buf, len, (const char *[]){ channel, "/", who->owner, ".", who->actor, ".",
	    who->uid }, 7);
}

/* A cursor: a non-negative integer. */
int
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


bool
member_row_watched(const char *key, const char *value, size_t len, struct member_row *out,
		   bool quiet)
{
	char why[WHY_MAX];

	if (value == NULL)
		return false;
	if (member_row_parse(key, value, len, out, why, sizeof(why)) == 0)
		return true;
	if (!quiet)
		log_warnx("ignoring membership row \"%.200s\": %s", key, why);
	return false;
}

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

char *
dump(json_t *v, size_t *len)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (s != NULL && len != NULL)
		*len = strlen(s);
	return s;
}

int
lease_row_parse(const char *data, size_t len, struct lease_row *out)
{
	json_t *v, *since, *ready;
	const char *h, *inc;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (data == NULL || len > LEASE_ROW_MAX ||
	    (v = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL)) == NULL)
		return -1;
	h = json_string_value(json_object_get(v, "holder"));
	inc = json_string_value(json_object_get(v, "incarnation"));
	since = json_object_get(v, "since");
	ready = json_object_get(v, "ready");
	if (h != NULL && inc != NULL && strlen(h) < sizeof(out->holder) &&
	    strlen(inc) < sizeof(out->incarnation) && json_is_boolean(ready) &&
	    (since == NULL || json_is_integer(since))) {
		snprintf(out->holder, sizeof(out->holder), "%s", h);
		snprintf(out->incarnation, sizeof(out->incarnation), "%s", inc);
		out->since = since ? (int64_t)json_integer_value(since) : 0;
		out->ready = json_is_true(ready);
		rc = 0;
	}
	json_decref(v);
	return rc;
}
