/* Batched asynchronous publishes (see pubbatch.h). */
#include "lib/nats/pubbatch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/nats/jsack.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/rawhdr.h"

/* v in decimal at p: its length (at most 20). */
static size_t
decimal(char *p, uint64_t v)
{
	char d[20];
	size_t n = 0, i = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0)
		p[i++] = d[--n];
	return i;
}

/* The next publish's reply subject, "<reply><gen>.<n>", into out (of
 * sizeof(b->reply) + 24 bytes; pubbatch_init leaves that room): by hand, it
 * is made per publish. */
static void
reply_subject(const struct pubbatch *b, char *out)
{
	size_t at = strlen(b->reply);

	memcpy(out, b->reply, at);
	at += decimal(out + at, b->gen);
	out[at++] = '.';
	at += decimal(out + at, b->npub);
	out[at] = '\0';
}

/* Fail an item; refused: by the stream's own answer (see
 * pubbatch_refused). */
static void
mark_failed(struct pubbatch *b, int item, const char *why, bool refused)
{
	if (item < 0 || item >= b->nitems)
		return;
	b->failed[item] = true;
	b->refused[item] |= refused;
	if (b->error[0] == '\0') {
		/* Bounded copy: a long subject cuts the text, never memory. */
		size_t n = strnlen(why, sizeof(b->error) - 1);
		memcpy(b->error, why, n);
		b->error[n] = '\0';
	}
}

/* "<gen>.<n>" after the reply prefix, or -1. */
static int
reply_index(const struct pubbatch *b, const char *subj, uint32_t *gen, size_t *n)
{
	size_t pl = strlen(b->reply);
	char *end;

	if (strncmp(subj, b->reply, pl) != 0)
		return -1;
	unsigned long long g = strtoull(subj + pl, &end, 10);
	if (end == subj + pl || *end != '.')
		return -1;
	const char *p = end + 1;
	unsigned long long k = strtoull(p, &end, 10);
	if (end == p || *end != '\0' || g > UINT32_MAX)
		return -1;
	*gen = (uint32_t)g;
	*n = (size_t)k;
	return 0;
}

/* One answer: its publish's item succeeds or fails. */
static void
answer(struct pubbatch *b, natsMsg *m)
{
	uint32_t gen;
	size_t n;
	uint64_t seq;
	char why[300], text[600];

	/* An answer to an earlier batch (its item already failed for want of
	 * it), or to a publish already answered, changes nothing. */
	if (reply_index(b, natsMsg_GetSubject(m), &gen, &n) != 0 || gen != b->gen ||
	    n >= b->npub || b->item_of[n] < 0)
		return;
	int item = b->item_of[n];
	b->item_of[n] = -1;
	b->inflight--;
	if (js_puback_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &seq, why,
	    sizeof(why)) != 0) {
		snprintf(text, sizeof(text), "publish %zu of the batch: %s", n, why);
		/* An answer with a body is the stream's own word on it. */
		mark_failed(b, item, text, natsMsg_GetDataLength(m) > 0);
		return;
	}
	if (seq > b->max_seq)
		b->max_seq = seq;
}

/*
 * A message done with, destroyed with the rest at the end of the batch:
 * libnats hands each destroyed message to its collector thread and wakes
 * it when idle, so one destroy per publish and per answer woke it
 * thousands of times a second (issue 18, measured: 14 % of the reader's
 * CPU in that thread's wake-ups).
 */
static void
spend(struct pubbatch *b, natsMsg *m)
{
	if (b->nspent == b->cap_spent) {
		size_t cap = b->cap_spent ? b->cap_spent * 2 : 1024;
		natsMsg **v = realloc(b->spent, cap * sizeof(*v));
		if (v == NULL) {
			natsMsg_Destroy(m);
			return;
		}
		b->spent = v;
		b->cap_spent = cap;
	}
	b->spent[b->nspent++] = m;
}

static void
spent_destroy(struct pubbatch *b)
{
	for (size_t i = 0; i < b->nspent; i++)
		natsMsg_Destroy(b->spent[i]);
	b->nspent = 0;
}

/* Read answers until none is outstanding, or for at most wait_ms (0: only
 * what has arrived). */
static void
drain(struct pubbatch *b, int64_t wait_ms)
{
	int64_t until = mono_ms() + wait_ms;
	bool failed_over = false;

	while (b->inflight > 0) {
		natsMsg *m = NULL;
		int64_t left = wait_ms > 0 ? until - mono_ms() : 0;
		if (wait_ms > 0 && left <= 0)
			break;
		if (left > PUBBATCH_SLICE_MS)
			left = PUBBATCH_SLICE_MS;
		/* Answers are on their way (inflight): gathered, not woken for
		 * one by one. */
		natsStatus s = conn_next_gather(b->sub, &m, left, (int)b->inflight);
		if (s == NATS_TIMEOUT) {
			if (wait_ms <= 0 || mono_ms() >= until)
				break;
			if (!failed_over && conn_reconnects(b->nc) != b->reconnects) {
				failed_over = true;
				if (until - mono_ms() > PUBBATCH_FAILOVER_GRACE_MS)
					until = mono_ms() + PUBBATCH_FAILOVER_GRACE_MS;
				snprintf(b->sub_error, sizeof(b->sub_error), "; the connection failed "
				    "over meanwhile: the wait ended early");
			}
			continue;
		}
		if (s == NATS_NO_RESPONDERS) {
			/* An answer, though libnats keeps which: no stream took
			 * one publish (a leader being elected). One fewer to wait
			 * for; the publishes left unanswered at the end are the
			 * ones nobody took, and fail. (One meant for an earlier
			 * batch ends this wait early at worst: a retry, deduped.) */
			b->no_responders++;
			b->inflight--;
			continue;
		}
		if (s != NATS_OK) {
			/* Not the wait running out: say which. */
			snprintf(b->sub_error, sizeof(b->sub_error), "; the PubAck subscription said: %s",
			    natsStatus_GetText(s));
			break;
		}
		answer(b, m);
		spend(b, m);
	}
}

int
pubbatch_init(struct pubbatch *b, natsConnection *nc, const char *inbox_prefix)
{
	char uniq[64], subj[sizeof(b->reply) + 2];

	memset(b, 0, sizeof(*b));
	b->nc = nc;
	if (conn_unique_token(uniq, sizeof(uniq)) != 0 ||
	    (size_t)snprintf(b->reply, sizeof(b->reply), "%s.pa.%s.", inbox_prefix, uniq) >=
	    sizeof(b->reply) - 24)
		return -1;
	snprintf(subj, sizeof(subj), "%s>", b->reply);
	if (natsConnection_SubscribeSync(&b->sub, nc, subj) != NATS_OK ||
	    natsSubscription_SetPendingLimits(b->sub, -1, -1) != NATS_OK ||
	    natsConnection_JetStream(&b->js, nc, NULL) != NATS_OK) {
		pubbatch_destroy(b);
		return -1;
	}
	return 0;
}

void
pubbatch_destroy(struct pubbatch *b)
{
	spent_destroy(b);
	free(b->spent);
	/* PubAcks may still be on the way (natsconn.h). */
	conn_sub_close(b->nc, b->sub, CONN_SUB_FLUSH_MS);
	jsCtx_Destroy(b->js);
	free(b->scratch);
	free(b->item_of);
	free(b->failed);
	free(b->refused);
	memset(b, 0, sizeof(*b));
}

int
pubbatch_begin(struct pubbatch *b, int nitems)
{
	if (nitems > b->cap_items) {
		bool *f = realloc(b->failed, (size_t)nitems * sizeof(bool));
		if (f == NULL)
			return -1;
		b->failed = f;
		if ((f = realloc(b->refused, (size_t)nitems * sizeof(bool))) == NULL)
			return -1;
		b->refused = f;
		b->cap_items = nitems;
	}
	if (nitems > 0) {
		memset(b->failed, 0, (size_t)nitems * sizeof(bool));
		memset(b->refused, 0, (size_t)nitems * sizeof(bool));
	}
	b->nitems = nitems;
	b->gen++;
	b->npub = 0;
	b->inflight = 0;
	b->broken = false;
	b->error[0] = '\0';
	b->sub_error[0] = '\0';
	b->no_responders = 0;
	b->max_seq = 0;
	b->reconnects = conn_reconnects(b->nc);
	return 0;
}

/*
 * A message with its Nats-Msg-Id (msgid) and extra header (hname), either
 * may be NULL. Its header block is written as the bytes libnats would
 * encode from natsMsgHeader_Set (rawhdr.h: the same headers in the same
 * order), without the map it builds, encodes and frees per message; with
 * that map where the block cannot be written so.
 */
static natsStatus
headed_msg(struct pubbatch *b, natsMsg **m, const char *subj, const char *reply,
	   const char *data, size_t len, const char *msgid, const char *hname, const char *hval)
{
	const char *names[2], *values[2];
	char block[RAWHDR_MAX];
	size_t hl = 0;
	int n = 0;
	natsStatus s;

	/* An empty name or no value is libnats's to refuse, as before. */
	if (rawhdr_usable() && (hname == NULL || (hname[0] != '\0' && hval != NULL &&
	    strlen(hname) < sizeof(b->order_of)))) {
		if (msgid != NULL && hname != NULL && strcmp(b->order_of, hname) != 0) {
			b->msgid_first = rawhdr_first("Nats-Msg-Id", hname);
			strcpy(b->order_of, hname);
		}
		if (msgid != NULL && (hname == NULL || b->msgid_first))
			names[n] = "Nats-Msg-Id", values[n++] = msgid;
		if (hname != NULL)
			names[n] = hname, values[n++] = hval;
		if (msgid != NULL && hname != NULL && !b->msgid_first)
			names[n] = "Nats-Msg-Id", values[n++] = msgid;
		hl = rawhdr_encode(block, names, values, n);
	}
	if (hl > 0 && hl + len > b->cap_scratch) {
		char *v = realloc(b->scratch, hl + len);
		if (v != NULL)
			b->scratch = v, b->cap_scratch = hl + len;
	}
	if (hl > 0 && hl + len <= b->cap_scratch) {
		memcpy(b->scratch, block, hl);
		if (len > 0)
			memcpy(b->scratch + hl, data, len);
		return rawhdr_msg(m, subj, reply, b->scratch, hl, len);
	}
	s = natsMsg_Create(m, subj, reply, data, (int)len);
	if (s == NATS_OK && msgid != NULL)
		s = natsMsgHeader_Set(*m, "Nats-Msg-Id", msgid);
	if (s == NATS_OK && hname != NULL)
		s = natsMsgHeader_Set(*m, hname, hval);
	return s;
}

void
pubbatch_fail(struct pubbatch *b, int item, const char *why)
{
	mark_failed(b, item, why, false);
}

void
pubbatch_publish(struct pubbatch *b, int item, const char *subj, const char *data, size_t len,
		 const char *msgid, const char *hname, const char *hval)
{
	char reply[sizeof(b->reply) + 24], why[600], err[400];
	natsMsg *m = NULL;
	natsStatus s;

	/* Once a publish failed (the broker gone, no room for more PubAcks),
	 * the rest of the batch fails at once instead of stalling one by one:
	 * it is redelivered and published again. */
	if (b->broken) {
		mark_failed(b, item, "an earlier publish of the batch failed", false);
		return;
	}
	if (b->npub == b->cap_pub) {
		size_t cap = b->cap_pub ? b->cap_pub * 2 : 1024;
		int *v = realloc(b->item_of, cap * sizeof(*v));
		if (v == NULL) {
			mark_failed(b, item, "out of memory", false);
			return;
		}
		b->item_of = v;
		b->cap_pub = cap;
	}
	/* Room for one more answer outstanding. */
	if (b->inflight >= PUBBATCH_MAX_PENDING)
		drain(b, 0);
	if (b->inflight >= PUBBATCH_MAX_PENDING) {
		int64_t until = mono_ms() + PUBBATCH_STALL_MS;
		while (b->inflight >= PUBBATCH_MAX_PENDING && mono_ms() < until)
			drain(b, until - mono_ms());
		if (b->inflight >= PUBBATCH_MAX_PENDING) {
			snprintf(why, sizeof(why), "publish to %s: no room for another PubAck within "
			    "%d ms (%d outstanding)", subj, PUBBATCH_STALL_MS, PUBBATCH_MAX_PENDING);
			mark_failed(b, item, why, false);
			b->broken = true;
			return;
		}
	} else if (b->npub % PUBBATCH_DRAIN_EVERY == PUBBATCH_DRAIN_EVERY - 1)
		drain(b, 0);
	reply_subject(b, reply);
	if (msgid == NULL && hname == NULL)
		s = natsConnection_PublishRequest(b->nc, subj, reply, data, (int)len);
	else {
		s = headed_msg(b, &m, subj, reply, data, len, msgid, hname, hval);
		if (s == NATS_OK)
			s = natsConnection_PublishMsg(b->nc, m);
		spend(b, m);
	}
	if (s != NATS_OK) {
		conn_strerror(s, err, sizeof(err));
		snprintf(why, sizeof(why), "publish to %s: %s", subj, err);
		mark_failed(b, item, why, false);
		b->broken = true;
		return;
	}
	b->item_of[b->npub++] = item;
	b->inflight++;
}

void
pubbatch_wait(struct pubbatch *b)
{
	char why[600], viol[400];

	if (b->inflight > 0) {
		conn_push(b->nc);
		drain(b, PUBBATCH_WAIT_MS);
	}
	spent_destroy(b);
	if (b->inflight == 0 && b->no_responders == 0)
		return;
	/* What is still unanswered fails its item; a retry is deduped by its
	 * Nats-Msg-Id where it has one. A publish the broker refused is
	 * answered by nobody: name the refusal. */
	if (b->inflight == 0)
		snprintf(why, sizeof(why), "no stream took it (no responders: %" PRIu64 " of %zu "
		    "publishes; a stream leader being elected, or the stream gone)", b->no_responders,
		    b->npub);
	else if (conn_violation(NULL, viol, sizeof(viol)))
		snprintf(why, sizeof(why), "no PubAck within %d ms: permission denied (%s)",
		    PUBBATCH_WAIT_MS, viol);
	else
		snprintf(why, sizeof(why), "no PubAck within %d ms (%zu of %zu publishes "
		    "unanswered%s)", PUBBATCH_WAIT_MS, b->inflight, b->npub, b->sub_error);
	for (size_t n = 0; n < b->npub; n++)
		if (b->item_of[n] >= 0) {
			mark_failed(b, b->item_of[n], why, false);
			b->item_of[n] = -1;
		}
	b->inflight = 0;
}

bool
pubbatch_failed(struct pubbatch *b, int item)
{
	return item >= 0 && item < b->nitems && b->failed[item];
}

bool
pubbatch_refused(struct pubbatch *b, int item)
{
	return item >= 0 && item < b->nitems && b->refused[item];
}
