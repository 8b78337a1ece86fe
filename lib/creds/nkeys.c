/*
 * NATS nkeys: Ed25519 keys in the textual form nats-server and nsc use.
 *
 * public key = base32(type || pub[32] || crc16le)          56 characters
 * seed       = base32(b1 || b2 || seed[32] || crc16le)     58 characters
 *   b1 = PREFIX_SEED | type >> 5, b2 = (type & 31) << 3
 *
 * so a seed's first letter is 'S' and its second is the type letter of
 * the public key it belongs to. The CRC is CRC-16/XMODEM over the bytes
 * that precede it, stored little-endian.
 *
 * Ed25519 itself is OpenSSL's. Every buffer that held a seed is cleared
 * before it goes out of scope, and no error message quotes seed text.
 */

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "lib/creds/nkeys.h"
#include "lib/refuse.h"

#define PREFIX_SEED (18 << 3) /* 'S' */
#define RAW_KEY_LEN 32
#define CRC_LEN 2
#define PUBLIC_RAW_LEN (1 + RAW_KEY_LEN + CRC_LEN) /* 35 */
#define SEED_RAW_LEN (2 + RAW_KEY_LEN + CRC_LEN)   /* 36 */

static const char b32_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

enum b32_status {
	B32_OK = 0,
	B32_BADCHAR = -1,
	B32_BADLEN = -2,
	B32_TRAILING = -3,
	B32_NOSPACE = -4,
};

const char *
nkey_type_name(int type)
{
	switch (type) {
	case NKEY_OPERATOR:
		return "operator";
	case NKEY_ACCOUNT:
		return "account";
	case NKEY_USER:
		return "user";
	case NKEY_SERVER:
		return "server";
	default:
		return NULL;
	}
}

uint16_t
nkey_crc16(const uint8_t *p, size_t n)
{
	uint16_t crc = 0;
	size_t i;
	int bit;

	/* Bitwise rather than table-driven: the input is a seed, and a
	 * secret-indexed table is a cache side channel for no real gain. */
	for (i = 0; i < n; i++) {
		crc ^= (uint16_t)p[i] << 8;
		for (bit = 0; bit < 8; bit++) {
			uint16_t mask = -(uint16_t)(crc >> 15);

			crc = (uint16_t)((crc << 1) ^ (0x1021 & mask));
		}
	}
	return crc;
}

size_t
nkey_base32_encode(const uint8_t *in, size_t n, char *out, size_t outlen)
{
	size_t need, i, o = 0;
	unsigned int acc = 0;
	int bits = 0;

	if (n > (SIZE_MAX - 1) / 8)
		return 0;
	need = (n * 8 + 4) / 5;
	if (outlen < need + 1)
		return 0;
	for (i = 0; i < n; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			bits -= 5;
			out[o++] = b32_alphabet[(acc >> bits) & 31];
		}
	}
	if (bits > 0)
		out[o++] = b32_alphabet[(acc << (5 - bits)) & 31];
	out[o] = '\0';
	return o;
}

/* Value of a base32 letter, or -1. Arithmetic, not a table lookup. */
static int
b32_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= '2' && c <= '7')
		return c - '2' + 26;
	return -1;
}

/*
 * Strict decoder: only lengths a padding-free encoder can produce, and the
 * unused low bits of the last letter must be zero, so each byte string has
 * exactly one accepted spelling. *badpos gets the offending index.
 */
static long
b32_decode(const char *in, size_t n, uint8_t *out, size_t outlen,
    enum b32_status *status, size_t *badpos)
{
	size_t need, i, o = 0;
	unsigned int acc = 0;
	int bits = 0, v;

	*badpos = 0;
	if (n / 8 > (size_t)LONG_MAX / 8) {
		*status = B32_BADLEN;
		return -1;
	}
	switch (n % 8) {
	case 1:
	case 3:
	case 6:
		*status = B32_BADLEN;
		return -1;
	}
	need = n / 8 * 5 + (n % 8) * 5 / 8;
	if (outlen < need) {
		*status = B32_NOSPACE;
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((v = b32_value((unsigned char)in[i])) < 0) {
			*status = B32_BADCHAR;
			*badpos = i;
			return -1;
		}
		acc = ((acc << 5) | (unsigned int)v) & 0xfff;
		bits += 5;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
		*status = B32_TRAILING;
		*badpos = n - 1;
		return -1;
	}
	*status = B32_OK;
	return (long)o;
}

long
nkey_base32_decode(const char *in, size_t n, uint8_t *out, size_t outlen)
{
	enum b32_status st;
	size_t pos;

	return b32_decode(in, n, out, outlen, &st, &pos);
}

/* Derive the public half of k->seed into k->pub. */
static int
derive_public(struct nkey *k)
{
	EVP_PKEY *pkey;
	size_t publen = RAW_KEY_LEN;
	int rc = -1;

	pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, k->seed,
	    RAW_KEY_LEN);
	if (pkey == NULL)
		return -1;
	if (EVP_PKEY_get_raw_public_key(pkey, k->pub, &publen) == 1 &&
	    publen == RAW_KEY_LEN)
		rc = 0;
	EVP_PKEY_free(pkey);
	return rc;
}

int
nkey_from_raw(uint8_t type, const uint8_t seed[32], struct nkey *out)
{
	memset(out, 0, sizeof(*out));
	if (nkey_type_name(type) == NULL)
		return -1;
	out->type = type;
	memcpy(out->seed, seed, RAW_KEY_LEN);
	if (derive_public(out) == -1) {
		nkey_wipe(out);
		return -1;
	}
	return 0;
}

int
nkey_generate(uint8_t type, struct nkey *out)
{
	uint8_t seed[RAW_KEY_LEN];
	int rc;

	memset(out, 0, sizeof(*out));
	if (nkey_type_name(type) == NULL)
		return -1;
	if (RAND_priv_bytes(seed, sizeof(seed)) != 1)
		return -1;
	rc = nkey_from_raw(type, seed, out);
	OPENSSL_cleanse(seed, sizeof(seed));
	return rc;
}

/* The letter a type byte shows as, for messages. */
static char
type_letter(uint8_t type)
{
	return b32_alphabet[type >> 3];
}

/* Describe a prefix character without quoting anything unprintable. */
static void
describe_prefix(char *buf, size_t len, unsigned char c)
{
	if (c >= 0x21 && c <= 0x7e)
		snprintf(buf, len, "'%c'", c);
	else
		snprintf(buf, len, "0x%02x", c);
}

int
nkey_from_seed(const char *seed, size_t len, struct nkey *out, char *err,
    size_t errlen)
{
	uint8_t raw[SEED_RAW_LEN];
	enum b32_status st;
	size_t pos;
	uint16_t crc;
	uint8_t type;
	char what[8];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (seed == NULL || len == 0) {
		seterr(err, errlen, "seed: empty");
		return -1;
	}
	/* Check the letter first: a public key handed over by mistake gets
	 * "not a seed" rather than a confusing length complaint. */
	if (seed[0] != 'S') {
		describe_prefix(what, sizeof(what), (unsigned char)seed[0]);
		seterr(err, errlen, "seed: not a seed (prefix %s)", what);
		return -1;
	}
	if (len != NKEY_SEED_LEN) {
		seterr(err, errlen, "seed: length %zu, expected %d", len,
		    NKEY_SEED_LEN);
		return -1;
	}
	if (b32_decode(seed, len, raw, sizeof(raw), &st, &pos) !=
	    SEED_RAW_LEN) {
		if (st == B32_BADCHAR)
			seterr(err, errlen,
			    "seed: invalid base32 character at %zu", pos);
		else
			seterr(err, errlen,
			    "seed: invalid base32 (non-zero trailing bits)");
		goto out;
	}
	crc = (uint16_t)(raw[SEED_RAW_LEN - 2] | raw[SEED_RAW_LEN - 1] << 8);
	if (nkey_crc16(raw, SEED_RAW_LEN - CRC_LEN) != crc) {
		seterr(err, errlen, "seed: bad CRC16 checksum");
		goto out;
	}
	/* The low three bits of b2 are unused; insisting they are zero
	 * keeps one spelling per seed, as every encoder writes them. */
	if ((raw[0] & 0xf8) != PREFIX_SEED || (raw[1] & 7) != 0) {
		seterr(err, errlen, "seed: not a seed (bad prefix byte)");
		goto out;
	}
	type = (uint8_t)((raw[0] & 7) << 5 | (raw[1] & 0xf8) >> 3);
	if (nkey_type_name(type) == NULL) {
		seterr(err, errlen, "seed: unknown key type '%c'",
		    type_letter(type));
		goto out;
	}
	if (nkey_from_raw(type, raw + 2, out) == -1) {
		seterr(err, errlen, "seed: Ed25519 key derivation failed");
		goto out;
	}
	rc = 0;
out:
	OPENSSL_cleanse(raw, sizeof(raw));
	return rc;
}

void
nkey_public(const struct nkey *k, char out[NKEY_PUBLIC_LEN + 1])
{
	uint8_t raw[PUBLIC_RAW_LEN];
	uint16_t crc;

	raw[0] = k->type;
	memcpy(raw + 1, k->pub, RAW_KEY_LEN);
	crc = nkey_crc16(raw, 1 + RAW_KEY_LEN);
	raw[PUBLIC_RAW_LEN - 2] = (uint8_t)(crc & 0xff);
	raw[PUBLIC_RAW_LEN - 1] = (uint8_t)(crc >> 8);
	nkey_base32_encode(raw, sizeof(raw), out, NKEY_PUBLIC_LEN + 1);
}

void
nkey_seed_text(const struct nkey *k, char out[NKEY_SEED_LEN + 1])
{
	uint8_t raw[SEED_RAW_LEN];
	uint16_t crc;

	raw[0] = (uint8_t)(PREFIX_SEED | k->type >> 5);
	raw[1] = (uint8_t)((k->type & 31) << 3);
	memcpy(raw + 2, k->seed, RAW_KEY_LEN);
	crc = nkey_crc16(raw, 2 + RAW_KEY_LEN);
	raw[SEED_RAW_LEN - 2] = (uint8_t)(crc & 0xff);
	raw[SEED_RAW_LEN - 1] = (uint8_t)(crc >> 8);
	nkey_base32_encode(raw, sizeof(raw), out, NKEY_SEED_LEN + 1);
	OPENSSL_cleanse(raw, sizeof(raw));
}

int
nkey_decode_public(const char *pub, int want_type, uint8_t *type,
    uint8_t raw[32], char *err, size_t errlen)
{
	uint8_t buf[PUBLIC_RAW_LEN];
	enum b32_status st;
	size_t len, pos;
	uint16_t crc;
	const char *want, *got;

	if (pub == NULL || pub[0] == '\0') {
		seterr(err, errlen, "public key: empty");
		return -1;
	}
	/* Never echo anything of a seed passed here by mistake. */
	if (pub[0] == 'S') {
		seterr(err, errlen, "public key: is a seed, not a public key");
		return -1;
	}
	len = strnlen(pub, NKEY_PUBLIC_LEN + 1);
	if (len != NKEY_PUBLIC_LEN) {
		if (len > NKEY_PUBLIC_LEN)
			seterr(err, errlen,
			    "public key: longer than %d characters",
			    NKEY_PUBLIC_LEN);
		else
			seterr(err, errlen,
			    "public key: length %zu, expected %d", len,
			    NKEY_PUBLIC_LEN);
		return -1;
	}
	if (b32_decode(pub, len, buf, sizeof(buf), &st, &pos) !=
	    PUBLIC_RAW_LEN) {
		if (st == B32_BADCHAR)
			seterr(err, errlen,
			    "public key: invalid base32 character at %zu", pos);
		else
			seterr(err, errlen, "public key: invalid base32");
		return -1;
	}
	crc = (uint16_t)(buf[PUBLIC_RAW_LEN - 2] | buf[PUBLIC_RAW_LEN - 1] << 8);
	if (nkey_crc16(buf, PUBLIC_RAW_LEN - CRC_LEN) != crc) {
		seterr(err, errlen, "public key: bad CRC16 checksum");
		return -1;
	}
	if ((got = nkey_type_name(buf[0])) == NULL) {
		seterr(err, errlen, "public key: unknown type '%c'", pub[0]);
		return -1;
	}
	if (want_type >= 0 && buf[0] != want_type) {
		want = nkey_type_name(want_type);
		seterr(err, errlen, "public key: wrong type, expected %s (got %s)",
		    want != NULL ? want : "?", got);
		return -1;
	}
	if (type != NULL)
		*type = buf[0];
	if (raw != NULL)
		memcpy(raw, buf + 1, RAW_KEY_LEN);
	return 0;
}

int
nkey_sign(const struct nkey *k, const void *msg, size_t len,
    uint8_t sig[NKEY_SIG_LEN])
{
	static const uint8_t empty[1];
	EVP_PKEY *pkey;
	EVP_MD_CTX *ctx = NULL;
	size_t siglen = NKEY_SIG_LEN;
	int rc = -1;

	if (msg == NULL)
		msg = empty;
	pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, k->seed,
	    RAW_KEY_LEN);
	if (pkey == NULL)
		return -1;
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		goto out;
	/* Ed25519 hashes internally: no digest is passed. */
	if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, pkey) != 1)
		goto out;
	if (EVP_DigestSign(ctx, sig, &siglen, msg, len) != 1 ||
	    siglen != NKEY_SIG_LEN)
		goto out;
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	return rc;
}

int
nkey_verify(const char *pub, const void *msg, size_t len, const uint8_t *sig,
    size_t siglen)
{
	static const uint8_t empty[1];
	uint8_t raw[RAW_KEY_LEN];
	EVP_PKEY *pkey;
	EVP_MD_CTX *ctx = NULL;
	int rc = -1;

	if (sig == NULL || siglen != NKEY_SIG_LEN)
		return -1;
	if (nkey_decode_public(pub, -1, NULL, raw, NULL, 0) == -1)
		return -1;
	if (msg == NULL)
		msg = empty;
	pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw,
	    sizeof(raw));
	if (pkey == NULL)
		return -1;
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		goto out;
	if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) != 1)
		goto out;
	if (EVP_DigestVerify(ctx, sig, siglen, msg, len) == 1)
		rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	return rc;
}

void
nkey_wipe(struct nkey *k)
{
	if (k != NULL)
		OPENSSL_cleanse(k, sizeof(*k));
}
