/*
 * Asynchronous JetStream publishes for a batch of work items (posts, entries):
 * every publish belongs to an item, and an item succeeds only when every one
 * of its publishes got its PubAck (a duplicate's counts). The fan-out acks a
 * post, and the reader an entry, only then (ARCHITECTURE.md "Data flow").
 */
#ifndef COTAL_PUBBATCH_H
#define COTAL_PUBBATCH_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define PUBBATCH_MAX_PENDING 4096 /* PubAcks outstanding at once */
#define PUBBATCH_STALL_MS 2000    /* a publish waits this long for room */
#define PUBBATCH_WAIT_MS 4000     /* a batch waits this long for its PubAcks */

struct pubslot {
	natsMsg *msg;
	int item;
};

struct pubbatch {
	jsCtx *js;                /* publishes and every other JetStream call */
	pthread_mutex_t mu;
	struct pubslot *slots;    /* open addressing, keyed by message */
	size_t nslots, used;
	bool *failed;
	int nitems, cap_items;
	uint64_t max_seq;         /* highest stream sequence a PubAck named */
	bool published;           /* nats.c's pending map exists only after one */
	bool broken;              /* a publish of this batch failed: fail the rest at once */
	pthread_cond_t answered;  /* a handler ran */
	size_t inflight;          /* published, handler not yet run */
	char error[256];          /* the first failure of the batch */
};

int pubbatch_init(struct pubbatch *b, natsConnection *nc);
void pubbatch_destroy(struct pubbatch *b);
/* Start a batch of nitems items, none failed. -1 when out of memory. */
int pubbatch_begin(struct pubbatch *b, int nitems);
/* Publish data to subj for item; msgid (may be NULL) as Nats-Msg-Id, and one
 * extra header when hname is set. A failure marks the item failed. */
void pubbatch_publish(struct pubbatch *b, int item, const char *subj, const char *data,
		      size_t len, const char *msgid, const char *hname, const char *hval);
void pubbatch_fail(struct pubbatch *b, int item, const char *why);
/* Wait for the PubAcks; those not in by then fail their items. */
void pubbatch_wait(struct pubbatch *b);
bool pubbatch_failed(struct pubbatch *b, int item);

#endif
