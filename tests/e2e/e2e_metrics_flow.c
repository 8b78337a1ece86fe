/*
 * Issue 43, the data path's and the rails' families against ground truth
 * the test controls (e2e_metrics_values does the daemon's own state):
 * posts made and copies drained (the fan-out's, the reader's counters and
 * both latency histograms), a backlog published while the fan-out and the
 * reader are stopped (consumer_pending_messages against the broker's own
 * consumer info), requests held in the registry by a test hook and sent
 * past a caller's share (registry_waiting_requests, registry_caller_
 * refusals_total and the registry's counters against the answers the
 * callers got), timer requests (the timer writer's counters against the
 * .fire messages in the stream), and a batch held by a stalled broker
 * (consumer_oldest_unacked_age_seconds against the post's stored time).
 * Every check prints what it compared and its tolerance; none asserts how
 * long anything took.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/wire/ctlclient.h"
#include "tests/e2e/scrape.h"
#include "tests/harness/harness.h"

#define SPACE "mflow"
#define S "{space=\"" SPACE "\""
#define POSTS 5
#define MEMBERS 3
#define BACKLOG 1000     /* posts waiting while the fan-out is stopped */
#define HELD 4           /* joins held in service: every ctl thread (REG_CTL_THREADS) */
#define CALLER_WAITING 32 /* a caller's share of the ctl queue (REG_CALLER_WAITING) */
#define PAST_SHARE 10    /* requests sent past it */
#define JOIN_HOLD_MS 20000

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };
static int mport;
static struct scrape s0, s1;

static int
setup(void **state)
{
	char hold[64];

	*state = &fx;
	if (h_mesh_prov_up(&mesh, SPACE, &prov) != 0)
		return -1;
	/* A join of channel "slow" is held in its ctl thread (the registry's
	 * test hook). */
	snprintf(hold, sizeof(hold), "slow:%d", JOIN_HOLD_MS);
	setenv("COTAL_TEST_JOIN_DELAY", hold, 1);
	int rc = h_metrics_daemon_start(&mesh, &dmn, NULL, &mport);
	unsetenv("COTAL_TEST_JOIN_DELAY");
	if (rc != 0 || h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound",
	    "metrics server (pid", "delivery daemon up", NULL) != 0)
		return -1;
	return 0;
}

static void
scrape_now(struct scrape *s)
{
	for (int64_t end = mono_ms() + 10000; scrape_get(mport, s) != 0; h_nap(100))
		if (mono_ms() > end)
			fail_msg("no scrape within 10 s");
}


/* Scrape until series reaches at least want (up to ms): the last value. */
static double
reaches(struct scrape *s, const char *series, double want, int ms)
{
	double v = NAN;

	for (int64_t end = mono_ms() + ms; mono_ms() < end; h_nap(100))
		if (scrape_get(mport, s) == 0 && (v = scrape_value(s, series)) >= want)
			break;
	return v;
}

/* A family's growth between the two scrapes. */
static double
delta(const char *series)
{
	return scrape_need(&s1, series) - scrape_need(&s0, series);
}

struct expect {
	const char *series;
	double lo, hi; /* the growth's bounds (equal: exact) */
};

static void
expect_all(const struct expect *e, size_t n)
{
	bool bad = false;

	for (size_t i = 0; i < n; i++) {
		double d = delta(e[i].series);
		bool ok = d >= e[i].lo && d <= e[i].hi;
		if (e[i].lo == e[i].hi)
			printf("  %s %s +%g (expected +%g, exact)\n", ok ? "✓" : "✗", e[i].series, d,
			    e[i].lo);
		else
			printf("  %s %s +%g (expected within [%g, %g])\n", ok ? "✓" : "✗",
			    e[i].series, d, e[i].lo, e[i].hi);
		bad |= !ok;
	}
	assert_false(bad);
}


/*
 * POSTS posts to MEMBERS members and one post that is not a CotalMessage,
 * drained by every member: the fan-out fetched POSTS + 1 posts, wrote
 * POSTS × MEMBERS copies, acked POSTS and dropped 1; the reader fetched and
 * delivered every copy; nothing retried, replayed, denied, given up or
 * removed (all exact; batches between 1 and the posts or copies). The
 * histograms observed one frame per copy and one post per post with
 * copies (exact), their sums between 0 and the count times the time from
 * the first post to the last frame drained, their +Inf buckets their
 * counts; no worker's connection had a permission violation (0).
 */
static void
test_counters_and_histograms_are_the_posts_and_copies(void **state)
{
	struct member m[MEMBERS], poster;
	const char *names[MEMBERS] = { "ann", "ben", "cat" };
	char id[32], subj[512], err[1024];
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	bool hdr = false;

	(void)state;
	for (int i = 0; i < MEMBERS; i++)
		h_member_up(&mesh, &prov, &m[i], names[i], "room", true);
	h_member_up(&mesh, &prov, &poster, "poster", "room", false);
	scrape_now(&s0);
	double t0 = wall_s();
	for (int i = 0; i < POSTS; i++) {
		snprintf(id, sizeof(id), "p-%d", i);
		assert_int_equal(h_post(&poster.c, &mesh, &poster.a, "room", id, "hello", NULL), 0);
	}
	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.room", mesh.token, poster.a.owner,
	    poster.a.actor);
	assert_int_equal(js_Publish(&pa, poster.c.js, subj, "not a message", 13, NULL, &jerr),
	    NATS_OK);
	jsPubAck_Destroy(pa);
	for (int i = 0; i < MEMBERS; i++) {
		json_t *f = h_dlv_drain_n(&m[i].c, &mesh, &m[i].a, POSTS, 15000, 1000, &hdr, err,
		    sizeof(err));
		if (f == NULL)
			fail_msg("%s", err);
		assert_int_equal(json_array_size(f), POSTS);
		json_decref(f);
	}
	double t1 = wall_s(), span = t1 - t0;
	reaches(&s1, "cotal_delivery_fanout_dropped_total" S "}",
	    scrape_need(&s0, "cotal_delivery_fanout_dropped_total" S "}") + 1, 10000);
	reaches(&s1, "cotal_delivery_copy_latency_seconds_count" S "}",
	    scrape_need(&s0, "cotal_delivery_copy_latency_seconds_count" S "}") + POSTS * MEMBERS, 10000);
	printf("• %d posts to %d members and 1 that is no message, drained in %.3f s:\n", POSTS,
	    MEMBERS, span);
	const struct expect e[] = {
		{ "cotal_delivery_fanout_posts_total" S "}", POSTS + 1, POSTS + 1 },
		{ "cotal_delivery_fanout_copies_total" S "}", POSTS * MEMBERS, POSTS * MEMBERS },
		{ "cotal_delivery_fanout_acked_total" S "}", POSTS, POSTS },
		{ "cotal_delivery_fanout_dropped_total" S "}", 1, 1 },
		{ "cotal_delivery_fanout_retried_total" S "}", 0, 0 },
		{ "cotal_delivery_fanout_replayed_total" S "}", 0, 0 },
		{ "cotal_delivery_fanout_batches_total" S "}", 1, POSTS + 1 },
		{ "cotal_delivery_reader_entries_total" S "}", POSTS * MEMBERS, POSTS * MEMBERS },
		{ "cotal_delivery_reader_delivered_total" S "}", POSTS * MEMBERS, POSTS * MEMBERS },
		{ "cotal_delivery_reader_denied_total" S "}", 0, 0 },
		{ "cotal_delivery_reader_gave_up_total" S "}", 0, 0 },
		{ "cotal_delivery_reader_removed_total" S "}", 0, 0 },
		{ "cotal_delivery_reader_retried_total" S "}", 0, 0 },
		{ "cotal_delivery_reader_replayed_total" S "}", 0, 0 },
		{ "cotal_delivery_reader_batches_total" S "}", 1, POSTS * MEMBERS },
		{ "cotal_delivery_copy_latency_seconds_count" S "}", POSTS * MEMBERS, POSTS * MEMBERS },
		{ "cotal_delivery_copy_latency_seconds_bucket" S ",le=\"+Inf\"}", POSTS * MEMBERS,
		    POSTS * MEMBERS },
		{ "cotal_delivery_copy_latency_seconds_sum" S "}", 0, POSTS * MEMBERS * span },
		{ "cotal_delivery_fanout_latency_seconds_count" S "}", POSTS, POSTS },
		{ "cotal_delivery_fanout_latency_seconds_bucket" S ",le=\"+Inf\"}", POSTS, POSTS },
		{ "cotal_delivery_fanout_latency_seconds_sum" S "}", 0, POSTS * span },
		{ "cotal_delivery_violations_total" S ",role=\"fanout\"}", 0, 0 },
		{ "cotal_delivery_violations_total" S ",role=\"reader\"}", 0, 0 },
		{ "cotal_delivery_violations_total" S ",role=\"registry\"}", 0, 0 },
		{ "cotal_delivery_violations_total" S ",role=\"timer\"}", 0, 0 },
	};
	expect_all(e, sizeof(e) / sizeof(e[0]));
	assert_true(scrape_need(&s1, "cotal_delivery_violations_total" S ",role=\"fanout\"}") == 0);
	for (int i = 0; i < MEMBERS; i++)
		h_close(&m[i].c);
	h_close(&poster.c);
}

/* The broker's count of what the durable still has to hand its worker
 * (num_pending) and what it handed and awaits acks for. */
static int
consumer(const char *stream_kind, const char *durable, uint64_t *pending, int64_t *acking)
{
	char stream[256];
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "%s_%s", stream_kind, mesh.token);
	natsStatus st = js_GetConsumerInfo(&ci, prov.js, stream, durable, NULL, &jerr);
	if (st != NATS_OK) {
		fprintf(stderr, "  consumer info %s/%s: %s (%d)\n", stream, durable,
		    natsStatus_GetText(st), (int)jerr);
		return -1;
	}
	*pending = ci->NumPending;
	*acking = ci->NumAckPending;
	jsConsumerInfo_Destroy(ci);
	return 0;
}

/*
 * BACKLOG posts to one member published while the fan-out and the reader
 * are stopped (SIGSTOP); the fan-out then resumes alone and copies until
 * it is FANOUT_MAX_LEAD posts ahead of the stopped reader, where it waits
 * holding no batch. Then its pending gauge is what the broker counts as
 * not yet acked by the fanout durable, num_pending + num_ack_pending (what
 * its open pull request was handed and the worker has not taken is still
 * to come), read before and after the scrape (equal, so the consumer stood
 * still: exact), and its oldest-unacked age 0 (it holds no batch). Once the reader resumes and the member drained every frame,
 * both consumers' gauges are 0, as the broker says.
 */
static void
test_pending_is_what_the_consumer_has_still_to_deliver(void **state)
{
	struct member m, poster;
	char id[32], err[1024];
	uint64_t p1 = 0, p2 = 1;
	int64_t a1 = -1, a2 = -1;
	double g = -1;
	bool hdr = false, same = false;

	(void)state;
	h_member_up(&mesh, &prov, &m, "lagm", "lag", true);
	h_member_up(&mesh, &prov, &poster, "lagp", "lag", false);
	pid_t fanout = h_daemon_worker_pid(&dmn, "fanout"), reader = h_daemon_worker_pid(&dmn,
	    "reader");
	assert_true(fanout > 0 && reader > 0);
	assert_int_equal(kill(reader, SIGSTOP), 0);
	assert_int_equal(kill(fanout, SIGSTOP), 0);
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(id, sizeof(id), "l-%d", i);
		if (h_post(&poster.c, &mesh, &poster.a, "lag", id, "x", NULL) != 0) {
			kill(fanout, SIGCONT);
			kill(reader, SIGCONT);
			fail_msg("post %d failed", i);
		}
	}
	assert_int_equal(kill(fanout, SIGCONT), 0);
	/* The fan-out copies up to its lead and waits: the consumer stands
	 * still, nothing handed over unacked, and the gauge says the same. */
	for (int64_t end = mono_ms() + 30000; !same && mono_ms() < end; h_nap(250)) {
		if (consumer("CHAT", "fanout", &p1, &a1) != 0 || scrape_get(mport, &s1) != 0 ||
		    consumer("CHAT", "fanout", &p2, &a2) != 0)
			continue;
		g = scrape_value(&s1, "cotal_delivery_consumer_pending_messages" S
		    ",consumer=\"fanout\"}");
		same = p1 == p2 && a1 == a2 && p1 + (uint64_t)a1 > 0 &&
		    g == (double)(p1 + (uint64_t)a1);
	}
	double age = scrape_value(&s1, "cotal_delivery_consumer_oldest_unacked_age_seconds" S
	    ",consumer=\"fanout\"}");
	kill(reader, SIGCONT);
	printf("• %d posts waiting, the fan-out at its lead behind a stopped reader: the broker's "
	    "num_pending %llu + num_ack_pending %lld (handed to the fan-out's open pull request, "
	    "not yet taken), the gauge %g (tolerance 0); oldest unacked age %g (0: it holds no "
	    "batch)\n", BACKLOG, (unsigned long long)p1, (long long)a1, g, age);
	assert_true(same);
	assert_true(age == 0);
	json_t *f = h_dlv_drain_n(&m.c, &mesh, &m.a, BACKLOG, 60000, 1000, &hdr, err, sizeof(err));
	if (f == NULL)
		fail_msg("%s", err);
	assert_int_equal(json_array_size(f), BACKLOG);
	json_decref(f);
	static const char *const kinds[][2] = { { "CHAT", "fanout" }, { "INBOX", "reader" } };
	for (int k = 0; k < 2; k++) {
		char series[256];
		snprintf(series, sizeof(series), "cotal_delivery_consumer_pending_messages" S
		    ",consumer=\"%s\"}", kinds[k][1]);
		double v = -1;
		for (int64_t end = mono_ms() + 10000; v != 0 && mono_ms() < end; h_nap(200))
			if (scrape_get(mport, &s1) == 0)
				v = scrape_value(&s1, series);
		assert_int_equal(consumer(kinds[k][0], kinds[k][1], &p1, &a1), 0);
		printf("• drained: %s pending %g, the broker's num_pending %llu, ack pending %lld\n",
		    kinds[k][1], v, (unsigned long long)p1, (long long)a1);
		assert_true(v == 0 && p1 == 0);
	}
	h_close(&m.c);
	h_close(&poster.c);
}

/* ---- the rails ---- */

/* One agent's raw requests on its own ctl.delivery subject, and the
 * answers it got: ok, refused past its share ("already waiting"), other. */
struct caller {
	struct h_peer p;
	char subject[H_SUBJECT_MAX];
	natsSubscription *sub;
	atomic_int ok, share, other;
	int sent;
	char first_other[512];
};

static void
on_answer(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct caller *c = closure;
	const char *d = natsMsg_GetData(msg);

	(void)nc, (void)sub;
	if (d != NULL && strstr(d, "\"ok\":true") != NULL)
		atomic_fetch_add(&c->ok, 1);
	else if (d != NULL && strstr(d, "already waiting") != NULL)
		atomic_fetch_add(&c->share, 1);
	else if (atomic_fetch_add(&c->other, 1) == 0)
		snprintf(c->first_other, sizeof(c->first_other), "%.*s", natsMsg_GetDataLength(msg),
		    d != NULL ? d : "");
	natsMsg_Destroy(msg);
}

static void
caller_up(struct caller *c, const char *name, const char *allow)
{
	char err[1024], replies[H_SUBJECT_MAX + 16];

	memset(c, 0, sizeof(*c));
	if (h_peer_up(&mesh, name, allow, &c->p, err, sizeof(err)) != 0)
		fail_msg("%s: %s", name, err);
	snprintf(c->subject, sizeof(c->subject), "cotal.%s.ctl.delivery.%s.%s", mesh.token,
	    c->p.a.owner, c->p.a.actor);
	snprintf(replies, sizeof(replies), "%s.reply.>", c->subject);
	assert_int_equal(natsConnection_Subscribe(&c->sub, c->p.c.nc, replies, on_answer, c),
	    NATS_OK);
	assert_int_equal(natsConnection_Flush(c->p.c.nc), NATS_OK);
}

static void
caller_send(struct caller *c, const char *op, const char *args, bool reply)
{
	char body[1024], rs[H_SUBJECT_MAX + 32];

	snprintf(body, sizeof(body), "{\"op\":\"%s\",\"from\":{\"id\":\"%s.%s\",\"name\":\"t\"},"
	    "\"args\":%s}", op, c->p.a.owner, c->p.a.actor, args);
	snprintf(rs, sizeof(rs), "%s.reply.%d", c->subject, c->sent++);
	if (reply)
		assert_int_equal(natsConnection_PublishRequest(c->p.c.nc, c->subject, rs, body,
		    (int)strlen(body)), NATS_OK);
	else
		assert_int_equal(natsConnection_Publish(c->p.c.nc, c->subject, body,
		    (int)strlen(body)), NATS_OK);
}

static void
caller_down(struct caller *c)
{
	natsSubscription_Unsubscribe(c->sub);
	natsSubscription_Destroy(c->sub);
	h_peer_down(&c->p);
}

/*
 * HELD agents each ask durableJoin of channel "slow", which the registry's
 * test hook holds JOIN_HOLD_MS in its ctl thread: every ctl thread busy.
 * Another agent then sends CALLER_WAITING + PAST_SHARE listMemberships at
 * once: its share waits, the rest is refused past it. A scrape shows the
 * ctl rail's waiting requests at CALLER_WAITING and the admin and
 * inventory rails at 0, and caller_refusals_total for that principal at
 * PAST_SHARE, which is what the caller was not served: refusals it got
 * plus requests never answered (all exact). Then, every answer in: the
 * registry's requests grew by every request with a reply subject sent,
 * joins by HELD, refused by the refusals answered, shed by the unanswered,
 * member reads by the listMemberships served, and a request sent without
 * a reply subject is the one unanswered (all exact); nothing waits.
 */
static void
test_registry_waiting_refusals_and_counters_are_the_requests_sent(void **state)
{
	struct caller held[HELD], q;
	char name[32], args[256];

	(void)state;
	for (int i = 0; i < HELD; i++) {
		snprintf(name, sizeof(name), "held%d", i);
		caller_up(&held[i], name, "slow");
	}
	caller_up(&q, "queued", "general");
	scrape_now(&s0);
	assert_true(scrape_need(&s0, "cotal_delivery_registry_waiting_requests" S ",rail=\"ctl\"}") == 0);
	double r0 = scrape_need(&s0, "cotal_delivery_registry_requests_total" S "}");
	for (int i = 0; i < HELD; i++) {
		caller_send(&held[i], "durableJoin", "{\"channel\":\"slow\"}", true);
		natsConnection_Flush(held[i].p.c.nc);
	}
	/* All HELD taken by the ctl threads: counted, none waiting. */
	bool taken = false;
	for (int64_t end = mono_ms() + 10000; !taken && mono_ms() < end; h_nap(100))
		taken = scrape_get(mport, &s1) == 0 &&
		    scrape_value(&s1, "cotal_delivery_registry_requests_total" S "}") >= r0 + HELD &&
		    scrape_value(&s1, "cotal_delivery_registry_waiting_requests" S ",rail=\"ctl\"}") == 0;
	assert_true(taken);
	snprintf(args, sizeof(args), "{\"lifecycleUid\":\"%s\"}", q.p.a.uid);
	for (int i = 0; i < CALLER_WAITING + PAST_SHARE; i++)
		caller_send(&q, "listMemberships", args, true);
	natsConnection_Flush(q.p.c.nc);
	caller_send(&q, "listMemberships", args, false); /* no reply subject */
	natsConnection_Flush(q.p.c.nc);

	double w = reaches(&s1, "cotal_delivery_registry_waiting_requests" S ",rail=\"ctl\"}",
	    CALLER_WAITING, 10000);
	char series[256];
	snprintf(series, sizeof(series), "cotal_delivery_registry_caller_refusals_total" S
	    ",principal=\"%s.%s\"}", q.p.a.owner, q.p.a.actor);
	/* The registry reports its most refused callers every 5 s. */
	double refusals = reaches(&s1, series, PAST_SHARE, 15000);
	double wa = scrape_need(&s1, "cotal_delivery_registry_waiting_requests" S ",rail=\"admin\"}");
	double wi = scrape_need(&s1, "cotal_delivery_registry_waiting_requests" S ",rail=\"inventory\"}");
	w = scrape_need(&s1, "cotal_delivery_registry_waiting_requests" S ",rail=\"ctl\"}");
	printf("• %d joins held, %d requests of one caller: waiting ctl %g (expected %d), admin %g, "
	    "inventory %g (0); its refusals %g (expected %d), refusal answers so far %d\n", HELD,
	    CALLER_WAITING + PAST_SHARE, w, CALLER_WAITING, wa, wi, refusals, PAST_SHARE,
	    atomic_load(&q.share));
	assert_true(w == CALLER_WAITING && wa == 0 && wi == 0);
	assert_true(refusals == PAST_SHARE);

	/* Every answer in once the holds end. */
	int served = 0;
	for (int64_t end = mono_ms() + JOIN_HOLD_MS + 30000; mono_ms() < end; h_nap(200)) {
		served = atomic_load(&q.ok);
		int joined = 0;
		for (int i = 0; i < HELD; i++)
			joined += atomic_load(&held[i].ok) + atomic_load(&held[i].other);
		if (served + atomic_load(&q.share) + atomic_load(&q.other) ==
		    CALLER_WAITING + PAST_SHARE && joined == HELD)
			break;
	}
	int unanswered = CALLER_WAITING + PAST_SHARE - served - atomic_load(&q.share) -
	    atomic_load(&q.other);
	printf("• answers: %d served, %d refused past the share, %d other, %d never answered; "
	    "caller_refusals %g = refused + never answered\n", served, atomic_load(&q.share),
	    atomic_load(&q.other), unanswered, refusals);
	if (atomic_load(&q.other) != 0)
		fail_msg("%d other answers, the first: %s", atomic_load(&q.other), q.first_other);
	assert_true(refusals == atomic_load(&q.share) + unanswered);
	for (int i = 0; i < HELD; i++)
		assert_int_equal(atomic_load(&held[i].ok), 1);
	reaches(&s1, "cotal_delivery_registry_member_reads_total" S "}",
	    scrape_need(&s0, "cotal_delivery_registry_member_reads_total" S "}") + served, 10000);
	const struct expect e[] = {
		{ "cotal_delivery_registry_requests_total" S "}", HELD + CALLER_WAITING + PAST_SHARE,
		    HELD + CALLER_WAITING + PAST_SHARE },
		{ "cotal_delivery_registry_joins_total" S "}", HELD, HELD },
		{ "cotal_delivery_registry_leaves_total" S "}", 0, 0 },
		{ "cotal_delivery_registry_refused_total" S "}", atomic_load(&q.share),
		    atomic_load(&q.share) },
		{ "cotal_delivery_registry_shed_total" S "}", unanswered, unanswered },
		{ "cotal_delivery_registry_unanswered_total" S "}", 1, 1 },
		{ "cotal_delivery_registry_member_reads_total" S "}", served, served },
		{ "cotal_delivery_registry_inventories_total" S "}", 0, 0 },
		{ "cotal_delivery_registry_evictions_total" S "}", 0, 0 },
		{ "cotal_delivery_registry_dropped_total" S ",rail=\"ctl\"}", 0, 0 },
		{ "cotal_delivery_registry_dropped_total" S ",rail=\"admin\"}", 0, 0 },
		{ "cotal_delivery_registry_dropped_total" S ",rail=\"live\"}", 0, 0 },
		{ "cotal_delivery_registry_waiting_requests" S ",rail=\"ctl\"}", 0, 0 },
	};
	expect_all(e, sizeof(e) / sizeof(e[0]));
	for (int i = 0; i < HELD; i++)
		caller_down(&held[i]);
	caller_down(&q);
}

/* A call on a rail that must be answered ok: its data (to decref). */
static json_t *
call_ok(struct ctl_client *cl, enum rail rail, const char *op, const char *args)
{
	struct ctl_result r;
	json_t *a = json_loads(args, 0, NULL), *d;

	ctl_call(cl, rail, op, a, 15000, &r);
	json_decref(a);
	if (r.outcome != CTL_REPLIED || !r.ok)
		fail_msg("%s: %s %s", op, ctl_outcome_name(r.outcome), r.error ? r.error : r.why);
	d = json_incref(r.data);
	ctl_result_free(&r);
	return d;
}

/* The timer subject cotal.<s>.ept.wf.inst1.1.<tid>.<kind>. */
static void
ept_subject(const char *tid, const char *kind, char *out, size_t len)
{
	snprintf(out, len, "cotal.%s.ept.wf.inst1.1.%s.%s", mesh.token, tid, kind);
}

/* A checkpoint record cp.wf.<tid> waiting for deadline, then its .schedule
 * request with timerId id, published by host. */
static void
schedule(struct conn *host, const char *tid, const char *id, int64_t deadline)
{
	char key[128], val[256], subj[256], body[256], err[512];
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;

	snprintf(key, sizeof(key), "cp.wf.%s", tid);
	snprintf(val, sizeof(val), "{\"state\":\"waiting\",\"deadlineGeneration\":1,\"deadline\":%lld,"
	    "\"endpoint\":\"wf\"}", (long long)deadline);
	if (h_kv_put(&prov, &mesh, "records", key, val, err, sizeof(err)) != 0)
		fail_msg("checkpoint %s: %s", key, err);
	ept_subject(tid, "schedule", subj, sizeof(subj));
	snprintf(body, sizeof(body), "{\"v\":1,\"timerId\":\"%s\",\"generation\":1,\"deadline\":%lld}",
	    id, (long long)deadline);
	assert_int_equal(js_Publish(&pa, host->js, subj, body, (int)strlen(body), NULL, &jerr),
	    NATS_OK);
	jsPubAck_Destroy(pa);
}

/* Messages EPT_<s> holds on subj. */
static int64_t
ept_count(const char *subj)
{
	char stream[128];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	jsOptions o;
	int64_t n = 0;

	snprintf(stream, sizeof(stream), "EPT_%s", mesh.token);
	jsOptions_Init(&o);
	o.Stream.Info.SubjectsFilter = subj;
	if (js_GetStreamInfo(&si, prov.js, stream, &o, &jerr) != NATS_OK)
		return -1;
	if (si->State.Subjects != NULL && si->State.Subjects->Count == 1)
		n = (int64_t)si->State.Subjects->List[0].Msgs;
	jsStreamInfo_Destroy(si);
	return n;
}

/*
 * A join and its leave, and the manager's inventory of a lifecycle: the
 * registry's joins, leaves and inventories grow by 1 each, its member
 * reads by the inventory's 1 and its requests by the 3 (exact). A
 * workflow host's .schedule of a waiting checkpoint 2 s ahead and one
 * whose timerId is not its subject's: the timer writer read 2, armed 1,
 * refused 1, and fired what this broker leaves it to fire: the .fire
 * messages the stream holds on a broker before 2.12, none on one that
 * fires schedules itself (exact).
 */
static void
test_leaves_inventories_and_timers_are_the_calls_made(void **state)
{
	struct h_peer a, gone;
	struct conn mgr, host;
	struct ctl_client *mgr_cl = NULL;
	char err[1024], args[512], path[H_PATH_MAX * 2], fire[256];
	bool broker_fires = h_broker_version() >= 212;

	(void)state;
	if (h_peer_up(&mesh, "leaver", "general", &a, err, sizeof(err)) != 0 ||
	    h_peer_up(&mesh, "gone", "general", &gone, err, sizeof(err)) != 0 ||
	    h_connect_manager(&mesh, &mgr, &mgr_cl, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	json_t *pub = json_array(), *sub = json_array();
	json_array_append_new(pub, json_sprintf("cotal.%s.ept.*.*.*.*.schedule", mesh.token));
	int minted = h_mint_raw(&mesh, "workflow-host.creds", pub, sub, true, path, sizeof(path));
	json_decref(pub);
	json_decref(sub);
	assert_int_equal(minted, 0);
	if (h_connect(&mesh, path, &host, err, sizeof(err)) != 0)
		fail_msg("workflow host: %s", err);
	scrape_now(&s0);

	json_t *d = call_ok(a.cl, RAIL_CTL, "durableJoin", "{\"channel\":\"general\"}");
	long long gen = (long long)json_integer_value(json_object_get(d, "generation"));
	json_decref(d);
	snprintf(args, sizeof(args), "{\"channel\":\"general\",\"generation\":%lld,"
	    "\"lifecycleUid\":\"%s\"}", gen, a.a.uid);
	json_decref(call_ok(a.cl, RAIL_CTL, "durableLeave", args));
	snprintf(args, sizeof(args), "{\"principal\":\"%s.%s\",\"lifecycleUid\":\"%s\"}",
	    gone.a.owner, gone.a.actor, gone.a.uid);
	json_decref(call_ok(mgr_cl, RAIL_ADMIN, "lifecycleMemberships", args));

	int64_t deadline = (int64_t)(wall_s() * 1000) + 2000;
	schedule(&host, "mv", "mv", deadline);
	schedule(&host, "mvp", "someone_else", deadline);
	ept_subject("mv", "fire", fire, sizeof(fire));
	int64_t fires = 0;
	for (int64_t end = mono_ms() + 30000; fires < 1 && mono_ms() < end; h_nap(100))
		fires = ept_count(fire);
	assert_int_equal(fires, 1);
	double want_fired = broker_fires ? 0 : (double)fires;
	reaches(&s1, "cotal_delivery_timer_refused_total" S "}",
	    scrape_need(&s0, "cotal_delivery_timer_refused_total" S "}") + 1, 10000);
	reaches(&s1, "cotal_delivery_timer_fired_total" S "}",
	    scrape_need(&s0, "cotal_delivery_timer_fired_total" S "}") + want_fired, 10000);
	reaches(&s1, "cotal_delivery_registry_inventories_total" S "}",
	    scrape_need(&s0, "cotal_delivery_registry_inventories_total" S "}") + 1, 10000);
	printf("• a join, its leave, an inventory; two .schedule requests (%s fires):\n",
	    broker_fires ? "the broker" : "the timer writer");
	const struct expect e[] = {
		{ "cotal_delivery_registry_requests_total" S "}", 3, 3 },
		{ "cotal_delivery_registry_joins_total" S "}", 1, 1 },
		{ "cotal_delivery_registry_leaves_total" S "}", 1, 1 },
		{ "cotal_delivery_registry_inventories_total" S "}", 1, 1 },
		{ "cotal_delivery_registry_member_reads_total" S "}", 1, 1 },
		{ "cotal_delivery_registry_refused_total" S "}", 0, 0 },
		{ "cotal_delivery_timer_requests_total" S "}", 2, 2 },
		{ "cotal_delivery_timer_armed_total" S "}", 1, 1 },
		{ "cotal_delivery_timer_refused_total" S "}", 1, 1 },
		{ "cotal_delivery_timer_fired_total" S "}", want_fired, want_fired },
	};
	expect_all(e, sizeof(e) / sizeof(e[0]));
	h_close(&host);
	ctl_client_free(mgr_cl);
	h_close(&mgr);
	h_peer_down(&a);
	h_peer_down(&gone);
}

/* ---- a batch held ---- */

#define HOLD_POSTERS 2
#define HOLD_POSTS 450   /* each: below CHAT's 1000 a subject */
#define HOLD_MEMBERS 4   /* 1024 copies a batch of 256 posts */

/* The stored time (ms) of CHAT's message seq, 0 when unreadable. */
static int64_t
chat_time_ms(uint64_t seq)
{
	char stream[128];
	natsMsg *m = NULL;
	jsErrCode jerr = 0;
	int64_t t = 0;

	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	if (js_GetMsg(&m, prov.js, stream, seq, NULL, &jerr) == NATS_OK)
		t = natsMsg_GetTime(m) / 1000000;
	natsMsg_Destroy(m);
	return t;
}

/*
 * consumer_oldest_unacked_age_seconds while the fan-out holds a batch: a
 * backlog (HOLD_POSTERS × HOLD_POSTS posts to HOLD_MEMBERS members,
 * published while the fan-out is stopped) is copied, and the test stalls
 * the broker (SIGSTOP, 2.5 s) now and then until a scrape shows the
 * fan-out holding a batch it cannot finish (age > 0). The snapshot's time
 * less the age is then when the broker stored the oldest post of that
 * batch: one of the backlog's posts has exactly that stored time, to the
 * millisecond (tolerance 0: both are whole milliseconds). Up to three
 * backlogs are tried (a stall between two batches holds nothing).
 */
static void
test_oldest_unacked_age_is_the_held_posts_age(void **state)
{
	struct member m[HOLD_MEMBERS], p[HOLD_POSTERS];
	char name[32], id[32];
	double age = 0, at = 0;
	uint64_t first = 0, last = 0;
	int stalls = 0;

	(void)state;
	for (int i = 0; i < HOLD_MEMBERS; i++) {
		snprintf(name, sizeof(name), "holdm%d", i);
		h_member_up(&mesh, &prov, &m[i], name, "hold", true);
	}
	for (int i = 0; i < HOLD_POSTERS; i++) {
		snprintf(name, sizeof(name), "holdp%d", i);
		h_member_up(&mesh, &prov, &p[i], name, "hold", false);
	}
	for (int round = 0; round < 3 && age <= 0; round++) {
		pid_t fanout = h_daemon_worker_pid(&dmn, "fanout");
		assert_true(fanout > 0);
		assert_int_equal(kill(fanout, SIGSTOP), 0);
		for (int i = 0; i < HOLD_POSTERS * HOLD_POSTS; i++) {
			uint64_t seq = 0;
			snprintf(id, sizeof(id), "h-%d-%d", round, i);
			if (h_post(&p[i % HOLD_POSTERS].c, &mesh, &p[i % HOLD_POSTERS].a, "hold", id, "x",
			    &seq) != 0) {
				kill(fanout, SIGCONT);
				fail_msg("post %d refused", i);
			}
			if (first == 0 || (round > 0 && i == 0))
				first = seq;
			last = seq;
		}
		assert_int_equal(kill(fanout, SIGCONT), 0);
		for (int64_t end = mono_ms() + 60000; mono_ms() < end; ) {
			h_nap(150);
			assert_int_equal(kill(mesh.broker, SIGSTOP), 0);
			stalls++;
			h_nap(2500);
			int got = scrape_get(mport, &s1);
			assert_int_equal(kill(mesh.broker, SIGCONT), 0);
			if (got != 0)
				continue;
			age = scrape_value(&s1, "cotal_delivery_consumer_oldest_unacked_age_seconds" S
			    ",consumer=\"fanout\"}");
			at = scrape_need(&s1, "cotal_delivery_snapshot_timestamp_seconds" S "}");
			if (age > 0)
				break;
			if (scrape_value(&s1, "cotal_delivery_consumer_pending_messages" S
			    ",consumer=\"fanout\"}") == 0)
				break; /* drained: another backlog */
		}
	}
	assert_true(age > 0);
	int64_t oldest = (int64_t)((at - age) * 1000.0 + 0.5), match = 0;
	for (uint64_t s = first; s <= last && match == 0; s++)
		if (chat_time_ms(s) == oldest)
			match = (int64_t)s;
	printf("• after %d broker stalls the fan-out held a batch: age %.3f s at the snapshot "
	    "%.3f, so its oldest post was stored at %lld ms; CHAT's post %lld was stored then "
	    "(tolerance 0 ms)\n", stalls, age, at, (long long)oldest, (long long)match);
	assert_true(match > 0);
	for (int i = 0; i < HOLD_MEMBERS; i++)
		h_close(&m[i].c);
	for (int i = 0; i < HOLD_POSTERS; i++)
		h_close(&p[i].c);
	/* The daemon goes on serving (the stalls may have cost a renewal). */
	assert_int_equal(h_daemon_wait_connected(&dmn, 30000), 0);
}


int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters_and_histograms_are_the_posts_and_copies),
		cmocka_unit_test(test_pending_is_what_the_consumer_has_still_to_deliver),
		cmocka_unit_test(test_registry_waiting_refusals_and_counters_are_the_requests_sent),
		cmocka_unit_test(test_leaves_inventories_and_timers_are_the_calls_made),
		cmocka_unit_test(test_oldest_unacked_age_is_the_held_posts_age),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
