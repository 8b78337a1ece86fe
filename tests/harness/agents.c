/*
 * Agents as a test acts them: added with `cotal agent add`, connected on
 * their credentials (with the permission violations the broker reports),
 * posting to a channel, and reading their dlv_ durable: one frame, or every
 * frame until it is quiet, and their texts. The space's manager on the
 * control rails.
 */
#include "tests/harness/harness_int.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/creds/jwt.h"
#include "lib/creds/perms.h"
#include "lib/names.h"
#include "lib/wire/ctlclient.h"
#include "lib/wire/records.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/pull.h"

/* Find "word value" on a line of the CLI's output. */
static bool
out_field(const char *out, const char *word, char *val, size_t vallen)
{
	size_t wl = strlen(word);

	for (const char *p = out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, word, wl) == 0 && p[wl] == ' ') {
			const char *v = p + wl + 1, *e = strchr(v, '\n');
			size_t n = e ? (size_t)(e - v) : strlen(v);
			if (n >= vallen)
				return false;
			memcpy(val, v, n);
			val[n] = '\0';
			return true;
		}
	}
	return false;
}

int
h_agent_add(struct mesh *m, const char *name, const char *allow, struct agent *a)
{
	char out[H_OUT_MAX], *dot;

	memset(a, 0, sizeof(*a));
	if (h_cotal(m, out, sizeof(out), "agent", "add", name, "--space", m->space,
	    "--allow", allow, NULL) != 0) {
		fprintf(stderr, "✗ harness: cotal agent add %s failed:\n%s", name, out);
		return -1;
	}
	snprintf(a->name, sizeof(a->name), "%s", name);
	if (!out_field(out, "principal", a->principal, sizeof(a->principal)) ||
	    !out_field(out, "uid", a->uid, sizeof(a->uid)) ||
	    !out_field(out, "creds", a->creds, sizeof(a->creds)) ||
	    (dot = strchr(a->principal, '.')) == NULL) {
		fprintf(stderr, "✗ harness: unexpected agent add output:\n%s", out);
		return -1;
	}
	snprintf(a->owner, sizeof(a->owner), "%.*s", (int)(dot - a->principal), a->principal);
	snprintf(a->actor, sizeof(a->actor), "%s", dot + 1);
	return 0;
}

#define SINKS 64
static struct sink sinks[SINKS];
static pthread_mutex_t sinks_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t sinks_once = PTHREAD_ONCE_INIT;
static unsigned next_sink;

static void
sinks_init(void)
{
	for (int i = 0; i < SINKS; i++)
		pthread_mutex_init(&sinks[i].mu, NULL);
}

static struct sink *
sink_open(void)
{
	struct sink *k;

	pthread_once(&sinks_once, sinks_init);
	pthread_mutex_lock(&sinks_mu);
	k = &sinks[next_sink++ % SINKS];
	pthread_mutex_unlock(&sinks_mu);
	pthread_mutex_lock(&k->mu);
	k->live = true;
	k->nviolations = 0;
	pthread_mutex_unlock(&k->mu);
	return k;
}

static void
on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg)
{
	struct sink *k = arg;
	const char *text = NULL;

	(void)sub;
	natsConnection_GetLastError(nc, &text);
	pthread_mutex_lock(&k->mu);
	if (k->live && k->nviolations < H_VIOLATIONS_MAX)
		snprintf(k->violations[k->nviolations++], sizeof(k->violations[0]), "%s: %s",
		    natsStatus_GetText(err), text ? text : "");
	pthread_mutex_unlock(&k->mu);
}

static int
connect_opts(struct conn_opts o, const char *creds_path, struct conn *c, char *err,
	     size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->sink = sink_open();
	o.on_error_arg = c->sink;
	if (creds_load(creds_path, &c->creds, err, errlen) != 0)
		goto fail;
	if (conn_open(&o, &c->creds, &c->nc, err, errlen) != 0)
		goto fail;
	if (natsConnection_JetStream(&c->js, c->nc, NULL) != NATS_OK) {
		snprintf(err, errlen, "jetstream context");
		goto fail;
	}
	return 0;
fail:
	h_close(c);
	return -1;
}

int
h_connect(struct mesh *m, const char *creds_path, struct conn *c, char *err, size_t errlen)
{
	struct conn_opts o = { .url = m->url, .name = "cotal-e2e", .timeout_ms = 5000,
		.on_error = on_async_error };

	return connect_opts(o, creds_path, c, err, errlen);
}

int
h_connect_url(struct mesh *m, const char *url, const char *creds_path, struct conn *c,
	      char *err, size_t errlen)
{
	struct conn_opts o = { .url = url != NULL ? url : m->url, .name = "cotal-e2e",
		.timeout_ms = 5000, .on_error = on_async_error, .max_reconnect = -1,
		.reconnect_wait_ms = 250 };

	return connect_opts(o, creds_path, c, err, errlen);
}

int
h_connect_profile(struct mesh *m, const char *profile, struct conn *c, char *err,
		  size_t errlen)
{
	char path[H_PATH_MAX * 2], key[512];

	space_key(m->space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/%s.creds", m->dir, key, profile);
	return h_connect(m, path, c, err, errlen);
}

void
h_close(struct conn *c)
{
	jsCtx_Destroy(c->js);
	natsConnection_Destroy(c->nc);
	if (c->creds.jwt != NULL)
		creds_free(&c->creds);
	if (c->sink != NULL) {
		pthread_mutex_lock(&c->sink->mu);
		c->sink->live = false;
		pthread_mutex_unlock(&c->sink->mu);
	}
	memset(c, 0, sizeof(*c));
}

bool
h_violation(struct conn *c, const char *needle, int ms)
{
	struct sink *k = c->sink;

	for (int waited = 0; ; waited += 20) {
		pthread_mutex_lock(&k->mu);
		for (int i = 0; i < k->nviolations; i++)
			if (strstr(k->violations[i], needle) != NULL) {
				pthread_mutex_unlock(&k->mu);
				return true;
			}
		pthread_mutex_unlock(&k->mu);
		if (waited >= ms)
			return false;
		natsConnection_Flush(c->nc);
		hi_sleep_ms(20);
	}
}

bool
h_wait_closed(struct conn *c, int ms)
{
	for (int waited = 0; waited < ms; waited += 20) {
		if (natsConnection_IsClosed(c->nc))
			return true;
		hi_sleep_ms(20);
	}
	return natsConnection_IsClosed(c->nc);
}

int
h_member_add(struct mesh *m, const char *name, const char *allow, const char *url,
	     struct member *mb, char *err, size_t errlen)
{
	if (h_agent_add(m, name, allow, &mb->a) != 0) {
		snprintf(err, errlen, "cotal agent add %s failed", name);
		return -1;
	}
	if (url != NULL)
		return h_connect_url(m, url, mb->a.creds, &mb->c, err, errlen);
	return h_connect(m, mb->a.creds, &mb->c, err, errlen);
}

int
h_connect_manager(struct mesh *m, struct conn *c, struct ctl_client **cl, char *err,
		  size_t errlen)
{
	char actor[IDENT_MAX + 1];
	struct jwt j;

	*cl = NULL;
	if (h_connect_profile(m, "supervisor", c, err, errlen) != 0 ||
	    jwt_decode(c->creds.jwt, strlen(c->creds.jwt), &j, err, errlen) != 0)
		return -1;
	/* cli/mint.c: a standing credential's principal is local.<user key>. */
	snprintf(actor, sizeof(actor), "%s", j.sub);
	jwt_free(&j);
	if ((*cl = ctl_client_new(m->space, "local", actor, "manager")) == NULL) {
		snprintf(err, errlen, "no rail client");
		return -1;
	}
	ctl_client_attach(*cl, c->nc);
	return 0;
}

int
h_peer_up(struct mesh *m, const char *name, const char *allow, struct h_peer *p, char *err,
	  size_t errlen)
{
	memset(p, 0, sizeof(*p));
	if (h_agent_add(m, name, allow, &p->a) != 0) {
		snprintf(err, errlen, "cannot add agent %s", name);
		return -1;
	}
	if (h_connect(m, p->a.creds, &p->c, err, errlen) != 0)
		return -1;
	if ((p->cl = ctl_client_new(m->space, p->a.owner, p->a.actor, name)) == NULL) {
		snprintf(err, errlen, "no rail client for %s", name);
		h_close(&p->c);
		return -1;
	}
	ctl_client_attach(p->cl, p->c.nc);
	return 0;
}

void
h_peer_down(struct h_peer *p)
{
	ctl_client_free(p->cl);
	p->cl = NULL;
	h_close(&p->c);
}

/* Agent a's CotalMessage on channel, deduplicated by its id or not. */
static int
post_with(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	  const char *id, const char *text, uint64_t *seq, bool dedup)
{
	jsPubOptions po;
	char subj[1024], from[256];
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	json_t *msg;
	char *body;
	natsStatus s;

	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", m->token, a->owner, a->actor, channel);
	snprintf(from, sizeof(from), "%s.%s", a->owner, a->actor);
	msg = json_pack("{s:s, s:I, s:s, s:{s:s, s:s}, s:[{s:s, s:s}], s:s}",
	    "id", id, "ts", (json_int_t)wall_ms(), "space", m->space,
	    "from", "id", from, "name", a->name,
	    "parts", "kind", "text", "text", text, "channel", channel);
	body = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	jsPubOptions_Init(&po);
	if (dedup) {
		po.MsgId = id;
		po.MaxWait = 3000;
	}
	s = js_Publish(&pa, c->js, subj, body, (int)strlen(body), dedup ? &po : NULL, &jerr);
	free(body);
	if (s != NATS_OK)
		return -1;
	if (seq != NULL)
		*seq = pa->Sequence;
	jsPubAck_Destroy(pa);
	return 0;
}

int
h_post(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
       const char *id, const char *text, uint64_t *seq)
{
	return post_with(c, m, a, channel, id, text, seq, false);
}

int
h_post_dedup(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	     const char *id, const char *text, uint64_t *seq)
{
	return post_with(c, m, a, channel, id, text, seq, true);
}

/*
 * ---- the agent's dlv_ durable ----
 *
 * Pulled through lib/nats/pull.c, not libnats's fetch: after a broker
 * restart libnats 3.4.1's _fetch overran the array it sized (ASan). One
 * puller a call, and nothing left in flight when the call returns, as with
 * libnats's fetch.
 */

/*
 * Bind (never create) the agent's dlv_ durable, as the agent does. As
 * libnats's bind did, the durable's info is asked for first: a durable
 * that does not exist is refused, and an answer that does not come (a
 * consumer API the credential may not use) is let pass.
 */
static int
dlv_bind(struct conn *c, struct mesh *m, const struct agent *a, struct puller *p,
	 char *durable, size_t dlen, char *err, size_t errlen)
{
	char stream[256], why[512];
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(stream, sizeof(stream), "DLV_%s", m->token);
	snprintf(durable, dlen, "dlv_%s-%s-%s", a->owner, a->actor, a->uid);
	s = js_GetConsumerInfo(&ci, c->js, stream, durable, NULL, &jerr);
	jsConsumerInfo_Destroy(ci);
	if (s != NATS_OK && s != NATS_TIMEOUT && jerr != JSNotEnabledErr) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "bind %s: %s (jerr %d)", durable, why, (int)jerr);
		return -1;
	}
	if (h_dlv_attach(c->nc, c->creds.jwt, m, a, p, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "bind %s: %s", durable, why);
		return -1;
	}
	return 0;
}

/*
 * Up to max messages by until (monotonic ms), as libnats's fetch answered:
 * NATS_OK with at least one, NATS_TIMEOUT with none by then, or the last
 * failure when the time ran out on one. A pull request that ends early (its
 * expiry, a leader's change), goes unanswered or fails is made again while
 * there is time. Each waits at most
 * PULL_WAIT_MS, so none outlives until by more (dlv_close waits for it).
 */
static natsStatus
dlv_fetch_by(struct puller *p, int max, int64_t until, natsMsgList *list)
{
	natsStatus s;

	natsStatus last = NATS_TIMEOUT;

	memset(list, 0, sizeof(*list));
	for (int64_t left; (left = until - mono_ms()) > 0;) {
		s = pull_fetch(p, max, (int)(left < PULL_WAIT_MS ? left : PULL_WAIT_MS), list);
		if (list->Count > 0)
			return NATS_OK;
		natsMsgList_Destroy(list);
		/* A failed fetch (the connection failing over to another node,
		 * the consumer's leader being elected: no responders) is tried
		 * again while there is time; the last failure is the answer
		 * when there is none left. It used to end a member's drain at
		 * once, with nothing: e2e_cluster saw a member that failed over
		 * from the killed node surface 0 of 216 frames DLV held. */
		last = s == NATS_OK ? NATS_TIMEOUT : s;
		if (s != NATS_OK && s != NATS_TIMEOUT)
			hi_sleep_ms(100);
	}
	return last;
}

/* Does m end the puller's open request (a status to its reply subject)? */
static bool
ends_request(const struct puller *p, natsMsg *m)
{
	char subj[sizeof(p->reply) + 24];

	snprintf(subj, sizeof(subj), "%s.%" PRIu64, p->reply, p->req);
	return strcmp(natsMsg_GetSubject(m), subj) == 0;
}

/*
 * Close the puller once none of its pull requests is open, or one is
 * overdue (PULL_LATE_MS: lost with a node). The broker counts what it
 * delivers to a closed subscription as delivered, and would send it again
 * only after the durable's ack wait (60 s): what comes meanwhile, and what
 * came but was not taken, is NAKed instead, to be delivered again at once.
 */
static void
dlv_close(struct puller *p)
{
	natsMsg *m = NULL;

	for (;;) {
		int64_t left = p->credit > 0 ? p->req_until + PULL_LATE_MS - mono_ms() : 0;
		natsStatus s = natsSubscription_NextMsg(&m, p->sub, left > 0 ? left : 0);
		if (s == NATS_NO_RESPONDERS) {
			p->credit = 0; /* nobody took the request */
			continue;
		}
		if (s != NATS_OK)
			break;
		const char *reply = natsMsg_GetReply(m);
		if (reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0) {
			pull_nak(p, m, 0);
			if (p->credit > 0)
				p->credit--;
		} else if (ends_request(p, m))
			p->credit = 0;
		natsMsg_Destroy(m);
	}
	pull_close(p);
}

int
h_dlv_fetch(struct conn *c, struct mesh *m, const struct agent *a, int ms, bool ack,
	    natsMsg **out, char *err, size_t errlen)
{
	char durable[512], why[512];
	struct puller p;
	natsMsgList list;
	natsStatus s;

	*out = NULL;
	if (dlv_bind(c, m, a, &p, durable, sizeof(durable), err, errlen) != 0)
		return -1;
	s = dlv_fetch_by(&p, 1, mono_ms() + ms, &list);
	if (s == NATS_OK) {
		*out = list.Msgs[0];
		list.Msgs[0] = NULL;
		if (ack)
			pull_ack(&p, *out);
	} else if (s != NATS_TIMEOUT) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "fetch %s: %s", durable, why);
	}
	natsMsgList_Destroy(&list);
	dlv_close(&p);
	return s == NATS_OK || s == NATS_TIMEOUT ? 0 : -1;
}

json_t *
h_dlv_drain(struct conn *c, struct mesh *m, const struct agent *a, int ms, int quiet_ms,
	    bool *headers_ok, char *err, size_t errlen)
{
	return h_dlv_drain_n(c, m, a, 1, ms, quiet_ms, headers_ok, err, errlen);
}

json_t *
h_dlv_drain_n(struct conn *c, struct mesh *m, const struct agent *a, size_t want, int ms,
	      int quiet_ms, bool *headers_ok, char *err, size_t errlen)
{
	char durable[512];
	struct puller p;
	json_t *out = json_array();

	*headers_ok = true;
	if (dlv_bind(c, m, a, &p, durable, sizeof(durable), err, errlen) != 0) {
		json_decref(out);
		return NULL;
	}
	/* Until want have come (or ms is over), then until quiet_ms pass
	 * with nothing new: a pause before the wanted ones is no end. */
	for (int64_t deadline = mono_ms() + ms, until = deadline;;
	    until = json_array_size(out) < want ? deadline : mono_ms() + quiet_ms) {
		natsMsgList list;
		if (dlv_fetch_by(&p, 256, until, &list) != NATS_OK)
			break;
		for (int i = 0; i < list.Count; i++) {
			const char *h = NULL;
			natsMsg *msg = list.Msgs[i];
			if (natsMsgHeader_Get(msg, "Cotal-Delivery-Frame", &h) != NATS_OK ||
			    strcmp(h, "1") != 0)
				*headers_ok = false;
			json_t *v = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg),
			    0, NULL);
			json_array_append_new(out, v ? v : json_null());
			pull_ack(&p, msg);
		}
		natsMsgList_Destroy(&list);
	}
	natsConnection_Flush(c->nc);
	dlv_close(&p);
	return out;
}

const char *
h_frame_text(json_t *frame)
{
	json_t *parts = json_object_get(json_object_get(frame, "msg"), "parts");

	return json_string_value(json_object_get(json_array_get(parts, 0), "text"));
}

void
h_frame_texts(json_t *frames, char *out, size_t len)
{
	size_t i, n = 0;
	json_t *f;

	out[0] = '\0';
	json_array_foreach(frames, i, f)
		n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s", i ? "," : "",
		    h_frame_text(f) ? h_frame_text(f) : "?");
}

int
h_dlv_texts(struct conn *c, struct mesh *m, const struct agent *a, int ms, int quiet_ms,
	    char *out, size_t len, char *err, size_t errlen)
{
	return h_dlv_texts_n(c, m, a, 1, ms, quiet_ms, out, len, err, errlen);
}

size_t
h_texts_count(const char *texts)
{
	size_t n = *texts != '\0';

	for (; *texts != '\0'; texts++)
		n += *texts == ',';
	return n;
}

int
h_dlv_texts_n(struct conn *c, struct mesh *m, const struct agent *a, size_t want, int ms,
	      int quiet_ms, char *out, size_t len, char *err, size_t errlen)
{
	bool hdr = false;
	json_t *frames = h_dlv_drain_n(c, m, a, want, ms, quiet_ms, &hdr, err, errlen);

	if (frames == NULL)
		return -1;
	h_frame_texts(frames, out, len);
	json_decref(frames);
	if (!hdr) {
		snprintf(err, errlen, "%s: a frame without the delivery header", a->name);
		return -1;
	}
	return 0;
}

int
h_dlv_attach(natsConnection *nc, const char *jwt, struct mesh *m, const struct agent *a,
	     struct puller *pl, char *err, size_t errlen)
{
	char stream[256], durable[512], inbox[REPLY_INBOX_MAX];

	snprintf(stream, sizeof(stream), "DLV_%s", m->token);
	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", a->owner, a->actor, a->uid);
	if (jwt_reply_inbox(jwt, inbox, sizeof(inbox), err, errlen) != 0)
		return -1;
	if (pull_attach(nc, inbox, stream, durable, pl, err, errlen) != 0) {
		snprintf(err + strlen(err), errlen - strlen(err), " (binding %s)", durable);
		return -1;
	}
	return 0;
}

void
h_dlv_surface(struct puller *pl, atomic_bool *stop, void (*on_frame)(void *arg, natsMsg *m),
	      void *arg, atomic_int *errors)
{
	while (!atomic_load(stop)) {
		natsMsgList list = { 0 };
		natsStatus s = pull_fetch(pl, 256, 500, &list);
		if (s == NATS_OK) {
			for (int i = 0; i < list.Count; i++) {
				on_frame(arg, list.Msgs[i]);
				pull_ack(pl, list.Msgs[i]);
			}
		} else if (s != NATS_TIMEOUT) {
			atomic_fetch_add(errors, 1);
			hi_sleep_ms(100);
		}
		natsMsgList_Destroy(&list);
	}
}

void
h_member_up(struct mesh *m, struct conn *prov, struct member *mb, const char *name,
	    const char *channel, bool join)
{
	char err[1024];

	if (h_member_add(m, name, channel, NULL, mb, err, sizeof(err)) != 0 ||
	    (join && h_member_join(prov, m, &mb->a, channel, 1, err, sizeof(err)) != 0))
		fail_msg("%s: %s", name, err);
}
