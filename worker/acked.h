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
 * before this one too, and sequences never delivered: a consumer's start,
 * messages rolled off), and the latest time a message acked was stored. It
 * is trusted only while the target still reaches the highest sequence
 * work got there: checked at open, after every reconnect before anything
 * is done, and when the floor is asked. A message at a remembered sequence
 * stored later than anything acked is another message (a source that lost
 * its end gives its sequences out again): the memory is forgotten. What is
 * forgotten is done again; nothing is skipped that was not done.
 *
 * Asks the broker the consumer's info and the target's stream info,
 * nothing else. Lives as long as the worker process. Worker runtime.
 */
#ifndef COTAL_ACKED_H
#define COTAL_ACKED_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/names.h"
#include "lib/seqset.h"

#define ACKED_FLOOR_EVERY_MS 5000 /* the consumer's ack floor, asked this often */
#define ACKED_LOG_EVERY_MS 10000
#define ACKED_STREAM_MAX (SPACE_TOKEN_MAX + 16)

struct acked {
	natsConnection *nc;
	jsCtx *js;
	char stream[ACKED_STREAM_MAX], consumer[64], target[ACKED_STREAM_MAX];
	struct seqset seqs;
	int64_t ts_high;        /* the latest store time (ns) of a message acked */
	uint64_t target_high;   /* the target's highest sequence work got, or its last at a check */
	uint64_t reconnects;    /* the connection's, when the target was last checked */
	bool verified;          /* the target checked since the last reconnect */
	/* Batches whose work is published and whose target sequences are not
	 * counted yet (acked_publishing .. acked_stored): the target is not
	 * checked meanwhile, it could not tell their loss. */
	int unstored;
	uint64_t epoch;         /* bumped by a new connection and by forgetting */
	int64_t floor_asked_ms;
	int64_t said_ms;        /* the last line about messages handed over again */
	uint64_t unsaid;
	bool memory_short;
};

/* Once the consumer is bound: its ack floor and the target's last sequence
 * seed the memory. One never opened (zeroed) remembers nothing. */
void acked_open(struct acked *a, natsConnection *nc, jsCtx *js, const char *stream,
		const char *consumer, const char *target);
void acked_close(struct acked *a);
/* Before a fetch: after a reconnect, the target checked; every
 * ACKED_FLOOR_EVERY_MS, the consumer's ack floor. */
void acked_tick(struct acked *a);
/* At a batch's start, before any of its work: the target checked when the
 * connection was lost since (false: nothing is trusted for this batch). */
bool acked_check(struct acked *a);
/* Still on the connection acked_check saw (false: what it marked is not
 * acked again, it is handed back). */
bool acked_unchanged(const struct acked *a);
/* For a worker that acks a batch after it marked it: the memory as it is
 * now, and whether it is still the one that marked (trusted, on the same
 * connection, nothing forgotten since). */
uint64_t acked_epoch(const struct acked *a);
bool acked_still(const struct acked *a, uint64_t epoch);

/* A message acked (or terminated): its stream sequence and store time. */
void acked_put(struct acked *a, uint64_t seq, int64_t ts_ns);
/* A batch's work is being published to the target: until its acked_stored,
 * no check of the target is trusted (a worker that overlaps batches). */
void acked_publishing(struct acked *a);
/* The target's sequence a piece of our work got (the highest of a batch's). */
void acked_stored(struct acked *a, uint64_t target_seq);
/* Would acked_tick check the target now (after a reconnect, or the floor
 * due)? A worker holding a published batch finishes it first. */
bool acked_due(const struct acked *a);
/* A batch's messages acked before: how many, their lowest and highest
 * sequence. */
struct acked_batch {
	int n;
	uint64_t lo, hi;
};
/*
 * Was the batch's message at seq, stored at ts_ns, acked before? Counted in
 * b. A remembered seq stored later than anything acked forgets the memory
 * (and says so).
 */
bool acked_again(struct acked *a, struct acked_batch *b, uint64_t seq, int64_t ts_ns);
/* Say (rate-limited) that the batch's messages of `what` came again. */
void acked_say(struct acked *a, const char *what, const struct acked_batch *b);

#endif
