/*
 * Development signer: the only code in the tree that mints NATS JWTs.
 *
 * It exists so the CLI and the tests can stand up an operator, accounts and
 * users without nsc. It is linked into the CLI and the tests, never into
 * the daemon, which only decodes and verifies (lib/creds/jwt.h).
 *
 * The claim builders return new JSON objects (NULL on a missing argument or
 * allocation failure); dev_jwt_sign() completes and signs one.
 */
#ifndef COTAL_DEV_SIGNER_H
#define COTAL_DEV_SIGNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "lib/creds/nkeys.h"

/*
 * Sign claims as NATS JWT v2 with signer. Sets "iss" to the signer's
 * public key, "iat" to now and "jti" in claims (which is modified), then
 * returns the malloc'd compact token, or NULL with err set. claims must be
 * an object with a string "sub". The signer's type is not checked against
 * the claims, so tests can mint tokens jwt_decode() must refuse.
 */
char *dev_jwt_sign(json_t *claims, const struct nkey *signer, char *err,
    size_t errlen);

/* nats: {type "operator", version 2, system_account when not NULL}. */
json_t *dev_operator_claims(const char *name, const char *sub_pub,
    const char *system_account_pub);

/*
 * nats: {type "account", version 2, signing_keys, unlimited limits (with
 * JetStream storage, streams and consumers unlimited when jetstream is set,
 * absent and so disabled otherwise), default_permissions {pub {}, sub {}}}.
 */
json_t *dev_account_claims(const char *name, const char *sub_pub,
    const char *const *signing_keys, size_t n_signing_keys, bool jetstream);

struct dev_user_spec {
	const char *name;
	const char *sub_pub;        /* the user's public key ('U') */
	const char *issuer_account; /* set when signed by a signing key */
	json_t *pub_allow;          /* arrays of subjects, or NULL; borrowed */
	json_t *pub_deny;
	json_t *sub_allow;
	json_t *sub_deny;
	json_t *tags;               /* array of strings, or NULL; borrowed */
	int64_t exp;                /* expiry, Unix seconds; 0 = none */
};

/*
 * nats: {type "user", version 2, pub {allow?, deny?}, sub {allow?, deny?},
 * subs -1, data -1, payload -1, issuer_account?, tags?}; top-level exp
 * when spec->exp is set.
 */
json_t *dev_user_claims(const struct dev_user_spec *spec);

#endif
