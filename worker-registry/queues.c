/*
 * Inside the registry worker: where requests wait between the rails'
 * callbacks and the serving threads. ctl.delivery waits in a fair queue
 * (fairq.h: one line per caller, callers in turn, each bounded in requests
 * and bytes); the admin rail in two FIFOs, its serial ops and its
 * inventories. Every queue is bounded; a push past a bound says which.
 */
#include "worker-registry/registry_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/log.h"

#include "worker-registry/fairq.h"

/* A FIFO of requests (the admin rail's). */
struct fifo {
	struct request *head, *tail;
	int n;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	union {
		struct fairq fair; /* Q_CTL */
		struct fifo fifo;  /* Q_ADMIN, Q_INVENTORY */
	};
} queues[Q_COUNT] = {
	[Q_CTL] = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER },
	[Q_ADMIN] = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER },
	[Q_INVENTORY] = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER },
};

static const struct fairq_limits ctl_limits = {
	.caller_max = REG_CALLER_WAITING, .caller_serving = REG_CALLER_SERVING,
	.caller_bytes = REG_CALLER_BYTES,
	.total_max = REG_QUEUE_MAX, .total_bytes = REG_QUEUE_BYTES,
	.refusals_per_s = REG_REFUSALS_PER_S,
};

static _Atomic bool running;

/* The refusals of the ctl.delivery bounds, made once. */
static struct {
	char *body;
	size_t len;
} refusals[FAIRQ_NOMEM];

static void
caller_key(const struct rail_caller *c, char *key, size_t len)
{
	snprintf(key, len, "%s.%s", c->owner, c->actor);
}

void
request_free(struct request *r)
{
	if (r == NULL)
		return;
	reg_request_free(&r->req, &r->args);
	free(r->body);
	free(r->reply);
	free(r);
}

static void
request_free_v(void *r)
{
	request_free(r);
}

void
queues_init(void)
{
	char text[CTL_WHY_MAX];

	fairq_init(&queues[Q_CTL].fair, &ctl_limits);
	for (int v = FAIRQ_CALLER_FULL; v < FAIRQ_NOMEM; v++) {
		switch (v) {
		case FAIRQ_CALLER_FULL:
			snprintf(text, sizeof(text), "delivery: %d of your requests are already "
			    "waiting on this rail; retry", REG_CALLER_WAITING);
			break;
		case FAIRQ_CALLER_BYTES:
			snprintf(text, sizeof(text), "delivery: your requests waiting on this rail "
			    "would pass %d bytes; retry", REG_CALLER_BYTES);
			break;
		case FAIRQ_FULL:
			snprintf(text, sizeof(text), "delivery: %d requests are already waiting on "
			    "this rail; retry", REG_QUEUE_MAX);
			break;
		default:
			snprintf(text, sizeof(text), "delivery: the requests waiting on this rail "
			    "would pass %d bytes; retry", REG_QUEUE_BYTES);
			break;
		}
		if ((refusals[v].body = ctl_reply_error(text, &refusals[v].len)) == NULL)
			fatalx("out of memory");
	}
}

bool
queue_refusal_due(const struct rail_caller *c, enum fairq_verdict v)
{
	char key[2 * IDENT_MAX + 2];
	bool due;

	caller_key(c, key, sizeof(key));
	pthread_mutex_lock(&queues[Q_CTL].mu);
	due = fairq_refusal_due(&queues[Q_CTL].fair, key, v, mono_ms());
	pthread_mutex_unlock(&queues[Q_CTL].mu);
	return due;
}

const char *
queue_refusal(enum fairq_verdict v, size_t *len)
{
	if (v <= FAIRQ_OK || v >= FAIRQ_NOMEM)
		fatalx("queue_refusal: verdict %d", (int)v);
	*len = refusals[v].len;
	return refusals[v].body;
}

enum fairq_verdict
queue_admits(enum reg_queue q, const struct rail_caller *c, size_t bytes)
{
	enum fairq_verdict v;
	char key[2 * IDENT_MAX + 2];

	if (q != Q_CTL)
		fatalx("queue_admits: queue %d", (int)q);
	caller_key(c, key, sizeof(key));
	pthread_mutex_lock(&queues[q].mu);
	v = fairq_admits(&queues[q].fair, key, bytes);
	pthread_mutex_unlock(&queues[q].mu);
	return v;
}

/* The queue's waiting requests into its gauge (waiting_ctl, _admin,
 * _inventory: the gauges in ipc.c's order), under its lock, at every push
 * and pop: a STATUS never shows a request served by its counters and still
 * waiting by the gauge (issue 43: sampled every 200 ms, it did). */
static void
gauge_locked(enum reg_queue q)
{
	worker_gauge((int)q, (uint64_t)(q == Q_CTL ? queues[q].fair.n : queues[q].fifo.n));
}

enum fairq_verdict
queue_push(enum reg_queue q, struct request *r, size_t bytes)
{
	enum fairq_verdict v = FAIRQ_OK;
	char key[2 * IDENT_MAX + 2];

	pthread_mutex_lock(&queues[q].mu);
	if (q == Q_CTL) {
		caller_key(&r->caller, key, sizeof(key));
		v = fairq_push(&queues[q].fair, key, r, bytes);
	} else if (queues[q].fifo.n >= REG_QUEUE_MAX) {
		v = FAIRQ_FULL;
	} else {
		struct fifo *f = &queues[q].fifo;
		r->next = NULL;
		if (f->tail != NULL)
			f->tail->next = r;
		else
			f->head = r;
		f->tail = r;
		f->n++;
	}
	if (v == FAIRQ_OK) {
		gauge_locked(q);
		pthread_cond_signal(&queues[q].cv);
	}
	pthread_mutex_unlock(&queues[q].mu);
	return v;
}

static bool
queue_empty(enum reg_queue q)
{
	return q == Q_CTL ? !fairq_ready(&queues[q].fair) : queues[q].fifo.head == NULL;
}

struct request *
queue_pop(enum reg_queue q, int ms)
{
	struct request *r = NULL;
	struct timespec ts = deadline_in_ms(CLOCK_REALTIME, ms);

	pthread_mutex_lock(&queues[q].mu);
	while (queue_empty(q) && atomic_load(&running))
		if (pthread_cond_timedwait(&queues[q].cv, &queues[q].mu, &ts) != 0)
			break;
	if (q == Q_CTL) {
		r = fairq_pop(&queues[q].fair);
	} else if ((r = queues[q].fifo.head) != NULL) {
		struct fifo *f = &queues[q].fifo;
		f->head = r->next;
		if (f->head == NULL)
			f->tail = NULL;
		f->n--;
	}
	if (r != NULL)
		gauge_locked(q);
	pthread_mutex_unlock(&queues[q].mu);
	return r;
}

void
queue_done(struct request *r)
{
	char key[2 * IDENT_MAX + 2];

	caller_key(&r->caller, key, sizeof(key));
	pthread_mutex_lock(&queues[Q_CTL].mu);
	if (fairq_done(&queues[Q_CTL].fair, key))
		pthread_cond_signal(&queues[Q_CTL].cv);
	pthread_mutex_unlock(&queues[Q_CTL].mu);
}

void
queues_run(bool run)
{
	atomic_store(&running, run);
	if (!run)
		for (int q = 0; q < Q_COUNT; q++) {
			pthread_mutex_lock(&queues[q].mu);
			pthread_cond_broadcast(&queues[q].cv);
			pthread_mutex_unlock(&queues[q].mu);
		}
}

bool
queues_running(void)
{
	return atomic_load(&running);
}

void
queues_drain(void)
{
	for (int q = 0; q < Q_COUNT; q++) {
		pthread_mutex_lock(&queues[q].mu);
		if (q == Q_CTL) {
			fairq_clear(&queues[q].fair, request_free_v);
		} else {
			struct request *r;
			while ((r = queues[q].fifo.head) != NULL) {
				queues[q].fifo.head = r->next;
				request_free(r);
			}
			queues[q].fifo.tail = NULL;
			queues[q].fifo.n = 0;
		}
		gauge_locked((enum reg_queue)q);
		pthread_mutex_unlock(&queues[q].mu);
	}
}
