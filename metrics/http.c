/*
 * The metrics server's reading of an HTTP request head (metrics/http.h).
 * Runs in the metrics process, confined; pure: no I/O, no allocation.
 */
#include "metrics/http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static enum http_verdict
bad(struct http_request *req, int status, char *why, size_t whylen, const char *what)
{
	req->status = status;
	snprintf(why, whylen, "%s", what);
	return HTTP_BAD;
}

/* Where the head ends (just past its empty line), or NULL. */
static const char *
head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		/* An empty line: "\n\n" or "\n\r\n". */
		if (i + 1 < len && buf[i + 1] == '\n')
			return buf + i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return buf + i + 3;
	}
	return NULL;
}

/* One line from *p (before end): its start and length without CR LF. */
static bool
next_line(const char **p, const char *end, const char **line, size_t *n)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));

	if (nl == NULL)
		return false;
	*line = *p;
	*n = (size_t)(nl - *p);
	if (*n > 0 && (*line)[*n - 1] == '\r')
		(*n)--;
	*p = nl + 1;
	return true;
}

static bool
visible(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return n > 0;
}

static enum http_verdict
request_line(const char *line, size_t n, struct http_request *req, char *why, size_t whylen)
{
	const char *sp1 = memchr(line, ' ', n), *sp2, *q;
	size_t mlen, tlen, vlen;

	if (sp1 == NULL)
		return bad(req, 400, why, whylen, "the request line has no target");
	mlen = (size_t)(sp1 - line);
	sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
	if (sp2 == NULL)
		return bad(req, 400, why, whylen, "the request line has no HTTP version");
	tlen = (size_t)(sp2 - sp1 - 1);
	vlen = n - mlen - tlen - 2;
	if (!visible(line, mlen) || !visible(sp1 + 1, tlen) || !visible(sp2 + 1, vlen))
		return bad(req, 400, why, whylen, "the request line is not METHOD TARGET VERSION");
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return bad(req, 505, why, whylen, "the request line's version is not HTTP/1.0 "
		    "or HTTP/1.1");
	if (mlen == 3 && memcmp(line, "GET", 3) == 0)
		req->head = false;
	else if (mlen == 4 && memcmp(line, "HEAD", 4) == 0)
		req->head = true;
	else
		return bad(req, 405, why, whylen, "the method is not GET or HEAD");
	if (tlen > HTTP_PATH_MAX)
		return bad(req, 414, why, whylen, "the request target is longer than 64 bytes");
	if (sp1[1] != '/')
		return bad(req, 400, why, whylen, "the request target is not a path");
	/* The query is nobody's business here. */
	q = memchr(sp1 + 1, '?', tlen);
	if (q != NULL)
		tlen = (size_t)(q - sp1 - 1);
	if (tlen == 8 && memcmp(sp1 + 1, "/metrics", 8) == 0)
		req->path = HTTP_PATH_METRICS;
	else if (tlen == 8 && memcmp(sp1 + 1, "/healthz", 8) == 0)
		req->path = HTTP_PATH_HEALTHZ;
	else
		req->path = HTTP_PATH_OTHER;
	return HTTP_OK;
}

/* Does the value hold token, case-insensitively? */
static bool
holds(const char *v, size_t n, const char *token)
{
	size_t tl = strlen(token);

	for (size_t i = 0; i + tl <= n; i++)
		if (strncasecmp(v + i, token, tl) == 0)
			return true;
	return false;
}

enum http_verdict
http_parse(const char *buf, size_t len, struct http_request *req, char *why, size_t whylen)
{
	const char *end, *p = buf, *line;
	size_t n;
	int no = 1;

	memset(req, 0, sizeof(*req));
	/* Empty lines before the request line are skipped (RFC 9112 2.2);
	 * they count toward the bound. */
	size_t skip = 0;
	while (skip < len && skip < HTTP_HEAD_MAX && (buf[skip] == '\r' || buf[skip] == '\n'))
		skip++;
	if (skip == len && len <= HTTP_HEAD_MAX)
		return HTTP_MORE;
	if (len > HTTP_HEAD_MAX)
		len = HTTP_HEAD_MAX + 1; /* what is past the bound is not looked at */
	p = buf + skip;
	if ((end = head_end(p, len - skip)) == NULL || (size_t)(end - buf) > HTTP_HEAD_MAX) {
		if (len > HTTP_HEAD_MAX)
			return bad(req, 431, why, whylen, "the request head is longer than "
			    "8192 bytes");
		return HTTP_MORE;
	}
	/* The empty lines before it skipped, the request line is the first
	 * line up to end, and not empty. */
	line = p;
	n = 0;
	next_line(&p, end, &line, &n);
	if (request_line(line, n, req, why, whylen) != HTTP_OK)
		return HTTP_BAD;
	while (next_line(&p, end, &line, &n) && n > 0) {
		const char *colon = memchr(line, ':', n);
		no++;
		if (colon == NULL || colon == line) {
			req->status = 400;
			snprintf(why, whylen, "header line %d has no name and colon", no);
			return HTTP_BAD;
		}
		size_t nl = (size_t)(colon - line);
		const char *v = colon + 1;
		size_t vl = n - nl - 1;
		if (nl == 6 && strncasecmp(line, "accept", 6) == 0 &&
		    holds(v, vl, "application/openmetrics-text"))
			req->openmetrics = true;
		if ((nl == 14 && strncasecmp(line, "content-length", 14) == 0) ||
		    (nl == 17 && strncasecmp(line, "transfer-encoding", 17) == 0)) {
			/* "Content-Length: 0" is no body. */
			while (vl > 0 && (*v == ' ' || *v == '\t'))
				v++, vl--;
			while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (nl == 17 || vl != 1 || *v != '0') {
				req->status = 400;
				snprintf(why, whylen, "header line %d announces a body; GET and HEAD "
				    "have none", no);
				return HTTP_BAD;
			}
		}
	}
	return HTTP_OK;
}

const char *
http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	}
	return "Error";
}
