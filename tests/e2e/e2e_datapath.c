/*
 * The durable data path against a real broker and the real daemon: posts
 * on CHAT_<s> reach members' dlv_ durables through the fan-out writer and
 * the trusted reader, re-authorized against the read ACL and membership
 * interval of the moment (seed, "The three pieces", "Why a trusted reader").
 * Agents bind their own dlv_ consumers with their own credentials. What
 * is re-authorized, retried, given up or removed: e2e_datapath_retry.c.
 */
#include <glob.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
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
#include "lib/nats/pull.h"
#include "tests/harness/harness.h"

#define WAIT_MS 8000   /* for a frame that should come */
#define QUIET_MS 1500  /* after the last one, nothing more */

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov; /* the provisioner: writes rows as the registry would */
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };

static int
setup(void **state)
{
	*state = &fx;
	return h_daemon_up(&mesh, "datapath", &prov, &dmn, 20000, "fan-out bound", "reader bound",
	    NULL);
}

/* An agent and its connection. */
static void
member_add(struct member *mb, const char *name, const char *allow)
{
	char err[1024];

	if (h_member_add(&mesh, name, allow, NULL, mb, err, sizeof(err)) != 0)
		fail_msg("%s: %s", name, err);
}

/* A membership of channel from now on. */
static void
member_join(struct member *mb, const char *channel, uint64_t generation)
{
	char err[1024];

	if (h_member_join(&prov, &mesh, &mb->a, channel, generation, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static json_t *
drain(struct member *mb, int ms)
{
	char err[1024];
	bool hdr = false;
	json_t *frames = h_dlv_drain(&mb->c, &mesh, &mb->a, ms, QUIET_MS, &hdr, err, sizeof(err));

	if (frames == NULL)
		fail_msg("%s", err);
	assert_true(hdr);
	return frames;
}

/*
 * "On each post to a durable channel it copies the message into every
 * eligible member's private durable store": 3 members, 1 post, one frame
 * each, with the header, the channel from the subject; none for the sender.
 */
/*
 * "On each post to a durable channel it copies the message into every
 * eligible member's private durable store": 3 members, 1 post, one frame
 * each, with the header, the channel from the subject; none for the sender.
 */
static void
test_each_member_receives_one_frame(void **state)
{
	struct member m[3];
	const char *names[3] = { "ann", "ben", "cat" };

	(void)state;
	for (int i = 0; i < 3; i++) {
		member_add(&m[i], names[i], "room1");
		member_join(&m[i], "room1", 1);
	}
	assert_int_equal(h_post(&m[0].c, &mesh, &m[0].a, "room1", "p-1", "hello", NULL), 0);
	for (int i = 1; i < 3; i++) {
		json_t *f = drain(&m[i], WAIT_MS);
		assert_int_equal(json_array_size(f), 1);
		json_t *fr = json_array_get(f, 0);
		assert_int_equal(json_integer_value(json_object_get(fr, "version")), 1);
		assert_string_equal(json_string_value(json_object_get(fr, "channel")), "room1");
		assert_string_equal(json_string_value(json_object_get(json_object_get(fr, "msg"),
		    "channel")), "room1");
		assert_string_equal(h_frame_text(fr), "hello");
		json_decref(f);
	}
	json_t *own = drain(&m[0], QUIET_MS);
	assert_int_equal(json_array_size(own), 0); /* skipping the sender */
	json_decref(own);
	for (int i = 0; i < 3; i++)
		h_close(&m[i].c);
}

/* ---- helpers of the tests below ---- */

static void
member_leave(struct member *mb, const char *channel, uint64_t join, uint64_t generation)
{
	char err[1024];
	uint64_t last = 0;

	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	if (h_member_put(&prov, &mesh, &mb->a, channel, join, last, generation, err,
	    sizeof(err)) != 0)
		fail_msg("%s", err);
}

static uint64_t
chat_last(void)
{
	uint64_t last = 0;

	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	return last;
}

static void
post(struct member *mb, const char *channel, const char *id, const char *text)
{
	assert_int_equal(h_post(&mb->c, &mesh, &mb->a, channel, id, text, NULL), 0);
}

/* Publish raw bytes on the member's own chat subject (poison posts). */
static void
post_raw(struct member *mb, const char *channel, const char *body, size_t len)
{
	char subj[512];
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;

	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", mesh.token, mb->a.owner,
	    mb->a.actor, channel);
	assert_int_equal(js_Publish(&pa, mb->c.js, subj, body, (int)len, NULL, &jerr), NATS_OK);
	jsPubAck_Destroy(pa);
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

/* INBOX_<s>'s last sequence. */
static uint64_t
inbox_last(void)
{
	uint64_t last = 0;

	assert_int_equal(h_stream_last_seq(&prov, &mesh, "INBOX", &last), 0);
	return last;
}

/* A counter of a worker role from the status file. */
static uint64_t
worker_counter(const char *role, const char *name)
{
	return h_daemon_counter(&dmn, role, name);
}

/*
 * "per-member join and leave cursors so a post concurrent with a join or
 * leave orders deterministically": a post before the join, one between and
 * one after the leave; only the middle one is surfaced. A rejoin with
 * generation+1 receives again.
 */
/*
 * "per-member join and leave cursors so a post concurrent with a join or
 * leave orders deterministically": a post before the join, one between and
 * one after the leave; only the middle one is surfaced. A rejoin with
 * generation+1 receives again.
 */
static void
test_join_and_leave_cursors_bound_what_is_surfaced(void **state)
{
	struct member a, b;

	(void)state;
	member_add(&a, "jl-a", "cursors");
	member_add(&b, "jl-b", "cursors");
	post(&a, "cursors", "c-before", "before");
	member_join(&b, "cursors", 1);
	uint64_t join = chat_last();
	post(&a, "cursors", "c-between", "between");
	member_leave(&b, "cursors", join, 1);
	post(&a, "cursors", "c-after", "after");
	expect_texts(&b, WAIT_MS, "between");
	/* "Rejoin = generation+1, new joinCursor." */
	member_join(&b, "cursors", 2);
	post(&a, "cursors", "c-again", "again");
	expect_texts(&b, WAIT_MS, "again");
	h_close(&a.c);
	h_close(&b.c);
}

/*
 * "A post with an empty id is copied without a duplicate-suppression key,
 * so two distinct id-less posts are both delivered"; two posts with one id
 * are one.
 */
/*
 * "A post with an empty id is copied without a duplicate-suppression key,
 * so two distinct id-less posts are both delivered"; two posts with one id
 * are one.
 */
static void
test_idless_posts_both_surface_and_one_id_surfaces_once(void **state)
{
	struct member a, b;

	(void)state;
	member_add(&a, "id-a", "ids");
	member_add(&b, "id-b", "ids");
	member_join(&b, "ids", 1);
	post(&a, "ids", "", "first id-less");
	post(&a, "ids", "", "second id-less");
	expect_texts(&b, WAIT_MS, "first id-less,second id-less");
	post(&a, "ids", "same-id", "once");
	post(&a, "ids", "same-id", "twice");
	expect_texts(&b, WAIT_MS, "once");
	h_close(&a.c);
	h_close(&b.c);
}

static void
presence_put(const struct member *mb, const char *name)
{
	char err[1024], key[256], body[1024];

	snprintf(key, sizeof(key), "%s.%s", mb->a.owner, mb->a.actor);
	snprintf(body, sizeof(body), "{\"card\":{\"id\":\"%s\",\"name\":\"%s\",\"kind\":\"agent\"},"
	    "\"status\":\"online\",\"ts\":%lld,\"lifecycleUid\":\"%s\"}", key, name,
	    (long long)time(NULL) * 1000, mb->a.uid);
	if (h_kv_put(&prov, &mesh, "presence", key, body, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static void
post_mentioning(struct member *mb, const char *channel, const char *id, const char *names)
{
	char body[2048];
	int n = snprintf(body, sizeof(body), "{\"id\":\"%s\",\"ts\":%lld,\"space\":\"%s\","
	    "\"from\":{\"id\":\"%s.%s\",\"name\":\"%s\"},\"parts\":[{\"kind\":\"text\","
	    "\"text\":\"%s\"}],\"channel\":\"%s\",\"mentions\":[%s]}", id,
	    (long long)time(NULL) * 1000, mesh.space, mb->a.owner, mb->a.actor, mb->a.name, id,
	    channel, names);

	post_raw(mb, channel, body, (size_t)n);
}

/*
 * "For an @mention on a live channel it also writes a copy for each
 * mentioned peer authorized to read that channel, which is how a mention
 * reaches an authorized peer who isn't currently joined (SPEC §4)." The
 * unique, authorized mentioned peer gets one copy; an ambiguous name, an
 * unauthorized peer and the sender get none; on a durable channel a
 * mention adds nothing beyond the members' copies.
 */
/*
 * "For an @mention on a live channel it also writes a copy for each
 * mentioned peer authorized to read that channel, which is how a mention
 * reaches an authorized peer who isn't currently joined (SPEC §4)." The
 * unique, authorized mentioned peer gets one copy; an ambiguous name, an
 * unauthorized peer and the sender get none; on a durable channel a
 * mention adds nothing beyond the members' copies.
 */
static void
test_live_mention_reaches_the_unique_authorized_peer(void **state)
{
	struct member a, peer, outsider, twin1, twin2, m;
	char err[1024];

	(void)state;
	member_add(&a, "mn-a", "lounge,hall");
	member_add(&peer, "mn-peer", "lounge,hall");   /* may read both, joined to neither */
	member_add(&outsider, "mn-out", "elsewhere");  /* may read neither */
	member_add(&twin1, "mn-t1", "lounge");
	member_add(&twin2, "mn-t2", "lounge");
	member_add(&m, "mn-m", "hall");                /* a durable member of hall */
	if (h_kv_put(&prov, &mesh, "channels", "lounge", "{\"deliveryClass\":\"live\"}", err,
	    sizeof(err)) != 0)
		fail_msg("%s", err);
	member_join(&m, "hall", 1);
	uint64_t before = inbox_last();
	/* Presence lives 6 s: written right before the posts. */
	presence_put(&a, "Alma");
	presence_put(&peer, "Petra");
	presence_put(&outsider, "Olaf");
	presence_put(&twin1, "Twin");
	presence_put(&twin2, "twin");
	presence_put(&m, "Mona");
	post_mentioning(&a, "lounge", "mention-live",
	    "\"petra\",\"olaf\",\"twin\",\"alma\",\"mona\"");
	post_mentioning(&a, "hall", "mention-durable", "\"petra\",\"mona\",\"alma\"");
	expect_texts(&peer, WAIT_MS, "mention-live");      /* exactly one: not the hall one */
	expect_texts(&m, WAIT_MS, "mention-durable");      /* its member copy, once */
	expect_texts(&outsider, QUIET_MS, "");
	expect_texts(&twin1, QUIET_MS, "");
	expect_texts(&twin2, QUIET_MS, "");
	expect_texts(&a, QUIET_MS, "");
	/* The fan-out wrote exactly those two copies: petra's live-mention one
	 * and mona's member one (mona may not read lounge). */
	assert_int_equal(inbox_last(), before + 2);
	struct member *all[] = { &a, &peer, &outsider, &twin1, &twin2, &m };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		h_close(&all[i]->c);
}

/*
 * "An inauthentic or undecodable post is acked and dropped by the fan-out"
 * and never stalls the loop: bad JSON, parts:null, a forged from.id and a
 * near-max-payload blob of garbage, then a good post that is delivered.
 */
/*
 * "An inauthentic or undecodable post is acked and dropped by the fan-out"
 * and never stalls the loop: bad JSON, parts:null, a forged from.id and a
 * near-max-payload blob of garbage, then a good post that is delivered.
 */
static void
test_poison_posts_never_stop_the_loop(void **state)
{
	struct member a, b;
	char forged[1024];

	(void)state;
	member_add(&a, "poi-a", "poison");
	member_add(&b, "poi-b", "poison");
	member_join(&b, "poison", 1);
	uint64_t dropped = worker_counter("fanout", "dropped");
	post_raw(&a, "poison", "{not json", 9);
	/* Authentic but for parts: null. */
	char nullparts[1024];
	int n = snprintf(nullparts, sizeof(nullparts), "{\"id\":\"np\",\"ts\":1,\"space\":\"%s\","
	    "\"from\":{\"id\":\"%s.%s\",\"name\":\"a\"},\"parts\":null,\"channel\":\"poison\"}",
	    mesh.space, a.a.owner, a.a.actor);
	post_raw(&a, "poison", nullparts, (size_t)n);
	/* Well formed, but from.id names someone else. */
	n = snprintf(forged, sizeof(forged), "{\"id\":\"forged\",\"ts\":1,\"space\":\"%s\","
	    "\"from\":{\"id\":\"%s.%s\",\"name\":\"b\"},\"parts\":[],\"channel\":\"poison\"}",
	    mesh.space, b.a.owner, b.a.actor);
	post_raw(&a, "poison", forged, (size_t)n);
	/* Garbage just under the broker's max_payload (1 MiB by default). */
	int64_t maxp = natsConnection_GetMaxPayload(a.c.nc);
	assert_true(maxp > 8192);
	size_t big = (size_t)maxp - 4096;
	char *garbage = malloc(big);
	for (size_t i = 0; i < big; i++)
		garbage[i] = (char)(' ' + (i * 7919) % 90);
	post_raw(&a, "poison", garbage, big);
	free(garbage);
	post(&a, "poison", "good", "good after poison");
	expect_texts(&b, WAIT_MS, "good after poison");
	for (int i = 0; worker_counter("fanout", "dropped") < dropped + 4; i++) {
		if (i > 30)
			fail_msg("the fan-out counted %llu drops, want %llu",
			    (unsigned long long)(worker_counter("fanout", "dropped") - dropped), 4ULL);
		usleep(100 * 1000);
	}
	usleep(1000 * 1000);
	assert_int_equal(worker_counter("fanout", "dropped"), dropped + 4); /* the good post is not one */
	assert_true(h_log_has(dmn.log, "dropped an undecodable post", 1000));
	assert_true(h_log_has(dmn.log, "dropped an inauthentic post", 1000));
	h_close(&a.c);
	h_close(&b.c);
}

/* ---- a broker that forgot the fan-out's acks ---- */

/* A consumer's ack floor (`fanout` on CHAT, `reader` on INBOX), asked
 * until the broker answers. */
static uint64_t
ack_floor(const char *kind, const char *consumer, int ms)
{
	char stream[256];
	int64_t until = mono_ms() + ms;

	snprintf(stream, sizeof(stream), "%s_%s", kind, mesh.token);
	for (;;) {
		jsConsumerInfo *ci = NULL;
		jsErrCode jerr = 0;
		natsStatus st = js_GetConsumerInfo(&ci, prov.js, stream, consumer, NULL, &jerr);
		if (st == NATS_OK) {
			uint64_t floor = ci->AckFloor.Stream;
			jsConsumerInfo_Destroy(ci);
			return floor;
		}
		if (mono_ms() > until)
			fail_msg("no answer about %s's %s consumer within %d ms: %s (%d, %s)", stream,
			    consumer, ms, natsStatus_GetText(st), (int)jerr, nats_GetLastError(NULL));
		usleep(100 * 1000);
	}
}

/* Wait until a consumer's ack floor reaches seq. */
static void
wait_ack_floor(const char *kind, const char *consumer, uint64_t seq, int ms)
{
	int64_t until = mono_ms() + ms;
	uint64_t floor;

	while ((floor = ack_floor(kind, consumer, ms)) < seq) {
		if (mono_ms() > until)
			fail_msg("%s's ack floor on %s stays at %llu, below %llu", consumer, kind,
			    (unsigned long long)floor, (unsigned long long)seq);
		usleep(100 * 1000);
	}
}

/* Empty a consumer's state file in the broker's store (the broker is
 * down): what a broker killed between truncating and writing it leaves. */
static void
empty_consumer_state(const char *kind, const char *consumer)
{
	char store[512], pattern[1024];
	glob_t g;

	assert_true(h_conf_value(mesh.conf, "store_dir", store, sizeof(store)));
	snprintf(pattern, sizeof(pattern), "%s/jetstream/*/streams/%s_%s/obs/%s/o.dat", store,
	    kind, mesh.token, consumer);
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	assert_int_equal(truncate(g.gl_pathv[0], 0), 0);
	globfree(&g);
}

/* Every frame that reaches mb within ms, counted until want came. */
static size_t
drain_count(struct member *mb, size_t want, int ms)
{
	char err[1024];
	bool hdr = false;
	size_t total = 0;

	for (int64_t until = mono_ms() + ms; total < want && mono_ms() < until;) {
		json_t *got = h_dlv_drain(&mb->c, &mesh, &mb->a, 5000, QUIET_MS, &hdr, err,
		    sizeof(err));
		if (got == NULL)
			fail_msg("%s", err);
		total += json_array_size(got);
		json_decref(got);
	}
	return total;
}

/*
 * "at least once, losing nothing", and a post with an id surfaces once
 * (seed, "The three pieces": only an id-less post's redelivery may surface
 * twice), even from a broker that forgets its consumers' acks. nats-server
 * up to 2.13 writes a consumer's state file in place: killed between the
 * truncate and the write, it comes back with the consumer at its stream's
 * first message and hands everything over again (seen in CI: `fanout` at
 * CHAT's first post, 1,946 posts copied twice). Made here by emptying the
 * files of `fanout` and `reader` while the broker is down.
 *
 * Three senders post 400 each, the last 30 without an id; CHAT keeps them
 * all (1,000 per sender's subject), the fourth member's INBOX keeps the
 * last 1,000 of its 1,200 copies (WIRE.md §3), and after a restart the
 * broker's dedup knows only what it stores: copied again, the 200 oldest
 * would be stored twice in INBOX; and an id-less entry framed again has no
 * dedup key at all, so the 30 would surface twice. The fan-out and the
 * reader ack what they acked before without doing it again, and go on with
 * new posts.
 */
#define FORGOT_SENDERS 3
#define FORGOT_EACH 400
#define FORGOT_CHUNK 300
#define FORGOT_IDLESS 30
static void
test_a_broker_that_forgot_its_consumers_acks_surfaces_nothing_twice(void **state)
{
	struct member s[FORGOT_SENDERS], r;
	char id[32], text[32], err[1024], chat[256], inbox[256];
	const int all = FORGOT_SENDERS * FORGOT_EACH;

	(void)state;
	for (int k = 0; k < FORGOT_SENDERS; k++) {
		snprintf(text, sizeof(text), "fgs%d", k);
		member_add(&s[k], text, "forgot");
		member_join(&s[k], "forgot", 1);
	}
	member_add(&r, "fgr", "forgot");
	member_join(&r, "forgot", 1);
	/* In chunks that the member drains as it goes: its DLV keeps 1,000
	 * frames too. */
	for (int n = 0; n < all; n += FORGOT_CHUNK) {
		for (int k = n; k < n + FORGOT_CHUNK; k++) {
			snprintf(id, sizeof(id), "fg-%d", k);
			snprintf(text, sizeof(text), "%d", k);
			post(&s[k % FORGOT_SENDERS], "forgot", k < all - FORGOT_IDLESS ? id : "", text);
		}
		assert_int_equal(drain_count(&r, FORGOT_CHUNK, 60000), FORGOT_CHUNK);
	}
	uint64_t chat_end = chat_last(), inbox_end = inbox_last();
	wait_ack_floor("CHAT", "fanout", chat_end, 20000);
	wait_ack_floor("INBOX", "reader", inbox_end, 20000);
	snprintf(chat, sizeof(chat), "CHAT_%s", mesh.token);
	snprintf(inbox, sizeof(inbox), "INBOX_%s", mesh.token);
	int64_t posts_stored = h_stream_msgs(&prov, chat), entries_stored = h_stream_msgs(&prov, inbox);
	assert_true(posts_stored >= all);
	assert_true(entries_stored >= 1000);
	uint64_t dlv_end = 0;
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "DLV", &dlv_end), 0);
	uint64_t posts = worker_counter("fanout", "posts"), entries = worker_counter("reader", "entries");
	uint64_t replayed_posts = worker_counter("fanout", "replayed");
	uint64_t replayed_entries = worker_counter("reader", "replayed");

	assert_int_equal(h_broker_kill(&mesh), 0);
	empty_consumer_state("CHAT", "fanout");
	empty_consumer_state("INBOX", "reader");
	assert_int_equal(h_broker_restart(&mesh), 0);
	assert_int_equal(h_daemon_wait_connected(&dmn, 20000), 0);
	/* The harness's connections do not reconnect: new ones. */
	h_close(&prov);
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	for (int k = 0; k <= FORGOT_SENDERS; k++) {
		struct member *mb = k < FORGOT_SENDERS ? &s[k] : &r;
		h_close(&mb->c);
		if (h_connect(&mesh, mb->a.creds, &mb->c, err, sizeof(err)) != 0)
			fail_msg("%s: %s", mb->a.name, err);
	}

	/* The broker forgot: each worker is handed everything stored again
	 * (its own count of what it fetched). */
	assert_true(h_daemon_counter_reaches(&dmn, "fanout", "posts", (int64_t)(posts +
	    (uint64_t)posts_stored), 60000) >= (int64_t)(posts + (uint64_t)posts_stored));
	assert_true(h_daemon_counter_reaches(&dmn, "reader", "entries", (int64_t)(entries +
	    (uint64_t)entries_stored), 60000) >= (int64_t)(entries + (uint64_t)entries_stored));
	wait_ack_floor("CHAT", "fanout", chat_end, 30000);
	wait_ack_floor("INBOX", "reader", inbox_end, 30000);
	/* Nothing stored twice, nothing surfaced twice. */
	uint64_t inbox_now = inbox_last(), dlv_now = 0;
	if (inbox_now != inbox_end)
		fail_msg("INBOX took %llu copies again (posts acked before, copied twice)",
		    (unsigned long long)(inbox_now - inbox_end));
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "DLV", &dlv_now), 0);
	if (dlv_now != dlv_end)
		fail_msg("DLV took %llu frames again (entries acked before, framed twice)",
		    (unsigned long long)(dlv_now - dlv_end));
	assert_int_equal(drain_count(&r, 1, QUIET_MS * 2), 0);
	assert_true(h_daemon_counter_reaches(&dmn, "fanout", "replayed", (int64_t)(replayed_posts +
	    (uint64_t)posts_stored), 30000) >= (int64_t)(replayed_posts + (uint64_t)posts_stored));
	assert_true(h_daemon_counter_reaches(&dmn, "reader", "replayed",
	    (int64_t)(replayed_entries + (uint64_t)entries_stored), 30000) >=
	    (int64_t)(replayed_entries + (uint64_t)entries_stored));
	assert_true(h_log_has(dmn.log, "posts came again that were acked before", 1000));
	assert_true(h_log_has(dmn.log, "entries came again that were acked before", 1000));
	/* New posts are copied and framed as before. */
	post(&s[0], "forgot", "fg-after", "after");
	expect_texts(&r, WAIT_MS, "after");
	for (int k = 0; k < FORGOT_SENDERS; k++)
		h_close(&s[k].c);
	h_close(&r.c);
}

/* ---- a planned restart (issue 42) ---- */

/* The flow of the measurement ("10 members, 8 posts/s"): a post
 * every 125 ms for 10 s, the daemon stopped 3 s in. It was 50 posts/s to 8
 * members (400 copies/s), more than an ASan build on CI's loaded 2 cores
 * copies (260-500 copies/s measured there): the backlog of the restart's
 * own gap then drained at that rate (2.2-3.1 s), whatever the hand-back. */
#define RESTART_MEMBERS 10
#define RESTART_POSTS 80
#define RESTART_EVERY_MS 125  /* 8 posts a second: 10 s of flow */
#define RESTART_STOP_AT 24    /* the daemon is stopped once this post is out */

struct surfacer {
	struct member m;
	struct puller pl;
	pthread_t th;
	atomic_bool stop;
	atomic_int errors;
	_Atomic int64_t at[RESTART_POSTS]; /* when post n surfaced (0: not yet) */
};

static void
restart_record(void *arg, natsMsg *m)
{
	struct surfacer *sf = arg;
	json_t *v = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	const char *id = json_string_value(json_object_get(json_object_get(v, "msg"), "id"));
	int n = -1;
	int64_t none = 0;

	if (id != NULL && sscanf(id, "r-%d", &n) == 1 && n >= 0 && n < RESTART_POSTS)
		atomic_compare_exchange_strong(&sf->at[n], &none, mono_ms());
	json_decref(v);
}

static void *
restart_surface(void *arg)
{
	struct surfacer *sf = arg;

	h_dlv_surface(&sf->pl, &sf->stop, restart_record, sf, &sf->errors);
	return NULL;
}

/* The flow: a post every RESTART_EVERY_MS, each publish's time kept. */
struct restart_flow {
	struct member *poster;
	int64_t *posted;
	atomic_int sent;
	int failed;
};

static void *
restart_flow_main(void *arg)
{
	struct restart_flow *fl = arg;
	char id[32];
	int64_t next = mono_ms();

	for (int n = 0; n < RESTART_POSTS; n++) {
		snprintf(id, sizeof(id), "r-%d", n);
		fl->posted[n] = mono_ms();
		if (h_post(&fl->poster->c, &mesh, &fl->poster->a, "room9", id, id, NULL) != 0)
			fl->failed++;
		atomic_store(&fl->sent, n + 1);
		next += RESTART_EVERY_MS;
		if (next > mono_ms())
			h_nap((int)(next - mono_ms()));
	}
	return NULL;
}

/*
 * Issue 42: "A planned stop hands back what it holds. On SIGTERM, whatever
 * the fan-out and the reader have fetched but not finished is handed back
 * to the broker (NAK) before the lease is released, so the next daemon
 * takes it at once instead of after the ack wait." Test: "SIGTERM during a
 * steady flow: no post of the flow surfaces later than 2 s after the next
 * daemon's start." 10 members surface all along; 8 posts a second from a
 * thread of its own (the flow); the daemon is stopped (SIGTERM)
 * after the 24th and started again at once while the flow goes on. Every post surfaces at
 * every member, and every post published before the new daemon's workers
 * are all connected (its status says so) surfaces no later than 2 s after
 * that. Without the hand-back, the posts the old daemon's last pull request
 * took surfaced 4.7-4.9 s after it.
 */
static void
test_a_planned_restart_hands_back_what_it_held(void **state)
{
	static struct surfacer sf[RESTART_MEMBERS];
	static int64_t posted[RESTART_POSTS];
	struct member poster;
	char name[32], err[1024];
	int64_t t_start = 0, worst = 0;
	int worst_n = -1, worst_m = -1, missing = 0;

	(void)state;
	member_add(&poster, "rposter", "room9");
	member_join(&poster, "room9", 1);
	for (int i = 0; i < RESTART_MEMBERS; i++) {
		snprintf(name, sizeof(name), "rmember%d", i);
		member_add(&sf[i].m, name, "room9");
		member_join(&sf[i].m, "room9", 1);
		if (h_dlv_attach(sf[i].m.c.nc, sf[i].m.c.creds.jwt, &mesh, &sf[i].m.a, &sf[i].pl, err,
		    sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_int_equal(pthread_create(&sf[i].th, NULL, restart_surface, &sf[i]), 0);
	}
	/* The flow goes on from its own thread while the daemon stops and
	 * starts: posts land while the old daemon's requests are still open. */
	struct restart_flow fl = { .poster = &poster, .posted = posted };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, restart_flow_main, &fl), 0);
	while (atomic_load(&fl.sent) <= RESTART_STOP_AT)
		h_nap(5);
	h_daemon_stop(&dmn, 10000);
	assert_int_equal(h_daemon_start(&mesh, &dmn, NULL), 0);
	/* From when the new daemon's workers are all connected: how long a
	 * start takes is another matter (a loaded machine, ASan). */
	assert_int_equal(h_daemon_wait_connected(&dmn, 20000), 0);
	t_start = mono_ms();
	pthread_join(th, NULL);
	assert_int_equal(fl.failed, 0);
	/* Every post due by the later of its publish and the new start, plus
	 * 2 s; watched 10 s past the last one (the ack wait is far longer). */
	int64_t last_due = posted[RESTART_POSTS - 1] + 2000;
	for (int64_t until = last_due + 10000; mono_ms() < until; h_nap(200)) {
		missing = 0;
		for (int i = 0; i < RESTART_MEMBERS; i++)
			for (int n = 0; n < RESTART_POSTS; n++)
				missing += atomic_load(&sf[i].at[n]) == 0;
		if (missing == 0)
			break;
	}
	for (int i = 0; i < RESTART_MEMBERS; i++) {
		atomic_store(&sf[i].stop, true);
		pthread_join(sf[i].th, NULL);
		/* The flow the restart cut: every post published before the new
		 * daemon's workers connected, measured from then. Those after
		 * are the data path's ordinary latency (ASan, a loaded machine):
		 * they must surface, with no bound here. */
		for (int n = 0; n < RESTART_POSTS && posted[n] <= t_start; n++) {
			int64_t at = atomic_load(&sf[i].at[n]);
			int64_t late = at == 0 ? INT64_MAX : at - t_start;
			if (late > worst)
				worst = late, worst_n = n, worst_m = i;
		}
		pull_close(&sf[i].pl);
		h_close(&sf[i].m.c);
	}
	h_close(&poster.c);
	printf("• SIGTERM after post %d, started again at once: %d of %d copies missing; of the "
	    "posts before the new daemon's workers connected, the latest surfaced %lld ms after "
	    "that (post %d, member %d)\n", RESTART_STOP_AT,
	    missing, RESTART_MEMBERS * RESTART_POSTS, worst == INT64_MAX ? -1LL : (long long)worst,
	    worst_n, worst_m);
	assert_int_equal(h_daemon_ready(&dmn, 20000, "fan-out bound", "reader bound", NULL), 0);
	assert_int_equal(missing, 0);
	assert_true(worst <= 2000);
}

/*
 * Issue 42: "The broker back means copying back. After the broker (or a
 * cluster node) accepts connections again, every worker's connection and
 * the supervisor's resident one reconnect and copying resumes within 1 s".
 * Test: "broker SIGKILLed and restarted: the first post after its restart
 * surfaces <= 1 s after the broker accepts connections (timestamps, not
 * poll counts)." 4 members surfacing all along; the broker killed, started
 * again on its store 1 s later; the poster publishes as soon as its own
 * connection is back; when that first post surfaced at the last member is
 * measured from when the broker took connections again.
 */
static void
test_the_broker_back_means_copying_back(void **state)
{
	static struct surfacer sf[4];
	struct member poster;
	char name[32], err[1024];
	int64_t t_back, t_posted = 0, worst = 0;

	(void)state;
	/* Connections that reconnect (the URL given), as a live agent's do. */
	if (h_member_add(&mesh, "bposter", "room8", mesh.url, &poster, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	member_join(&poster, "room8", 1);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "bmember%d", i);
		if (h_member_add(&mesh, name, "room8", mesh.url, &sf[i].m, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		member_join(&sf[i].m, "room8", 1);
		if (h_dlv_attach(sf[i].m.c.nc, sf[i].m.c.creds.jwt, &mesh, &sf[i].m.a, &sf[i].pl, err,
		    sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_int_equal(pthread_create(&sf[i].th, NULL, restart_surface, &sf[i]), 0);
	}
	/* A post before: every member surfaces it, all is bound. */
	assert_int_equal(h_post(&poster.c, &mesh, &poster.a, "room8", "r-0", "r-0", NULL), 0);
	for (int64_t until = mono_ms() + WAIT_MS; mono_ms() < until; h_nap(20)) {
		int got = 0;
		for (int i = 0; i < 4; i++)
			got += atomic_load(&sf[i].at[0]) != 0;
		if (got == 4)
			break;
	}
	assert_int_equal(h_broker_kill(&mesh), 0);
	h_nap(1000);
	assert_int_equal(h_broker_start(&mesh), 0);
	t_back = mono_ms();
	/* The first post the poster's connection gets through. */
	for (int64_t until = t_back + 20000; t_posted == 0 && mono_ms() < until; h_nap(10))
		if (h_post(&poster.c, &mesh, &poster.a, "room8", "r-1", "r-1", NULL) == 0)
			t_posted = mono_ms();
	assert_true(t_posted > 0);
	for (int64_t until = t_back + 20000; mono_ms() < until; h_nap(20)) {
		int got = 0;
		for (int i = 0; i < 4; i++)
			got += atomic_load(&sf[i].at[1]) != 0;
		if (got == 4)
			break;
	}
	for (int i = 0; i < 4; i++) {
		atomic_store(&sf[i].stop, true);
		pthread_join(sf[i].th, NULL);
		int64_t at = atomic_load(&sf[i].at[1]);
		int64_t late = at == 0 ? INT64_MAX : at - t_back;
		if (late > worst)
			worst = late;
		pull_close(&sf[i].pl);
		h_close(&sf[i].m.c);
	}
	h_close(&poster.c);
	printf("• the broker back (killed, started 1 s later): the poster published %lld ms after, "
	    "the last member surfaced it %lld ms after\n", (long long)(t_posted - t_back),
	    worst == INT64_MAX ? -1LL : (long long)worst);
	assert_true(worst <= 1000);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_member_receives_one_frame),
		cmocka_unit_test(test_join_and_leave_cursors_bound_what_is_surfaced),
		cmocka_unit_test(test_idless_posts_both_surface_and_one_id_surfaces_once),
		cmocka_unit_test(test_live_mention_reaches_the_unique_authorized_peer),
		cmocka_unit_test(test_poison_posts_never_stop_the_loop),
		cmocka_unit_test(test_a_broker_that_forgot_its_consumers_acks_surfaces_nothing_twice),
		cmocka_unit_test(test_a_planned_restart_hands_back_what_it_held),
		cmocka_unit_test(test_the_broker_back_means_copying_back),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
