/*
 * Verified eviction and principal liveness: one shared sweep of the broker
 * per request (WIRE.md §5 ctl.delivery-admin; the seed: "the daemon answers
 * each request with one shared sweep of the broker").
 *
 * A scan asks every server for CONNZ of the space account with one request
 * and reads the answers that come (roster.h: which servers must answer),
 * then pages each server on its own: connection ids are one server's.
 * Within a server, connections come sorted
 * by cid (the broker's default, checked), and connections that close
 * between two pages shift the later ones to lower offsets, so a naive next
 * offset could skip one. Each page therefore starts on the last entry of
 * the one before (an overlap of one), and a page whose first cid is past
 * the last cid already seen has lost contiguity: the scan steps back and
 * reads that stretch again. Entries are counted once, by cid. A reply that
 * fails anywhere makes the scan incomplete, and an incomplete scan never
 * verifies anything.
 *
 * A connection is KICKed on the server that holds it, and the verify scan
 * asks every server again.
 *
 * Everything in a CONNZ or KICK reply is network input, checked by connz.c
 * before it is used; every loop is bounded (servers, replies per request,
 * pages, entries per page, matching connections, principals).
 */
#include "worker-registry/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/nats/natsconn.h"
#define BACKOFF_FIRST 64   /* entries a scan steps back when contiguity is lost */
#define KICK_NOT_FOUND "no such client"
#define NOTE_NO_EVICTOR "eviction is unavailable: no $SYS evictor credential is provisioned"
#define NOTE_NO_KICK "the broker does not support KICK (nats-server 2.10 or newer)"

json_t *
eviction_result_json(const struct eviction_result *r)
{
	json_t *o = json_pack("{s:s, s:i, s:i, s:b, s:b}", "principal", r->principal,
	    "kicked", r->kicked, "remaining", r->remaining, "verifiedGone", r->verified_gone,
	    "scanComplete", r->scan_complete);

	if (o != NULL && r->note[0] != '\0' &&
	    json_object_set_new(o, "note", json_string(r->note)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

const char *
principal_state_name(enum principal_state s)
{
	switch (s) {
	case PRINCIPAL_LIVE:
		return "live";
	case PRINCIPAL_GONE:
		return "gone";
	default:
		return "unknown";
	}
}

/* ---- the scan ---------------------------------------------------------- */

struct hit {
	long long cid;
	int who;     /* index into the sweep's distinct principals */
	int server;  /* index into the scan's roster: the server that holds it */
};

struct scan {
	bool complete;
	char note[SWEEP_NOTE_MAX];
	struct roster roster;
	struct hit *hits;
	size_t nhits, cap;
	int *count;  /* connections seen per principal */
};

static int
hit_add(struct scan *sc, long long cid, int who, int server)
{
	if (sc->nhits == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 16;
		struct hit *h;
		if (sc->cap >= SWEEP_MATCHES_MAX)
			return -1;
		if (cap > SWEEP_MATCHES_MAX)
			cap = SWEEP_MATCHES_MAX;
		if ((h = realloc(sc->hits, cap * sizeof(*h))) == NULL)
			return -1;
		sc->hits = h;
		sc->cap = cap;
	}
	sc->hits[sc->nhits].cid = cid;
	sc->hits[sc->nhits].who = who;
	sc->hits[sc->nhits].server = server;
	sc->nhits++;
	sc->count[who]++;
	return 0;
}

static void
scan_reset(struct scan *sc, int nnames, int expect)
{
	sc->complete = false;
	sc->note[0] = '\0';
	roster_init(&sc->roster, expect);
	sc->nhits = 0;
	memset(sc->count, 0, (size_t)nnames * sizeof(*sc->count));
}

/*
 * Send one CONNZ request: to every server of the account (to NULL), or to
 * one server, named by server_name with exact_match (nats-server 2.14;
 * older servers match the name as a substring and ignore exact_match, so
 * the replies of other servers are told apart by id when they are read).
 * Replies come to a fresh subject under the observer's own inbox prefix.
 */
static int
connz_send(struct sweeper *s, long long offset, const struct roster_server *to,
	   natsSubscription **sub, char *why, size_t whylen)
{
	char subject[128], inbox[SWEEP_INBOX_MAX + 64], token[64];
	json_t *body = json_pack("{s:b, s:I, s:i}", "auth", 1, "offset", (json_int_t)offset,
	    "limit", SWEEP_PAGE);
	char *text = NULL;
	natsStatus st;

	*sub = NULL;
	if (body != NULL && to != NULL && to->name[0] != '\0' &&
	    (json_object_set_new(body, "server_name", json_string(to->name)) != 0 ||
	    json_object_set_new(body, "exact_match", json_true()) != 0)) {
		json_decref(body);
		body = NULL;
	}
	if (body == NULL || (text = json_dumps(body, JSON_COMPACT)) == NULL ||
	    conn_unique_token(token, sizeof(token)) != 0) {
		json_decref(body);
		free(text);
		note_say(why, whylen, "out of memory");
		return -1;
	}
	json_decref(body);
	snprintf(subject, sizeof(subject), "$SYS.REQ.ACCOUNT.%s.CONNZ", s->account);
	snprintf(inbox, sizeof(inbox), "%s.%s", s->inbox[0] ? s->inbox : "_INBOX", token);
	st = natsConnection_SubscribeSync(sub, s->observer, inbox);
	if (st == NATS_OK) {
		s->connz_requests++;
		st = natsConnection_PublishRequestString(s->observer, subject, inbox, text);
	}
	free(text);
	if (st != NATS_OK) {
		note_say(why, whylen, "%s", natsStatus_GetText(st));
		conn_sub_close(s->observer, *sub, CONN_SUB_FLUSH_MS);
		*sub = NULL;
		return -1;
	}
	return 0;
}

enum next { NEXT_REPLY, NEXT_TIMEOUT, NEXT_BAD, NEXT_NONE };

/*
 * The next reply to a CONNZ request before deadline (mono_ms): NEXT_REPLY
 * with *r, NEXT_TIMEOUT, NEXT_BAD (a reply that is no JSON: why), or
 * NEXT_NONE (nobody serves the subject, or the connection failed: why).
 */
static enum next
connz_next(natsSubscription *sub, int64_t deadline, json_t **r, char *why, size_t whylen)
{
	int64_t left = deadline - mono_ms();
	json_error_t jerr;
	natsMsg *m = NULL;
	natsStatus st;
	int len;

	*r = NULL;
	if (left <= 0)
		return NEXT_TIMEOUT;
	st = natsSubscription_NextMsg(&m, sub, left);
	if (st == NATS_TIMEOUT)
		return NEXT_TIMEOUT;
	if (st != NATS_OK) {
		note_say(why, whylen, "%s", natsStatus_GetText(st));
		return NEXT_NONE;
	}
	if (natsMsg_IsNoResponders(m)) {
		natsMsg_Destroy(m);
		note_say(why, whylen, "no responders (is the observer a $SYS user?)");
		return NEXT_NONE;
	}
	len = natsMsg_GetDataLength(m);
	if (len <= 0 || len > SWEEP_REPLY_MAX) {
		note_say(why, whylen, "a reply of %d bytes", len);
		natsMsg_Destroy(m);
		return NEXT_BAD;
	}
	*r = json_loadb(natsMsg_GetData(m), (size_t)len, 0, &jerr);
	natsMsg_Destroy(m);
	if (*r == NULL) {
		note_say(why, whylen, "the reply is not JSON: %.100s", jerr.text);
		return NEXT_BAD;
	}
	return NEXT_REPLY;
}

#define NO_ANSWER "no answer within the request timeout"

/* The reply's server.id, or "" (a reply we check in full later). */
static const char *
reply_server_id(const json_t *r)
{
	const char *id = json_string_value(json_object_get(json_object_get(r, "server"), "id"));

	return id != NULL ? id : "";
}

/*
 * One page of one server: the reply whose server is srv, or NULL with why.
 * Replies of other servers that a name filter let through are skipped; a
 * reply from srv's name under another id means the server restarted, and
 * its connection ids started over.
 */
static json_t *
connz_page_of(struct sweeper *s, const struct roster_server *srv, long long offset, char *why,
	      size_t whylen)
{
	natsSubscription *sub;
	int64_t deadline = mono_ms() + SWEEP_REQUEST_MS;
	json_t *r = NULL;

	if (connz_send(s, offset, srv, &sub, why, whylen) != 0)
		return NULL;
	note_say(why, whylen, NO_ANSWER);
	for (int n = 0; n < SWEEP_REPLIES_MAX; n++) {
		enum next nx = connz_next(sub, deadline, &r, why, whylen);
		if (nx != NEXT_REPLY) {
			if (nx == NEXT_BAD)
				continue;
			if (nx == NEXT_TIMEOUT)
				note_say(why, whylen, NO_ANSWER);
			break;
		}
		const char *id = reply_server_id(r);
		if (strcmp(id, srv->id) == 0)
			break;
		const char *name = json_string_value(json_object_get(json_object_get(r, "server"),
		    "name"));
		if (srv->name[0] != '\0' && name != NULL && strcmp(name, srv->name) == 0) {
			note_say(why, whylen, "the server changed during the scan (%.60s, then %.60s)",
			    srv->id, id);
			json_decref(r);
			r = NULL;
			break;
		}
		json_decref(r);
		r = NULL;
	}
	/* Other servers may still answer this inbox (natsconn.h). */
	conn_sub_close(s->observer, sub, CONN_SUB_FLUSH_MS);
	return r;
}

/* Which of the sweep's principals an entry names: indexes into who[]
 * (room for nnames), each once. */
struct match_arg {
	const char *const *names;
	int nnames;
	int *who;
	size_t n;
};

static bool
match_one(const char *p, void *arg)
{
	struct match_arg *a = arg;

	for (int i = 0; i < a->nnames; i++)
		if (strcmp(p, a->names[i]) == 0) {
			for (size_t k = 0; k < a->n; k++)
				if (a->who[k] == i)
					return false;
			a->who[a->n++] = i;
			break;
		}
	return a->n == (size_t)a->nnames;
}

static size_t
entry_match(const json_t *e, const char *account, const char *const *names, int nnames,
	    int *who)
{
	const char *acct = json_string_value(json_object_get(e, "account"));
	struct match_arg a = { names, nnames, who, 0 };

	/* CONNZ of the account lists that account only; another one is not ours. */
	if (acct != NULL && strcmp(acct, account) != 0)
		return 0;
	connz_entry_each(e, match_one, &a);
	return a.n;
}

/* A page that failed, into the scan's note: which server, when there are
 * several. */
static void
scan_fail(struct scan *sc, int server, long long offset, const char *why)
{
	const struct roster_server *srv = server >= 0 ? &sc->roster.s[server] : NULL;

	if (srv == NULL || (sc->roster.n == 1 && sc->roster.expect == 1))
		note_add(sc->note, sizeof(sc->note), "CONNZ at offset %lld: %s", offset, why);
	else
		note_add(sc->note, sizeof(sc->note), "CONNZ of server %s at offset %lld: %s",
		    srv->name[0] ? srv->name : srv->id, offset, why);
}

/*
 * Read every page of one server's connections, starting from its answer
 * to the first request (first, taken over), recording those of names[].
 * Marks the server complete when every connection was seen.
 */
static void
server_read(struct sweeper *s, const char *const *names, int nnames, struct scan *sc, int idx,
	    json_t *first)
{
	struct roster_server *srv = &sc->roster.s[idx];
	long long offset = 0, last = -1, step = 0;
	json_t *reply = first;

	for (int pages = 1;; pages++) {
		char why[SWEEP_NOTE_MAX - 48];
		struct connz_page pg;
		json_t *e;
		size_t i;

		if (reply == NULL) {
			if (pages > SWEEP_PAGES_MAX) {
				scan_fail(sc, idx, offset, "the scan needs more CONNZ pages than allowed");
				return;
			}
			if ((reply = connz_page_of(s, srv, offset, why, sizeof(why))) == NULL) {
				scan_fail(sc, idx, offset, why);
				return;
			}
		}
		if (connz_page_parse(reply, offset, &pg, why, sizeof(why)) != 0) {
			scan_fail(sc, idx, offset, why);
			json_decref(reply);
			return;
		}
		/* Past the first page, the page must begin at or before the last
		 * connection seen, else some may have slid past the boundary. */
		if (offset > 0 && (pg.n == 0 ||
		    json_integer_value(json_object_get(json_array_get(pg.conns, 0), "cid")) > last)) {
			step = step > 0 ? step * 2 : BACKOFF_FIRST;
			offset = offset > step ? offset - step : 0;
			json_decref(reply);
			reply = NULL;
			continue;
		}
		step = 0;
		json_array_foreach(pg.conns, i, e) {
			long long cid = (long long)json_integer_value(json_object_get(e, "cid"));
			int who[SWEEP_PRINCIPALS_MAX];
			size_t nw;

			if (cid <= last)
				continue;  /* seen on the page before */
			nw = entry_match(e, s->account, names, nnames, who);
			for (size_t k = 0; k < nw; k++)
				if (hit_add(sc, cid, who[k], idx) != 0) {
					note_add(sc->note, sizeof(sc->note), "more than %d connections of "
					    "the named principals", SWEEP_MATCHES_MAX);
					json_decref(reply);
					return;
				}
			last = cid;
		}
		if (offset + (long long)pg.n >= pg.total) {
			json_decref(reply);
			srv->complete = true;
			return;
		}
		if (pg.n < 2) {
			snprintf(why, sizeof(why), "%zu of %lld connections in a page", pg.n, pg.total);
			scan_fail(sc, idx, offset, why);
			json_decref(reply);
			return;
		}
		offset += (long long)pg.n - 1;
		json_decref(reply);
		reply = NULL;
	}
}

/*
 * The first page of every server: one request that every server of the
 * account answers, read until the servers the sweeper expects have
 * answered (and, on a cluster, SWEEP_GRACE_MS more for any other) or the
 * request timeout. Each server's reply lands in first[] by roster index.
 * A reply that does not check is noted (the scan is then incomplete).
 */
static void
scan_gather(struct sweeper *s, struct scan *sc, json_t **first, bool *bad)
{
	char why[SWEEP_NOTE_MAX - 48] = NO_ANSWER;
	natsSubscription *sub;
	int64_t deadline = mono_ms() + SWEEP_REQUEST_MS;
	bool grace = false, none = false;

	if (connz_send(s, 0, NULL, &sub, why, sizeof(why)) != 0) {
		scan_fail(sc, -1, 0, why);
		*bad = true;
		return;
	}
	for (int n = 0; n < SWEEP_REPLIES_MAX; n++) {
		char whyr[SWEEP_NOTE_MAX - 48];
		struct connz_page pg;
		json_t *r;
		bool added;
		int idx;
		enum next nx = connz_next(sub, deadline, &r, whyr, sizeof(whyr));

		if (nx == NEXT_TIMEOUT)
			break;
		if (nx == NEXT_NONE) {
			snprintf(why, sizeof(why), "%s", whyr);
			none = true;
			break;
		}
		if (nx == NEXT_BAD || connz_page_parse(r, 0, &pg, whyr, sizeof(whyr)) != 0) {
			/* Its server (when it says which) answered, and is not read. */
			if (nx == NEXT_REPLY && pg.server_id[0] != '\0')
				idx = roster_add(&sc->roster, &pg, &added);
			else
				idx = -1;
			scan_fail(sc, idx, 0, whyr);
			*bad = true;
			json_decref(r);
		} else if ((idx = roster_add(&sc->roster, &pg, &added)) >= 0 && added) {
			first[idx] = r;
		} else {
			json_decref(r);  /* a second answer of one server, or one too many */
		}
		switch (roster_waiting(&sc->roster)) {
		case ROSTER_WAIT:
			continue;
		case ROSTER_GRACE:
			if (!grace && deadline > mono_ms() + SWEEP_GRACE_MS)
				deadline = mono_ms() + SWEEP_GRACE_MS;
			grace = true;
			continue;
		case ROSTER_DONE:
			break;
		}
		break;
	}
	/* Other servers may still answer this inbox (natsconn.h). */
	conn_sub_close(s->observer, sub, CONN_SUB_FLUSH_MS);
	if (sc->roster.n == 0 && !*bad) {
		scan_fail(sc, -1, 0, why);
		*bad = true;
	} else if (none) {
		scan_fail(sc, -1, 0, why);
		*bad = true;
	}
}

/*
 * Scan the account's connections once, on every server, recording those
 * of names[]. On return sc->complete says whether every connection of
 * every server was seen.
 */
static void
scan_run(struct sweeper *s, const char *const *names, int nnames, struct scan *sc)
{
	json_t *first[SWEEP_SERVERS_MAX] = { NULL };
	char missing[SWEEP_NOTE_MAX];
	bool bad = false;

	scan_reset(sc, nnames, s->expect);
	if (s->observer == NULL) {
		note_say(sc->note, sizeof(sc->note), "no $SYS observer connection");
		return;
	}
	if (!connz_server_id_valid(s->account, strlen(s->account))) {
		note_say(sc->note, sizeof(sc->note), "no space account to scan");
		return;
	}
	scan_gather(s, sc, first, &bad);
	for (int i = 0; i < sc->roster.n; i++)
		if (first[i] != NULL)
			server_read(s, names, nnames, sc, i, first[i]);
	if (sc->roster.n > 0) {
		roster_missing(&sc->roster, s->seen, missing, sizeof(missing));
		if (missing[0] != '\0')
			note_add(sc->note, sizeof(sc->note), "%s", missing);
	}
	roster_remember(&sc->roster, s->seen);
	sc->complete = !bad && roster_complete(&sc->roster);
}

/* ---- eviction ---------------------------------------------------------- */

struct kicked {
	long long cid;
	char server[SWEEP_SERVER_ID_MAX + 1];
};

struct evict_state {
	const char *const *names;  /* the principals, by index */
	int *kicked;               /* accepted KICKs per principal (distinct connections) */
	char (*problem)[SWEEP_NOTE_MAX / 2]; /* the first KICK trouble per principal */
	struct kicked *done;       /* connections whose KICK was accepted */
	size_t ndone, capdone;
	bool unsupported;          /* the broker has no KICK */
	bool stalled;              /* a KICK went unanswered: no more this sweep */
	bool moved;                /* a KICK of this round closed a connection, or found it closed */
};

static bool
kicked_before(const struct evict_state *es, long long cid, const char *server)
{
	for (size_t i = 0; i < es->ndone; i++)
		if (es->done[i].cid == cid && strcmp(es->done[i].server, server) == 0)
			return true;
	return false;
}

static void
kicked_record(struct evict_state *es, long long cid, const char *server)
{
	if (es->ndone == es->capdone) {
		size_t cap = es->capdone ? es->capdone * 2 : 16;
		struct kicked *k;
		if (cap > (size_t)SWEEP_MATCHES_MAX * (SWEEP_ROUNDS + 1) ||
		    (k = realloc(es->done, cap * sizeof(*k))) == NULL)
			return;  /* only the count of distinct connections suffers */
		es->done = k;
		es->capdone = cap;
	}
	es->done[es->ndone].cid = cid;
	snprintf(es->done[es->ndone].server, sizeof(es->done[0].server), "%s", server);
	es->ndone++;
}

/* KICK one connection on the server that holds it. */
static void
kick_one(struct sweeper *s, const struct hit *h, const struct roster_server *srv,
	 struct evict_state *es)
{
	bool has_kick = connz_version_has_kick(srv->version);
	char reply[SWEEP_KICK_REPLY_MAX], why[160];
	char *problem = es->problem[h->who];
	size_t plen = sizeof(es->problem[0]);
	natsStatus st;
	int rc;

	s->kick_requests++;
	reply[0] = '\0';
	st = s->kick(s->kick_arg, srv->id, h->cid, es->names[h->who], reply, sizeof(reply));
	if (st == NATS_NOT_PERMITTED) {
		/* Its holder would not send it: said, and the sweep goes on. */
		if (problem[0] == '\0')
			note_say(problem, plen, "KICK of connection %lld refused by the supervisor: "
			    "%.100s", h->cid, reply);
		return;
	}
	if (st == NATS_NO_RESPONDERS) {
		/* An older broker has no KICK responder; a newer one without a
		 * responder is not that server any more (restarted, or gone). */
		if (!has_kick)
			es->unsupported = true;
		else if (problem[0] == '\0')
			note_say(problem, plen, "KICK of connection %lld: no responders on server %.60s",
			    h->cid, srv->id);
		return;
	}
	if (st != NATS_OK) {
		/* Each unanswered KICK costs the request timeout, and the admin
		 * rail waits behind this sweep: one is enough to stop kicking. */
		es->stalled = true;
		if (problem[0] == '\0')
			note_say(problem, plen, "KICK of connection %lld: %s; no further KICK was sent",
			    h->cid, st == NATS_TIMEOUT ? "no answer within the request timeout" :
			    natsStatus_GetText(st));
		return;
	}
	rc = kick_reply_parse(reply, strlen(reply), why, sizeof(why));
	if (rc == 1 || (rc == 0 && strstr(why, KICK_NOT_FOUND) != NULL))
		es->moved = true;
	if (rc == 1) {
		if (!kicked_before(es, h->cid, srv->id)) {
			es->kicked[h->who]++;
			kicked_record(es, h->cid, srv->id);
		}
	} else if (rc == 0 && strstr(why, KICK_NOT_FOUND) != NULL) {
		/* It closed between the scan and the KICK: the re-scan tells. */
	} else if (problem[0] == '\0') {
		note_say(problem, plen, "KICK of connection %lld %s: %.100s", h->cid,
		    rc == 0 ? "refused" : "unreadable", why);
	}
}

/* A short pause before a re-scan, so connections the broker is closing
 * have gone: 10, 20, 40 ms. */
static void
settle(int round)
{
	struct timespec ts = { 0, 10L * 1000 * 1000 << (round < 4 ? round : 4) };

	nanosleep(&ts, NULL);
}

void
sweep_evict(struct sweeper *s, const char *const *principals, int n,
	    struct eviction_result *out)
{
	const char *names[SWEEP_PRINCIPALS_MAX];
	int map[SWEEP_PRINCIPALS_MAX], count[SWEEP_PRINCIPALS_MAX], kicked[SWEEP_PRINCIPALS_MAX];
	char problem[SWEEP_PRINCIPALS_MAX][SWEEP_NOTE_MAX / 2];
	struct evict_state es = { .names = names, .kicked = kicked, .problem = problem };
	struct scan sc = { .count = count };
	int nnames = 0, ntake = n < SWEEP_PRINCIPALS_MAX ? n : SWEEP_PRINCIPALS_MAX, rounds = 0;

	if (n <= 0 || principals == NULL || out == NULL)
		return;
	memset(out, 0, (size_t)n * sizeof(*out));
	memset(kicked, 0, sizeof(kicked));
	memset(problem, 0, sizeof(problem));
	for (int i = 0; i < n; i++) {
		snprintf(out[i].principal, sizeof(out[i].principal), "%s",
		    principals[i] ? principals[i] : "");
		if (i >= SWEEP_PRINCIPALS_MAX) {
			note_say(out[i].note, sizeof(out[i].note), "more than %d principals in one "
			    "request: not swept", SWEEP_PRINCIPALS_MAX);
			continue;
		}
		map[i] = -1;
		if (!connz_principal_valid(principals[i])) {
			note_say(out[i].note, sizeof(out[i].note), "not a principal (\"<o>.<a>\" with a "
			    "principal owner): not swept");
			continue;
		}
		for (int k = 0; k < nnames && map[i] < 0; k++)
			if (strcmp(names[k], principals[i]) == 0)
				map[i] = k;
		if (map[i] < 0) {
			names[nnames] = principals[i];
			map[i] = nnames++;
		}
	}
	if (nnames == 0)
		return;

	/* One shared sweep: scan, then KICK and re-scan while anything of
	 * theirs is left, SWEEP_ROUNDS times at most. */
	scan_run(s, names, nnames, &sc);
	for (int round = 0; round < SWEEP_ROUNDS && sc.nhits > 0; round++) {
		if (s->kick == NULL || es.unsupported || es.stalled)
			break;
		es.moved = false;
		for (size_t h = 0; h < sc.nhits && !es.unsupported && !es.stalled; h++)
			kick_one(s, &sc.hits[h], &sc.roster.s[sc.hits[h].server], &es);
		rounds++;
		if (!es.moved)
			break;  /* no KICK changed anything: the scan in hand still holds */
		settle(round);
		scan_run(s, names, nnames, &sc);
	}

	for (int i = 0; i < ntake; i++) {
		struct eviction_result *r = &out[i];
		int w = map[i];

		if (w < 0)
			continue;
		r->kicked = kicked[w];
		r->remaining = count[w];
		r->scan_complete = sc.complete;
		r->verified_gone = sc.complete && count[w] == 0;
		if (s->kick == NULL)
			note_add(r->note, sizeof(r->note), "%s", NOTE_NO_EVICTOR);
		if (!sc.complete)
			note_add(r->note, sizeof(r->note), "scan incomplete: %s", sc.note);
		if (count[w] > 0 && s->kick != NULL) {
			if (es.unsupported)
				note_add(r->note, sizeof(r->note), "%s", NOTE_NO_KICK);
			else if (es.stalled && problem[w][0] == '\0')
				note_add(r->note, sizeof(r->note), "eviction stopped after a KICK "
				    "went unanswered");
			else if (sc.complete)
				note_add(r->note, sizeof(r->note), "%d connection%s still seen after "
				    "%d KICK round%s", count[w], count[w] == 1 ? "" : "s", rounds,
				    rounds == 1 ? "" : "s");
			if (problem[w][0] != '\0')
				note_add(r->note, sizeof(r->note), "%s", problem[w]);
		}
	}
	free(sc.hits);
	free(es.done);
}

enum principal_state
sweep_liveness(struct sweeper *s, const char *principal, bool *complete, char *note,
	       size_t notelen)
{
	const char *names[1] = { principal };
	int count[1] = { 0 };
	struct scan sc = { .count = count };
	enum principal_state st;

	note_say(note, notelen, "%s", "");
	if (complete != NULL)
		*complete = false;
	if (!connz_principal_valid(principal)) {
		note_say(note, notelen, "not a principal (\"<o>.<a>\" with a principal owner)");
		return PRINCIPAL_UNKNOWN;
	}
	scan_run(s, names, 1, &sc);
	free(sc.hits);
	if (complete != NULL)
		*complete = sc.complete;
	if (count[0] > 0)
		st = PRINCIPAL_LIVE;  /* seen: live, however the rest of the scan went */
	else if (sc.complete)
		st = PRINCIPAL_GONE;
	else
		st = PRINCIPAL_UNKNOWN;
	if (!sc.complete)
		note_say(note, notelen, "scan incomplete: %s", sc.note);
	return st;
}
