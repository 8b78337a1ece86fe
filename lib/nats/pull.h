/*
 * The durable pull consumers a worker drives (WIRE.md §3): bind one,
 * creating it when it does not exist, fetch batches from it without holding
 * a lone message back for the rest of a batch, and ack what it fetched.
 *
 * The pull requests are made here rather than by libnats's fetch (whose
 * no-wait requests have no expiry and leave answers to overrun a later
 * call's array in libnats 3.4.1, STYLE.md pitfalls). One request is open at
 * a time, with an expiry; what it delivers is queued on our own reply
 * subscription. A batch ends when it is full or when its last message says
 * the consumer has nothing more pending (the last token of its ack reply
 * subject), so a lone post is handed on at once, and while a batch is
 * handled the next request is already out when more is pending (issue 18:
 * no round trip of idle time per batch).
 */
#ifndef COTAL_PULL_H
#define COTAL_PULL_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/nats/jsack.h"

#define PULL_REQUEST_MAX 256 /* messages asked for in one pull request */
#define PULL_BATCH_MAX 1000  /* one batch, in several requests: max ack pending */
#define PULL_WAIT_MS 1000    /* a fetch that finds nothing waits this long */
/* A pull loop's fetch returns this often while its request (PULL_WAIT_MS)
 * stays open, so that a stop never waits out a quiet consumer's request. */
#define PULL_SLICE_MS 100
#define PULL_ANSWER_MS 5000  /* a flush of the recovery's NAKs */
/* A request's end (its 408) this late after its expiry: the consumer's
 * leader is gone (a node lost), and the consumer is asked what it still
 * counts as delivered (pull_recover). As long as before issue 18, when a
 * waiting request had expires + 1 s. */
#define PULL_LATE_MS 1000
#define PULL_BEHIND_MS 200   /* a message said more is pending: the next one within this */
#define PULL_SETUP_RETRY_MS 2000
#define PULL_ERROR_NAP_MS 200

#define PULL_RECOVER_MAX 2000 /* in-flight deliveries a recovery asks back */
#define PULL_INFO_MS 1000      /* the consumer's state, for a recovery */
#define PULL_IDLE_CHECK_MS 3000 /* an idle consumer's pending is checked this often */

struct puller {
	natsConnection *nc;
	natsSubscription *sub;   /* our own reply subject, synchronous */
	char next[512];          /* $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> */
	char info[512];          /* $JS.API.CONSUMER.INFO.<stream>.<consumer> */
	char ack[512];           /* $JS.ACK.<stream>.<consumer> */
	char reply[128];         /* <inbox prefix>.pull.<unique>; requests <reply>.<n> */
	uint64_t req;            /* the open request's number */
	int credit;              /* messages it may still deliver, 0: none open */
	int64_t req_until;       /* when it expires (monotonic ms) */
	uint64_t behind;         /* pending after the last message taken */
	int expires_ms;          /* a request's expiry when longer than a fetch's wait */
	/* When the last delay asked by a NAK runs out (monotonic ms): until
	 * then the consumer counts that message as delivered to us, though
	 * nothing is lost (pull_loop_run's idle check waits for it). */
	int64_t delayed_until;
	/* The delivery metadata of the last fetch's messages, read once from
	 * their ack reply subjects as they were taken (pull_meta). */
	struct js_ack_meta meta[PULL_BATCH_MAX];
	bool meta_ok[PULL_BATCH_MAX];
};


/*
 * Bind durable `cfg->Durable` on stream, creating it with cfg when it does
 * not exist. An existing consumer whose filter, ack policy or deliver
 * policy differ from cfg is refused with the difference named. A create the
 * credential may not make is a permission denial, never "already exists".
 * Replies come to <inbox_prefix>.pull.<unique>. 0, or -1 with err.
 */
int pull_bind(jsCtx *js, natsConnection *nc, const char *inbox_prefix, const char *stream,
	      jsConsumerConfig *cfg, struct puller *p, char *err, size_t errlen);
/* Drive an existing consumer (made by the caller): no create, no check. */
int pull_attach(natsConnection *nc, const char *inbox_prefix, const char *stream,
		const char *consumer, struct puller *p, char *err, size_t errlen);
void pull_close(struct puller *p);
/* The delivery metadata of message i of the last fetch's list (its
 * sequences, delivery count, store time, what is still pending), or NULL
 * when its reply subject carries none. */
const struct js_ack_meta *pull_meta(const struct puller *p, int i);
/*
 * Up to max messages: what is waiting, at once; when nothing is, the first
 * to arrive within wait_ms, and then what is pending behind it. NATS_OK with
 * list->Count possibly 0 on a quiet consumer; NATS_TIMEOUT when the broker
 * answered neither with a message nor with the request's end; another
 * status on failure. The request it makes expires after wait_ms, or after
 * p->expires_ms when that is longer: then it stays open past the call.
 */
natsStatus pull_fetch(struct puller *p, int max, int wait_ms, natsMsgList *list);

/*
 * Issue 15: deliveries lost in flight. When a broker node dies, the
 * messages it was carrying to us (a pull's answer) never arrive, yet the
 * consumer counts them delivered: they would come back only after the ack
 * wait (60 s, WIRE.md §3), and the reader's ack floor, which paces the
 * fan-out, would hold copying up that long. Called between batches, after
 * its connection came back, a fetch failed, or every PULL_IDLE_CHECK_MS
 * while it is idle: every message still pending for us is taken as lost,
 * so each one is NAKed (redelivered at once), and the open request is
 * forgotten (a lost node took it along). A message already on its way to
 * us may so come twice: a duplicate, never a loss. The pending ones are those
 * between the ack floor and the last delivered (at most PULL_RECOVER_MAX,
 * the ones holding the floor first); a NAK of one already acked is ignored
 * by the broker. The NAKs carry the ack reply subject's first form
 * ($JS.ACK.<stream>.<consumer>.<n>.<stream seq>.<consumer seq>.<ts>.<left>),
 * which every broker from 2.9 to 2.14 reads. The count of NAKs sent, 0
 * when nothing was pending, -1 when the consumer did not answer.
 */
int pull_recover(struct puller *p);

/*
 * A stop's hand-back (issue 42): wait, at most PULL_WAIT_MS plus
 * PULL_HANDBACK_MARGIN_MS, until the open request (if any) has expired at
 * the broker, so that nothing more can be delivered to us, then NAK every
 * message still pending for us (pull_recover): the next consumer of the
 * durable gets it at once instead of after the ack wait. The count of NAKs,
 * as pull_recover.
 */
#define PULL_HANDBACK_MARGIN_MS 200
int pull_hand_back(struct puller *p);

/* Acks of a fetched message (explicit ack policy). */
void pull_ack(struct puller *p, natsMsg *m);
void pull_nak(struct puller *p, natsMsg *m, int delay_ms);
void pull_term(struct puller *p, natsMsg *m);

#endif

