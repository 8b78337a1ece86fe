/*
 * The fence: "Every effect a worker makes (publish, ack, reply, KV write)
 * first checks that the daemon still serves the shard ... a unit of work
 * dispatched before the quiesce never acks or answers afterwards."
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/fence.h"

static void
test_open_fence_lets_effects_through(void **state)
{
	struct fence f;

	(void)state;
	fence_init(&f);
	uint64_t t = fence_ticket(&f);
	assert_true(fence_begin(&f, t));
	fence_done(&f);
	assert_true(fence_wait_drained(&f, 0));
	fence_destroy(&f);
}

static void
test_quiesced_fence_refuses_effects(void **state)
{
	struct fence f;

	(void)state;
	fence_init(&f);
	fence_quiesce(&f);
	assert_true(fence_is_quiesced(&f));
	assert_false(fence_begin(&f, fence_ticket(&f)));
	fence_destroy(&f);
}

static void
test_work_dispatched_before_quiesce_never_acts_after(void **state)
{
	struct fence f;

	(void)state;
	fence_init(&f);
	uint64_t before = fence_ticket(&f);
	fence_quiesce(&f);
	fence_resume(&f);
	/* The fence is open again, but the old unit's ticket stays void. */
	assert_false(fence_begin(&f, before));
	assert_true(fence_begin(&f, fence_ticket(&f)));
	fence_done(&f);
	fence_destroy(&f);
}

static struct fence shared;

static void *
finish_effect_later(void *arg)
{
	(void)arg;
	usleep(100 * 1000);
	fence_done(&shared);
	return NULL;
}

static void
test_quiesce_waits_for_effects_in_flight(void **state)
{
	pthread_t th;

	(void)state;
	fence_init(&shared);
	assert_true(fence_begin(&shared, fence_ticket(&shared)));
	fence_quiesce(&shared);
	/* Not drained while the effect runs... */
	assert_false(fence_wait_drained(&shared, 10));
	pthread_create(&th, NULL, finish_effect_later, NULL);
	/* ...drained once it is done: QUIESCED may then be reported. */
	assert_true(fence_wait_drained(&shared, 5000));
	pthread_join(th, NULL);
	fence_destroy(&shared);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_fence_lets_effects_through),
		cmocka_unit_test(test_quiesced_fence_refuses_effects),
		cmocka_unit_test(test_work_dispatched_before_quiesce_never_acts_after),
		cmocka_unit_test(test_quiesce_waits_for_effects_in_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
