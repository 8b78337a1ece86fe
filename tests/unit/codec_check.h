/*
 * Checks every text codec of the credentials room shares (base64url in
 * lib/creds/jwt, base32 in lib/creds/nkeys): known vectors both ways,
 * inputs the decoder must refuse, a round trip of every length. Included by
 * one unit test each (static functions; cmocka's headers come first).
 */
#ifndef COTAL_CODEC_CHECK_H
#define COTAL_CODEC_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct codec {
	size_t (*encode)(const uint8_t *in, size_t n, char *out, size_t outlen);
	long (*decode)(const char *in, size_t n, uint8_t *out, size_t outlen);
	/* The encoded length of n bytes (NULL: not checked). */
	size_t (*encoded_len)(size_t n);
};

struct codec_vector {
	const char *in, *out;
};

/* Each vector encodes to its text and decodes back. */
static void
codec_vectors(const struct codec *c, const struct codec_vector *v, size_t nv)
{
	char out[64];
	uint8_t back[64];

	for (size_t i = 0; i < nv; i++) {
		size_t n = strlen(v[i].in);
		assert_int_equal(c->encode((const uint8_t *)v[i].in, n, out, sizeof(out)),
		    strlen(v[i].out));
		assert_string_equal(out, v[i].out);
		assert_int_equal(c->decode(v[i].out, strlen(v[i].out), back, sizeof(back)),
		    (long)n);
		assert_memory_equal(back, v[i].in, n);
	}
}

/* Each text is refused by the decoder, with room enough for any answer. */
static void
codec_refuses(const struct codec *c, const char *const *bad, size_t nbad)
{
	uint8_t b[64];

	for (size_t i = 0; i < nbad; i++)
		if (c->decode(bad[i], strlen(bad[i]), b, sizeof(b)) != -1)
			fail_msg("\"%s\" was not refused", bad[i]);
}

/* Every length from 0 to 100 bytes, encoded and decoded back. */
static void
codec_round_trip(const struct codec *c)
{
	uint8_t in[100], back[100];
	char text[200];

	for (size_t n = 0; n <= sizeof(in); n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)(i * 37 + n * 11 + 5);
		size_t len = c->encode(in, n, text, sizeof(text));
		if (c->encoded_len != NULL)
			assert_int_equal(len, c->encoded_len(n));
		assert_int_equal(c->decode(text, len, back, sizeof(back)), (long)n);
		assert_memory_equal(in, back, n);
	}
}

#endif
