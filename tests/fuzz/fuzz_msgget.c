/*
 * Fuzz target: a STREAM.MSG.GET answer as lib/nats/msgget.c reads it
 * (msgget_parse), the bytes a broker, or anything that can publish to the
 * credential's reply inbox, sends back for a key.
 *
 * The input's first byte picks a mode:
 *   0: the rest is an answer as it would come off the wire; whatever it
 *      is, the result keeps its promises (one of the four outcomes, a
 *      value only with 1, NUL-terminated, within the bound, an err that
 *      names bucket and key when it failed);
 *   1: the next byte is a length h, then h bytes of a header block and the
 *      rest a value: both are encoded as the server encodes a stored
 *      message, and the value must come back byte for byte unless the
 *      block is not a NATS header block (refused, naming message.hdrs) or
 *      names a marker (no value).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/msgget.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise ends the run (whatever NDEBUG says). */
#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

#define BUCKET "cotal_members_f"
#define KEY "local.a.1"
#define SUBJ "$KV." BUCKET "." KEY

static void
check_result(const struct msgget_result *r)
{
	CHECK(r->rc == 1 || r->rc == 0 || r->rc == -1 || r->rc == KVCAS_TOO_LARGE);
	CHECK(memchr(r->err, '\0', sizeof(r->err)) != NULL);
	if (r->rc == 1) {
		CHECK(r->value != NULL && r->value[r->len] == '\0' && r->len <= KVCAS_VALUE_MAX);
		CHECK(r->rev > 0 && r->err[0] == '\0');
	} else {
		CHECK(r->value == NULL && r->len == 0);
	}
	if (r->rc == -1 || r->rc == KVCAS_TOO_LARGE)
		CHECK(strncmp(r->err, "read " BUCKET "/" KEY ": ", strlen("read " BUCKET "/" KEY ": "))
		    == 0);
	if (r->rc == KVCAS_TOO_LARGE)
		CHECK(r->rev > 0);
}

/* Padded standard base64 (malloc'd), as Go's encoding/json writes []byte. */
static char *
b64(const uint8_t *p, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (out == NULL)
		abort();
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

static bool
contains(const uint8_t *h, size_t n, const char *s)
{
	size_t sl = strlen(s);

	for (size_t i = 0; i + sl <= n; i++)
		if (memcmp(h + i, s, sl) == 0)
			return true;
	return false;
}

static void
round_trip(const uint8_t *data, size_t size)
{
	struct msgget_result r;
	size_t hl = size > 0 ? data[0] : 0;
	const uint8_t *h = data + 1, *v;
	char *hs, *vs, *answer;
	size_t cap;

	if (size == 0)
		return;
	if (hl > size - 1)
		hl = size - 1;
	v = h + hl;
	hs = hl > 0 ? b64(h, hl) : NULL;
	vs = b64(v, size - 1 - hl);
	cap = 128 + (hs ? strlen(hs) : 0) + strlen(vs);
	if ((answer = malloc(cap)) == NULL)
		abort();
	snprintf(answer, cap, "{\"message\":{\"subject\":\"" SUBJ "\",\"seq\":5%s%s%s,"
	    "\"data\":\"%s\"}}", hs ? ",\"hdrs\":\"" : "", hs ? hs : "", hs ? "\"" : "", vs);
	msgget_parse(BUCKET, KEY, answer, strlen(answer), &r);
	check_result(&r);
	if (hl > 0 && (hl < 8 || memcmp(h, "NATS/1.0", 8) != 0)) {
		CHECK(r.rc == -1 && strstr(r.err, "message.hdrs") != NULL);
	} else if (r.rc == 1) {
		CHECK(r.rev == 5 && r.len == size - 1 - hl && memcmp(r.value, v, r.len) == 0);
	} else {
		/* No value: only for a block that names a marker. */
		CHECK(r.rc == 0 && r.rev == 5);
		CHECK(contains(h, hl, "KV-Operation:") || contains(h, hl, "Nats-Marker-Reason:"));
	}
	msgget_result_free(&r);
	free(answer);
	free(hs);
	free(vs);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msgget_result r;

	if (size == 0)
		return 0;
	if (data[0] % 2 == 0) {
		msgget_parse(BUCKET, KEY, (const char *)data + 1, size - 1, &r);
		check_result(&r);
		msgget_result_free(&r);
		CHECK(r.value == NULL && r.rc == 0);
	} else {
		round_trip(data + 1, size - 1);
	}
	return 0;
}
