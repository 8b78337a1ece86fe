/*
 * A STREAM.MSG.GET answer read as lib/nats/msgget.c reads it: a key's value,
 * its revision, a delete or purge marker as no value, the broker's "no
 * message" as no value and any other error in its own words, and anything
 * malformed or too large refused naming what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/nats/msgget.h"

#define BUCKET "cotal_members_t"
#define KEY "local.alice.01"
#define SUBJ "$KV." BUCKET "." KEY

/* Standard padded base64 of n bytes (malloc'd), as Go's encoding/json
 * writes []byte. */
static char *
b64(const void *data, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	assert_non_null(out);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
		    (i + 2 < n ? p[i + 2] : 0);
		*o++ = tab[v >> 18 & 63];
		*o++ = tab[v >> 12 & 63];
		*o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* A stored-message answer for SUBJ at seq, with the header block hdrs
 * (NULL: none) and data of n bytes (NULL: left out, as the server leaves
 * out an empty value). */
static char *
stored(uint64_t seq, const char *hdrs, const void *data, size_t n)
{
	char *h = hdrs ? b64(hdrs, strlen(hdrs)) : NULL, *d = data ? b64(data, n) : NULL;
	size_t cap = 256 + (h ? strlen(h) : 0) + (d ? strlen(d) : 0);
	char *out = malloc(cap);

	assert_non_null(out);
	snprintf(out, cap, "{\"type\":\"io.nats.jetstream.api.v1.stream_msg_get_response\","
	    "\"message\":{\"subject\":\"" SUBJ "\",\"seq\":%llu%s%s%s%s%s%s,"
	    "\"time\":\"2026-01-02T03:04:05.123456789Z\"}}", (unsigned long long)seq,
	    h ? ",\"hdrs\":\"" : "", h ? h : "", h ? "\"" : "",
	    d ? ",\"data\":\"" : "", d ? d : "", d ? "\"" : "");
	free(h);
	free(d);
	return out;
}

static void
parse(const char *answer, struct msgget_result *r)
{
	msgget_parse(BUCKET, KEY, answer, strlen(answer), r);
}

/* -1, with err naming bucket/key and containing what. */
static void
expect_refused(const char *answer, const char *what)
{
	struct msgget_result r;

	parse(answer, &r);
	if (r.rc != -1 || strstr(r.err, BUCKET "/" KEY ": ") == NULL || strstr(r.err, what) == NULL)
		fail_msg("%s: rc %d, err \"%s\" (want -1 naming %s)", answer, r.rc, r.err, what);
	assert_null(r.value);
	assert_int_equal(r.len, 0);
	msgget_result_free(&r);
}

static void
test_a_value_is_read_with_its_revision(void **state)
{
	struct msgget_result r;
	char *a = stored(42, NULL, "{\"allowSubscribe\":[]}", 21);

	(void)state;
	parse(a, &r);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.rev, 42);
	assert_int_equal(r.len, 21);
	assert_string_equal(r.value, "{\"allowSubscribe\":[]}");
	msgget_result_free(&r);
	assert_null(r.value);
	free(a);
}

/* Every length's padding, and bytes no string holds. */
static void
test_values_of_every_padding_and_byte_decode_exactly(void **state)
{
	unsigned char bytes[260];
	struct msgget_result r;

	(void)state;
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(255 - i);
	for (size_t n = 1; n <= sizeof(bytes); n += (n < 8 ? 1 : 37)) {
		char *a = stored(7, NULL, bytes, n);
		parse(a, &r);
		assert_int_equal(r.rc, 1);
		assert_int_equal(r.len, n);
		assert_memory_equal(r.value, bytes, n);
		assert_int_equal(r.value[n], '\0');
		msgget_result_free(&r);
		free(a);
	}
}

/* The server leaves "data" out of an empty value: still a value. */
static void
test_an_empty_value_is_a_value(void **state)
{
	struct msgget_result r;
	char *a = stored(3, NULL, NULL, 0);

	(void)state;
	parse(a, &r);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.rev, 3);
	assert_int_equal(r.len, 0);
	assert_non_null(r.value);
	assert_string_equal(r.value, "");
	msgget_result_free(&r);
	free(a);
}

/* kvcas_write's origin header beside the value, not in it. */
static void
test_a_value_with_headers_is_the_value_alone(void **state)
{
	struct msgget_result r;
	char *a = stored(9, "NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 4\r\n"
	    "Cotal-Created-By: worker-registry\r\n\r\n", "row", 3);

	(void)state;
	parse(a, &r);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.rev, 9);
	assert_string_equal(r.value, "row");
	msgget_result_free(&r);
	free(a);
	/* A KV-Operation that is not a marker's is a put (nats.c src/kv.c). */
	a = stored(10, "NATS/1.0\r\nKV-Operation: PUT\r\n\r\n", "v", 1);
	parse(a, &r);
	assert_int_equal(r.rc, 1);
	assert_string_equal(r.value, "v");
	msgget_result_free(&r);
	free(a);
}

static void
expect_marker(const char *hdrs, const void *data, size_t n)
{
	struct msgget_result r;
	char *a = stored(77, hdrs, data, n);

	parse(a, &r);
	if (r.rc != 0)
		fail_msg("%s: rc %d (%s), want 0: a marker", hdrs, r.rc, r.err);
	assert_int_equal(r.rev, 77);
	assert_null(r.value);
	assert_int_equal(r.len, 0);
	msgget_result_free(&r);
	free(a);
}

static void
test_a_delete_or_purge_marker_is_no_value_at_its_revision(void **state)
{
	(void)state;
	expect_marker("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", NULL, 0);
	expect_marker("NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n", NULL, 0);
	/* Trimmed as libnats trims it, wherever it stands in the block. */
	expect_marker("NATS/1.0\r\nCotal-Created-By: x\r\nKV-Operation:  DEL \r\n\r\n", NULL, 0);
	/* A marker with a body is still a marker. */
	expect_marker("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", "old", 3);
	/* A marker the server wrote itself (2.11's subject delete markers). */
	expect_marker("NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n\r\n", NULL, 0);
	expect_marker("NATS/1.0\r\nNats-Marker-Reason: Remove\r\n\r\n", NULL, 0);
}

static void
test_no_message_is_no_value(void **state)
{
	struct msgget_result r;

	(void)state;
	parse("{\"type\":\"io.nats.jetstream.api.v1.stream_msg_get_response\",\"error\":"
	    "{\"code\":404,\"err_code\":10037,\"description\":\"no message found\"}}", &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.rev, 0);
	assert_null(r.value);
	assert_string_equal(r.err, "");
	msgget_result_free(&r);
}

/* A missing stream is a 404 too: told by the JetStream code, as nats.c
 * tells it, and said in the broker's words. */
static void
test_another_error_is_a_failure_in_the_brokers_words(void **state)
{
	(void)state;
	expect_refused("{\"error\":{\"code\":404,\"err_code\":10059,\"description\":"
	    "\"stream not found\"}}", "stream not found (JetStream error 10059)");
	expect_refused("{\"error\":{\"code\":503,\"description\":\"JetStream system temporarily "
	    "unavailable\"}}", "JetStream system temporarily unavailable (code 503)");
	expect_refused("{\"error\":{\"code\":500}}", "an error without a description");
	expect_refused("{\"error\":\"bad\"}", "\"error\" is not an object");
}

static void
test_bad_json_is_refused(void **state)
{
	(void)state;
	expect_refused("", "not JSON");
	expect_refused("{\"message\":", "not JSON");
	expect_refused("{\"message\":{}} trailing", "not JSON");
	expect_refused("[1,2]", "not a JSON object");
	expect_refused("\"x\"", "not JSON");
}

static void
test_bad_base64_is_refused_naming_the_field(void **state)
{
	char a[512];

	(void)state;
	static const char *const bad[] = { "aGVsbG8", "aGV$bG8=", "=GVsbG8=", "aG=sbG8=",
	    "aGVsbG8=aGVs", "aGVs bG8", "aGVsbA=A" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(a, sizeof(a), "{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":1,"
		    "\"data\":\"%s\"}}", bad[i]);
		expect_refused(a, "message.data is not base64");
		snprintf(a, sizeof(a), "{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":1,"
		    "\"hdrs\":\"%s\",\"data\":\"aGVsbG8=\"}}", bad[i]);
		expect_refused(a, "message.hdrs is not base64");
	}
	/* Base64, but of no header block. */
	char *h = b64("HTTP/1.1 200\r\n\r\n", 16);
	snprintf(a, sizeof(a), "{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":1,\"hdrs\":\"%s\"}}",
	    h);
	free(h);
	expect_refused(a, "message.hdrs is not a NATS header block");
}

static void
test_missing_or_mistyped_fields_are_refused_naming_them(void **state)
{
	(void)state;
	expect_refused("{}", "neither \"message\" nor \"error\"");
	expect_refused("{\"type\":\"io.nats.jetstream.api.v1.stream_msg_get_response\"}",
	    "neither \"message\" nor \"error\"");
	expect_refused("{\"message\":[]}", "\"message\" is not an object");
	expect_refused("{\"message\":{\"seq\":1}}", "message.subject");
	expect_refused("{\"message\":{\"subject\":7,\"seq\":1}}", "message.subject");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\"}}", "message.seq");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":\"1\"}}", "message.seq");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":0}}", "message.seq");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":-3}}", "message.seq");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":1,\"data\":5}}",
	    "message.data is not a string");
	expect_refused("{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":1,\"hdrs\":null}}",
	    "message.hdrs is not a string");
	/* Another key's answer is never taken for this one's. */
	expect_refused("{\"message\":{\"subject\":\"$KV." BUCKET ".local.bob.01\",\"seq\":1}}",
	    "the answer is for subject $KV." BUCKET ".local.bob.01");
}

static void
test_an_oversized_value_is_too_large_with_its_revision(void **state)
{
	struct msgget_result r;
	char *big = malloc(KVCAS_VALUE_MAX + 1), *a;

	(void)state;
	assert_non_null(big);
	memset(big, 'x', KVCAS_VALUE_MAX + 1);
	a = stored(123, NULL, big, KVCAS_VALUE_MAX + 1);
	parse(a, &r);
	assert_int_equal(r.rc, KVCAS_TOO_LARGE);
	assert_int_equal(r.rev, 123);
	assert_null(r.value);
	assert_non_null(strstr(r.err, BUCKET "/" KEY ": a value of 1048577 bytes"));
	msgget_result_free(&r);
	free(a);
	/* The largest value taken. */
	a = stored(124, NULL, big, KVCAS_VALUE_MAX);
	parse(a, &r);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.len, KVCAS_VALUE_MAX);
	assert_memory_equal(r.value, big, KVCAS_VALUE_MAX);
	msgget_result_free(&r);
	free(a);
	free(big);
}

static void
test_an_answer_over_the_bound_is_not_read(void **state)
{
	struct msgget_result r;
	size_t n = MSGGET_REPLY_MAX + 1;
	char *a = malloc(n);

	(void)state;
	assert_non_null(a);
	memset(a, ' ', n);
	a[0] = '{';
	a[n - 1] = '}';
	msgget_parse(BUCKET, KEY, a, n, &r);
	assert_int_equal(r.rc, -1);
	assert_non_null(strstr(r.err, "an answer of 2097153 bytes (over 2097152)"));
	msgget_result_free(&r);
	free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_value_is_read_with_its_revision),
		cmocka_unit_test(test_values_of_every_padding_and_byte_decode_exactly),
		cmocka_unit_test(test_an_empty_value_is_a_value),
		cmocka_unit_test(test_a_value_with_headers_is_the_value_alone),
		cmocka_unit_test(test_a_delete_or_purge_marker_is_no_value_at_its_revision),
		cmocka_unit_test(test_no_message_is_no_value),
		cmocka_unit_test(test_another_error_is_a_failure_in_the_brokers_words),
		cmocka_unit_test(test_bad_json_is_refused),
		cmocka_unit_test(test_bad_base64_is_refused_naming_the_field),
		cmocka_unit_test(test_missing_or_mistyped_fields_are_refused_naming_them),
		cmocka_unit_test(test_an_oversized_value_is_too_large_with_its_revision),
		cmocka_unit_test(test_an_answer_over_the_bound_is_not_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
