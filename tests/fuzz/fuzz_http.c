/*
 * Fuzz target: the metrics server's reading of a request head
 * (metrics/http.c), the first thing a stranger's bytes reach in the
 * metrics process (issue 29: "requests bounded in size and time").
 *
 * Whatever the bytes, the verdict is one of three and says only what the
 * bytes hold: more is wanted only while no empty line has come and the head
 * is within its bound; a refusal carries a status the server sends and one
 * line of why, cut to its buffer; a head read names a path the server
 * knows, with the method its request line begins with. The verdict does
 * not depend on the size of the buffer for why.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/http.h"

#define FUZZ_HTTP_MAX (16 * 1024)
#define WHY_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
has_empty_line(const char *s, size_t n)
{
	return memmem(s, n, "\n\n", 2) != NULL || memmem(s, n, "\n\r\n", 3) != NULL;
}

/* Does s hold token in any case? */
static bool
holds_folded(const char *s, size_t n, const char *token)
{
	size_t tl = strlen(token);

	for (size_t i = 0; i + tl <= n; i++) {
		size_t k = 0;
		while (k < tl && tolower((unsigned char)s[i + k]) == token[k])
			k++;
		if (k == tl)
			return true;
	}
	return false;
}

static void
check_why(const char *why, size_t whylen)
{
	const char *nul = memchr(why, '\0', whylen);

	if (nul == NULL)
		abort();
	if (whylen > 1 && nul == why)
		abort();
	if (memchr(why, '\n', (size_t)(nul - why)) != NULL ||
	    memchr(why, '\r', (size_t)(nul - why)) != NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct http_request req, cut;
	char why[WHY_MAX], small[9];
	enum http_verdict v, w;

	if (size > FUZZ_HTTP_MAX)
		return 0;
	memset(why, 0xff, sizeof(why));
	v = http_parse(buf, size, &req, why, sizeof(why));
	/* Empty lines before the request line are skipped (RFC 9112 2.2). */
	size_t lead = 0;
	while (lead < size && lead < HTTP_HEAD_MAX && (buf[lead] == '\r' || buf[lead] == '\n'))
		lead++;
	const char *line = buf + lead;
	size_t rest = size - lead;
	switch (v) {
	case HTTP_MORE:
		/* Nothing refused before the bound, nothing read before its end. */
		if (size > HTTP_HEAD_MAX || (rest > 0 && has_empty_line(line, rest)))
			abort();
		break;
	case HTTP_BAD:
		if (req.status != 400 && req.status != 405 && req.status != 414 &&
		    req.status != 431 && req.status != 505)
			abort();
		check_why(why, sizeof(why));
		/* 431 only past the bound: a head that fits is read. */
		if (req.status == 431 && size <= HTTP_HEAD_MAX)
			abort();
		break;
	case HTTP_OK:
		if (req.path != HTTP_PATH_OTHER && req.path != HTTP_PATH_METRICS &&
		    req.path != HTTP_PATH_HEALTHZ)
			abort();
		if (req.status != 0 || !has_empty_line(buf, size < HTTP_HEAD_MAX ? size :
		    HTTP_HEAD_MAX))
			abort();
		if (req.head ? rest < 5 || memcmp(line, "HEAD ", 5) != 0 :
		    rest < 4 || memcmp(line, "GET ", 4) != 0)
			abort();
		/* The path as sent, its query dropped. */
		const char *target = line + (req.head ? 5 : 4);
		size_t room = size - (size_t)(target - buf);
		if (req.path != HTTP_PATH_OTHER &&
		    (room < 9 || memcmp(target, req.path == HTTP_PATH_METRICS ? "/metrics" :
		    "/healthz", 8) != 0 || (target[8] != ' ' && target[8] != '?')))
			abort();
		if (req.openmetrics && !holds_folded(buf, size, "application/openmetrics-text"))
			abort();
		break;
	default:
		abort();
	}
	/* The same verdict with a why buffer too small for the line. */
	memset(small, 0xff, sizeof(small));
	w = http_parse(buf, size, &cut, small, sizeof(small));
	if (w != v || cut.head != req.head || cut.path != req.path ||
	    cut.openmetrics != req.openmetrics || cut.status != req.status)
		abort();
	if (w == HTTP_BAD) {
		check_why(small, sizeof(small));
		if (strncmp(small, why, sizeof(small) - 1) != 0)
			abort();
	}
	return 0;
}
