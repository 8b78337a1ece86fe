/*
 * What each feature of the daemon publishes and subscribes: the one table
 * of grants. `cotal creds mint --profile delivery|sys-observer|sys-evictor`
 * mints exactly these, the supervisor's preflight checks a credential
 * against them before it binds, and `cotal creds audit` marks every grant
 * of a credential with the features that need it. A new grant is added
 * here and nowhere else.
 *
 * Patterns name their variable parts the way WIRE.md and
 * delivery-grants.json do: <s> the space token, <inbox> the credential's
 * reply-inbox prefix, <account> the space account (the observer's CONNZ).
 * Every other token is literal or a NATS wildcard.
 */
#ifndef COTAL_NEEDS_H
#define COTAL_NEEDS_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/creds/perms.h"

/* The credentials a daemon holds. */
enum need_cred {
	NEED_DELIVERY,
	NEED_SYS_OBSERVER,
	NEED_SYS_EVICTOR,
};

/* The optional features of the delivery credential, as the table names
 * them (the supervisor turns each off on its own). */
#define NEED_F_REGISTER "registerChannel"
#define NEED_F_READER_MEMORY "the reader's check of what it framed"
#define NEED_F_WATCH_FC "the flow control of the mirrors' watches"

struct need {
	enum need_cred cred;
	const char *feature;   /* as a log line names it: "the trusted reader" */
	bool optional;         /* the daemon runs without it, the feature off */
	enum perms_dir dir;
	const char *pattern;   /* with <s>, <inbox>, <account> */
};

/* The table, and its length. */
const struct need *needs_table(size_t *n);
/* What a $SYS credential may grant beyond the table and still be taken
 * (the reference grants' subjects no feature uses). A $SYS grant that
 * neither covers nor names only what these and the table name is refused
 * (lib/creds/verdict.h). */
const struct need *needs_tolerated(size_t *n);

/* The pattern with <s>, <inbox> and <account> replaced by token, inbox and
 * account. 0, or -1 when out is short or a name it uses has no value. */
int need_subject(const struct need *nd, const char *token, const char *inbox,
		 const char *account, char *out, size_t outlen);

/*
 * text with every names[i] (e.g. "<s>") replaced by values[i], into out:
 * the one substitution of the grant table and of delivery-grants.json. 0,
 * or -1 when out is short or text uses a name whose value is NULL.
 */
int subject_fill(const char *text, const char *const *names, const char *const *values,
		 size_t n, char *out, size_t outlen);

/* The name of a credential kind ("delivery", "sys-observer", "sys-evictor"). */
const char *need_cred_name(enum need_cred c);

#endif
