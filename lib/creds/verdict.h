/*
 * Whether the daemon takes a credential: every reason its start-up refuses
 * one for, worded once. The supervisor logs these lines before it binds;
 * `cotal creds audit` prints the same lines and fails on the same refusals,
 * so the audit and the daemon cannot disagree (issue 31).
 *
 * What the file itself must be (no link, the owner, mode 0600) is
 * creds_load()'s; what needs two files or the broker (an observer and
 * evictor of one system account, the observer's CONNZ answered) is the
 * supervisor's admission.
 */
#ifndef COTAL_VERDICT_H
#define COTAL_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/creds/jwt.h"
#include "lib/creds/needs.h"

/* The optional features a credential's grants turn off. */
#define VERDICT_OFF_REGISTER 1u       /* registerChannel */
#define VERDICT_OFF_EVICTOR 2u        /* eviction (the $SYS evictor's grants) */
#define VERDICT_OFF_READER_MEMORY 4u  /* the reader's check of what it framed */
#define VERDICT_OFF_WATCH_FC 8u       /* the flow control of the mirrors' watches */

struct verdict_in {
	enum need_cred cred;
	const char *path;     /* the file, as the lines name it */
	const char *jwt;      /* its JWT */
	const char *token;    /* the space token */
	const char *account;  /* the space account (the delivery credential's) */
	int64_t now;          /* seconds since the epoch: expiry */
};

/* What a line of the verdict is. */
enum verdict_kind {
	VERDICT_REFUSAL, /* the daemon does not bind */
	VERDICT_OFF,     /* an optional feature turned off */
	VERDICT_NOTE,    /* said and taken: the delivery grants no feature needs */
};

/* One line. The text names the credential, the subject or the reason. */
typedef void (*verdict_say_fn)(void *arg, enum verdict_kind kind, const char *text);

/*
 * Every reason, in the daemon's order: allow-all (nothing more is
 * checked), expired (for the evictor: eviction off), permissions
 * unreadable, each observer grant of another account's (or every
 * account's) connections wherever it stands in the list, then each subject
 * a feature needs and the grants lack (one line per subject, naming every
 * feature that needs it), then the grants beyond the role: for a $SYS
 * credential, whose signatures go to a confined worker, any allow entry
 * that names a subject neither the table nor needs_tolerated() names is a
 * refusal naming each; for the delivery credential, the allow entries that
 * no feature's subject falls under are a note naming each (taken:
 * delivery-grants.json's reference holds some, docs/credentials.md).
 * Returns the number of refusals; *off gets the VERDICT_OFF_* bits of the
 * features turned off.
 */
int cred_verdict(const struct verdict_in *in, verdict_say_fn say, void *arg, unsigned *off);

/* The allow-all refusal alone (a reload's candidate): true with its text. */
bool cred_allow_all(const char *path, const struct jwt *j, enum need_cred c, char *out,
		    size_t outlen);

#endif
