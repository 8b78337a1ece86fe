/* A JetStream reply subject's delivery metadata (see jsack.h). */
#include "lib/nats/jsack.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS_MAX 16

/* A whole decimal token of n bytes at t that fits 64 bits, or false. */
static bool
number(const char *t, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(t[i] - '0');
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* Read in place, token by token (it is read for every message a consumer
 * delivers, three times: the copy and the strtok of before cost the reader
 * 3 % of its CPU, issue 40). */
bool
js_ack_meta(const char *reply, struct js_ack_meta *out)
{
	const char *tok[TOKENS_MAX], *p;
	size_t len[TOKENS_MAX];
	uint64_t ts;
	int n = 0, at;

	if (reply == NULL || strncmp(reply, "$JS.ACK.", 8) != 0)
		return false;
	for (p = reply; n < TOKENS_MAX; p++) {
		const char *dot = strchr(p, '.');
		tok[n] = p;
		len[n++] = dot != NULL ? (size_t)(dot - p) : strlen(p);
		if (dot == NULL)
			break;
		p = dot;
		if (p - reply >= JS_ACK_SUBJECT_MAX)
			return false;
	}
	if (p - reply + len[n - 1] >= JS_ACK_SUBJECT_MAX)
		return false;
	/* 9 tokens: the original form; 11 or 12: with domain and account. */
	if (n != 9 && n != 11 && n != 12)
		return false;
	for (int i = 0; i < n; i++)
		if (len[i] == 0)
			return false;
	at = n == 9 ? 4 : 6; /* <delivered> */
	if (!number(tok[at], len[at], &out->delivered) ||
	    !number(tok[at + 1], len[at + 1], &out->sseq) ||
	    !number(tok[at + 2], len[at + 2], &out->dseq) || !number(tok[at + 3], len[at + 3], &ts) ||
	    !number(tok[at + 4], len[at + 4], &out->pending) || ts > INT64_MAX)
		return false;
	out->ts_ns = (int64_t)ts;
	return out->sseq > 0 && out->dseq > 0;
}

/* A JSON string of plain printable ASCII at p, no escape: past its closing
 * quote, or NULL. */
static const char *
plain_string(const char *p, const char *end)
{
	if (p >= end || *p++ != '"')
		return NULL;
	for (; p < end && *p != '"'; p++)
		if (*p < 0x20 || *p > 0x7e || *p == '\\')
			return NULL;
	return p < end ? p + 1 : NULL;
}

/* Past JSON whitespace at p. */
static const char *
blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* lit at p, after any whitespace, and past any whitespace after it; or NULL. */
static const char *
token(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if (p == NULL)
		return NULL;
	p = blank(p, end);
	return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? blank(p + n, end) : NULL;
}

/*
 * The answer as the brokers write it for a stored message or a duplicate,
 * {"stream":"<name>"[,"domain":"<d>"],"seq":<n>[,"duplicate":true]}, with
 * whatever whitespace between tokens (2.9 and 2.10 write '"stream":"S",
 * "seq":1', 2.14 no space, each '"duplicate": true'), read in place: 0
 * with *seq, or -1 for any other layout (an error's), decoded in full.
 */
int
js_puback_in_place(const char *p, size_t len, uint64_t *seq)
{
	const char *end = p + len, *d;
	uint64_t v = 0;
	int digits = 0;

	if ((p = token(p, end, "{")) == NULL || (p = token(p, end, "\"stream\"")) == NULL ||
	    (p = token(p, end, ":")) == NULL || (p = plain_string(p, end)) == NULL)
		return -1;
	if ((d = token(token(p, end, ","), end, "\"domain\"")) != NULL &&
	    ((d = token(d, end, ":")) == NULL || (p = plain_string(d, end)) == NULL))
		return -1;
	if ((p = token(token(token(p, end, ","), end, "\"seq\""), end, ":")) == NULL ||
	    p >= end || *p == '0')
		return -1;
	for (; p < end && *p >= '0' && *p <= '9' && digits < 19; p++, digits++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (digits == 0 || v > (uint64_t)INT64_MAX || (p < end && *p >= '0' && *p <= '9'))
		return -1;
	if ((d = token(token(token(p, end, ","), end, "\"duplicate\""), end, ":")) != NULL &&
	    (p = token(d, end, "true")) == NULL && (p = token(d, end, "false")) == NULL)
		return -1;
	if ((p = token(p, end, "}")) == NULL || p != end)
		return -1;
	*seq = v;
	return 0;
}

int
js_puback_parse(const char *data, size_t len, uint64_t *seq, char *why, size_t whylen)
{
	*seq = 0;
	if (data != NULL && len < 4096 && js_puback_in_place(data, len, seq) == 0)
		return 0;
	if (data == NULL || len == 0) {
		snprintf(why, whylen, "an empty answer (no stream took the message)");
		return -1;
	}
	json_t *doc = json_loadb(data, len, 0, NULL);
	json_t *err = json_object_get(doc, "error"), *sq = json_object_get(doc, "seq");
	int rc = -1;
	if (!json_is_object(doc))
		snprintf(why, whylen, "an answer that is not a PubAck");
	else if (err != NULL) {
		const char *d = json_string_value(json_object_get(err, "description"));
		json_t *code = json_object_get(err, "err_code");
		snprintf(why, whylen, "%s (err_code %" JSON_INTEGER_FORMAT ")",
		    d != NULL ? d : "an error without a description",
		    json_is_integer(code) ? json_integer_value(code) : 0);
	} else if (!json_is_integer(sq) || json_integer_value(sq) <= 0)
		snprintf(why, whylen, "a PubAck without a stream sequence");
	else {
		*seq = (uint64_t)json_integer_value(sq);
		rc = 0;
	}
	json_decref(doc);
	return rc;
}
