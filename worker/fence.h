/*
 * The fence of a worker (ARCHITECTURE.md "Fence"): every effect a worker
 * makes (publish, ack, reply, KV write) first asks whether the daemon still
 * serves the shard. A unit of work takes a ticket when it is dispatched; it
 * may act only while the fence is open and its ticket is of the current
 * epoch, so a unit dispatched before a QUIESCE never acks or answers after
 * it, even once the fence has reopened.
 *
 * Thread-safe: nats.c calls back on its own threads.
 */
#ifndef COTAL_FENCE_H
#define COTAL_FENCE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fence {
	pthread_mutex_t mu;
	pthread_cond_t drained;
	uint64_t epoch;     /* bumped by every quiesce */
	bool quiesced;
	unsigned inflight;  /* effects begun and not yet done */
};

void fence_init(struct fence *f);
void fence_destroy(struct fence *f);

/* The ticket of a unit of work dispatched now. */
uint64_t fence_ticket(struct fence *f);

/*
 * May the unit holding ticket make an effect now? On true the effect is
 * counted in flight and the caller must call fence_done() once the effect
 * is made (or failed). On false the unit must drop its work without acking
 * or answering.
 */
bool fence_begin(struct fence *f, uint64_t ticket);
void fence_done(struct fence *f);

/* QUIESCE: close the fence and start a new epoch. */
void fence_quiesce(struct fence *f);
/* Wait up to timeout_ms for the effects in flight to finish; true when
 * none is left (then QUIESCED may be reported). */
bool fence_wait_drained(struct fence *f, int timeout_ms);
/* RESUME: open the fence again (old tickets stay void). */
void fence_resume(struct fence *f);
bool fence_is_quiesced(struct fence *f);

#endif
