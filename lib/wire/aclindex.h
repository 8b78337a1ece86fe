/*
 * The read-ACL rows of a space (cotal_acl_<s>) a worker decides on, held
 * as it meets them. Shared by the fan-out (mentions), the reader (every
 * entry) and the registry (callers, joins, inventories).
 *
 * Issue 39: a space keeps every lifecycle it ever had, and a retired one
 * leaves its row behind forever as a tombstone. A mirror of the bucket paid
 * for all of them at every start (each worker was streamed the whole
 * bucket). The index loads nothing: it holds the rows it met, live and
 * retired, read exactly from the bucket and dropped at a later write
 * (lib/nats/kvheld.h), so a worker's memory and start grow with the rows it
 * meets, never with the space's history. An alias's rows (<o>.<a>.*, read
 * by a watch of them alone) are held the same way: what they said (its live
 * lifecycles, the row of the first, its last retirement), until a write of
 * any of them.
 */
#ifndef COTAL_ACLINDEX_H
#define COTAL_ACLINDEX_H

#include <stdbool.h>

#include "lib/nats/kvheld.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"

#define ACLINDEX_ROWS_MAX 262144  /* rows held at once, live or retired (two generations) */
#define ACLINDEX_ALIASES_MAX 16384 /* aliases held at once */
#define ACLINDEX_ALIAS_LIVES 2    /* an alias's live lifecycles named (more are counted) */

struct aclindex {
	struct kvheld rows;     /* lifecycle -> struct acl_row, live or retired (kvheld.h) */
	struct strmap aliases;  /* <o>.<a> -> struct aclindex_alias */
	uint64_t alias_reads;   /* aliases whose rows were read from the bucket */
};

/* What an alias's rows say. */
struct aclindex_alias {
	size_t nlive;                            /* its live lifecycles */
	char live[ACLINDEX_ALIAS_LIVES][UID_MAX + 1]; /* the uids of the first of them */
	struct acl_row row;                      /* live[0]'s row (nlive > 0) */
	bool retired;                            /* a retired lifecycle, the last: */
	char retired_uid[UID_MAX + 1];
};

/* Start the tail of cotal_acl_<token> (kvmirror_loaded(&x->rows.tail)
 * waits until it watches); 0, or -1 with err (close it then). aclindex_open is
 * the two in one. */
int aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		   const char *token, char *err, size_t errlen);
int aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		  const char *token, char *err, size_t errlen);
void aclindex_close(struct aclindex *x);
/* The live row held for a lifecycle, or NULL (not held: aclindex_read
 * tells what the bucket says). With kvheld_lock(&x->rows); valid while it
 * is held. */
const struct acl_row *aclindex_get(struct aclindex *x, const char *lifecycle);
/*
 * The row of a lifecycle: the one held, else the bucket's last message for
 * the key, read now; without the lock. 0 with *out (ACL_LIVE,
 * ACL_RETIRED; ACL_UNKNOWN for no row, a deleted or an undecodable one):
 * free it with acl_row_free. -1 with err when the bucket cannot be read.
 */
int aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
		  size_t errlen);
/* The same for n distinct lifecycles, read at once (one round trip): 0
 * with out[0..n), or -1 with err and nothing in out. */
int aclindex_read_many(struct aclindex *x, const char *const *lifecycles, size_t n,
		       struct acl_row *out, char *err, size_t errlen);
/* What the rows of the alias <o>.<a> say, held or read now; without the
 * lock. 0 with *out (free with aclindex_alias_free), -1 with err. */
int aclindex_alias(struct aclindex *x, const char *alias, struct aclindex_alias *out, char *err,
		   size_t errlen);
void aclindex_alias_free(struct aclindex_alias *a);
/* A retired lifecycle of the alias <owner>.<actor>: 1 with its uid (the one
 * retired last), 0 when it has none, -1 with err. */
int aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
			   size_t uidlen, char *err, size_t errlen);

/* For unit tests (tests/unit/test_aclindex.c): an index with no tail, and
 * the end of a read of an alias (kept when it may be), with the lock held. */
void aclindex_init(struct aclindex *x);
void aclindex_free(struct aclindex *x);
void aclindex_alias_done(struct aclindex *x, const char *alias, const struct aclindex_alias *a);

#endif
