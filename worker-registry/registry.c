/*
 * worker-registry: the membership registry and the control rails (seed,
 * "The three pieces" and "Where it runs"; WIRE.md §5).
 *
 * Serves P.ctl.delivery.*.* (queue "delivery"), P.ctl.delivery-admin.*.*
 * (queue "delivery-admin") and P.live.delivery.*.* (queue
 * "live.delivery"). Every request passes the guards here first: a reply
 * subject bound to the request subject (else dropped unanswered), a sender
 * whose from.id is the subject's caller and a principal, a known op, a
 * well-formed body. ctl.delivery requests wait in a fair queue, one line per
 * caller (fairq.h: callers in turn, each bounded in requests and bytes), and
 * are decoded and served by a small pool; a caller past its share is refused
 * at once, before anything of its body is read, so that a flood costs the
 * rail one cheap refusal per request and no other caller's turn.
 * ctl.delivery-admin requests one at a time in arrival order, except the
 * lifecycleMemberships inventories, which are answered beside them, those
 * that arrive together sharing one read of the members bucket.
 *
 * May: read the presence, channels, members, acl buckets and CHAT (through
 * short-lived consumers), write membership rows, publish catch-up entries
 * to P.dinbox.*.*.*, answer on the rails' reply subjects, and, as the $SYS
 * observer and evictor whose nonces the supervisor signs, read CONNZ of the
 * space account and KICK its connections.
 */
#include "worker-registry/registry.h"
#include "worker-registry/registry_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"

#define UNANSWERED_LOG_EVERY_MS 10000

struct registry G;

/* What the supervisor says of the lease (IPC_LEASE). */
static struct {
	pthread_mutex_t mu;
	uint32_t state;
	char instance[IPC_INSTANCE_MAX];
} lease = { PTHREAD_MUTEX_INITIALIZER, IPC_LEASE_NONE, "" };

static struct {
	pthread_mutex_t mu;
	int64_t last_ms;
	uint64_t suppressed;
} unanswered = { PTHREAD_MUTEX_INITIALIZER, 0, 0 };

/* ---- answering ---- */

bool
effect_begin(struct request *r)
{
	return fence_begin(&W.fence, r->ticket);
}

void
effect_done(void)
{
	fence_done(&W.fence);
}

int64_t
max_payload(void)
{
	return natsConnection_GetMaxPayload(W.nc);
}

static void
publish_reply(const char *subject, const char *body, size_t len)
{
	natsStatus s = natsConnection_Publish(W.nc, subject, body, (int)len);

	if (s != NATS_OK) {
		char why[256];
		conn_strerror(s, why, sizeof(why));
		log_warnx("cannot answer on %.200s: %s", subject, why);
	}
}

void
reply_send(struct request *r, char *body, size_t len)
{
	if (body == NULL)
		fatalx("out of memory");
	/* The seed: a reply larger than max_payload cannot be published;
	 * the caller gets its size at once instead of a timeout. */
	body = ctl_reply_fit(body, &len, max_payload());
	if (body == NULL)
		fatalx("out of memory");
	/* A unit dispatched before a QUIESCE never answers after it. */
	if (effect_begin(r)) {
		publish_reply(r->reply, body, len);
		effect_done();
	}
	free(body);
}

/*
 * Answers that change nothing and say the daemon is not serving (the
 * re-checking refusal, a stale liveness reading) go out while the fence is
 * closed: they are what a caller should hear then.
 */
static void
reply_unfenced(struct request *r, char *body, size_t len)
{
	if (body == NULL)
		fatalx("out of memory");
	publish_reply(r->reply, body, len);
	free(body);
}

void
reply_error(struct request *r, const char *fmt, ...)
{
	char text[CTL_WHY_MAX];
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	worker_count(C_REFUSED, 1);
	char *body = ctl_reply_error(text, &len);
	reply_send(r, body, len);
}

void
reply_data(struct request *r, json_t *data)
{
	size_t len;
	char *body = ctl_reply_ok(data, &len);

	reply_send(r, body, len);
}

/* ---- the ops ---- */

/* A ctl.delivery request whose arguments were read (args.h). */
static void
ctl_serve(struct request *r)
{
	switch (r->args.op) {
	case REG_OP_JOIN:
		op_durable_join(r);
		break;
	case REG_OP_LEAVE:
		op_durable_leave(r);
		break;
	case REG_OP_LIST:
		op_list_memberships(r);
		break;
	case REG_OP_HISTORY:
		op_read_history(r);
		break;
	case REG_OP_REGISTER:
		op_register_channel(r);
		break;
	default:
		fatalx("op %s routed to the ctl.delivery queue", r->req.op);
	}
}

/* ---- the rails ---- */

static void
log_unanswered(const char *subject, const char *reply)
{
	int64_t now = mono_ms();

	worker_count(C_UNANSWERED, 1);
	pthread_mutex_lock(&unanswered.mu);
	if (unanswered.last_ms != 0 && now - unanswered.last_ms < UNANSWERED_LOG_EVERY_MS) {
		unanswered.suppressed++;
	} else {
		log_warnx("dropped a request on %.200s unanswered: its reply subject %.200s is not "
		    "%.200s.reply.<…> (and %llu more since the last line)", subject,
		    reply ? reply : "(none)", subject, (unsigned long long)unanswered.suppressed);
		unanswered.last_ms = now;
		unanswered.suppressed = 0;
	}
	pthread_mutex_unlock(&unanswered.mu);
}

/* WIRE.md §5: the liveness reply, from the daemon's own lease reading. */
static void
answer_liveness(struct request *r)
{
	uint32_t state;
	char instance[IPC_INSTANCE_MAX];

	pthread_mutex_lock(&lease.mu);
	state = lease.state;
	snprintf(instance, sizeof(instance), "%s", lease.instance);
	pthread_mutex_unlock(&lease.mu);
	json_t *v = json_pack("{s:s, s:s, s:s}", "plane", "delivery", "responder",
	    state == IPC_LEASE_SERVING ? "bound" : "stale", "instance", instance);
	char *body = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(v);
	if (state == IPC_LEASE_SERVING)
		reply_send(r, body, body ? strlen(body) : 0);
	else
		reply_unfenced(r, body, body ? strlen(body) : 0);
}

static bool
rechecking(void)
{
	bool b;

	pthread_mutex_lock(&lease.mu);
	b = lease.state == IPC_LEASE_RECHECKING;
	pthread_mutex_unlock(&lease.mu);
	return b;
}

/*
 * Decode r's body into r->req and read its op's arguments into r->args
 * (args.h): true, or false with r refused (the sender check, a malformed
 * body, an op the rail does not serve, an argument).
 */
static bool
request_decode(struct request *r, const char *data, size_t len)
{
	char why[CTL_WHY_MAX];

	if (reg_request_read(data, len, &r->caller, &r->req, &r->args, why, sizeof(why)) == 0)
		return true;
	reply_error(r, "%s", why);
	return false;
}

/* Requests shed past a caller's share: one cause, its lines rate-limited
 * with their count (lib/log.h). */
static void
note_shed(const struct rail_caller *c)
{
	static struct log_limit shed = LOG_LIMIT_INIT;

	log_warnx_limited(&shed, "%s.%s is past its share of %s.ctl.delivery (%d requests or %d "
	    "bytes waiting): beyond %d refusals a second its requests are shed unanswered",
	    c->owner, c->actor, G.prefix, REG_CALLER_WAITING, REG_CALLER_BYTES,
	    REG_REFUSALS_PER_S);
}

/* A request as it arrived: its reply subject, fence ticket and time. */
static struct request *
request_new(const struct rail_caller *caller, const char *reply)
{
	struct request *r;

	if ((r = calloc(1, sizeof(*r))) == NULL || (r->reply = strdup(reply)) == NULL)
		fatalx("out of memory");
	r->caller = *caller;
	r->ticket = fence_ticket(&W.fence);
	r->arrived_ms = mono_ms();
	return r;
}

/*
 * A ctl.delivery request into its caller's line, body and all (decoded
 * when its turn comes). A caller past its share is refused at once, with a
 * reply made in advance and sent unfenced (it changes nothing), its body
 * unread: a flood costs the rail one cheap refusal a request.
 */
static void
ctl_arrive(const struct rail_caller *caller, const char *reply, natsMsg *msg)
{
	size_t bytes = (size_t)natsMsg_GetDataLength(msg), len;
	enum fairq_verdict v = queue_admits(Q_CTL, caller, bytes);

	if (v == FAIRQ_OK) {
		/* A copy: the message belongs to a connection that may be
		 * replaced before its turn comes. */
		struct request *r = request_new(caller, reply);
		if ((r->body = malloc(bytes + 1)) == NULL)
			fatalx("out of memory");
		memcpy(r->body, natsMsg_GetData(msg), bytes);
		r->body[bytes] = '\0';
		r->body_len = bytes;
		if ((v = queue_push(Q_CTL, r, bytes)) == FAIRQ_OK) {
			natsMsg_Destroy(msg);
			return;
		}
		request_free(r);
	}
	if (v == FAIRQ_NOMEM)
		fatalx("out of memory");
	refused_note(caller);
	if (queue_refusal_due(caller, v)) {
		worker_count(C_REFUSED, 1);
		const char *body = queue_refusal(v, &len);
		publish_reply(reply, body, len);
	} else {
		worker_count(C_SHED, 1);
		note_shed(caller);
	}
	natsMsg_Destroy(msg);
}

/*
 * A request off a rail, on the subscription's thread: the guards, then the
 * queue it waits in. Cheap and bounded: a ctl.delivery body is not read
 * here; an admin body is decoded here once (its op picks the queue).
 */
static void
on_request(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	enum rail rail = (enum rail)(intptr_t)closure;
	const char *subject = natsMsg_GetSubject(msg), *reply = natsMsg_GetReply(msg);
	char why[CTL_WHY_MAX];
	struct rail_caller caller;
	struct request *r = NULL;

	(void)nc, (void)sub;
	if (!rail_reply_bound(subject, reply)) {
		log_unanswered(subject, reply);
		natsMsg_Destroy(msg);
		return;
	}
	worker_count(C_REQUESTS, 1);
	if (rail_subject_parse(subject, G.prefix, &caller, why, sizeof(why)) != 0) {
		/* The subscription's wildcards admit only this shape; what is
		 * left is a token that is no identity token. */
		memset(&caller, 0, sizeof(caller));
		caller.rail = rail;
		r = request_new(&caller, reply);
		reply_error(r, "%s", CTL_ERR_SENDER);
		goto done;
	}
	if (caller.rail != rail) {
		log_unanswered(subject, reply);
		goto done;
	}
	if (rail == RAIL_CTL && !rechecking()) {
		ctl_arrive(&caller, reply, msg);
		return;
	}
	r = request_new(&caller, reply);
	if (rail == RAIL_LIVE) {
		answer_liveness(r);
		goto done;
	}
	if (rechecking()) {
		size_t len;
		char *body = ctl_reply_error(CTL_ERR_RECHECKING, &len);
		worker_count(C_REFUSED, 1);
		reply_unfenced(r, body, len);
		goto done;
	}
	if (!request_decode(r, natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg)))
		goto done;
	/* The admin rail's ops are admin_serve's, in arrival order; the
	 * inventory is the one that does not wait behind them. */
	if (queue_push(r->args.op == REG_OP_INVENTORY ? Q_INVENTORY : Q_ADMIN, r, 0) == FAIRQ_OK) {
		natsMsg_Destroy(msg);
		return;
	}
	reply_error(r, "delivery: %d requests are already waiting on this rail; retry",
	    REG_QUEUE_MAX);
done:
	request_free(r);
	natsMsg_Destroy(msg);
}

/* ---- the serving threads ---- */

static void *
ctl_thread(void *arg)
{
	(void)arg;
	while (worker_wait_open() && queues_running()) {
		struct request *r = queue_pop(Q_CTL, 200);
		if (r == NULL)
			continue;
		if (request_decode(r, r->body, r->body_len))
			ctl_serve(r);
		queue_done(r);
		request_free(r);
	}
	return NULL;
}

static void *
admin_thread(void *arg)
{
	(void)arg;
	while (worker_wait_open() && queues_running()) {
		struct request *r = queue_pop(Q_ADMIN, 200);
		if (r == NULL)
			continue;
		admin_serve(r);
		request_free(r);
	}
	return NULL;
}

/*
 * Inventories: what arrived together is answered together, after one read
 * of the members bucket; a request that arrives while that read runs waits
 * for the next one (its read must begin after it arrived).
 */
static void *
inventory_thread(void *arg)
{
	struct request *batch[REG_QUEUE_MAX];

	(void)arg;
	while (worker_wait_open() && queues_running()) {
		int n = 0;
		struct request *r = queue_pop(Q_INVENTORY, 200);
		if (r == NULL)
			continue;
		batch[n++] = r;
		/* A burst: gather while requests keep coming, each within the
		 * gather time of the one before, for at most ten of those. */
		int64_t cap = mono_ms() + 10 * REG_INVENTORY_GATHER_MS;
		while (n < REG_QUEUE_MAX) {
			int64_t left = REG_INVENTORY_GATHER_MS;
			if (mono_ms() + left > cap)
				left = cap - mono_ms();
			if (left <= 0 || (r = queue_pop(Q_INVENTORY, (int)left)) == NULL)
				break;
			batch[n++] = r;
		}
		admin_inventories(batch, n);
		for (int i = 0; i < n; i++)
			request_free(batch[i]);
	}
	return NULL;
}

/* ---- the role ---- */

static natsSubscription *subs[RAIL_COUNT];
static natsConnection *rail_nc; /* ctl.delivery's own connection */
static uint64_t drops_seen[RAIL_COUNT]; /* the library's count, as last read */

static void
rails_close(void)
{
	for (int i = 0; i < RAIL_COUNT; i++) {
		if (subs[i] != NULL)
			natsSubscription_Unsubscribe(subs[i]);
		natsSubscription_Destroy(subs[i]);
		subs[i] = NULL;
		drops_seen[i] = 0;
	}
	natsConnection_Destroy(rail_nc);
	rail_nc = NULL;
}

/*
 * What the library dropped of a rail's messages (its pending limits
 * reached: the callback fell behind), counted per rail and logged at most
 * once every UNANSWERED_LOG_EVERY_MS: requests no guard refused, lost
 * without an answer; their callers see a timeout.
 */
static void
rails_count_drops(void)
{
	static const int counter[RAIL_COUNT] = {
		[RAIL_CTL] = C_DROPPED_CTL, [RAIL_ADMIN] = C_DROPPED_ADMIN,
		[RAIL_LIVE] = C_DROPPED_LIVE,
	};
	static struct log_limit drops = LOG_LIMIT_INIT;

	for (int i = 0; i < RAIL_COUNT; i++) {
		int64_t dropped = 0;
		if (subs[i] == NULL ||
		    natsSubscription_GetDropped(subs[i], &dropped) != NATS_OK ||
		    dropped < 0 || (uint64_t)dropped <= drops_seen[i])
			continue;
		uint64_t more = (uint64_t)dropped - drops_seen[i];
		drops_seen[i] = (uint64_t)dropped;
		worker_count(counter[i], more);
		log_warnx_limited(&drops, "the library dropped %llu requests of %s.%s unanswered "
		    "(its pending limits, %d messages or %d bytes, were reached: the rail fell "
		    "behind); %llu in all on this connection", (unsigned long long)more, G.prefix,
		    rail_kind((enum rail)i), REG_PENDING_MSGS, REG_PENDING_BYTES,
		    (unsigned long long)dropped);
	}
}

static int
rails_open(char *err, size_t errlen)
{
	char subj[REG_PREFIX_MAX + 64];

	/* The agents' rail comes in on a connection of its own: a flood of it
	 * waits in that socket, never before the registry's JetStream replies
	 * or the admin and liveness rails. Every answer goes out on W.nc. */
	if (worker_connect_aux("rails", &rail_nc, err, errlen) != 0)
		return -1;
	for (int i = 0; i < RAIL_COUNT; i++) {
		snprintf(subj, sizeof(subj), "%s.%s.*.*", G.prefix, rail_kind((enum rail)i));
		natsStatus s = natsConnection_QueueSubscribe(&subs[i],
		    i == RAIL_CTL ? rail_nc : W.nc, subj,
		    rail_queue((enum rail)i), on_request, (void *)(intptr_t)i);
		if (s == NATS_OK)
			s = natsSubscription_SetPendingLimits(subs[i], REG_PENDING_MSGS,
			    REG_PENDING_BYTES);
		if (s != NATS_OK) {
			char why[256];
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "subscribe %s (queue %s): %s", subj,
			    rail_queue((enum rail)i), why);
			return -1;
		}
	}
	/* A subscription the credential may not make is a violation reported
	 * asynchronously: make it show before we call the rails served. */
	natsConnection_FlushTimeout(rail_nc, 2000);
	natsConnection_FlushTimeout(W.nc, 2000);
	if (conn_violation("Subscription", err, errlen))
		return -1;
	return 0;
}

static int
setup(char *err, size_t errlen)
{
	space_token(W.cfg.space, G.token, sizeof(G.token));
	snprintf(G.prefix, sizeof(G.prefix), "cotal.%s", G.token);
	snprintf(G.chat, sizeof(G.chat), "CHAT_%s", G.token);
	snprintf(G.members_bucket, sizeof(G.members_bucket), "cotal_members_%s", G.token);
	snprintf(G.channels_bucket, sizeof(G.channels_bucket), "cotal_channels_%s", G.token);
	if (natsConnection_JetStream(&G.js, W.nc, NULL) != NATS_OK) {
		snprintf(err, errlen, "cannot make a JetStream context");
		return -1;
	}
	if (kv_open(err, errlen) != 0)
		return -1;
	return rails_open(err, errlen);
}

static void
teardown(void)
{
	rails_close();
	admin_close();
	kv_close();
	jsCtx_Destroy(G.js);
	G.js = NULL;
}

static void
registry_run(void)
{
	pthread_t ctl[REG_CTL_THREADS], admin, inv;
	char err[1024];

	/* Set up, retrying while the broker is not ready; the supervisor's
	 * backoff paces a worker that cannot serve at all. */
	while (setup(err, sizeof(err)) != 0) {
		teardown();
		if (strstr(err, "Permissions Violation") != NULL ||
		    strstr(err, "ermission") != NULL)
			fatalx("cannot serve the rails: %s", err);
		log_warnx("cannot serve the rails yet: %s; retrying", err);
		worker_nap(2000);
		if (!worker_serving())
			return;
	}
	log_ok("serving %s.ctl.delivery, ctl.delivery-admin and live.delivery (max_payload %lld)",
	    G.prefix, (long long)max_payload());
	worker_bound();
	queues_run(true);
	for (int i = 0; i < REG_CTL_THREADS; i++)
		if (pthread_create(&ctl[i], NULL, ctl_thread, NULL) != 0)
			fatalx("cannot start a ctl.delivery thread");
	if (pthread_create(&admin, NULL, admin_thread, NULL) != 0 ||
	    pthread_create(&inv, NULL, inventory_thread, NULL) != 0)
		fatalx("cannot start the admin threads");
#ifdef COTAL_TEST_HOOKS
	admin_test_kick();
	/* COTAL_TEST_RELOAD_FLOOD=N: a compromised registry sending N
	 * RELOAD_REQ a second, unasked (their answers match no request). */
	const char *flood = getenv("COTAL_TEST_RELOAD_FLOOD");
	int64_t flooded = 0;
	uint64_t flood_id = (uint64_t)1 << 62;
#endif
	while (worker_serving()) {
		worker_nap(200);
#ifdef COTAL_TEST_HOOKS
		if (flood != NULL && mono_ms() - flooded >= 1000) {
			struct ipc_reload_req req = { 0 };
			flooded = mono_ms();
			for (int k = atoi(flood); k > 0; k--) {
				req.id = flood_id++;
				if (worker_send(IPC_RELOAD_REQ, &req, sizeof(req)) != 0)
					fatal("ipc: send RELOAD_REQ");
			}
		}
#endif
		rails_count_drops();
		/* The waiting gauges are set at every push and pop (queues.c). */
		refused_report();
	}
	rails_count_drops();
	/* No new requests; those waiting are answered on the next connection
	 * (the seed: a request read while the connection is replaced is
	 * answered once it is back). */
	rails_close();
	queues_run(false);
	for (int i = 0; i < REG_CTL_THREADS; i++)
		pthread_join(ctl[i], NULL);
	pthread_join(admin, NULL);
	pthread_join(inv, NULL);
	natsConnection_FlushTimeout(W.nc, 1000);
	teardown();
}

static bool
registry_msg(const struct ipc_msg *m)
{
	struct ipc_lease l;

	switch (m->type) {
	case IPC_LEASE:
		memcpy(&l, m->payload, sizeof(l));
		pthread_mutex_lock(&lease.mu);
		lease.state = l.state;
		snprintf(lease.instance, sizeof(lease.instance), "%s", l.instance);
		pthread_mutex_unlock(&lease.mu);
		return true;
	case IPC_SYS_CREDS:
		admin_sys_creds(m);
		return true;
	case IPC_RELOAD_REP:
		admin_reload_reply(m);
		return true;
	case IPC_KICK_REP:
		admin_kick_reply(m);
		return true;
	default:
		return false;
	}
}

/* At exit: what waits in the queues goes unanswered with the process. */
static void
registry_exit(void)
{
	queues_drain();
	refused_free();
	gate_reset();
}

static void
registry_main(void)
{
	static bool once;

	if (!once) {
		queues_init();
		atexit(registry_exit);
		once = true;
	}
	registry_run();
}

const struct worker_role registry_role = {
	.name = "registry",
	.sandbox = SANDBOX_REGISTRY,
	.run = registry_main,
	.on_msg = registry_msg,
};
