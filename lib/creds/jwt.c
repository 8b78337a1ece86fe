/*
 * NATS JWT v2 decoding and verification.
 *
 * A token is base64url(header) "." base64url(claims) "." base64url(sig),
 * unpadded. The header must name typ "JWT" and alg "ed25519-nkey"; sig is
 * the 64-byte Ed25519 signature over the ASCII "header.claims" by the key
 * in claims "iss". Only after the signature holds are the claims checked
 * for the shape of an operator, account or user; time claims are reported,
 * not enforced, because the broker is the one that enforces them.
 *
 * Error messages name the offending claim but never quote token content.
 */

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds/jwt.h"
#include "lib/base64.h"
#include "lib/refuse.h"
#include "lib/creds/nkeys.h"

#define JWT_VERSION 2
#define JWT_HEADER_B64_MAX 512 /* ours is 46 characters; room for extras */
#define JWT_SIG_B64_LEN 86     /* unpadded base64url of 64 bytes */

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t
b64url_encode(const uint8_t *in, size_t n, char *out, size_t outlen)
{
	size_t need, i, o = 0;
	uint32_t v;

	if (n > (SIZE_MAX - 4) / 4 * 3)
		return 0;
	need = n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
	if (outlen < need + 1)
		return 0;
	for (i = 0; i + 3 <= n; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = b64url_alphabet[v >> 18 & 63];
		out[o++] = b64url_alphabet[v >> 12 & 63];
		out[o++] = b64url_alphabet[v >> 6 & 63];
		out[o++] = b64url_alphabet[v & 63];
	}
	if (n - i == 1) {
		v = (uint32_t)in[i] << 16;
		out[o++] = b64url_alphabet[v >> 18 & 63];
		out[o++] = b64url_alphabet[v >> 12 & 63];
	} else if (n - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = b64url_alphabet[v >> 18 & 63];
		out[o++] = b64url_alphabet[v >> 12 & 63];
		out[o++] = b64url_alphabet[v >> 6 & 63];
	}
	out[o] = '\0';
	return o;
}

/*
 * Strict: no padding, no length a padding-free encoder cannot produce,
 * and zero unused bits, so a signed token has exactly one spelling.
 */
long
b64url_decode(const char *in, size_t n, uint8_t *out, size_t outlen)
{
	size_t need, i, o = 0;
	uint32_t acc = 0;
	int bits = 0, v;

	if (n % 4 == 1 || n / 4 > (size_t)LONG_MAX / 4)
		return -1;
	need = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
	if (outlen < need)
		return -1;
	for (i = 0; i < n; i++) {
		if ((v = base64_digit((unsigned char)in[i], true)) < 0)
			return -1;
		acc = (acc << 6 | (uint32_t)v) & 0x3fff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
		return -1;
	return (long)o;
}

/* Decode one base64url segment and parse it as a JSON object. */
static json_t *
segment_json(const char *seg, size_t n, const char *what, char *err,
    size_t errlen)
{
	json_error_t jerr;
	uint8_t *buf;
	json_t *j;
	long got;

	if ((buf = malloc(n / 4 * 3 + 3)) == NULL) {
		seterr(err, errlen, "jwt: out of memory");
		return NULL;
	}
	if ((got = b64url_decode(seg, n, buf, n / 4 * 3 + 3)) < 0) {
		free(buf);
		seterr(err, errlen, "jwt: %s is not valid base64url", what);
		return NULL;
	}
	/* Duplicate keys would let two readers see two different tokens. */
	j = json_loadb((const char *)buf, (size_t)got, JSON_REJECT_DUPLICATES,
	    &jerr);
	free(buf);
	if (j == NULL) {
		seterr(err, errlen, "jwt: %s is not valid JSON (at byte %d)",
		    what, jerr.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		seterr(err, errlen, "jwt: %s is not a JSON object", what);
		return NULL;
	}
	return j;
}

static int
check_header(const char *seg, size_t n, char *err, size_t errlen)
{
	json_t *h, *typ, *alg;
	const char *a;
	int rc = -1;

	if (n > JWT_HEADER_B64_MAX) {
		seterr(err, errlen, "jwt: header longer than %d characters",
		    JWT_HEADER_B64_MAX);
		return -1;
	}
	if ((h = segment_json(seg, n, "header", err, errlen)) == NULL)
		return -1;
	typ = json_object_get(h, "typ");
	alg = json_object_get(h, "alg");
	if (!json_is_string(typ) || strcmp(json_string_value(typ), "JWT") != 0) {
		seterr(err, errlen, "jwt: header \"typ\" is not \"JWT\"");
		goto out;
	}
	if (!json_is_string(alg)) {
		seterr(err, errlen, "jwt: header \"alg\" is missing");
		goto out;
	}
	a = json_string_value(alg);
	if (strcmp(a, "ed25519") == 0) {
		seterr(err, errlen, "jwt: header \"alg\" is \"ed25519\" "
		    "(a v1 token); only \"ed25519-nkey\" is accepted");
		goto out;
	}
	if (strcmp(a, "ed25519-nkey") != 0) {
		seterr(err, errlen,
		    "jwt: header \"alg\" is not \"ed25519-nkey\"");
		goto out;
	}
	rc = 0;
out:
	json_decref(h);
	return rc;
}

/* Optional string member; *out stays as given when absent. */
static int
opt_string(json_t *obj, const char *key, const char *path, const char **out,
    char *err, size_t errlen)
{
	json_t *v;

	if ((v = json_object_get(obj, key)) == NULL)
		return 0;
	if (!json_is_string(v)) {
		seterr(err, errlen, "jwt: claim \"%s\" is not a string", path);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

static int
req_string(json_t *obj, const char *key, const char *path, const char **out,
    char *err, size_t errlen)
{
	if (json_object_get(obj, key) == NULL) {
		seterr(err, errlen, "jwt: claim \"%s\" is missing", path);
		return -1;
	}
	return opt_string(obj, key, path, out, err, errlen);
}

/* Optional non-negative integer member (seconds); 0 when absent. */
static int
opt_time(json_t *obj, const char *key, int64_t *out, char *err, size_t errlen)
{
	json_t *v;

	*out = 0;
	if ((v = json_object_get(obj, key)) == NULL)
		return 0;
	if (!json_is_integer(v)) {
		seterr(err, errlen, "jwt: claim \"%s\" is not an integer", key);
		return -1;
	}
	if (json_integer_value(v) < 0) {
		seterr(err, errlen, "jwt: claim \"%s\" is negative", key);
		return -1;
	}
	*out = (int64_t)json_integer_value(v);
	return 0;
}

/* A string that must be a public nkey of the given type. */
static int
check_key(const char *s, int type, const char *path, char *err, size_t errlen)
{
	char kerr[128];

	if (nkey_decode_public(s, type, NULL, NULL, kerr, sizeof(kerr)) == -1) {
		seterr(err, errlen, "jwt: claim \"%s\": %s", path, kerr);
		return -1;
	}
	return 0;
}

static int
check_string_array(json_t *obj, const char *key, const char *path, char *err,
    size_t errlen)
{
	json_t *a, *v;
	size_t i;

	if ((a = json_object_get(obj, key)) == NULL)
		return 0;
	if (!json_is_array(a)) {
		seterr(err, errlen, "jwt: claim \"%s\" is not an array", path);
		return -1;
	}
	json_array_foreach(a, i, v) {
		if (!json_is_string(v)) {
			seterr(err, errlen,
			    "jwt: claim \"%s[%zu]\" is not a string", path, i);
			return -1;
		}
	}
	return 0;
}

/* nats.pub / nats.sub: {"allow": [...], "deny": [...]}, both optional. */
static int
check_permission(json_t *nats, const char *dir, char *err, size_t errlen)
{
	char path[32];
	json_t *p;

	if ((p = json_object_get(nats, dir)) == NULL)
		return 0;
	if (!json_is_object(p)) {
		seterr(err, errlen, "jwt: claim \"nats.%s\" is not an object",
		    dir);
		return -1;
	}
	snprintf(path, sizeof(path), "nats.%s.allow", dir);
	if (check_string_array(p, "allow", path, err, errlen) == -1)
		return -1;
	snprintf(path, sizeof(path), "nats.%s.deny", dir);
	return check_string_array(p, "deny", path, err, errlen);
}

/* The key of a signing_keys entry: a plain string or {"key": "..."}. */
static const char *
signing_key_of(json_t *v)
{
	json_t *k;

	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_object(v) && json_is_string(k = json_object_get(v, "key")))
		return json_string_value(k);
	return NULL;
}

static int
check_signing_keys(json_t *nats, int type, char *err, size_t errlen)
{
	char path[48];
	json_t *a, *v;
	const char *k;
	size_t i;

	if ((a = json_object_get(nats, "signing_keys")) == NULL)
		return 0;
	if (!json_is_array(a)) {
		seterr(err, errlen,
		    "jwt: claim \"nats.signing_keys\" is not an array");
		return -1;
	}
	json_array_foreach(a, i, v) {
		snprintf(path, sizeof(path), "nats.signing_keys[%zu]", i);
		if ((k = signing_key_of(v)) == NULL) {
			seterr(err, errlen, "jwt: claim \"%s\" is neither a key "
			    "nor an object with a \"key\" string", path);
			return -1;
		}
		if (check_key(k, type, path, err, errlen) == -1)
			return -1;
	}
	return 0;
}

static int
check_claims(json_t *claims, struct jwt *out, char *err, size_t errlen)
{
	json_t *nats, *ver;
	const char *type = NULL, *unused = NULL, *sys = NULL;
	int64_t nbf;
	int sub_type, iss_type;

	/* v1 tokens carried "type" at the top level, v2 moved it to nats. */
	if (json_object_get(claims, "type") != NULL) {
		seterr(err, errlen, "jwt: top-level claim \"type\" marks a v1 "
		    "token; only NATS JWT v2 is accepted");
		return -1;
	}
	if (req_string(claims, "sub", "sub", &out->sub, err, errlen) == -1 ||
	    opt_string(claims, "name", "name", &out->name, err, errlen) == -1 ||
	    opt_string(claims, "jti", "jti", &unused, err, errlen) == -1 ||
	    opt_string(claims, "aud", "aud", &unused, err, errlen) == -1)
		return -1;
	if (opt_time(claims, "iat", &out->iat, err, errlen) == -1 ||
	    opt_time(claims, "exp", &out->exp, err, errlen) == -1 ||
	    opt_time(claims, "nbf", &nbf, err, errlen) == -1)
		return -1;

	if ((nats = json_object_get(claims, "nats")) == NULL) {
		seterr(err, errlen, "jwt: claim \"nats\" is missing");
		return -1;
	}
	if (!json_is_object(nats)) {
		seterr(err, errlen, "jwt: claim \"nats\" is not an object");
		return -1;
	}
	if ((ver = json_object_get(nats, "version")) == NULL) {
		seterr(err, errlen, "jwt: claim \"nats.version\" is missing");
		return -1;
	}
	if (!json_is_integer(ver)) {
		seterr(err, errlen,
		    "jwt: claim \"nats.version\" is not an integer");
		return -1;
	}
	if (json_integer_value(ver) != JWT_VERSION) {
		seterr(err, errlen, "jwt: claim \"nats.version\" is %lld, "
		    "expected %d", (long long)json_integer_value(ver),
		    JWT_VERSION);
		return -1;
	}
	if (req_string(nats, "type", "nats.type", &type, err, errlen) == -1)
		return -1;
	if (check_string_array(nats, "tags", "nats.tags", err, errlen) == -1)
		return -1;

	if (strcmp(type, "operator") == 0) {
		out->kind = JWT_OPERATOR;
		sub_type = NKEY_OPERATOR;
		iss_type = NKEY_OPERATOR;
	} else if (strcmp(type, "account") == 0) {
		out->kind = JWT_ACCOUNT;
		sub_type = NKEY_ACCOUNT;
		iss_type = NKEY_OPERATOR;
	} else if (strcmp(type, "user") == 0) {
		out->kind = JWT_USER;
		sub_type = NKEY_USER;
		iss_type = NKEY_ACCOUNT;
	} else {
		seterr(err, errlen, "jwt: claim \"nats.type\" is not "
		    "\"operator\", \"account\" or \"user\"");
		return -1;
	}
	if (check_key(out->sub, sub_type, "sub", err, errlen) == -1 ||
	    check_key(out->iss, iss_type, "iss", err, errlen) == -1)
		return -1;

	switch (out->kind) {
	case JWT_OPERATOR:
		if (opt_string(nats, "system_account", "nats.system_account",
		    &sys, err, errlen) == -1)
			return -1;
		if (sys != NULL && check_key(sys, NKEY_ACCOUNT,
		    "nats.system_account", err, errlen) == -1)
			return -1;
		if (check_signing_keys(nats, NKEY_OPERATOR, err, errlen) == -1)
			return -1;
		break;
	case JWT_ACCOUNT:
		if (check_signing_keys(nats, NKEY_ACCOUNT, err, errlen) == -1)
			return -1;
		break;
	case JWT_USER:
		if (opt_string(nats, "issuer_account", "nats.issuer_account",
		    &out->issuer_account, err, errlen) == -1)
			return -1;
		if (out->issuer_account != NULL &&
		    check_key(out->issuer_account, NKEY_ACCOUNT,
		    "nats.issuer_account", err, errlen) == -1)
			return -1;
		if (check_permission(nats, "pub", err, errlen) == -1 ||
		    check_permission(nats, "sub", err, errlen) == -1)
			return -1;
		break;
	}
	out->nats = nats;
	return 0;
}

int
jwt_decode(const char *token, size_t len, struct jwt *out, char *err,
    size_t errlen)
{
	uint8_t sig[NKEY_SIG_LEN + 2];
	const char *dot1, *dot2, *pay, *sigseg;
	size_t hlen, plen, slen;
	json_t *claims;
	char kerr[128];

	memset(out, 0, sizeof(*out));
	if (token == NULL || len == 0) {
		seterr(err, errlen, "jwt: empty token");
		return -1;
	}
	if (len > JWT_MAX_LEN) {
		seterr(err, errlen, "jwt: token is %zu bytes, over the %d-byte "
		    "limit", len, JWT_MAX_LEN);
		return -1;
	}
	dot1 = memchr(token, '.', len);
	dot2 = dot1 != NULL ?
	    memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
	if (dot2 == NULL ||
	    memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)) != NULL) {
		seterr(err, errlen, "jwt: not three '.'-separated segments");
		return -1;
	}
	hlen = (size_t)(dot1 - token);
	pay = dot1 + 1;
	plen = (size_t)(dot2 - pay);
	sigseg = dot2 + 1;
	slen = len - (size_t)(sigseg - token);

	if (check_header(token, hlen, err, errlen) == -1)
		return -1;
	if (slen != JWT_SIG_B64_LEN ||
	    b64url_decode(sigseg, slen, sig, sizeof(sig)) != NKEY_SIG_LEN) {
		seterr(err, errlen,
		    "jwt: signature is not 64 base64url-encoded bytes");
		return -1;
	}
	if ((claims = segment_json(pay, plen, "payload", err, errlen)) == NULL)
		return -1;
	if (req_string(claims, "iss", "iss", &out->iss, err, errlen) == -1)
		goto fail;
	if (nkey_decode_public(out->iss, -1, NULL, NULL, kerr,
	    sizeof(kerr)) == -1) {
		seterr(err, errlen, "jwt: claim \"iss\": %s", kerr);
		goto fail;
	}
	if (nkey_verify(out->iss, token, (size_t)(dot2 - token), sig,
	    NKEY_SIG_LEN) == -1) {
		seterr(err, errlen,
		    "jwt: signature does not verify with the \"iss\" key");
		goto fail;
	}
	out->name = "";
	if (check_claims(claims, out, err, errlen) == -1)
		goto fail;
	out->claims = claims;
	return 0;
fail:
	json_decref(claims);
	memset(out, 0, sizeof(*out));
	return -1;
}

void
jwt_free(struct jwt *j)
{
	if (j == NULL)
		return;
	json_decref(j->claims);
	memset(j, 0, sizeof(*j));
}

json_t *
jwt_user_list(const struct jwt *j, const char *dir, const char *which)
{
	json_t *p, *a;

	if (j == NULL || j->nats == NULL || j->kind != JWT_USER)
		return NULL;
	if (strcmp(dir, "pub") != 0 && strcmp(dir, "sub") != 0)
		return NULL;
	if (!json_is_object(p = json_object_get(j->nats, dir)))
		return NULL;
	a = json_object_get(p, which);
	return json_is_array(a) ? a : NULL;
}

int
jwt_signed_by(const struct jwt *child, const struct jwt *parent)
{
	json_t *keys, *v;
	const char *k;
	size_t i;

	if (child == NULL || parent == NULL || child->claims == NULL ||
	    parent->claims == NULL)
		return 0;
	switch (child->kind) {
	case JWT_USER:
		if (parent->kind != JWT_ACCOUNT)
			return 0;
		/* A signing key acts for the account named in
		 * issuer_account; without it the account signed directly. */
		if (strcmp(child->issuer_account != NULL ?
		    child->issuer_account : child->iss, parent->sub) != 0)
			return 0;
		break;
	case JWT_ACCOUNT:
	case JWT_OPERATOR:
		if (parent->kind != JWT_OPERATOR)
			return 0;
		break;
	}
	if (strcmp(child->iss, parent->sub) == 0)
		return 1;
	keys = json_object_get(parent->nats, "signing_keys");
	json_array_foreach(keys, i, v) {
		if ((k = signing_key_of(v)) != NULL &&
		    strcmp(k, child->iss) == 0)
			return 1;
	}
	return 0;
}
