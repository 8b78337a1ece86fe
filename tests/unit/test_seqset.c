/*
 * lib/seqset: what a worker remembers it acknowledged. The set must never
 * claim a sequence that was not put in (a caller would skip work it never
 * did); what it forgets when full, the caller does again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lib/seqset.h"

static void
test_in_order_sequences_join_the_floor(void **state)
{
	struct seqset s;

	(void)state;
	seqset_init(&s);
	assert_false(seqset_has(&s, 0));
	assert_false(seqset_has(&s, 1));
	for (uint64_t q = 1; q <= 100000; q++)
		assert_int_equal(seqset_add(&s, q), 0);
	assert_int_equal(s.floor, 100000);
	assert_int_equal(s.n, 0);
	assert_true(seqset_has(&s, 1));
	assert_true(seqset_has(&s, 100000));
	assert_false(seqset_has(&s, 100001));
	assert_false(seqset_has(&s, 0)); /* no stream sequence */
	seqset_free(&s);
}

static void
test_a_gap_is_never_claimed(void **state)
{
	struct seqset s;

	(void)state;
	seqset_init(&s);
	/* 1..10 acked but 5 (a post left for redelivery). */
	for (uint64_t q = 1; q <= 10; q++)
		if (q != 5)
			assert_int_equal(seqset_add(&s, q), 0);
	assert_int_equal(s.floor, 4);
	assert_false(seqset_has(&s, 5));
	for (uint64_t q = 6; q <= 10; q++)
		assert_true(seqset_has(&s, q));
	assert_false(seqset_has(&s, 11));
	/* Acked later: the run above it joins the floor. */
	assert_int_equal(seqset_add(&s, 5), 0);
	assert_int_equal(s.floor, 10);
	assert_int_equal(s.n, 0);
	/* Out of order and twice. */
	assert_int_equal(seqset_add(&s, 20), 0);
	assert_int_equal(seqset_add(&s, 15), 0);
	assert_int_equal(seqset_add(&s, 20), 0);
	assert_int_equal(s.n, 2);
	assert_true(seqset_has(&s, 15));
	assert_false(seqset_has(&s, 16));
	seqset_free(&s);
}

static void
test_a_raised_floor_takes_what_is_below_and_next_to_it(void **state)
{
	struct seqset s;

	(void)state;
	seqset_init(&s);
	assert_int_equal(seqset_add(&s, 3), 0);
	assert_int_equal(seqset_add(&s, 8), 0);
	assert_int_equal(seqset_add(&s, 9), 0);
	assert_int_equal(seqset_add(&s, 12), 0);
	seqset_raise(&s, 7); /* the broker's ack floor: 1..7 */
	assert_int_equal(s.floor, 9);
	assert_int_equal(s.n, 1);
	assert_true(seqset_has(&s, 6));
	assert_false(seqset_has(&s, 10));
	assert_true(seqset_has(&s, 12));
	seqset_raise(&s, 2); /* a lower floor (a broker that forgot) changes nothing */
	assert_int_equal(s.floor, 9);
	assert_true(seqset_has(&s, 12));
	seqset_clear(&s);
	assert_false(seqset_has(&s, 1));
	assert_false(seqset_has(&s, 12));
	seqset_free(&s);
}

static void
test_a_full_set_forgets_its_lowest_and_claims_nothing_new(void **state)
{
	struct seqset s;

	(void)state;
	seqset_init(&s);
	/* Every other sequence from 2: none joins the floor. */
	for (uint64_t k = 1; k <= SEQSET_MAX; k++)
		assert_int_equal(seqset_add(&s, 2 * k), 0);
	assert_int_equal(s.n, SEQSET_MAX);
	assert_int_equal(seqset_add(&s, 2 * (SEQSET_MAX + 1)), 0);
	assert_true(s.n <= SEQSET_MAX);
	assert_false(seqset_has(&s, 2)); /* forgotten: done again */
	assert_true(seqset_has(&s, 2 * (SEQSET_MAX + 1)));
	assert_true(seqset_has(&s, 2 * SEQSET_MAX));
	for (uint64_t q = 1; q <= 2 * (SEQSET_MAX + 1); q += 2)
		assert_false(seqset_has(&s, q)); /* never put in */
	seqset_free(&s);
}

/* Against a plain bitmap, in a random order with repeats and raises. */
static void
test_matches_a_bitmap(void **state)
{
	enum { N = 20000 };
	static unsigned char in[N + 1];
	struct seqset s;
	uint64_t raised = 0;

	(void)state;
	srand(7);
	seqset_init(&s);
	for (int i = 0; i < 3 * N; i++) {
		uint64_t q = 1 + (uint64_t)(rand() % N);
		if (rand() % 500 == 0) {
			seqset_raise(&s, q);
			if (q > raised)
				raised = q;
		} else {
			assert_int_equal(seqset_add(&s, q), 0);
			in[q] = 1;
		}
		if (i % 997 == 0)
			for (uint64_t x = 1; x <= N; x++)
				assert_int_equal(seqset_has(&s, x), in[x] || x <= raised);
	}
	seqset_free(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_sequences_join_the_floor),
		cmocka_unit_test(test_a_gap_is_never_claimed),
		cmocka_unit_test(test_a_raised_floor_takes_what_is_below_and_next_to_it),
		cmocka_unit_test(test_a_full_set_forgets_its_lowest_and_claims_nothing_new),
		cmocka_unit_test(test_matches_a_bitmap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
