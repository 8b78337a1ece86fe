/*
 * The read-ACL rows of a space (cotal_acl_<s>) a worker decides on: the
 * live rows, mirrored in memory and decoded once per write (lifecycle key
 * <o>.<a>.<uid> -> struct acl_row). Shared by the fan-out (mentions), the
 * reader (every entry) and the registry (joins, inventories).
 *
 * Issue 39: a space keeps every lifecycle it ever had, and a retired one
 * leaves its row behind forever as a tombstone. The mirror keeps none of
 * them (kvmirror_keep_fn): a worker's memory and a replay's staging grow
 * with live lifecycles only. A lifecycle with no live row is read when it
 * is met, exactly, from the bucket itself (aclindex_read: a retirement,
 * no row, an undecodable one), never guessed; a retirement read is
 * remembered (retired is forever) up to ACLINDEX_TOMBS_MAX of them, then
 * they are forgotten and read again when met.
 */
#ifndef COTAL_ACLINDEX_H
#define COTAL_ACLINDEX_H

#include <stdbool.h>

#include "lib/nats/kvmirror.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"

#define ACLINDEX_TOMBS_MAX 65536  /* retirements remembered at once */
#define ACLINDEX_ALIASES_MAX 4096 /* aliases with no live row, remembered at once */

struct aclindex {
	struct kvmirror mirror;
	struct strmap rows;    /* live rows: lifecycle -> struct acl_row */
	struct strmap tombs;   /* retirements read and remembered: lifecycle -> (void *)1 */
	struct strmap aliases; /* aliases with no live row, read: <o>.<a> -> struct aclindex_alias */
	struct strmap asking;  /* lifecycles and aliases being read: -> struct aclindex_ask */
	uint64_t tomb_resets;  /* times the remembered retirements passed their bound */
	bool by_alias;         /* keep lives (the fan-out's mentions, the registry's callers) */
	struct strmap lives;   /* <o>.<a> -> struct aclindex_lives: its live lifecycles */
};

/* An alias's live lifecycles: the rows map's own keys (a space's alias has
 * one at a time; more is the manager's mistake, refused by the rails). */
struct aclindex_lives {
	size_t n, cap;
	const char **lc;
};

/* Reads of one key under way; a write of it (or of a lifecycle of the
 * alias), or a reset, while any is: none of them is remembered. */
struct aclindex_ask {
	unsigned readers;
	bool changed;
};

/* What an alias's rows said: a retired lifecycle (its uid) or none. */
struct aclindex_alias {
	bool retired;
	char uid[UID_MAX + 1];
};

/* Open the mirror of cotal_acl_<token>, with the live lifecycles of each
 * alias indexed when by_alias; 0, or -1 with err (close it then). */
int aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		  const char *token, bool by_alias, char *err, size_t errlen);
/* aclindex_open's first half (kvmirror_start): the load then runs beside
 * the worker's other mirrors'; kvmirror_loaded(&x->mirror) waits for it. */
int aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		   const char *token, bool by_alias, char *err, size_t errlen);
void aclindex_close(struct aclindex *x);
/* The live row of a lifecycle, or NULL (no row, a retired one or one that
 * does not decode: aclindex_read tells which): with the mirror locked. */
const struct acl_row *aclindex_get(struct aclindex *x, const char *lifecycle);
/* How many live lifecycles the alias <o>.<a> has, and up to max of them in
 * lcs (the index's own keys: valid while the mirror stays locked). With the
 * mirror locked, on an index opened by alias: one look-up, not a scan of
 * every row (issue 39). */
size_t aclindex_alias_lives(struct aclindex *x, const char *alias, const char **lcs,
			    size_t max);
/*
 * The row of a lifecycle the mirror holds no live row of, read exactly,
 * without the mirror locked: a remembered retirement, else the bucket's
 * last message for the key (STREAM.MSG.GET, answered by the stream's
 * leader). 0 with *out (ACL_RETIRED; ACL_UNKNOWN for no row, a deleted or
 * an undecodable one; ACL_LIVE when it became live meanwhile): free it
 * with acl_row_free. -1 with err when the bucket cannot be read now.
 */
int aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
		  size_t errlen);
/*
 * A retired lifecycle of the alias <owner>.<actor> (its rows read from the
 * bucket: a watch of <owner>.<actor>.* alone): 1 with its uid (the one
 * retired last), 0 when it has none, -1 with err.
 */
int aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
			   size_t uidlen, char *err, size_t errlen);

/* The mirror's callbacks, for unit tests (tests/unit/test_aclindex.c). */
void aclindex_init(struct aclindex *x, bool by_alias);
void aclindex_free(struct aclindex *x);
bool aclindex_keep(void *arg, const struct kvw_entry *e);
void aclindex_apply(void *arg, const struct kvw_entry *e);
void aclindex_reset(void *arg);
/* Mark a key (a lifecycle or an alias) as being read; with the mirror
 * locked. 0, or -1 when out of memory. */
int aclindex_read_begin(struct aclindex *x, const char *key);
/* End a read of key: true when what it found may be remembered (no write
 * of the key, no reset, no other read of it meanwhile). With the mirror
 * locked. */
bool aclindex_read_end(struct aclindex *x, const char *key);
/* Remember what a read of a lifecycle found (a retirement), when
 * aclindex_read_end says it may be. With the mirror locked. */
void aclindex_read_done(struct aclindex *x, const char *lifecycle, const struct acl_row *found);

#endif
