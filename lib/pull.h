/*
 * The durable pull consumers a worker drives (WIRE.md §3): bind one,
 * creating it when it does not exist, and fetch batches from it without
 * holding a lone message back for the rest of a batch.
 */
#ifndef COTAL_PULL_H
#define COTAL_PULL_H

#include <nats/nats.h>
#include <stddef.h>

#define PULL_REQUEST_MAX 256 /* messages asked for in one pull request */
#define PULL_BATCH_MAX 1000  /* one batch, in several requests: max ack pending */
#define PULL_WAIT_MS 1000    /* a fetch that finds nothing waits this long */

/*
 * Bind durable `cfg->Durable` on stream, creating it with cfg when it does
 * not exist. An existing consumer whose filter, ack policy or deliver
 * policy differ from cfg is refused with the difference named. A create the
 * credential may not make is a permission denial, never "already exists".
 * 0, or -1 with err.
 */
int pull_bind(jsCtx *js, const char *stream, jsConsumerConfig *cfg, natsSubscription **sub,
	      char *err, size_t errlen);
/*
 * Up to max messages: what is waiting, at once; when nothing is, the first
 * to arrive within wait_ms and whatever came with it. More than
 * PULL_REQUEST_MAX are gathered by further requests that do not wait. NATS_OK with
 * list->Count possibly 0 on a quiet consumer; another status on failure.
 */
natsStatus pull_fetch(natsSubscription *sub, int max, int wait_ms, natsMsgList *list);

#endif
