/* What a worker acked on its pull consumer (acked.h). */
#include "worker/acked.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"

static bool
target_last(struct acked *a, uint64_t *last)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;

	if (js_GetStreamInfo(&si, a->js, a->target, NULL, &jerr) != NATS_OK)
		return false;
	*last = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return true;
}

static void
forget(struct acked *a)
{
	seqset_clear(&a->seqs);
	a->ts_high = 0;
	a->epoch++;
}

/*
 * Does the target still reach what our work got there? When it ends below
 * (a store that lost what it acknowledged, or was made anew), the memory is
 * forgotten. False when the target cannot be asked.
 */
static bool
target_check(struct acked *a)
{
	uint64_t last = 0;

	/* Work published and not counted yet may be what the target lost:
	 * checked once it is counted. */
	if (a->unstored > 0 || !target_last(a, &last))
		return false;
	if (last < a->target_high) {
		log_warnx("%s ends at sequence %" PRIu64 ", below the %" PRIu64 " our work got "
		    "there: the store lost what it had acknowledged, or was made anew; what was "
		    "acked on %s is done again when handed over again", a->target, last,
		    a->target_high, a->stream);
		forget(a);
	}
	a->target_high = last;
	return true;
}

/*
 * The consumer's ack floor as the broker has it, once the target is seen
 * to reach at least as far as it did then. A broker that forgot reports
 * less: the set keeps the higher. At open, the time of its last ack bounds
 * when the messages below it were stored (acked by the workers before this
 * one); later the floor follows our own acks, whose times we know, and a
 * broker that restarted would report the time of acks made since. True
 * when the target was checked.
 */
static bool
floor_ask(struct acked *a, bool at_open)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	a->floor_asked_ms = mono_ms();
	if (js_GetConsumerInfo(&ci, a->js, a->stream, a->consumer, NULL, &jerr) != NATS_OK)
		return false; /* asked again later */
	uint64_t floor = ci->AckFloor.Stream;
	int64_t last_ack = ci->AckFloor.Last;
	jsConsumerInfo_Destroy(ci);
	if (!target_check(a))
		return false;
	seqset_raise(&a->seqs, floor);
	if (at_open && last_ack > a->ts_high)
		a->ts_high = last_ack;
	return true;
}

void
acked_open(struct acked *a, natsConnection *nc, jsCtx *js, const char *stream,
	   const char *consumer, const char *target)
{
	memset(a, 0, sizeof(*a));
	if ((size_t)snprintf(a->stream, sizeof(a->stream), "%s", stream) >= sizeof(a->stream) ||
	    (size_t)snprintf(a->consumer, sizeof(a->consumer), "%s", consumer) >=
	    sizeof(a->consumer) ||
	    (size_t)snprintf(a->target, sizeof(a->target), "%s", target) >= sizeof(a->target)) {
		log_warnx("%s: a name too long to remember what was acked; a message handed over "
		    "again is handled again", stream);
		memset(a, 0, sizeof(*a));
		return;
	}
	a->nc = nc;
	a->js = js;
	a->reconnects = conn_reconnects(nc);
	/* Not checked when the floor cannot be asked: acked_check does it. */
	a->verified = floor_ask(a, true);
}

void
acked_close(struct acked *a)
{
	seqset_free(&a->seqs);
	memset(a, 0, sizeof(*a));
}

bool
acked_check(struct acked *a)
{
	if (a->js == NULL)
		return false;
	uint64_t now = conn_reconnects(a->nc);
	if (now != a->reconnects) {
		a->reconnects = now;
		a->verified = false;
		a->epoch++;
	}
	if (!a->verified)
		a->verified = target_check(a);
	return a->verified;
}

bool
acked_unchanged(const struct acked *a)
{
	return a->js != NULL && a->verified && conn_reconnects(a->nc) == a->reconnects;
}

uint64_t
acked_epoch(const struct acked *a)
{
	return a->epoch;
}

bool
acked_still(const struct acked *a, uint64_t epoch)
{
	return acked_unchanged(a) && a->epoch == epoch;
}

void
acked_tick(struct acked *a)
{
	if (a->js == NULL || !acked_check(a))
		return;
	if (mono_ms() - a->floor_asked_ms >= ACKED_FLOOR_EVERY_MS)
		floor_ask(a, false);
}

void
acked_put(struct acked *a, uint64_t seq, int64_t ts_ns)
{
	if (a->js == NULL)
		return; /* not opened: remembers nothing */
	if (seqset_add(&a->seqs, seq) != 0 && !a->memory_short) {
		log_warnx("out of memory for what was acked on %s: a message handed over again "
		    "is handled again", a->stream);
		a->memory_short = true;
	}
	if (ts_ns > a->ts_high)
		a->ts_high = ts_ns;
}

void
acked_publishing(struct acked *a)
{
	a->unstored++;
}

bool
acked_due(const struct acked *a)
{
	return a->js != NULL && (!acked_unchanged(a) ||
	    mono_ms() - a->floor_asked_ms >= ACKED_FLOOR_EVERY_MS);
}

void
acked_stored(struct acked *a, uint64_t target_seq)
{
	if (a->unstored > 0)
		a->unstored--;
	if (target_seq > a->target_high)
		a->target_high = target_seq;
}

static bool
acked_before(struct acked *a, uint64_t seq, int64_t ts_ns)
{
	if (a->js == NULL || !a->verified || ts_ns <= 0 || !seqset_has(&a->seqs, seq))
		return false;
	if (ts_ns <= a->ts_high)
		return true;
	log_warnx("%s sequence %" PRIu64 " came back as another message (stored after anything "
	    "acked): the stream lost its end and gives its sequences out again; what was acked "
	    "on it is done again when handed over again", a->stream, seq);
	forget(a);
	return false;
}

bool
acked_again(struct acked *a, struct acked_batch *b, uint64_t seq, int64_t ts_ns)
{
	if (!acked_before(a, seq, ts_ns))
		return false;
	if (b->n == 0 || seq < b->lo)
		b->lo = seq;
	if (seq > b->hi)
		b->hi = seq;
	b->n++;
	return true;
}

void
acked_say(struct acked *a, const char *what, const struct acked_batch *b)
{
	if (a->js == NULL || b->n == 0)
		return;
	a->unsaid += (uint64_t)b->n;
	if (a->said_ms != 0 && mono_ms() - a->said_ms < ACKED_LOG_EVERY_MS)
		return;
	log_warnx("%" PRIu64 " %s came again that were acked before (%s seq %" PRIu64 "..%" PRIu64
	    " in the last batch): the broker's `%s` consumer lost their acks; their work is "
	    "stored, they are acked again without doing it twice", a->unsaid, what, a->stream,
	    b->lo, b->hi, a->consumer);
	a->unsaid = 0;
	a->said_ms = mono_ms();
}
