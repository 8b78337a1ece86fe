/*
 * The loop of a role that drives one pull consumer (lib/nats/pull.h):
 * binding it while the broker is not ready, asking back what a lost node
 * carried, and fetching batches for as long as the worker serves. Worker
 * runtime: paced by worker_serving(), worker_wait_open() and worker_nap().
 */
#ifndef COTAL_PULLLOOP_H
#define COTAL_PULLLOOP_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/nats/pull.h"

/*
 * Set up (retrying while the broker is not ready; a permission denial or a
 * consumer with other settings is fatal, the supervisor's backoff paces the
 * retries), then fetch batches and hand each to batch() for as long as the
 * worker serves.
 */
struct pull_loop {
	const char *what;                  /* "fan-out", "reader": log lines */
	int (*setup)(char *err, size_t errlen);
	void (*teardown)(void);
	bool (*may_fetch)(void);           /* NULL: always; false: return */
	/* May keep the list's messages (moving them out of it) and finish
	 * with them later: holding() says whether a batch is still in flight,
	 * finish() ends it (nothing when none is). Both NULL for a role that
	 * finishes each batch within batch(). With one held, a fetch takes
	 * only what has come already; a fetch that finds nothing or fails, a
	 * recovery and a stop finish it first, and a quiesce once the fence
	 * opens again (its acks refused, its messages asked back). */
	void (*batch)(natsMsgList *list);
	void (*finish)(void);
	bool (*holding)(void);
	struct puller *pull;
	int batch_max;
	const char *bound;                 /* what setup bound, for the log */
};
void pull_loop_run(const struct pull_loop *l);

#endif
