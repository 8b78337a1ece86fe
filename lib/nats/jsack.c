/* A JetStream reply subject's delivery metadata (see jsack.h). */
#include "lib/nats/jsack.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS_MAX 16

/* A whole decimal token, or false. */
static bool
number(const char *t, uint64_t *out)
{
	char *end;

	if (*t < '0' || *t > '9' || strlen(t) > 20)
		return false;
	*out = strtoull(t, &end, 10);
	return *end == '\0';
}

bool
js_ack_meta(const char *reply, struct js_ack_meta *out)
{
	char buf[JS_ACK_SUBJECT_MAX];
	char *tok[TOKENS_MAX], *save = NULL, *t;
	uint64_t ts;
	int n = 0, at;

	if (reply == NULL || strlen(reply) >= sizeof(buf))
		return false;
	strcpy(buf, reply);
	for (t = strtok_r(buf, ".", &save); t != NULL; t = strtok_r(NULL, ".", &save)) {
		if (n == TOKENS_MAX)
			return false;
		tok[n++] = t;
	}
	/* 9 tokens: the original form; 11 or 12: with domain and account. */
	if ((n != 9 && n != 11 && n != 12) || strcmp(tok[0], "$JS") != 0 ||
	    strcmp(tok[1], "ACK") != 0)
		return false;
	at = n == 9 ? 4 : 6; /* <delivered> */
	if (!number(tok[at], &out->delivered) || !number(tok[at + 1], &out->sseq) ||
	    !number(tok[at + 2], &out->dseq) || !number(tok[at + 3], &ts) ||
	    !number(tok[at + 4], &out->pending) || ts > INT64_MAX)
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

static const char *
literal(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

/*
 * The answer as the broker writes it for a stored message,
 * {"stream":"<name>"[,"domain":"<d>"],"seq":<n>}, read in place: 0 with
 * *seq, or -1 for any other layout (a duplicate's, an error), decoded in
 * full by the caller.
 */
static int
puback_common(const char *p, const char *end, uint64_t *seq)
{
	const char *d;
	uint64_t v = 0;
	int digits = 0;

	if ((p = literal(p, end, "{\"stream\":")) == NULL || (p = plain_string(p, end)) == NULL)
		return -1;
	if ((d = literal(p, end, ",\"domain\":")) != NULL && (p = plain_string(d, end)) == NULL)
		return -1;
	if ((p = literal(p, end, ",\"seq\":")) == NULL || p >= end || *p == '0')
		return -1;
	for (; p < end && *p >= '0' && *p <= '9' && digits < 19; p++, digits++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (digits == 0 || v > (uint64_t)INT64_MAX || p + 1 != end || *p != '}')
		return -1;
	*seq = v;
	return 0;
}

int
js_puback_parse(const char *data, size_t len, uint64_t *seq, char *why, size_t whylen)
{
	*seq = 0;
	if (data != NULL && len < 4096 && puback_common(data, data + len, seq) == 0)
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
