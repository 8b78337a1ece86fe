/*
 * NATS nkeys: Ed25519 keys written as base32 with a type prefix and a CRC16.
 *
 * A seed is secret. Every struct nkey holding one must be released with
 * nkey_wipe(), which clears the key material before the memory is reused.
 */
#ifndef COTAL_NKEYS_H
#define COTAL_NKEYS_H

#include <stddef.h>
#include <stdint.h>

/* The first base32 letter of a public key names its role. */
enum nkey_type {
	NKEY_OPERATOR = 14 << 3, /* 'O' */
	NKEY_ACCOUNT = 0,        /* 'A' */
	NKEY_USER = 20 << 3,     /* 'U' */
	NKEY_SERVER = 13 << 3,   /* 'N' */
};

#define NKEY_PUBLIC_LEN 56 /* base32 chars of a public key */
#define NKEY_SEED_LEN 58   /* base32 chars of a seed */
#define NKEY_SIG_LEN 64    /* raw Ed25519 signature bytes */

struct nkey {
	uint8_t type;     /* enum nkey_type */
	uint8_t seed[32]; /* Ed25519 private seed: secret */
	uint8_t pub[32];  /* Ed25519 public key */
};

/* Generate a fresh key of the given type from the OS RNG. 0 on success. */
int nkey_generate(uint8_t type, struct nkey *out);

/*
 * Decode a base32 seed ("S" + type letter...). Refuses with a message in err
 * on bad length, bad base32, bad CRC, a non-seed prefix or an unknown type.
 * The input text is not modified; the caller wipes its own copy.
 */
int nkey_from_seed(const char *seed, size_t len, struct nkey *out, char *err,
		   size_t errlen);

/* Public key text, NUL-terminated (out needs NKEY_PUBLIC_LEN + 1 bytes). */
void nkey_public(const struct nkey *k, char out[NKEY_PUBLIC_LEN + 1]);

/* Seed text, NUL-terminated (out needs NKEY_SEED_LEN + 1 bytes): secret. */
void nkey_seed_text(const struct nkey *k, char out[NKEY_SEED_LEN + 1]);

/*
 * Decode a public key text and check its CRC; when want_type is >= 0 the key
 * must be of that type. 0 on success, -1 with err set otherwise.
 */
int nkey_decode_public(const char *pub, int want_type, uint8_t *type,
		       uint8_t raw[32], char *err, size_t errlen);

/* Ed25519 signature of msg. 0 on success. */
int nkey_sign(const struct nkey *k, const void *msg, size_t len,
	      uint8_t sig[NKEY_SIG_LEN]);

/* 0 when sig is a valid signature of msg by public key text pub. */
int nkey_verify(const char *pub, const void *msg, size_t len,
		const uint8_t *sig, size_t siglen);

/*
 * Build a key of the given type from a raw 32-byte Ed25519 seed (tests, and
 * callers that hold key material from elsewhere). 0 on success.
 */
int nkey_from_raw(uint8_t type, const uint8_t seed[32], struct nkey *out);

/* "operator", "account", "user", "server", or NULL for an unknown type. */
const char *nkey_type_name(int type);

/* Clear every byte of k, in a way the compiler cannot drop. */
void nkey_wipe(struct nkey *k);

/* Low-level pieces, exposed for tests and the JWT code. */
uint16_t nkey_crc16(const uint8_t *p, size_t n);
/* base32 (RFC 4648 alphabet, no padding). Returns chars written, or 0 when
 * out is too small. out is NUL-terminated. */
size_t nkey_base32_encode(const uint8_t *in, size_t n, char *out, size_t outlen);
/* Returns bytes decoded, or -1 on a character outside the alphabet, trailing
 * non-zero bits or when out is too small. */
long nkey_base32_decode(const char *in, size_t n, uint8_t *out, size_t outlen);

#endif
