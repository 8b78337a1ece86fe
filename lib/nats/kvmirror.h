/*
 * An in-memory mirror of a KV bucket, kept by a watch, with the per-batch
 * barrier of ARCHITECTURE.md: before a batch is routed, read the bucket's
 * last sequence and wait until the watch has applied it, so a write
 * committed before the batch was fetched is always seen.
 *
 * The watch is lib/nats/kvwatch.h's named ordered consumer. It can go silent
 * after a broker restart (STYLE.md pitfalls): a barrier the watch does not
 * meet in time rebuilds it from scratch, which is also the periodic
 * reconciliation read; so does a watch that reports itself lost.
 *
 * The owner's apply callback runs on the mirror's thread with the mirror
 * locked; the owner reads its state under kvmirror_lock(). What it reads
 * there is always a whole state of the bucket, never part of one: a
 * rebuild's replay is kept aside until the watch has delivered all of it,
 * then reset and applied in one go under the lock. Until then the owner
 * keeps reading the state it had (a barrier passed before the rebuild is
 * met by it; a barrier asked for during it waits for the new one).
 * The first load is the exception: nothing reads the owner's state before
 * kvmirror_loaded returns (its barrier waits for that load), so its entries
 * are applied as they come, with no copy aside: a start holds the state
 * once, not twice (issue 39). Every load starts from a reset, this one at
 * its start.
 */
#ifndef COTAL_KVMIRROR_H
#define COTAL_KVMIRROR_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct kvwatch;
struct kvw_entry;

#define KVMIRROR_BUCKET_MAX 300
#define KVMIRROR_BARRIER_MS 1000   /* the watch gets this long to catch up */
#define KVMIRROR_REBUILD_MS 10000  /* a rebuilt watch gets this long to load, and
				    * longer while it keeps taking entries */
#define KVMIRROR_STAGE_MAX (256u * 1024 * 1024) /* bytes a replay may hold aside */

struct kvmirror_staged;

/* A put (e->value non-NULL) or a delete/purge (e->value NULL) of e->key;
 * the entry's strings are valid for the call only. */
typedef void (*kvmirror_apply_fn)(void *arg, const struct kvw_entry *e);
/* Forget everything: a rebuilt watch delivers the whole bucket again. */
typedef void (*kvmirror_reset_fn)(void *arg);
struct kvmirror {
	char bucket[KVMIRROR_BUCKET_MAX];
	char stream[KVMIRROR_BUCKET_MAX + 4];
	natsConnection *nc;
	char inbox_prefix[128];  /* the credential's reply subjects (REPLY_INBOX_MAX) */
	jsCtx *js;
	kvStore *kv;
	kvmirror_apply_fn apply;
	kvmirror_reset_fn reset;
	bool tail;               /* writes from the start on only (kvmirror_start_tail) */
	void *arg;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kvwatch *watcher; /* owned by the thread */
	uint64_t applied;     /* highest revision applied, or the floor of a rebuild */
	uint64_t rebuilds;    /* completed rebuilds */
	uint64_t rebuild_floor;
	bool want_rebuild;
	bool loaded;          /* the current watch delivered its initial state */
	bool ever_loaded;     /* a watch did, once: the owner's state is read since */
	_Atomic int64_t progress_ms; /* when the watch last gave an entry (mono_ms) */
	/* The replay of the watch being loaded (the watch thread's own). */
	struct kvmirror_staged *staged;
	size_t nstaged, capstaged, staged_bytes;
	bool stop;
	uint64_t start_last;  /* the bucket's last sequence when the mirror started */
	char error[256];      /* why the watch is down, for the barrier's caller */
};

/*
 * Bind the bucket, read its last sequence and start the watch
 * (kvmirror_start), then wait until the watch has applied that sequence, its
 * first load (kvmirror_loaded). A worker with several mirrors starts each
 * before it waits for any, so that they load at once (issue 39: a start
 * takes the longest load, not their sum); nothing reads the owner's state
 * between the two. 0, or -1 with err; after a failure, close the mirror.
 * kvmirror_open is the two in one.
 */
int kvmirror_start(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		   const char *bucket, kvmirror_apply_fn apply, kvmirror_reset_fn reset,
		   void *arg, char *err, size_t errlen);
/*
 * A tail of the bucket, not a mirror: no state is loaded, the owner is given
 * every write made after the start (and reset, having forgotten everything,
 * whenever the watch is rebuilt: it may have missed writes). For an owner
 * that reads the rows it needs when it meets them and keeps only those
 * (lib/wire/aclindex.h): the barrier works as for a mirror, so a row the
 * owner holds is current once it passes. kvmirror_loaded returns once the
 * tail is watching.
 */
int kvmirror_start_tail(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix,
			jsCtx *js, const char *bucket, kvmirror_apply_fn apply,
			kvmirror_reset_fn reset, void *arg, char *err, size_t errlen);
int kvmirror_loaded(struct kvmirror *m, char *err, size_t errlen);
int kvmirror_open(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		  const char *bucket, kvmirror_apply_fn apply, kvmirror_reset_fn reset, void *arg,
		  char *err, size_t errlen);
/* The barrier: 0 once every write committed before the call is applied,
 * -1 with err when the bucket cannot be read. */
int kvmirror_barrier(struct kvmirror *m, char *err, size_t errlen);
/* The barrier over several mirrors of one connection at once: their last
 * sequences are asked for together, one round trip for all. */
int kvmirror_barrier_all(struct kvmirror *const *m, int n, char *err, size_t errlen);
void kvmirror_lock(struct kvmirror *m);
void kvmirror_unlock(struct kvmirror *m);
void kvmirror_close(struct kvmirror *m);

#endif
