/*
 * Development signer: builds and signs NATS JWT v2 claims (see
 * dev_signer.h). The token layout mirrors what lib/creds/jwt.c accepts and what
 * nats-server expects: unpadded base64url of the compact header and claims
 * JSON, and an Ed25519 signature over "header.claims".
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "cli/dev_signer.h"
#include "lib/creds/jwt.h"

#define JTI_DIGEST_LEN 32 /* SHA-256 */
#define JTI_LEN 52        /* unpadded base32 of 32 bytes */
#define SIG_B64_LEN 86    /* unpadded base64url of 64 bytes */
#define UNLIMITED (-1)    /* NATS spelling of "no limit" */

static const char jwt_header[] = "{\"typ\":\"JWT\",\"alg\":\"ed25519-nkey\"}";

/* Characters of unpadded base64url for n bytes, plus the NUL. */
static size_t
b64url_size(size_t n)
{
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0) + 1;
}

/*
 * jti is the unpadded base32 SHA-256 of the compact claims serialized with
 * jti set to "". It is an identifier, not a check: no verifier recomputes
 * it, it only has to differ between tokens.
 */
static int
set_jti(json_t *claims)
{
	uint8_t md[JTI_DIGEST_LEN];
	char jti[JTI_LEN + 1];
	unsigned int mdlen = 0;
	char *dump;
	int ok;

	if (json_object_set_new(claims, "jti", json_string("")) == -1)
		return -1;
	if ((dump = json_dumps(claims, JSON_COMPACT)) == NULL)
		return -1;
	ok = EVP_Digest(dump, strlen(dump), md, &mdlen, EVP_sha256(), NULL);
	free(dump);
	if (ok != 1 || mdlen != sizeof(md))
		return -1;
	if (nkey_base32_encode(md, sizeof(md), jti, sizeof(jti)) != JTI_LEN)
		return -1;
	return json_object_set_new(claims, "jti", json_string(jti));
}

char *
dev_jwt_sign(json_t *claims, const struct nkey *signer, char *err,
    size_t errlen)
{
	char pub[NKEY_PUBLIC_LEN + 1];
	uint8_t sig[NKEY_SIG_LEN];
	char *payload = NULL, *token = NULL;
	size_t plen, hlen, cap, off;

	if (!json_is_object(claims) ||
	    !json_is_string(json_object_get(claims, "sub")) || signer == NULL) {
		snprintf(err, errlen, "dev signer: claims need a string \"sub\" "
		    "and a signer");
		return NULL;
	}
	nkey_public(signer, pub);
	if (json_object_set_new(claims, "iss", json_string(pub)) == -1 ||
	    json_object_set_new(claims, "iat",
	    json_integer((json_int_t)time(NULL))) == -1 ||
	    set_jti(claims) == -1 ||
	    (payload = json_dumps(claims, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "dev signer: cannot serialize claims");
		return NULL;
	}
	plen = strlen(payload);
	hlen = sizeof(jwt_header) - 1;
	cap = b64url_size(hlen) + b64url_size(plen) + SIG_B64_LEN + 1;
	if (cap - 1 > JWT_MAX_LEN) {
		snprintf(err, errlen, "dev signer: token would be over %d bytes",
		    JWT_MAX_LEN);
		goto fail;
	}
	if ((token = malloc(cap)) == NULL) {
		snprintf(err, errlen, "dev signer: out of memory");
		goto fail;
	}
	off = b64url_encode((const uint8_t *)jwt_header, hlen, token, cap);
	token[off++] = '.';
	off += b64url_encode((const uint8_t *)payload, plen, token + off,
	    cap - off);
	if (nkey_sign(signer, token, off, sig) == -1) {
		snprintf(err, errlen, "dev signer: Ed25519 signing failed");
		goto fail;
	}
	token[off++] = '.';
	if (b64url_encode(sig, sizeof(sig), token + off, cap - off) !=
	    SIG_B64_LEN) {
		snprintf(err, errlen, "dev signer: token buffer too small");
		goto fail;
	}
	free(payload);
	return token;
fail:
	free(payload);
	free(token);
	return NULL;
}

/* {name?, sub, nats} with nats filled in by the caller; NULL on failure. */
static json_t *
base_claims(const char *name, const char *sub_pub, json_t **nats,
    const char *type)
{
	json_t *c;

	*nats = NULL;
	if (sub_pub == NULL || (c = json_object()) == NULL)
		return NULL;
	if ((name != NULL &&
	    json_object_set_new(c, "name", json_string(name)) == -1) ||
	    json_object_set_new(c, "sub", json_string(sub_pub)) == -1 ||
	    json_object_set_new(c, "nats", json_object()) == -1)
		goto fail;
	*nats = json_object_get(c, "nats");
	if (json_object_set_new(*nats, "type", json_string(type)) == -1 ||
	    json_object_set_new(*nats, "version", json_integer(2)) == -1)
		goto fail;
	return c;
fail:
	json_decref(c);
	*nats = NULL;
	return NULL;
}

static int
set_int(json_t *o, const char *key, json_int_t v)
{
	return json_object_set_new(o, key, json_integer(v));
}

json_t *
dev_operator_claims(const char *name, const char *sub_pub,
    const char *system_account_pub)
{
	json_t *c, *nats;

	if ((c = base_claims(name, sub_pub, &nats, "operator")) == NULL)
		return NULL;
	if (system_account_pub != NULL &&
	    json_object_set_new(nats, "system_account",
	    json_string(system_account_pub)) == -1) {
		json_decref(c);
		return NULL;
	}
	return c;
}

json_t *
dev_account_claims(const char *name, const char *sub_pub,
    const char *const *signing_keys, size_t n_signing_keys, bool jetstream)
{
	static const char *const unlimited[] = {
		"subs", "data", "payload", "imports", "exports", "conn", "leaf",
	};
	static const char *const js_unlimited[] = {
		"mem_storage", "disk_storage", "streams", "consumer",
	};
	json_t *c, *nats, *keys, *limits, *perms;
	size_t i;

	if ((c = base_claims(name, sub_pub, &nats, "account")) == NULL)
		return NULL;
	keys = json_array();
	limits = json_object();
	perms = json_object();
	if (json_object_set_new(nats, "signing_keys", keys) == -1 ||
	    json_object_set_new(nats, "limits", limits) == -1 ||
	    json_object_set_new(nats, "default_permissions", perms) == -1)
		goto fail;
	for (i = 0; i < n_signing_keys; i++)
		if (signing_keys[i] == NULL || json_array_append_new(keys,
		    json_string(signing_keys[i])) == -1)
			goto fail;
	for (i = 0; i < sizeof(unlimited) / sizeof(unlimited[0]); i++)
		if (set_int(limits, unlimited[i], UNLIMITED) == -1)
			goto fail;
	if (json_object_set_new(limits, "wildcards", json_true()) == -1)
		goto fail;
	/* nats-server enables JetStream for an account only when its
	 * storage limits are non-zero; absent means disabled. */
	for (i = 0; jetstream &&
	    i < sizeof(js_unlimited) / sizeof(js_unlimited[0]); i++)
		if (set_int(limits, js_unlimited[i], UNLIMITED) == -1)
			goto fail;
	if (json_object_set_new(perms, "pub", json_object()) == -1 ||
	    json_object_set_new(perms, "sub", json_object()) == -1)
		goto fail;
	return c;
fail:
	json_decref(c);
	return NULL;
}

/* dir = {allow?, deny?} from borrowed arrays; -1 on a non-array. */
static int
set_permission(json_t *nats, const char *dir, json_t *allow, json_t *deny)
{
	json_t *p;

	if ((allow != NULL && !json_is_array(allow)) ||
	    (deny != NULL && !json_is_array(deny)))
		return -1;
	if (json_object_set_new(nats, dir, json_object()) == -1)
		return -1;
	p = json_object_get(nats, dir);
	if (allow != NULL && json_object_set(p, "allow", allow) == -1)
		return -1;
	if (deny != NULL && json_object_set(p, "deny", deny) == -1)
		return -1;
	return 0;
}

json_t *
dev_user_claims(const struct dev_user_spec *spec)
{
	json_t *c, *nats;

	if (spec == NULL)
		return NULL;
	if ((c = base_claims(spec->name, spec->sub_pub, &nats, "user")) == NULL)
		return NULL;
	if (set_permission(nats, "pub", spec->pub_allow, spec->pub_deny) == -1 ||
	    set_permission(nats, "sub", spec->sub_allow, spec->sub_deny) == -1)
		goto fail;
	if (set_int(nats, "subs", UNLIMITED) == -1 ||
	    set_int(nats, "data", UNLIMITED) == -1 ||
	    set_int(nats, "payload", UNLIMITED) == -1)
		goto fail;
	if (spec->issuer_account != NULL &&
	    json_object_set_new(nats, "issuer_account",
	    json_string(spec->issuer_account)) == -1)
		goto fail;
	if (spec->tags != NULL && (!json_is_array(spec->tags) ||
	    json_object_set(nats, "tags", spec->tags) == -1))
		goto fail;
	if (spec->exp != 0 && set_int(c, "exp", (json_int_t)spec->exp) == -1)
		goto fail;
	return c;
fail:
	json_decref(c);
	return NULL;
}
