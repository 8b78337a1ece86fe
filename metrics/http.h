/*
 * The metrics server's reading of an HTTP request head (pure, unit-tested
 * and fuzzed: tests/fuzz/fuzz_http.c). It runs in the metrics process only;
 * the supervisor never parses HTTP.
 *
 * What it accepts: a request line "METHOD SP TARGET SP HTTP/1.x" (after any
 * empty lines, which RFC 9112 says to ignore) and header lines, each ending
 * in CRLF (a bare LF too), up to the empty line; the
 * whole head within HTTP_HEAD_MAX bytes. A body is never read (GET and HEAD
 * have none; a request that announces one is refused).
 */
#ifndef COTAL_METRICS_HTTP_H
#define COTAL_METRICS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_HEAD_MAX 8192   /* a request head, request line and headers */
#define HTTP_PATH_MAX 64     /* the longest path served is far shorter */

enum http_verdict {
	HTTP_MORE,   /* no empty line yet, and still within HTTP_HEAD_MAX */
	HTTP_OK,     /* a whole head, read into the request */
	HTTP_BAD,    /* answer status with why, then close */
};

enum http_path { HTTP_PATH_OTHER, HTTP_PATH_METRICS, HTTP_PATH_HEALTHZ };

struct http_request {
	bool head;               /* HEAD: headers only */
	enum http_path path;     /* the target's path, its query dropped */
	bool openmetrics;        /* Accept names application/openmetrics-text */
	int status;              /* with HTTP_BAD: 400, 405, 414, 431, 505 */
};

/*
 * Read the head in buf[0..len). HTTP_MORE wants more bytes; HTTP_OK fills
 * req; HTTP_BAD sets req->status and why (one line naming what is wrong:
 * "the request line has no HTTP version", "header line 3 has no name and colon").
 */
enum http_verdict http_parse(const char *buf, size_t len, struct http_request *req, char *why,
			     size_t whylen);

/* The reason phrase of a status this server sends. */
const char *http_reason(int status);

#endif
