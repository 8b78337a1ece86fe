/*
 * The durable data path when an entry is not simply copied, against a
 * real broker and the real daemon (the copies themselves: e2e_datapath.c):
 * entries re-authorized against a read ACL narrowed while they wait, an
 * entry addressed to a retired lifecycle removed once, one whose owner has
 * no ACL row given up and kept, and what the fan-out writer and the
 * trusted reader retry while a store does not answer (seed, "Why a trusted
 * reader"); all of it in a space of 20,000 live lifecycles and 60,000
 * tombstones, whose tombstones cost a worker nothing (issue 39).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "tests/harness/harness.h"

#define WAIT_MS 8000   /* for a frame that should come */
#define QUIET_MS 1500  /* after the last one, nothing more */
#define NOANS_MEMBERS 8
#define NOANS_POSTS 6

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov; /* the provisioner: writes rows as the registry would */
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };

/* An agent of channel and its connection; a member of channel from now on
 * (generation 1) when joined. */
static void
agent_of(struct member *mb, const char *name, const char *channel, bool joined)
{
	char err[1024];

	if (h_member_add(&mesh, name, channel, NULL, mb, err, sizeof(err)) != 0 ||
	    (joined && h_member_join(&prov, &mesh, &mb->a, channel, 1, err, sizeof(err)) != 0))
		fail_msg("%s: %s", name, err);
}

/*
 * Issue 39: every decision here is taken in a space at CI's scale, 20,000
 * live lifecycles (a read-ACL row and a membership row each) and 60,000
 * tombstones written before the daemon starts, so that what a worker holds
 * and reads (lib/wire/aclindex.h: nothing loaded, rows read when met) is
 * what decides among them.
 */
#define SCALE_LIVE 20000
#define SCALE_TOMBS 60000
#define BIG_MEMBERS 600   /* local.a0 .. a599 are members of channel "big" too */
#define HELD_MAX "256"    /* rows a worker holds, in this test build */

static int
setup(void **state)
{
	char err[512];

	*state = &fx;
	if (h_mesh_prov_up(&mesh, "dpretry", &prov) != 0)
		return -1;
	if (h_space_rows(&prov, &mesh, SCALE_LIVE, SCALE_TOMBS, 0, BIG_MEMBERS, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "✗ %d live lifecycles and %d tombstones: %s\n", SCALE_LIVE,
		    SCALE_TOMBS, err);
		return -1;
	}
	/* Fewer rows held than a post to "big" needs (the test build's hook):
	 * what a worker holds turns over and over, and decides the same. */
	setenv("COTAL_TEST_HELD_MAX", HELD_MAX, 1);
	if (h_daemon_start(&mesh, &dmn, NULL) != 0) {
		fprintf(stderr, "✗ the daemon did not start\n");
		return -1;
	}
	return h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound", NULL);
}

static void
post(struct member *mb, const char *channel, const char *id, const char *text)
{
	assert_int_equal(h_post(&mb->c, &mesh, &mb->a, channel, id, text, NULL), 0);
}

/* The texts mb surfaces within ms (then quiet for QUIET_MS), as "a,b". */
static void
surfaced(struct member *mb, int ms, char *got, size_t len)
{
	char err[1024];

	if (h_dlv_texts(&mb->c, &mesh, &mb->a, ms, QUIET_MS, got, len, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static void
expect_texts(struct member *mb, int ms, const char *want)
{
	char got[4096], err[1024];

	/* Until the wanted ones came, then QUIET_MS for one too many. */
	if (h_dlv_texts_n(&mb->c, &mesh, &mb->a, h_texts_count(want), ms, QUIET_MS, got,
	    sizeof(got), err, sizeof(err)) != 0)
		fail_msg("%s", err);
	if (strcmp(got, want) != 0)
		fail_msg("%s surfaced \"%s\", want \"%s\"", mb->a.name, got, want);
}

/* A counter of a worker role from the status file. */
static uint64_t
worker_counter(const char *role, const char *name)
{
	return h_daemon_counter(&dmn, role, name);
}

/* Wait up to ms for a counter to reach want (the status file lags); 0
 * while it is absent. */
static uint64_t
counter_reaches(const char *role, const char *name, uint64_t want, int ms)
{
	int64_t v = h_daemon_counter_reaches(&dmn, role, name, (int64_t)want, ms);

	return v > 0 ? (uint64_t)v : 0;
}

static uint64_t
inbox_last(void)
{
	uint64_t last = 0;

	assert_int_equal(h_stream_last_seq(&prov, &mesh, "INBOX", &last), 0);
	return last;
}

static bool
inbox_holds(uint64_t seq)
{
	char stream[256];
	natsMsg *m = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(stream, sizeof(stream), "INBOX_%s", mesh.token);
	s = js_GetMsg(&m, prov.js, stream, seq, NULL, &jerr);
	natsMsg_Destroy(m);
	return s == NATS_OK;
}

static jsConsumerInfo *
reader_info(void)
{
	jsConsumerInfo *ci = h_reader_info(&prov, &mesh);

	assert_non_null(ci);
	return ci;
}

/* Wait until the reader has nothing pending nor unacked (or, all_fetched,
 * only nothing left to fetch: entries being retried stay unacked). */
static void
reader_waits(int ms, bool all_fetched)
{
	for (int waited = 0;; waited += 100) {
		jsConsumerInfo *ci = reader_info();
		bool idle = ci->NumPending == 0 && (all_fetched || ci->NumAckPending == 0);
		jsConsumerInfo_Destroy(ci);
		if (idle)
			return;
		if (waited > ms)
			fail_msg("the reader still has entries pending or unacked after %d ms", ms);
		usleep(100 * 1000);
	}
}

static void
reader_settles(int ms)
{
	reader_waits(ms, false);
}

/* Wait until the reader acked (or terminated) every entry up to seq: its
 * ack floor is there and nothing is unacked. A nak'd entry waiting for its
 * redelivery counts in neither NumPending nor NumAckPending, so the floor
 * is what proves the acks. */
static void
reader_acked_through(uint64_t seq, int ms)
{
	for (int waited = 0;; waited += 100) {
		jsConsumerInfo *ci = reader_info();
		bool done = ci->AckFloor.Stream >= seq && ci->NumAckPending == 0 &&
		    ci->NumPending == 0;
		uint64_t floor = ci->AckFloor.Stream;
		jsConsumerInfo_Destroy(ci);
		if (done)
			return;
		if (waited > ms)
			fail_msg("the reader's ack floor is %llu after %d ms, want %llu",
			    (unsigned long long)floor, ms, (unsigned long long)seq);
		usleep(100 * 1000);
	}
}

static void
lifecycle_of(const struct member *mb, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s.%s", mb->a.owner, mb->a.actor, mb->a.uid);
}

/* ---- re-authorized, removed, given up ---- */

/*
 * "An agent can leave a channel or lose a grant afterward, so 'this inbox
 * belongs to agent A' is not authorization to hand A everything in it":
 * entries waiting in INBOX while the ACL is narrowed to [] surface nothing
 * and are acked.
 */
static void
test_acl_narrowed_while_entries_wait_surfaces_nothing(void **state)
{
	struct member a, b;
	char err[1024];
	pid_t reader = h_daemon_worker_pid(&dmn, "reader");

	(void)state;
	agent_of(&a, "nar-a", "narrow", false);
	agent_of(&b, "nar-b", "narrow", true);
	reader_settles(WAIT_MS);
	assert_true(reader > 0);
	uint64_t before = inbox_last();
	assert_int_equal(kill(reader, SIGSTOP), 0);
	post(&a, "narrow", "n-1", "one");
	post(&a, "narrow", "n-2", "two");
	post(&a, "narrow", "n-3", "three");
	for (int i = 0; inbox_last() < before + 3; i++) {
		if (i > 80) {
			kill(reader, SIGCONT);
			fail_msg("the fan-out did not write the entries");
		}
		usleep(100 * 1000);
	}
	/* They wait: the stopped reader has acked none of them. */
	jsConsumerInfo *ci = reader_info();
	uint64_t floor = ci->AckFloor.Stream;
	jsConsumerInfo_Destroy(ci);
	uint64_t denied = worker_counter("reader", "denied");
	int rc = h_acl_put(&prov, &mesh, &b.a, "[]", false, err, sizeof(err));
	assert_int_equal(kill(reader, SIGCONT), 0);
	if (rc != 0)
		fail_msg("%s", err);
	assert_true(floor <= before);
	reader_acked_through(before + 3, WAIT_MS);
	expect_texts(&b, QUIET_MS, "");
	if (h_daemon_worker_pid(&dmn, "reader") == reader) /* same process: same counters */
		assert_true(counter_reaches("reader", "denied", denied + 3, 3000) >= denied + 3);
	h_close(&a.c);
	h_close(&b.c);
}

/* Provision a dlv_ durable for another lifecycle of an agent's alias. */
static void
successor_durable(const struct member *mb, const char *uid)
{
	char stream[256], durable[256], filter[512];
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", mb->a.owner, mb->a.actor, uid);
	snprintf(filter, sizeof(filter), "cotal.%s.dlv.%s.%s.%s", mesh.token, mb->a.owner,
	    mb->a.actor, uid);
	jsConsumerConfig_Init(&cc);
	cc.Durable = durable;
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	cc.DeliverPolicy = js_DeliverAll;
	assert_int_equal(js_AddConsumer(&ci, prov.js, stream, &cc, NULL, &jerr), NATS_OK);
	jsConsumerInfo_Destroy(ci);
}

static uint64_t
durable_pending(const struct member *mb, const char *uid)
{
	char stream[256], durable[256];
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	uint64_t n;

	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", mb->a.owner, mb->a.actor, uid);
	assert_int_equal(js_GetConsumerInfo(&ci, prov.js, stream, durable, NULL, &jerr), NATS_OK);
	n = ci->NumPending + ci->NumAckPending;
	jsConsumerInfo_Destroy(ci);
	return n;
}

/* Lines of the daemon log holding both needles. */
static int
log_count2(const char *n1, const char *n2)
{
	char line[8192];
	int n = 0;
	FILE *f = fopen(dmn.log, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, n1) != NULL && strstr(line, n2) != NULL;
	fclose(f);
	return n;
}

/* The frames waiting on another lifecycle's dlv_ durable, read (and acked)
 * by the provisioner, texts as "a,b". */
static void
successor_texts(const struct agent *succ, int ms, char *out, size_t len)
{
	char err[1024];

	if (h_dlv_texts(&prov, &mesh, succ, ms, QUIET_MS, out, len, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

/*
 * "An entry addressed to a retired lifecycle is dropped and removed from
 * the store the first time the reader meets it. Retirement leaves a
 * tombstone on that lifecycle's read-ACL row, and a retired lifecycle never
 * comes back, so a later reader with a fresh cursor does not pay for it
 * again. [...] When the entry came from a durable channel, the reader also
 * removes the retired lifecycle's member row for that channel, when one
 * exists". Nothing reaches a successor lifecycle of the same alias.
 */
static void
test_retired_lifecycle_entries_are_removed_once(void **state)
{
	static const char succ_uid[] = "succ0000000000000000000000";
	struct member a, b;
	char err[1024], lc[256], key[512], needle[512], got[4096];

	(void)state;
	agent_of(&a, "ret-a", "retire", false);
	agent_of(&b, "ret-b", "retire", true);
	assert_int_equal(h_acl_put(&prov, &mesh, &b.a, NULL, true, err, sizeof(err)), 0);
	/* The successor: same owner and actor, another lifecycle uid, a live
	 * ACL row and a durable of its own; it joins after the retired post. */
	struct agent succ = b.a;
	snprintf(succ.uid, sizeof(succ.uid), "%s", succ_uid);
	assert_int_equal(h_acl_put(&prov, &mesh, &succ, "[\"retire\"]", false, err, sizeof(err)), 0);
	successor_durable(&b, succ_uid);
	uint64_t removed = worker_counter("reader", "removed");

	uint64_t before = inbox_last();
	post(&a, "retire", "r-1", "to a retired lifecycle");
	lifecycle_of(&b, lc, sizeof(lc));
	snprintf(needle, sizeof(needle), "removed entry %llu of retired lifecycle %s",
	    (unsigned long long)(before + 1), lc);
	assert_true(h_log_has(dmn.log, needle, WAIT_MS));
	assert_int_equal(inbox_last(), before + 1); /* one entry, the retired member's */
	assert_false(inbox_holds(before + 1));
	reader_acked_through(before + 1, WAIT_MS);  /* acked once deleted */
	assert_true(counter_reaches("reader", "removed", removed + 1, 3000) >= removed + 1);
	snprintf(key, sizeof(key), "retire/%s", lc);
	for (int i = 0;; i++) {
		char *v = h_kv_get(&prov, &mesh, "members", key, err, sizeof(err));
		free(v);
		if (v == NULL && strcmp(err, "not found") == 0)
			break;
		if (i > 50)
			fail_msg("member row %s is still there (%s)", key, v ? "present" : err);
		usleep(100 * 1000);
	}

	/* The successor joins now; a later post reaches it, and only that
	 * one, and no longer the retired lifecycle (its row is gone). */
	char ferr[1024];
	if (h_member_join(&prov, &mesh, &succ, "retire", 1, ferr, sizeof(ferr)) != 0)
		fail_msg("%s", ferr);
	post(&a, "retire", "r-2", "to the successor");
	successor_texts(&succ, WAIT_MS, got, sizeof(got));
	if (strcmp(got, "to the successor") != 0)
		fail_msg("the successor surfaced \"%s\", want \"to the successor\"", got);
	assert_int_equal(inbox_last(), before + 2); /* one entry, the successor's */
	assert_int_equal(log_count2("removed entry ", lc), 1);

	/* A fresh cursor: delete `reader`; the restarted reader makes it again
	 * with deliver-all and meets every entry the store still holds. */
	char stream[256];
	jsErrCode jerr = 0;
	snprintf(stream, sizeof(stream), "INBOX_%s", mesh.token);
	pid_t reader = h_daemon_worker_pid(&dmn, "reader");
	assert_int_equal(kill(reader, SIGSTOP), 0);
	assert_int_equal(js_DeleteConsumer(prov.js, stream, "reader", NULL, &jerr), NATS_OK);
	kill(reader, SIGKILL);
	kill(reader, SIGCONT);
	for (int i = 0; h_daemon_worker_pid(&dmn, "reader") == reader ||
	    h_daemon_worker_pid(&dmn, "reader") == 0; i++) {
		if (i > 100)
			fail_msg("the reader was not restarted");
		usleep(100 * 1000);
	}
	for (int i = 0;; i++) {
		jsConsumerInfo *ci = NULL;
		jerr = 0;
		natsStatus s = js_GetConsumerInfo(&ci, prov.js, stream, "reader", NULL, &jerr);
		bool fresh = s == NATS_OK && ci->Config != NULL &&
		    ci->Config->DeliverPolicy == js_DeliverAll;
		jsConsumerInfo_Destroy(ci);
		if (fresh)
			break;
		if (i > 100)
			fail_msg("the restarted reader did not make its consumer again (deliver all)");
		usleep(100 * 1000);
	}
	/* Everything fetched (an unknown owner's entry of another test may be
	 * in its retries), and a moment to handle the last batch. */
	reader_waits(WAIT_MS * 2, true);
	jsConsumerInfo *ci = reader_info();
	uint64_t delivered = ci->Delivered.Stream;
	jsConsumerInfo_Destroy(ci);
	assert_true(delivered >= before + 2); /* it went past where the entry was */
	sleep(2);
	assert_int_equal(h_log_count(dmn.log, needle), 1);
	assert_int_equal(log_count2("removed entry ", lc), 1);
	assert_int_equal(worker_counter("reader", "removed"), 0); /* the new reader's */
	assert_true(counter_reaches("reader", "entries", 1, 3000) >= 1); /* and it did read */
	/* The successor got nothing more (a re-read entry's frame keeps its
	 * dedup key), and nothing meant for the retired lifecycle. */
	successor_texts(&succ, QUIET_MS, got, sizeof(got));
	assert_string_equal(got, "");
	assert_int_equal(durable_pending(&b, succ_uid), 0);
	h_close(&a.c);
	h_close(&b.c);
}

/*
 * "An entry whose owner has no ACL row at all is retried, then given up
 * after ten redeliveries, and kept, because a missing row does not prove
 * the owner is gone."
 */
static void
test_missing_acl_row_is_given_up_after_ten_and_kept(void **state)
{
	struct member a, b;
	char bucket[256], key[256], lc[256], needle[512];
	kvStore *kv = NULL;

	(void)state;
	agent_of(&a, "miss-a", "missing", false);
	agent_of(&b, "miss-b", "missing", true);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", mesh.token);
	lifecycle_of(&b, lc, sizeof(lc));
	snprintf(key, sizeof(key), "%s", lc);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	assert_int_equal(kvStore_Delete(kv, key), NATS_OK);
	kvStore_Destroy(kv);
	uint64_t before = inbox_last();
	post(&a, "missing", "m-1", "to nobody known");
	snprintf(needle, sizeof(needle), "gave up on entry %llu for unknown owner %s after 10 "
	    "deliveries (kept)", (unsigned long long)(before + 1), lc);
	/* Nine retries two seconds apart. */
	assert_true(h_log_has(dmn.log, needle, 60000));
	assert_true(inbox_holds(before + 1));
	expect_texts(&b, QUIET_MS, "");
	h_close(&a.c);
	h_close(&b.c);
}

/* ---- a store that does not answer ---- */

/*
 * "The entry stays pending until the member confirms it was surfaced":
 * a frame DLV_<s> does not answer for (no stream takes its subject, as
 * while a leader is elected) is retried for as long as that lasts, past
 * the ten deliveries after which an unknown owner's entry is given up,
 * and surfaces once the stream answers again.
 */
/* Point stream <name>_<s> at other subjects (elsewhere), so that nobody
 * takes what is published to it (the broker answers 503, as while its
 * leader is elected), or back (elsewhere NULL). */
static void
stream_subjects_moved(const char *name, const char *elsewhere)
{
	static jsStreamInfo *saved;
	char stream[256], other[256];
	jsStreamInfo *up = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "%s_%s", name, mesh.token);
	if (elsewhere != NULL) {
		assert_int_equal(js_GetStreamInfo(&saved, prov.js, stream, NULL, &jerr), NATS_OK);
		jsStreamConfig cfg = *saved->Config;
		snprintf(other, sizeof(other), "cotal.%s.%s.>", mesh.token, elsewhere);
		const char *moved[] = { other };
		cfg.Subjects = moved;
		cfg.SubjectsLen = 1;
		assert_int_equal(js_UpdateStream(&up, prov.js, &cfg, NULL, &jerr), NATS_OK);
	} else {
		assert_int_equal(js_UpdateStream(&up, prov.js, saved->Config, NULL, &jerr), NATS_OK);
		jsStreamInfo_Destroy(saved);
		saved = NULL;
	}
	jsStreamInfo_Destroy(up);
}

static void
test_an_unanswered_frame_is_retried_past_ten_deliveries(void **state)
{
	struct member a, b;

	(void)state;
	agent_of(&a, "noans-a", "noans", false);
	agent_of(&b, "noans-b", "noans", true);
	stream_subjects_moved("DLV", "dlv-elsewhere");
	uint64_t retried = worker_counter("reader", "retried"), seq = inbox_last() + 1;
	char gaveup[128];
	snprintf(gaveup, sizeof(gaveup), "gave up on entry %llu ", (unsigned long long)seq);
	post(&a, "noans", "na-1", "held back, not lost");
	/* Eleven deliveries of the entry, two seconds apart, none taken. */
	uint64_t now = counter_reaches("reader", "retried", retried + 11, 60000);
	stream_subjects_moved("DLV", NULL);
	assert_true(now >= retried + 11);
	assert_false(h_log_has(dmn.log, gaveup, 0));
	assert_true(h_log_has(dmn.log, "frames not stored yet, their entries retried", 0));
	expect_texts(&b, WAIT_MS, "held back, not lost");
	h_close(&a.c);
	h_close(&b.c);
}

static int
cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* As expect_texts, in any order (a retried batch may come back in
 * another): want sorted. */
static void
expect_texts_sorted(struct member *mb, int ms, const char *want)
{
	char got[4096], *v[64], *save = NULL;
	size_t n = 0, w = 0;

	surfaced(mb, ms, got, sizeof(got));
	for (char *t = strtok_r(got, ",", &save); t != NULL && n < 64; t = strtok_r(NULL, ",", &save))
		v[n++] = t;
	qsort(v, n, sizeof(*v), cmp_str);
	char sorted[4096] = "";
	for (size_t i = 0; i < n; i++)
		w += (size_t)snprintf(sorted + w, w < sizeof(sorted) ? sizeof(sorted) - w : 0, "%s%s",
		    i ? "," : "", v[i]);
	if (strcmp(sorted, want) != 0)
		fail_msg("%s surfaced \"%s\", want \"%s\"", mb->a.name, sorted, want);
}

/*
 * Many publishes nobody took (a store whose leader is being elected: the
 * broker answers each with a 503, which libnats keeps to itself) hold
 * copying up only while they last: once the store answers again every
 * post is copied at once, not one batch per stale answer (the cluster
 * suite lost 81-90 posts of 216 to that, issue 18).
 */
static void
test_publishes_nobody_took_hold_copying_only_while_they_last(void **state)
{
	struct member a, m[NOANS_MEMBERS];
	char want[512] = "", text[32], id[32];

	(void)state;
	agent_of(&a, "held-a", "held", false);
	for (int i = 0; i < NOANS_MEMBERS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "held-%d", i);
		agent_of(&m[i], name, "held", true);
	}
	stream_subjects_moved("INBOX", "dinbox-elsewhere");
	uint64_t retried = worker_counter("fanout", "retried");
	for (int k = 0; k < NOANS_POSTS; k++) {
		snprintf(id, sizeof(id), "held-%d", k);
		snprintf(text, sizeof(text), "held %d", k);
		post(&a, "held", id, text);
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", k ? "," : "",
		    text);
	}
	/* Every post tried and refused by nobody at least twice: 96 and more
	 * answers nobody attributes. */
	uint64_t now = counter_reaches("fanout", "retried", retried + 2 * NOANS_POSTS, 30000);
	stream_subjects_moved("INBOX", NULL);
	assert_true(now >= retried + 2 * NOANS_POSTS);
	assert_true(h_log_has(dmn.log, "no stream took it", 0));
	for (int i = 0; i < NOANS_MEMBERS; i++)
		expect_texts_sorted(&m[i], WAIT_MS, want);
	for (int i = 0; i < NOANS_MEMBERS; i++)
		h_close(&m[i].c);
	h_close(&a.c);
}

/* The daemon stopped and started again on the same space, serving, and
 * given a moment to settle. */
static void
restart_daemon(void)
{
	h_daemon_stop(&dmn, 10000);
	if (h_daemon_start(&mesh, &dmn, NULL) != 0 ||
	    h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound", NULL) != 0)
		fail_msg("the daemon did not serve again");
	h_sleep_ms(2000);
}

/*
 * Issue 39: a space's tombstones cost a worker nothing because no worker
 * loads the read-ACL bucket. After a start on this space (20,000 live
 * lifecycles, 60,000 tombstones) the bucket's consumers are the three
 * deciding workers' tails (the writes from their start on: by start
 * sequence, past the bucket's last) and nothing else, and they have been
 * given nothing (no row was written since); a row a worker needs is read
 * when met. (What a tombstone costs in memory is measured by make
 * bench-scale, docs/BENCHMARKS.md: a worker's resident set moves by more
 * between two starts on the same rows than 60,000 tombstones could add.)
 */
static void
test_no_worker_loads_the_read_acl_bucket(void **state)
{
	char stream[256], filter[256];
	jsConsumerInfoList *list = NULL;
	jsErrCode jerr = 0;
	uint64_t last;
	int tails = 0;

	(void)state;
	int64_t started_ns = wall_ms() * 1000000;
	restart_daemon();
	snprintf(stream, sizeof(stream), "KV_cotal_acl_%s", mesh.token);
	snprintf(filter, sizeof(filter), "$KV.cotal_acl_%s.>", mesh.token);
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "KV_cotal_acl", &last), 0);
	assert_true(last >= SCALE_LIVE + SCALE_TOMBS);
	assert_int_equal(js_Consumers(&list, prov.js, stream, NULL, &jerr), NATS_OK);
	for (int i = 0; i < list->Count; i++) {
		jsConsumerInfo *ci = list->List[i];
		const jsConsumerConfig *cc = ci->Config;
		const char *f = cc->FilterSubject != NULL ? cc->FilterSubject : "";
		/* An alias's rows, read by a watch of them alone; a worker's of
		 * before the restart (a killed one's goes after 30 s unused). */
		if (strcmp(f, filter) != 0 || ci->Created < started_ns)
			continue;
		if (cc->DeliverPolicy != js_DeliverByStartSequence || cc->OptStartSeq <= last)
			fail_msg("consumer %s of %s reads the bucket from %llu (deliver policy %d): "
			    "a load of every row, tombstones included", ci->Name, stream,
			    (unsigned long long)cc->OptStartSeq, (int)cc->DeliverPolicy);
		if (ci->Delivered.Consumer != 0)
			fail_msg("the tail %s was given %llu rows with none written", ci->Name,
			    (unsigned long long)ci->Delivered.Consumer);
		tails++;
	}
	jsConsumerInfoList_Destroy(list);
	printf("• %d tails of %s after a start on %d live lifecycles and %d tombstones, none "
	    "given a row\n", tails, stream, SCALE_LIVE, SCALE_TOMBS);
	assert_int_equal(tails, 3); /* the fan-out's, the reader's, the registry's */
}

/*
 * Issue 39: "a space whose buckets are larger than any memory bound the
 * workers keep still serves and decides exactly". A post to "big", whose 600
 * members' rows are more than the 256 a worker holds here: each member gets
 * exactly one frame, within the time a frame is due.
 */
static void
test_a_channel_larger_than_what_is_held_is_copied_exactly(void **state)
{
	struct member a;
	char stream[256];
	uint64_t before, last = 0;

	(void)state;
	agent_of(&a, "big-poster", "big", false);
	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "DLV", &before), 0);
	post(&a, "big", "b-1", "to more members than a worker holds");
	for (int i = 0; last < before + BIG_MEMBERS; i++) {
		if (i > 300)
			fail_msg("%s holds %llu of the %d frames after 30 s", stream,
			    (unsigned long long)(last - before), BIG_MEMBERS);
		usleep(100 * 1000);
		assert_int_equal(h_stream_last_seq(&prov, &mesh, "DLV", &last), 0);
	}
	h_sleep_ms(QUIET_MS);
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "DLV", &last), 0);
	assert_int_equal(last, before + BIG_MEMBERS); /* one each, none twice */
	/* One frame for each member, by subject. */
	for (int i = 0; i < BIG_MEMBERS; i += 97) {
		char subj[256];
		snprintf(subj, sizeof(subj), "cotal.%s.dlv.local.a%d.%026d", mesh.token, i, i);
		assert_int_equal(h_stream_subject_msgs(&prov, stream, subj), 1);
	}
	h_close(&a.c);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_acl_narrowed_while_entries_wait_surfaces_nothing),
		cmocka_unit_test(test_missing_acl_row_is_given_up_after_ten_and_kept),
		cmocka_unit_test(test_an_unanswered_frame_is_retried_past_ten_deliveries),
		cmocka_unit_test(test_publishes_nobody_took_hold_copying_only_while_they_last),
		cmocka_unit_test(test_retired_lifecycle_entries_are_removed_once),
		cmocka_unit_test(test_a_channel_larger_than_what_is_held_is_copied_exactly),
		cmocka_unit_test(test_no_worker_loads_the_read_acl_bucket),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
