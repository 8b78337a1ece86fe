/*
 * What a worker measures now, beside its counters (issue 29): its gauges
 * and its latency histogram, sent with every STATUS (worker.c). The lag of
 * a pull consumer comes from what the consumer reports with each message
 * it delivers (its metadata, read once by the pull: when the message was
 * stored, how many are still to come); nothing is asked of the broker for
 * it.
 */
#include "worker/worker.h"

#include "lib/clock.h"
#include "lib/nats/pull.h"

/* The consumer's word at the last batch: messages still to come. */
static _Atomic uint64_t still_to_come;

void
worker_gauge(int i, uint64_t v)
{
	if (i >= 0 && i < IPC_GAUGES)
		atomic_store(&W.gauges[i], v);
}

void
worker_latency_ms(int64_t ms)
{
	int b = 0;

	if (ms < 0)
		ms = 0;
	while (b < IPC_LATENCY_BUCKETS && (uint64_t)ms > ipc_latency_bounds_ms[b])
		b++;
	atomic_fetch_add(&W.latency[b], 1);
	atomic_fetch_add(&W.latency_sum_us, (uint64_t)ms * 1000);
}

void
worker_batch_begin(const struct puller *p, natsMsgList *list)
{
	int64_t oldest_ns = 0;
	uint64_t after = 0;

	for (int i = 0; i < list->Count; i++) {
		const struct js_ack_meta *md = pull_meta(p, i);
		if (md == NULL)
			continue;
		if (oldest_ns == 0 || md->ts_ns < oldest_ns)
			oldest_ns = md->ts_ns;
		after = md->pending; /* the last message's word is the freshest */
	}
	atomic_store(&still_to_come, after);
	worker_gauge(WORKER_G_PENDING, after + (uint64_t)list->Count);
	worker_gauge(WORKER_G_OLDEST_AT, oldest_ns > 0 ? (uint64_t)(oldest_ns / 1000000) : 0);
}

void
worker_batch_done(void)
{
	worker_gauge(WORKER_G_OLDEST_AT, 0);
	worker_gauge(WORKER_G_PENDING, atomic_load(&still_to_come));
}
