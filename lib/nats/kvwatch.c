/* A KV watch as a named ordered consumer (see kvwatch.h). */
#include "lib/nats/kvwatch.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/nats/jsack.h"
#include "lib/nats/natsconn.h"
#include "lib/refuse.h"

#define CREATE_TIMEOUT_MS 2000 /* a leaderless cluster does not answer: ask again soon */
#define DELETE_TIMEOUT_MS 500
#define INACTIVE_NS 30000000000LL /* the broker drops a consumer nobody listens to */
#define NAME_MAX_LEN 48
#define SUBJ_MAX 512
#define KVWATCH_PENDING_BYTES (64 * 1024 * 1024) /* above the broker's 32 MiB window */

struct kvwatch {
	natsConnection *nc;
	natsSubscription *sub;
	char stream[SUBJ_MAX];
	char name[NAME_MAX_LEN];
	char prefix[SUBJ_MAX];   /* "$KV.<bucket>." */
	uint64_t dseq;           /* the consumer sequence last delivered */
	uint64_t pending;        /* at creation: entries still to come */
	bool loaded;
	int64_t last_heard_ms;
	uint64_t reconnects;     /* the connection's, as last seen */
	int64_t failover_ms;     /* when a failover was seen; 0: none pending */
	atomic_bool stopped;
	natsMsg *held;           /* the entry *e points into */
};

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The broker's error words of an API answer, or NULL when it is none. */
static const char *
api_error(json_t *doc, char *buf, size_t len)
{
	json_t *e = json_object_get(doc, "error");
	const char *d;

	if (!json_is_object(e))
		return NULL;
	d = json_string_value(json_object_get(e, "description"));
	snprintf(buf, len, "%s (JetStream error %lld)", d != NULL ? d : "error",
	    (long long)json_integer_value(json_object_get(e, "err_code")));
	return buf;
}

static atomic_bool flow_control = true;

void
kvwatch_flow_control(bool on)
{
	atomic_store(&flow_control, on);
}

int
kvwatch_start(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
	      const char *bucket, char *err, size_t errlen)
{
	return kvwatch_start_keys(out, nc, inbox_prefix, bucket, ">", err, errlen);
}

int
kvwatch_start_keys(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
		   const char *bucket, const char *keys, char *err, size_t errlen)
{
	return kvwatch_start_at(out, nc, inbox_prefix, bucket, keys, 0, err, errlen);
}

int
kvwatch_start_at(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
		 const char *bucket, const char *keys, uint64_t from, char *err, size_t errlen)
{
	char tok[64], deliver[SUBJ_MAX], subj[SUBJ_MAX * 5], filter[SUBJ_MAX * 2], why[512];
	struct kvwatch *w;
	natsMsg *reply = NULL;
	json_t *req = NULL, *doc = NULL;
	char *body = NULL;
	natsStatus s;
	int rc = -1;

	*out = NULL;
	/* A filter cut short would watch other keys, or none. */
	if (strlen(keys) > KVWATCH_KEYS_MAX || strlen(bucket) > SUBJ_MAX - 16) {
		snprintf(err, errlen, "watch %.64s: the keys %.64s… are longer than %d bytes", bucket,
		    keys, KVWATCH_KEYS_MAX);
		return -1;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w->nc = nc;
	if (conn_unique_token(tok, sizeof(tok)) != 0) {
		snprintf(err, errlen, "out of memory");
		free(w);
		return -1;
	}
	snprintf(w->stream, sizeof(w->stream), "KV_%s", bucket);
	snprintf(w->name, sizeof(w->name), "kvw_%.40s", tok);
	snprintf(w->prefix, sizeof(w->prefix), "$KV.%s.", bucket);
	snprintf(filter, sizeof(filter), "$KV.%s.%s", bucket, keys);
	snprintf(deliver, sizeof(deliver), "%s.kvw.%s", inbox_prefix, tok);

	s = natsConnection_SubscribeSync(&w->sub, nc, deliver);
	/* The broker's flow control holds what it pushed and we did not take
	 * to 32 MiB (nats-server's JsFlowControlMaxPending); the library's
	 * default of 65,536 messages would drop a bucket's small rows first,
	 * as a slow consumer's. The queue is bounded by bytes alone. */
	if (s == NATS_OK && atomic_load(&flow_control))
		s = natsSubscription_SetPendingLimits(w->sub, -1, KVWATCH_PENDING_BYTES);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "watch %s: cannot subscribe to %s: %s", bucket, deliver, why);
		goto out;
	}
	/* Flow control: the broker pauses once what it pushed is not yet
	 * taken, until the watch answers its request, so a bucket larger
	 * than the subscription's pending limit is never dropped as a slow
	 * consumer's (issue 39: a space of 100,000 lifecycles never loaded)
	 * and what waits in the watch's queue stays bounded. */
	req = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:i, s:I, s:I, s:b}}",
	    "stream_name", w->stream, "config", "name", w->name, "deliver_subject", deliver,
	    "deliver_policy", from > 0 ? "by_start_sequence" : "last_per_subject",
	    "ack_policy", "none", "replay_policy", "instant",
	    "filter_subject", filter, "mem_storage", 1, "num_replicas", 1,
	    "inactive_threshold", (json_int_t)INACTIVE_NS,
	    "idle_heartbeat", (json_int_t)KVWATCH_HEARTBEAT_MS * 1000000, "flow_control",
	    atomic_load(&flow_control));
	/* A tail: every write from that sequence on, none of the state before. */
	if (req != NULL && from > 0)
		json_object_set_new(json_object_get(req, "config"), "opt_start_seq",
		    json_integer((json_int_t)from));
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.CREATE.%s.%s.%s", w->stream, w->name, filter);
	s = natsConnection_RequestString(&reply, nc, subj, body, CREATE_TIMEOUT_MS);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "watch %s: %s: %s%s", bucket, subj, why,
		    s == NATS_TIMEOUT ? " (a credential that may not publish it gets no answer)" : "");
		goto out;
	}
	doc = json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
	    JSON_DECODE_INT_AS_REAL, NULL);
	if (api_error(doc, why, sizeof(why)) != NULL) {
		snprintf(err, errlen, "watch %s: %s: %s", bucket, subj, why);
		goto out;
	}
	json_t *np = json_object_get(doc, "num_pending");
	if (!json_is_number(np)) {
		snprintf(err, errlen, "watch %s: %s: the answer names no num_pending", bucket, subj);
		goto out;
	}
	w->pending = (uint64_t)json_number_value(np);
	w->reconnects = conn_reconnects(nc);
	w->loaded = false;
	w->last_heard_ms = mono_ms();
	rc = 0;
out:
	free(body);
	json_decref(req);
	json_decref(doc);
	natsMsg_Destroy(reply);
	if (rc != 0)
		kvwatch_destroy(w);
	else
		*out = w;
	return rc;
}

static enum kvw_event __attribute__((format(printf, 3, 4)))
lost(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vseterr(err, errlen, fmt, ap);
	va_end(ap);
	return KVW_LOST;
}

enum kvw_event
kvwatch_next(struct kvwatch *w, int timeout_ms, struct kvw_entry *e, char *err, size_t errlen)
{
	natsMsg *m = NULL;
	const char *st = NULL, *v = NULL, *subj;
	struct js_ack_meta meta;
	natsStatus s;

	natsMsg_Destroy(w->held);
	w->held = NULL;
	if (!w->loaded && w->pending == 0) {
		w->loaded = true;
		return KVW_LOADED;
	}
	if (atomic_load(&w->stopped))
		return lost(err, errlen, "%s: stopped", w->stream);
	s = natsSubscription_NextMsg(&m, w->sub, timeout_ms);
	if (s == NATS_TIMEOUT) {
		/* Issue 15: a connection that failed over to another server
		 * may have left the watch's consumer on the lost one (it has
		 * one replica). A consumer still alive heartbeats within
		 * KVWATCH_HEARTBEAT_MS; one that does not by a second more is
		 * gone: watch again then, not after the whole silence. */
		uint64_t rc = conn_reconnects(w->nc);
		if (rc != w->reconnects) {
			w->reconnects = rc;
			w->failover_ms = mono_ms();
		}
		if (w->failover_ms != 0 && w->last_heard_ms <= w->failover_ms &&
		    mono_ms() - w->failover_ms > KVWATCH_HEARTBEAT_MS + 1000)
			return lost(err, errlen, "%s: no heartbeat since the connection failed over",
			    w->stream);
		if (mono_ms() - w->last_heard_ms > KVWATCH_SILENT_MS)
			return lost(err, errlen, "%s: no heartbeat for %lld ms", w->stream,
			    (long long)(mono_ms() - w->last_heard_ms));
		return KVW_TIMEOUT;
	}
	if (s != NATS_OK) {
		conn_strerror(s, err, errlen);
		return KVW_LOST;
	}
	w->last_heard_ms = mono_ms();
	if (natsMsg_GetDataLength(m) == 0 && natsMsgHeader_Get(m, "Status", &st) == NATS_OK &&
	    st != NULL) {
		/* 100: a heartbeat or a flow control request; anything else
		 * (409 consumer deleted, ...) ends the watch. */
		if (strcmp(st, "100") != 0) {
			natsMsgHeader_Get(m, "Description", &v);
			snprintf(err, errlen, "%s: the broker ended the watch: %s %s", w->stream, st,
			    v != NULL ? v : "");
			natsMsg_Destroy(m);
			return KVW_LOST;
		}
		/* Flow control: everything before the request is taken, go on
		 * (answered on its reply subject, $JS.FC.<stream>.>). A
		 * heartbeat of a consumer stalled on an answer that got lost
		 * names where to send it again. */
		const char *fc = natsMsg_GetReply(m), *stalled = NULL;
		if (fc != NULL && fc[0] != '\0')
			natsConnection_Publish(w->nc, fc, NULL, 0);
		else if (natsMsgHeader_Get(m, "Nats-Consumer-Stalled", &stalled) == NATS_OK &&
		    stalled != NULL && stalled[0] != '\0')
			natsConnection_Publish(w->nc, stalled, NULL, 0);
		if (natsMsgHeader_Get(m, "Nats-Last-Consumer", &v) == NATS_OK && v != NULL &&
		    strtoull(v, NULL, 10) != w->dseq) {
			unsigned long long last = strtoull(v, NULL, 10);
			natsMsg_Destroy(m);
			return lost(err, errlen, "%s: a heartbeat names message %llu, the last seen "
			    "is %llu", w->stream, last, (unsigned long long)w->dseq);
		}
		natsMsg_Destroy(m);
		return KVW_TIMEOUT;
	}
	if (!js_ack_meta(natsMsg_GetReply(m), &meta)) {
		natsMsg_Destroy(m);
		return lost(err, errlen, "%s: a message without delivery metadata", w->stream);
	}
	if (meta.dseq != w->dseq + 1) {
		natsMsg_Destroy(m);
		return lost(err, errlen, "%s: message %llu after %llu (a gap)", w->stream,
		    (unsigned long long)meta.dseq, (unsigned long long)w->dseq);
	}
	w->dseq = meta.dseq;
	subj = natsMsg_GetSubject(m);
	if (strncmp(subj, w->prefix, strlen(w->prefix)) != 0) {
		natsMsg_Destroy(m);
		return lost(err, errlen, "%s: a message on a foreign subject", w->stream);
	}
	if (!w->loaded && meta.pending == 0)
		w->pending = 0; /* KVW_LOADED on the next call */
	const char *op = NULL;
	natsMsgHeader_Get(m, "KV-Operation", &op);
	bool gone = op != NULL && (strcmp(op, "DEL") == 0 || strcmp(op, "PURGE") == 0);
	e->key = subj + strlen(w->prefix);
	e->value = gone ? NULL : natsMsg_GetData(m);
	e->len = gone ? 0 : (size_t)natsMsg_GetDataLength(m);
	e->revision = meta.sseq;
	e->created_ms = meta.ts_ns / 1000000;
	e->origin = NULL;
	if (!gone && (natsMsgHeader_Get(m, KVW_ORIGIN_HEADER, &e->origin) != NATS_OK ||
	    e->origin == NULL || e->origin[0] == '\0'))
		e->origin = NULL;
	w->held = m;
	return KVW_ENTRY;
}

enum kvw_event
kvwatch_next_by(struct kvwatch *w, int64_t until_ms, struct kvw_entry *e, char *err,
		size_t errlen)
{
	for (;;) {
		int64_t left = until_ms - mono_ms();
		if (left <= 0) {
			snprintf(err, errlen, "%s: not all in within the time given", w->stream);
			return KVW_LOST;
		}
		enum kvw_event ev = kvwatch_next(w, (int)left, e, err, errlen);
		if (ev != KVW_TIMEOUT)
			return ev; /* else a heartbeat, or a failover looked at */
	}
}

uint64_t
kvwatch_pending(const struct kvwatch *w)
{
	return w->pending;
}

void
kvwatch_stop(struct kvwatch *w)
{
	atomic_store(&w->stopped, true);
	natsSubscription_Unsubscribe(w->sub);
}

void
kvwatch_destroy(struct kvwatch *w)
{
	char subj[SUBJ_MAX * 2];
	natsMsg *r = NULL;

	if (w == NULL)
		return;
	natsMsg_Destroy(w->held);
	if (w->sub != NULL) {
		natsSubscription_Unsubscribe(w->sub);
		/* nats.c 3.4.1 (Debian 12's) can still be handing a message to
		 * a subscription that is destroyed meanwhile, and crash in its
		 * read loop (nats.c issue 637, fixed after 3.5.0): a watch torn down
		 * while the broker floods it hit it (issue 39's large spaces). A
		 * flush returns once the read loop processed everything the
		 * broker sent before its PONG, the UNSUB's last message among it. */
		natsConnection_FlushTimeout(w->nc, DELETE_TIMEOUT_MS);
		natsSubscription_Destroy(w->sub);
		/* Gone with its interest after INACTIVE_NS anyway. */
		snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.DELETE.%s.%s", w->stream, w->name);
		if (natsConnection_Request(&r, w->nc, subj, NULL, 0, DELETE_TIMEOUT_MS) == NATS_OK)
			natsMsg_Destroy(r);
	}
	free(w);
}
