/*
 * At least once, under fire (issue 4, "At least once"): a stream of 5,000
 * posts, each with its own id, to a durable channel of 20 members while
 *   1. the fan-out and the reader workers are killed with SIGKILL, again
 *      and again, and the supervisor restarts them;
 *   2. the broker is killed and restarted on its store, twice, the posts
 *      slowed to PACE_PER_S for the minute a crash's redeliveries take
 *      (below: what DLV's 1000 per member promises across it).
 * Every member must surface every post of the other senders (the sender's
 * own principal gets no copy), and since every post has an id, every frame
 * is unique: the dedup key (WIRE.md §2) on INBOX and DLV, 2 h windows,
 * absorbs every redelivery (seed, "The three pieces": duplicates are
 * allowed only for id-less posts), and a post the broker hands the fan-out
 * again after it lost the acks is acked without a copy (worker/acked.h: a
 * 2.10 broker killed while it wrote `fanout`'s state came back at CHAT's
 * first post here once, and 16,265 frames surfaced twice).
 *
 * Real broker, real daemon. Members are agents with their own connections
 * draining their own dlv_ durables all along, as a live agent does (DLV
 * keeps at most 1000 frames per member). A consumer redelivery of a frame
 * already stored (same DLV sequence, its ack lost with the broker) is the
 * member's own at-least-once and is reported; a second frame of one post
 * (another DLV sequence) is a duplicate and fails the test.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/creds/creds.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/tokens.h"
#include "lib/creds/perms.h"
#include "lib/nats/pull.h"
#include "tests/harness/harness.h"

#define MEMBERS 20
#define POSTS 5000
#define CHUNK 500            /* posts in flight before the poster waits */
/* After the disruptions stop. A killed worker's batch waits out the 60 s
 * ack wait, and a broker that syncs every write (sync_interval: always)
 * copies about 1,000-2,000 a second, fewer under ASan: 95,000 copies need
 * up to 3 minutes after that. */
#define DEADLINE_MS 300000
#define KILLS_PER_ROLE 5     /* the supervisor calls >10 restarts in 5 min a crash loop */
#define KILL_EVERY_MS 1200
#define BROKER_DOWN_MS 1000
/*
 * Around a broker crash the posts slow to PACE_PER_S for the 60 s ack wait
 * and a margin. A frame the broker had handed to a member's pull when it
 * died, and a fan-out ack it had not yet written (nats-server writes a
 * consumer's state at most ten times a second, sync_interval or not), come
 * back only when that ack wait runs out. By then the frame (or the copy the
 * redelivery repeats) must still be in DLV/INBOX: 1000 per member, discard
 * old (WIRE.md §3), and after a restart the broker's dedup knows only the
 * messages it still stores. 1000 newer frames for one member within that
 * minute is a member 1000 behind, which WIRE.md lets go.
 */
#define PACE_PER_S 10
#define PACE_AFTER_MS 65000
#define CAUGHT_UP_SLACK 50   /* posts the pipeline may lag when the broker dies */
#define CATCH_UP_MS 180000

static struct mesh mesh;
static struct daemon dmn;

/* A connection that reconnects forever (the harness's does not). */
struct link {
	struct creds creds;
	natsConnection *nc;
	jsCtx *js;     /* requests, pulls */
	jsCtx *pjs;    /* asynchronous publishes, PubAcks to on_post_ack */
	bool published;
};

struct peer {
	int idx;
	struct agent a;
	char from[192];      /* <o>.<a> */
	struct link l;
	struct puller pl;    /* its dlv_ durable, through lib/nats/pull.c (not libnats's fetch) */
	pthread_t th;
	/* The drain's record, written by its thread only. */
	uint16_t *seen;      /* per post: frames surfaced */
	uint64_t *dseq;      /* per post: the DLV sequence of its first frame */
	atomic_int distinct, dups, redelivered, own, foreign, bad_header, bad_channel,
	    fetch_errors;
	/* Its duplicates, for the report: the posts' range, and the first few
	 * with both DLV sequences and when the second frame was stored. */
	int dup_lo, dup_hi;
	struct { int n; uint64_t seq1, seq2; int64_t ts2_ms; } dup_ex[4];
};

/* One run. */
static struct {
	const char *tag;            /* post ids are <tag>-<n> */
	char channel[64];
	struct link prov;
	struct conn provc;          /* prov as the harness's struct conn */
	struct peer peers[MEMBERS];
	atomic_bool stop_drain;
	atomic_uchar acked[POSTS];  /* a PubAck arrived */
	atomic_int nacked, republished, pub_errors, pub_timeouts;
	atomic_bool posting_done;
	_Atomic int64_t pace_until;  /* epoch ms: post at PACE_PER_S until then */
	int64_t t_post0, t_post1;
	pthread_t poster;
} R;

static int64_t
now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ms since the epoch as the daemon's log writes time (UTC, to the ms). */
static void
utc_ms(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
	    (int)(ms % 1000));
}

static void
nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool
verbose(void)
{
	return getenv("COTAL_TEST_VERBOSE") != NULL;
}

/* ---- connections ---- */

static int
post_index(const char *id)
{
	size_t tl = strlen(R.tag);
	char *end;
	long n;

	if (id == NULL || strncmp(id, R.tag, tl) != 0 || id[tl] != '-')
		return -1;
	n = strtol(id + tl + 1, &end, 10);
	return *end == '\0' && n >= 0 && n < POSTS ? (int)n : -1;
}

static void
on_post_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *arg)
{
	const char *id = NULL;

	(void)js, (void)arg;
	if (pa != NULL && natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK) {
		int n = post_index(id);
		if (n >= 0 && atomic_exchange(&R.acked[n], 1) == 0)
			atomic_fetch_add(&R.nacked, 1);
	} else if (pae != NULL)
		atomic_fetch_add(&R.pub_errors, 1);
	natsMsg_Destroy(msg);
}

static int
link_open(struct link *l, const char *creds_path, char *err, size_t errlen)
{
	struct conn_opts o = { .url = mesh.url, .name = "cotal-e2e-alo", .timeout_ms = 5000,
		.max_reconnect = -1 };
	jsOptions jo;

	memset(l, 0, sizeof(*l));
	if (creds_load(creds_path, &l->creds, err, errlen) != 0)
		return -1;
	if (conn_open(&o, &l->creds, &l->nc, err, errlen) != 0)
		return -1;
	jsOptions_Init(&jo);
	jo.Wait = 5000;
	if (natsConnection_JetStream(&l->js, l->nc, &jo) != NATS_OK) {
		snprintf(err, errlen, "jetstream context");
		return -1;
	}
	jsOptions_Init(&jo);
	jo.PublishAsync.MaxPending = 4096;
	jo.PublishAsync.StallWait = 2000;
	jo.PublishAsync.AckHandler = on_post_ack;
	if (natsConnection_JetStream(&l->pjs, l->nc, &jo) != NATS_OK) {
		snprintf(err, errlen, "jetstream context");
		return -1;
	}
	return 0;
}

static void
link_close(struct link *l)
{
	if (l->pjs != NULL && l->published) {
		natsMsgList pending = { 0 };
		/* libnats 3.4.1: ask only once an async publish was made. */
		if (js_PublishAsyncGetPendingList(&pending, l->pjs) == NATS_OK)
			natsMsgList_Destroy(&pending);
	}
	jsCtx_Destroy(l->pjs);
	jsCtx_Destroy(l->js);
	natsConnection_Destroy(l->nc);
	if (l->creds.jwt != NULL)
		creds_free(&l->creds);
	memset(l, 0, sizeof(*l));
}

/* ---- the daemon ---- */

static int
run_setup(const char *space, const char *tag)
{
	char err[1024], key[512], path[H_PATH_MAX * 2];

	memset(&R, 0, sizeof(R));
	R.tag = tag;
	snprintf(R.channel, sizeof(R.channel), "alo%s", tag);
	if (h_mesh_up(&mesh, space, true) != 0)
		return -1;
	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/provisioner.creds", mesh.dir, key);
	if (link_open(&R.prov, path, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	R.provc.nc = R.prov.nc;
	R.provc.js = R.prov.js;
	if (h_daemon_start(&mesh, &dmn, NULL) != 0)
		return -1;
	return h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound", NULL);
}

static int
setup_kills(void **state)
{
	(void)state;
	return run_setup("alokill", "k");
}

static int
setup_broker(void **state)
{
	(void)state;
	return run_setup("alobroker", "b");
}

static int
run_teardown(void **state)
{
	(void)state;
	atomic_store(&R.stop_drain, true);
	for (int i = 0; i < MEMBERS; i++) {
		struct peer *p = &R.peers[i];
		if (p->th != 0)
			pthread_join(p->th, NULL);
		pull_close(&p->pl);
		link_close(&p->l);
		free(p->seen);
		free(p->dseq);
	}
	h_daemon_kill(&dmn);
	link_close(&R.prov);
	h_mesh_down(&mesh);
	return 0;
}

/* ---- members and their drains ---- */

/* A frame surfaced by member arg. */
static void
record(void *arg, natsMsg *m)
{
	struct peer *p = arg;
	const char *h = NULL;
	jsMsgMetaData *md = NULL;
	uint64_t seq = 0;
	int64_t ts_ms = 0;
	json_t *v, *msg;

	if (natsMsgHeader_Get(m, "Cotal-Delivery-Frame", &h) != NATS_OK || strcmp(h, "1") != 0)
		atomic_fetch_add(&p->bad_header, 1);
	if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
		seq = md->Sequence.Stream;
		ts_ms = md->Timestamp / 1000000;
		jsMsgMetaData_Destroy(md);
	}
	v = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	msg = json_object_get(v, "msg");
	const char *ch = json_string_value(json_object_get(v, "channel"));
	const char *mch = json_string_value(json_object_get(msg, "channel"));
	if (ch == NULL || strcmp(ch, R.channel) != 0 || mch == NULL || strcmp(mch, R.channel) != 0)
		atomic_fetch_add(&p->bad_channel, 1);
	int n = post_index(json_string_value(json_object_get(msg, "id")));
	const char *from = json_string_value(json_object_get(json_object_get(msg, "from"), "id"));
	if (n < 0 || from == NULL || strcmp(from, R.peers[n % MEMBERS].from) != 0)
		atomic_fetch_add(&p->foreign, 1);
	else if (n % MEMBERS == p->idx)
		atomic_fetch_add(&p->own, 1);
	else if (p->seen[n]++ == 0) {
		p->dseq[n] = seq;
		atomic_fetch_add(&p->distinct, 1);
	} else if (p->dseq[n] == seq)
		atomic_fetch_add(&p->redelivered, 1);
	else {
		int k = atomic_fetch_add(&p->dups, 1);
		if (k == 0 || n < p->dup_lo)
			p->dup_lo = n;
		if (k == 0 || n > p->dup_hi)
			p->dup_hi = n;
		if (k < (int)(sizeof(p->dup_ex) / sizeof(p->dup_ex[0]))) {
			p->dup_ex[k].n = n;
			p->dup_ex[k].seq1 = p->dseq[n];
			p->dup_ex[k].seq2 = seq;
			p->dup_ex[k].ts2_ms = ts_ms;
		}
	}
	json_decref(v);
}

static void *
drain_main(void *arg)
{
	struct peer *p = arg;

	h_dlv_surface(&p->pl, &R.stop_drain, record, p, &p->fetch_errors);
	return NULL;
}

/* 20 agents, each on its own connection, bound to its dlv_ durable; their
 * rows at CHAT's last sequence before any post. */
static void
members_up(void)
{
	char err[1024], name[64];
	uint64_t last = 0;
	int64_t t0 = now_ms();

	for (int i = 0; i < MEMBERS; i++) {
		struct peer *p = &R.peers[i];

		p->idx = i;
		snprintf(name, sizeof(name), "alo%s%02d", R.tag, i);
		assert_int_equal(h_agent_add(&mesh, name, R.channel, &p->a), 0);
		{
			/* Through a local copy: source and destination are both in R. */
			char from[sizeof(p->from)];
			snprintf(from, sizeof(from), "%s.%s", p->a.owner, p->a.actor);
			memcpy(p->from, from, sizeof(from));
		}
		if (link_open(&p->l, p->a.creds, err, sizeof(err)) != 0)
			fail_msg("connect %s: %s", name, err);
		if (h_dlv_attach(p->l.nc, p->l.creds.jwt, &mesh, &p->a, &p->pl, err,
		    sizeof(err)) != 0)
			fail_msg("bind %s: %s", name, err);
		p->seen = calloc(POSTS, sizeof(*p->seen));
		p->dseq = calloc(POSTS, sizeof(*p->dseq));
		assert_non_null(p->seen);
		assert_non_null(p->dseq);
	}
	assert_int_equal(h_chat_last_seq(&R.provc, &mesh, &last), 0);
	for (int i = 0; i < MEMBERS; i++)
		if (h_member_put(&R.provc, &mesh, &R.peers[i].a, R.channel, last, 0, 1, err,
		    sizeof(err)) != 0)
			fail_msg("%s", err);
	for (int i = 0; i < MEMBERS; i++)
		assert_int_equal(pthread_create(&R.peers[i].th, NULL, drain_main, &R.peers[i]), 0);
	fprintf(stderr, "• %d members up in %lld ms (joinCursor %" PRIu64 ")\n", MEMBERS,
	    (long long)(now_ms() - t0), last);
}

/* ---- the posts ---- */

static void
publish_one(int n)
{
	struct peer *p = &R.peers[n % MEMBERS];
	char subj[512], id[64], text[64];
	natsMsg *m = NULL;
	json_t *msg;
	char *body;

	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", mesh.token, p->a.owner, p->a.actor,
	    R.channel);
	snprintf(id, sizeof(id), "%s-%d", R.tag, n);
	snprintf(text, sizeof(text), "post %d", n);
	msg = json_pack("{s:s, s:I, s:s, s:{s:s, s:s}, s:[{s:s, s:s}], s:s}",
	    "id", id, "ts", (json_int_t)now_ms(), "space", mesh.space,
	    "from", "id", p->from, "name", p->a.name,
	    "parts", "kind", "text", "text", text, "channel", R.channel);
	body = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	/* CHAT's duplicate window dedupes a re-publish of the same id. */
	if (natsMsg_Create(&m, subj, NULL, body, (int)strlen(body)) == NATS_OK &&
	    natsMsgHeader_Set(m, "Nats-Msg-Id", id) == NATS_OK) {
		p->l.published = true;
		if (js_PublishMsgAsync(p->l.pjs, &m, NULL) != NATS_OK)
			atomic_fetch_add(&R.pub_errors, 1);
	}
	natsMsg_Destroy(m); /* NULL once the library took it */
	free(body);
}

/* Slow down while the broker-kill case asks for it (PACE_PER_S). */
static void
pace(void)
{
	if (now_ms() < atomic_load(&R.pace_until))
		nap(1000 / PACE_PER_S);
}

/*
 * As fast as JetStream takes them (PACE_PER_S around a broker crash), CHUNK
 * in flight, round robin over the 20 members' connections. A post counts as
 * sent once its PubAck arrived; what got none (broker down, lost in flight)
 * is published again with the same id.
 */
static void *
poster_main(void *arg)
{
	(void)arg;
	R.t_post0 = now_ms();
	for (int base = 0; base < POSTS; base += CHUNK) {
		int end = base + CHUNK < POSTS ? base + CHUNK : POSTS;
		for (int round = 0; ; round++) {
			int sent = 0;
			for (int n = base; n < end; n++)
				if (!atomic_load(&R.acked[n])) {
					publish_one(n);
					sent++;
					pace();
				}
			if (sent == 0)
				break;
			if (round > 0)
				atomic_fetch_add(&R.republished, sent);
			for (int i = 0; i < MEMBERS; i++) {
				struct link *l = &R.peers[i].l;
				jsPubOptions po;
				natsMsgList pending = { 0 };
				if (!l->published)
					continue;
				jsPubOptions_Init(&po);
				po.MaxWait = 2000;
				if (js_PublishAsyncComplete(l->pjs, &po) != NATS_OK &&
				    js_PublishAsyncGetPendingList(&pending, l->pjs) == NATS_OK) {
					atomic_fetch_add(&R.pub_timeouts, pending.Count);
					natsMsgList_Destroy(&pending);
				}
			}
			/* libnats counts an ack in before its handler runs. */
			for (int w = 0; w < 50; w++) {
				bool all = true;
				for (int n = base; n < end && all; n++)
					all = atomic_load(&R.acked[n]);
				if (all)
					break;
				nap(10);
			}
		}
	}
	R.t_post1 = now_ms();
	atomic_store(&R.posting_done, true);
	return NULL;
}

/* ---- progress and the verdict ---- */

static int64_t
surfaced(void)
{
	int64_t n = 0;

	for (int i = 0; i < MEMBERS; i++)
		n += atomic_load(&R.peers[i].distinct);
	return n;
}

#define EXPECTED_EACH (POSTS - POSTS / MEMBERS)
#define EXPECTED_ALL ((int64_t)EXPECTED_EACH * MEMBERS)

/* Pending and unacked of a consumer, or false when it cannot be read. */
static bool
consumer_idle(const char *stream, const char *name, char *note, size_t notelen)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	bool idle;

	if (js_GetConsumerInfo(&ci, R.prov.js, stream, name, NULL, &jerr) != NATS_OK) {
		snprintf(note, notelen, "%s/%s: no info (jerr %d)", stream, name, (int)jerr);
		return false;
	}
	idle = ci->NumPending == 0 && ci->NumAckPending == 0;
	snprintf(note, notelen, "%s/%s: pending %" PRIu64 " ackPending %" PRId64 " redelivered %"
	    PRId64 " delivered %" PRIu64 " ackFloor %" PRIu64, stream, name, ci->NumPending,
	    ci->NumAckPending, ci->NumRedelivered, ci->Delivered.Stream, ci->AckFloor.Stream);
	jsConsumerInfo_Destroy(ci);
	return idle;
}

/* Everything copied, handed off and surfaced, and nothing left to
 * redeliver: CHAT/fanout, INBOX/reader and every dlv_ consumer idle. */
static bool
quiescent(bool print)
{
	char stream[256], durable[512], note[512];
	bool idle = true;

	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	idle &= consumer_idle(stream, "fanout", note, sizeof(note));
	if (print)
		fprintf(stderr, "  %s\n", note);
	snprintf(stream, sizeof(stream), "INBOX_%s", mesh.token);
	idle &= consumer_idle(stream, "reader", note, sizeof(note));
	if (print)
		fprintf(stderr, "  %s\n", note);
	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	for (int i = 0; i < MEMBERS && (idle || print); i++) {
		struct peer *p = &R.peers[i];
		snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", p->a.owner, p->a.actor, p->a.uid);
		bool one = consumer_idle(stream, durable, note, sizeof(note));
		idle &= one;
		if (print && !one)
			fprintf(stderr, "  %s\n", note);
	}
	return idle;
}

static void
print_stream(const char *prefix)
{
	char stream[256];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "%s_%s", prefix, mesh.token);
	if (js_GetStreamInfo(&si, R.prov.js, stream, NULL, &jerr) != NATS_OK) {
		fprintf(stderr, "  %s: no info (jerr %d)\n", stream, (int)jerr);
		return;
	}
	fprintf(stderr, "  %s: msgs %" PRIu64 " firstSeq %" PRIu64 " lastSeq %" PRIu64
	    " deleted %" PRIu64 "\n", stream, si->State.Msgs, si->State.FirstSeq,
	    si->State.LastSeq, si->State.NumDeleted);
	jsStreamInfo_Destroy(si);
}

/* Log lines of the daemon that say something went wrong (! or ✗). */
static void
print_log_warnings(int max)
{
	FILE *f = fopen(dmn.log, "r");
	char line[4096];
	int n = 0, shown = 0;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "!") != NULL || strstr(line, "✗") != NULL) {
			if (shown < max) {
				fprintf(stderr, "  | %s", line);
				shown++;
			}
			n++;
		}
	fclose(f);
	fprintf(stderr, "  (%d warning/error lines in %s, %d shown)\n", n, dmn.log, shown);
}

/*
 * Wait (DEADLINE_MS from now) until every member surfaced every post of the
 * others and the pipeline is quiescent, keep draining a moment longer for
 * late duplicates, stop the drains, report, and assert.
 */
static void
settle_and_check(int64_t t_disrupt_end)
{
	int64_t deadline = now_ms() + DEADLINE_MS, t_all = 0, t_quiet = 0;
	int64_t last_print = now_ms();

	while (now_ms() < deadline) {
		if (t_all == 0 && surfaced() == EXPECTED_ALL && atomic_load(&R.posting_done))
			t_all = now_ms();
		if (t_all != 0 && quiescent(false)) {
			t_quiet = now_ms();
			break;
		}
		if (now_ms() - last_print >= 10000) {
			fprintf(stderr, "• +%llds: %lld/%lld surfaced\n",
			    (long long)((now_ms() - t_disrupt_end) / 1000), (long long)surfaced(),
			    (long long)EXPECTED_ALL);
			last_print = now_ms();
		}
		nap(200);
	}
	nap(1500); /* anything late, a duplicate above all, lands now */
	atomic_store(&R.stop_drain, true);
	for (int i = 0; i < MEMBERS; i++) {
		pthread_join(R.peers[i].th, NULL);
		R.peers[i].th = 0;
	}

	int dups = 0, redelivered = 0, own = 0, foreign = 0, bad_header = 0, bad_channel = 0,
	    fetch_errors = 0, short_members = 0;
	int64_t all = 0;
	for (int i = 0; i < MEMBERS; i++) {
		struct peer *p = &R.peers[i];
		int d = atomic_load(&p->distinct);
		all += d;
		dups += atomic_load(&p->dups);
		redelivered += atomic_load(&p->redelivered);
		own += atomic_load(&p->own);
		foreign += atomic_load(&p->foreign);
		bad_header += atomic_load(&p->bad_header);
		bad_channel += atomic_load(&p->bad_channel);
		fetch_errors += atomic_load(&p->fetch_errors);
		if (d != EXPECTED_EACH) {
			char missing[512] = "";
			size_t ml = 0;
			int nm = 0;
			for (int n = 0; n < POSTS; n++)
				if (n % MEMBERS != i && p->seen[n] == 0) {
					if (nm < 12 && ml < sizeof(missing) - 16)
						ml += (size_t)snprintf(missing + ml, sizeof(missing) - ml,
						    " %s-%d", R.tag, n);
					nm++;
				}
			fprintf(stderr, "  ✗ member %s (%s.%s): %d/%d surfaced, %d missing:%s%s\n",
			    p->a.name, p->from, p->a.uid, d, EXPECTED_EACH, nm, missing,
			    nm > 12 ? " ..." : "");
			short_members++;
		}
	}
	fprintf(stderr, "• posting: %d posts in %lld ms (%d re-published, %d publish errors, "
	    "%d PubAck timeouts)\n", POSTS, (long long)(R.t_post1 - R.t_post0),
	    atomic_load(&R.republished), atomic_load(&R.pub_errors), atomic_load(&R.pub_timeouts));
	fprintf(stderr, "• surfaced %lld/%lld frames; all in %s%.1f s after the first post, "
	    "%.1f s after the disruptions ended; quiescent %s%.1f s after them\n",
	    (long long)all, (long long)EXPECTED_ALL, t_all ? "" : "NEVER (deadline) ",
	    (double)((t_all ? t_all : now_ms()) - R.t_post0) / 1000.0,
	    (double)((t_all ? t_all : now_ms()) - t_disrupt_end) / 1000.0,
	    t_quiet ? "" : "NEVER (deadline) ",
	    (double)((t_quiet ? t_quiet : now_ms()) - t_disrupt_end) / 1000.0);
	fprintf(stderr, "• duplicates (a 2nd DLV frame of one post) %d; consumer redeliveries "
	    "(same DLV frame again) %d; own posts surfaced %d; foreign %d; bad header %d; "
	    "bad channel %d; member fetch errors %d\n", dups, redelivered, own, foreign,
	    bad_header, bad_channel, fetch_errors);
	print_stream("CHAT");
	print_stream("INBOX");
	print_stream("DLV");
	for (int i = 0; i < MEMBERS && dups > 0; i++) {
		struct peer *p = &R.peers[i];
		int d = atomic_load(&p->dups);
		if (d == 0)
			continue;
		fprintf(stderr, "  ✗ member %s: %d duplicates, of posts %s-%d..%s-%d; first:", p->a.name,
		    d, R.tag, p->dup_lo, R.tag, p->dup_hi);
		for (int k = 0; k < d && k < (int)(sizeof(p->dup_ex) / sizeof(p->dup_ex[0])); k++)
		{
			char when[32];
			utc_ms(p->dup_ex[k].ts2_ms, when, sizeof(when));
			fprintf(stderr, " %s-%d (DLV %" PRIu64 ", again %" PRIu64 " stored %s)", R.tag,
			    p->dup_ex[k].n, p->dup_ex[k].seq1, p->dup_ex[k].seq2, when);
		}
		fprintf(stderr, "\n");
	}
	quiescent(true);
	h_daemon_print(&dmn);
	if (short_members > 0 || dups > 0 || verbose())
		print_log_warnings(40);

	assert_int_equal(short_members, 0);
	assert_int_equal(all, EXPECTED_ALL);
	assert_int_equal(dups, 0);           /* every post has an id */
	assert_int_equal(own, 0);            /* the sender gets no copy */
	assert_int_equal(foreign, 0);
	assert_int_equal(bad_header, 0);
	assert_int_equal(bad_channel, 0);
	assert_true(t_quiet != 0);
}

/* ---- 1. workers killed ---- */

/* A live worker of role that is a child of our daemon, or 0. */
static pid_t
worker_of(const char *role)
{
	pid_t pid = h_daemon_worker_pid(&dmn, role);
	char path[64], buf[512];
	FILE *f;
	long ppid = 0;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL) {
		char *p = strrchr(buf, ')');
		if (p != NULL)
			sscanf(p + 1, " %*c %ld", &ppid);
	}
	fclose(f);
	return ppid == dmn.pid ? pid : 0;
}

static void
test_workers_killed(void **state)
{
	static const char *const roles[2] = { "fanout", "reader" };
	pid_t last[2] = { 0, 0 };
	int kills[2] = { 0, 0 }, midstream[2] = { 0, 0 };

	(void)state;
	members_up();
	assert_int_equal(pthread_create(&R.poster, NULL, poster_main, NULL), 0);
	int64_t t0 = now_ms();
	for (int k = 0; kills[0] + kills[1] < 2 * KILLS_PER_ROLE; k++) {
		int r = k % 2;
		pid_t pid = 0;
		int64_t until = now_ms() + KILL_EVERY_MS;
		if (surfaced() == EXPECTED_ALL)
			break;
		if (kills[r] == KILLS_PER_ROLE)
			continue;
		/* Its successor, up (after the backoff), and at work a while. */
		for (int64_t w = now_ms() + 15000; now_ms() < w; nap(20)) {
			pid = worker_of(roles[r]);
			if (pid > 0 && pid != last[r])
				break;
			pid = 0;
		}
		if (now_ms() + 800 > until)
			until = now_ms() + 800;
		while (now_ms() < until)
			nap(20);
		if (pid == 0 || (pid = worker_of(roles[r])) == 0) {
			fprintf(stderr, "• no %s worker to kill\n", roles[r]);
			continue;
		}
		int64_t got = surfaced();
		assert_int_equal(kill(pid, SIGKILL), 0);
		last[r] = pid;
		kills[r]++;
		if (got < EXPECTED_ALL)
			midstream[r]++;
		fprintf(stderr, "• +%.1fs kill -9 %s %ld: %d/%d posts acked by CHAT, %lld/%lld "
		    "surfaced\n", (double)(now_ms() - t0) / 1000.0, roles[r], (long)pid,
		    atomic_load(&R.nacked), POSTS, (long long)got, (long long)EXPECTED_ALL);
	}
	int64_t t_end = now_ms();
	pthread_join(R.poster, NULL);
	fprintf(stderr, "• kills: fanout %d (%d mid-stream), reader %d (%d mid-stream)\n",
	    kills[0], midstream[0], kills[1], midstream[1]);
	settle_and_check(t_end);
	/* The disruption did happen while there was something to lose. */
	assert_true(midstream[0] >= 2);
	assert_true(midstream[1] >= 2);
	assert_true(h_daemon_wait_exit(&dmn, 0) == -1); /* the daemon is still up */
}

/* ---- 2. broker killed and restarted on its store ---- */

/* Does the broker config `cotal mesh init` wrote hold needle? */
static bool
conf_has(const char *needle)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(mesh.conf, "r");

	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	if (f != NULL)
		fclose(f);
	return found;
}

/*
 * The broker dies by SIGKILL twice mid-stream. "Losing nothing" across a
 * broker crash needs a broker that loses no write it acknowledged: the
 * config `cotal mesh init` writes for a broker that takes it has JetStream
 * sync every write (sync_interval: always), and with it no post, copy or
 * frame is lost, and no post surfaces twice.
 */
static void
test_broker_restarted(void **state)
{
	static const int at[2] = { POSTS * 3 / 10, POSTS * 7 / 10 };
	int64_t t_end;

	(void)state;
	assert_true(h_broker_version() >= 210);
	assert_true(conf_has("sync_interval: always"));
	members_up();
	assert_int_equal(pthread_create(&R.poster, NULL, poster_main, NULL), 0);
	int64_t t0 = now_ms();
	for (int k = 0; k < 2; k++) {
		while (atomic_load(&R.nacked) < at[k] && !atomic_load(&R.posting_done))
			nap(2);
		/* Slow down, and let the copies catch up with the posts (within
		 * CAUGHT_UP_SLACK) so that the minute after the crash stays
		 * within DLV's 1000 per member. */
		atomic_store(&R.pace_until, INT64_MAX);
		int64_t w = now_ms() + CATCH_UP_MS;
		while (surfaced() < (int64_t)(atomic_load(&R.nacked) - CAUGHT_UP_SLACK) * (MEMBERS - 1)) {
			if (now_ms() > w)
				fail_msg("the copies did not catch up with the posts in %d s: %lld/%lld "
				    "surfaced", CATCH_UP_MS / 1000, (long long)surfaced(),
				    (long long)atomic_load(&R.nacked) * (MEMBERS - 1));
			nap(20);
		}
		int acked = atomic_load(&R.nacked);
		int64_t got = surfaced();
		assert_int_equal(h_broker_kill(&mesh), 0);
		char when[32];
		utc_ms(now_ms(), when, sizeof(when));
		fprintf(stderr, "• +%.1fs (%s) broker killed: %d/%d posts acked by CHAT, %lld/%lld "
		    "surfaced\n", (double)(now_ms() - t0) / 1000.0, when, acked, POSTS, (long long)got,
		    (long long)EXPECTED_ALL);
		assert_true(acked < POSTS); /* in the middle of the stream */
		nap(BROKER_DOWN_MS);
		assert_int_equal(h_broker_restart(&mesh), 0);
		fprintf(stderr, "• +%.1fs broker restarted on its store\n",
		    (double)(now_ms() - t0) / 1000.0);
		atomic_store(&R.pace_until, now_ms() + PACE_AFTER_MS);
		/* Back to serving, and past the paced minute, before the next one. */
		if (k == 0)
			while (now_ms() < atomic_load(&R.pace_until) ||
			    (atomic_load(&R.nacked) <= acked && !atomic_load(&R.posting_done)))
				nap(20);
	}
	t_end = now_ms();
	pthread_join(R.poster, NULL);
	settle_and_check(t_end);
	assert_true(h_daemon_wait_exit(&dmn, 0) == -1); /* no broker watchdog yet: still up */
	assert_int_equal(h_daemon_wait_connected(&dmn, 10000), 0);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_workers_killed, setup_kills, run_teardown),
		cmocka_unit_test_setup_teardown(test_broker_restarted, setup_broker, run_teardown),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, NULL, NULL));
}
