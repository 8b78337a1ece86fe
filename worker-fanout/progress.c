/*
 * worker-fanout: what the fan-out knows of the copies it made. Runs in the
 * fan-out process; asks the broker about CHAT's `fanout` and INBOX's
 * `reader` consumers and INBOX's state, nothing else.
 *
 * The lead. INBOX_<s> keeps at most 1000 entries per member (WIRE.md §3,
 * discard old): a member whose store receives more than that before the
 * reader has handled them would lose the oldest. Every post adds at most
 * one entry per member, so the fan-out stays at most FANOUT_MAX_LEAD posts
 * ahead of the reader's ack floor; with a batch on top that is below 1000.
 * The floor, not what the reader has fetched: a reader killed with a batch
 * in hand leaves it unacked until the ack wait runs out, and the store must
 * still hold it then.
 *
 * What was copied. A post is acked only once each of its copies is stored,
 * so a post acked before has its copies in INBOX. A broker that forgets the
 * `fanout` consumer's acks hands such posts over again: nats-server up to
 * 2.13 writes a consumer's state file in place, and a broker killed in the
 * middle of that write comes back with the consumer at CHAT's first post.
 * Copied again, a post whose copies INBOX no longer holds (1000 per member)
 * would reach its members twice: after a restart the broker's dedup knows
 * only the messages it still stores. So the fan-out remembers what it
 * acked (lib/seqset, raised to the consumer's ack floor as the broker
 * reports it), and a post it acked before is acked again without a copy,
 * as long as INBOX still reaches the highest sequence its copies got.
 */
#include "worker-fanout/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/seqset.h"
#include "worker/worker.h"

#define FANOUT_MAX_LEAD 640
#define LEAD_RING 64              /* batches remembered for the lead */
#define LEAD_POLL_MS 20           /* the reader's progress, asked this often */
#define LEAD_LOG_EVERY_MS 10000
#define FLOOR_ASK_EVERY_MS 5000   /* `fanout`'s ack floor, asked this often */

static struct {
	jsCtx *js;
	const char *chat, *inbox;

	/* Batches copied that the reader may not have acked yet: their
	 * highest INBOX sequence and post count. */
	struct { uint64_t seq; int posts; } lead[LEAD_RING];
	int lead_head, lead_n, lead_posts;

	struct seqset acked;      /* CHAT sequences acked */
	uint64_t inbox_high;      /* INBOX's highest sequence a copy got, or INBOX's last at set-up */
	int64_t floor_asked_ms;
	bool memory_short;        /* out of memory once: said so */
} P;

/* ---- the lead over the reader ---- */

static void
lead_record(uint64_t seq, int posts)
{
	if (seq == 0)
		return; /* nothing copied */
	if (P.lead_n == LEAD_RING) {
		/* Fold the oldest into its successor: the bound stays safe. */
		int i = P.lead_head, j = (i + 1) % LEAD_RING;
		P.lead[j].posts += P.lead[i].posts;
		P.lead_head = j;
		P.lead_n--;
	}
	int k = (P.lead_head + P.lead_n) % LEAD_RING;
	P.lead[k].seq = seq;
	P.lead[k].posts = posts;
	P.lead_n++;
	P.lead_posts += posts;
}

/* Forget the batches below the reader's ack floor. */
static void
lead_settle(uint64_t delivered)
{
	while (P.lead_n > 0 && P.lead[P.lead_head].seq <= delivered) {
		P.lead_posts -= P.lead[P.lead_head].posts;
		P.lead_head = (P.lead_head + 1) % LEAD_RING;
		P.lead_n--;
	}
}

/* Wait while the reader is too far behind; false when the loop must stop. */
static bool
lead_wait(void)
{
	static int64_t last_log;
	int64_t since = 0;
	uint64_t floor = 0;

	while (P.lead_posts > FANOUT_MAX_LEAD) {
		jsConsumerInfo *ci = NULL;
		jsErrCode jerr = 0;
		if (!worker_serving())
			return false;
		if (js_GetConsumerInfo(&ci, P.js, P.inbox, "reader", NULL, &jerr) == NATS_OK) {
			floor = ci->AckFloor.Stream;
			lead_settle(floor);
			jsConsumerInfo_Destroy(ci);
			if (P.lead_posts <= FANOUT_MAX_LEAD)
				break;
		}
		if (since == 0)
			since = mono_ms();
		if (mono_ms() - since > 5000 && mono_ms() - last_log > LEAD_LOG_EVERY_MS) {
			log_warnx("the reader is %d posts behind on %s; copying waits for it (its "
			    "ack floor is at %" PRIu64 ")", P.lead_posts, P.inbox, floor);
			last_log = mono_ms();
		}
		worker_nap(LEAD_POLL_MS);
	}
	return true;
}

/* ---- what was copied ---- */

/* `fanout`'s ack floor as the broker has it: posts acked by us or by a
 * fan-out before us. A broker that forgot reports less; the set keeps the
 * higher. */
static void
floor_ask(void)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	P.floor_asked_ms = mono_ms();
	if (js_GetConsumerInfo(&ci, P.js, P.chat, "fanout", NULL, &jerr) != NATS_OK)
		return; /* asked again later */
	seqset_raise(&P.acked, ci->AckFloor.Stream);
	jsConsumerInfo_Destroy(ci);
}

static bool
inbox_last(uint64_t *last)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;

	if (js_GetStreamInfo(&si, P.js, P.inbox, NULL, &jerr) != NATS_OK)
		return false;
	*last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return true;
}

void
progress_acked(uint64_t chat_seq)
{
	if (seqset_add(&P.acked, chat_seq) != 0 && !P.memory_short) {
		log_warnx("out of memory for the posts acked: one handed over again is copied "
		    "again");
		P.memory_short = true;
	}
}

bool
progress_acked_before(uint64_t chat_seq)
{
	return seqset_has(&P.acked, chat_seq);
}

bool
progress_store_intact(void)
{
	uint64_t last = 0;

	if (!inbox_last(&last))
		return false;
	if (last >= P.inbox_high)
		return true;
	log_warnx("%s ends at sequence %" PRIu64 ", below the %" PRIu64 " a copy of ours got: "
	    "the store lost what it had acknowledged, or was made anew; the posts acked so far "
	    "are copied again when handed over again", P.inbox, last, P.inbox_high);
	seqset_clear(&P.acked);
	P.inbox_high = last;
	return false;
}

/* ---- the fan-out's calls ---- */

void
progress_open(jsCtx *js, const char *chat, const char *inbox)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	uint64_t last = 0, floor = 0;

	progress_close();
	P.js = js;
	P.chat = chat;
	P.inbox = inbox;
	/* A fan-out that starts does not know what its predecessor copied
	 * beyond the reader's ack floor: it counts everything INBOX holds
	 * past the floor as a full lead, so it first waits for the reader to
	 * handle it. */
	if (inbox_last(&last))
		P.inbox_high = last;
	if (js_GetConsumerInfo(&ci, js, inbox, "reader", NULL, &jerr) == NATS_OK) {
		floor = ci->AckFloor.Stream;
		jsConsumerInfo_Destroy(ci);
	}
	if (last > floor)
		lead_record(last, FANOUT_MAX_LEAD + 1);
	floor_ask();
}

void
progress_close(void)
{
	seqset_free(&P.acked);
	memset(&P, 0, sizeof(P));
}

bool
progress_may_fetch(void)
{
	if (mono_ms() - P.floor_asked_ms >= FLOOR_ASK_EVERY_MS)
		floor_ask();
	return lead_wait();
}

void
progress_copied(uint64_t inbox_seq, int posts)
{
	if (inbox_seq > P.inbox_high)
		P.inbox_high = inbox_seq;
	lead_record(inbox_seq, posts);
}
