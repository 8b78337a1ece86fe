/*
 * Minting credentials on a dev mesh: the signer keys live under
 * .cotal/mesh/keys/ and never leave the CLI.
 */
#ifndef COTAL_CLI_MINT_H
#define COTAL_CLI_MINT_H

#include <stdint.h>

#include "cli/profiles.h"
#include "lib/workspace.h"
#include "lib/creds/nkeys.h"

struct mint_req {
	enum profile profile;
	const char *space;
	const char *name;      /* JWT name; default "<profile>@<space>" */
	const char *owner;     /* principal owner; default "local" */
	const char *uid;       /* agent lifecycle UID */
	const char *const *allow;
	size_t nallow;
	int64_t exp;           /* epoch seconds, 0 = never */
	const char *seed;      /* renew: sign this user's existing key (NULL: a new key) */
	const char *grants;    /* another toolchain's grants file (delivery-grants.json
				* shape) instead of the profile's own, or NULL */
};

struct minted {
	char *creds;                        /* creds file text: secret, wipe it */
	char user_pub[NKEY_PUBLIC_LEN + 1];
	char principal[8 + NKEY_PUBLIC_LEN + 2]; /* "<owner>.<user key>" or "" */
};

int mint_user(const struct workspace *ws, const struct mint_req *req,
	      struct minted *out, char *err, size_t errlen);
void minted_free(struct minted *m);

/* Load the seed at path into k, or create one of type when create. */
int devkey_load(const char *path, uint8_t type, int create, struct nkey *k,
		char *err, size_t errlen);

/* A fresh lifecycle UID: 26 chars of [a-z0-9]. */
void new_lifecycle_uid(char out[27]);

#endif
