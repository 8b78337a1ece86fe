/*
 * The caller's side of the control rails (see ctlclient.h).
 *
 * Each request has its own subscription on its own reply subject
 * "<request subject>.reply.<random>" and a slot in its client's table of
 * pending requests. Replies, disconnects and closes arrive on nats.c's
 * threads: they find the client by a number, not a pointer, in one
 * registry under one lock, so an event that nats.c delivers late (a closed
 * callback after the client was freed, a reply after its call gave up)
 * finds nothing and is dropped.
 */
#include "lib/wire/ctlclient.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/wire/records.h"
#include "lib/wire/tokens.h"

#define CTL_SUBJECT_MAX (6 + SPACE_TOKEN_MAX + 32 + PRINCIPAL_MAX)
#define CTL_REPLY_RANDOM 24            /* hex chars after ".reply." */
#define CTL_REPLY_MAX_SUBJECT (CTL_SUBJECT_MAX + 8 + CTL_REPLY_RANDOM)
#define CTL_NAME_MAX 256               /* from.name */
#define CTL_CONNECT_POLL_MS 20         /* while the connection reconnects */
#define CTL_RETRY_MIN_GAP_MS 100       /* the shortest gap as the wait runs out */
#define LIVE_INSTANCE_MAX 256

enum slot_state { SLOT_FREE = 0, SLOT_PENDING, SLOT_DONE };

struct slot {
	enum slot_state state;
	natsConnection *nc;            /* the connection it was sent on */
	char reply[CTL_REPLY_MAX_SUBJECT];
	enum ctl_outcome outcome;      /* SLOT_DONE */
	char *body;                    /* CTL_REPLIED: the reply's bytes */
	size_t len;
	char why[256];
};

struct ctl_client {
	uintptr_t id;
	struct ctl_client *next;       /* the registry */
	pthread_cond_t cond;           /* a slot finished or nc changed */
	natsConnection *nc;
	char prefix[7 + SPACE_TOKEN_MAX];
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	char principal[PRINCIPAL_MAX + 1];
	char name[CTL_NAME_MAX + 1];
	struct slot slots[CTL_CLIENT_PENDING_MAX];
};

/* One lock for the registry and every client's slots and nc. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ctl_client *g_clients;
static uintptr_t g_next_id = 1;

static const char *const outcome_names[] = {
	[CTL_REPLIED] = "replied",
	[CTL_TIMEOUT] = "timeout",
	[CTL_NO_RESPONDERS] = "no responders",
	[CTL_CLOSED] = "connection closed",
	[CTL_BAD_REPLY] = "bad reply",
	[CTL_FAILED] = "failed",
};

const char *
ctl_outcome_name(enum ctl_outcome o)
{
	return (unsigned)o <= CTL_FAILED ? outcome_names[o] : "?";
}

const char *
liveness_name(enum liveness l)
{
	switch (l) {
	case LIVE_BOUND:
		return "bound";
	case LIVE_UNBOUND:
		return "unbound";
	case LIVE_STALE:
		return "stale";
	case LIVE_UNKNOWN:
		return "unknown";
	}
	return "?";
}

/* g_mu held. */
static struct ctl_client *
client_find(uintptr_t id)
{
	for (struct ctl_client *c = g_clients; c != NULL; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* g_mu held: end a pending slot without a reply. */
static void
slot_fail(struct slot *s, enum ctl_outcome o, const char *why)
{
	s->state = SLOT_DONE;
	s->outcome = o;
	snprintf(s->why, sizeof(s->why), "%.255s", why);
}

/* g_mu held: fail every request pending on nc (NULL: on any connection
 * but the client's current one). */
static void
fail_pending(struct ctl_client *c, natsConnection *nc, const char *why)
{
	bool woke = false;

	for (size_t i = 0; i < CTL_CLIENT_PENDING_MAX; i++) {
		struct slot *s = &c->slots[i];
		if (s->state != SLOT_PENDING)
			continue;
		if (nc != NULL ? s->nc != nc : s->nc == c->nc)
			continue;
		slot_fail(s, CTL_CLOSED, why);
		woke = true;
	}
	if (woke)
		pthread_cond_broadcast(&c->cond);
}

/*
 * The seed: "An endpoint's pending control and delivery requests reject if
 * their connection closes ... Normal replies, timeouts and broker
 * no-responder answers keep their usual classification." A disconnect that
 * nats.c is still reconnecting is not a close: the request stays pending,
 * its reply subscription is renewed on the rebuilt connection, and it ends
 * with its reply or its timeout. Only the close (nats.c gave up, or the
 * endpoint closed it) and a replaced connection reject it.
 */
static void
on_closed(natsConnection *nc, void *arg)
{
	pthread_mutex_lock(&g_mu);
	struct ctl_client *c = client_find((uintptr_t)arg);
	if (c != NULL)
		fail_pending(c, nc, "the connection to the broker closed before the reply");
	pthread_mutex_unlock(&g_mu);
}

static void
on_reply(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg)
{
	const char *subject = natsMsg_GetSubject(msg);

	(void)nc;
	(void)sub;
	pthread_mutex_lock(&g_mu);
	struct ctl_client *c = client_find((uintptr_t)arg);
	for (size_t i = 0; c != NULL && i < CTL_CLIENT_PENDING_MAX; i++) {
		struct slot *s = &c->slots[i];
		if (s->state != SLOT_PENDING || strcmp(s->reply, subject) != 0)
			continue;
		if (natsMsg_IsNoResponders(msg)) {
			slot_fail(s, CTL_NO_RESPONDERS, "no responders");
		} else {
			int n = natsMsg_GetDataLength(msg);
			s->len = n > 0 ? (size_t)n : 0;
			s->body = malloc(s->len + 1);
			if (s->body == NULL) {
				slot_fail(s, CTL_FAILED, "out of memory reading the reply");
			} else {
				if (s->len > 0)
					memcpy(s->body, natsMsg_GetData(msg), s->len);
				s->body[s->len] = '\0';
				s->state = SLOT_DONE;
				s->outcome = CTL_REPLIED;
			}
		}
		pthread_cond_broadcast(&c->cond);
		break;
	}
	/* Destroyed before the waiter can run: nats.c hands a destroyed
	 * message to its collector thread, and nats_Close() joins that thread
	 * without waiting for subscription threads. A message destroyed after
	 * the CLI's nats_Close() (this callback still unwinding while main
	 * returns) is never freed: LeakSanitizer reported it. */
	natsMsg_Destroy(msg);
	pthread_mutex_unlock(&g_mu);
}

struct ctl_client *
ctl_client_new(const char *space, const char *owner, const char *actor, const char *name)
{
	char token[SPACE_TOKEN_MAX + 1];
	pthread_condattr_t ca;
	struct ctl_client *c;

	if (space == NULL || owner == NULL || actor == NULL || strlen(owner) > IDENT_MAX ||
	    strlen(actor) > IDENT_MAX || !identity_token_valid(owner) ||
	    !identity_token_valid(actor) || !space_token(space, token, sizeof(token)))
		return NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	if (pthread_condattr_init(&ca) != 0) {
		free(c);
		return NULL;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&c->cond, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		free(c);
		return NULL;
	}
	pthread_condattr_destroy(&ca);
	snprintf(c->prefix, sizeof(c->prefix), "cotal.%s", token);
	snprintf(c->owner, sizeof(c->owner), "%s", owner);
	snprintf(c->actor, sizeof(c->actor), "%s", actor);
	principal_format(owner, actor, c->principal, sizeof(c->principal));
	snprintf(c->name, sizeof(c->name), "%s", name != NULL ? name : c->principal);
	pthread_mutex_lock(&g_mu);
	c->id = g_next_id++;
	c->next = g_clients;
	g_clients = c;
	pthread_mutex_unlock(&g_mu);
	return c;
}

void
ctl_client_free(struct ctl_client *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&g_mu);
	for (struct ctl_client **p = &g_clients; *p != NULL; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&g_mu);
	/* No call runs on a client being freed; a reply that raced in left
	 * its bytes in a slot. */
	for (size_t i = 0; i < CTL_CLIENT_PENDING_MAX; i++)
		free(c->slots[i].body);
	pthread_cond_destroy(&c->cond);
	free(c);
}

void
ctl_client_conn_opts(struct ctl_client *c, struct conn_opts *o)
{
	o->on_closed = on_closed;
	o->on_conn_arg = (void *)c->id;
	/* A request is sent while the connection is up or not at all: never
	 * from nats.c's reconnect buffer after its caller stopped waiting. */
	o->no_reconnect_buffer = true;
}

void
ctl_client_attach(struct ctl_client *c, natsConnection *nc)
{
	pthread_mutex_lock(&g_mu);
	c->nc = nc;
	/* The seed: "... including when the endpoint stops or replaces it." */
	fail_pending(c, NULL, "the connection was replaced before the reply");
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&g_mu);
}

void
ctl_result_free(struct ctl_result *r)
{
	if (r == NULL)
		return;
	json_decref(r->reply);
	r->reply = NULL;
	r->data = NULL;
	r->error = NULL;
}

static void
result_init(struct ctl_result *r)
{
	memset(r, 0, sizeof(*r));
}

static void __attribute__((format(printf, 3, 4)))
result_set(struct ctl_result *r, enum ctl_outcome o, const char *fmt, ...)
{
	va_list ap;

	r->outcome = o;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static bool
reply_subject(const char *subject, char *buf, size_t len)
{
	unsigned char rnd[CTL_REPLY_RANDOM / 2];
	size_t got = 0;
	int n;

	while (got < sizeof(rnd)) {
		ssize_t r = getrandom(rnd + got, sizeof(rnd) - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		got += (size_t)r;
	}
	n = snprintf(buf, len, "%s.reply.", subject);
	if (n < 0 || (size_t)n + CTL_REPLY_RANDOM >= len)
		return false;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(buf + n + 2 * i, 3, "%02x", rnd[i]);
	return true;
}

/* g_mu held: wait on c->cond until deadline (monotonic ms); false when it
 * passed. */
static bool
wait_until(struct ctl_client *c, int64_t deadline)
{
	struct timespec ts;

	if (mono_ms() >= deadline)
		return false;
	ts.tv_sec = (time_t)(deadline / 1000);
	ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
	return pthread_cond_timedwait(&c->cond, &g_mu, &ts) != ETIMEDOUT ||
	    mono_ms() < deadline;
}

/*
 * Wait until the client's connection is connected, at most until deadline:
 * a request is never handed to nats.c while it reconnects, because nats.c
 * would send it from its reconnect buffer later, after the caller gave up.
 * The connection (borrowed), or NULL with the outcome in out.
 */
static natsConnection *
connected(struct ctl_client *c, int64_t deadline, struct ctl_result *out)
{
	for (;;) {
		pthread_mutex_lock(&g_mu);
		natsConnection *nc = c->nc;
		pthread_mutex_unlock(&g_mu);
		if (nc == NULL) {
			result_set(out, CTL_FAILED, "no connection attached");
			return NULL;
		}
		natsConnStatus st = natsConnection_Status(nc);
		if (st == NATS_CONN_STATUS_CONNECTED)
			return nc;
		if (st == NATS_CONN_STATUS_CLOSED) {
			result_set(out, CTL_CLOSED, "the connection to the broker is closed");
			return NULL;
		}
		int64_t now = mono_ms();
		if (now >= deadline) {
			result_set(out, CTL_TIMEOUT, "not connected to the broker within the timeout; "
			    "nothing sent");
			return NULL;
		}
		pthread_mutex_lock(&g_mu);
		int64_t until = now + CTL_CONNECT_POLL_MS;
		wait_until(c, until < deadline ? until : deadline);
		pthread_mutex_unlock(&g_mu);
	}
}

/* A free slot of c, pending on nc for reply; NULL when all are taken. */
static struct slot *
slot_take(struct ctl_client *c, natsConnection *nc, const char *reply)
{
	struct slot *s = NULL;

	pthread_mutex_lock(&g_mu);
	for (size_t i = 0; i < CTL_CLIENT_PENDING_MAX; i++) {
		if (c->slots[i].state == SLOT_FREE) {
			s = &c->slots[i];
			break;
		}
	}
	if (s != NULL) {
		memset(s, 0, sizeof(*s));
		s->state = SLOT_PENDING;
		s->nc = nc;
		snprintf(s->reply, sizeof(s->reply), "%s", reply);
	}
	pthread_mutex_unlock(&g_mu);
	return s;
}

/*
 * Send body on rail and wait for what ends it. On CTL_REPLIED *body_out
 * holds the reply's bytes (malloc'd, NUL-terminated).
 */
static void
call_raw(struct ctl_client *c, enum rail rail, const char *body, size_t len, int timeout_ms,
	 char **body_out, size_t *len_out, struct ctl_result *out)
{
	char subject[CTL_SUBJECT_MAX], reply[CTL_REPLY_MAX_SUBJECT], why[512];
	int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	natsSubscription *sub = NULL;
	struct slot *s = NULL;
	natsConnection *nc;
	natsStatus st;

	*body_out = NULL;
	*len_out = 0;
	if (!rail_subject_format(rail, c->prefix, c->owner, c->actor, subject, sizeof(subject)) ||
	    !reply_subject(subject, reply, sizeof(reply))) {
		result_set(out, CTL_FAILED, "cannot build the request or reply subject");
		return;
	}
	for (;;) {
		if ((nc = connected(c, deadline, out)) == NULL)
			return;
		if ((s = slot_take(c, nc, reply)) == NULL) {
			result_set(out, CTL_FAILED, "%d requests already in flight on this client",
			    CTL_CLIENT_PENDING_MAX);
			return;
		}
		/* Subscribe first: the broker handles our SUB before our PUB,
		 * so the reply (or its no-responders answer) has somewhere to
		 * land. */
		st = natsConnection_Subscribe(&sub, nc, reply, on_reply, (void *)c->id);
		if (st == NATS_OK) {
			pthread_mutex_lock(&g_mu);
			bool still = s->state == SLOT_PENDING && c->nc == nc;
			pthread_mutex_unlock(&g_mu);
			if (still)
				st = natsConnection_PublishRequest(nc, subject, reply, body, (int)len);
		}
		if (st != NATS_INSUFFICIENT_BUFFER)
			break;
		/* The connection started reconnecting after connected() saw it
		 * up, and its reconnect buffer of 0 bytes refused the request:
		 * nothing went out. Wait for the connection again. */
		natsSubscription_Unsubscribe(sub);
		natsSubscription_Destroy(sub);
		sub = NULL;
		pthread_mutex_lock(&g_mu);
		memset(s, 0, sizeof(*s));
		pthread_mutex_unlock(&g_mu);
	}
	if (st != NATS_OK) {
		conn_strerror(st, why, sizeof(why));
		pthread_mutex_lock(&g_mu);
		if (s->state == SLOT_PENDING)
			slot_fail(s, st == NATS_CONNECTION_CLOSED ? CTL_CLOSED : CTL_FAILED, why);
		pthread_mutex_unlock(&g_mu);
	}

	pthread_mutex_lock(&g_mu);
	while (s->state == SLOT_PENDING && wait_until(c, deadline))
		;
	if (s->state == SLOT_PENDING)
		slot_fail(s, CTL_TIMEOUT, "no reply within the timeout");
	out->outcome = s->outcome;
	if (s->outcome == CTL_REPLIED) {
		*body_out = s->body;
		*len_out = s->len;
		s->body = NULL;
	} else {
		snprintf(out->why, sizeof(out->why), "%.200s on %.300s", s->why, subject);
	}
	free(s->body);
	memset(s, 0, sizeof(*s));
	pthread_mutex_unlock(&g_mu);

	if (sub != NULL) {
		natsSubscription_Unsubscribe(sub);
		natsSubscription_Destroy(sub);
	}
}

static char *
request_body(struct ctl_client *c, const char *op, json_t *args, size_t *len)
{
	json_t *req = json_pack("{s:s, s:{s:s, s:s}}", "op", op, "from", "id", c->principal,
	    "name", c->name);
	char *text;

	if (req == NULL)
		return NULL;
	if (args != NULL && json_object_set(req, "args", args) != 0) {
		json_decref(req);
		return NULL;
	}
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (text != NULL)
		*len = strlen(text);
	return text;
}

void
ctl_call(struct ctl_client *c, enum rail rail, const char *op, json_t *args, int timeout_ms,
	 struct ctl_result *out)
{
	char *body, *reply = NULL;
	size_t len = 0, rlen = 0;
	json_t *root, *data;
	const char *error;
	bool ok;

	result_init(out);
	if (rail != RAIL_CTL && rail != RAIL_ADMIN) {
		result_set(out, CTL_FAILED, "ctl_call: not a control rail");
		return;
	}
	if (op == NULL || *op == '\0' || strlen(op) > CTL_OP_MAX ||
	    (args != NULL && !json_is_object(args))) {
		result_set(out, CTL_FAILED, "ctl_call: op must be 1-%d chars and args an object",
		    CTL_OP_MAX);
		return;
	}
	if ((body = request_body(c, op, args, &len)) == NULL) {
		result_set(out, CTL_FAILED, "out of memory building the request");
		return;
	}
	call_raw(c, rail, body, len, timeout_ms, &reply, &rlen, out);
	free(body);
	if (out->outcome != CTL_REPLIED)
		return;
	if (ctl_reply_parse(reply, rlen, &root, &ok, &data, &error, out->why,
	    sizeof(out->why)) != 0) {
		out->outcome = CTL_BAD_REPLY;
	} else {
		out->ok = ok;
		out->reply = root;
		out->data = data;
		out->error = error;
	}
	free(reply);
}

/*
 * The seed's cadence: "Only a request that times out or finds no responder
 * is retried. The first retry runs at once. Later retries are at most one
 * second apart, shortened as the wait runs out, so a daemon that binds in
 * its last seconds is still asked. The wait ends on time even while a retry
 * is still connecting, and nothing is sent after it."
 */
void
ctl_call_retry(struct ctl_client *c, enum rail rail, const char *op, json_t *args,
	       int per_try_ms, int total_ms, struct ctl_result *out)
{
	int64_t start = mono_ms(), deadline = start + (total_ms > 0 ? total_ms : 0);

	result_init(out);
	result_set(out, CTL_TIMEOUT, "the wait of %d ms is over; nothing sent", total_ms);
	for (int tries = 0;; tries++) {
		int64_t now = mono_ms(), sent = now, left = deadline - now;
		if (left <= 0)
			return; /* out holds the last try's outcome */
		ctl_result_free(out);
		ctl_call(c, rail, op, args, (int)(per_try_ms < left ? per_try_ms : left), out);
		if (out->outcome != CTL_TIMEOUT && out->outcome != CTL_NO_RESPONDERS)
			return;
		if (tries == 0)
			continue; /* the first retry runs at once */
		now = mono_ms();
		left = deadline - now;
		int64_t gap = CTL_RETRY_GAP_MS - (now - sent);
		int64_t room = left / 2 > CTL_RETRY_MIN_GAP_MS ? left / 2 : CTL_RETRY_MIN_GAP_MS;
		if (gap > room)
			gap = room;
		if (gap >= left)
			return; /* no room left for another try */
		if (gap > 0) {
			struct timespec ts = { .tv_sec = (time_t)(gap / 1000),
				.tv_nsec = (long)(gap % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
	}
}

static void
copy_text(char *dst, size_t len, const char *src)
{
	if (dst != NULL && len > 0)
		snprintf(dst, len, "%s", src);
}

enum liveness
ctl_liveness(struct ctl_client *c, int timeout_ms, char *instance, size_t len, char *why,
	     size_t whylen)
{
	struct ctl_result r;
	char *reply = NULL;
	size_t rlen = 0;
	enum liveness l = LIVE_UNKNOWN;
	json_error_t jerr;
	json_t *doc;

	copy_text(instance, len, "");
	copy_text(why, whylen, "");
	result_init(&r);
	call_raw(c, RAIL_LIVE, "", 0, timeout_ms, &reply, &rlen, &r);
	switch (r.outcome) {
	case CTL_REPLIED:
		break;
	case CTL_NO_RESPONDERS:
		/* WIRE.md §5: "Caller side: no responders = unbound". */
		copy_text(why, whylen, r.why);
		return LIVE_UNBOUND;
	default:
		/* The seed: "A liveness probe interrupted this way returns
		 * unknown, not unbound." So does a timeout. */
		copy_text(why, whylen, r.why);
		return LIVE_UNKNOWN;
	}
	doc = json_loadb(reply, rlen, JSON_REJECT_DUPLICATES, &jerr);
	free(reply);
	const char *responder = json_string_value(json_object_get(doc, "responder"));
	const char *inst = json_string_value(json_object_get(doc, "instance"));
	if (!json_is_object(doc) || responder == NULL) {
		const char *err = json_string_value(json_object_get(doc, "error"));
		if (why != NULL && whylen > 0)
			snprintf(why, whylen, "liveness reply: %s", doc == NULL ? jerr.text :
			    err != NULL ? err : "no responder field");
	} else if (strcmp(responder, "bound") == 0) {
		l = LIVE_BOUND;
	} else if (strcmp(responder, "stale") == 0) {
		l = LIVE_STALE;
	} else if (strcmp(responder, "unbound") == 0) {
		l = LIVE_UNBOUND;
	} else if (strcmp(responder, "unknown") == 0) {
		copy_text(why, whylen, "the daemon cannot tell whether it holds the lease");
	} else if (why != NULL && whylen > 0) {
		snprintf(why, whylen, "liveness reply: responder \"%.64s\" is not one of "
		    "bound, unbound, stale, unknown", responder);
	}
	if (inst != NULL && strlen(inst) <= LIVE_INSTANCE_MAX)
		copy_text(instance, len, inst);
	json_decref(doc);
	return l;
}
