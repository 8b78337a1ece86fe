/*
 * Reading a channel's posts out of CHAT_<s> for the join's catch-up and for
 * readHistory: a consumer that lives for one scan (WIRE.md §3 `cu_…`: ack
 * none, memory, inactive 30 s), filtered to P.chat.*.*.<channel>, made at
 * a start sequence and deleted before and after, driven by our own pull
 * requests (lib/nats/pull.c).
 */
#include "worker-registry/registry_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/jsack.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/pull.h"
#include "worker/worker.h"

#define SCAN_INACTIVE_S 30
#define SCAN_WAIT_MS 200   /* a pull that finds nothing waits this long */

uint64_t
chat_seq(natsMsg *m)
{
	struct js_ack_meta md;

	return js_ack_meta(natsMsg_GetReply(m), &md) ? md.sseq : 0;
}

static void
consumer_delete(const char *name)
{
	jsErrCode jerr = 0;

	js_DeleteConsumer(G.js, G.chat, name, NULL, &jerr);
}

/* Make the consumer; its NumPending into *pending. */
static int
consumer_make(const char *name, const char *channel, uint64_t start, uint64_t *pending,
	      char *err, size_t errlen)
{
	char filter[REG_PREFIX_MAX + CHANNEL_MAX + 16], why[512];
	jsConsumerInfo *ci = NULL;
	jsConsumerConfig cc;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(filter, sizeof(filter), "%s.chat.*.*.%s", G.prefix, channel);
	consumer_delete(name); /* a predecessor's, left by a crash */
	jsConsumerConfig_Init(&cc);
	cc.Name = name;
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckNone;
	cc.DeliverPolicy = start > 1 ? js_DeliverByStartSequence : js_DeliverAll;
	cc.OptStartSeq = start > 1 ? start : 0;
	cc.MemoryStorage = true;
	cc.InactiveThreshold = (int64_t)SCAN_INACTIVE_S * 1000000000;
	s = js_AddConsumer(&ci, G.js, G.chat, &cc, NULL, &jerr);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "create consumer %s on %s: %s (JetStream error %d)", name,
		    G.chat, why, (int)jerr);
		return -1;
	}
	*pending = ci->NumPending;
	jsConsumerInfo_Destroy(ci);
	return 0;
}

int
chat_count(const char *name, const char *channel, uint64_t start, uint64_t *count, char *err,
	   size_t errlen)
{
	int rc = consumer_make(name, channel, start, count, err, errlen);

	consumer_delete(name);
	return rc;
}

int
chat_scan(const char *name, const char *channel, uint64_t start, uint64_t stop,
	  chat_batch_fn fn, void *arg, uint64_t *pending, char *err, size_t errlen)
{
	struct puller p = { 0 };
	uint64_t left;
	int rc = -1;

	if (consumer_make(name, channel, start, pending, err, errlen) != 0)
		return -1;
	if (pull_attach(W.nc, W.cfg.inbox_prefix, G.chat, name, &p, err, errlen) != 0)
		goto out;
	/* What was there when the consumer was made: later posts are the
	 * fan-out's (catch-up) or the next page's (history). */
	for (left = *pending; left > 0;) {
		natsMsgList list = { 0 };
		int n = 0, want = left < CHAT_SCAN_BATCH ? (int)left : CHAT_SCAN_BATCH;
		natsStatus s = pull_fetch(&p, want, SCAN_WAIT_MS, &list);

		if (s != NATS_OK) {
			char why[512];
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "read %s through %s: %s", G.chat, name, why);
			natsMsgList_Destroy(&list);
			goto out;
		}
		if (list.Count == 0) {
			natsMsgList_Destroy(&list);
			break; /* evicted meanwhile: fewer than counted */
		}
		while (n < list.Count && (stop == 0 || chat_seq(list.Msgs[n]) <= stop))
			n++;
		int r = n > 0 ? fn(arg, list.Msgs, n) : 0;
		bool done = n < list.Count;
		left = (uint64_t)list.Count > left ? 0 : left - (uint64_t)list.Count;
		natsMsgList_Destroy(&list);
		if (r != 0) {
			rc = r;
			goto out;
		}
		if (done || !worker_serving())
			break;
	}
	rc = 0;
out:
	pull_close(&p);
	consumer_delete(name);
	return rc;
}
