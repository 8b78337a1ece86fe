/*
 * Fuzz target: jwt_decode.
 *
 * Random bytes almost never carry a valid Ed25519 signature, so a plain
 * target would only ever test the layers before the signature check. The
 * first input byte therefore picks a mode:
 *   0: the rest is a token, decoded as is;
 *   1: the rest is claims JSON, signed by the dev signer, then decoded;
 *   2: the rest is the raw payload segment content, signed as is (so it
 *      must name the signer in "iss" itself to verify).
 * and which fixed key signs in modes 1 and 2 (operator, account, user).
 * The keys are derived from constant seeds, so runs are reproducible.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/dev_signer.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"

#define MODES 3
#define SIGNERS 3
#define JWT_HEADER_B64 "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nkey signers[SIGNERS];

static void
init_signers(void)
{
	static const uint8_t types[SIGNERS] = {
		NKEY_OPERATOR, NKEY_ACCOUNT, NKEY_USER,
	};
	static int done;
	uint8_t seed[32];
	int i;

	if (done)
		return;
	for (i = 0; i < SIGNERS; i++) {
		memset(seed, 0x41 + i, sizeof(seed));
		if (nkey_from_raw(types[i], seed, &signers[i]) != 0)
			abort();
	}
	done = 1;
}

static void
decode(const char *tok, size_t len)
{
	char err[256];
	struct jwt j;

	if (jwt_decode(tok, len, &j, err, sizeof(err)) != 0)
		return;
	/* A decoded token has the fields the header promises. */
	if (j.claims == NULL || j.nats == NULL || j.sub == NULL ||
	    j.iss == NULL || j.name == NULL)
		abort();
	(void)jwt_user_list(&j, "pub", "allow");
	(void)jwt_user_list(&j, "sub", "deny");
	(void)jwt_signed_by(&j, &j);
	jwt_free(&j);
}

static void
sign_claims(const uint8_t *data, size_t size, const struct nkey *signer)
{
	char err[256], *tok;
	json_t *claims;

	claims = json_loadb((const char *)data, size, 0, NULL);
	if (claims == NULL)
		return;
	tok = dev_jwt_sign(claims, signer, err, sizeof(err));
	json_decref(claims);
	if (tok == NULL)
		return;
	decode(tok, strlen(tok));
	free(tok);
}

static void
sign_raw(const uint8_t *data, size_t size, const struct nkey *signer)
{
	uint8_t sig[NKEY_SIG_LEN];
	size_t cap, off;
	char *tok;

	if (size > JWT_MAX_LEN)
		return;
	cap = sizeof(JWT_HEADER_B64) + 1 + size / 3 * 4 + 4 + 1 + 88;
	if ((tok = malloc(cap)) == NULL)
		return;
	memcpy(tok, JWT_HEADER_B64 ".", sizeof(JWT_HEADER_B64));
	off = sizeof(JWT_HEADER_B64);
	off += b64url_encode(data, size, tok + off, cap - off);
	if (nkey_sign(signer, tok, off, sig) != 0)
		abort();
	tok[off++] = '.';
	off += b64url_encode(sig, sizeof(sig), tok + off, cap - off);
	decode(tok, off);
	free(tok);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct nkey *signer;
	int mode;

	if (size == 0)
		return 0;
	init_signers();
	mode = data[0] % MODES;
	signer = &signers[data[0] / MODES % SIGNERS];
	data++;
	size--;
	switch (mode) {
	case 0:
		decode((const char *)data, size);
		break;
	case 1:
		sign_claims(data, size, signer);
		break;
	case 2:
		sign_raw(data, size, signer);
		break;
	}
	return 0;
}
