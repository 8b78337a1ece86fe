/* Durable pull consumers (see pull.h). */
#include "lib/nats/pull.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/nats/jsack.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"

static const char *
ack_name(jsAckPolicy p)
{
	return p == js_AckExplicit ? "explicit" : p == js_AckAll ? "all" : "none";
}

/* Name the first setting an existing consumer has other than ours. */
static int
config_differs(const jsConsumerConfig *have, const jsConsumerConfig *want, char *err,
	       size_t errlen)
{
	const char *hf = have->FilterSubject ? have->FilterSubject : "";

	if (strcmp(hf, want->FilterSubject) != 0) {
		snprintf(err, errlen, "filter subject is \"%s\", want \"%s\"", hf, want->FilterSubject);
		return 1;
	}
	if (have->AckPolicy != want->AckPolicy) {
		snprintf(err, errlen, "ack policy is %s, want %s", ack_name(have->AckPolicy),
		    ack_name(want->AckPolicy));
		return 1;
	}
	if (have->DeliverPolicy != want->DeliverPolicy) {
		snprintf(err, errlen, "deliver policy is %d, want %d", (int)have->DeliverPolicy,
		    (int)want->DeliverPolicy);
		return 1;
	}
	if (have->DeliverSubject != NULL && have->DeliverSubject[0] != '\0') {
		snprintf(err, errlen, "it is a push consumer (deliver subject \"%s\")",
		    have->DeliverSubject);
		return 1;
	}
	return 0;
}

/* A request that timed out because the broker refused the publish. */
static void
explain(natsStatus s, jsErrCode jerr, const char *what, char *err, size_t errlen)
{
	char why[512], viol[512];

	if (s == NATS_TIMEOUT && conn_violation(NULL, viol, sizeof(viol))) {
		snprintf(err, errlen, "%s: permission denied (%s)", what, viol);
		return;
	}
	conn_strerror(s, why, sizeof(why));
	snprintf(err, errlen, "%s: %s (error %d)", what, why, (int)jerr);
}

int
pull_bind(jsCtx *js, natsConnection *nc, const char *inbox_prefix, const char *stream,
	  jsConsumerConfig *cfg, struct puller *p, char *err, size_t errlen)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	char what[512], diff[512];
	natsStatus s;

	snprintf(what, sizeof(what), "consumer %s on %s", cfg->Durable, stream);
	s = js_GetConsumerInfo(&ci, js, stream, cfg->Durable, NULL, &jerr);
	if (s != NATS_OK && jerr == JSConsumerNotFoundErr) {
		jerr = 0;
		/* Named: nats.c then asks with
		 * $JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>, the form
		 * every Cotal toolchain's delivery grants cover. */
		if (cfg->Name == NULL)
			cfg->Name = cfg->Durable;
		s = js_AddConsumer(&ci, js, stream, cfg, NULL, &jerr);
		if (s != NATS_OK && jerr == JSConsumerNameExistErr) {
			/* Another incarnation made it meanwhile: read it. */
			jerr = 0;
			s = js_GetConsumerInfo(&ci, js, stream, cfg->Durable, NULL, &jerr);
		}
		if (s != NATS_OK) {
			char w2[600];
			snprintf(w2, sizeof(w2), "create %s", what);
			explain(s, jerr, w2, err, errlen);
			return -1;
		}
	} else if (s != NATS_OK) {
		explain(s, jerr, what, err, errlen);
		return -1;
	}
	if (config_differs(ci->Config, cfg, diff, sizeof(diff))) {
		snprintf(err, errlen, "%s exists with other settings: %s", what, diff);
		jsConsumerInfo_Destroy(ci);
		return -1;
	}
	jsConsumerInfo_Destroy(ci);
	return pull_attach(nc, inbox_prefix, stream, cfg->Durable, p, err, errlen);
}

int
pull_attach(natsConnection *nc, const char *inbox_prefix, const char *stream,
	    const char *consumer, struct puller *p, char *err, size_t errlen)
{
	char what[512];
	natsStatus s;

	snprintf(what, sizeof(what), "consumer %s on %s", consumer, stream);
	memset(p, 0, sizeof(*p));
	p->nc = nc;
	snprintf(p->next, sizeof(p->next), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream, consumer);
	snprintf(p->info, sizeof(p->info), "$JS.API.CONSUMER.INFO.%s.%s", stream, consumer);
	snprintf(p->ack, sizeof(p->ack), "$JS.ACK.%s.%s", stream, consumer);
	/* Under the credential's own reply prefix. */
	char u[64];
	if (conn_unique_token(u, sizeof(u)) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(p->reply, sizeof(p->reply), "%s.pull.%s", inbox_prefix, u);
	char wild[sizeof(p->reply) + 2];
	snprintf(wild, sizeof(wild), "%s.*", p->reply);
	s = natsConnection_SubscribeSync(&p->sub, nc, wild);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(p->sub, -1, -1);
	if (s != NATS_OK) {
		char w2[600];
		snprintf(w2, sizeof(w2), "subscribe for %s", what);
		explain(s, 0, w2, err, errlen);
		natsSubscription_Destroy(p->sub);
		p->sub = NULL;
		return -1;
	}
	return 0;
}

void
pull_close(struct puller *p)
{
	/* The broker may still be delivering to an open request (natsconn.h). */
	conn_sub_close(p->nc, p->sub, CONN_SUB_FLUSH_MS);
	p->sub = NULL;
	/* Its connection may be destroyed next (a credential reload): nothing
	 * here may reach it again. */
	p->nc = NULL;
}

/* A status message (404, 408, 409) ends a request: it comes to the
 * request's own reply subject, a delivered message under its stream
 * subject. The current request's end takes its credit back. */
static bool
take_status(struct puller *p, natsMsg *m)
{
	const char *subj = natsMsg_GetSubject(m);
	size_t rl = strlen(p->reply);

	if (strncmp(subj, p->reply, rl) != 0 || subj[rl] != '.')
		return false;
	if (strtoull(subj + rl + 1, NULL, 10) == p->req)
		p->credit = 0;
	return true;
}

/* A delivered message taken into the batch. */
static void
take_msg(struct puller *p, natsMsgList *list, natsMsg *m)
{
	int i = list->Count++;

	if (p->credit > 0)
		p->credit--;
	p->meta_ok[i] = js_ack_meta(natsMsg_GetReply(m), &p->meta[i]);
	p->behind = p->meta_ok[i] ? p->meta[i].pending : 1;
	list->Msgs[i] = m;
}

const struct js_ack_meta *
pull_meta(const struct puller *p, int i)
{
	return i >= 0 && i < PULL_BATCH_MAX && p->meta_ok[i] ? &p->meta[i] : NULL;
}

/* Ask for up to n messages, waiting up to expires_ms for them. */
static natsStatus
request(struct puller *p, int n, int expires_ms)
{
	char body[128], reply[160];
	natsStatus s;

	snprintf(body, sizeof(body), "{\"batch\":%d,\"expires\":%" PRId64 "}", n,
	    (int64_t)expires_ms * 1000000);
	snprintf(reply, sizeof(reply), "%s.%" PRIu64, p->reply, p->req + 1);
	s = natsConnection_PublishRequestString(p->nc, p->next, reply, body);
	if (s == NATS_OK) {
		p->req++;
		p->credit = n;
		p->req_until = mono_ms() + expires_ms;
	}
	return s;
}

/*
 * The open request: 1 it may still deliver (its expiry, and then the
 * broker's answer to it, not yet overdue), 0 none is open, -1 its end is
 * overdue: the broker answered neither with its messages nor with its
 * expiry (a consumer leader lost on the way), and it is forgotten.
 */
static int
request_state(struct puller *p)
{
	if (p->credit <= 0)
		return 0;
	if (mono_ms() < p->req_until + PULL_LATE_MS)
		return 1;
	p->credit = 0;
	return -1;
}

/* The next queued message, waiting up to wait_ms (gathered: when more is
 * said to be pending, natsconn.h conn_next_gather): 1 a message taken into
 * the list, 2 a request's end, 0 nothing in time, -1 a failure (*s). */
static int
next(struct puller *p, natsMsgList *list, int64_t wait_ms, bool gather, natsStatus *s)
{
	natsMsg *m = NULL;

	*s = gather ? conn_next_gather(p->sub, &m, wait_ms > 0 ? wait_ms : 0,
	    p->behind < (uint64_t)p->credit ? (int)p->behind : p->credit) :
	    natsSubscription_NextMsg(&m, p->sub, wait_ms > 0 ? wait_ms : 0);
	if (*s == NATS_TIMEOUT) {
		*s = NATS_OK;
		return 0;
	}
	/* libnats keeps the 503 itself: nobody took a request (the
	 * consumer's leader being elected). The open one is gone; the
	 * caller naps before asking again. */
	if (*s == NATS_NO_RESPONDERS)
		p->credit = 0;
	if (*s != NATS_OK)
		return -1;
	if (take_status(p, m)) {
		natsMsg_Destroy(m);
		return 2;
	}
	take_msg(p, list, m);
	return 1;
}

static int
request_size(int max, int have)
{
	return max - have < PULL_REQUEST_MAX ? max - have : PULL_REQUEST_MAX;
}

natsStatus
pull_fetch(struct puller *p, int max, int wait_ms, natsMsgList *list)
{
	natsStatus s = NATS_OK;
	int64_t quiet = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
	int expires = wait_ms > 0 ? wait_ms : PULL_WAIT_MS, st;

	/* A request may outlive the call that made it: the next call waits
	 * on it (request_state). */
	if (p->expires_ms > expires)
		expires = p->expires_ms;

	memset(list, 0, sizeof(*list));
	if (max > PULL_BATCH_MAX)
		max = PULL_BATCH_MAX;
	if (max < 1)
		max = 1;
	if ((list->Msgs = calloc((size_t)max, sizeof(*list->Msgs))) == NULL)
		return NATS_NO_MEMORY;
	/* What has arrived already: ours, whichever request it answered. */
	for (int got = 1; got != 0 && list->Count < max;)
		if ((got = next(p, list, 0, false, &s)) < 0)
			return s;
	/* Nothing: the first message to arrive within wait_ms. */
	while (list->Count == 0) {
		if ((st = request_state(p)) < 0)
			return NATS_TIMEOUT;
		if (st == 0) {
			if ((s = request(p, request_size(max, 0), expires)) != NATS_OK)
				return s;
			conn_push(p->nc);
		}
		int64_t left = quiet - mono_ms(), overdue = p->req_until + PULL_LATE_MS - mono_ms();
		if (left <= 0)
			return NATS_OK; /* a quiet consumer; the request stays open */
		if (next(p, list, left < overdue ? left : overdue, false, &s) < 0)
			return s;
		if (list->Count == 0 && p->credit == 0)
			return NATS_OK; /* it expired: a quiet consumer */
	}
	/* What is pending behind, until the batch is full or nothing is. */
	while (list->Count < max && p->behind > 0) {
		if (request_state(p) == 0) {
			if (request(p, request_size(max, list->Count), PULL_WAIT_MS) != NATS_OK)
				break; /* handle what we have; the next fetch sees the failure */
			conn_push(p->nc);
		}
		if (next(p, list, PULL_BEHIND_MS, true, &s) <= 0)
			break; /* said pending, yet nothing came in time: hand on what we have */
	}
	/* And what arrived meanwhile, without waiting for it. */
	for (int got = 1; got != 0 && list->Count < max;)
		if ((got = next(p, list, 0, false, &s)) < 0)
			break;
	/* More pending than this batch holds: the next request goes out now,
	 * so its messages arrive while this batch is handled. */
	if (p->behind > 0 && request_state(p) == 0)
		request(p, request_size(max, 0), PULL_WAIT_MS);
	return NATS_OK;
}

static void
ack_with(struct puller *p, natsMsg *m, const char *body)
{
	const char *reply = natsMsg_GetReply(m);

	if (reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0)
		natsConnection_PublishString(p->nc, reply, body);
}

void
pull_ack(struct puller *p, natsMsg *m)
{
	ack_with(p, m, "+ACK");
}

void
pull_nak(struct puller *p, natsMsg *m, int delay_ms)
{
	char body[64];

	snprintf(body, sizeof(body), "-NAK {\"delay\":%" PRId64 "}", (int64_t)delay_ms * 1000000);
	ack_with(p, m, body);
	int64_t until = mono_ms() + delay_ms;
	if (delay_ms > 0 && until > p->delayed_until)
		p->delayed_until = until;
}

void
pull_term(struct puller *p, natsMsg *m)
{
	ack_with(p, m, "+TERM");
}

/* A non-negative integer field of a JSON object, or -1. */
static int64_t
count_of(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

int
pull_recover(struct puller *p)
{
	natsMsg *r = NULL;
	json_t *doc;
	int sent = 0;

	p->credit = 0; /* a lost node took the open request along */
	/* Short: during a leader election nobody answers; the loop asks
	 * again after its next fetch. */
	if (natsConnection_Request(&r, p->nc, p->info, "", 0, PULL_INFO_MS) != NATS_OK)
		return -1;
	doc = json_loadb(natsMsg_GetData(r), (size_t)natsMsg_GetDataLength(r), 0, NULL);
	natsMsg_Destroy(r);
	json_t *dl = json_object_get(doc, "delivered"), *fl = json_object_get(doc, "ack_floor");
	int64_t pending = count_of(doc, "num_ack_pending");
	int64_t last = count_of(dl, "stream_seq"), dseq = count_of(dl, "consumer_seq");
	int64_t floor = count_of(fl, "stream_seq"), dfloor = count_of(fl, "consumer_seq");
	if (pending < 0 || last < 0 || dseq < 0 || floor < 0 || dfloor < 0) {
		json_decref(doc);
		return -1;
	}
	json_decref(doc);
	if (pending == 0 || dseq <= dfloor)
		return 0;
	for (int64_t s = floor + 1; s <= last && sent < PULL_RECOVER_MAX; s++) {
		char subj[640];
		snprintf(subj, sizeof(subj), "%s.1.%" PRId64 ".%" PRId64 ".0.0", p->ack, s, dseq);
		if (natsConnection_PublishString(p->nc, subj, "-NAK") != NATS_OK)
			break;
		sent++;
	}
	natsConnection_FlushTimeout(p->nc, PULL_ANSWER_MS);
	return sent;
}

int
pull_hand_back(struct puller *p)
{
	int64_t until = p->credit > 0 ? p->req_until + PULL_HANDBACK_MARGIN_MS : 0;
	int64_t cap = mono_ms() + PULL_WAIT_MS + PULL_HANDBACK_MARGIN_MS;

	if (until > cap)
		until = cap; /* a longer request (PULL_WAIT_MS is every fetch's) */
	for (int64_t left; (left = until - mono_ms()) > 0;) {
		struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	return pull_recover(p);
}
