/*
 * The ctl.delivery rail's fair queue (issue 28, "Fair rails"): "Requests
 * are queued per principal; the rail serves principals in turn ... A
 * principal past its share (a bound on its waiting requests and on their
 * bytes) gets the existing retry refusal; other principals are served as
 * if it were idle."
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker-registry/fairq.h"

static const struct fairq_limits lim = {
	.caller_max = 4, .caller_serving = 1, .caller_bytes = 1000, .total_max = 10,
	.total_bytes = 3000, .refusals_per_s = 1000,
};

/* Items are malloc'd strings "<caller>#<n>". */
static void *
item(const char *caller, int n)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%s#%d", caller, n);
	return strdup(buf);
}

/* Pop, check, and mark served (its caller's next joins the line). */
static void
pop_is(struct fairq *q, const char *want)
{
	char *got = fairq_pop(q);

	assert_non_null(got);
	assert_string_equal(got, want);
	*strchr(got, '#') = '\0';
	fairq_done(q, got);
	free(got);
}

static void
test_one_caller_is_first_in_first_out(void **state)
{
	struct fairq q;

	(void)state;
	fairq_init(&q, &lim);
	assert_null(fairq_pop(&q));
	for (int i = 0; i < 3; i++)
		assert_int_equal(fairq_push(&q, "a.x", item("a.x", i), 10), FAIRQ_OK);
	assert_int_equal(fairq_callers(&q), 1);
	pop_is(&q, "a.x#0");
	pop_is(&q, "a.x#1");
	pop_is(&q, "a.x#2");
	assert_null(fairq_pop(&q));
	assert_int_equal(fairq_callers(&q), 0);
	assert_int_equal(q.n, 0);
	assert_int_equal(q.bytes, 0);
	fairq_clear(&q, free);
}

/* A flooder's backlog does not stand before another caller: it is served
 * in the very next turn. */
static void
test_callers_are_served_in_turn(void **state)
{
	struct fairq q;

	(void)state;
	fairq_init(&q, &lim);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fairq_push(&q, "flood.x", item("flood.x", i), 10), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "b.y", item("b.y", 0), 10), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "c.z", item("c.z", 0), 10), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "b.y", item("b.y", 1), 10), FAIRQ_OK);
	pop_is(&q, "flood.x#0");
	pop_is(&q, "b.y#0");
	pop_is(&q, "c.z#0");
	pop_is(&q, "flood.x#1");
	pop_is(&q, "b.y#1");
	/* c left the line when its queue emptied; it comes back at the end. */
	assert_int_equal(fairq_push(&q, "c.z", item("c.z", 1), 10), FAIRQ_OK);
	pop_is(&q, "flood.x#2");
	pop_is(&q, "c.z#1");
	pop_is(&q, "flood.x#3");
	assert_null(fairq_pop(&q));
	fairq_clear(&q, free);
}

static void
test_a_caller_past_its_share_is_refused_and_others_are_not(void **state)
{
	struct fairq q;
	void *it;

	(void)state;
	fairq_init(&q, &lim);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fairq_push(&q, "flood.x", item("flood.x", i), 1), FAIRQ_OK);
	it = item("flood.x", 4);
	assert_int_equal(fairq_push(&q, "flood.x", it, 1), FAIRQ_CALLER_FULL);
	free(it); /* refused: still the caller's */
	assert_int_equal(fairq_admits(&q, "flood.x", 1), FAIRQ_CALLER_FULL);
	assert_int_equal(fairq_admits(&q, "b.y", 1), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "b.y", item("b.y", 0), 1), FAIRQ_OK);
	/* One served: the flooder has room for one again. */
	pop_is(&q, "flood.x#0");
	assert_int_equal(fairq_admits(&q, "flood.x", 1), FAIRQ_OK);
	fairq_clear(&q, free);
	assert_int_equal(fairq_callers(&q), 0);
}

/* "a 256 KiB body of padding is one request": bytes are a bound of their
 * own, per caller and in all. */
static void
test_bytes_are_bounded_per_caller_and_in_all(void **state)
{
	struct fairq q;
	void *it;

	(void)state;
	fairq_init(&q, &lim);
	assert_int_equal(fairq_admits(&q, "a.x", 1001), FAIRQ_CALLER_BYTES);
	assert_int_equal(fairq_push(&q, "a.x", item("a.x", 0), 600), FAIRQ_OK);
	it = item("a.x", 1);
	assert_int_equal(fairq_push(&q, "a.x", it, 401), FAIRQ_CALLER_BYTES);
	assert_int_equal(fairq_push(&q, "a.x", it, 400), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "b.x", item("b.x", 0), 1000), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "c.x", item("c.x", 0), 900), FAIRQ_OK);
	/* 2900 waiting of 3000 */
	assert_int_equal(fairq_admits(&q, "d.x", 101), FAIRQ_BYTES);
	assert_int_equal(fairq_admits(&q, "d.x", 100), FAIRQ_OK);
	assert_int_equal(q.bytes, 2900);
	pop_is(&q, "a.x#0");
	assert_int_equal(q.bytes, 2300);
	assert_int_equal(fairq_admits(&q, "d.x", 700), FAIRQ_OK);
	fairq_clear(&q, free);
}

static void
test_the_whole_queue_is_bounded(void **state)
{
	struct fairq q;
	char caller[16];
	void *it;

	(void)state;
	fairq_init(&q, &lim);
	for (int i = 0; i < 10; i++) {
		snprintf(caller, sizeof(caller), "c%d.x", i);
		assert_int_equal(fairq_push(&q, caller, item(caller, 0), 1), FAIRQ_OK);
	}
	assert_int_equal(fairq_callers(&q), 10);
	it = item("late.x", 0);
	assert_int_equal(fairq_push(&q, "late.x", it, 1), FAIRQ_FULL);
	free(it);
	pop_is(&q, "c0.x#0");
	assert_int_equal(fairq_push(&q, "late.x", item("late.x", 0), 1), FAIRQ_OK);
	/* Cleared with items waiting: every item freed (LSan/valgrind see it). */
	fairq_clear(&q, free);
	assert_null(fairq_pop(&q));
	assert_int_equal(q.n, 0);
}

/* Many rounds of many callers: every item comes out once, and between two
 * items of one caller every other waiting caller is served once. */
static void
test_round_robin_holds_at_scale(void **state)
{
	static const struct fairq_limits big = {
		.caller_max = 1000, .caller_serving = 1, .caller_bytes = 1 << 20,
		.total_max = 100000, .total_bytes = 1 << 30, .refusals_per_s = 1,
	};
	struct fairq q;
	char caller[16];
	int seen[50] = { 0 };

	(void)state;
	fairq_init(&q, &big);
	for (int round = 0; round < 100; round++)
		for (int c = 0; c < 50; c++) {
			snprintf(caller, sizeof(caller), "p%02d.x", c);
			assert_int_equal(fairq_push(&q, caller, item(caller, round), 8), FAIRQ_OK);
		}
	for (int k = 0; k < 5000; k++) {
		char *got = fairq_pop(&q);
		int c, round;
		assert_non_null(got);
		assert_int_equal(sscanf(got, "p%d.x#%d", &c, &round), 2);
		assert_int_equal(c, k % 50);
		assert_int_equal(round, seen[c]++);
		*strchr(got, '#') = '\0';
		fairq_done(&q, got);
		free(got);
	}
	assert_null(fairq_pop(&q));
	fairq_clear(&q, free);
}

/* "one agent never takes the service away from the others": a caller has
 * caller_serving requests in service at a time (1 here), however many
 * wait, so a flood holds that many serving threads at the most. */
static void
test_a_caller_has_one_request_in_service_at_a_time(void **state)
{
	struct fairq q;
	char *first, *next;

	(void)state;
	fairq_init(&q, &lim);
	assert_int_equal(fairq_push(&q, "flood.x", item("flood.x", 0), 1), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "flood.x", item("flood.x", 1), 1), FAIRQ_OK);
	first = fairq_pop(&q);
	assert_string_equal(first, "flood.x#0");
	/* Its next waits while the first is served: nothing else is due. */
	assert_false(fairq_ready(&q));
	assert_null(fairq_pop(&q));
	assert_int_equal(fairq_push(&q, "b.y", item("b.y", 0), 1), FAIRQ_OK);
	assert_true(fairq_ready(&q));
	next = fairq_pop(&q);
	assert_string_equal(next, "b.y#0");
	assert_false(fairq_done(&q, "b.y")); /* nothing more of b's */
	free(next);
	assert_null(fairq_pop(&q));
	/* Served: the flooder's next joins the line. */
	assert_true(fairq_done(&q, "flood.x"));
	free(first);
	assert_false(fairq_done(&q, "flood.x")); /* not in service any more */
	pop_is(&q, "flood.x#1");
	assert_int_equal(fairq_callers(&q), 0);
	/* A caller in service still holds its pacing and its share. */
	assert_int_equal(fairq_push(&q, "c.z", item("c.z", 0), 1), FAIRQ_OK);
	first = fairq_pop(&q);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fairq_push(&q, "c.z", item("c.z", i + 1), 1), FAIRQ_OK);
	assert_int_equal(fairq_admits(&q, "c.z", 1), FAIRQ_CALLER_FULL);
	fairq_clear(&q, free); /* frees the waiting four and the flow in service */
	free(first);
}

/* "A principal past its share ... gets the existing retry refusal", paced:
 * refusals_per_s answered a second per caller, the rest shed. */
static void
test_refusals_are_paced_per_caller(void **state)
{
	struct fairq_limits paced = lim;
	struct fairq q;
	int due = 0;

	(void)state;
	paced.refusals_per_s = 3;
	fairq_init(&q, &paced);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fairq_push(&q, "flood.x", item("flood.x", i), 1), FAIRQ_OK);
	for (int i = 0; i < 10; i++)
		due += fairq_refusal_due(&q, "flood.x", FAIRQ_CALLER_FULL, 5000 + i);
	assert_int_equal(due, 3);
	/* Another caller refused for the queue's bound has a pace of its own. */
	assert_true(fairq_refusal_due(&q, "b.y", FAIRQ_FULL, 5010));
	/* ... within the queue's: FAIRQ_REFUSAL_CALLERS × 3 a second in all
	 * (3 + 1 spent so far). */
	due = 0;
	for (int i = 0; i < 20; i++)
		due += fairq_refusal_due(&q, "c.z", FAIRQ_FULL, 5020 + i);
	assert_int_equal(due, FAIRQ_REFUSAL_CALLERS * 3 - 4);
	/* The next second, three more. */
	due = 0;
	for (int i = 0; i < 10; i++)
		due += fairq_refusal_due(&q, "flood.x", FAIRQ_CALLER_FULL, 6000 + i);
	assert_int_equal(due, 3);
	fairq_clear(&q, free);
}

/* With caller_serving 2, a caller is served twice in a row while others
 * wait their turn in between, and its third waits for one to be done. */
static void
test_two_in_service_at_a_time(void **state)
{
	struct fairq_limits two = lim;
	struct fairq q;
	char *a0, *a1, *b0;

	(void)state;
	two.caller_serving = 2;
	fairq_init(&q, &two);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fairq_push(&q, "a.x", item("a.x", i), 1), FAIRQ_OK);
	assert_int_equal(fairq_push(&q, "b.y", item("b.y", 0), 1), FAIRQ_OK);
	a0 = fairq_pop(&q);
	b0 = fairq_pop(&q);
	a1 = fairq_pop(&q);
	assert_string_equal(a0, "a.x#0");
	assert_string_equal(b0, "b.y#0");
	assert_string_equal(a1, "a.x#1");
	assert_null(fairq_pop(&q)); /* a's third waits: two in service */
	assert_false(fairq_done(&q, "b.y"));
	assert_true(fairq_done(&q, "a.x"));
	pop_is(&q, "a.x#2");
	assert_false(fairq_done(&q, "a.x")); /* the last of a's in service */
	assert_int_equal(fairq_callers(&q), 0);
	free(a0);
	free(a1);
	free(b0);
	/* A caller with one in service and room for another: what it sends
	 * next is due at once (a leave overtaking its own held join). */
	assert_int_equal(fairq_push(&q, "a.x", item("a.x", 3), 1), FAIRQ_OK);
	a0 = fairq_pop(&q);
	assert_string_equal(a0, "a.x#3");
	assert_false(fairq_ready(&q));
	assert_int_equal(fairq_push(&q, "a.x", item("a.x", 4), 1), FAIRQ_OK);
	assert_true(fairq_ready(&q));
	pop_is(&q, "a.x#4");
	assert_false(fairq_done(&q, "a.x"));
	assert_int_equal(fairq_callers(&q), 0);
	free(a0);
	fairq_clear(&q, free);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_caller_is_first_in_first_out),
		cmocka_unit_test(test_callers_are_served_in_turn),
		cmocka_unit_test(test_a_caller_past_its_share_is_refused_and_others_are_not),
		cmocka_unit_test(test_bytes_are_bounded_per_caller_and_in_all),
		cmocka_unit_test(test_the_whole_queue_is_bounded),
		cmocka_unit_test(test_round_robin_holds_at_scale),
		cmocka_unit_test(test_a_caller_has_one_request_in_service_at_a_time),
		cmocka_unit_test(test_refusals_are_paced_per_caller),
		cmocka_unit_test(test_two_in_service_at_a_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
