/* The fence of a worker: see fence.h. */
#include "worker/fence.h"

#include <errno.h>
#include <time.h>

#include "lib/clock.h"

void
fence_init(struct fence *f)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->drained, &ca);
	pthread_condattr_destroy(&ca);
	f->epoch = 1;
	f->quiesced = false;
	f->inflight = 0;
}

void
fence_destroy(struct fence *f)
{
	pthread_cond_destroy(&f->drained);
	pthread_mutex_destroy(&f->mu);
}

uint64_t
fence_ticket(struct fence *f)
{
	uint64_t t;

	pthread_mutex_lock(&f->mu);
	t = f->epoch;
	pthread_mutex_unlock(&f->mu);
	return t;
}

bool
fence_begin(struct fence *f, uint64_t ticket)
{
	bool ok;

	pthread_mutex_lock(&f->mu);
	ok = !f->quiesced && ticket == f->epoch;
	if (ok)
		f->inflight++;
	pthread_mutex_unlock(&f->mu);
	return ok;
}

void
fence_done(struct fence *f)
{
	pthread_mutex_lock(&f->mu);
	if (f->inflight > 0 && --f->inflight == 0)
		pthread_cond_broadcast(&f->drained);
	pthread_mutex_unlock(&f->mu);
}

void
fence_quiesce(struct fence *f)
{
	pthread_mutex_lock(&f->mu);
	f->quiesced = true;
	f->epoch++;
	pthread_mutex_unlock(&f->mu);
}

bool
fence_wait_drained(struct fence *f, int timeout_ms)
{
	struct timespec until = deadline_in_ms(CLOCK_MONOTONIC, timeout_ms);
	bool drained;

	pthread_mutex_lock(&f->mu);
	while (f->inflight > 0)
		if (pthread_cond_timedwait(&f->drained, &f->mu, &until) == ETIMEDOUT)
			break;
	drained = f->inflight == 0;
	pthread_mutex_unlock(&f->mu);
	return drained;
}

void
fence_resume(struct fence *f)
{
	pthread_mutex_lock(&f->mu);
	f->quiesced = false;
	pthread_mutex_unlock(&f->mu);
}

bool
fence_is_quiesced(struct fence *f)
{
	bool q;

	pthread_mutex_lock(&f->mu);
	q = f->quiesced;
	pthread_mutex_unlock(&f->mu);
	return q;
}
