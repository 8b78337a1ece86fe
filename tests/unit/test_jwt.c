/*
 * Unit tests for lib/creds/jwt.c (decode, verify, claim shape, base64url) using
 * tokens minted by the dev signer (cli/dev_signer.c).
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/unit/codec_check.h"

#include "cli/dev_signer.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"

#define ERRLEN 256

struct keys {
	struct nkey op, acct, acct_sk, user;
	char op_pub[NKEY_PUBLIC_LEN + 1];
	char acct_pub[NKEY_PUBLIC_LEN + 1];
	char sk_pub[NKEY_PUBLIC_LEN + 1];
	char user_pub[NKEY_PUBLIC_LEN + 1];
};

static int
setup(void **state)
{
	struct keys *k;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return -1;
	if (nkey_generate(NKEY_OPERATOR, &k->op) != 0 ||
	    nkey_generate(NKEY_ACCOUNT, &k->acct) != 0 ||
	    nkey_generate(NKEY_ACCOUNT, &k->acct_sk) != 0 ||
	    nkey_generate(NKEY_USER, &k->user) != 0)
		return -1;
	nkey_public(&k->op, k->op_pub);
	nkey_public(&k->acct, k->acct_pub);
	nkey_public(&k->acct_sk, k->sk_pub);
	nkey_public(&k->user, k->user_pub);
	*state = k;
	return 0;
}

static int
teardown(void **state)
{
	struct keys *k = *state;

	nkey_wipe(&k->op);
	nkey_wipe(&k->acct);
	nkey_wipe(&k->acct_sk);
	nkey_wipe(&k->user);
	free(k);
	return 0;
}

/* Sign and consume claims; fails the test when signing fails. */
static char *
sign(json_t *claims, const struct nkey *signer)
{
	char err[ERRLEN], *tok;

	assert_non_null(claims);
	tok = dev_jwt_sign(claims, signer, err, sizeof(err));
	if (tok == NULL)
		fail_msg("dev_jwt_sign: %s", err);
	json_decref(claims);
	return tok;
}

static char *
user_token(struct keys *k, const struct nkey *signer, const char *issuer_acct,
    int64_t exp)
{
	struct dev_user_spec spec = {
		.name = "alice",
		.sub_pub = k->user_pub,
		.issuer_account = issuer_acct,
		.exp = exp,
	};
	json_t *allow = json_pack("[ss]", "app.>", "_INBOX.>");
	json_t *deny = json_pack("[s]", "app.secret");
	json_t *tags = json_pack("[s]", "role:agent");
	char *tok;

	spec.pub_allow = allow;
	spec.sub_allow = allow;
	spec.pub_deny = deny;
	spec.tags = tags;
	tok = sign(dev_user_claims(&spec), signer);
	json_decref(allow);
	json_decref(deny);
	json_decref(tags);
	return tok;
}

static int
decode(const char *tok, struct jwt *j, char *err)
{
	return jwt_decode(tok, strlen(tok), j, err, ERRLEN);
}

/* Decoded segment of a token, as a JSON object. */
static json_t *
segment(const char *tok, int which)
{
	const char *p = tok, *end;
	uint8_t buf[8192];
	long n;

	while (which-- > 0)
		p = strchr(p, '.') + 1;
	end = strchr(p, '.');
	n = b64url_decode(p, end != NULL ? (size_t)(end - p) : strlen(p), buf,
	    sizeof(buf));
	assert_true(n > 0);
	return json_loadb((const char *)buf, (size_t)n, 0, NULL);
}

/* header.payload.sig with one segment replaced by the encoding of j. */
static char *
splice(const char *tok, int which, json_t *j)
{
	char *dump = json_dumps(j, JSON_COMPACT), *out, enc[8192];
	const char *seg[3], *p = tok;
	size_t len[3];
	int i;

	assert_non_null(dump);
	for (i = 0; i < 3; i++) {
		seg[i] = p;
		p = strchr(p, '.');
		len[i] = p != NULL ? (size_t)(p - seg[i]) : strlen(seg[i]);
		if (p != NULL)
			p++;
	}
	assert_true(b64url_encode((const uint8_t *)dump, strlen(dump), enc,
	    sizeof(enc)) > 0);
	free(dump);
	seg[which] = enc;
	len[which] = strlen(enc);
	out = malloc(len[0] + len[1] + len[2] + 3);
	assert_non_null(out);
	snprintf(out, len[0] + len[1] + len[2] + 3, "%.*s.%.*s.%.*s",
	    (int)len[0], seg[0], (int)len[1], seg[1], (int)len[2], seg[2]);
	return out;
}

static const struct codec b64url = { b64url_encode, b64url_decode, NULL };

static void
test_b64url_vectors(void **state)
{
	static const struct codec_vector v[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" },
		{ "foobar", "Zm9vYmFy" }, { "\xfb\xff", "-_8" },
	};
	char out[32];

	(void)state;
	codec_vectors(&b64url, v, sizeof(v) / sizeof(v[0]));
	assert_int_equal(b64url_encode((const uint8_t *)"foobar", 6, out, 8),
	    0);
}

static void
test_b64url_strict(void **state)
{
	static const char *const bad[] = { "Zg==", "Z", "+/8", "Zh" };
	uint8_t b[16];

	(void)state;
	codec_refuses(&b64url, bad, sizeof(bad) / sizeof(bad[0]));
	assert_int_equal(b64url_decode("Zm9vYmFy", 8, b, 5), -1);
}

static void
test_b64url_round_trip(void **state)
{
	(void)state;
	codec_round_trip(&b64url);
}

static void
test_operator_round_trip(void **state)
{
	struct keys *k = *state;
	char err[ERRLEN], *tok;
	struct jwt j;
	time_t now = time(NULL);

	tok = sign(dev_operator_claims("op", k->op_pub, k->acct_pub), &k->op);
	assert_int_equal(decode(tok, &j, err), 0);
	assert_int_equal(j.kind, JWT_OPERATOR);
	assert_string_equal(j.sub, k->op_pub);
	assert_string_equal(j.iss, k->op_pub);
	assert_string_equal(j.name, "op");
	assert_null(j.issuer_account);
	assert_true(j.iat >= now - 5 && j.iat <= now + 5);
	assert_int_equal(j.exp, 0);
	assert_string_equal(json_string_value(json_object_get(j.nats,
	    "system_account")), k->acct_pub);
	assert_int_equal(strlen(json_string_value(json_object_get(j.claims,
	    "jti"))), 52);
	assert_true(jwt_signed_by(&j, &j));
	/* The header is exactly the one nats-server and nsc write. */
	assert_memory_equal(tok, "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.",
	    47);
	jwt_free(&j);
	free(tok);
}

static void
test_account_and_user_chain(void **state)
{
	struct keys *k = *state;
	const char *sks[] = { k->sk_pub };
	char err[ERRLEN], *op_tok, *acct_tok, *user_tok;
	struct jwt op, acct, user;
	json_t *a;

	op_tok = sign(dev_operator_claims("op", k->op_pub, NULL), &k->op);
	acct_tok = sign(dev_account_claims("app", k->acct_pub, sks, 1, true),
	    &k->op);
	user_tok = user_token(k, &k->acct, NULL, 0);
	assert_int_equal(decode(op_tok, &op, err), 0);
	assert_int_equal(decode(acct_tok, &acct, err), 0);
	if (decode(user_tok, &user, err) != 0)
		fail_msg("%s", err);

	assert_int_equal(acct.kind, JWT_ACCOUNT);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
	    acct.nats, "limits"), "disk_storage")), -1);
	assert_true(jwt_signed_by(&acct, &op));
	assert_false(jwt_signed_by(&op, &acct));

	assert_int_equal(user.kind, JWT_USER);
	assert_string_equal(user.sub, k->user_pub);
	assert_string_equal(user.iss, k->acct_pub);
	assert_null(user.issuer_account);
	assert_true(jwt_signed_by(&user, &acct));
	assert_false(jwt_signed_by(&user, &op));

	a = jwt_user_list(&user, "pub", "allow");
	assert_non_null(a);
	assert_int_equal(json_array_size(a), 2);
	assert_string_equal(json_string_value(json_array_get(a, 0)), "app.>");
	a = jwt_user_list(&user, "pub", "deny");
	assert_int_equal(json_array_size(a), 1);
	assert_non_null(jwt_user_list(&user, "sub", "allow"));
	assert_null(jwt_user_list(&user, "sub", "deny"));
	assert_null(jwt_user_list(&user, "resp", "allow"));
	assert_null(jwt_user_list(&acct, "pub", "allow"));

	jwt_free(&op);
	jwt_free(&acct);
	jwt_free(&user);
	free(op_tok);
	free(acct_tok);
	free(user_tok);
}

static void
test_user_by_signing_key(void **state)
{
	struct keys *k = *state;
	const char *sks[] = { k->sk_pub };
	char err[ERRLEN], *acct_tok, *bare_tok, *user_tok;
	struct jwt acct, bare, user;

	acct_tok = sign(dev_account_claims("app", k->acct_pub, sks, 1, false),
	    &k->op);
	bare_tok = sign(dev_account_claims("app", k->acct_pub, NULL, 0, false),
	    &k->op);
	user_tok = user_token(k, &k->acct_sk, k->acct_pub, 0);
	assert_int_equal(decode(acct_tok, &acct, err), 0);
	assert_int_equal(decode(bare_tok, &bare, err), 0);
	if (decode(user_tok, &user, err) != 0)
		fail_msg("%s", err);

	assert_string_equal(user.iss, k->sk_pub);
	assert_string_equal(user.issuer_account, k->acct_pub);
	assert_true(jwt_signed_by(&user, &acct));
	/* The same account without that signing key does not vouch. */
	assert_false(jwt_signed_by(&user, &bare));
	assert_null(json_object_get(json_object_get(bare.nats, "limits"),
	    "disk_storage"));

	jwt_free(&acct);
	jwt_free(&bare);
	jwt_free(&user);
	free(acct_tok);
	free(bare_tok);
	free(user_tok);
}

static void
test_expired_is_decoded(void **state)
{
	struct keys *k = *state;
	int64_t exp = (int64_t)time(NULL) - 3600;
	char err[ERRLEN], *tok;
	struct jwt j;

	tok = user_token(k, &k->acct, NULL, exp);
	assert_int_equal(decode(tok, &j, err), 0);
	assert_int_equal(j.exp, exp);
	jwt_free(&j);
	free(tok);
}

static void
test_tampered_payload(void **state)
{
	struct keys *k = *state;
	char err[ERRLEN], *tok, *bad;
	struct jwt j;
	json_t *claims;

	tok = user_token(k, &k->acct, NULL, 0);
	claims = segment(tok, 1);
	json_object_set_new(claims, "name", json_string("mallory"));
	bad = splice(tok, 1, claims);
	assert_int_equal(decode(bad, &j, err), -1);
	assert_string_equal(err,
	    "jwt: signature does not verify with the \"iss\" key");
	assert_null(j.claims);
	free(bad);

	/* Swapping in another issuer does not help either. */
	json_object_set_new(claims, "name", json_string("alice"));
	json_object_set_new(claims, "iss", json_string(k->sk_pub));
	bad = splice(tok, 1, claims);
	assert_int_equal(decode(bad, &j, err), -1);
	assert_string_equal(err,
	    "jwt: signature does not verify with the \"iss\" key");
	free(bad);
	json_decref(claims);

	/* A flipped signature bit. */
	bad = strdup(tok);
	bad[strlen(bad) - 5] = bad[strlen(bad) - 5] == 'A' ? 'B' : 'A';
	assert_int_equal(decode(bad, &j, err), -1);
	free(bad);
	free(tok);
}

static void
test_bad_header(void **state)
{
	struct keys *k = *state;
	char err[ERRLEN], *tok, *bad;
	struct jwt j;
	json_t *h;

	tok = user_token(k, &k->acct, NULL, 0);
	h = json_pack("{ssss}", "typ", "JWT", "alg", "HS256");
	bad = splice(tok, 0, h);
	assert_int_equal(decode(bad, &j, err), -1);
	assert_string_equal(err, "jwt: header \"alg\" is not \"ed25519-nkey\"");
	free(bad);
	json_decref(h);

	h = json_pack("{ssss}", "typ", "JWT", "alg", "ed25519");
	bad = splice(tok, 0, h);
	assert_int_equal(decode(bad, &j, err), -1);
	assert_non_null(strstr(err, "v1 token"));
	free(bad);
	json_decref(h);

	h = json_pack("{ssss}", "typ", "JOSE", "alg", "ed25519-nkey");
	bad = splice(tok, 0, h);
	assert_int_equal(decode(bad, &j, err), -1);
	assert_string_equal(err, "jwt: header \"typ\" is not \"JWT\"");
	free(bad);
	json_decref(h);

	h = json_pack("{s{}}", "typ");
	bad = splice(tok, 0, h);
	assert_int_equal(decode(bad, &j, err), -1);
	free(bad);
	json_decref(h);
	free(tok);
}

static void
test_structure(void **state)
{
	char err[ERRLEN], *big;
	struct jwt j;

	(void)state;
	assert_int_equal(decode("", &j, err), -1);
	assert_string_equal(err, "jwt: empty token");
	assert_int_equal(decode("abc.def", &j, err), -1);
	assert_string_equal(err, "jwt: not three '.'-separated segments");
	assert_int_equal(decode("a.b.c.d", &j, err), -1);
	assert_string_equal(err, "jwt: not three '.'-separated segments");
	assert_int_equal(decode("e30.e30.AAAA", &j, err), -1);
	assert_string_equal(err, "jwt: header \"typ\" is not \"JWT\"");
	assert_int_equal(decode("!!!.e30.AAAA", &j, err), -1);
	assert_string_equal(err, "jwt: header is not valid base64url");

	big = malloc(JWT_MAX_LEN + 2);
	assert_non_null(big);
	memset(big, 'A', JWT_MAX_LEN + 1);
	big[JWT_MAX_LEN + 1] = '\0';
	assert_int_equal(decode(big, &j, err), -1);
	assert_string_equal(err,
	    "jwt: token is 65537 bytes, over the 65536-byte limit");
	free(big);
}

/* Sign modified claims and expect decode to fail with exactly want. */
static void
expect_refused(json_t *claims, const struct nkey *signer, const char *want)
{
	char err[ERRLEN], *tok;
	struct jwt j;

	tok = sign(claims, signer);
	assert_int_equal(decode(tok, &j, err), -1);
	assert_string_equal(err, want);
	free(tok);
}

static json_t *
user_claims(struct keys *k)
{
	struct dev_user_spec spec = { .name = "u", .sub_pub = k->user_pub };

	return dev_user_claims(&spec);
}

static void
test_claim_shape(void **state)
{
	struct keys *k = *state;
	json_t *c;

	c = user_claims(k);
	json_object_set_new(c, "exp", json_string("soon"));
	expect_refused(c, &k->acct, "jwt: claim \"exp\" is not an integer");

	c = user_claims(k);
	json_object_set_new(c, "exp", json_real(1e9));
	expect_refused(c, &k->acct, "jwt: claim \"exp\" is not an integer");

	c = user_claims(k);
	json_object_set_new(c, "nbf", json_integer(-1));
	expect_refused(c, &k->acct, "jwt: claim \"nbf\" is negative");

	c = user_claims(k);
	json_object_set_new(c, "name", json_integer(7));
	expect_refused(c, &k->acct, "jwt: claim \"name\" is not a string");

	c = user_claims(k);
	json_object_set_new(c, "sub", json_integer(7));
	assert_null(dev_jwt_sign(c, &k->acct, NULL, 0));
	json_decref(c);

	c = user_claims(k);
	json_object_set_new(json_object_get(c, "nats"), "version",
	    json_integer(1));
	expect_refused(c, &k->acct,
	    "jwt: claim \"nats.version\" is 1, expected 2");

	c = user_claims(k);
	json_object_del(json_object_get(c, "nats"), "version");
	expect_refused(c, &k->acct, "jwt: claim \"nats.version\" is missing");

	c = user_claims(k);
	json_object_set_new(json_object_get(c, "nats"), "type",
	    json_string("activation"));
	expect_refused(c, &k->acct, "jwt: claim \"nats.type\" is not "
	    "\"operator\", \"account\" or \"user\"");

	c = user_claims(k);
	json_object_set_new(c, "type", json_string("user"));
	expect_refused(c, &k->acct, "jwt: top-level claim \"type\" marks a v1 "
	    "token; only NATS JWT v2 is accepted");

	c = user_claims(k);
	json_object_del(c, "nats");
	expect_refused(c, &k->acct, "jwt: claim \"nats\" is missing");

	c = user_claims(k);
	json_object_set_new(json_object_get(json_object_get(c, "nats"), "pub"),
	    "allow", json_pack("[si]", "ok", 3));
	expect_refused(c, &k->acct,
	    "jwt: claim \"nats.pub.allow[1]\" is not a string");

	c = user_claims(k);
	json_object_set_new(json_object_get(c, "nats"), "sub",
	    json_string("x"));
	expect_refused(c, &k->acct, "jwt: claim \"nats.sub\" is not an object");

	c = user_claims(k);
	json_object_set_new(json_object_get(c, "nats"), "tags",
	    json_pack("{}"));
	expect_refused(c, &k->acct, "jwt: claim \"nats.tags\" is not an array");

	c = user_claims(k);
	json_object_set_new(json_object_get(c, "nats"), "issuer_account",
	    json_string(k->user_pub));
	expect_refused(c, &k->acct, "jwt: claim \"nats.issuer_account\": "
	    "public key: wrong type, expected account (got user)");
}

static void
test_key_types(void **state)
{
	struct keys *k = *state;
	struct dev_user_spec spec = { .name = "u", .sub_pub = k->acct_pub };

	/* A user signed by the operator directly. */
	expect_refused(user_claims(k), &k->op, "jwt: claim \"iss\": public "
	    "key: wrong type, expected account (got operator)");
	/* A user whose subject is an account key. */
	expect_refused(dev_user_claims(&spec), &k->acct, "jwt: claim \"sub\": "
	    "public key: wrong type, expected user (got account)");
	/* An account signed by another account. */
	expect_refused(dev_account_claims("a", k->acct_pub, NULL, 0, false),
	    &k->acct_sk, "jwt: claim \"iss\": public key: wrong type, "
	    "expected operator (got account)");
	/* An account whose signing key is a user key. */
	{
		const char *sks[] = { k->user_pub };

		expect_refused(dev_account_claims("a", k->acct_pub, sks, 1,
		    false), &k->op, "jwt: claim \"nats.signing_keys[0]\": "
		    "public key: wrong type, expected account (got user)");
	}
}

static void
test_duplicate_keys_refused(void **state)
{
	struct keys *k = *state;
	const char *hdr = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ";
	char payload[1024], enc[2048], tok[4096], sig64[100], err[ERRLEN];
	uint8_t sig[NKEY_SIG_LEN];
	struct jwt j;

	/* Hand-built: the dev signer cannot emit a duplicate key. */
	snprintf(payload, sizeof(payload), "{\"sub\":\"%s\",\"iss\":\"%s\","
	    "\"sub\":\"%s\",\"nats\":{\"type\":\"user\",\"version\":2}}",
	    k->user_pub, k->acct_pub, k->user_pub);
	b64url_encode((const uint8_t *)payload, strlen(payload), enc,
	    sizeof(enc));
	snprintf(tok, sizeof(tok), "%s.%s", hdr, enc);
	assert_int_equal(nkey_sign(&k->acct, tok, strlen(tok), sig), 0);
	b64url_encode(sig, sizeof(sig), sig64, sizeof(sig64));
	strcat(tok, ".");
	strcat(tok, sig64);
	assert_int_equal(decode(tok, &j, err), -1);
	assert_non_null(strstr(err, "payload is not valid JSON"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64url_vectors),
		cmocka_unit_test(test_b64url_strict),
		cmocka_unit_test(test_b64url_round_trip),
		cmocka_unit_test(test_operator_round_trip),
		cmocka_unit_test(test_account_and_user_chain),
		cmocka_unit_test(test_user_by_signing_key),
		cmocka_unit_test(test_expired_is_decoded),
		cmocka_unit_test(test_tampered_payload),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_claim_shape),
		cmocka_unit_test(test_key_types),
		cmocka_unit_test(test_duplicate_keys_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
