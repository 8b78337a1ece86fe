/* One entry of the reader's batch (item.h). */
#include "worker-reader/item.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/rawhdr.h"
#include "worker/worker.h"

/*
 * An item made ready for the batch's next message. The array is allocated
 * once: an item holds two channel buffers (CHANNEL_MAX each), and a batch's
 * worth allocated anew was 4.4 MB, above the workers' mapping threshold
 * (worker.c), so every batch mapped fresh pages, faulted on each first
 * touch and unmapped them again: a third of the reader's CPU (issue 40).
 * Only what a message fills is written; the channels as far as they go.
 */
void
item_reset(struct item *it, natsMsg *m)
{
	it->m = m;
	it->seq = it->delivered = 0;
	it->ts_ns = 0;
	it->who.owner[0] = it->who.actor[0] = it->who.uid[0] = '\0';
	it->lc[0] = '\0';
	it->e.msg = NULL;
	it->e.channel[0] = '\0';
	it->e.seq = it->e.generation = 0;
	it->e.reason = REASON_DURABLE;
	it->view.msg = NULL;
	it->view.channel[0] = '\0';
	it->key = NULL;
	it->parsed = it->again = it->unheld = it->has_member = false;
	free(it->member);
	it->member = NULL;
	it->v = V_RETRY;
}

/* ":<o>.<a>:<uid>:<generation>", the end of a dedup key (WIRE.md §2), put
 * together by hand: it is made per entry. Its length, or 0 when it does
 * not fit. */
static int
key_suffix(char *buf, size_t len, const struct lifecycle *who, uint64_t generation)
{
	const char *part[] = { ":", who->owner, ".", who->actor, ":", who->uid, ":" };
	char digits[20];
	size_t at = 0, nd = 0;

	do
		digits[nd++] = (char)('0' + generation % 10);
	while ((generation /= 10) != 0);
	for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++) {
		size_t l = strlen(part[i]);
		if (at + l >= len)
			return 0;
		memcpy(buf + at, part[i], l);
		at += l;
	}
	if (at + nd >= len)
		return 0;
	while (nd > 0)
		buf[at++] = digits[--nd];
	buf[at] = '\0';
	return (int)at;
}

/*
 * The entry's dedup key, when the fan-out's header is there and names this
 * lifecycle and generation: the frame reuses it (WIRE.md §2, one key for
 * the entry and its frame).
 */
static const char *
entry_key(struct item *it)
{
	char suffix[LIFECYCLE_MAX + 32];
	const char *k = NULL;
	size_t kl = 0;
	int n;

	if (rawhdr_value(it->m, "Nats-Msg-Id", &k, &kl) == 0)
		return NULL;
	n = key_suffix(suffix, sizeof(suffix), &it->who, it->view.generation);
	if (n <= 0 || kl <= (size_t)n + 1 || kl > DEDUP_KEY_MAX ||
	    memcmp(k + kl - (size_t)n, suffix, (size_t)n) != 0)
		return NULL;
	/* Read in place, the value is not a string of its own. */
	memcpy(it->keybuf, k, kl);
	it->keybuf[kl] = '\0';
	return it->keybuf;
}

/* Decode an entry: the fast path when it is laid out as the fan-out
 * writes it and carries its key, else in full. */
int
item_parse(struct item *it, char *why, size_t whylen)
{
	const char *data = natsMsg_GetData(it->m);
	size_t len = (size_t)natsMsg_GetDataLength(it->m);

	if (entry_view(data, len, &it->view) == 0 &&
	    (it->key = entry_key(it)) != NULL) {
		strcpy(it->e.channel, it->view.channel);
		it->e.seq = it->view.seq;
		it->e.reason = it->view.reason;
		it->e.generation = it->view.generation;
		return 0;
	}
	it->view.msg = NULL;
	it->key = NULL;
	return entry_parse(data, len, &it->e, why, whylen);
}

/* One observation of the copy latency, from the entry's POSTED_AT_HEADER;
 * none for an entry without it, or with a value that is no time. */
void
observe_copy(natsMsg *m, int64_t now_ms)
{
	const char *v = NULL;
	char *end, posted[32];
	size_t vl = 0;

	/* More digits than a time has: no time. */
	if (rawhdr_value(m, POSTED_AT_HEADER, &v, &vl) == 0 || vl >= sizeof(posted))
		return;
	memcpy(posted, v, vl);
	posted[vl] = '\0';
	if (posted[0] < '0' || posted[0] > '9')
		return;
	errno = 0;
	long long ns = strtoll(posted, &end, 10);
	if (errno != 0 || *end != '\0' || ns <= 0)
		return;
	worker_latency_ms(now_ms - ns / 1000000);
}

