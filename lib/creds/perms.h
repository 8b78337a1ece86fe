/*
 * A user JWT's publish and subscribe permissions, read the way nats-server
 * applies them: an empty allow list allows everything, a deny wins over an
 * allow, and subjects are matched token by token ('*' one token, '>' the
 * rest). Pure logic over a decoded JWT: no connection, no I/O.
 */
#ifndef COTAL_PERMS_H
#define COTAL_PERMS_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/creds/jwt.h"

#define PERMS_SUBJECT_MAX 1024  /* a longer grant is refused */
#define PERMS_LIST_MAX 1024     /* entries per allow/deny list */
#define REPLY_INBOX_MAX 128     /* a reply-inbox prefix, NUL included */

enum perms_dir { PERMS_PUB = 0, PERMS_SUB = 1 };

struct perms_list {
	char **v;
	size_t n;
};

struct perms {
	struct perms_list allow[2], deny[2]; /* by enum perms_dir */
	bool has_allow[2];                  /* false: no allow list (all allowed) */
};

/* Read the permissions of a decoded user JWT. 0, or -1 with err naming the
 * field (a grant that is not a string, an empty or overlong subject, more
 * than PERMS_LIST_MAX entries). */
int perms_from_jwt(const struct jwt *j, struct perms *p, char *err, size_t errlen);
void perms_free(struct perms *p);

/* Does pattern (wildcards allowed) match the literal or pattern subject s
 * as a whole, i.e. is every subject s names also named by pattern? */
bool subject_covers(const char *pattern, const char *s);
/* Do two patterns name at least one subject in common? */
bool subject_overlaps(const char *a, const char *b);

/*
 * May the credential publish (or subscribe to) every subject that need
 * names? need may carry wildcards. True when one allow entry covers need
 * (or there is no allow list) and no deny entry overlaps it. On false,
 * *deny_hit is the deny entry in the way, or NULL when no allow covers it.
 */
bool perms_grant(const struct perms *p, enum perms_dir d, const char *need,
		 const char **deny_hit);

/*
 * The reply-inbox prefix a connection of this credential must use: its
 * sub.allow entry that begins with "_INBOX" and ends with ".>", without the
 * ".>" (the first such entry; "_INBOX" when there is none but a wider
 * grant, or no sub allow list at all, covers "_INBOX.>"). 0, or -1 with err
 * when the credential may subscribe to no inbox.
 */
int perms_reply_inbox(const struct perms *p, char *out, size_t outlen, char *err,
		      size_t errlen);

/*
 * Is this an allow-all credential? A publish or subscribe allow list
 * holding ">" or a pattern whose first token is a wildcard (every subject
 * tree), or no allow list at all. True with why naming it.
 */
bool jwt_allow_all(const struct jwt *j, char *why, size_t whylen);

/* The same, straight from a JWT's text (decoded and verified). */
int jwt_reply_inbox(const char *jwt, char *out, size_t outlen, char *err, size_t errlen);

#endif
