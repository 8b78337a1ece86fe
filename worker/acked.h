/*
 * What a worker acked on its pull consumer, so that a message the broker
 * hands over again after it lost the acks is acked again without its work
 * repeated. A worker acks a message only once its work is stored in a
 * target stream (the fan-out's copies in INBOX, the reader's frames in
 * DLV). A broker that is killed loses the acks of its last tenth of a
 * second; nats-server up to 2.13 writes a consumer's state file in place,
 * and one killed in the middle of that write comes back with the consumer
 * at its stream's first message. Done again, work whose first result the
 * target no longer holds is stored twice: a restarted broker's dedup knows
 * only the messages it still stores.
 *
 * The memory: the stream sequences acked (lib/seqset), raised to the
 * consumer's ack floor as the broker reports it (acks of the workers
 * before this one too), and trusted only while the target still reaches
 * the highest sequence this worker's work got there. It lives as long as
 * the worker process. Worker runtime.
 */
#ifndef COTAL_ACKED_H
#define COTAL_ACKED_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/seqset.h"

#define ACKED_FLOOR_EVERY_MS 5000 /* the consumer's ack floor, asked this often */
#define ACKED_LOG_EVERY_MS 10000

struct acked {
	jsCtx *js;
	char stream[128], consumer[64], target[128];
	struct seqset seqs;
	uint64_t target_high;   /* the target's highest sequence our work got, or its last at open */
	int64_t floor_asked_ms;
	int64_t said_ms;        /* the last line about messages handed over again */
	uint64_t unsaid;
	bool memory_short;
};

/* Once the consumer is bound: its ack floor and the target's last sequence
 * seed the memory. One never opened (zeroed) remembers nothing. */
void acked_open(struct acked *a, jsCtx *js, const char *stream, const char *consumer,
		const char *target);
void acked_close(struct acked *a);
/* Before a fetch: the consumer's ack floor, every ACKED_FLOOR_EVERY_MS. */
void acked_tick(struct acked *a);

/* A message acked (or terminated), by its stream sequence. */
void acked_put(struct acked *a, uint64_t seq);
/* The target's sequence a piece of our work got. */
void acked_stored(struct acked *a, uint64_t target_seq);
/* Was the message at seq acked before? */
bool acked_before(const struct acked *a, uint64_t seq);
/*
 * Does the target still reach the highest sequence our work got there?
 * When it does not (a store that lost what it acknowledged, or was made
 * anew), the memory is forgotten, and said so. False too when the target
 * cannot be asked.
 */
bool acked_target_intact(struct acked *a);
/* Say (rate-limited) that n messages of `what` came again, seq lo..hi. */
void acked_say(struct acked *a, const char *what, int n, uint64_t lo, uint64_t hi);

#endif
