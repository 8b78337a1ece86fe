/*
 * Restart with backoff: "delivery workers: start 100 ms, doubling, cap 30 s,
 * reset after 60 s of healthy running; the timer worker: 5 s doubling to
 * 300 s ... A delivery worker crash-looping beyond a bound (10 restarts in
 * 5 minutes)" is said; issue 42: "A crash loop degrades, it does not take
 * the daemon down" (the supervisor keeps restarting it, workers.c).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "service/restart.h"

static void
test_delivery_backoff_doubles_to_cap(void **state)
{
	struct restart_state s;
	bool loop;
	int64_t now = 1000000, want = 100;

	(void)state;
	restart_init(&s, &restart_delivery);
	/* Deaths a minute apart never crash-loop, but each came quickly
	 * (59 s < 60 s healthy), so the delay keeps doubling. */
	for (int i = 0; i < 12; i++) {
		restart_started(&s, now);
		now += 59 * 1000;
		assert_int_equal(restart_after_death(&s, &restart_delivery, now, &loop), want);
		assert_false(loop);
		want = want * 2 > 30000 ? 30000 : want * 2;
	}
	assert_int_equal(s.restarts, 12);
}

static void
test_healthy_run_resets_the_delay(void **state)
{
	struct restart_state s;
	bool loop;

	(void)state;
	restart_init(&s, &restart_delivery);
	restart_started(&s, 0);
	assert_int_equal(restart_after_death(&s, &restart_delivery, 10, &loop), 100);
	restart_started(&s, 200);
	assert_int_equal(restart_after_death(&s, &restart_delivery, 300, &loop), 200);
	restart_started(&s, 500);
	assert_int_equal(restart_after_death(&s, &restart_delivery, 500 + 60000, &loop), 100);
}

static void
test_ten_restarts_in_five_minutes_is_a_crash_loop(void **state)
{
	struct restart_state s;
	bool loop = false;
	int64_t now = 0;

	(void)state;
	restart_init(&s, &restart_delivery);
	for (int i = 0; i < 10; i++) {
		restart_started(&s, now);
		now += 1000;
		restart_after_death(&s, &restart_delivery, now, &loop);
		assert_false(loop);
	}
	restart_started(&s, now);
	restart_after_death(&s, &restart_delivery, now + 1000, &loop);
	assert_true(loop);
	/* Still looping until the window has passed the deaths. */
	assert_true(restart_looping(&s, &restart_delivery, now + 1000));
	assert_true(restart_looping(&s, &restart_delivery, 1000 + 5 * 60 * 1000 - 1));
	assert_false(restart_looping(&s, &restart_delivery, now + 1000 + 5 * 60 * 1000));
	/* The timer's loops are never reported. */
	assert_false(restart_looping(&s, &restart_timer, now + 1000));
}

static void
test_spread_out_deaths_are_not_a_loop(void **state)
{
	struct restart_state s;
	bool loop = false;
	int64_t now = 0;

	(void)state;
	restart_init(&s, &restart_delivery);
	/* 40 deaths, 31 s apart: never more than 10 inside 5 minutes. */
	for (int i = 0; i < 40; i++) {
		restart_started(&s, now);
		now += 31 * 1000;
		restart_after_death(&s, &restart_delivery, now, &loop);
		assert_false(loop);
	}
}

static void
test_timer_writer_backs_off_and_never_ends_the_daemon(void **state)
{
	struct restart_state s;
	bool loop = false;
	int64_t now = 0, want = 5000;

	(void)state;
	restart_init(&s, &restart_timer);
	for (int i = 0; i < 20; i++) {
		restart_started(&s, now);
		now += 10;
		assert_int_equal(restart_after_death(&s, &restart_timer, now, &loop), want);
		assert_false(loop);
		want = want * 2 > 300000 ? 300000 : want * 2;
	}
}

static void
test_cause_names_the_signal(void **state)
{
	char buf[64];

	(void)state;
	restart_cause(SIGSYS, buf, sizeof(buf));          /* WIFSIGNALED */
	assert_string_equal(buf, "killed by SIGSYS");
	restart_cause(SIGKILL, buf, sizeof(buf));
	assert_string_equal(buf, "killed by SIGKILL");
	restart_cause(3 << 8, buf, sizeof(buf));          /* exit(3) */
	assert_string_equal(buf, "exit status 3");
}

/* Issue 17: a host's lane that keeps closing is reopened 1 s, 2 s, ... up
 * to 30 s apart (a lost lease outlives its holder by its 30 s TTL), for as
 * long as the host runs; a lane that served a minute starts over at 1 s. */
static void
test_a_lane_is_reopened_with_backoff_for_as_long_as_the_host_runs(void **state)
{
	struct restart_state s;
	bool loop = false;
	int64_t now = 0, want = 1000;

	(void)state;
	restart_init(&s, &restart_lane);
	for (int i = 0; i < 20; i++) {
		restart_started(&s, now);
		now += 10;
		assert_int_equal(restart_after_death(&s, &restart_lane, now, &loop), want);
		assert_false(loop);
		want = want * 2 > 30000 ? 30000 : want * 2;
	}
	restart_started(&s, now);
	now += 60 * 1000;
	assert_int_equal(restart_after_death(&s, &restart_lane, now, &loop), 1000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delivery_backoff_doubles_to_cap),
		cmocka_unit_test(test_healthy_run_resets_the_delay),
		cmocka_unit_test(test_ten_restarts_in_five_minutes_is_a_crash_loop),
		cmocka_unit_test(test_spread_out_deaths_are_not_a_loop),
		cmocka_unit_test(test_timer_writer_backs_off_and_never_ends_the_daemon),
		cmocka_unit_test(test_cause_names_the_signal),
		cmocka_unit_test(test_a_lane_is_reopened_with_backoff_for_as_long_as_the_host_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
