/*
 * The rows of a KV bucket a worker met, held exactly, instead of a mirror of
 * the whole bucket (issue 39: a space's history must not cost every worker
 * memory and start-up). Nothing is loaded: a key is read from the bucket
 * the first time it is needed (STREAM.MSG.GET, the stream leader's answer,
 * many keys at once: lib/nats/msgget.h), and what it decodes to is held up
 * to a bound, in two generations (a row used again moves to the newer; the
 * older is dropped when the newer holds half the bound at an insert, so the
 * two may pass the bound by the rows one lock's holder used meanwhile).
 *
 * Exact: a tail of the bucket (kvmirror_start_tail: every write after the
 * start) drops a held row at a write after the one it was read at, by the
 * stream's sequence (a write the read already saw, brought late by the tail,
 * changes nothing); a rebuilt tail may have missed writes, and everything
 * is forgotten. The tail's barrier (kvmirror_barrier on h->tail) makes what
 * is held current as a mirror's made the mirror. A read that a write of its
 * key, a reset, or another read of the key raced is used for the decision it
 * was made for and not held.
 */
#ifndef COTAL_KVHELD_H
#define COTAL_KVHELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/nats/kvmirror.h"
#include "lib/strmap.h"

#define KVHELD_READ_MS 5000 /* a batch of reads is all in within this */

/* What a row of key says, decoded (value NULL: none): the owner's object,
 * or NULL when nothing of it is held (no row, one that does not decode). */
typedef void *(*kvheld_decode_fn)(const char *key, const char *value, size_t len);
typedef void (*kvheld_free_fn)(void *obj);
/* Every write the tail brings, and every reset, with the lock held: for
 * what the owner holds of its own beside the rows (may be NULL). */
typedef void (*kvheld_write_fn)(void *arg, const struct kvw_entry *e);
typedef void (*kvheld_reset_fn)(void *arg);

struct kvheld {
	struct kvmirror tail;
	struct strmap cur, old; /* key -> struct kvheld_obj: the newer, the older generation */
	struct strmap asking;   /* keys being read -> struct kvheld_ask */
	size_t max;             /* rows held at once */
	kvheld_decode_fn decode;
	kvheld_free_fn free_obj;
	kvheld_write_fn on_write;
	kvheld_reset_fn on_reset;
	void *arg;
	struct strmap loading;  /* patterns being loaded (kvheld_load) -> struct kvheld_ask */
	uint64_t reads;         /* keys read from the bucket */
	uint64_t loads;         /* patterns loaded from the bucket */
	uint64_t turns;         /* times the older generation was dropped */
};

/* Reads of one key under way; a write of it, or a reset, while any is:
 * none of them is held. The owner marks its own keys the same way. */
struct kvheld_ask {
	unsigned readers;
	bool changed;
};

/* Start the tail of bucket (kvmirror_loaded(&h->tail) waits until it
 * watches); 0, or -1 with err (close it then). */
int kvheld_start(struct kvheld *h, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		 const char *bucket, size_t max, kvheld_decode_fn decode, kvheld_free_fn free_obj,
		 kvheld_write_fn on_write, kvheld_reset_fn on_reset, void *arg, char *err,
		 size_t errlen);
void kvheld_close(struct kvheld *h);
void kvheld_lock(struct kvheld *h);
void kvheld_unlock(struct kvheld *h);
/* The object held for key, or NULL (not held: read it). Locked; valid
 * while the lock is held (a row used again moves generation, never goes). */
void *kvheld_get(struct kvheld *h, const char *key);
/* Read n distinct keys at once, without the lock: out[i] what the bucket
 * says of keys[i] now, decoded (the caller's: free with free_obj; NULL:
 * nothing), and held when it may be. 0, or -1 with err and nothing in out. */
int kvheld_read_many(struct kvheld *h, const char *const *keys, size_t n, void **out, char *err,
		     size_t errlen);

/*
 * Read every row whose key matches pattern (a watch of them alone: one
 * consumer for what would be as many reads as rows, for the keys of one
 * membership channel and owner, "<channel>/<owner>.*.*"), without the lock:
 * out[i] what the bucket says of want[i] (each matching pattern), decoded
 * (the caller's). Every row the watch gives is held when it may be (no write
 * of a key matching pattern, no reset, meanwhile). 0; 1 when the rows
 * matching are more than a quarter of what it may hold, the pattern is too
 * long for a watch, or the leader holds a row matching newer than the
 * watch gave (kvheld_newer): nothing used, read the keys wanted instead;
 * -1 with err. Nothing in out but with 0.
 */
int kvheld_load(struct kvheld *h, const char *pattern, const char *const *want, size_t n,
		void **out, char *err, size_t errlen);

/*
 * Whether the bucket of tail (its stream's leader: STREAM.MSG.GET with
 * next_by_subj) holds a row matching pattern written after sequence after:
 * 1, 0 when none, -1 with err. What a watch of the rows gave is the bucket as
 * of the replica its consumer sits on, which may be behind the leader; with
 * nothing newer, it is the bucket as it is.
 */
int kvheld_newer(struct kvmirror *tail, const char *pattern, uint64_t after, char *err,
		 size_t errlen);

/* The steps, for the owner's own reads and for unit tests; with the lock
 * held. kvheld_init sets up a kvheld with no tail (the unit tests'). */
void kvheld_init(struct kvheld *h, size_t max, kvheld_decode_fn decode, kvheld_free_fn free_obj,
		 kvheld_write_fn on_write, kvheld_reset_fn on_reset, void *arg);
void kvheld_free(struct kvheld *h);
void kvheld_apply(void *arg, const struct kvw_entry *e);
void kvheld_reset(void *arg);
/* Mark key as being read: 0, or -1 when out of memory. */
int kvheld_read_begin(struct kvheld *h, const char *key);
/* A write of key came: a read of it under way is not to be held. */
void kvheld_changed(struct kvheld *h, const char *key);
/* End a read of key: true when what it found may be held (no write of it,
 * no reset, no other read of it meanwhile). */
bool kvheld_read_end(struct kvheld *h, const char *key);
/* End a read of key that found value (NULL: none) written at rev, and hold
 * what it decodes to when kvheld_read_end says it may. */
void kvheld_read_done(struct kvheld *h, const char *key, const char *value, size_t len,
		      uint64_t rev);

#endif
