/* Restart policy of the workers: see restart.h. */
#include "service/restart.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

const struct restart_policy restart_delivery = {
	.initial_ms = 100, .max_ms = 30 * 1000, .healthy_ms = 60 * 1000,
	.loop_window_ms = 5 * 60 * 1000, .loop_reported = true,
};

const struct restart_policy restart_timer = {
	.initial_ms = 5 * 1000, .max_ms = 300 * 1000, .healthy_ms = 60 * 1000,
	.loop_window_ms = 5 * 60 * 1000, .loop_reported = false,
};

const struct restart_policy restart_lane = {
	.initial_ms = 1000, .max_ms = 30 * 1000, .healthy_ms = 60 * 1000,
	.loop_window_ms = 5 * 60 * 1000, .loop_reported = false,
};

const struct restart_policy restart_metrics = {
	.initial_ms = 1000, .max_ms = 30 * 1000, .healthy_ms = 60 * 1000,
	.loop_window_ms = 5 * 60 * 1000, .loop_reported = false,
};

void
restart_init(struct restart_state *s, const struct restart_policy *p)
{
	memset(s, 0, sizeof(*s));
	s->next_ms = p->initial_ms;
}

void
restart_started(struct restart_state *s, int64_t now_ms)
{
	s->started_ms = now_ms;
}

int64_t
restart_after_death(struct restart_state *s, const struct restart_policy *p,
		    int64_t now_ms, bool *crash_loop)
{
	int64_t delay;

	*crash_loop = false;
	/* A worker that served a healthy while died of something new. */
	if (now_ms - s->started_ms >= p->healthy_ms)
		s->next_ms = p->initial_ms;
	delay = s->next_ms;
	s->next_ms = s->next_ms * 2 > p->max_ms ? p->max_ms : s->next_ms * 2;

	s->deaths[s->ndeaths % (RESTART_LOOP_MAX + 1)] = now_ms;
	s->ndeaths++;
	*crash_loop = restart_looping(s, p, now_ms);
	s->restarts++;
	return delay;
}

bool
restart_looping(const struct restart_state *s, const struct restart_policy *p, int64_t now_ms)
{
	unsigned inside = 0;

	for (unsigned i = 0; i < RESTART_LOOP_MAX + 1 && i < s->ndeaths; i++)
		if (now_ms - s->deaths[i] < p->loop_window_ms)
			inside++;
	return inside > RESTART_LOOP_MAX && p->loop_reported;
}

void
restart_cause(int wstatus, char *buf, size_t len)
{
	if (WIFEXITED(wstatus))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus)) {
		const char *abbrev = sigabbrev_np(WTERMSIG(wstatus));
		if (abbrev != NULL)
			snprintf(buf, len, "killed by SIG%s%s", abbrev,
			    WCOREDUMP(wstatus) ? " (core dumped)" : "");
		else
			snprintf(buf, len, "killed by signal %d", WTERMSIG(wstatus));
	} else
		snprintf(buf, len, "wait status 0x%x", wstatus);
}
