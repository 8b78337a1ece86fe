/*
 * The checker of a chaos run. It reads every post the broker acknowledged
 * and every frame each member surfaced, and reports:
 *   - lost: an acknowledged post a member is owed and never surfaced;
 *   - unauthorized: a frame no membership row and read ACL of its member
 *     from its post's acknowledgement to its storing in DLV allowed (the
 *     reader decided in between; chaos.h, AUTH_GRACE_MS); and, reported
 *     only, late commits: frames stored well after a change that denies
 *     them;
 *   - copied twice (two DLV frames of one post: the dedup key failed) and
 *     redelivered (one frame surfaced again: the member's own at least
 *     once, its ack lost with a broker);
 *   - the latency from a post's acknowledgement to its first surfacing,
 *     and per fault the worst of the posts acknowledged while it lasted;
 * with, for each anomaly, the faults that came before it. Lost or
 * unauthorized fails the run.
 */
#include "tests/chaos/chaos.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANOMALIES_SHOWN 20
#define STALL_AFTER_MS 10000
#define BEFORE_MS 65000 /* a fault this long before a post may still hold it (the ack wait) */

/* A churner's membership and ACL, from one change on. */
struct state {
	uint64_t join, leave;
	bool allowed;
	int64_t first_ms, done_ms; /* of the change that made it */
};

static int
states_of(int i, struct state *st, int max)
{
	int n = 1;

	st[0] = (struct state){ .join = 0, .leave = 0, .allowed = true };
	/* The first join: every member's row at the start. */
	for (int k = 0; k < C.nev && n < max; k++) {
		const struct event *e = &C.ev[k];
		if (e->member != i)
			continue;
		st[n] = st[n - 1];
		st[n].first_ms = e->first_ms;
		st[n].done_ms = e->done_ms;
		switch (e->kind) {
		case EV_LEAVE:
			st[n].leave = e->seq;
			break;
		case EV_JOIN:
			st[n].join = e->seq;
			st[n].leave = 0;
			break;
		case EV_NARROW:
			st[n].allowed = false;
			break;
		case EV_RESTORE:
			st[n].allowed = true;
			break;
		}
		n++;
	}
	return n;
}

static bool
state_allows(const struct state *s, uint64_t seq)
{
	uint64_t join = s->join ? s->join : C.first_join;

	return s->allowed && seq > join && (s->leave == 0 || seq <= s->leave);
}

/* Each churner's states, made once for the report (states_of). */
static struct state *states[MEMBERS_MAX];
static int nstates[MEMBERS_MAX];

/* Did some membership row and read ACL member i may have had at some time
 * within [from, to] allow the post at seq? */
static bool
allowed_within(int i, uint64_t seq, int64_t from, int64_t to)
{
	if (states[i] == NULL) {
		states[i] = calloc(C.nev + 1, sizeof(*states[i]));
		nstates[i] = states_of(i, states[i], C.nev + 1);
	}
	const struct state *st = states[i];
	int n = nstates[i];

	for (int k = 0; k < n; k++) {
		bool begun = st[k].first_ms <= to;
		bool superseded = k + 1 < n && st[k + 1].done_ms + AUTH_GRACE_MS < from;
		if (begun && !superseded && state_allows(&st[k], seq))
			return true;
	}
	return false;
}

/* Did member i's membership row change (a new generation: the wire's
 * dedup key is another) between two copies stored at a and b? */
static bool
row_changed(int i, int64_t a, int64_t b)
{
	int64_t lo = a < b ? a : b, hi = a < b ? b : a;

	for (int k = 0; k < C.nev; k++) {
		const struct event *e = &C.ev[k];
		if (e->member == i && (e->kind == EV_LEAVE || e->kind == EV_JOIN) &&
		    e->done_ms >= lo - BEFORE_MS && e->first_ms <= hi)
			return true;
	}
	return false;
}

bool
owed(int i, int n)
{
	const struct post *p = &C.posts[n];
	int64_t acked = __atomic_load_n(&p->acked_ms, __ATOMIC_ACQUIRE);

	if (acked == 0)
		return false;
	return !C.m[i].churn || (acked > C.m[i].changed_ms && p->seq > C.m[i].join);
}

/* The faults that may have touched a post acknowledged at t, as words. */
static void
faults_before(int64_t t, char *out, size_t len)
{
	size_t w = 0;
	int shown = 0;

	out[0] = '\0';
	for (int k = 0; k < C.nf && shown < 6; k++) {
		const struct fault *f = &C.f[k];
		if (f->start_ms > t + 5000 || (f->end_ms ? f->end_ms : f->start_ms) < t - BEFORE_MS)
			continue;
		w += (size_t)snprintf(out + w, w < len ? len - w : 0, "%s[%.1f s] %s %s",
		    shown ? "; " : "", (double)(f->start_ms - C.t0_ms) / 1000, f->kind, f->detail);
		shown++;
	}
	if (shown == 0)
		snprintf(out, len, "no fault within %d s before", BEFORE_MS / 1000);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int64_t
pct(const int64_t *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	size_t k = (size_t)(q * (double)(n - 1) + 0.5);
	return v[k < n ? k : n - 1];
}

/* The worst latency of the posts acknowledged within [from, to). */
static int64_t
worst_between(int64_t from, int64_t to)
{
	int64_t worst = 0;
	int n = atomic_load(&C.nposts);

	for (int k = 0; k < n; k++) {
		int64_t a = C.posts[k].acked_ms;
		if (a < from || a >= to)
			continue;
		for (int i = 0; i < C.members; i++) {
			const struct seen *s = &C.m[i].seen[k];
			if (C.m[i].churn || s->frames == 0)
				continue;
			if (s->surfaced_ms - a > worst)
				worst = s->surfaced_ms - a;
		}
	}
	return worst;
}

/* The slowest frames, with when they were acknowledged, stored in DLV and
 * surfaced (seconds into the load), and the faults before them. */
static void
slowest(void)
{
	struct { int64_t lat; int i, k; } top[5] = { { 0, 0, 0 } };
	int nposts = atomic_load(&C.nposts);
	char before[1024];

	for (int i = 0; i < C.members; i++)
		for (int k = 0; k < nposts; k++) {
			const struct seen *s = &C.m[i].seen[k];
			int64_t l = s->surfaced_ms - C.posts[k].acked_ms;
			if (s->frames == 0 || C.posts[k].acked_ms == 0 || l <= top[4].lat)
				continue;
			int at = 4;
			while (at > 0 && top[at - 1].lat < l) {
				top[at] = top[at - 1];
				at--;
			}
			top[at].lat = l, top[at].i = i, top[at].k = k;
		}
	for (int t = 0; t < 5 && top[t].lat > 0; t++) {
		const struct seen *s = &C.m[top[t].i].seen[top[t].k];
		const struct post *p = &C.posts[top[t].k];
		faults_before(p->acked_ms, before, sizeof(before));
		say("slow: %s post %d (CHAT %" PRIu64 "): acked %.1f s, stored %.1f s, surfaced "
		    "%.1f s; faults before: %s", C.m[top[t].i].a.name, top[t].k, p->seq,
		    (double)(p->acked_ms - C.t0_ms) / 1000, (double)(s->stored_ms - C.t0_ms) / 1000,
		    (double)(s->surfaced_ms - C.t0_ms) / 1000, before);
	}
}

int
check_report(void)
{
	int nposts = atomic_load(&C.nposts), acked = 0;
	long lost = 0, unauth = 0, late = 0, twice = 0, twice_same = 0, redelivered = 0, surfaced = 0, unacked_surfaced = 0,
	    owed_n = 0;
	size_t nlat = 0;
	int64_t *lat = calloc((size_t)nposts * (size_t)C.members + 1, sizeof(*lat));
	json_t *doc = json_object(), *anom = json_array(), *faults = json_object();
	char before[1024];

	for (int k = 0; k < nposts; k++)
		acked += C.posts[k].acked_ms != 0;
	for (int i = 0; i < C.members; i++) {
		struct mbr *p = &C.m[i];
		for (int k = 0; k < nposts; k++) {
			const struct seen *s = &p->seen[k];
			const struct post *po = &C.posts[k];
			bool o = owed(i, k);
			owed_n += o;
			if (s->frames > 0) {
				surfaced++;
				if (s->copies > 1) {
					twice++;
					if (!p->churn || !row_changed(i, s->stored_ms, s->stored2_ms))
						twice_same++;
					if (json_array_size(anom) < ANOMALIES_SHOWN)
						json_array_append_new(anom, json_pack("{s:s, s:s, s:i, s:I, "
						    "s:I, s:I, s:I, s:I}", "what", "copied twice", "member",
						    p->a.name, "post", k, "chat_seq", (json_int_t)po->seq,
						    "dlv_seq", (json_int_t)s->dlv_seq, "dlv_seq2",
						    (json_int_t)s->dlv_seq2, "stored_ms_after_start",
						    (json_int_t)(s->stored_ms - C.t0_ms), "stored2_ms_after_start",
						    (json_int_t)(s->stored2_ms - C.t0_ms)));
				}
				redelivered += s->frames > s->copies;
				if (po->acked_ms == 0)
					unacked_surfaced++;
				else if (p->churn && !allowed_within(i, po->seq, po->acked_ms,
				    s->stored_ms)) {
					unauth++;
					faults_before(po->acked_ms, before, sizeof(before));
					if (json_array_size(anom) < ANOMALIES_SHOWN)
						json_array_append_new(anom, json_pack("{s:s, s:s, s:i, "
						    "s:I, s:I, s:s}", "what", "unauthorized", "member",
						    p->a.name, "post", k, "chat_seq", (json_int_t)po->seq,
						    "stored_ms_after_start", (json_int_t)(s->stored_ms -
						    C.t0_ms), "faults_before", before));
				}
				else if (p->churn && !allowed_within(i, po->seq, s->stored_ms - LATE_MS,
				    s->stored_ms))
					late++;
				if (o)
					lat[nlat++] = s->surfaced_ms - po->acked_ms;
			} else if (o) {
				lost++;
				faults_before(po->acked_ms, before, sizeof(before));
				if (json_array_size(anom) < ANOMALIES_SHOWN)
					json_array_append_new(anom, json_pack("{s:s, s:s, s:i, s:I, s:I, "
					    "s:s}", "what", "lost", "member", p->a.name, "post", k,
					    "chat_seq", (json_int_t)po->seq, "acked_ms_after_start",
					    (json_int_t)(po->acked_ms - C.t0_ms), "faults_before", before));
			}
		}
	}
	qsort(lat, nlat, sizeof(*lat), cmp_i64);
	slowest();

	/* Per kind of fault: how many, and the stall of the posts made while
	 * it lasted and just after (the worst latency of those acknowledged
	 * from its start to STALL_AFTER_MS after it was healed). */
	for (int k = 0; k < C.nf; k++) {
		const struct fault *f = &C.f[k];
		int64_t to = (f->end_ms > f->start_ms ? f->end_ms : f->start_ms) + STALL_AFTER_MS;
		json_t *e = json_object_get(faults, f->kind), *st;
		if (e == NULL) {
			e = json_pack("{s:i, s:[]}", "count", 0, "stall_ms");
			json_object_set_new(faults, f->kind, e);
		}
		json_object_set_new(e, "count", json_integer(json_integer_value(json_object_get(e,
		    "count")) + 1));
		st = json_object_get(e, "stall_ms");
		json_array_append_new(st, json_integer(worst_between(f->start_ms, to)));
	}
	const char *kind;
	json_t *e;
	say("faults (kind: count, stall of the posts made during it: median / max):");
	json_object_foreach(faults, kind, e) {
		json_t *st = json_object_get(e, "stall_ms");
		size_t n = json_array_size(st);
		int64_t *v = calloc(n + 1, sizeof(*v));
		for (size_t i = 0; i < n; i++)
			v[i] = json_integer_value(json_array_get(st, i));
		qsort(v, n, sizeof(*v), cmp_i64);
		json_object_set_new(e, "stall_p50_ms", json_integer(pct(v, n, 0.5)));
		json_object_set_new(e, "stall_max_ms", json_integer(n ? v[n - 1] : 0));
		say("  %-16s %4zu  %6.1f s / %6.1f s", kind, n, (double)pct(v, n, 0.5) / 1000,
		    (double)(n ? v[n - 1] : 0) / 1000);
		json_object_del(e, "stall_ms");
		free(v);
	}

	json_object_set_new(doc, "mode", json_string(C.mode == MODE_CLUSTER ? "cluster" : "single"));
	json_object_set_new(doc, "seed", json_integer((json_int_t)C.seed));
	json_object_set_new(doc, "seconds", json_integer(C.seconds));
	json_object_set_new(doc, "broker", json_integer(h_broker_version()));
	json_object_set_new(doc, "members", json_integer(C.members));
	json_object_set_new(doc, "rate", json_integer(C.rate));
	json_object_set_new(doc, "posts", json_pack("{s:i, s:i, s:i}", "begun", nposts, "acked",
	    acked, "publish_retries", (int)atomic_load(&C.pub_retries)));
	json_object_set_new(doc, "frames", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "owed", (json_int_t)owed_n, "surfaced", (json_int_t)surfaced, "lost", (json_int_t)lost,
	    "unauthorized", (json_int_t)unauth, "copied_twice", (json_int_t)twice,
	    "copied_twice_same_row", (json_int_t)twice_same, "late_commits", (json_int_t)late,
	    "redelivered", (json_int_t)redelivered, "surfaced_unacknowledged",
	    (json_int_t)unacked_surfaced));
	json_object_set_new(doc, "latency_ms", json_pack("{s:I, s:I, s:I, s:I, s:I}", "p50",
	    (json_int_t)pct(lat, nlat, 0.5), "p90", (json_int_t)pct(lat, nlat, 0.9), "p99",
	    (json_int_t)pct(lat, nlat, 0.99), "p999", (json_int_t)pct(lat, nlat, 0.999), "max",
	    (json_int_t)(nlat ? lat[nlat - 1] : 0)));
	json_object_set_new(doc, "faults", faults);
	json_object_set_new(doc, "churn_changes", json_integer(C.nev));
	json_object_set_new(doc, "daemon", json_pack("{s:i, s:i, s:s}", "starts", C.daemon_restarts,
	    "exits_on_its_own", C.daemon_exits, "last_exit", C.last_exit));
	json_object_set_new(doc, "anomalies", anom);

	say("posts: %d begun, %d acknowledged (%ld publishes repeated); churn: %d changes",
	    nposts, acked, atomic_load(&C.pub_retries), C.nev);
	say("frames: %ld owed, %ld surfaced; lost %ld, unauthorized %ld; copied twice %ld (%ld "
	    "with no membership change between: one dedup key), redelivered %ld, of "
	    "unacknowledged posts %ld", owed_n, surfaced, lost, unauth, twice, twice_same,
	    redelivered, unacked_surfaced);
	if (late)
		say("! %ld frames of churners were stored more than %d s after a change that denies "
		    "them, decided before it: their publishes committed late (a cluster without "
		    "quorum holds a publish until it has one again)", late, LATE_MS / 1000);
	say("latency (acknowledged → surfaced): p50 %.2f s, p90 %.2f s, p99 %.2f s, max %.2f s",
	    (double)pct(lat, nlat, 0.5) / 1000, (double)pct(lat, nlat, 0.9) / 1000,
	    (double)pct(lat, nlat, 0.99) / 1000, (double)(nlat ? lat[nlat - 1] : 0) / 1000);
	say("daemon: started %d times, exited on its own %d times%s%s", C.daemon_restarts,
	    C.daemon_exits, C.daemon_exits ? "; last: " : "", C.last_exit);
	for (size_t k = 0; k < json_array_size(anom); k++) {
		json_t *a = json_array_get(anom, k);
		char *line = json_dumps(a, JSON_COMPACT);
		say("%s %s", strcmp(json_string_value(json_object_get(a, "what")), "copied twice") ?
		    "✗" : "!", line);
		free(line);
	}
	if (C.out != NULL && json_dump_file(doc, C.out, JSON_INDENT(2)) != 0)
		say("! cannot write %s", C.out);
	json_decref(doc);
	free(lat);
	for (int i = 0; i < MEMBERS_MAX; i++) {
		free(states[i]);
		states[i] = NULL;
	}
	if (lost || unauth) {
		say("✗ FAIL: %ld lost, %ld unauthorized (seed %" PRIu64 " replays this schedule)",
		    lost, unauth, C.seed);
		return 1;
	}
	if (acked == 0 || surfaced == 0) {
		say("✗ FAIL: nothing was %s", acked == 0 ? "acknowledged" : "surfaced");
		return 1;
	}
	say("✓ PASS: 0 lost, 0 unauthorized of %ld owed frames (seed %" PRIu64 ")", owed_n,
	    C.seed);
	return 0;
}
