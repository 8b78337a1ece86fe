/*
 * The metrics server's reading of a request head (metrics/http.h): what it
 * serves, what it refuses with which status and why, and the bounds.
 * Issue 29: "It serves `GET /metrics` in the Prometheus text exposition
 * format (OpenMetrics where the scraper asks for it) and `GET /healthz`";
 * "requests bounded in size and time".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/http.h"

#define WHY_MAX 256

static enum http_verdict
parse(const char *head, struct http_request *req, char *why)
{
	why[0] = '\0';
	return http_parse(head, strlen(head), req, why, WHY_MAX);
}

/* A refusal: its status and its exact line. */
static void
assert_refused(const char *head, int status, const char *what)
{
	struct http_request req;
	char why[WHY_MAX];

	assert_int_equal(parse(head, &req, why), HTTP_BAD);
	assert_int_equal(req.status, status);
	assert_string_equal(why, what);
}

/* "It serves `GET /metrics`": both versions, CRLF and a bare LF. */
static void
test_get_metrics_in_both_versions_and_line_ends(void **state)
{
	static const char *const heads[] = {
		"GET /metrics HTTP/1.1\r\nHost: localhost:9464\r\n\r\n",
		"GET /metrics HTTP/1.0\r\n\r\n",
		"GET /metrics HTTP/1.1\nHost: localhost\n\n",
		"GET /metrics HTTP/1.0\n\n",
		/* A CRLF head ended by a bare LF's empty line, and the reverse. */
		"GET /metrics HTTP/1.1\r\nHost: x\r\n\n",
		"GET /metrics HTTP/1.1\nHost: x\n\r\n",
	};
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		assert_int_equal(parse(heads[i], &req, why), HTTP_OK);
		assert_false(req.head);
		assert_int_equal(req.path, HTTP_PATH_METRICS);
		assert_false(req.openmetrics);
	}
}

/* A HEAD gets the headers only. */
static void
test_head_is_read_as_head(void **state)
{
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n", &req, why), HTTP_OK);
	assert_true(req.head);
	assert_int_equal(req.path, HTTP_PATH_METRICS);
	assert_int_equal(parse("HEAD /healthz HTTP/1.0\n\n", &req, why), HTTP_OK);
	assert_true(req.head);
	assert_int_equal(req.path, HTTP_PATH_HEALTHZ);
}

/* "the target's path, its query dropped". */
static void
test_query_is_dropped_and_paths_are_told_apart(void **state)
{
	static const struct {
		const char *head;
		enum http_path path;
	} cases[] = {
		{ "GET /metrics?x=1 HTTP/1.1\r\n\r\n", HTTP_PATH_METRICS },
		{ "GET /metrics? HTTP/1.1\r\n\r\n", HTTP_PATH_METRICS },
		{ "GET /healthz HTTP/1.1\r\n\r\n", HTTP_PATH_HEALTHZ },
		{ "GET /healthz?verbose HTTP/1.1\r\n\r\n", HTTP_PATH_HEALTHZ },
		{ "GET / HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
		{ "GET /metrics/ HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
		{ "GET /metric HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
		{ "GET /METRICS HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
		{ "GET /healthzz HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
		{ "GET /x?/metrics HTTP/1.1\r\n\r\n", HTTP_PATH_OTHER },
	};
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].head, &req, why), HTTP_OK);
		assert_int_equal(req.path, cases[i].path);
	}
}

/* "OpenMetrics where the scraper asks for it": Accept names
 * application/openmetrics-text; the header's name in any case. */
static void
test_accept_openmetrics_asks_for_openmetrics(void **state)
{
	static const struct {
		const char *head;
		bool openmetrics;
	} cases[] = {
		{ "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; "
		  "version=1.0.0\r\n\r\n", true },
		{ "GET /metrics HTTP/1.1\r\naccept: application/openmetrics-text\r\n\r\n", true },
		{ "GET /metrics HTTP/1.1\r\nACCEPT:Application/OpenMetrics-Text\r\n\r\n", true },
		/* What Prometheus sends. */
		{ "GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text;"
		  "version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;"
		  "version=0.0.4;q=0.5,*/*;q=0.1\r\nUser-Agent: Prometheus/2.42.0\r\n\r\n", true },
		{ "GET /metrics HTTP/1.1\r\nAccept: text/plain; version=0.0.4\r\n\r\n", false },
		{ "GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n", false },
		/* Another header naming it is not an Accept. */
		{ "GET /metrics HTTP/1.1\r\nX-Accept: application/openmetrics-text\r\n\r\n",
		  false },
		{ "GET /metrics HTTP/1.1\r\nAccepts: application/openmetrics-text\r\n\r\n", false },
		{ "GET /metrics HTTP/1.1\r\n\r\n", false },
	};
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].head, &req, why), HTTP_OK);
		assert_int_equal(req.path, HTTP_PATH_METRICS);
		assert_int_equal(req.openmetrics, cases[i].openmetrics);
	}
}

/* "HTTP_MORE: no empty line yet": every prefix of a whole head wants more,
 * never a verdict on what has not arrived. */
static void
test_every_prefix_of_a_head_wants_more(void **state)
{
	static const char *const heads[] = {
		("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nAccept: "
		"application/openmetrics-text\r\nContent-Length: 0\r\n\r\n"),
		"HEAD /healthz?x=1 HTTP/1.0\nAccept: text/plain\n\n",
		"GET / HTTP/1.1\r\n\r\n",
	};
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		size_t len = strlen(heads[i]);
		for (size_t n = 0; n < len; n++) {
			/* An exactly-sized copy, so ASan sees a read past the prefix. */
			char *p = malloc(n > 0 ? n : 1);
			assert_non_null(p);
			memcpy(p, heads[i], n);
			assert_int_equal(http_parse(p, n, &req, why, sizeof(why)), HTTP_MORE);
			free(p);
		}
		assert_int_equal(http_parse(heads[i], len, &req, why, sizeof(why)), HTTP_OK);
	}
}

/* A head of n bytes: a request line, one long header to fill, and the
 * empty line when ended. */
static char *
head_of(size_t n, bool ended)
{
	static const char start[] = "GET /metrics HTTP/1.1\r\nX-Fill: ";
	const char *tail = ended ? "\r\n\r\n" : "";
	size_t s = strlen(start), t = strlen(tail);
	char *p = malloc(n);

	assert_non_null(p);
	assert_true(n > s + t);
	memcpy(p, start, s);
	memset(p + s, 'a', n - s - t);
	memcpy(p + n - t, tail, t);
	return p;
}

/* "the whole head within HTTP_HEAD_MAX bytes": 8192 is read, 8193 is
 * refused with 431 (Request Header Fields Too Large). */
static void
test_head_bound_is_8192_bytes(void **state)
{
	struct http_request req;
	char why[WHY_MAX];
	char *p;

	(void)state;
	p = head_of(HTTP_HEAD_MAX, true);
	assert_int_equal(http_parse(p, HTTP_HEAD_MAX, &req, why, sizeof(why)), HTTP_OK);
	assert_int_equal(req.path, HTTP_PATH_METRICS);
	free(p);

	/* 8192 bytes without an end may still end: more. */
	p = head_of(HTTP_HEAD_MAX, false);
	assert_int_equal(http_parse(p, HTTP_HEAD_MAX, &req, why, sizeof(why)), HTTP_MORE);
	free(p);

	p = head_of(HTTP_HEAD_MAX + 1, false);
	assert_int_equal(http_parse(p, HTTP_HEAD_MAX + 1, &req, why, sizeof(why)), HTTP_BAD);
	assert_int_equal(req.status, 431);
	assert_string_equal(why, "the request head is longer than 8192 bytes");
	free(p);

	/* A head that ends one byte past the bound is over it too. */
	p = head_of(HTTP_HEAD_MAX + 1, true);
	assert_int_equal(http_parse(p, HTTP_HEAD_MAX + 1, &req, why, sizeof(why)), HTTP_BAD);
	assert_int_equal(req.status, 431);
	free(p);

	/* Bytes past a whole head (a pipelined request) are not looked at. */
	p = head_of(2 * HTTP_HEAD_MAX, false);
	memcpy(p, "GET /healthz HTTP/1.1\r\n\r\n", 25);
	assert_int_equal(http_parse(p, 2 * HTTP_HEAD_MAX, &req, why, sizeof(why)), HTTP_OK);
	assert_int_equal(req.path, HTTP_PATH_HEALTHZ);
	free(p);
}

/* The request line "METHOD SP TARGET SP HTTP/1.x": each way it is wrong has
 * its status and its line. */
static void
test_request_line_refusals_say_what_is_wrong(void **state)
{
	(void)state;
	struct http_request req;
	char why[WHY_MAX];
	/* RFC 9112 2.2: empty lines before the request line are ignored. */
	assert_int_equal(parse("\r\n\r\n", &req, why), HTTP_MORE);
	assert_int_equal(parse("\n\n", &req, why), HTTP_MORE);
	assert_int_equal(parse("\r\nGET /metrics HTTP/1.1\r\n\r\n", &req, why), HTTP_OK);
	assert_int_equal(req.path, HTTP_PATH_METRICS);
	assert_refused("GET\r\n\r\n", 400, "the request line has no target");
	assert_refused("GET /metrics\r\n\r\n", 400, "the request line has no HTTP version");
	assert_refused("GET  /metrics HTTP/1.1\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /metrics HTTP/1.1 x\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /met\trics HTTP/1.1\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /m\x80 HTTP/1.1\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /\x7f HTTP/1.1\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /metrics HTTP/1.1\r\r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET /metrics \r\n\r\n", 400,
	    "the request line is not METHOD TARGET VERSION");
	assert_refused("GET * HTTP/1.1\r\n\r\n", 400, "the request target is not a path");
	assert_refused("GET http://a/metrics HTTP/1.1\r\n\r\n", 400,
	    "the request target is not a path");
}

static void
test_methods_other_than_get_and_head_are_405(void **state)
{
	static const char *const heads[] = {
		"POST /metrics HTTP/1.1\r\n\r\n", "PUT /metrics HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\n\r\n", "get /metrics HTTP/1.1\r\n\r\n",
		"GETS /metrics HTTP/1.1\r\n\r\n", "HEA /metrics HTTP/1.1\r\n\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
		assert_refused(heads[i], 405, "the method is not GET or HEAD");
}

/* "HTTP_PATH_MAX 64": a target of 64 bytes is read, of 65 refused (414). */
static void
test_target_over_64_bytes_is_414(void **state)
{
	char target[HTTP_PATH_MAX + 2], head[256];
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	memset(target, 'a', sizeof(target));
	target[0] = '/';
	target[HTTP_PATH_MAX] = '\0';
	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\n\r\n", target);
	assert_int_equal(parse(head, &req, why), HTTP_OK);
	assert_int_equal(req.path, HTTP_PATH_OTHER);

	target[HTTP_PATH_MAX] = 'a';
	target[HTTP_PATH_MAX + 1] = '\0';
	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\n\r\n", target);
	assert_refused(head, 414, "the request target is longer than 64 bytes");
	/* The query counts: the bound is on the target as sent. */
	snprintf(head, sizeof(head), "GET /metrics?%.60s HTTP/1.1\r\n\r\n", target);
	assert_refused(head, 414, "the request target is longer than 64 bytes");
}

static void
test_versions_other_than_1_0_and_1_1_are_505(void **state)
{
	static const char *const heads[] = {
		"GET /metrics HTTP/2.0\r\n\r\n", "GET /metrics HTTP/1.2\r\n\r\n",
		"GET /metrics HTTP/0.9\r\n\r\n", "GET /metrics http/1.1\r\n\r\n",
		"GET /metrics HTTP/1.10\r\n\r\n", "GET /metrics HTTP/1\r\n\r\n",
		"GET /metrics XTTP/1.1\r\n\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
		assert_refused(heads[i], 505,
		    "the request line's version is not HTTP/1.0 or HTTP/1.1");
}

/* Header lines: "header line 3 has no colon" names the line, the request
 * line being line 1. */
static void
test_header_without_colon_names_its_line(void **state)
{
	(void)state;
	assert_refused("GET /metrics HTTP/1.1\r\nHost\r\n\r\n", 400,
	    "header line 2 has no name and colon");
	assert_refused("GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nbroken\r\n\r\n", 400,
	    "header line 4 has no name and colon");
	assert_refused("GET /metrics HTTP/1.1\r\n: no name\r\n\r\n", 400,
	    "header line 2 has no name and colon");
	assert_refused("GET /metrics HTTP/1.1\nA: 1\nB\n\n", 400,
	    "header line 3 has no name and colon");
}

/* "A body is never read (GET and HEAD have none; a request that announces
 * one is refused)": Content-Length other than 0, any Transfer-Encoding. */
static void
test_a_request_announcing_a_body_is_refused(void **state)
{
	struct http_request req;
	char why[WHY_MAX];

	(void)state;
	assert_refused("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 400,
	    "header line 2 announces a body; GET and HEAD have none");
	assert_refused("GET /metrics HTTP/1.1\r\nHost: a\r\ncontent-length: 10\r\n\r\n", 400,
	    "header line 3 announces a body; GET and HEAD have none");
	assert_refused("GET /metrics HTTP/1.1\r\nContent-Length: 00\r\n\r\n", 400,
	    "header line 2 announces a body; GET and HEAD have none");
	assert_refused("GET /metrics HTTP/1.1\r\nContent-Length:\r\n\r\n", 400,
	    "header line 2 announces a body; GET and HEAD have none");
	assert_refused("GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
	    "header line 2 announces a body; GET and HEAD have none");
	assert_refused("HEAD /metrics HTTP/1.1\r\nTRANSFER-ENCODING: identity\r\n\r\n", 400,
	    "header line 2 announces a body; GET and HEAD have none");

	/* "Content-Length: 0" is no body, with or without blanks around. */
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &req, why),
	    HTTP_OK);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nContent-Length:0\r\n\r\n", &req, why),
	    HTTP_OK);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nCONTENT-LENGTH: \t0 \t\r\n\r\n", &req,
	    why), HTTP_OK);
}

/* A why that does not fit is cut, still a C string. */
static void
test_why_is_cut_to_its_buffer(void **state)
{
	struct http_request req;
	char why[8];

	(void)state;
	memset(why, 'x', sizeof(why));
	assert_int_equal(http_parse("PUT / HTTP/1.1\r\n\r\n", 18, &req, why, sizeof(why)),
	    HTTP_BAD);
	assert_int_equal(req.status, 405);
	assert_string_equal(why, "the met");
}

/* "The reason phrase of a status this server sends." */
static void
test_reason_phrase_of_each_status(void **state)
{
	(void)state;
	assert_string_equal(http_reason(200), "OK");
	assert_string_equal(http_reason(400), "Bad Request");
	assert_string_equal(http_reason(404), "Not Found");
	assert_string_equal(http_reason(405), "Method Not Allowed");
	assert_string_equal(http_reason(408), "Request Timeout");
	assert_string_equal(http_reason(414), "URI Too Long");
	assert_string_equal(http_reason(431), "Request Header Fields Too Large");
	assert_string_equal(http_reason(503), "Service Unavailable");
	assert_string_equal(http_reason(505), "HTTP Version Not Supported");
	assert_string_equal(http_reason(500), "Error");
	assert_string_equal(http_reason(0), "Error");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_metrics_in_both_versions_and_line_ends),
		cmocka_unit_test(test_head_is_read_as_head),
		cmocka_unit_test(test_query_is_dropped_and_paths_are_told_apart),
		cmocka_unit_test(test_accept_openmetrics_asks_for_openmetrics),
		cmocka_unit_test(test_every_prefix_of_a_head_wants_more),
		cmocka_unit_test(test_head_bound_is_8192_bytes),
		cmocka_unit_test(test_request_line_refusals_say_what_is_wrong),
		cmocka_unit_test(test_methods_other_than_get_and_head_are_405),
		cmocka_unit_test(test_target_over_64_bytes_is_414),
		cmocka_unit_test(test_versions_other_than_1_0_and_1_1_are_505),
		cmocka_unit_test(test_header_without_colon_names_its_line),
		cmocka_unit_test(test_a_request_announcing_a_body_is_refused),
		cmocka_unit_test(test_why_is_cut_to_its_buffer),
		cmocka_unit_test(test_reason_phrase_of_each_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
