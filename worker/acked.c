/* What a worker acked on its pull consumer (acked.h). */
#include "worker/acked.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"

static void
floor_ask(struct acked *a)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	a->floor_asked_ms = mono_ms();
	if (js_GetConsumerInfo(&ci, a->js, a->stream, a->consumer, NULL, &jerr) != NATS_OK)
		return; /* asked again later */
	/* A broker that forgot reports less: the set keeps the higher. */
	seqset_raise(&a->seqs, ci->AckFloor.Stream);
	jsConsumerInfo_Destroy(ci);
}

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

void
acked_open(struct acked *a, jsCtx *js, const char *stream, const char *consumer,
	   const char *target)
{
	uint64_t last = 0;

	memset(a, 0, sizeof(*a));
	seqset_init(&a->seqs);
	a->js = js;
	snprintf(a->stream, sizeof(a->stream), "%s", stream);
	snprintf(a->consumer, sizeof(a->consumer), "%s", consumer);
	snprintf(a->target, sizeof(a->target), "%s", target);
	if (target_last(a, &last))
		a->target_high = last;
	floor_ask(a);
}

void
acked_close(struct acked *a)
{
	seqset_free(&a->seqs);
	memset(a, 0, sizeof(*a));
}

void
acked_tick(struct acked *a)
{
	if (a->js != NULL && mono_ms() - a->floor_asked_ms >= ACKED_FLOOR_EVERY_MS)
		floor_ask(a);
}

void
acked_put(struct acked *a, uint64_t seq)
{
	if (a->js == NULL)
		return; /* not opened: remembers nothing */
	if (seqset_add(&a->seqs, seq) != 0 && !a->memory_short) {
		log_warnx("out of memory for what was acked on %s: a message handed over again "
		    "is handled again", a->stream);
		a->memory_short = true;
	}
}

void
acked_stored(struct acked *a, uint64_t target_seq)
{
	if (target_seq > a->target_high)
		a->target_high = target_seq;
}

bool
acked_before(const struct acked *a, uint64_t seq)
{
	return a->js != NULL && seqset_has(&a->seqs, seq);
}

bool
acked_target_intact(struct acked *a)
{
	uint64_t last = 0;

	if (!target_last(a, &last))
		return false;
	if (last >= a->target_high)
		return true;
	log_warnx("%s ends at sequence %" PRIu64 ", below the %" PRIu64 " our work got there: the "
	    "store lost what it had acknowledged, or was made anew; what was acked on %s is "
	    "handled again when handed over again", a->target, last, a->target_high, a->stream);
	seqset_clear(&a->seqs);
	a->target_high = last;
	return false;
}

void
acked_say(struct acked *a, const char *what, int n, uint64_t lo, uint64_t hi)
{
	a->unsaid += (uint64_t)n;
	if (a->said_ms != 0 && mono_ms() - a->said_ms < ACKED_LOG_EVERY_MS)
		return;
	log_warnx("%" PRIu64 " %s came again that were acked before (%s seq %" PRIu64 "..%" PRIu64
	    " in the last batch): the broker's `%s` consumer lost their acks; their work is "
	    "stored, they are acked again without doing it twice", a->unsaid, what, a->stream,
	    lo, hi, a->consumer);
	a->unsaid = 0;
	a->said_ms = mono_ms();
}
