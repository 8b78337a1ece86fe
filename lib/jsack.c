/* A JetStream reply subject's delivery metadata (see jsack.h). */
#include "lib/jsack.h"

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
