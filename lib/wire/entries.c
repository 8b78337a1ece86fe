/*
 * The data path's own records (see records.h): an entry of INBOX_<s> as the
 * fan-out writes it and the reader takes it apart, the handoff frame of
 * DLV_<s>, and the dedup key both carry. Every field read from the network
 * is type-checked and bounded before use.
 */
#include "lib/wire/records.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/records_int.h"
#include "lib/refuse.h"
#include "lib/wire/tokens.h"

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
 * The quote that ends a JSON string whose text starts at p, or NULL: the
 * first one after an even run of backslashes (each backslash escapes the
 * character after it). Found with memchr, not byte by byte: a post's text
 * is most of an entry, and this ran over it once per copy (issue 40).
 */
static const char *
string_end(const char *p, const char *end)
{
	for (const char *q; p < end && (q = memchr(p, '"', (size_t)(end - p))) != NULL;
	    p = q + 1) {
		size_t run = 0;
		while (q - run > p && q[-1 - (ptrdiff_t)run] == '\\')
			run++;
		if (run % 2 == 0)
			return q;
	}
	return NULL;
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
			if ((p = string_end(p + 1, end)) == NULL)
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
	char tail[CHANNEL_MAX + 256];
	json_t *t = NULL;
	int rc = -1;

	/* Not the whole struct: its channel is CHANNEL_MAX bytes, and the
	 * reader views a batch's entries into buffers it keeps (issue 40). */
	v->msg = NULL;
	v->msglen = 0;
	v->channel[0] = '\0';
	v->seq = v->generation = 0;
	v->reason = REASON_DURABLE;
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
	static const char key[] = "\"channel\":\"";
	size_t ml = (size_t)(me - m), cl = strlen(v->channel), n = sizeof(key) - 1 + cl + 2;
	if (n + 1 > ml)
		goto out;
	const char *sfx = m + ml - n;
	if (memcmp(sfx, key, sizeof(key) - 1) != 0 ||
	    memcmp(sfx + sizeof(key) - 1, v->channel, cl) != 0 || memcmp(m + ml - 2, "\"}", 2) != 0 ||
	    (sfx[-1] != ',' && sfx[-1] != '{'))
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
	/* Put together by hand, not by a printf: it is made once per copy. */
	static const char head[] = "{\"version\":1,\"channel\":\"", mid[] = "\",\"msg\":";
	size_t cl = strlen(channel), n = sizeof(head) - 1 + cl + sizeof(mid) - 1 + msglen + 1;
	char *out = malloc(n + 1), *p = out;

	if (out == NULL)
		return NULL;
	memcpy(p, head, sizeof(head) - 1), p += sizeof(head) - 1;
	memcpy(p, channel, cl), p += cl;
	memcpy(p, mid, sizeof(mid) - 1), p += sizeof(mid) - 1;
	memcpy(p, msg, msglen), p += msglen;
	*p++ = '}';
	*p = '\0';
	if (len != NULL)
		*len = n;
	return out;
}
