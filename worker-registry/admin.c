/*
 * The ctl.delivery-admin ops (WIRE.md §5): the manager's and the auth
 * service's calls. They are answered one at a time in arrival order,
 * except the lifecycleMemberships inventory a retirement reads, which is
 * answered beside them (registry.c routes it to its own thread).
 *
 * Eviction and liveness sweep the broker as the $SYS observer: its JWT
 * came from the supervisor (IPC_SYS_CREDS), its nonces are signed by it,
 * its seed never comes here. A KICK is the supervisor's to send: the sweep
 * asks for each (IPC_KICK_REQ) and the supervisor sends it only for a
 * connection its own CONNZ shows in the space's account, of the principal
 * named (supervisor/kick.h). The evictor's JWT comes here only to say
 * whether eviction is available.
 */
#include "worker-registry/registry_int.h"
#include "worker-registry/sweep.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/servers.h"
#include "worker/worker.h"

#define SYS_CONNECT_MS 5000

/* The $SYS users, indexed by enum ipc_sys. */
static struct sys_user {
	bool have;
	struct ipc_sys_creds h;
	char *jwt;
	natsConnection *nc;   /* the observer's alone (observer_conn) */
} sys[3];
static pthread_mutex_t sys_mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * A request to the supervisor waiting for its answer: its id (every reply
 * echoes one, and only the awaited one is taken), the answer, its arrival.
 * One per kind (reloadCreds, a KICK), one request of a kind at a time.
 */
struct sup_ask {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_id, want;
	bool answered;
	uint8_t rep[sizeof(struct ipc_kick_rep)]; /* the larger of the answers */
};
#define SUP_ASK_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, false, { 0 } }
_Static_assert(sizeof(struct ipc_reload_rep) <= sizeof(struct ipc_kick_rep), "sup_ask.rep");

static struct sup_ask reload = SUP_ASK_INIT, kick = SUP_ASK_INIT;

/* The id of a new request, the one awaited from now on. */
static uint64_t
ask_begin(struct sup_ask *a)
{
	pthread_mutex_lock(&a->mu);
	uint64_t id = a->want = a->next_id++;
	a->answered = false;
	pthread_mutex_unlock(&a->mu);
	return id;
}

/* Wait up to ms (or until the worker stops serving) for the answer: true
 * with its len bytes in rep. */
static bool
ask_wait(struct sup_ask *a, int ms, void *rep, size_t len)
{
	int64_t until = mono_ms() + ms;

	pthread_mutex_lock(&a->mu);
	while (!a->answered && mono_ms() < until && worker_serving()) {
		struct timespec ts = deadline_in_ms(CLOCK_REALTIME, 100);
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	}
	bool answered = a->answered;
	if (answered)
		memcpy(rep, a->rep, len);
	a->want = 0;
	pthread_mutex_unlock(&a->mu);
	return answered;
}

/* An answer with this id (the main thread's): taken when it is awaited. */
static void
ask_answer(struct sup_ask *a, uint64_t id, const void *rep, size_t len)
{
	pthread_mutex_lock(&a->mu);
	if (id == a->want) {
		memcpy(a->rep, rep, len);
		a->answered = true;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
}

/* The supervisor checks a KICK on its own CONNZ, then sends it: both its
 * requests' timeouts, and a margin. */
#define KICK_WAIT_MS (2 * SWEEP_REQUEST_MS + 2000)

/* ---- the $SYS users ---- */

void
admin_sys_creds(const struct ipc_msg *m)
{
	struct ipc_sys_creds h;
	char *jwt;

	memcpy(&h, m->payload, sizeof(h));
	if ((jwt = strndup((const char *)m->payload + sizeof(h), m->len - sizeof(h))) == NULL)
		fatalx("out of memory");
	pthread_mutex_lock(&sys_mu);
	free(sys[h.which].jwt);
	sys[h.which].jwt = jwt;
	sys[h.which].h = h;
	sys[h.which].have = true;
	pthread_mutex_unlock(&sys_mu);
}

static natsStatus
sys_jwt(char **jwt, char **errtxt, void *arg)
{
	struct sys_user *u = arg;

	pthread_mutex_lock(&sys_mu);
	*jwt = u->jwt ? strdup(u->jwt) : NULL;
	pthread_mutex_unlock(&sys_mu);
	if (*jwt == NULL) {
		*errtxt = strdup("no $SYS JWT from the supervisor");
		return NATS_ERR;
	}
	return NATS_OK;
}

static natsStatus
sys_sign(char **errtxt, unsigned char **sig, int *siglen, const char *nonce, void *arg)
{
	struct sys_user *u = arg;

	return worker_sign_sys((enum ipc_sys)u->h.which, nonce, sig, siglen, errtxt);
}

/* The $SYS observer's connection, opened on first use; NULL with err. The
 * registry connects as no other $SYS user: the evictor's KICKs are the
 * supervisor's (supervisor/kick.h). */
static natsConnection *
observer_conn(char *err, size_t errlen)
{
	struct sys_user *u = &sys[IPC_SYS_OBSERVER];
	natsOptions *o = NULL;
	char name[64];
	natsStatus s;

	if (u->nc != NULL)
		return u->nc;
	pthread_mutex_lock(&sys_mu);
	bool have = u->have;
	pthread_mutex_unlock(&sys_mu);
	if (!have) {
		snprintf(err, errlen, "no $SYS observer credential is provisioned");
		return NULL;
	}
	snprintf(name, sizeof(name), "cotal-deliveryd registry ($SYS observer)");
	s = natsOptions_Create(&o);
	if (s == NATS_OK)
		s = conn_servers(o, W.cfg.url);
	if (s == NATS_OK)
		s = natsOptions_SetName(o, name);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(o, SYS_CONNECT_MS);
	if (s == NATS_OK)
		s = natsOptions_SetCustomInboxPrefix(o, u->h.inbox_prefix);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(o, -1);
	if (s == NATS_OK)
		s = natsOptions_SetUserCredentialsCallbacks(o, sys_jwt, u, sys_sign, u);
	if (s == NATS_OK)
		s = worker_tls_options(o);
	for (int i = 0; s == NATS_OK && i < CONNECT_TRIES; i++) {
		s = natsConnection_Connect(&u->nc, o);
		/* libnats fails about one connect in 256 on a signature
		 * (natsconn.c): a refusal is tried again. */
		if (s != NATS_NOT_PERMITTED && s != NATS_CONNECTION_AUTH_FAILED)
			break;
		if (i + 1 < CONNECT_TRIES)
			s = NATS_OK;
	}
	natsOptions_Destroy(o);
	if (s != NATS_OK) {
		char why[512];
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "cannot connect as the $SYS observer (%.12s…): %s", u->h.user,
		    why);
		u->nc = NULL;
		return NULL;
	}
	log_ok("connected as the $SYS observer (%.12s…) for eviction sweeps", u->h.user);
	return u->nc;
}

/* sweep_kick_fn: the supervisor's answer to one KICK_REQ. */
static natsStatus
kick_via_supervisor(void *arg, const char *server, long long cid, const char *principal,
		    char *reply, size_t replylen)
{
	struct ipc_kick_req req = { 0 };
	struct ipc_kick_rep rep;

	(void)arg;
	req.cid = (uint64_t)cid;
	snprintf(req.server, sizeof(req.server), "%s", server);
	snprintf(req.principal, sizeof(req.principal), "%s", principal);
	req.id = ask_begin(&kick);
	if (worker_send(IPC_KICK_REQ, &req, sizeof(req)) != 0)
		fatal("ipc: send KICK_REQ");
	if (!ask_wait(&kick, KICK_WAIT_MS, &rep, sizeof(rep))) {
		snprintf(reply, replylen, "the supervisor did not answer within %d s",
		    KICK_WAIT_MS / 1000);
		return NATS_TIMEOUT;
	}
	snprintf(reply, replylen, "%s", rep.reply);
	switch (rep.outcome) {
	case IPC_KICK_SENT:
		return NATS_OK;
	case IPC_KICK_NO_RESPONDERS:
		return NATS_NO_RESPONDERS;
	case IPC_KICK_REFUSED:
		return NATS_NOT_PERMITTED;
	default:
		return NATS_TIMEOUT;
	}
}

#ifdef COTAL_TEST_HOOKS
/*
 * Test hook (COTAL_TEST_KICK=<server>:<cid>:<principal>[,…]): a compromised
 * registry asking the supervisor for the KICK of each connection it names,
 * in order, once it serves; it says what came of each.
 */
void
admin_test_kick(void)
{
	const char *v = getenv("COTAL_TEST_KICK");
	char server[IPC_SERVER_ID_MAX], principal[IPC_PRINCIPAL_MAX], reply[SWEEP_KICK_REPLY_MAX];
	long long cid;

	for (; v != NULL && sscanf(v, "%71[^:]:%lld:%135[^,]", server, &cid, principal) == 3;
	    v = strchr(v, ',') != NULL ? strchr(v, ',') + 1 : NULL) {
		natsStatus st = kick_via_supervisor(NULL, server, cid, principal, reply,
		    sizeof(reply));
		log_info("test: KICK of connection %lld on %s for %s: %s (%.200s)", cid, server,
		    principal, natsStatus_GetText(st), reply);
	}
}
#endif

void
admin_kick_reply(const struct ipc_msg *m)
{
	struct ipc_kick_rep rep;

	memcpy(&rep, m->payload, sizeof(rep));
	ask_answer(&kick, rep.id, &rep, sizeof(rep));
}

void
admin_close(void)
{
	natsConnection_Destroy(sys[IPC_SYS_OBSERVER].nc);
	sys[IPC_SYS_OBSERVER].nc = NULL;
}

/*
 * A test build may hold a sweep whose first principal is P for MS
 * milliseconds: COTAL_TEST_SWEEP_DELAY=<P>:<MS> (the e2e suite makes a
 * slow eviction to queue inventories behind). A release build has no such
 * knob.
 */
static void
test_sweep_delay(const char *first)
{
#ifdef COTAL_TEST_HOOKS
	const char *v = getenv("COTAL_TEST_SWEEP_DELAY"), *colon;

	if (v == NULL || (colon = strrchr(v, ':')) == NULL)
		return;
	if ((size_t)(colon - v) == strlen(first) && strncmp(v, first, strlen(first)) == 0)
		worker_nap(atoi(colon + 1));
#else
	(void)first;
#endif
}

/* The servers earlier sweeps heard, by name (sweeps run one at a time, on
 * the admin rail's thread). */
static struct roster_seen sweep_seen;

/* How many servers the daemon was given: the URLs of its list (the
 * non-empty items, as conn_servers reads it), every one of which must
 * answer a sweep. */
static int
servers_given(const char *url)
{
	int n = servers_count(url);

	return n > 0 ? n : 1;
}

/* The sweeper of a request: 0, or -1 with the refusal. An absent evictor
 * is only reported when eviction is asked for. */
static int
sweeper_for(struct sweeper *sw, bool evict, char *why, size_t whylen)
{
	char err[1024];

	memset(sw, 0, sizeof(*sw));
	if ((sw->observer = observer_conn(err, sizeof(err))) == NULL) {
		snprintf(why, whylen, "delivery: the broker cannot be swept: %s", err);
		return -1;
	}
	snprintf(sw->account, sizeof(sw->account), "%s", sys[IPC_SYS_OBSERVER].h.account);
	snprintf(sw->inbox, sizeof(sw->inbox), "%s", sys[IPC_SYS_OBSERVER].h.inbox_prefix);
	sw->expect = servers_given(W.cfg.url);
	sw->seen = &sweep_seen;
	if (!evict)
		return 0;
	pthread_mutex_lock(&sys_mu);
	bool evictor = sys[IPC_SYS_EVICTOR].have;
	pthread_mutex_unlock(&sys_mu);
	if (!evictor) {
		snprintf(why, whylen, "delivery: eviction is unavailable: no $SYS evictor "
		    "credential is provisioned (deny-new-only posture until it is provisioned)");
		return -1;
	}
	sw->kick = kick_via_supervisor;
	return 0;
}

/* evictPrincipal (one result) or evictPrincipals (an array of them). */
static void
op_evict(struct request *r)
{
	bool many = r->args.op == REG_OP_EVICT_MANY;
	static struct eviction_result res[SWEEP_PRINCIPALS_MAX];
	const char *list[SWEEP_PRINCIPALS_MAX];
	char why[CTL_WHY_MAX];
	struct sweeper sw;
	int n = 0;

	if (!many)
		list[n++] = r->args.principal;
	else
		for (; n < r->args.nprincipals; n++)
			list[n] = r->args.principals[n];
	if (sweeper_for(&sw, true, why, sizeof(why)) != 0)
		goto refuse;
	if (n > 0)
		test_sweep_delay(list[0]);
	sweep_evict(&sw, list, n, res);
	worker_count(C_EVICTIONS, (uint64_t)n);
	/* One line a request; a line of its own for each principal that was
	 * kicked or is not verified gone. */
	int kicked = 0, gone = 0;
	for (int i = 0; i < n; i++) {
		kicked += res[i].kicked;
		gone += res[i].verified_gone;
		if (res[i].kicked > 0 || !res[i].verified_gone)
			log_info("%s %s: kicked %d, remaining %d, %s%s%s", r->req.op, res[i].principal,
			    res[i].kicked, res[i].remaining,
			    res[i].verified_gone ? "verified gone" : "NOT verified gone",
			    res[i].note[0] ? " — " : "", res[i].note);
	}
	log_info("%s: %d principal%s, %d connection%s kicked, %d verified gone", r->req.op, n,
	    n == 1 ? "" : "s", kicked, kicked == 1 ? "" : "s", gone);
	if (!many) {
		reply_data(r, eviction_result_json(&res[0]));
		return;
	}
	json_t *out = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(out, eviction_result_json(&res[i]));
	reply_data(r, out);
	return;
refuse:
	reply_error(r, "%s", why);
}

static void
op_liveness(struct request *r)
{
	char principal[PRINCIPAL_MAX + 1], why[CTL_WHY_MAX], note[SWEEP_NOTE_MAX] = "";
	struct sweeper sw;
	bool complete = false;

	snprintf(principal, sizeof(principal), "%s", r->args.principal);
	if (sweeper_for(&sw, false, why, sizeof(why)) != 0) {
		reply_error(r, "%s", why);
		return;
	}
	enum principal_state st = sweep_liveness(&sw, principal, &complete, note, sizeof(note));
	json_t *d = json_pack("{s:s, s:s, s:b}", "principal", principal, "state",
	    principal_state_name(st), "sweepComplete", complete);
	if (note[0] != '\0')
		json_object_set_new(d, "note", json_string(note));
	reply_data(r, d);
}

/* ---- reloadCreds: the supervisor decides ---- */

void
admin_reload_reply(const struct ipc_msg *m)
{
	struct ipc_reload_rep rep;

	memcpy(&rep, m->payload, sizeof(rep));
	ask_answer(&reload, rep.id, &rep, sizeof(rep));
}

/* args.h reads what the sweep and the supervisor take. */
_Static_assert(REG_EVICT_MAX == SWEEP_PRINCIPALS_MAX, "evictPrincipals' bound");
_Static_assert(REG_SHA256_HEX == IPC_SHA256_HEX - 1, "reloadCreds' expected");

static void
op_reload(struct request *r)
{
	struct ipc_reload_req req = { 0 };
	struct ipc_reload_rep rep;

	snprintf(req.expected, sizeof(req.expected), "%s", r->args.expected);
	req.id = ask_begin(&reload);
	if (worker_send(IPC_RELOAD_REQ, &req, sizeof(req)) != 0)
		fatal("ipc: send RELOAD_REQ");
	if (!ask_wait(&reload, REG_RELOAD_WAIT_MS, &rep, sizeof(rep)))
		reply_error(r, "reloadCreds: the supervisor did not answer within %d s; nothing is "
		    "known to be adopted", REG_RELOAD_WAIT_MS / 1000);
	else if (!rep.ok)
		reply_error(r, "%s", rep.error);
	else
		reply_data(r, json_pack("{s:{s:b, s:b, s:s}}", "delivery", "ok", 1, "brokerAccepted",
		    rep.broker_accepted, "residentSwap", "scheduled"));
}

void
admin_serve(struct request *r)
{
	switch (r->args.op) {
	case REG_OP_EVICT_MANY:
	case REG_OP_EVICT:
		op_evict(r);
		break;
	case REG_OP_LIVENESS:
		op_liveness(r);
		break;
	case REG_OP_RELOAD:
		op_reload(r);
		break;
	default:
		fatalx("admin op %s routed to the serial queue", r->req.op);
	}
}

/* ---- lifecycleMemberships ---- */

struct inventory {
	struct request *r;
	struct lifecycle who;
	bool valid;
	json_t *rows;
};

static int
inventory_row(const char *key, void *value, void *arg)
{
	struct inventory *v = arg;
	const struct mrow *m = value;

	(void)key;
	if (strcmp(m->row.who.uid, v->who.uid) != 0 || strcmp(m->row.who.owner, v->who.owner) != 0 ||
	    strcmp(m->row.who.actor, v->who.actor) != 0)
		return 0;
	json_t *e = json_pack("{s:s, s:I, s:I, s:b}", "channel", m->row.channel, "generation",
	    (json_int_t)m->row.generation, "joinCursor", (json_int_t)m->row.join_cursor,
	    "activated", m->row.activated);
	if (m->row.has_leave)
		json_object_set_new(e, "leaveCursor", json_integer((json_int_t)m->row.leave_cursor));
	json_array_append_new(v->rows, e);
	return 0;
}

/*
 * The seed: "Inventories that arrive together share one read of the
 * members bucket, and each one's read begins after it arrived." Each
 * request first leaves its fence mark (when its lifecycle's row still
 * allows reads), then the read waits for the joins and leaves already
 * running, and one barrier read of the members mirror serves them all.
 */
void
admin_inventories(struct request **v, int n)
{
	static struct inventory inv[REG_QUEUE_MAX];
	char err[512], principal[PRINCIPAL_MAX + 1];
	uint64_t mark = 0;
	int valid = 0;

	for (int i = 0; i < n; i++) {
		struct inventory *x = &inv[i];
		memset(x, 0, sizeof(*x));
		x->r = v[i];
		snprintf(principal, sizeof(principal), "%s", v[i]->args.principal);
		snprintf(x->who.uid, sizeof(x->who.uid), "%s", v[i]->args.uid);
		principal_parse(principal, x->who.owner, sizeof(x->who.owner), x->who.actor,
		    sizeof(x->who.actor));
		x->valid = true;
		valid++;
	}
	if (valid == 0)
		return;
	worker_count(C_INVENTORIES, (uint64_t)valid);
	if (kvmirror_barrier(&G.acl.rows.tail, err, sizeof(err)) != 0) {
		for (int i = 0; i < n; i++)
			if (inv[i].valid)
				reply_error(inv[i].r, "lifecycleMemberships: cannot read the read ACLs now "
				    "(%s); retry", err);
		return;
	}
	/* Each inventory's row: held by the index, or read now, all at once. */
	/* A narrowed or retired row refuses those writes by itself. */
	static char lcs[REG_QUEUE_MAX][LIFECYCLE_MAX + 1];
	static bool allows[REG_QUEUE_MAX];
	const char *unheld[REG_QUEUE_MAX];
	int nunheld = 0;
	kvmirror_lock(&G.acl.rows.tail);
	for (int i = 0; i < n; i++) {
		allows[i] = false;
		if (!inv[i].valid)
			continue;
		lifecycle_format(&inv[i].who, lcs[i], sizeof(lcs[i]));
		const struct acl_row *row = aclindex_get(&G.acl, lcs[i]);
		if (row != NULL)
			allows[i] = row->state == ACL_LIVE && row->npatterns > 0;
		else {
			bool dup = false;
			for (int j = 0; j < nunheld && !dup; j++)
				dup = strcmp(unheld[j], lcs[i]) == 0;
			if (!dup)
				unheld[nunheld++] = lcs[i];
		}
	}
	kvmirror_unlock(&G.acl.rows.tail);
	static struct acl_row read[REG_QUEUE_MAX];
	if (nunheld > 0 && aclindex_read_many(&G.acl, unheld, (size_t)nunheld, read, err,
	    sizeof(err)) != 0) {
		for (int i = 0; i < n; i++)
			if (inv[i].valid)
				reply_error(inv[i].r, "lifecycleMemberships: cannot read the read ACLs now "
				    "(%s); retry", err);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (!inv[i].valid)
			continue;
		for (int j = 0; j < nunheld; j++)
			if (strcmp(unheld[j], lcs[i]) == 0)
				allows[i] = read[j].state == ACL_LIVE && read[j].npatterns > 0;
		uint64_t m = gate_mark(lcs[i], allows[i]);
		if (allows[i])
			log_info("lifecycleMemberships: %s still allows reads: its durable joins and "
			    "leaves are refused on this daemon from now on", lcs[i]);
		mark = m > mark ? m : mark;
	}
	for (int j = 0; j < nunheld; j++)
		acl_row_free(&read[j]);
	gate_wait(mark);
	if (kvmirror_barrier(&G.members, err, sizeof(err)) != 0) {
		for (int i = 0; i < n; i++)
			if (inv[i].valid)
				reply_error(inv[i].r, "lifecycleMemberships: cannot read the membership "
				    "registry now (%s); retry", err);
		return;
	}
	worker_count(C_MEMBER_READS, 1);
	log_info("lifecycleMemberships: %d inventor%s answered from one read of %s", valid,
	    valid == 1 ? "y" : "ies", G.members_bucket);
	kvmirror_lock(&G.members);
	for (int i = 0; i < n; i++)
		if (inv[i].valid) {
			inv[i].rows = json_array();
			strmap_each(&G.rows, inventory_row, &inv[i]);
		}
	kvmirror_unlock(&G.members);
	for (int i = 0; i < n; i++)
		if (inv[i].valid)
			reply_data(inv[i].r, json_pack("{s:o}", "memberships", inv[i].rows));
}
