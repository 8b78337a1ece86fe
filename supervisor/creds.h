/*
 * The delivery credential in the supervisor, the only process that holds
 * its seed. Workers get the JWT and ask for nonce signatures over IPC; the
 * supervisor signs only nonces of the broker's format, at a bounded rate.
 */
#ifndef COTAL_SUPERVISOR_CREDS_H
#define COTAL_SUPERVISOR_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/creds/needs.h"
#include "lib/creds/nkeys.h"
#include "lib/creds/perms.h"

/* nats-server sends 11 random bytes as unpadded base64url: 15 chars. */
#define NONCE_LEN 15

/* Per worker: a burst of signatures, then one a second (a reconnecting
 * connection needs one per attempt, nats.c waits 2 s between attempts). */
#define SIGN_BURST 8
#define SIGN_REFILL_MS 1000
/* Refused signing requests one worker process may send: past this it is
 * ended, as a worker that breaks the IPC rules is (its connections never
 * need a refused one: issue 41, finding 3). */
#define SIGN_REFUSED_MAX 64

struct sup_creds {
	struct creds c;                     /* jwt + mlocked seed */
	char path[4096];
	char user_pub[NKEY_PUBLIC_LEN + 1];
	char account[NKEY_PUBLIC_LEN + 1];  /* issuer_account or iss */
	char fingerprint[17];               /* first 16 hex of sha256(JWT) */
	char inbox[REPLY_INBOX_MAX];        /* reply-inbox prefix, from its sub.allow */
	int64_t exp;                        /* JWT exp, 0 = never */
};

/*
 * Load the credential, decode its JWT, and refuse an allow-all credential:
 * a user JWT whose publish or subscribe allow list contains ">" or that has
 * no permissions at all. 0 or -1 with err. A credential that may subscribe
 * to no reply inbox loads with inbox "" (the preflight decides).
 */
int sup_creds_load(const char *path, enum need_cred kind, struct sup_creds *sc, char *err,
		   size_t errlen);
void sup_creds_free(struct sup_creds *sc);


/* Is this the broker's nonce: NONCE_LEN chars of [A-Za-z0-9_-]? */
bool nonce_well_formed(const uint8_t *nonce, size_t len);

/* Sign a well-formed nonce. 0, or -1 with err. */
int sup_sign_nonce(const struct sup_creds *sc, const uint8_t *nonce, size_t len,
		   uint8_t sig[NKEY_SIG_LEN], char *err, size_t errlen);

/* A token bucket: burst tokens at once, then one every refill_ms (a
 * worker's signatures: SIGN_BURST, SIGN_REFILL_MS; the reload requests:
 * reload.c). */
struct budget {
	int64_t last_ms;
	int tokens;
	int burst;
	int64_t refill_ms;
};
void budget_init(struct budget *b, int64_t now_ms, int burst, int64_t refill_ms);
/* Take a token; false when it is asked for too often. */
bool budget_take(struct budget *b, int64_t now_ms);

#endif
