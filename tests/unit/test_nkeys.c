/*
 * Unit tests for lib/creds/nkeys.c: base32, CRC16, seed and public key text,
 * Ed25519 signing.
 *
 * Fixed vectors and where they come from:
 * - CRC-16/XMODEM check value of "123456789" is 0x31C3 (the catalogue
 *   value for poly 0x1021, init 0, no reflection).
 * - base32 strings are RFC 4648 section 10.
 * - RFC 8032 section 7.1 TEST 1 gives the Ed25519 seed, public key and the
 *   signature of the empty message. Its seed and public key spelled as a
 *   user nkey were computed independently with Python (base64.b32encode,
 *   binascii.crc_hqx(data, 0) and the cryptography package).
 * - SUAIO3FH... is the sample seed in the doc comment of DecorateSeed in
 *   github.com/nats-io/jwt/v2 creds_utils.go; its public key was computed
 *   with the same Python tools.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/codec_check.h"

#include "lib/creds/nkeys.h"

#define ERRLEN 256

static const char rfc_seed_hex[] =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
static const char rfc_pub_hex[] =
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
static const char rfc_sig_hex[] =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8"
    "821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
static const char rfc_user_seed[] =
    "SUAJ2YNRTXX72WTAXKCEV5ES5QWMIRCJYVUXWMTJDFYDXLADDSXH6YALCA";
static const char rfc_user_pub[] =
    "UDLVVGABQKYQVN6VJP7NHSLEA45A5YLS6PNKMIZFV4BBU2HXA5IRUVAL";
static const char rfc_account_pub[] =
    "ADLVVGABQKYQVN6VJP7NHSLEA45A5YLS6PNKMIZFV4BBU2HXA5IRVRTU";
static const char rfc_operator_pub[] =
    "ODLVVGABQKYQVN6VJP7NHSLEA45A5YLS6PNKMIZFV4BBU2HXA5IRVH7S";
static const char go_doc_seed[] =
    "SUAIO3FHUX5PNV2LQIIP7TZ3N4L7TX3W53MQGEIVYFIGA635OZCKEYHFLM";
static const char go_doc_pub[] =
    "UD2FLLGFERQVQQ3SBKONNG2QMIMTZQKKLTU3AVG5I3EQEFHBPGPE2XQS";

static void
unhex(const char *hex, uint8_t *out, size_t n)
{
	size_t i;
	unsigned int b;

	assert_int_equal(strlen(hex), n * 2);
	for (i = 0; i < n; i++) {
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &b), 1);
		out[i] = (uint8_t)b;
	}
}

static void
test_crc16_check_value(void **state)
{
	(void)state;
	assert_int_equal(nkey_crc16((const uint8_t *)"123456789", 9), 0x31c3);
	assert_int_equal(nkey_crc16(NULL, 0), 0);
}

static size_t
base32_len(size_t n)
{
	return (n * 8 + 4) / 5;
}

static const struct codec base32 = { nkey_base32_encode, nkey_base32_decode, base32_len };

static void
test_base32_rfc4648(void **state)
{
	static const struct codec_vector v[] = {
		{ "", "" }, { "f", "MY" }, { "fo", "MZXQ" }, { "foo", "MZXW6" },
		{ "foob", "MZXW6YQ" }, { "fooba", "MZXW6YTB" },
		{ "foobar", "MZXW6YTBOI" },
	};
	char out[32];
	uint8_t back[32];

	(void)state;
	codec_vectors(&base32, v, sizeof(v) / sizeof(v[0]));
	/* Too small an output buffer is refused, not overrun. */
	assert_int_equal(nkey_base32_encode((const uint8_t *)"foobar", 6, out,
	    10), 0);
	assert_int_equal(nkey_base32_decode("MZXW6YTBOI", 10, back, 5), -1);
}

static void
test_base32_strict(void **state)
{
	/* 'Z' in "MZ" leaves the two unused bits non-zero: a second spelling
	 * of "f" that must not be accepted. */
	static const char *const bad[] = { "MZXW6YTBO", "M", "MY======", "my", "M1", "MZ" };
	uint8_t b[16];

	(void)state;
	codec_refuses(&base32, bad, sizeof(bad) / sizeof(bad[0]));
	assert_int_equal(nkey_base32_decode("MY", 2, b, sizeof(b)), 1);
}

static void
test_base32_round_trip(void **state)
{
	(void)state;
	codec_round_trip(&base32);
}

static void
test_rfc8032_vector(void **state)
{
	uint8_t seed[32], pub[32], sig[NKEY_SIG_LEN], want[NKEY_SIG_LEN];
	char text[NKEY_SEED_LEN + 1], ptext[NKEY_PUBLIC_LEN + 1];
	char err[ERRLEN];
	struct nkey k, k2;

	(void)state;
	unhex(rfc_seed_hex, seed, sizeof(seed));
	unhex(rfc_pub_hex, pub, sizeof(pub));
	unhex(rfc_sig_hex, want, sizeof(want));

	assert_int_equal(nkey_from_raw(NKEY_USER, seed, &k), 0);
	assert_memory_equal(k.pub, pub, sizeof(pub));
	nkey_seed_text(&k, text);
	assert_string_equal(text, rfc_user_seed);
	nkey_public(&k, ptext);
	assert_string_equal(ptext, rfc_user_pub);

	assert_int_equal(nkey_from_seed(rfc_user_seed, strlen(rfc_user_seed),
	    &k2, err, sizeof(err)), 0);
	assert_int_equal(k2.type, NKEY_USER);
	assert_memory_equal(k2.seed, seed, sizeof(seed));
	assert_memory_equal(k2.pub, pub, sizeof(pub));

	assert_int_equal(nkey_sign(&k2, "", 0, sig), 0);
	assert_memory_equal(sig, want, sizeof(want));
	assert_int_equal(nkey_verify(rfc_user_pub, "", 0, sig, sizeof(sig)), 0);
	assert_int_equal(nkey_verify(rfc_user_pub, NULL, 0, sig, sizeof(sig)),
	    0);

	/* The same key under other type prefixes. */
	k.type = NKEY_ACCOUNT;
	nkey_public(&k, ptext);
	assert_string_equal(ptext, rfc_account_pub);
	k.type = NKEY_OPERATOR;
	nkey_public(&k, ptext);
	assert_string_equal(ptext, rfc_operator_pub);
	nkey_wipe(&k);
	nkey_wipe(&k2);
}

static void
test_go_doc_seed(void **state)
{
	char err[ERRLEN], pub[NKEY_PUBLIC_LEN + 1], text[NKEY_SEED_LEN + 1];
	struct nkey k;

	(void)state;
	assert_int_equal(nkey_from_seed(go_doc_seed, strlen(go_doc_seed), &k,
	    err, sizeof(err)), 0);
	assert_int_equal(k.type, NKEY_USER);
	nkey_public(&k, pub);
	assert_string_equal(pub, go_doc_pub);
	nkey_seed_text(&k, text);
	assert_string_equal(text, go_doc_seed);
	nkey_wipe(&k);
}

static void
test_generate_round_trip(void **state)
{
	static const struct {
		uint8_t type;
		char letter;
	} types[] = {
		{ NKEY_OPERATOR, 'O' }, { NKEY_ACCOUNT, 'A' },
		{ NKEY_USER, 'U' }, { NKEY_SERVER, 'N' },
	};
	char seed[NKEY_SEED_LEN + 1], pub[NKEY_PUBLIC_LEN + 1], err[ERRLEN];
	uint8_t sig[NKEY_SIG_LEN], raw[32], type;
	struct nkey k, back;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		assert_int_equal(nkey_generate(types[i].type, &k), 0);
		nkey_seed_text(&k, seed);
		nkey_public(&k, pub);
		assert_int_equal(strlen(seed), NKEY_SEED_LEN);
		assert_int_equal(strlen(pub), NKEY_PUBLIC_LEN);
		assert_int_equal(seed[0], 'S');
		assert_int_equal(seed[1], types[i].letter);
		assert_int_equal(pub[0], types[i].letter);

		assert_int_equal(nkey_from_seed(seed, strlen(seed), &back, err,
		    sizeof(err)), 0);
		assert_memory_equal(&back, &k, sizeof(k));
		assert_int_equal(nkey_decode_public(pub, types[i].type, &type,
		    raw, err, sizeof(err)), 0);
		assert_int_equal(type, types[i].type);
		assert_memory_equal(raw, k.pub, sizeof(raw));

		assert_int_equal(nkey_sign(&k, "hello nats", 10, sig), 0);
		assert_int_equal(nkey_verify(pub, "hello nats", 10, sig,
		    sizeof(sig)), 0);
		nkey_wipe(&k);
		nkey_wipe(&back);
	}
	assert_int_equal(nkey_generate(23 << 3, &k), -1);
}

static void
test_verify_rejects(void **state)
{
	char pub[NKEY_PUBLIC_LEN + 1], other[NKEY_PUBLIC_LEN + 1];
	uint8_t sig[NKEY_SIG_LEN];
	struct nkey k, k2;

	(void)state;
	assert_int_equal(nkey_generate(NKEY_ACCOUNT, &k), 0);
	assert_int_equal(nkey_generate(NKEY_ACCOUNT, &k2), 0);
	nkey_public(&k, pub);
	nkey_public(&k2, other);
	assert_int_equal(nkey_sign(&k, "message", 7, sig), 0);
	assert_int_equal(nkey_verify(pub, "message", 7, sig, sizeof(sig)), 0);
	assert_int_equal(nkey_verify(pub, "messagE", 7, sig, sizeof(sig)), -1);
	assert_int_equal(nkey_verify(pub, "message", 6, sig, sizeof(sig)), -1);
	assert_int_equal(nkey_verify(other, "message", 7, sig, sizeof(sig)),
	    -1);
	assert_int_equal(nkey_verify(pub, "message", 7, sig, sizeof(sig) - 1),
	    -1);
	assert_int_equal(nkey_verify(pub, "message", 7, NULL, sizeof(sig)), -1);
	assert_int_equal(nkey_verify("not a key", "message", 7, sig,
	    sizeof(sig)), -1);
	sig[10] ^= 0x01;
	assert_int_equal(nkey_verify(pub, "message", 7, sig, sizeof(sig)), -1);
	nkey_wipe(&k);
	nkey_wipe(&k2);
}

/* The error must never quote the seed, not even a fragment of it. */
static void
assert_no_seed_in(const char *err, const char *seed)
{
	char frag[9];
	size_t i;

	for (i = 0; i + 8 <= strlen(seed); i++) {
		memcpy(frag, seed + i, 8);
		frag[8] = '\0';
		assert_null(strstr(err, frag));
	}
}

static void
test_seed_corrupt_crc(void **state)
{
	char bad[NKEY_SEED_LEN + 1], err[ERRLEN];
	struct nkey k;
	size_t pos;

	(void)state;
	/* Any single changed letter between the type letter and the last
	 * one breaks only the CRC (CRC-16 catches every burst of <= 16). */
	for (pos = 2; pos < NKEY_SEED_LEN - 1; pos++) {
		memcpy(bad, rfc_user_seed, sizeof(bad));
		bad[pos] = bad[pos] == 'A' ? 'B' : 'A';
		assert_int_equal(nkey_from_seed(bad, strlen(bad), &k, err,
		    sizeof(err)), -1);
		assert_string_equal(err, "seed: bad CRC16 checksum");
		assert_no_seed_in(err, bad);
	}
	/* The key buffer is left zeroed on failure. */
	assert_int_equal(k.type, 0);
}

static void
test_seed_wrong_length(void **state)
{
	char err[ERRLEN];
	struct nkey k;

	(void)state;
	assert_int_equal(nkey_from_seed(rfc_user_seed, NKEY_SEED_LEN - 1, &k,
	    err, sizeof(err)), -1);
	assert_string_equal(err, "seed: length 57, expected 58");
	assert_int_equal(nkey_from_seed("SUAJ2YNRTXX72WTAXKCEV5ES5QWMIRCJYVUXWM"
	    "TJDFYDXLADDSXH6YALCAA", NKEY_SEED_LEN + 1, &k, err, sizeof(err)),
	    -1);
	assert_string_equal(err, "seed: length 59, expected 58");
	assert_int_equal(nkey_from_seed("", 0, &k, err, sizeof(err)), -1);
	assert_string_equal(err, "seed: empty");
}

static void
test_seed_not_a_seed(void **state)
{
	char err[ERRLEN];
	struct nkey k;

	(void)state;
	assert_int_equal(nkey_from_seed(rfc_user_pub, strlen(rfc_user_pub), &k,
	    err, sizeof(err)), -1);
	assert_string_equal(err, "seed: not a seed (prefix 'U')");
	assert_int_equal(nkey_from_seed("\001x", 2, &k, err, sizeof(err)), -1);
	assert_string_equal(err, "seed: not a seed (prefix 0x01)");
}

static void
test_seed_bad_base32(void **state)
{
	char bad[NKEY_SEED_LEN + 1], err[ERRLEN];
	struct nkey k;

	(void)state;
	memcpy(bad, rfc_user_seed, sizeof(bad));
	bad[12] = '1';
	assert_int_equal(nkey_from_seed(bad, strlen(bad), &k, err, sizeof(err)),
	    -1);
	assert_string_equal(err, "seed: invalid base32 character at 12");
	memcpy(bad, rfc_user_seed, sizeof(bad));
	bad[20] = 'a';
	assert_int_equal(nkey_from_seed(bad, strlen(bad), &k, err, sizeof(err)),
	    -1);
	assert_string_equal(err, "seed: invalid base32 character at 20");
}

static void
test_seed_unknown_type(void **state)
{
	uint8_t raw[36], seed[32];
	char text[64], err[ERRLEN];
	uint16_t crc;
	uint8_t type = 23 << 3; /* 'X', curve keys: not ours */
	struct nkey k;

	(void)state;
	unhex(rfc_seed_hex, seed, sizeof(seed));
	raw[0] = (uint8_t)(18 << 3 | type >> 5);
	raw[1] = (uint8_t)((type & 31) << 3);
	memcpy(raw + 2, seed, 32);
	crc = nkey_crc16(raw, 34);
	raw[34] = (uint8_t)crc;
	raw[35] = (uint8_t)(crc >> 8);
	assert_int_equal(nkey_base32_encode(raw, sizeof(raw), text,
	    sizeof(text)), NKEY_SEED_LEN);
	assert_int_equal(text[1], 'X');
	assert_int_equal(nkey_from_seed(text, strlen(text), &k, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "seed: unknown key type 'X'");
}

static void
test_public_errors(void **state)
{
	char bad[NKEY_PUBLIC_LEN + 1], err[ERRLEN];
	uint8_t type, raw[32];

	(void)state;
	assert_int_equal(nkey_decode_public(rfc_user_pub, NKEY_ACCOUNT, &type,
	    raw, err, sizeof(err)), -1);
	assert_string_equal(err,
	    "public key: wrong type, expected account (got user)");
	assert_int_equal(nkey_decode_public(rfc_account_pub, NKEY_ACCOUNT,
	    &type, raw, err, sizeof(err)), 0);
	assert_int_equal(type, NKEY_ACCOUNT);
	assert_int_equal(nkey_decode_public(rfc_operator_pub, -1, &type, NULL,
	    err, sizeof(err)), 0);
	assert_int_equal(type, NKEY_OPERATOR);

	memcpy(bad, rfc_user_pub, sizeof(bad));
	bad[30] = bad[30] == 'A' ? 'B' : 'A';
	assert_int_equal(nkey_decode_public(bad, -1, NULL, NULL, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "public key: bad CRC16 checksum");

	assert_int_equal(nkey_decode_public(rfc_user_seed, -1, NULL, NULL, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "public key: is a seed, not a public key");
	assert_no_seed_in(err, rfc_user_seed);

	assert_int_equal(nkey_decode_public("UABC", -1, NULL, NULL, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "public key: length 4, expected 56");
	assert_int_equal(nkey_decode_public("", -1, NULL, NULL, err,
	    sizeof(err)), -1);
	assert_int_equal(nkey_decode_public(NULL, -1, NULL, NULL, err,
	    sizeof(err)), -1);

	memcpy(bad, rfc_user_pub, sizeof(bad));
	bad[5] = '0';
	assert_int_equal(nkey_decode_public(bad, -1, NULL, NULL, err,
	    sizeof(err)), -1);
	assert_string_equal(err, "public key: invalid base32 character at 5");
}

static void
test_wipe(void **state)
{
	static const struct nkey zero;
	struct nkey k;

	(void)state;
	assert_int_equal(nkey_generate(NKEY_USER, &k), 0);
	nkey_wipe(&k);
	assert_memory_equal(&k, &zero, sizeof(k));
	nkey_wipe(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc16_check_value),
		cmocka_unit_test(test_base32_rfc4648),
		cmocka_unit_test(test_base32_strict),
		cmocka_unit_test(test_base32_round_trip),
		cmocka_unit_test(test_rfc8032_vector),
		cmocka_unit_test(test_go_doc_seed),
		cmocka_unit_test(test_generate_round_trip),
		cmocka_unit_test(test_verify_rejects),
		cmocka_unit_test(test_seed_corrupt_crc),
		cmocka_unit_test(test_seed_wrong_length),
		cmocka_unit_test(test_seed_not_a_seed),
		cmocka_unit_test(test_seed_bad_base32),
		cmocka_unit_test(test_seed_unknown_type),
		cmocka_unit_test(test_public_errors),
		cmocka_unit_test(test_wipe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
