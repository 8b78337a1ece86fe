/*
 * Minting user credentials for a dev mesh. The account's signing key signs
 * every user; the account identity key only appears in issuer_account.
 */
#include "cli/mint.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/dev_signer.h"
#include "lib/creds/creds.h"
#include "lib/wire/tokens.h"

#define SEED_FILE_MAX 256

int
devkey_load(const char *path, uint8_t type, int create, struct nkey *k, char *err,
	    size_t errlen)
{
	char why[256], text[NKEY_SEED_LEN + 2];
	size_t len;
	char *buf;

	if (access(path, F_OK) != 0) {
		if (!create) {
			snprintf(err, errlen, "signer key %s is missing", path);
			return -1;
		}
		if (nkey_generate(type, k) != 0) {
			snprintf(err, errlen, "cannot generate a key for %s", path);
			return -1;
		}
		nkey_seed_text(k, text);
		text[NKEY_SEED_LEN] = '\n';
		int rc = ws_write_file(path, text, NKEY_SEED_LEN + 1, 0600, err, errlen);
		secure_wipe(text, sizeof(text));
		if (rc != 0)
			nkey_wipe(k);
		return rc;
	}
	buf = ws_read_secret(path, SEED_FILE_MAX, &len, err, errlen);
	if (buf == NULL)
		return -1;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	int rc = nkey_from_seed(buf, len, k, why, sizeof(why));
	secure_wipe(buf, len);
	free(buf);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	if (k->type != type) {
		snprintf(err, errlen, "%s: key of the wrong type", path);
		nkey_wipe(k);
		return -1;
	}
	return 0;
}

void
new_lifecycle_uid(char out[27])
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[26];

	if (RAND_bytes(r, sizeof(r)) != 1)
		abort();
	/* 36 does not divide 256: reject the top values to stay uniform. */
	for (int i = 0; i < 26; i++) {
		while (r[i] >= 252)
			if (RAND_bytes(&r[i], 1) != 1)
				abort();
		out[i] = alpha[r[i] % 36];
	}
	out[26] = '\0';
}

int
mint_user(const struct workspace *ws, const struct mint_req *req, struct minted *out,
	  char *err, size_t errlen)
{
	char path[WS_FILE_MAX], key[SPACE_KEY_MAX + 1], seed[NKEY_SEED_LEN + 1];
	char name[512], why[512];
	const char *acct, *space_acct = NULL;
	struct nkey signer, user;
	struct profile_params pp = { 0 };
	struct grants g = { 0 };
	json_t *mesh, *sp, *claims = NULL;
	char *jwt = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&signer, 0, sizeof(signer));
	memset(&user, 0, sizeof(user));
	if ((mesh = ws_dev_mesh(ws, err, errlen)) == NULL)
		return -1;
	if (ws_dev_mesh_open(ws)) {
		snprintf(err, errlen, "the dev mesh in %s is open (no authentication): it has no "
		    "accounts and takes no credentials", ws->root);
		goto out;
	}
	sp = json_object_get(json_object_get(mesh, "spaces"), req->space);
	if (sp == NULL) {
		snprintf(err, errlen, "space \"%s\" is not part of the dev mesh in %s "
		    "(run: cotal mesh init --dev --space %s)", req->space, ws->root, req->space);
		goto out;
	}
	space_acct = json_string_value(json_object_get(sp, "account"));
	if (!space_key(req->space, key, sizeof(key)) || space_acct == NULL) {
		snprintf(err, errlen, "dev-mesh.json: space \"%s\" has no account", req->space);
		goto out;
	}
	if (profile_is_system(req->profile)) {
		acct = json_string_value(json_object_get(mesh, "systemAccount"));
		snprintf(path, sizeof(path), "%s/keys/system-signing.nk", ws->mesh);
	} else {
		acct = space_acct;
		snprintf(path, sizeof(path), "%s/keys/space.%s-signing.nk", ws->mesh, key);
	}
	if (acct == NULL) {
		snprintf(err, errlen, "dev-mesh.json: no system account");
		goto out;
	}
	if (devkey_load(path, NKEY_ACCOUNT, 0, &signer, err, errlen) != 0)
		goto out;
	if (req->seed != NULL) {
		/* A renewal: the same user, a new JWT. */
		char why[128];
		if (nkey_from_seed(req->seed, strlen(req->seed), &user, why, sizeof(why)) != 0 ||
		    user.type != NKEY_USER) {
			snprintf(err, errlen, "the credential to renew holds no user seed (%s)", why);
			goto out;
		}
	} else if (nkey_generate(NKEY_USER, &user) != 0) {
		snprintf(err, errlen, "cannot generate a user key");
		goto out;
	}
	nkey_public(&user, out->user_pub);

	pp.space = req->space;
	pp.user_pub = out->user_pub;
	pp.uid = req->uid;
	pp.allow = req->allow;
	pp.nallow = req->nallow;
	pp.space_account = space_acct;
	if (!profile_is_system(req->profile) && req->profile != PROFILE_PROVISIONER) {
		pp.owner = req->owner ? req->owner : "local";
		pp.actor = out->user_pub;
		snprintf(out->principal, sizeof(out->principal), "%s.%s", pp.owner, pp.actor);
	}
	if ((req->grants != NULL ?
	    profile_grants_from_file(req->grants, req->profile, &pp, &g, err, errlen) :
	    profile_grants(req->profile, &pp, &g, err, errlen)) != 0)
		goto out;

	if (req->name != NULL)
		snprintf(name, sizeof(name), "%s", req->name);
	else
		snprintf(name, sizeof(name), "%s@%s", profile_name(req->profile), req->space);
	struct dev_user_spec spec = {
		.name = name,
		.sub_pub = out->user_pub,
		.issuer_account = acct,
		.pub_allow = g.pub_allow,
		.pub_deny = json_array_size(g.pub_deny) ? g.pub_deny : NULL,
		.sub_allow = g.sub_allow,
		.sub_deny = json_array_size(g.sub_deny) ? g.sub_deny : NULL,
		.tags = g.tags,
		.exp = req->exp,
	};
	claims = dev_user_claims(&spec);
	if (claims == NULL) {
		snprintf(err, errlen, "cannot build the user claims");
		goto out;
	}
	jwt = dev_jwt_sign(claims, &signer, why, sizeof(why));
	if (jwt == NULL) {
		snprintf(err, errlen, "sign the user JWT: %s", why);
		goto out;
	}
	nkey_seed_text(&user, seed);
	out->creds = creds_format(jwt, seed);
	secure_wipe(seed, sizeof(seed));
	if (out->creds == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	free(jwt);
	json_decref(claims);
	grants_free(&g);
	nkey_wipe(&signer);
	nkey_wipe(&user);
	json_decref(mesh);
	return rc;
}

void
minted_free(struct minted *m)
{
	if (m->creds != NULL) {
		secure_wipe(m->creds, strlen(m->creds));
		free(m->creds);
	}
	memset(m, 0, sizeof(*m));
}
