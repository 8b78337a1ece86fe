/*
 * The read-ACL rows of a space (cotal_acl_<s>) a worker decides on, held
 * as it meets them. Shared by the fan-out (mentions), the reader (every
 * entry) and the registry (callers, joins, inventories).
 *
 * Issue 39: a space keeps every lifecycle it ever had, and a retired one
 * leaves its row behind forever as a tombstone. A mirror of the bucket paid
 * for all of them at every start (each worker was streamed the whole
 * bucket). The index loads nothing: a row is read exactly from the bucket
 * the first time it is needed (STREAM.MSG.GET, the stream leader's answer),
 * and kept, live rows and retirements alike, up to a bound; a tail of the
 * bucket (kvmirror_start_tail: the writes made after the start) drops what
 * a write makes stale. So a worker's memory and start grow with the rows it
 * meets, never with the space's history.
 *
 * Exact: a row held was read whole, and every write of its key after that
 * read (by the stream's sequence: a write the tail brings that the read
 * already saw changes nothing) drops it; the tail's barrier makes what is
 * held current, as a mirror's made the mirror. A read that a write of its
 * key (or a rebuilt tail) raced is used for the decision it was made for
 * and not kept. An alias's rows (<o>.<a>.*, read by a watch of them alone)
 * are held the same way: what they said (its live lifecycles, the row of
 * the first, its last retirement), until a write of any of them.
 */
#ifndef COTAL_ACLINDEX_H
#define COTAL_ACLINDEX_H

#include <stdbool.h>

#include "lib/nats/kvmirror.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"

#define ACLINDEX_ROWS_MAX 262144  /* live rows held at once (two generations of half) */
#define ACLINDEX_TOMBS_MAX 65536  /* retirements held at once */
#define ACLINDEX_ALIASES_MAX 16384 /* aliases held at once */
#define ACLINDEX_ALIAS_LIVES 2    /* an alias's live lifecycles named (more are counted) */
#define ACLINDEX_READ_MS 5000     /* a batch of reads, or an alias's rows, all in within this */

struct aclindex {
	struct kvmirror mirror; /* the tail of cotal_acl_<s> (kvmirror_start_tail) */
	struct strmap rows;     /* live rows held: lifecycle -> struct aclindex_row */
	struct strmap old;      /* the older generation: used rows move back to rows */
	struct strmap tombs;    /* retirements read and held: lifecycle -> (void *)1 */
	struct strmap aliases;  /* <o>.<a> -> struct aclindex_alias */
	struct strmap asking;   /* lifecycles and aliases being read: -> struct aclindex_ask */
	uint64_t tomb_resets;   /* times the held retirements passed their bound */
	uint64_t row_turns;     /* times the older generation of rows was dropped */
	uint64_t reads;         /* rows read from the bucket */
	uint64_t alias_reads;   /* aliases whose rows were read from the bucket */
};

/* A live row held, with the stream sequence it was written at. */
struct aclindex_row {
	struct acl_row row;
	uint64_t rev;
};

/* Reads of one key under way; a write of it (or of a lifecycle of the
 * alias), or a reset, while any is: none of them is kept. */
struct aclindex_ask {
	unsigned readers;
	bool changed;
};

/* What an alias's rows say. */
struct aclindex_alias {
	size_t nlive;                            /* its live lifecycles */
	char live[ACLINDEX_ALIAS_LIVES][UID_MAX + 1]; /* the uids of the first of them */
	struct acl_row row;                      /* live[0]'s row (nlive > 0) */
	bool retired;                            /* a retired lifecycle, the last: */
	char retired_uid[UID_MAX + 1];
};

/* Start the tail of cotal_acl_<token> (kvmirror_loaded(&x->mirror) waits
 * until it watches); 0, or -1 with err (close it then). aclindex_open is
 * the two in one. */
int aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		   const char *token, char *err, size_t errlen);
int aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		  const char *token, char *err, size_t errlen);
void aclindex_close(struct aclindex *x);
/* The live row held for a lifecycle, or NULL (not held: aclindex_read
 * tells what the bucket says). With the mirror locked; valid while it is. */
const struct acl_row *aclindex_get(struct aclindex *x, const char *lifecycle);
/*
 * The row of a lifecycle: a retirement held, else the bucket's last message
 * for the key, read now; without the mirror locked. 0 with *out (ACL_LIVE,
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
 * mirror locked. 0 with *out (free with aclindex_alias_free), -1 with err. */
int aclindex_alias(struct aclindex *x, const char *alias, struct aclindex_alias *out, char *err,
		   size_t errlen);
void aclindex_alias_free(struct aclindex_alias *a);
/* A retired lifecycle of the alias <owner>.<actor>: 1 with its uid (the one
 * retired last), 0 when it has none, -1 with err. */
int aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
			   size_t uidlen, char *err, size_t errlen);

/* The tail's callbacks and the index's own steps, for unit tests
 * (tests/unit/test_aclindex.c); with the mirror locked where they run. */
void aclindex_init(struct aclindex *x);
void aclindex_free(struct aclindex *x);
void aclindex_apply(void *arg, const struct kvw_entry *e);
void aclindex_reset(void *arg);
/* Mark a key (a lifecycle or an alias) as being read. 0, or -1 when out
 * of memory. */
int aclindex_read_begin(struct aclindex *x, const char *key);
/* End a read of key: true when what it found may be kept (no write of the
 * key, no reset, no other read of it meanwhile). */
bool aclindex_read_end(struct aclindex *x, const char *key);
/* End a read of a lifecycle and keep what it found (a live row written at
 * rev, a retirement) when aclindex_read_end says it may. */
void aclindex_read_done(struct aclindex *x, const char *lifecycle, const struct acl_row *found,
			uint64_t rev);
/* End a read of an alias and keep what it found when it may. */
void aclindex_alias_done(struct aclindex *x, const char *alias, const struct aclindex_alias *a);

#endif
