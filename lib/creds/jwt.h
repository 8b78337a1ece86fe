/*
 * NATS JWT v2: decoding and signature verification. Nothing here mints a
 * token; minting lives only in the CLI's dev signer (cli/dev_signer.c), so
 * the daemon binary carries no JWT-minting code.
 */
#ifndef COTAL_JWT_H
#define COTAL_JWT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define JWT_MAX_LEN (64 * 1024) /* longer than any NATS control line we accept */

enum jwt_kind { JWT_OPERATOR, JWT_ACCOUNT, JWT_USER };

struct jwt {
	json_t *claims;       /* whole payload, owned */
	enum jwt_kind kind;
	const char *sub;      /* subject public key (borrowed from claims) */
	const char *iss;      /* issuer public key */
	const char *name;     /* may be "" */
	const char *issuer_account; /* user: nats.issuer_account, else NULL */
	int64_t iat;
	int64_t exp;          /* 0 = never */
	json_t *nats;         /* claims.nats (borrowed) */
};

/*
 * Decode a compact JWT, check its header (typ JWT, alg ed25519-nkey), verify
 * the signature with the issuer key named in "iss", and require the claim
 * shape of a NATS v2 operator/account/user. Refuses with a message naming the
 * field. 0 on success; release with jwt_free().
 */
int jwt_decode(const char *token, size_t len, struct jwt *out, char *err,
	       size_t errlen);
void jwt_free(struct jwt *j);

/* Helpers on user claims (return borrowed arrays or NULL). */
json_t *jwt_user_list(const struct jwt *j, const char *dir /* "pub"|"sub" */,
		      const char *which /* "allow"|"deny" */);

/*
 * Chain check: 1 when child was issued by parent, i.e. child's "iss" is
 * parent's subject or one of parent's nats.signing_keys (plain keys or
 * scoped {"key": ...} entries), and, for a user naming an issuer_account,
 * that account is parent's subject. 0 otherwise. Both must be decoded.
 */
int jwt_signed_by(const struct jwt *child, const struct jwt *parent);

/* base64url without padding. encode returns chars written (NUL-terminated) or
 * 0 when out is too small; decode returns bytes or -1. */
size_t b64url_encode(const uint8_t *in, size_t n, char *out, size_t outlen);
long b64url_decode(const char *in, size_t n, uint8_t *out, size_t outlen);

#endif
