/*
 * Verified eviction and principal liveness: one shared sweep of the broker
 * per request (WIRE.md §5 ctl.delivery-admin; the seed: "the daemon answers
 * each request with one shared sweep of the broker").
 *
 * A scan pages through CONNZ of the space account. Connections come sorted
 * by cid (the broker's default, checked), and connections that close
 * between two pages shift the later ones to lower offsets, so a naive next
 * offset could skip one. Each page therefore starts on the last entry of
 * the one before (an overlap of one), and a page whose first cid is past
 * the last cid already seen has lost contiguity: the scan steps back and
 * reads that stretch again. Entries are counted once, by cid. A reply that
 * fails anywhere makes the scan incomplete, and an incomplete scan never
 * verifies anything.
 *
 * Everything in a CONNZ or KICK reply is network input: every field the
 * sweep uses is type-checked, and every loop is bounded (pages, entries per
 * page, matching connections, principals).
 */
#include "worker-registry/sweep.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/tokens.h"

#define PRINCIPAL_TAG "principal:"
#define BACKOFF_FIRST 64   /* entries a scan steps back when contiguity is lost */
#define KICK_NOT_FOUND "no such client"
#define NOTE_NO_EVICTOR "eviction is unavailable: no $SYS evictor credential is provisioned"
#define NOTE_NO_KICK "the broker does not support KICK (nats-server 2.10 or newer)"

/* ---- pure helpers ------------------------------------------------------ */

static void __attribute__((format(printf, 3, 4)))
say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Append "; "-separated text to a note (truncated to fit). */
static void __attribute__((format(printf, 3, 4)))
note_add(char *note, size_t len, const char *fmt, ...)
{
	size_t used = strlen(note);
	va_list ap;

	if (used + 1 >= len)
		return;
	if (used > 0) {
		snprintf(note + used, len - used, "; ");
		used = strlen(note);
		if (used + 1 >= len)
			return;
	}
	va_start(ap, fmt);
	vsnprintf(note + used, len - used, fmt, ap);
	va_end(ap);
}

/* "<o><sep><a>" with a principal owner and an identity-token actor, n bytes
 * of s, written as "<o>.<a>" into out. */
static bool
principal_from(const char *s, size_t n, char sep, char *out, size_t outlen)
{
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	const char *mid = memchr(s, sep, n);
	size_t olen, alen;

	if (mid == NULL || memchr(s, '\0', n) != NULL)
		return false;
	olen = (size_t)(mid - s);
	alen = n - olen - 1;
	if (olen == 0 || olen > IDENT_MAX || alen == 0 || alen > IDENT_MAX)
		return false;
	memcpy(owner, s, olen);
	owner[olen] = '\0';
	memcpy(actor, mid + 1, alen);
	actor[alen] = '\0';
	if (!principal_owner_valid(owner) || !identity_token_valid(actor))
		return false;
	return principal_format(owner, actor, out, outlen);
}

/*
 * Each principal an entry names, handed to fn (which returns true to
 * stop): every valid "principal:<o>.<a>" tag (tags that name none are
 * ignored), else, when no tag names one, its authorized_user "<o>-<a>".
 * An entry that is not an object, and fields of another type, name
 * nothing. Returns how many were handed over.
 */
static size_t
entry_each(const json_t *conn, bool (*fn)(const char *principal, void *arg), void *arg)
{
	char p[PRINCIPAL_MAX + 1];
	const json_t *tags, *t, *user;
	size_t n = 0, i, tl = strlen(PRINCIPAL_TAG);

	if (!json_is_object(conn))
		return 0;
	tags = json_object_get(conn, "tags");
	if (json_is_array(tags)) {
		json_array_foreach(tags, i, t) {
			const char *v = json_string_value(t);
			if (i >= SWEEP_PAGE)
				break;
			if (v == NULL || strncmp(v, PRINCIPAL_TAG, tl) != 0 ||
			    !principal_from(v + tl, json_string_length(t) - tl, '.', p, sizeof(p)))
				continue;
			n++;
			if (fn(p, arg))
				return n;
		}
	}
	if (n > 0)
		return n;
	user = json_object_get(conn, "authorized_user");
	if (json_is_string(user) &&
	    principal_from(json_string_value(user), json_string_length(user), '-', p, sizeof(p))) {
		fn(p, arg);
		return 1;
	}
	return 0;
}

struct first_arg {
	char *out;
	size_t outlen;
	bool ok;
};

static bool
take_first(const char *p, void *arg)
{
	struct first_arg *a = arg;

	if (strlen(p) < a->outlen) {
		strcpy(a->out, p);
		a->ok = true;
	}
	return true;
}

int
connz_entry_principal(const json_t *conn, char *out, size_t outlen)
{
	struct first_arg a = { out, outlen, false };

	entry_each(conn, take_first, &a);
	return a.ok ? 0 : -1;
}

struct names_arg {
	const char *principal;
	bool found;
};

static bool
is_it(const char *p, void *arg)
{
	struct names_arg *a = arg;

	a->found = strcmp(p, a->principal) == 0;
	return a->found;
}

bool
connz_entry_names(const json_t *conn, const char *principal)
{
	struct names_arg a = { principal, false };

	if (principal == NULL)
		return false;
	entry_each(conn, is_it, &a);
	return a.found;
}

/* A server id we may put in a subject: one token of [A-Za-z0-9_-]. */
static bool
server_id_valid(const char *s, size_t n)
{
	if (n == 0 || n > SWEEP_SERVER_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* An integer field >= 0 (JSON integers only; a real is refused). */
static bool
get_count(const json_t *obj, const char *key, long long *out)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (long long)json_integer_value(v);
	return true;
}

/* {"error":{"code","description"}} as "<code> <description>" (bounded). */
static void
broker_error(const json_t *err, char *why, size_t whylen)
{
	const json_t *code = json_object_get(err, "code");
	const json_t *desc = json_object_get(err, "description");

	say(why, whylen, "%lld %.160s", json_is_integer(code) ? (long long)json_integer_value(code) : 0LL,
	    json_is_string(desc) ? json_string_value(desc) : "(no description)");
}

/* One entry: an object with an integer cid, and tags (an array of strings),
 * authorized_user and account (strings) when present. */
static bool
entry_valid(const json_t *e, char *why, size_t whylen, size_t idx)
{
	const json_t *tags, *t, *v;
	size_t i;

	if (!json_is_object(e)) {
		say(why, whylen, "connections[%zu] is not an object", idx);
		return false;
	}
	v = json_object_get(e, "cid");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		say(why, whylen, "connections[%zu].cid is missing or not a non-negative integer", idx);
		return false;
	}
	tags = json_object_get(e, "tags");
	if (tags != NULL) {
		if (!json_is_array(tags) || json_array_size(tags) > SWEEP_PAGE) {
			say(why, whylen, "connections[%zu].tags is not an array of at most %d strings",
			    idx, SWEEP_PAGE);
			return false;
		}
		json_array_foreach(tags, i, t)
			if (!json_is_string(t)) {
				say(why, whylen, "connections[%zu].tags[%zu] is not a string", idx, i);
				return false;
			}
	}
	v = json_object_get(e, "authorized_user");
	if (v != NULL && !json_is_string(v)) {
		say(why, whylen, "connections[%zu].authorized_user is not a string", idx);
		return false;
	}
	v = json_object_get(e, "account");
	if (v != NULL && !json_is_string(v)) {
		say(why, whylen, "connections[%zu].account is not a string", idx);
		return false;
	}
	return true;
}

int
connz_page_parse(const json_t *reply, long long offset, struct connz_page *p, char *why,
		 size_t whylen)
{
	const json_t *server, *data, *v, *conns, *e;
	long long num, prev = -1;
	size_t i;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(reply)) {
		say(why, whylen, "the reply is not a JSON object");
		return -1;
	}
	v = json_object_get(reply, "error");
	if (v != NULL) {
		char text[200];
		if (!json_is_object(v)) {
			say(why, whylen, "the reply's error is not an object");
			return -1;
		}
		broker_error(v, text, sizeof(text));
		say(why, whylen, "the broker refused CONNZ: %s", text);
		return -1;
	}
	server = json_object_get(reply, "server");
	if (!json_is_object(server)) {
		say(why, whylen, "server is missing or not an object");
		return -1;
	}
	v = json_object_get(server, "ver");
	if (json_is_string(v) && json_string_length(v) < sizeof(p->version))
		snprintf(p->version, sizeof(p->version), "%s", json_string_value(v));
	/* A clustered broker answers with one server's connections: the other
	 * servers' are not in the reply, so it proves nothing about them. */
	v = json_object_get(server, "cluster");
	if (v != NULL && (!json_is_string(v) || json_string_length(v) > 0)) {
		say(why, whylen, "the broker is clustered (cluster \"%.64s\"): a CONNZ reply covers "
		    "one server only", json_is_string(v) ? json_string_value(v) : "?");
		return -1;
	}
	data = json_object_get(reply, "data");
	if (!json_is_object(data)) {
		say(why, whylen, "data is missing or not an object");
		return -1;
	}
	v = json_object_get(data, "server_id");
	if (!json_is_string(v) || !server_id_valid(json_string_value(v), json_string_length(v))) {
		say(why, whylen, "data.server_id is missing or not a server id");
		return -1;
	}
	memcpy(p->server_id, json_string_value(v), json_string_length(v) + 1);
	if (!get_count(data, "total", &p->total) || !get_count(data, "offset", &p->offset) ||
	    !get_count(data, "num_connections", &num)) {
		say(why, whylen, "data.total, data.offset or data.num_connections is missing or "
		    "not a non-negative integer");
		return -1;
	}
	if (p->offset != offset) {
		say(why, whylen, "data.offset is %lld, %lld was asked for", p->offset, offset);
		return -1;
	}
	conns = json_object_get(data, "connections");
	if (!json_is_array(conns)) {
		/* The broker omits an empty list. */
		if (conns != NULL || num != 0) {
			say(why, whylen, "data.connections is missing or not an array");
			return -1;
		}
	} else if ((long long)json_array_size(conns) != num) {
		say(why, whylen, "data.num_connections is %lld but %zu connections are listed", num,
		    json_array_size(conns));
		return -1;
	}
	if (num > SWEEP_PAGE) {
		say(why, whylen, "%lld connections in one page, at most %d were asked for", num,
		    SWEEP_PAGE);
		return -1;
	}
	json_array_foreach(conns, i, e) {
		if (!entry_valid(e, why, whylen, i))
			return -1;
		long long cid = (long long)json_integer_value(json_object_get(e, "cid"));
		if (cid <= prev) {
			say(why, whylen, "connections are not sorted by cid (%lld after %lld)", cid,
			    prev);
			return -1;
		}
		prev = cid;
	}
	p->n = (size_t)num;
	p->conns = conns;
	return 0;
}

int
kick_reply_parse(const char *data, size_t len, char *why, size_t whylen)
{
	json_t *r, *err;
	int rc;

	say(why, whylen, "%s", "");
	if (data == NULL || len > 64 * 1024 ||
	    (r = json_loadb(data, len, 0, NULL)) == NULL) {
		say(why, whylen, "the KICK reply is not JSON");
		return -1;
	}
	err = json_object_get(r, "error");
	if (!json_is_object(r)) {
		say(why, whylen, "the KICK reply is not a JSON object");
		rc = -1;
	} else if (err != NULL) {
		if (json_is_object(err)) {
			broker_error(err, why, whylen);
			rc = 0;
		} else {
			say(why, whylen, "the KICK reply's error is not an object");
			rc = -1;
		}
	} else if (!json_is_object(json_object_get(r, "server"))) {
		say(why, whylen, "the KICK reply names no server");
		rc = -1;
	} else {
		rc = 1;
	}
	json_decref(r);
	return rc;
}

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
	int who;  /* index into the sweep's distinct principals */
	char server[SWEEP_SERVER_ID_MAX + 1];
};

struct scan {
	bool complete;
	char note[SWEEP_NOTE_MAX];
	char server_id[SWEEP_SERVER_ID_MAX + 1]; /* every page's: one server */
	char version[32];
	struct hit *hits;
	size_t nhits, cap;
	int *count;  /* connections seen per principal */
};

static int
hit_add(struct scan *sc, long long cid, int who, const char *server)
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
	snprintf(sc->hits[sc->nhits].server, sizeof(sc->hits[0].server), "%s", server);
	sc->nhits++;
	sc->count[who]++;
	return 0;
}

static void
scan_reset(struct scan *sc, int nnames)
{
	sc->complete = false;
	sc->note[0] = '\0';
	sc->server_id[0] = '\0';
	sc->version[0] = '\0';
	sc->nhits = 0;
	memset(sc->count, 0, (size_t)nnames * sizeof(*sc->count));
}

/* One CONNZ request: the parsed reply, or NULL with why. */
static json_t *
connz_request(struct sweeper *s, long long offset, char *why, size_t whylen)
{
	char subject[128], body[96];
	natsMsg *m = NULL;
	natsStatus st;
	json_t *r;
	json_error_t jerr;
	int len;

	snprintf(subject, sizeof(subject), "$SYS.REQ.ACCOUNT.%s.CONNZ", s->account);
	snprintf(body, sizeof(body), "{\"auth\":true,\"offset\":%lld,\"limit\":%d}", offset,
	    SWEEP_PAGE);
	s->connz_requests++;
	st = natsConnection_RequestString(&m, s->observer, subject, body, SWEEP_REQUEST_MS);
	if (st != NATS_OK) {
		say(why, whylen, "%s", st == NATS_TIMEOUT ? "no answer within the request timeout" :
		    st == NATS_NO_RESPONDERS ? "no responders (is the observer a $SYS user?)" :
		    natsStatus_GetText(st));
		return NULL;
	}
	len = natsMsg_GetDataLength(m);
	if (len <= 0 || len > SWEEP_REPLY_MAX) {
		say(why, whylen, "a reply of %d bytes", len);
		natsMsg_Destroy(m);
		return NULL;
	}
	r = json_loadb(natsMsg_GetData(m), (size_t)len, 0, &jerr);
	natsMsg_Destroy(m);
	if (r == NULL)
		say(why, whylen, "the reply is not JSON: %.100s", jerr.text);
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
	entry_each(e, match_one, &a);
	return a.n;
}

/*
 * Scan the account's connections once, recording those of names[]. On
 * return sc->complete says whether every connection was seen.
 */
static void
scan_run(struct sweeper *s, const char *const *names, int nnames, struct scan *sc)
{
	long long offset = 0, last = -1, step = 0;
	int pages = 0;

	scan_reset(sc, nnames);
	if (s->observer == NULL) {
		say(sc->note, sizeof(sc->note), "no $SYS observer connection");
		return;
	}
	if (!server_id_valid(s->account, strlen(s->account))) {
		say(sc->note, sizeof(sc->note), "no space account to scan");
		return;
	}
	for (;;) {
		char why[SWEEP_NOTE_MAX - 48];
		struct connz_page pg;
		json_t *reply, *e;
		size_t i;

		if (pages++ == SWEEP_PAGES_MAX) {
			say(sc->note, sizeof(sc->note), "the scan needs more than %d CONNZ pages",
			    SWEEP_PAGES_MAX);
			return;
		}
		if ((reply = connz_request(s, offset, why, sizeof(why))) == NULL ||
		    connz_page_parse(reply, offset, &pg, why, sizeof(why)) != 0) {
			say(sc->note, sizeof(sc->note), "CONNZ at offset %lld: %s", offset, why);
			json_decref(reply);
			return;
		}
		/* cids are one server's: a restart in between starts them over. */
		if (sc->server_id[0] == '\0') {
			memcpy(sc->server_id, pg.server_id, sizeof(sc->server_id));
			memcpy(sc->version, pg.version, sizeof(sc->version));
		} else if (strcmp(sc->server_id, pg.server_id) != 0) {
			say(sc->note, sizeof(sc->note), "CONNZ at offset %lld: the server changed "
			    "during the scan (%.60s, then %.60s)", offset, sc->server_id, pg.server_id);
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
				if (hit_add(sc, cid, who[k], pg.server_id) != 0) {
					say(sc->note, sizeof(sc->note), "more than %d connections of the "
					    "named principals", SWEEP_MATCHES_MAX);
					json_decref(reply);
					return;
				}
			last = cid;
		}
		if (offset + (long long)pg.n >= pg.total) {
			json_decref(reply);
			sc->complete = true;
			return;
		}
		if (pg.n < 2) {
			say(sc->note, sizeof(sc->note), "CONNZ at offset %lld: %zu of %lld connections "
			    "in a page", offset, pg.n, pg.total);
			json_decref(reply);
			return;
		}
		offset += (long long)pg.n - 1;
		json_decref(reply);
	}
}

/* ---- eviction ---------------------------------------------------------- */

struct kicked {
	long long cid;
	char server[SWEEP_SERVER_ID_MAX + 1];
};

struct evict_state {
	int *kicked;               /* accepted KICKs per principal (distinct connections) */
	char (*problem)[SWEEP_NOTE_MAX / 2]; /* the first KICK trouble per principal */
	struct kicked *done;       /* connections whose KICK was accepted */
	size_t ndone, capdone;
	bool unsupported;          /* the broker has no KICK */
	bool stalled;              /* a KICK went unanswered: no more this sweep */
	bool moved;                /* a KICK of this round closed a connection, or found it closed */
};

static bool
kicked_before(const struct evict_state *es, const struct hit *h)
{
	for (size_t i = 0; i < es->ndone; i++)
		if (es->done[i].cid == h->cid && strcmp(es->done[i].server, h->server) == 0)
			return true;
	return false;
}

static void
kicked_record(struct evict_state *es, const struct hit *h)
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
	es->done[es->ndone].cid = h->cid;
	snprintf(es->done[es->ndone].server, sizeof(es->done[0].server), "%s", h->server);
	es->ndone++;
}

/* A server version that has KICK: 2.10 or newer ("2.10.27", "2.11.0-RC.1"). */
static bool
version_has_kick(const char *ver)
{
	int major, minor;

	if (sscanf(ver, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 2 || (major == 2 && minor >= 10);
}

/* KICK one connection; has_kick: its server says it is 2.10 or newer. */
static void
kick_one(struct sweeper *s, const struct hit *h, bool has_kick, struct evict_state *es)
{
	char subject[SWEEP_SERVER_ID_MAX + 32], body[64], why[160];
	char *problem = es->problem[h->who];
	size_t plen = sizeof(es->problem[0]);
	natsMsg *m = NULL;
	natsStatus st;
	int rc;

	snprintf(subject, sizeof(subject), "$SYS.REQ.SERVER.%s.KICK", h->server);
	snprintf(body, sizeof(body), "{\"cid\":%lld}", h->cid);
	s->kick_requests++;
	st = natsConnection_RequestString(&m, s->evictor, subject, body, SWEEP_REQUEST_MS);
	if (st == NATS_NO_RESPONDERS) {
		/* An older broker has no KICK responder; a newer one without a
		 * responder is not that server any more (restarted, or gone). */
		if (!has_kick)
			es->unsupported = true;
		else if (problem[0] == '\0')
			say(problem, plen, "KICK of connection %lld: no responders on server %.60s",
			    h->cid, h->server);
		return;
	}
	if (st != NATS_OK) {
		/* Each unanswered KICK costs the request timeout, and the admin
		 * rail waits behind this sweep: one is enough to stop kicking. */
		es->stalled = true;
		if (problem[0] == '\0')
			say(problem, plen, "KICK of connection %lld: %s; no further KICK was sent",
			    h->cid, st == NATS_TIMEOUT ? "no answer within the request timeout" :
			    natsStatus_GetText(st));
		return;
	}
	rc = kick_reply_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), why,
	    sizeof(why));
	natsMsg_Destroy(m);
	if (rc == 1 || (rc == 0 && strstr(why, KICK_NOT_FOUND) != NULL))
		es->moved = true;
	if (rc == 1) {
		if (!kicked_before(es, h)) {
			es->kicked[h->who]++;
			kicked_record(es, h);
		}
	} else if (rc == 0 && strstr(why, KICK_NOT_FOUND) != NULL) {
		/* It closed between the scan and the KICK: the re-scan tells. */
	} else if (problem[0] == '\0') {
		say(problem, plen, "KICK of connection %lld %s: %.100s", h->cid,
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

static bool
principal_valid(const char *p)
{
	char out[PRINCIPAL_MAX + 1];
	size_t n;

	return p != NULL && (n = strlen(p)) <= PRINCIPAL_MAX &&
	    principal_from(p, n, '.', out, sizeof(out)) && strcmp(out, p) == 0;
}

void
sweep_evict(struct sweeper *s, const char *const *principals, int n,
	    struct eviction_result *out)
{
	const char *names[SWEEP_PRINCIPALS_MAX];
	int map[SWEEP_PRINCIPALS_MAX], count[SWEEP_PRINCIPALS_MAX], kicked[SWEEP_PRINCIPALS_MAX];
	char problem[SWEEP_PRINCIPALS_MAX][SWEEP_NOTE_MAX / 2];
	struct evict_state es = { .kicked = kicked, .problem = problem };
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
			say(out[i].note, sizeof(out[i].note), "more than %d principals in one "
			    "request: not swept", SWEEP_PRINCIPALS_MAX);
			continue;
		}
		map[i] = -1;
		if (!principal_valid(principals[i])) {
			say(out[i].note, sizeof(out[i].note), "not a principal (\"<o>.<a>\" with a "
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
		if (s->evictor == NULL || es.unsupported || es.stalled)
			break;
		es.moved = false;
		for (size_t h = 0; h < sc.nhits && !es.unsupported && !es.stalled; h++)
			kick_one(s, &sc.hits[h], version_has_kick(sc.version), &es);
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
		if (s->evictor == NULL)
			note_add(r->note, sizeof(r->note), "%s", NOTE_NO_EVICTOR);
		if (!sc.complete)
			note_add(r->note, sizeof(r->note), "scan incomplete: %s", sc.note);
		if (count[w] > 0 && s->evictor != NULL) {
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

	say(note, notelen, "%s", "");
	if (complete != NULL)
		*complete = false;
	if (!principal_valid(principal)) {
		say(note, notelen, "not a principal (\"<o>.<a>\" with a principal owner)");
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
		say(note, notelen, "scan incomplete: %s", sc.note);
	return st;
}
