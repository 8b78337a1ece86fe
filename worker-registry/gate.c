/*
 * The gate between membership writes and inventories (the seed: "Either
 * way the read starts only after the writes already running have
 * finished", and "when the inventory request arrives with the lifecycle's
 * ACL row still allowing reads, it refuses every later durable join and
 * leave of that lifecycle from that moment, on that daemon process").
 *
 * A write takes a ticket when it enters; an inventory's mark is the next
 * ticket, so it waits for exactly the writes that entered before it. The
 * fence check and the ticket are taken under one lock, so a write either
 * entered before the mark (and is waited for) or sees the fence.
 */
#include "worker-registry/registry_int.h"

#include <stdlib.h>

#include "lib/log.h"

#define GATE_WRITES_MAX 64 /* writes in the gate at once: more than the ctl threads */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t left;
	uint64_t next;                    /* the next ticket */
	uint64_t active[GATE_WRITES_MAX]; /* tickets of the writes inside; 0 = free */
	struct strmap fenced;             /* lifecycles fenced by an inventory */
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, { 0 }, { 0 } }; /* an empty strmap is all zero */

static char fence_mark; /* the value of every fenced entry */

/* The process ends: the marks go with it, as the seed says they do. */
void
gate_reset(void)
{
	pthread_mutex_lock(&gate.mu);
	strmap_clear(&gate.fenced, NULL);
	pthread_mutex_unlock(&gate.mu);
}

bool
gate_enter(const char *lc, uint64_t *ticket)
{
	bool ok = false;

	pthread_mutex_lock(&gate.mu);
	for (;;) {
		if (strmap_get(&gate.fenced, lc) != NULL)
			break;
		for (int i = 0; i < GATE_WRITES_MAX && !ok; i++)
			if (gate.active[i] == 0) {
				gate.active[i] = *ticket = gate.next++;
				ok = true;
			}
		if (ok)
			break;
		pthread_cond_wait(&gate.left, &gate.mu);
	}
	pthread_mutex_unlock(&gate.mu);
	return ok;
}

void
gate_leave(uint64_t ticket)
{
	pthread_mutex_lock(&gate.mu);
	for (int i = 0; i < GATE_WRITES_MAX; i++)
		if (gate.active[i] == ticket)
			gate.active[i] = 0;
	pthread_cond_broadcast(&gate.left);
	pthread_mutex_unlock(&gate.mu);
}

uint64_t
gate_mark(const char *lc, bool fence)
{
	uint64_t mark;

	pthread_mutex_lock(&gate.mu);
	if (fence && strmap_get(&gate.fenced, lc) == NULL &&
	    strmap_put(&gate.fenced, lc, &fence_mark, NULL) != 0)
		fatalx("out of memory");
	mark = gate.next;
	pthread_mutex_unlock(&gate.mu);
	return mark;
}

static bool
entered_before(uint64_t mark)
{
	for (int i = 0; i < GATE_WRITES_MAX; i++)
		if (gate.active[i] != 0 && gate.active[i] < mark)
			return true;
	return false;
}

void
gate_wait(uint64_t mark)
{
	pthread_mutex_lock(&gate.mu);
	while (entered_before(mark))
		pthread_cond_wait(&gate.left, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

bool
gate_fenced(const char *lc)
{
	bool f;

	pthread_mutex_lock(&gate.mu);
	f = strmap_get(&gate.fenced, lc) != NULL;
	pthread_mutex_unlock(&gate.mu);
	return f;
}
