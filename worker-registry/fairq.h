/*
 * A fair queue for the ctl.delivery rail (issue 28): the requests of each
 * caller wait in a queue of their own, and callers are served in turn, one
 * request each (round robin over the callers that have requests waiting).
 * A caller has at most caller_serving requests in service at a time: past
 * that its line waits outside the turn until fairq_done. A caller is bounded in how many
 * requests and how many bytes it may have waiting, and the whole queue in
 * both too; a push past a bound is refused and says which bound. A caller
 * that floods the rail therefore waits behind itself and holds at most
 * caller_serving serving threads: any other caller's request is served after at most one
 * request of every other waiting caller.
 *
 * Pure logic over lib/strmap; not thread-safe (the registry holds a lock).
 * Includes lib/ only.
 */
#ifndef COTAL_FAIRQ_H
#define COTAL_FAIRQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/strmap.h"

struct fairq_limits {
	int caller_max;           /* requests one caller may have waiting */
	int caller_serving;       /* ... and in service at once (>= 1) */
	size_t caller_bytes;      /* bytes one caller may have waiting */
	int total_max;            /* requests waiting in all */
	size_t total_bytes;       /* bytes waiting in all */
	int refusals_per_s;       /* refusals answered a second, per caller past its share
				   * (and for the whole queue when it is full) */
};

struct fairq_flow;

struct fairq {
	struct fairq_limits lim;
	struct strmap flows;          /* caller -> struct fairq_flow, while it waits */
	struct fairq_flow *turn_head; /* callers with requests, in serving order */
	struct fairq_flow *turn_tail;
	int n;
	size_t bytes;
	int64_t refusal_second;       /* the whole queue's refusal pacing (FAIRQ_FULL, _BYTES) */
	int refusals;
};

enum fairq_verdict {
	FAIRQ_OK,
	FAIRQ_CALLER_FULL,  /* the caller has caller_max requests waiting */
	FAIRQ_CALLER_BYTES, /* ... or its waiting bytes would pass caller_bytes */
	FAIRQ_FULL,         /* the queue has total_max requests waiting */
	FAIRQ_BYTES,        /* ... or its bytes would pass total_bytes */
	FAIRQ_NOMEM,
};

void fairq_init(struct fairq *q, const struct fairq_limits *lim);
/* Would a push of bytes by caller be taken? (FAIRQ_OK or the bound.) */
enum fairq_verdict fairq_admits(const struct fairq *q, const char *caller, size_t bytes);
/* Queue item for caller: FAIRQ_OK, or the bound that refuses it (the item
 * then stays the caller's). */
enum fairq_verdict fairq_push(struct fairq *q, const char *caller, void *item, size_t bytes);
/*
 * A push by caller was refused with v at now_ms (monotonic): may the
 * refusal be answered? At most refusals_per_s a second per caller past its
 * share, and FAIRQ_REFUSAL_CALLERS times that for all refusals together;
 * past that the request is shed unanswered and the caller counts it. A
 * flood then costs the rail no reply per request.
 */
#define FAIRQ_REFUSAL_CALLERS 4
bool fairq_refusal_due(struct fairq *q, const char *caller, enum fairq_verdict v, int64_t now_ms);
/* The next item in turn, or NULL when no caller's turn is due (nothing
 * waits, or only behind a request in service). */
void *fairq_pop(struct fairq *q);
/* An item of caller that fairq_pop gave has been served: its next, if it
 * was held back, joins the line (true then). */
bool fairq_done(struct fairq *q, const char *caller);
/* Is a caller's turn due (would fairq_pop give an item)? */
bool fairq_ready(const struct fairq *q);
/* Free everything; free_item (may be NULL) on each waiting item. */
void fairq_clear(struct fairq *q, void (*free_item)(void *));
/* How many callers have requests waiting or in service. */
size_t fairq_callers(const struct fairq *q);

#endif
