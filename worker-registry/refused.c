/*
 * Who the registry refuses most on the agents' rail (issue 29's
 * per-principal refusals): every caller refused past its share, answered or
 * shed, counted by "<owner>.<actor>"; the first REFUSED_TRACKED callers by
 * name, any after them as "other" (a hostile agent with many identities
 * cannot grow the table). Every REFUSED_REPORT_MS the ten most refused go
 * to the supervisor (IPC_REFUSALS), when they changed. Registry worker.
 */
#include "worker-registry/registry_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/strmap.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct strmap counts;
static bool ready;
static uint64_t total, reported = UINT64_MAX;

void
refused_note(const struct rail_caller *c)
{
	char key[IPC_PRINCIPAL_MAX];

	snprintf(key, sizeof(key), "%s.%s", c->owner, c->actor);
	pthread_mutex_lock(&mu);
	if (!ready) {
		strmap_init(&counts);
		ready = true;
	}
	if (counts.count >= REFUSED_TRACKED && strmap_count_of(&counts, key) == 0)
		snprintf(key, sizeof(key), "other");
	if (strmap_count(&counts, key, 1) >= 0)
		total++;
	pthread_mutex_unlock(&mu);
}

/* The top ten so far, most first (ties by name). */
static int
keep_top(const char *key, void *value, void *arg)
{
	struct ipc_refusals *r = arg;
	uint64_t n = (uint64_t)(uintptr_t)value;
	uint32_t at = r->n;

	while (at > 0 && (r->top[at - 1].count < n || (r->top[at - 1].count == n &&
	    strcmp(r->top[at - 1].principal, key) > 0)))
		at--;
	if (at >= IPC_REFUSALS_TOP)
		return 0;
	uint32_t last = r->n < IPC_REFUSALS_TOP ? r->n : IPC_REFUSALS_TOP - 1;
	memmove(&r->top[at + 1], &r->top[at], (last - at) * sizeof(r->top[0]));
	snprintf(r->top[at].principal, sizeof(r->top[at].principal), "%s", key);
	r->top[at].count = n;
	if (r->n < IPC_REFUSALS_TOP)
		r->n++;
	return 0;
}

void
refused_report(void)
{
	static int64_t last;
	struct ipc_refusals r;

	if (mono_ms() - last < REFUSED_REPORT_MS)
		return;
	last = mono_ms();
	memset(&r, 0, sizeof(r));
	pthread_mutex_lock(&mu);
	if (!ready || total == reported) {
		pthread_mutex_unlock(&mu);
		return;
	}
	strmap_each(&counts, keep_top, &r);
	reported = total;
	pthread_mutex_unlock(&mu);
	worker_send(IPC_REFUSALS, &r, sizeof(r));
}

void
refused_free(void)
{
	pthread_mutex_lock(&mu);
	if (ready)
		strmap_clear(&counts, NULL);
	ready = false;
	pthread_mutex_unlock(&mu);
}
