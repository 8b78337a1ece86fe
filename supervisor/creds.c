/*
 * The delivery credential in the supervisor: loading, the allow-all
 * refusal, and nonce signing. The seed stays in the mlocked memory of
 * struct creds and in a struct nkey that is wiped after each signature.
 */
#include "supervisor/creds.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "lib/creds/verdict.h"

/* The credential's reply-inbox prefix, from its own sub.allow. */
static int
reply_inbox(const struct jwt *j, char *out, size_t outlen, char *why, size_t whylen)
{
	struct perms p;
	int rc;

	if (perms_from_jwt(j, &p, why, whylen) != 0)
		return -1;
	rc = perms_reply_inbox(&p, out, outlen, why, whylen);
	perms_free(&p);
	return rc;
}

int
sup_creds_load(const char *path, enum need_cred kind, struct sup_creds *sc, char *err,
	       size_t errlen)
{
	unsigned char digest[SHA256_DIGEST_LENGTH];
	char why[512];
	struct jwt j;

	memset(sc, 0, sizeof(*sc));
	snprintf(sc->path, sizeof(sc->path), "%s", path);
	if (creds_load(path, &sc->c, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	if (jwt_decode(sc->c.jwt, strlen(sc->c.jwt), &j, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		creds_free(&sc->c);
		return -1;
	}
	if (cred_allow_all(path, &j, kind, err, errlen)) {
		jwt_free(&j);
		creds_free(&sc->c);
		return -1;
	}
	/* No reply inbox leaves inbox empty: the grant preflight refuses the
	 * credential, or turns an optional one's feature off. */
	if (reply_inbox(&j, sc->inbox, sizeof(sc->inbox), why, sizeof(why)) != 0)
		sc->inbox[0] = '\0';
	snprintf(sc->user_pub, sizeof(sc->user_pub), "%s", j.sub);
	snprintf(sc->account, sizeof(sc->account), "%s",
	    j.issuer_account ? j.issuer_account : j.iss);
	sc->exp = j.exp;
	jwt_free(&j);
	SHA256((const unsigned char *)sc->c.jwt, strlen(sc->c.jwt), digest);
	for (int i = 0; i < 8; i++)
		snprintf(sc->fingerprint + 2 * i, 3, "%02x", digest[i]);
	return 0;
}

void
sup_creds_free(struct sup_creds *sc)
{
	if (sc->c.jwt != NULL)
		creds_free(&sc->c);
	memset(sc, 0, sizeof(*sc));
}

bool
nonce_well_formed(const uint8_t *nonce, size_t len)
{
	if (len != NONCE_LEN)
		return false;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = nonce[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

int
sup_sign_nonce(const struct sup_creds *sc, const uint8_t *nonce, size_t len,
	       uint8_t sig[NKEY_SIG_LEN], char *err, size_t errlen)
{
	struct nkey k;
	int rc;

	if (!nonce_well_formed(nonce, len)) {
		snprintf(err, errlen, "not a broker nonce (%zu bytes)", len);
		return -1;
	}
	if (nkey_from_seed(sc->c.seed, strlen(sc->c.seed), &k, err, errlen) != 0)
		return -1;
	rc = nkey_sign(&k, nonce, len, sig);
	nkey_wipe(&k);
	if (rc != 0)
		snprintf(err, errlen, "signing failed");
	return rc;
}

void
budget_init(struct budget *b, int64_t now_ms, int burst, int64_t refill_ms)
{
	b->last_ms = now_ms;
	b->tokens = burst;
	b->burst = burst;
	b->refill_ms = refill_ms;
}

bool
budget_take(struct budget *b, int64_t now_ms)
{
	int64_t earned = (now_ms - b->last_ms) / b->refill_ms;

	if (earned > 0) {
		b->tokens = b->tokens + earned > b->burst ? b->burst : b->tokens + (int)earned;
		b->last_ms += earned * b->refill_ms;
	}
	if (b->tokens == 0)
		return false;
	b->tokens--;
	return true;
}
