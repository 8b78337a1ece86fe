/* Batched asynchronous publishes (see pubbatch.h). */
#include "lib/pubbatch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/natsconn.h"

static size_t
slot_of(const struct pubbatch *b, const natsMsg *m)
{
	uintptr_t h = (uintptr_t)m;

	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ULL;
	return (size_t)(h >> 7) & (b->nslots - 1);
}

static void
slot_put(struct pubbatch *b, natsMsg *m, int item)
{
	size_t i = slot_of(b, m);

	while (b->slots[i].msg != NULL)
		i = (i + 1) & (b->nslots - 1);
	b->slots[i].msg = m;
	b->slots[i].item = item;
	b->used++;
}

/*
 * The item of a message in flight, and the slot retired: once answered, the
 * message is freed and its address may come back for another item.
 */
static int
slot_take(struct pubbatch *b, const natsMsg *m)
{
	size_t i;
	int item;

	if (b->nslots == 0)
		return -1;
	for (i = slot_of(b, m); b->slots[i].msg != NULL; i = (i + 1) & (b->nslots - 1))
		if (b->slots[i].msg == m && b->slots[i].item >= 0) {
			item = b->slots[i].item;
			b->slots[i].item = -1;
			return item;
		}
	return -1;
}

/* Keep the table at most half full. */
static int
slot_room(struct pubbatch *b)
{
	struct pubslot *old = b->slots;
	size_t oldn = b->nslots, n;

	if (b->nslots != 0 && (b->used + 1) * 2 <= b->nslots)
		return 0;
	n = b->nslots ? b->nslots * 2 : 1024;
	if ((b->slots = calloc(n, sizeof(*b->slots))) == NULL) {
		b->slots = old;
		return -1;
	}
	b->nslots = n;
	b->used = 0;
	for (size_t i = 0; i < oldn; i++)
		if (old[i].msg != NULL)
			slot_put(b, old[i].msg, old[i].item);
	free(old);
	return 0;
}

static void
mark_failed(struct pubbatch *b, int item, const char *why)
{
	if (item < 0 || item >= b->nitems)
		return;
	b->failed[item] = true;
	if (b->error[0] == '\0') {
		/* Bounded copy: a long subject cuts the text, never memory. */
		size_t n = strnlen(why, sizeof(b->error) - 1);
		memcpy(b->error, why, n);
		b->error[n] = '\0';
	}
}

static void
on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *arg)
{
	struct pubbatch *b = arg;
	char why[300];

	(void)js;
	pthread_mutex_lock(&b->mu);
	int item = slot_take(b, msg);
	if (pa != NULL && pa->Sequence > b->max_seq)
		b->max_seq = pa->Sequence;
	if (pa == NULL) {
		snprintf(why, sizeof(why), "publish to %s: %s", natsMsg_GetSubject(msg),
		    pae && pae->ErrText ? pae->ErrText :
		    natsStatus_GetText(pae ? pae->Err : NATS_ERR));
		mark_failed(b, item, why);
	}
	if (item >= 0 && b->inflight > 0 && --b->inflight == 0)
		pthread_cond_broadcast(&b->answered);
	pthread_mutex_unlock(&b->mu);
	natsMsg_Destroy(msg);
}

int
pubbatch_init(struct pubbatch *b, natsConnection *nc)
{
	jsOptions o;

	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->answered, NULL);
	jsOptions_Init(&o);
	o.PublishAsync.MaxPending = PUBBATCH_MAX_PENDING;
	o.PublishAsync.StallWait = PUBBATCH_STALL_MS;
	o.PublishAsync.AckHandler = on_puback;
	o.PublishAsync.AckHandlerClosure = b;
	return natsConnection_JetStream(&b->js, nc, &o) == NATS_OK ? 0 : -1;
}

void
pubbatch_destroy(struct pubbatch *b)
{
	if (b->js != NULL) {
		natsMsgList pending = { 0 };
		/* libnats 3.4.1 dereferences its pending map unchecked: ask
		 * only once an asynchronous publish has made it. */
		if (b->published && js_PublishAsyncGetPendingList(&pending, b->js) == NATS_OK)
			natsMsgList_Destroy(&pending);
		jsCtx_Destroy(b->js);
	}
	free(b->slots);
	free(b->failed);
	pthread_cond_destroy(&b->answered);
	pthread_mutex_destroy(&b->mu);
	memset(b, 0, sizeof(*b));
}

int
pubbatch_begin(struct pubbatch *b, int nitems)
{
	pthread_mutex_lock(&b->mu);
	if (nitems > b->cap_items) {
		bool *f = realloc(b->failed, (size_t)nitems * sizeof(bool));
		if (f == NULL) {
			pthread_mutex_unlock(&b->mu);
			return -1;
		}
		b->failed = f;
		b->cap_items = nitems;
	}
	memset(b->failed, 0, (size_t)nitems * sizeof(bool));
	b->nitems = nitems;
	if (b->slots != NULL)
		memset(b->slots, 0, b->nslots * sizeof(*b->slots));
	b->used = 0;
	b->inflight = 0;
	b->broken = false;
	b->error[0] = '\0';
	b->max_seq = 0;
	pthread_mutex_unlock(&b->mu);
	return 0;
}

void
pubbatch_fail(struct pubbatch *b, int item, const char *why)
{
	pthread_mutex_lock(&b->mu);
	mark_failed(b, item, why);
	pthread_mutex_unlock(&b->mu);
}

void
pubbatch_publish(struct pubbatch *b, int item, const char *subj, const char *data, size_t len,
		 const char *msgid, const char *hname, const char *hval)
{
	natsMsg *m = NULL;
	jsPubOptions po;
	natsStatus s;
	char why[600], err[400];

	/* Once a publish failed (the broker gone, no room for more PubAcks),
	 * the rest of the batch fails at once instead of stalling one by one:
	 * it is redelivered and published again. */
	if (b->broken) {
		pubbatch_fail(b, item, "an earlier publish of the batch failed");
		return;
	}
	s = natsMsg_Create(&m, subj, NULL, data, (int)len);
	if (s == NATS_OK && msgid != NULL)
		s = natsMsgHeader_Set(m, "Nats-Msg-Id", msgid);
	if (s == NATS_OK && hname != NULL)
		s = natsMsgHeader_Set(m, hname, hval);
	if (s != NATS_OK) {
		natsMsg_Destroy(m);
		snprintf(why, sizeof(why), "build a message for %s", subj);
		pubbatch_fail(b, item, why);
		return;
	}
	/* Known before the PubAck can arrive. */
	pthread_mutex_lock(&b->mu);
	if (slot_room(b) != 0) {
		pthread_mutex_unlock(&b->mu);
		natsMsg_Destroy(m);
		pubbatch_fail(b, item, "out of memory");
		return;
	}
	slot_put(b, m, item);
	b->inflight++;
	pthread_mutex_unlock(&b->mu);
	natsMsg *mine = m;
	b->published = true;
	/* A PubAck that never comes (the broker went away) times out in
	 * libnats and frees its slot. */
	jsPubOptions_Init(&po);
	po.MaxWait = PUBBATCH_WAIT_MS;
	s = js_PublishMsgAsync(b->js, &mine, &po);
	if (s != NATS_OK) {
		/* Still ours: the library did not take it. */
		conn_strerror(s, err, sizeof(err));
		snprintf(why, sizeof(why), "publish to %s: %s", subj, err);
		pthread_mutex_lock(&b->mu);
		if (slot_take(b, m) >= 0)
			b->inflight--;
		mark_failed(b, item, why);
		b->broken = true;
		pthread_mutex_unlock(&b->mu);
		natsMsg_Destroy(mine);
	}
}

void
pubbatch_wait(struct pubbatch *b)
{
	jsPubOptions po;
	natsMsgList pending = { 0 };
	struct timespec dl;

	if (!b->published)
		return;
	jsPubOptions_Init(&po);
	po.MaxWait = PUBBATCH_WAIT_MS;
	if (js_PublishAsyncComplete(b->js, &po) != NATS_OK &&
	    js_PublishAsyncGetPendingList(&pending, b->js) == NATS_OK) {
		/* What is still unanswered fails its item and gets no handler;
		 * a retry is deduped by its Nats-Msg-Id where it has one. */
		pthread_mutex_lock(&b->mu);
		for (int i = 0; i < pending.Count; i++) {
			int item = slot_take(b, pending.Msgs[i]);
			if (item >= 0 && b->inflight > 0)
				b->inflight--;
			mark_failed(b, item, "no PubAck in time");
		}
		pthread_mutex_unlock(&b->mu);
		natsMsgList_Destroy(&pending);
	}
	/* libnats counts a PubAck in before it runs its handler: wait for the
	 * handlers too, or a late failure would be missed. */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += PUBBATCH_WAIT_MS / 1000 + 1;
	pthread_mutex_lock(&b->mu);
	while (b->inflight > 0)
		if (pthread_cond_timedwait(&b->answered, &b->mu, &dl) != 0)
			break;
	if (b->inflight > 0) {
		/* Handlers that never ran: fail every item still in the table. */
		for (size_t i = 0; i < b->nslots; i++)
			if (b->slots[i].msg != NULL && b->slots[i].item >= 0)
				mark_failed(b, b->slots[i].item, "no PubAck handled in time");
	}
	pthread_mutex_unlock(&b->mu);
}

bool
pubbatch_failed(struct pubbatch *b, int item)
{
	bool f;

	pthread_mutex_lock(&b->mu);
	f = item >= 0 && item < b->nitems && b->failed[item];
	pthread_mutex_unlock(&b->mu);
	return f;
}
