/*
 * Verified eviction and principal liveness (worker-registry/sweep.h)
 * against a real broker in operator mode, driven with the space's $SYS
 * observer and evictor credentials exactly as the registry worker holds
 * them; the paging, refusal and missing-KICK paths, and two servers of a
 * cluster, against scripted CONNZ/KICK responders on a plain broker; and
 * a 2.9 broker, which has no KICK.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/creds/perms.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"
#include "worker-registry/sweep.h"

#define CLOSE_WAIT_MS 3000
#define NOTE_NO_EVICTOR "eviction is unavailable: no $SYS evictor credential is provisioned"
#define NOTE_NO_KICK "the broker does not support KICK (nats-server 2.10 or newer)"

static struct mesh mesh;
static struct agent alice, bob, carol, dave, erin;
static struct conn observer, evictor;
static char account[64];
static char observer_inbox[SWEEP_INBOX_MAX]; /* its credential's own reply prefix */

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void
sys_creds_path(struct mesh *m, const char *file, char *out, size_t outlen)
{
	char key[SPACE_KEY_MAX + 1];

	space_key(m->space, key, sizeof(key));
	snprintf(out, outlen, "%s/.cotal/space.%s/%s", m->dir, key, file);
}

/* The space account: the issuer account of the delivery credential. */
static int
space_account(struct mesh *m, char *out, size_t outlen)
{
	char path[H_PATH_MAX * 2], err[512];
	struct creds c;
	struct jwt j;
	int rc = -1;

	sys_creds_path(m, "delivery.creds", path, sizeof(path));
	if (creds_load(path, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ %s: %s\n", path, err);
		return -1;
	}
	if (jwt_decode(c.jwt, strlen(c.jwt), &j, err, sizeof(err)) == 0) {
		const char *acct = j.issuer_account ? j.issuer_account : j.iss;
		if (acct != NULL && acct[0] == 'A' && strlen(acct) < outlen) {
			strcpy(out, acct);
			rc = 0;
		}
		jwt_free(&j);
	} else {
		fprintf(stderr, "✗ delivery JWT: %s\n", err);
	}
	creds_free(&c);
	return rc;
}

/* Connect as an agent; the harness connects without reconnects, so a
 * kicked connection closes (a reconnecting one would be live again). */
static void
connect_agent(const struct agent *a, struct conn *c)
{
	char err[1024];

	if (h_connect(&mesh, a->creds, c, err, sizeof(err)) != 0)
		fail_msg("connect %s: %s", a->name, err);
}

/* The observer and the evictor of a mesh's space. */
static int
connect_sys(struct mesh *m, struct conn *obs, struct conn *ev)
{
	char path[H_PATH_MAX * 2], err[1024];

	sys_creds_path(m, "sys-observer.creds", path, sizeof(path));
	if (h_connect(m, path, obs, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ observer: %s\n", err);
		return -1;
	}
	sys_creds_path(m, "sys-evictor.creds", path, sizeof(path));
	if (h_connect(m, path, ev, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ evictor: %s\n", err);
		return -1;
	}
	return 0;
}

static int
setup(void **state)
{
	char err[256];

	(void)state;
	if (h_mesh_up(&mesh, "sweep", true) != 0 ||
	    h_agent_add(&mesh, "alice", "general", &alice) != 0 ||
	    h_agent_add(&mesh, "bob", "general", &bob) != 0 ||
	    h_agent_add(&mesh, "carol", "general", &carol) != 0 ||
	    h_agent_add(&mesh, "dave", "general", &dave) != 0 ||
	    h_agent_add(&mesh, "erin", "general", &erin) != 0 ||
	    space_account(&mesh, account, sizeof(account)) != 0 ||
	    connect_sys(&mesh, &observer, &evictor) != 0 ||
	    jwt_reply_inbox(observer.creds.jwt, observer_inbox, sizeof(observer_inbox), err,
	    sizeof(err)) != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	h_close(&observer);
	h_close(&evictor);
	h_mesh_down(&mesh);
	return 0;
}

/* The evictor's KICK sent straight, as its holder (the supervisor) does
 * once its own check passed: the sweep's half alone is tested here
 * (e2e_evict_guard tests the holder's check). */
static natsStatus
kick_direct(void *arg, const char *server, long long cid, const char *principal, char *reply,
	    size_t replylen)
{
	char subject[128], body[64];
	natsMsg *m = NULL;
	natsStatus st;

	(void)principal;
	snprintf(subject, sizeof(subject), "$SYS.REQ.SERVER.%s.KICK", server);
	snprintf(body, sizeof(body), "{\"cid\":%lld}", cid);
	st = natsConnection_RequestString(&m, arg, subject, body, SWEEP_REQUEST_MS);
	if (st == NATS_OK)
		snprintf(reply, replylen, "%.*s", natsMsg_GetDataLength(m), natsMsg_GetData(m));
	natsMsg_Destroy(m);
	return st;
}

static struct sweeper
sweeper_of(natsConnection *obs, natsConnection *ev, const char *acct)
{
	struct sweeper s = { .observer = obs, .kick = ev != NULL ? kick_direct : NULL,
		.kick_arg = ev };

	snprintf(s.account, sizeof(s.account), "%s", acct);
	/* The space's observer replies under its own prefix (the plain
	 * broker of the scripted tests lets any prefix through). */
	snprintf(s.inbox, sizeof(s.inbox), "%s", observer_inbox);
	return s;
}

/* Still connected: not closed and the broker answers a PING. */
static void
assert_alive(struct conn *c, const char *what)
{
	if (natsConnection_IsClosed(c->nc) || natsConnection_FlushTimeout(c->nc, 2000) != NATS_OK)
		fail_msg("%s lost its connection", what);
}

static void
evict1(struct sweeper *s, const char *principal, struct eviction_result *r)
{
	const char *ps[1] = { principal };

	sweep_evict(s, ps, 1, r);
}

/* ---- against the real broker ------------------------------------------- */

/* WIRE.md §5: "KICK each matching connection via $SYS.REQ.SERVER.<id>.KICK
 * {"cid":N} (broker ≥ 2.10), re-scan up to 3 rounds"; the seed: "A restart
 * verify-evicts every holder". */
static void
test_live_agent_is_kicked_and_verified_gone(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, account);
	struct conn a, dlv, prov, mgr;
	struct eviction_result r;
	char err[1024];

	(void)state;
	connect_agent(&alice, &a);
	/* The daemon's own credential, the provisioner and the manager stay:
	 * they are not alice ("the daemon's own connections and other
	 * non-principal users must never match"). */
	if (h_connect_profile(&mesh, "delivery", &dlv, err, sizeof(err)) != 0 ||
	    h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0 ||
	    h_connect_profile(&mesh, "supervisor", &mgr, err, sizeof(err)) != 0)
		fail_msg("connect: %s", err);
	evict1(&s, alice.principal, &r);
	assert_string_equal(r.principal, alice.principal);
	assert_true(r.kicked >= 1);
	assert_int_equal(r.remaining, 0);
	assert_true(r.verified_gone);
	assert_true(r.scan_complete);
	assert_string_equal(r.note, "");
	if (!h_wait_closed(&a, CLOSE_WAIT_MS))
		fail_msg("alice's connection is still open after a verified eviction");
	assert_alive(&dlv, "the delivery credential");
	assert_alive(&prov, "the provisioner");
	assert_alive(&mgr, "the manager");
	assert_alive(&observer, "the observer");
	assert_alive(&evictor, "the evictor");
	h_close(&a);
	h_close(&dlv);
	h_close(&prov);
	h_close(&mgr);
}

/* The brief: "A principal with no connection and a complete scan: kicked 0,
 * remaining 0, verifiedGone true." */
static void
test_absent_principal_is_verified_gone(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, account);
	struct eviction_result r;

	(void)state;
	evict1(&s, bob.principal, &r);
	assert_int_equal(r.kicked, 0);
	assert_int_equal(r.remaining, 0);
	assert_true(r.verified_gone);
	assert_true(r.scan_complete);
	assert_string_equal(r.note, "");
	assert_int_equal(s.connz_requests, 1);
	assert_int_equal(s.kick_requests, 0);
	/* A principal nobody was ever issued: the same. */
	evict1(&s, "u_abcdefghijklmnopqrstuvwxyz.nobody", &r);
	assert_true(r.verified_gone);
}

/* WIRE.md §5: "evictPrincipals | {principals:[…]} (at most 256) |
 * [EvictionResult…] same order" and "One request = one shared sweep"; the
 * seed: "the daemon answers each request with one shared sweep of the
 * broker". */
static void
test_several_principals_share_one_sweep(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, account);
	const char *ps[] = { dave.principal, bob.principal, carol.principal, dave.principal };
	struct eviction_result out[4];
	struct conn c, d;

	(void)state;
	connect_agent(&carol, &c);
	connect_agent(&dave, &d);
	sweep_evict(&s, ps, 4, out);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(out[i].principal, ps[i]);
		assert_int_equal(out[i].remaining, 0);
		assert_true(out[i].verified_gone);
		assert_true(out[i].scan_complete);
	}
	assert_int_equal(out[0].kicked, 1);
	assert_int_equal(out[1].kicked, 0);
	assert_int_equal(out[2].kicked, 1);
	assert_memory_equal(&out[3], &out[0], sizeof(out[0])); /* named twice, same result */
	/* One scan for all four, one verify re-scan after the KICKs (each one
	 * page), one KICK per connection. */
	assert_int_equal(s.connz_requests, 2);
	assert_int_equal(s.kick_requests, 2);
	assert_true(h_wait_closed(&c, CLOSE_WAIT_MS));
	assert_true(h_wait_closed(&d, CLOSE_WAIT_MS));
	h_close(&c);
	h_close(&d);
}

/* WIRE.md §5: "principalLiveness | {principal} | {principal,
 * state:"live"|"gone"|"unknown", sweepComplete, note?}". */
static void
test_liveness_live_then_gone(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, account);
	enum principal_state st = PRINCIPAL_UNKNOWN;
	char note[SWEEP_NOTE_MAX];
	bool complete = false;
	struct conn e;

	(void)state;
	connect_agent(&erin, &e);
	assert_int_equal(sweep_liveness(&s, erin.principal, &complete, note, sizeof(note)),
	    PRINCIPAL_LIVE);
	assert_true(complete);
	assert_string_equal(note, "");
	/* Liveness only looks: nothing was kicked. */
	assert_int_equal(s.kick_requests, 0);
	assert_alive(&e, "erin");
	assert_int_equal(sweep_liveness(&s, bob.principal, &complete, note, sizeof(note)),
	    PRINCIPAL_GONE);
	assert_true(complete);
	h_close(&e);
	/* The broker drops the connection once the socket closes. */
	for (int waited = 0; waited < CLOSE_WAIT_MS; waited += 50) {
		st = sweep_liveness(&s, erin.principal, &complete, note, sizeof(note));
		if (st != PRINCIPAL_LIVE)
			break;
		sleep_ms(50);
	}
	assert_int_equal(st, PRINCIPAL_GONE);
	assert_true(complete);
	assert_string_equal(principal_state_name(st), "gone");
}

/* WIRE.md §5 evictPrincipal: "Evict every connection of each principal"
 * (sweep.h), here two of one agent. */
static void
test_two_connections_of_one_agent_are_both_kicked(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, account);
	struct eviction_result r;
	struct conn a1, a2;

	(void)state;
	connect_agent(&alice, &a1);
	connect_agent(&alice, &a2);
	evict1(&s, alice.principal, &r);
	assert_int_equal(r.kicked, 2);
	assert_int_equal(r.remaining, 0);
	assert_true(r.verified_gone);
	assert_true(r.scan_complete);
	assert_true(h_wait_closed(&a1, CLOSE_WAIT_MS));
	assert_true(h_wait_closed(&a2, CLOSE_WAIT_MS));
	h_close(&a1);
	h_close(&a2);
}

/* WIRE.md §7: "a missing evictor only disables eviction"; the seed: "An
 * absent evictor keeps the documented pre-eviction, deny-new-only posture;
 * eviction itself remains unavailable until it is provisioned." */
static void
test_no_evictor_kicks_nothing(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, NULL, account);
	const char *ps[] = { bob.principal, carol.principal };
	struct eviction_result out[2];
	struct conn b;

	(void)state;
	connect_agent(&bob, &b);
	sweep_evict(&s, ps, 2, out);
	assert_int_equal(s.kick_requests, 0);
	/* bob is connected: not gone, and said why. */
	assert_int_equal(out[0].kicked, 0);
	assert_int_equal(out[0].remaining, 1);
	assert_false(out[0].verified_gone);
	assert_true(out[0].scan_complete);
	assert_string_equal(out[0].note, NOTE_NO_EVICTOR);
	/* carol is not: verified gone, with the same note. */
	assert_int_equal(out[1].kicked, 0);
	assert_int_equal(out[1].remaining, 0);
	assert_true(out[1].verified_gone);
	assert_string_equal(out[1].note, NOTE_NO_EVICTOR);
	sleep_ms(200);
	assert_alive(&b, "bob");
	h_close(&b);
}

/* WIRE.md §5: "An incomplete scan never reports verifiedGone." The
 * observer may only ask about its own space account: asked about another
 * one, the broker refuses the publish and nothing answers. */
static void
test_unanswered_scan_is_never_verified(void **state)
{
	struct sweeper s = sweeper_of(observer.nc, evictor.nc, "ABPPYVHEUWZ3ZZCFYDSF2SWFTZNEX3UE2ULM3QZ2FGB3BFTYTISNO6FR");
	struct eviction_result r;
	char note[SWEEP_NOTE_MAX];
	bool complete = true;

	(void)state;
	evict1(&s, bob.principal, &r);
	assert_false(r.scan_complete);
	assert_false(r.verified_gone);
	assert_int_equal(r.kicked, 0);
	assert_non_null(strstr(r.note, "scan incomplete: CONNZ at offset 0: no answer"));
	assert_int_equal(sweep_liveness(&s, bob.principal, &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_false(complete);
	assert_true(h_violation(&observer, "Permissions Violation for Publish to \"$SYS.REQ.ACCOUNT.", 2000));
}

/* A nats-server 2.9 has no KICK: "KICK ... (broker ≥ 2.10)" (WIRE.md §5). */
static void
test_broker_29_has_no_kick(void **state)
{
	struct mesh m29;
	struct agent a;
	struct conn obs, ev, c;
	struct eviction_result r;
	char acct[64], err[1024];
	struct sweeper s;

	(void)state;
	h_use_broker(H_BROKER_29);
	int up = h_mesh_up(&m29, "sweep29", true);
	h_use_broker(H_BROKER_210);
	if (up != 0) {
		fprintf(stderr, "! no 2.9 broker to test against: skipped\n");
		h_mesh_down(&m29);
		skip();
	}
	if (h_agent_add(&m29, "alice", "general", &a) != 0 ||
	    space_account(&m29, acct, sizeof(acct)) != 0 || connect_sys(&m29, &obs, &ev) != 0)
		fail_msg("a 2.9 mesh");
	if (h_connect(&m29, a.creds, &c, err, sizeof(err)) != 0)
		fail_msg("connect: %s", err);
	s = sweeper_of(obs.nc, ev.nc, acct);
	/* This mesh's observer has its own reply prefix. */
	if (jwt_reply_inbox(obs.creds.jwt, s.inbox, sizeof(s.inbox), err, sizeof(err)) != 0)
		fail_msg("observer inbox: %s", err);
	evict1(&s, a.principal, &r);
	if (r.kicked > 0) {
		fprintf(stderr, "! %s kicks: not a 2.9 broker, skipped\n", m29.nats_bin);
	} else {
		assert_int_equal(r.remaining, 1);
		assert_true(r.scan_complete);
		assert_false(r.verified_gone);
		assert_string_equal(r.note, NOTE_NO_KICK);
		assert_int_equal(s.kick_requests, 1); /* the first no-responders ends it */
		assert_alive(&c, "the 2.9 agent");
	}
	h_close(&c);
	h_close(&obs);
	h_close(&ev);
	h_mesh_down(&m29);
}

/* ---- a scripted CONNZ/KICK responder on a plain broker ----------------- */

#define FAKE_ACCT "AFAKEACCOUNTAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define FAKE_SID "NFAKESERVERAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define FAKE_SID10 "NFAKESERVERTENAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define FAKE_MAX 4000

struct fake {
	pthread_mutex_t mu;
	long long cid[FAKE_MAX];
	char who[FAKE_MAX][48];   /* the principal tag's principal, or "" */
	int n;
	int drop;                 /* entries closed below the offset before each later page */
	bool bad_later_pages;     /* every page past the first has a mistyped total */
	bool cluster;
	bool kick_silent;         /* KICKs are received and never answered */
	const char *version;      /* server.ver */
	const char *name, *sid;   /* server.name, server.id */
	bool by_name;             /* answers only a request its name matches */
	int requests, kicks, filtered;
};

static struct fake fake = { .mu = PTHREAD_MUTEX_INITIALIZER, .name = "fake", .sid = FAKE_SID };
/* A second server of the same cluster, whose name holds the first's. */
static struct fake fake10 = { .mu = PTHREAD_MUTEX_INITIALIZER, .name = "fake10",
	.sid = FAKE_SID10, .by_name = true };
static pid_t plain_pid;
static char plain_url[64];
static natsConnection *responder;
static natsSubscription *connz_sub, *kick_sub, *connz10_sub, *kick10_sub;

static void
plain_stop(void)
{
	if (plain_pid > 0) {
		kill(plain_pid, SIGKILL);
		waitpid(plain_pid, NULL, 0);
		plain_pid = 0;
	}
}

/* A plain broker (no auth): the test's responder answers the $SYS
 * subjects in its global account. */
static int
plain_start(void)
{
	char port[16];
	int p = h_free_port();

	if (p <= 0)
		return -1;
	snprintf(port, sizeof(port), "%d", p);
	snprintf(plain_url, sizeof(plain_url), "nats://127.0.0.1:%d", p);
	atexit(plain_stop);
	plain_pid = fork();
	if (plain_pid < 0)
		return -1;
	if (plain_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (freopen("/dev/null", "w", stdout) == NULL ||
		    freopen("/dev/null", "w", stderr) == NULL)
			_exit(127);
		execl(mesh.nats_bin, mesh.nats_bin, "-a", "127.0.0.1", "-p", port, (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; waited < 10000; waited += 50) {
		natsConnection *nc = NULL;
		if (natsConnection_ConnectTo(&nc, plain_url) == NATS_OK) {
			natsConnection_Destroy(nc);
			return 0;
		}
		sleep_ms(50);
	}
	return -1;
}

static json_t *
fake_server(const struct fake *f)
{
	json_t *s = json_pack("{s:s, s:s, s:s}", "name", f->name, "id", f->sid, "ver", f->version);

	if (f->cluster)
		json_object_set_new(s, "cluster", json_string("c1"));
	return s;
}

static void
reply_json(natsConnection *nc, natsMsg *m, json_t *r)
{
	char *s = json_dumps(r, JSON_COMPACT);

	natsConnection_PublishString(nc, natsMsg_GetReply(m), s);
	free(s);
	json_decref(r);
}

static void
on_connz(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	json_t *req = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	long long offset = json_integer_value(json_object_get(req, "offset"));
	long long limit = json_integer_value(json_object_get(req, "limit"));
	const char *name = json_string_value(json_object_get(req, "server_name"));
	struct fake *f = arg;
	json_t *conns, *data;

	(void)sub;
	/* nats-server 2.10 filters by server name as a substring. */
	if (f->by_name && name != NULL && strstr(f->name, name) == NULL) {
		json_decref(req);
		natsMsg_Destroy(m);
		return;
	}
	conns = json_array();
	pthread_mutex_lock(&f->mu);
	f->requests++;
	if (name != NULL)
		f->filtered++;
	/* Connections close between pages: those below the offset shift the
	 * rest down (only non-principal ones, so every principal stays). */
	for (int d = 0, i = (int)(offset < f->n ? offset : f->n) - 1;
	     offset > 0 && d < f->drop && i >= 0; i--)
		if (f->who[i][0] == '\0') {
			memmove(&f->cid[i], &f->cid[i + 1], (size_t)(f->n - i - 1) * sizeof(f->cid[0]));
			memmove(&f->who[i], &f->who[i + 1], (size_t)(f->n - i - 1) * sizeof(f->who[0]));
			f->n--;
			d++;
		}
	for (long long i = offset; i < f->n && i < offset + limit; i++) {
		json_t *tags = json_array();
		char tag[64];
		if (f->who[i][0] != '\0') {
			snprintf(tag, sizeof(tag), "principal:%s", f->who[i]);
			json_array_append_new(tags, json_string(tag));
		}
		json_array_append_new(tags, json_string("cotal-profile:agent"));
		json_array_append_new(conns, json_pack("{s:I, s:s, s:s, s:s, s:o}", "cid",
		    (json_int_t)f->cid[i], "kind", "Client", "authorized_user", "UFAKEUSER",
		    "account", FAKE_ACCT, "tags", tags));
	}
	data = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "server_id", f->sid,
	    "num_connections", (json_int_t)json_array_size(conns), "total", (json_int_t)f->n,
	    "offset", (json_int_t)offset, "limit", (json_int_t)limit, "connections", conns);
	if (f->bad_later_pages && offset > 0)
		json_object_set_new(data, "total", json_string("many"));
	pthread_mutex_unlock(&f->mu);
	reply_json(nc, m, json_pack("{s:o, s:o}", "server", fake_server(f), "data", data));
	json_decref(req);
	natsMsg_Destroy(m);
}

static void
on_kick(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
	json_t *req = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	long long cid = json_integer_value(json_object_get(req, "cid"));
	struct fake *f = arg;
	bool found = false;

	(void)sub;
	pthread_mutex_lock(&f->mu);
	f->kicks++;
	if (f->kick_silent) {
		pthread_mutex_unlock(&f->mu);
		json_decref(req);
		natsMsg_Destroy(m);
		return;
	}
	for (int i = 0; i < f->n && !found; i++)
		if (f->cid[i] == cid) {
			memmove(&f->cid[i], &f->cid[i + 1], (size_t)(f->n - i - 1) * sizeof(f->cid[0]));
			memmove(&f->who[i], &f->who[i + 1], (size_t)(f->n - i - 1) * sizeof(f->who[0]));
			f->n--;
			found = true;
		}
	pthread_mutex_unlock(&f->mu);
	if (found)
		reply_json(nc, m, json_pack("{s:o}", "server", fake_server(f)));
	else
		reply_json(nc, m, json_pack("{s:o, s:{s:i, s:s}}", "server", fake_server(f), "error",
		    "code", 500, "description", "no such client or leafnode id"));
	json_decref(req);
	natsMsg_Destroy(m);
}

/* n connections of server f with cids 100, 103, 106, ...; principals at
 * positions. */
static void
fake_reset_of(struct fake *f, int n, const int *pos, const char *const *who, int npos)
{
	pthread_mutex_lock(&f->mu);
	f->n = n;
	for (int i = 0; i < n; i++) {
		f->cid[i] = 100 + 3LL * i;
		f->who[i][0] = '\0';
	}
	for (int k = 0; k < npos; k++)
		snprintf(f->who[pos[k]], sizeof(f->who[0]), "%s", who[k]);
	f->drop = 0;
	f->bad_later_pages = false;
	f->cluster = false;
	f->kick_silent = false;
	f->version = "2.10.27";
	f->requests = 0;
	f->kicks = 0;
	f->filtered = 0;
	pthread_mutex_unlock(&f->mu);
}

static void
fake_reset(int n, const int *pos, const char *const *who, int npos)
{
	fake_reset_of(&fake, n, pos, who, npos);
}

static int
fake_setup(void **state)
{
	(void)state;
	if (plain_pid == 0 && plain_start() != 0)
		return -1;
	if (natsConnection_ConnectTo(&responder, plain_url) != NATS_OK ||
	    natsConnection_Subscribe(&connz_sub, responder, "$SYS.REQ.ACCOUNT." FAKE_ACCT ".CONNZ",
	    on_connz, &fake) != NATS_OK ||
	    natsConnection_Subscribe(&kick_sub, responder, "$SYS.REQ.SERVER." FAKE_SID ".KICK",
	    on_kick, &fake) != NATS_OK ||
	    natsConnection_Flush(responder) != NATS_OK)
		return -1;
	return 0;
}

static int
fake_teardown(void **state)
{
	(void)state;
	natsSubscription_Destroy(connz_sub);
	natsSubscription_Destroy(kick_sub);
	natsSubscription_Destroy(connz10_sub);
	natsSubscription_Destroy(kick10_sub);
	connz_sub = kick_sub = connz10_sub = kick10_sub = NULL;
	natsConnection_Destroy(responder);
	responder = NULL;
	return 0;
}

static void
plain_connect(natsConnection **nc)
{
	assert_int_equal(natsConnection_ConnectTo(nc, plain_url), NATS_OK);
}

/*
 * WIRE.md §5: "CONNZ of the space account via $SYS.REQ.ACCOUNT.<acct>.CONNZ
 * ({"auth":true,"offset":N,"limit":1024}, paged)". Connections closing
 * between pages shift the later ones down; none may slip past a page
 * boundary unseen.
 */
static void
test_paging_sees_every_connection_while_others_close(void **state)
{
	static const int pos[] = { 0, 1022, 1023, 1024, 1025, 2045, 2046, 2047, 2048, 3001, 3499 };
	static const char *const who[] = { "local.p0", "local.p1", "local.p2", "local.p3",
		"local.p4", "local.p5", "local.p6", "local.p7", "local.p8", "local.p9", "local.p10" };
	const int npos = (int)(sizeof(pos) / sizeof(pos[0]));
	natsConnection *obs, *ev;
	struct eviction_result out[12];
	const char *ps[12];
	char note[SWEEP_NOTE_MAX];
	bool complete;

	(void)state;
	plain_connect(&obs);
	plain_connect(&ev);
	struct sweeper s = sweeper_of(obs, ev, FAKE_ACCT);
	for (int drop = 0; drop <= 40; drop += 20) {
		/* Each scan starts from the same layout: principals on both sides
		 * of the page boundaries (1024 a page, one of overlap). */
		for (int k = 0; k < npos; k++) {
			fake_reset(3500, pos, who, npos);
			fake.drop = drop;
			enum principal_state st = sweep_liveness(&s, who[k], &complete, note,
			    sizeof(note));
			if (st != PRINCIPAL_LIVE || !complete)
				fail_msg("drop %d, %s: %s, complete %d: %s", drop, who[k],
				    principal_state_name(st), complete, note);
		}
		fake_reset(3500, pos, who, npos);
		fake.drop = drop;
		assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
		    PRINCIPAL_GONE);
		assert_true(complete);
		fake_reset(3500, pos, who, npos);
		fake.drop = drop;
		for (int k = 0; k < npos; k++)
			ps[k] = who[k];
		ps[npos] = "local.nobody";
		s.connz_requests = s.kick_requests = 0;
		sweep_evict(&s, ps, npos + 1, out);
		for (int k = 0; k <= npos; k++) {
			if (!out[k].verified_gone || out[k].kicked != (k < npos ? 1 : 0))
				fail_msg("drop %d, %s: kicked %d remaining %d complete %d: %s", drop,
				    ps[k], out[k].kicked, out[k].remaining, out[k].scan_complete,
				    out[k].note);
		}
		assert_int_equal(s.kick_requests, npos);
		/* Two scans (the first and one verify), a few pages each. */
		if (s.connz_requests > 2 * 12)
			fail_msg("drop %d: %lu CONNZ requests", drop, s.connz_requests);
		pthread_mutex_lock(&fake.mu);
		for (int i = 0; i < fake.n; i++)
			assert_string_equal(fake.who[i], "");
		pthread_mutex_unlock(&fake.mu);
	}
	natsConnection_Destroy(obs);
	natsConnection_Destroy(ev);
}

/* WIRE.md §5: "An incomplete scan never reports verifiedGone": a page that
 * does not check (here every page past the first) leaves every principal,
 * even one never seen, unverified. */
static void
test_a_bad_page_leaves_nothing_verified(void **state)
{
	static const int pos[] = { 10, 2000 };
	static const char *const who[] = { "local.early", "local.late" };
	const char *ps[] = { "local.early", "local.late", "local.nobody" };
	struct eviction_result out[3];
	natsConnection *obs, *ev;
	char note[SWEEP_NOTE_MAX];
	bool complete = true;

	(void)state;
	plain_connect(&obs);
	plain_connect(&ev);
	struct sweeper s = sweeper_of(obs, ev, FAKE_ACCT);
	fake_reset(2500, pos, who, 2);
	fake.bad_later_pages = true;
	sweep_evict(&s, ps, 3, out);
	for (int k = 0; k < 3; k++) {
		assert_false(out[k].verified_gone);
		assert_false(out[k].scan_complete);
		assert_int_equal(out[k].remaining, 0);
		if (strstr(out[k].note, "scan incomplete: CONNZ at offset 1023: data.total") == NULL)
			fail_msg("%s: note \"%s\"", ps[k], out[k].note);
	}
	/* What the first page showed was kicked all the same. */
	assert_int_equal(out[0].kicked, 1);
	assert_int_equal(out[1].kicked, 0);
	assert_int_equal(s.kick_requests, 1);
	/* Liveness: what a page shows is live; nothing seen and incomplete is
	 * unknown. */
	fake_reset(2500, pos, who, 2);
	fake.bad_later_pages = true;
	assert_int_equal(sweep_liveness(&s, "local.early", &complete, note, sizeof(note)),
	    PRINCIPAL_LIVE);
	assert_false(complete);
	assert_int_equal(sweep_liveness(&s, "local.late", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_false(complete);
	assert_non_null(strstr(note, "data.total"));
	/* A server of a cluster answers for itself only: when the daemon was
	 * given three servers and the other two are silent, nothing is
	 * verified (issue 15: "verifiedGone only when every server
	 * answered"). */
	fake_reset(10, NULL, NULL, 0);
	fake.cluster = true;
	s.expect = 3;
	assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_false(complete);
	assert_non_null(strstr(note, "scan incomplete: 2 of the 3 expected servers did not "
	    "answer CONNZ"));
	/* Given that one server only, its complete answer is the scan. */
	s.expect = 1;
	assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
	    PRINCIPAL_GONE);
	assert_true(complete);
	natsConnection_Destroy(obs);
	natsConnection_Destroy(ev);
}

/*
 * Issue 15: on a cluster every server answers CONNZ for its own
 * connections. Two servers whose connection ids overlap, each past one
 * page, the second's name holding the first's (nats-server 2.10 matches a
 * server_name filter as a substring): each server is paged on its own,
 * each connection is KICKed on the server that holds it, and the verify
 * scan reads both. A server that goes silent is named, and nothing is
 * verified.
 */
static void
test_two_servers_are_paged_and_kicked_apart(void **state)
{
	static const int pos1[] = { 10, 1200 }, pos2[] = { 5, 2050 };
	static const char *const who1[] = { "local.y", "local.x" };
	static const char *const who2[] = { "local.z", "local.x" };
	static const int kicked[] = { 2, 1, 1, 0 };
	const char *ps[] = { "local.x", "local.y", "local.z", "local.nobody" };
	struct roster_seen seen = { .n = 0 };
	struct eviction_result out[4];
	natsConnection *obs, *ev;
	char note[SWEEP_NOTE_MAX];
	bool complete = false;

	(void)state;
	plain_connect(&obs);
	plain_connect(&ev);
	struct sweeper s = sweeper_of(obs, ev, FAKE_ACCT);
	s.expect = 2;
	s.seen = &seen;
	assert_int_equal(natsConnection_Subscribe(&connz10_sub, responder, "$SYS.REQ.ACCOUNT."
	    FAKE_ACCT ".CONNZ", on_connz, &fake10), NATS_OK);
	assert_int_equal(natsConnection_Subscribe(&kick10_sub, responder, "$SYS.REQ.SERVER."
	    FAKE_SID10 ".KICK", on_kick, &fake10), NATS_OK);
	assert_int_equal(natsConnection_Flush(responder), NATS_OK);
	fake_reset(1500, pos1, who1, 2);
	fake.cluster = true;
	fake_reset_of(&fake10, 2100, pos2, who2, 2);
	fake10.cluster = true;

	for (int k = 0; k < 3; k++)
		if (sweep_liveness(&s, ps[k], &complete, note, sizeof(note)) != PRINCIPAL_LIVE ||
		    !complete)
			fail_msg("%s not seen live on a complete scan: %s", ps[k], note);
	assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
	    PRINCIPAL_GONE);
	assert_true(complete);

	s.connz_requests = s.kick_requests = 0;
	sweep_evict(&s, ps, 4, out);
	for (int k = 0; k < 4; k++)
		if (!out[k].verified_gone || !out[k].scan_complete || out[k].kicked != kicked[k] ||
		    out[k].note[0] != '\0')
			fail_msg("%s: kicked %d (want %d), remaining %d, complete %d: %s", ps[k],
			    out[k].kicked, kicked[k], out[k].remaining, out[k].scan_complete,
			    out[k].note);
	/* Each KICK went to the server holding the connection. */
	assert_int_equal(fake.kicks, 2);
	assert_int_equal(fake10.kicks, 2);
	assert_int_equal(s.kick_requests, 4);
	for (struct fake *f = &fake; f != NULL; f = f == &fake ? &fake10 : NULL) {
		pthread_mutex_lock(&f->mu);
		for (int i = 0; i < f->n; i++)
			assert_string_equal(f->who[i], "");
		pthread_mutex_unlock(&f->mu);
	}
	/* Pages past the first were asked of one server by name, and the
	 * answers of the other server were not taken for them. */
	assert_true(fake.filtered > 0);
	assert_true(fake10.filtered > 0);

	/* The second server goes silent. */
	natsSubscription_Unsubscribe(connz10_sub);
	natsConnection_Flush(responder);
	assert_int_equal(sweep_liveness(&s, "local.nobody", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_false(complete);
	if (strstr(note, "scan incomplete: server fake10 did not answer CONNZ (1 of the 2 "
	    "expected answered)") == NULL)
		fail_msg("note: %s", note);
	natsConnection_Destroy(obs);
	natsConnection_Destroy(ev);
}

/* A KICK that goes unanswered costs the request timeout; the admin rail
 * waits behind the sweep ("Answered one at a time in arrival order",
 * WIRE.md §5), so the sweep sends no further KICK and verifies nothing it
 * could not kick. */
static void
test_unanswered_kick_stops_eviction(void **state)
{
	static const int pos[] = { 3, 4, 5 };
	static const char *const who[] = { "local.a", "local.b", "local.b" };
	const char *ps[] = { "local.a", "local.b", "local.c" };
	struct eviction_result out[3];
	natsConnection *obs, *ev;

	(void)state;
	plain_connect(&obs);
	plain_connect(&ev);
	struct sweeper s = sweeper_of(obs, ev, FAKE_ACCT);
	fake_reset(8, pos, who, 3);
	fake.kick_silent = true;
	sweep_evict(&s, ps, 3, out);
	assert_int_equal(s.kick_requests, 1);
	assert_int_equal(s.connz_requests, 1);
	assert_int_equal(out[0].remaining, 1);
	assert_false(out[0].verified_gone);
	assert_non_null(strstr(out[0].note, "KICK of connection 109: no answer within the request "
	    "timeout; no further KICK was sent"));
	assert_int_equal(out[1].remaining, 2);
	assert_false(out[1].verified_gone);
	assert_string_equal(out[1].note, "eviction stopped after a KICK went unanswered");
	assert_true(out[2].verified_gone);
	natsConnection_Destroy(obs);
	natsConnection_Destroy(ev);
}

/* The brief: "a no-responders ... answer on an old broker means KICK is
 * unsupported"; a server of 2.10 or newer without a KICK responder is not
 * that server any more. */
static void
test_no_kick_responder(void **state)
{
	static const int pos[] = { 3, 4 };
	static const char *const who[] = { "local.a", "local.b" };
	const char *ps[] = { "local.a", "local.b", "local.c" };
	struct eviction_result out[3];
	natsConnection *obs, *ev;

	(void)state;
	plain_connect(&obs);
	plain_connect(&ev);
	struct sweeper s = sweeper_of(obs, ev, FAKE_ACCT);
	natsSubscription_Unsubscribe(kick_sub);
	natsConnection_Flush(responder);
	/* A 2.9 server: one KICK finds no responder, and KICK is given up. */
	fake_reset(8, pos, who, 2);
	fake.version = "2.9.10";
	sweep_evict(&s, ps, 3, out);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(out[k].kicked, 0);
		assert_int_equal(out[k].remaining, 1);
		assert_false(out[k].verified_gone);
		assert_true(out[k].scan_complete);
		assert_string_equal(out[k].note, NOTE_NO_KICK);
	}
	assert_true(out[2].verified_gone);
	assert_string_equal(out[2].note, "");
	assert_int_equal(s.kick_requests, 1);
	assert_int_equal(s.connz_requests, 1);
	/* A 2.10 one: each KICK is tried, and the note names the server. */
	fake_reset(8, pos, who, 2);
	s.connz_requests = s.kick_requests = 0;
	sweep_evict(&s, ps, 3, out);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(out[k].remaining, 1);
		assert_false(out[k].verified_gone);
		assert_non_null(strstr(out[k].note, "no responders on server " FAKE_SID));
	}
	assert_int_equal(s.kick_requests, 2);
	assert_int_equal(s.connz_requests, 1);
	natsConnection_Destroy(obs);
	natsConnection_Destroy(ev);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest real[] = {
		cmocka_unit_test(test_live_agent_is_kicked_and_verified_gone),
		cmocka_unit_test(test_absent_principal_is_verified_gone),
		cmocka_unit_test(test_several_principals_share_one_sweep),
		cmocka_unit_test(test_liveness_live_then_gone),
		cmocka_unit_test(test_two_connections_of_one_agent_are_both_kicked),
		cmocka_unit_test(test_no_evictor_kicks_nothing),
		cmocka_unit_test(test_unanswered_scan_is_never_verified),
		cmocka_unit_test(test_broker_29_has_no_kick),
	};
	const struct CMUnitTest scripted[] = {
		cmocka_unit_test(test_paging_sees_every_connection_while_others_close),
		cmocka_unit_test(test_a_bad_page_leaves_nothing_verified),
		cmocka_unit_test(test_two_servers_are_paged_and_kicked_apart),
		cmocka_unit_test(test_unanswered_kick_stops_eviction),
		cmocka_unit_test(test_no_kick_responder),
	};
	int rc;

	(void)argc;
	(void)argv;
	rc = cmocka_run_group_tests_name("real broker", real, setup, teardown);
	rc |= cmocka_run_group_tests_name("scripted responder", scripted, fake_setup, fake_teardown);
	plain_stop();
	return h_done(rc);
}
