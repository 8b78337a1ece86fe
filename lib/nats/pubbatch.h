/*
 * Asynchronous JetStream publishes for a batch of work items (posts, entries):
 * every publish belongs to an item, and an item succeeds only when every one
 * of its publishes got its PubAck (a duplicate's counts). The fan-out acks a
 * post, and the reader an entry, only then (ARCHITECTURE.md "Data flow").
 *
 * The PubAcks are collected here, on the calling thread, not by libnats's
 * asynchronous publish (issue 18): each publish carries a reply subject
 * <inbox prefix>.pa.<unique>.<batch>.<n> whose last token indexes the
 * publish, so an answer finds its item without a map, a timer or a handler
 * thread, and a late answer to an earlier batch is recognised and ignored.
 * One batch at a time, by one thread.
 */
#ifndef COTAL_PUBBATCH_H
#define COTAL_PUBBATCH_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PUBBATCH_MAX_PENDING 4096 /* PubAcks outstanding at once */
#define PUBBATCH_STALL_MS 2000    /* a publish waits this long for room */
#define PUBBATCH_WAIT_MS 4000     /* a batch waits this long for its PubAcks */
#define PUBBATCH_DRAIN_EVERY 128  /* answers read without waiting, every this many publishes */
/* The connection failed over during a batch's wait: what it published
 * before went to a server that is gone and will never be answered, so the
 * wait ends this long after the failover is seen (time for the answers of
 * what the library held back and sent on the new connection), not at
 * PUBBATCH_WAIT_MS. The items left fail and are published again. */
#define PUBBATCH_FAILOVER_GRACE_MS 500
#define PUBBATCH_SLICE_MS 100     /* the wait looks for a failover this often */

struct pubbatch {
	jsCtx *js;                /* every other JetStream call of the worker */
	natsConnection *nc;
	natsSubscription *sub;    /* <reply>> : the PubAcks, synchronous */
	char reply[200];          /* <inbox prefix>.pa.<unique>. */
	uint32_t gen;             /* the batch, in each reply subject */
	int *item_of;             /* publish n -> its item, or -1 once answered */
	size_t npub, cap_pub;     /* publishes of this batch */
	size_t inflight;          /* published, not answered */
	natsMsg **spent;          /* published or answered, destroyed together */
	size_t nspent, cap_spent;
	bool *failed;
	bool *refused;            /* failed by the broker's own refusal (a PubAck error) */
	int nitems, cap_items;
	uint64_t max_seq;         /* highest stream sequence a PubAck named */
	bool broken;              /* a publish of this batch failed: fail the rest at once */
	char error[256];          /* the first failure of the batch */
	char sub_error[96];       /* what the PubAck subscription said, this batch */
	uint64_t no_responders;   /* publishes of this batch no stream took (503) */
	uint64_t reconnects;      /* the connection's failovers when the batch began */
	char *scratch;            /* a message's header block and data (rawhdr.h) */
	size_t cap_scratch;
	char order_of[64];        /* the extra header whose order is known: */
	bool msgid_first;         /* whether libnats encodes Nats-Msg-Id before it */
};

/* Replies under inbox_prefix (the credential's own). 0, or -1. */
int pubbatch_init(struct pubbatch *b, natsConnection *nc, const char *inbox_prefix);
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
/* Failed because the broker answered with a refusal (an error PubAck),
 * not for want of an answer or a connection: the same publish would be
 * refused again. */
bool pubbatch_refused(struct pubbatch *b, int item);

#endif
