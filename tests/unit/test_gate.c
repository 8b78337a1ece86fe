/*
 * The registry's gate between membership writes and inventories
 * (worker-registry/gate.c), against the seed's sentences:
 *   "Either way the read starts only after the writes already running
 *    have finished."
 *   "when the inventory request arrives with the lifecycle's ACL row still
 *    allowing reads, it refuses every later durable join and leave of that
 *    lifecycle from that moment, on that daemon process. A request whose
 *    row is already narrowed, or retired, leaves no such mark"
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker-registry/registry_int.h"

static int
reset(void **state)
{
	(void)state;
	gate_reset();
	return 0;
}

/* A lifecycle fenced by an inventory refuses later joins and leaves;
 * another lifecycle is not affected. */
static void
test_fence_refuses_later_writes_of_that_lifecycle(void **state)
{
	uint64_t t;

	(void)state;
	assert_true(gate_enter("local.a.uid1", &t));
	gate_leave(t);
	gate_mark("local.a.uid1", true);
	assert_true(gate_fenced("local.a.uid1"));
	assert_false(gate_enter("local.a.uid1", &t));
	assert_true(gate_enter("local.b.uid2", &t));
	gate_leave(t);
}

/* A narrowed or retired row leaves no mark. */
static void
test_narrowed_row_leaves_no_mark(void **state)
{
	uint64_t t;

	(void)state;
	gate_mark("local.c.uid3", false);
	assert_false(gate_fenced("local.c.uid3"));
	assert_true(gate_enter("local.c.uid3", &t));
	gate_leave(t);
}

/* The marks live in the process only. */
static void
test_marks_go_with_the_process(void **state)
{
	uint64_t t;

	(void)state;
	gate_mark("local.d.uid4", true);
	gate_reset();
	assert_true(gate_enter("local.d.uid4", &t));
	gate_leave(t);
}

struct waiter {
	uint64_t mark;
	atomic_bool done;
};

static void *
wait_thread(void *arg)
{
	struct waiter *w = arg;

	gate_wait(w->mark);
	atomic_store(&w->done, true);
	return NULL;
}

/* The read waits for the writes that entered before it arrived, and not
 * for those that entered after. */
static void
test_read_waits_for_writes_already_running(void **state)
{
	struct waiter w = { 0 };
	uint64_t before, after;
	pthread_t th;

	(void)state;
	assert_true(gate_enter("local.e.uid5", &before));
	w.mark = gate_mark("local.f.uid6", false);
	assert_true(gate_enter("local.g.uid7", &after));
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	usleep(100 * 1000);
	assert_false(atomic_load(&w.done)); /* "before" still runs */
	gate_leave(before);
	pthread_join(th, NULL);
	assert_true(atomic_load(&w.done)); /* "after" did not hold it */
	gate_leave(after);
}

/* With no write running, the read starts at once. */
static void
test_read_with_no_write_running_starts_at_once(void **state)
{
	(void)state;
	gate_wait(gate_mark("local.h.uid8", false));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_fence_refuses_later_writes_of_that_lifecycle, reset),
		cmocka_unit_test_setup(test_narrowed_row_leaves_no_mark, reset),
		cmocka_unit_test_setup(test_marks_go_with_the_process, reset),
		cmocka_unit_test_setup(test_read_waits_for_writes_already_running, reset),
		cmocka_unit_test_setup(test_read_with_no_write_running_starts_at_once, reset),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	gate_reset();
	return rc;
}
