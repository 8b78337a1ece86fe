/*
 * The broker watchdog's configuration and verdicts (supervisor/watchdog.h).
 * The seed: "After a reachability check at start-up, the daemon watches the
 * broker only through its resident connection's events. It opens no other
 * connection to check the broker. A disconnect starts a clock, and a
 * reconnect stops it. When the time since the disconnect, less any time the
 * daemon's own event loop was stalled, reaches the window
 * (COTAL_DELIVERY_BROKER_GONE_MS, 15 seconds by default), the daemon logs
 * ✗ delivery: broker connection unavailable (broker unreachable), exiting
 * (coupled to the broker) and exits. Wall time since the disconnect also
 * has a backstop (COTAL_DELIVERY_BROKER_GONE_BACKSTOP_MS, four times the
 * window by default and never less than it). Reaching it logs ✗ delivery:
 * broker connection unavailable past backstop (broker unreachable),
 * exiting (coupled to the broker) and exits, however long the daemon was
 * stalled."
 *
 * The watchdog is pure: the tests drive it with hand-picked monotonic and
 * wall clocks and an event loop that ticks every WATCHDOG_TICK_MS, or late.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/watchdog.h"

#define ERR_MAX 256
#define T0 100000   /* the monotonic clock at the first tick */
#define WALL0 1700000000000LL /* the wall clock at T0 (wall = mono + OFFSET) */
#define OFFSET (WALL0 - T0)

/* ---- watchdog_config ---- */

struct cfg {
	int rc;
	int64_t window, backstop;
	char err[ERR_MAX];
};

static struct cfg
config(const char *window_env, const char *backstop_env)
{
	struct cfg c = { .window = -1, .backstop = -1 };

	c.rc = watchdog_config(window_env, backstop_env, &c.window, &c.backstop, c.err,
	    sizeof(c.err));
	return c;
}

/* "(COTAL_DELIVERY_BROKER_GONE_MS, 15 seconds by default)" and
 * "(COTAL_DELIVERY_BROKER_GONE_BACKSTOP_MS, four times the window by
 * default ...)": unset and empty variables alike. */
static void
test_config_defaults(void **state)
{
	const char *unset[][2] = { { NULL, NULL }, { "", NULL }, { NULL, "" }, { "", "" } };

	(void)state;
	assert_string_equal(WATCHDOG_ENV_WINDOW, "COTAL_DELIVERY_BROKER_GONE_MS");
	assert_string_equal(WATCHDOG_ENV_BACKSTOP, "COTAL_DELIVERY_BROKER_GONE_BACKSTOP_MS");
	for (size_t i = 0; i < sizeof(unset) / sizeof(unset[0]); i++) {
		struct cfg c = config(unset[i][0], unset[i][1]);
		assert_int_equal(c.rc, 0);
		assert_int_equal(c.window, 15000);
		assert_int_equal(c.backstop, 60000);
	}
}

/* "four times the window by default": of the window given, not of 15 s. */
static void
test_config_backstop_follows_the_window(void **state)
{
	struct cfg c = config("3000", NULL);

	(void)state;
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 3000);
	assert_int_equal(c.backstop, 12000);
	c = config("1", "");
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 1);
	assert_int_equal(c.backstop, 4);
	/* The largest window accepted (a day). */
	c = config("86400000", NULL);
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 86400000);
	assert_int_equal(c.backstop, 4LL * 86400000);
}

/* An explicit backstop at or above the window is taken as given. */
static void
test_config_explicit_backstop(void **state)
{
	struct cfg c = config("3000", "5000");

	(void)state;
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 3000);
	assert_int_equal(c.backstop, 5000);
	c = config(NULL, "90000");
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 15000);
	assert_int_equal(c.backstop, 90000);
	/* Equal to the window: kept. */
	c = config("3000", "3000");
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.backstop, 3000);
}

/* "... and never less than it": a backstop below the window is raised to
 * the window, not refused. */
static void
test_config_backstop_raised_to_the_window(void **state)
{
	struct cfg c = config("3000", "500");

	(void)state;
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 3000);
	assert_int_equal(c.backstop, 3000);
	/* Below the default window too. */
	c = config(NULL, "100");
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.window, 15000);
	assert_int_equal(c.backstop, 15000);
	c = config("2999", "2998");
	assert_int_equal(c.rc, 0);
	assert_int_equal(c.backstop, 2999);
}

/* A refusal names the variable (and quotes its value) at the start of the
 * error. */
static void
assert_refused_naming(struct cfg c, const char *name, const char *value)
{
	char want[128];

	assert_int_equal(c.rc, -1);
	snprintf(want, sizeof(want), "%s=\"%s\"", name, value);
	if (strncmp(c.err, want, strlen(want)) != 0)
		fail_msg("refusal does not begin with %s: %s", want, c.err);
}

static const char *const bad_values[] = {
	"0", "-1", "-15000", "abc", "15s", "1.5", "3000 ", "0x10", "86400001",
	"99999999999999999999999", "-99999999999999999999999",
};
#define NBAD (sizeof(bad_values) / sizeof(bad_values[0]))

static void
test_config_bad_window_is_refused_naming_it(void **state)
{
	(void)state;
	for (size_t i = 0; i < NBAD; i++) {
		assert_refused_naming(config(bad_values[i], NULL), WATCHDOG_ENV_WINDOW,
		    bad_values[i]);
		/* A good backstop beside it does not save it. */
		assert_refused_naming(config(bad_values[i], "60000"), WATCHDOG_ENV_WINDOW,
		    bad_values[i]);
	}
}

static void
test_config_bad_backstop_is_refused_naming_it(void **state)
{
	(void)state;
	for (size_t i = 0; i < NBAD; i++) {
		/* "0" and "-1" are refused, not raised to the window. */
		assert_refused_naming(config(NULL, bad_values[i]), WATCHDOG_ENV_BACKSTOP,
		    bad_values[i]);
		assert_refused_naming(config("3000", bad_values[i]), WATCHDOG_ENV_BACKSTOP,
		    bad_values[i]);
	}
	/* The window's name is not the backstop's: the error says which. */
	struct cfg c = config("3000", "soon");
	assert_null(strstr(c.err, "COTAL_DELIVERY_BROKER_GONE_MS"));
}

/* ---- the verdicts ---- */

/* A watchdog whose loop has ticked once at T0, connected. */
static void
started(struct watchdog *w, int64_t window, int64_t backstop)
{
	watchdog_init(w, window, backstop);
	assert_int_equal(watchdog_tick(w, T0, T0 + OFFSET), WATCHDOG_OK);
}

static enum watchdog_verdict
tick(struct watchdog *w, int64_t mono)
{
	return watchdog_tick(w, mono, mono + OFFSET);
}

/* Tick on time from the last tick up to (and including) until; every
 * verdict OK. Returns the last tick's time. */
static int64_t
ticks_ok(struct watchdog *w, int64_t until)
{
	int64_t t = w->last_tick;

	while (t + WATCHDOG_TICK_MS <= until) {
		t += WATCHDOG_TICK_MS;
		enum watchdog_verdict v = tick(w, t);
		if (v != WATCHDOG_OK)
			fail_msg("verdict %d at +%lld ms (down at +%lld)", (int)v, (long long)(t - T0),
			    (long long)(w->down_at - T0));
	}
	return t;
}

static void
disconnect(struct watchdog *w, int64_t mono)
{
	watchdog_disconnected(w, WATCHDOG_RESIDENT, mono, mono + OFFSET);
}

/* The watchdog knows nothing of the broker but the connection's events:
 * connected, it stays OK however much time passes, and however late the
 * loop ticks. */
static void
test_connected_is_always_ok(void **state)
{
	struct watchdog w;

	(void)state;
	started(&w, 1000, 4000);
	ticks_ok(&w, T0 + 100000);
	/* A stall of an hour while connected. */
	assert_int_equal(tick(&w, w.last_tick + 3600 * 1000), WATCHDOG_OK);
	assert_false(w.down);
}

/* "A disconnect starts a clock ... When the time since the disconnect ...
 * reaches the window ... the daemon ... exits": GONE exactly at the
 * window, not a millisecond before. */
static void
test_gone_exactly_at_the_window(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 1000;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	assert_true(w.down);
	ticks_ok(&w, down + 2750);
	/* On time (not late): 1 ms before the window. */
	assert_int_equal(tick(&w, down + 2999), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 3000), WATCHDOG_GONE);
}

/* The disconnect may fall between two ticks: the clock runs from the
 * disconnect, not from a tick. */
static void
test_clock_runs_from_the_disconnect_not_the_tick(void **state)
{
	struct watchdog w;

	(void)state;
	started(&w, 1000, 4000);
	disconnect(&w, T0 + 130);
	assert_int_equal(tick(&w, T0 + 250), WATCHDOG_OK);
	assert_int_equal(tick(&w, T0 + 500), WATCHDOG_OK);
	assert_int_equal(tick(&w, T0 + 750), WATCHDOG_OK);
	assert_int_equal(tick(&w, T0 + 1000), WATCHDOG_OK);
	assert_int_equal(tick(&w, T0 + 1129), WATCHDOG_OK);
	assert_int_equal(tick(&w, T0 + 1130), WATCHDOG_GONE);
}

/* "A disconnect starts a clock": a second disconnect event while already
 * disconnected (a failed redial) does not start it again. */
static void
test_repeated_disconnect_keeps_the_first_clock(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 500;

	(void)state;
	started(&w, 2000, 8000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	ticks_ok(&w, down + 1500);
	disconnect(&w, down + 1500);
	assert_int_equal(w.down_at, down);
	ticks_ok(&w, down + 1750);
	assert_int_equal(tick(&w, down + 2000), WATCHDOG_GONE);
}

/* "... and a reconnect stops it." */
static void
test_reconnect_stops_the_clock(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 500;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	ticks_ok(&w, down + 2750);
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	assert_false(w.down);
	/* Long past the window and the backstop: nothing. */
	ticks_ok(&w, down + 60000);
}

/* The next disconnect starts a fresh clock: outages do not add up. */
static void
test_next_disconnect_starts_a_fresh_clock(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 500, again;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	ticks_ok(&w, down + 2750);
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	again = ticks_ok(&w, down + 5000);
	disconnect(&w, again);
	ticks_ok(&w, again + 2750);
	assert_int_equal(tick(&w, again + 2999), WATCHDOG_OK);
	assert_int_equal(tick(&w, again + 3000), WATCHDOG_GONE);
}

/* "... less any time the daemon's own event loop was stalled": a tick that
 * comes late by N ms while disconnected moves GONE N ms later. */
static void
test_stall_while_disconnected_is_subtracted(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 1000, t;

	(void)state;
	started(&w, 3000, 60000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	t = ticks_ok(&w, down + 1000);
	/* The loop stalls 5 s (SIGSTOP, a starved host): the next tick,
	 * due at t + 250, comes at t + 5250. */
	assert_int_equal(tick(&w, t + 5250), WATCHDOG_OK);
	assert_int_equal(w.stalled_ms, 5000);
	/* Wall time since the disconnect is 6.25 s, past the 3 s window, but
	 * only 1.25 s of it counts. */
	ticks_ok(&w, down + 3000 + 5000 - 250);
	assert_int_equal(tick(&w, down + 3000 + 5000 - 1), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 3000 + 5000), WATCHDOG_GONE);
}

/* The loop blocked in a call to the broker (a lease renewal waiting out
 * its timeout) is the broker's silence, not the daemon's stall: after
 * watchdog_busy that wait counts toward the window. */
static void
test_waiting_for_the_broker_is_no_stall(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 1000, t;

	(void)state;
	started(&w, 3000, 60000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	t = ticks_ok(&w, down + 500);
	/* A 3 s call to the broker on the loop, then the tick. */
	watchdog_busy(&w, t + 3000);
	assert_int_equal(tick(&w, t + 3000), WATCHDOG_GONE);
	assert_int_equal(w.stalled_ms, 0);
}

/* Several stalls add up. */
static void
test_stalls_add_up(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250, t;

	(void)state;
	started(&w, 2000, 60000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	t = down;
	for (int i = 0; i < 3; i++) {
		t += 1250; /* 1 s late each */
		assert_int_equal(tick(&w, t), WATCHDOG_OK);
	}
	assert_int_equal(w.stalled_ms, 3000);
	/* 3 * 250 ms counted so far; 1250 more to the window. */
	ticks_ok(&w, down + 2000 + 3000 - 250);
	assert_int_equal(tick(&w, down + 2000 + 3000), WATCHDOG_GONE);
}

/* "... less any time the daemon's own event loop was stalled" — since the
 * disconnect: a stall while still connected is not subtracted from a later
 * outage. */
static void
test_stall_before_the_disconnect_is_not_subtracted(void **state)
{
	struct watchdog w;
	int64_t t, down;

	(void)state;
	started(&w, 3000, 60000);
	t = ticks_ok(&w, T0 + 1000);
	/* Stalled 20 s while connected. */
	t += 20250;
	assert_int_equal(tick(&w, t), WATCHDOG_OK);
	down = t + 100;
	disconnect(&w, down);
	assert_int_equal(w.stalled_ms, 0);
	/* On time from the last tick (down - 100) on. */
	ticks_ok(&w, down + 2999);
	assert_int_equal(w.stalled_ms, 0);
	assert_int_equal(tick(&w, down + 2999), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 3000), WATCHDOG_GONE);
}

/* A stall that straddles the disconnect counts only from the disconnect
 * on: the loop last ticked at T, was due at T + 250, the disconnect came
 * at T + 500 and the next tick at T + 4250 — 3750 ms of the 4000 ms stall
 * overlap the outage. */
static void
test_stall_straddling_the_disconnect_counts_from_it(void **state)
{
	struct watchdog w;
	int64_t t, down;

	(void)state;
	started(&w, 2000, 60000);
	t = ticks_ok(&w, T0 + 1000);
	down = t + 500;
	disconnect(&w, down);
	assert_int_equal(tick(&w, t + 4250), WATCHDOG_OK);
	assert_int_equal(w.stalled_ms, 3750);
	/* GONE at down + window + 3750, not + 4000 and not + 0. */
	ticks_ok(&w, down + 2000 + 3750 - 250);
	assert_int_equal(tick(&w, down + 2000 + 3750 - 1), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 2000 + 3750), WATCHDOG_GONE);
}

/* A reconnect forgets the outage's stall: the next outage is not credited
 * with it. */
static void
test_reconnect_forgets_the_stall(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250, again;

	(void)state;
	started(&w, 3000, 60000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	assert_int_equal(tick(&w, down + 10250), WATCHDOG_OK); /* stalled 10 s */
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	assert_int_equal(w.stalled_ms, 0);
	again = ticks_ok(&w, down + 12000);
	disconnect(&w, again);
	ticks_ok(&w, again + 2750);
	assert_int_equal(tick(&w, again + 3000), WATCHDOG_GONE);
}

/* "Wall time since the disconnect also has a backstop ... Reaching it logs
 * ✗ delivery: broker connection unavailable past backstop ... and exits,
 * however long the daemon was stalled": a loop that keeps stalling never
 * reaches the window, and the backstop ends it exactly on time. */
static void
test_backstop_on_wall_time_while_stalling(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250;

	(void)state;
	started(&w, 10000, 40000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	/* A tick every 1250 ms: 1000 ms late each time, 250 ms counted. At
	 * tick 31 (38750 ms of wall time) 7750 ms count. */
	for (int i = 1; i <= 31; i++)
		assert_int_equal(tick(&w, down + i * 1250), WATCHDOG_OK);
	assert_int_equal(w.stalled_ms, 31 * 1000);
	/* 1 ms before the backstop, late too. */
	assert_int_equal(tick(&w, down + 39999), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 40000), WATCHDOG_BACKSTOP);
}

/* One stall of an hour: the window counts nothing of it, the backstop
 * fires at the first tick after. */
static void
test_backstop_after_one_long_stall(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	assert_int_equal(tick(&w, down + 3600 * 1000), WATCHDOG_BACKSTOP);
}

/* The backstop reads the wall clock given, not the monotonic one. */
static void
test_backstop_reads_the_wall_clock(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	/* On time by the monotonic clock; the wall clock says 12 s passed. */
	assert_int_equal(watchdog_tick(&w, down + 250, down + OFFSET + 11999), WATCHDOG_OK);
	assert_int_equal(watchdog_tick(&w, down + 500, down + OFFSET + 12000),
	    WATCHDOG_BACKSTOP);
}

/* A reconnect stops the backstop's clock as well. */
static void
test_reconnect_stops_the_backstop(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 250;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	assert_int_equal(tick(&w, down + 11000), WATCHDOG_OK);
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	assert_int_equal(tick(&w, down + 12000), WATCHDOG_OK);
	assert_int_equal(tick(&w, down + 3600 * 1000), WATCHDOG_OK);
}

/* The seed's exact lines. */
static void
test_lines_are_the_seeds(void **state)
{
	(void)state;
	assert_string_equal(WATCHDOG_LINE_GONE, "✗ delivery: broker connection unavailable "
	    "(broker unreachable), exiting (coupled to the broker)");
	assert_string_equal(WATCHDOG_LINE_BACKSTOP, "✗ delivery: broker connection unavailable "
	    "past backstop (broker unreachable), exiting (coupled to the broker)");
}

/*
 * Issue 15: "A daemon whose delivery workers cannot reach any listed server
 * is not serving ... the seed's broker-gone window and backstop apply to
 * it." The workers are a second source: the clock starts with the first
 * source down, keeps running while the other goes and comes back, and
 * stops only when neither is down.
 */
static void
test_workers_are_a_second_source(void **state)
{
	struct watchdog w;
	int64_t down = T0 + 500, t;

	(void)state;
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	watchdog_disconnected(&w, WATCHDOG_WORKERS, down, down + OFFSET);
	assert_true(w.down);
	assert_false(watchdog_resident_down(&w));
	t = ticks_ok(&w, down + 1000);
	/* The resident connection drops too, then comes back: the workers'
	 * clock runs on from their disconnect. */
	watchdog_disconnected(&w, WATCHDOG_RESIDENT, t, t + OFFSET);
	assert_true(watchdog_resident_down(&w));
	t = ticks_ok(&w, down + 2000);
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	assert_true(w.down);
	assert_false(watchdog_resident_down(&w));
	ticks_ok(&w, down + 2750);
	assert_int_equal(tick(&w, down + 3000), WATCHDOG_GONE);

	/* Both down, the workers come back first: still down until the
	 * resident connection is back too. */
	started(&w, 3000, 12000);
	ticks_ok(&w, down);
	disconnect(&w, down);
	watchdog_disconnected(&w, WATCHDOG_WORKERS, down, down + OFFSET);
	watchdog_reconnected(&w, WATCHDOG_WORKERS);
	assert_true(w.down);
	watchdog_reconnected(&w, WATCHDOG_RESIDENT);
	assert_false(w.down);
	ticks_ok(&w, down + 60000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults),
		cmocka_unit_test(test_config_backstop_follows_the_window),
		cmocka_unit_test(test_config_explicit_backstop),
		cmocka_unit_test(test_config_backstop_raised_to_the_window),
		cmocka_unit_test(test_config_bad_window_is_refused_naming_it),
		cmocka_unit_test(test_config_bad_backstop_is_refused_naming_it),
		cmocka_unit_test(test_connected_is_always_ok),
		cmocka_unit_test(test_gone_exactly_at_the_window),
		cmocka_unit_test(test_clock_runs_from_the_disconnect_not_the_tick),
		cmocka_unit_test(test_repeated_disconnect_keeps_the_first_clock),
		cmocka_unit_test(test_reconnect_stops_the_clock),
		cmocka_unit_test(test_next_disconnect_starts_a_fresh_clock),
		cmocka_unit_test(test_stall_while_disconnected_is_subtracted),
		cmocka_unit_test(test_stalls_add_up),
		cmocka_unit_test(test_stall_before_the_disconnect_is_not_subtracted),
		cmocka_unit_test(test_stall_straddling_the_disconnect_counts_from_it),
		cmocka_unit_test(test_reconnect_forgets_the_stall),
		cmocka_unit_test(test_backstop_on_wall_time_while_stalling),
		cmocka_unit_test(test_backstop_after_one_long_stall),
		cmocka_unit_test(test_backstop_reads_the_wall_clock),
		cmocka_unit_test(test_reconnect_stops_the_backstop),
		cmocka_unit_test(test_lines_are_the_seeds),
		cmocka_unit_test(test_waiting_for_the_broker_is_no_stall),
		cmocka_unit_test(test_workers_are_a_second_source),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
