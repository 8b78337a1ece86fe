/*
 * worker-fanout: how far the fan-out is ahead of the reader. Runs in the
 * fan-out process; asks the broker about INBOX and its `reader` consumer.
 *
 * INBOX_<s> keeps at most 1000 entries per member (WIRE.md §3, discard
 * old): a member whose store receives more than that before the reader has
 * handled them would lose the oldest. Every post adds at most one entry per
 * member, so the fan-out stays at most FANOUT_MAX_LEAD posts ahead of the
 * reader's ack floor; with a batch on top that is below 1000. The floor, not
 * what the reader has fetched: a reader killed with a batch in hand leaves
 * it unacked until the ack wait runs out, and the store must still hold it
 * then.
 */
#include "worker-fanout/lead.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "worker/worker.h"

#define FANOUT_MAX_LEAD 640
#define LEAD_RING 64              /* batches remembered for the lead */
#define LEAD_POLL_MS 20           /* the reader's progress, asked this often */
#define LEAD_LOG_EVERY_MS 10000

static struct {
	jsCtx *js;
	const char *inbox;

	/* Batches copied that the reader may not have acked yet: their
	 * highest INBOX sequence and post count. */
	struct { uint64_t seq; int posts; } lead[LEAD_RING];
	int lead_head, lead_n, lead_posts;
} P;

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
lead_settle(uint64_t floor)
{
	while (P.lead_n > 0 && P.lead[P.lead_head].seq <= floor) {
		P.lead_posts -= P.lead[P.lead_head].posts;
		P.lead_head = (P.lead_head + 1) % LEAD_RING;
		P.lead_n--;
	}
}

/* Wait while the reader is too far behind; false when the loop must stop. */
bool
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

/* ---- the fan-out's calls ---- */

void
lead_open(jsCtx *js, const char *inbox)
{
	jsStreamInfo *si = NULL;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	uint64_t last = 0, floor = 0;

	lead_close();
	P.js = js;
	P.inbox = inbox;
	/* A fan-out that starts does not know what its predecessor copied
	 * beyond the reader's ack floor: it counts everything INBOX holds
	 * past the floor as a full lead, so it first waits for the reader to
	 * handle it. */
	if (js_GetStreamInfo(&si, js, inbox, NULL, &jerr) == NATS_OK) {
		last = si->State.LastSeq;
		jsStreamInfo_Destroy(si);
	}
	jerr = 0;
	if (js_GetConsumerInfo(&ci, js, inbox, "reader", NULL, &jerr) == NATS_OK) {
		floor = ci->AckFloor.Stream;
		jsConsumerInfo_Destroy(ci);
	}
	if (last > floor)
		lead_record(last, FANOUT_MAX_LEAD + 1);
}

void
lead_close(void)
{
	memset(&P, 0, sizeof(P));
}

void
lead_copied(uint64_t inbox_seq, int posts)
{
	lead_record(inbox_seq, posts);
}
