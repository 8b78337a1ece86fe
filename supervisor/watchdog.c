/* The broker watchdog's verdicts (see watchdog.h). */
#include "supervisor/watchdog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int
parse_ms(const char *name, const char *v, int64_t *out, char *err, size_t errlen)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || n < 1 || n > 24LL * 3600 * 1000) {
		snprintf(err, errlen, "%s=\"%.64s\": expected whole milliseconds from 1 to 86400000",
		    name, v);
		return -1;
	}
	*out = n;
	return 0;
}

int
watchdog_config(const char *window_env, const char *backstop_env, int64_t *window,
		int64_t *backstop, char *err, size_t errlen)
{
	bool have_backstop = backstop_env != NULL && *backstop_env != '\0';

	*window = WATCHDOG_WINDOW_MS;
	if (window_env != NULL && *window_env != '\0' &&
	    parse_ms(WATCHDOG_ENV_WINDOW, window_env, window, err, errlen) != 0)
		return -1;
	*backstop = WATCHDOG_BACKSTOP_FACTOR * *window;
	if (have_backstop &&
	    parse_ms(WATCHDOG_ENV_BACKSTOP, backstop_env, backstop, err, errlen) != 0)
		return -1;
	/* "four times the window by default and never less than it" */
	if (*backstop < *window)
		*backstop = *window;
	return 0;
}

void
watchdog_init(struct watchdog *w, int64_t window_ms, int64_t backstop_ms)
{
	*w = (struct watchdog){ .window_ms = window_ms, .backstop_ms = backstop_ms };
}

void
watchdog_disconnected(struct watchdog *w, unsigned source, int64_t mono, int64_t wall)
{
	w->sources |= source;
	if (w->down)
		return;
	w->down = true;
	w->down_at = mono;
	w->down_wall = wall;
	w->stalled_ms = 0;
}

void
watchdog_reconnected(struct watchdog *w, unsigned source)
{
	w->sources &= ~source;
	if (w->sources != 0)
		return;
	w->down = false;
	w->stalled_ms = 0;
}

bool
watchdog_resident_down(const struct watchdog *w)
{
	return (w->sources & WATCHDOG_RESIDENT) != 0;
}

void
watchdog_busy(struct watchdog *w, int64_t mono)
{
	if (w->last_tick != 0 && mono > w->last_tick)
		w->last_tick = mono - WATCHDOG_TICK_MS < w->last_tick ? w->last_tick :
		    mono - WATCHDOG_TICK_MS;
}

enum watchdog_verdict
watchdog_tick(struct watchdog *w, int64_t mono, int64_t wall)
{
	int64_t late = w->last_tick != 0 ? mono - w->last_tick - WATCHDOG_TICK_MS : 0;

	w->last_tick = mono;
	if (!w->down)
		return WATCHDOG_OK;
	/* The loop ran late: the daemon was starved or stopped, not the
	 * broker gone for that long. Only what overlaps the outage counts. */
	if (late > 0) {
		int64_t since = mono - w->down_at;
		w->stalled_ms += late < since ? late : since;
	}
	if (wall - w->down_wall >= w->backstop_ms)
		return WATCHDOG_BACKSTOP;
	if (mono - w->down_at - w->stalled_ms >= w->window_ms)
		return WATCHDOG_GONE;
	return WATCHDOG_OK;
}
