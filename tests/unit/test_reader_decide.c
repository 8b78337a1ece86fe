/*
 * The trusted reader's verdict on one entry (worker-reader/decide.c),
 * branch by branch, each named after the seed sentence it implements.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "worker-reader/decide.h"

static struct entry
entry_of(const char *channel, uint64_t seq, enum entry_reason reason)
{
	struct entry e = { .seq = seq, .reason = reason, .generation = 1 };

	strcpy(e.channel, channel);
	return e;
}

static struct acl_row
acl_of(const char *row)
{
	struct acl_row r;

	acl_row_parse(row, row ? strlen(row) : 0, &r);
	return r;
}

static struct member_row
member(uint64_t join, bool has_leave, uint64_t leave)
{
	struct member_row r = { .join_cursor = join, .has_leave = has_leave,
		.leave_cursor = leave, .generation = 1, .active = true };

	strcpy(r.channel, "room");
	return r;
}

/* "An entry whose owner has no ACL row at all is retried, then given up
 * after ten redeliveries, and kept." */
static void
test_unknown_owner_is_retried_then_given_up(void **state)
{
	struct entry e = entry_of("room", 5, REASON_DURABLE);
	struct acl_row none = acl_of(NULL), bad = acl_of("{\"allow\":[]}");
	struct member_row m = member(1, false, 0);

	(void)state;
	for (uint64_t d = 1; d < READER_MAX_DELIVERIES; d++) {
		assert_int_equal(reader_decide(&e, &none, &m, d), V_RETRY);
		assert_int_equal(reader_decide(&e, &bad, &m, d), V_RETRY);
	}
	assert_int_equal(reader_decide(&e, &none, &m, READER_MAX_DELIVERIES), V_GIVE_UP);
	assert_int_equal(reader_decide(&e, &none, &m, READER_MAX_DELIVERIES + 3), V_GIVE_UP);
	acl_row_free(&bad);
}

/* "An entry addressed to a retired lifecycle is dropped and removed from
 * the store the first time the reader meets it." */
static void
test_retired_lifecycle_is_removed_at_first_meeting(void **state)
{
	struct entry e = entry_of("room", 5, REASON_DURABLE);
	struct acl_row r = acl_of("{\"allowSubscribe\":[\"room\"],\"retired\":true}");
	struct member_row m = member(1, false, 0);

	(void)state;
	assert_int_equal(reader_decide(&e, &r, &m, 1), V_RETIRED);
	assert_int_equal(reader_decide(&e, &r, NULL, 1), V_RETIRED);
	acl_row_free(&r);
}

/* "re-authorizes every (instance, channel, message) entry against the
 * member's current read ACL": narrowed to [] or not covering → dropped. */
static void
test_entry_outside_the_current_acl_is_dropped(void **state)
{
	struct entry e = entry_of("room", 5, REASON_DURABLE);
	struct acl_row empty = acl_of("{\"allowSubscribe\":[]}");
	struct acl_row other = acl_of("{\"allowSubscribe\":[\"ops.>\",\"hall\"]}");
	struct member_row m = member(1, false, 0);

	(void)state;
	assert_int_equal(reader_decide(&e, &empty, &m, 1), V_DROP);
	assert_int_equal(reader_decide(&e, &other, &m, 1), V_DROP);
	acl_row_free(&empty);
	acl_row_free(&other);
}

/* "A leave is a hard read boundary": the post's sequence must sit between
 * the join and leave cursors of the member row as it is now. */
static void
test_durable_entry_needs_the_membership_interval(void **state)
{
	struct acl_row a = acl_of("{\"allowSubscribe\":[\"room\"]}");
	struct member_row left = member(3, true, 7);

	(void)state;
	struct entry at_join = entry_of("room", 3, REASON_DURABLE);
	struct entry inside = entry_of("room", 4, REASON_DURABLE);
	struct entry at_leave = entry_of("room", 7, REASON_DURABLE);
	struct entry after = entry_of("room", 8, REASON_DURABLE);
	assert_int_equal(reader_decide(&at_join, &a, &left, 1), V_DROP);
	assert_int_equal(reader_decide(&inside, &a, &left, 1), V_DELIVER);
	assert_int_equal(reader_decide(&at_leave, &a, &left, 1), V_DELIVER);
	assert_int_equal(reader_decide(&after, &a, &left, 1), V_DROP);
	/* No row at all: not a member, nothing surfaced. */
	assert_int_equal(reader_decide(&inside, &a, NULL, 1), V_DROP);
	acl_row_free(&a);
}

/* A live-channel mention needs only the ACL: it is how "a mention reaches
 * an authorized peer who isn't currently joined". */
static void
test_mention_needs_only_the_acl(void **state)
{
	struct acl_row a = acl_of("{\"allowSubscribe\":[\"room.*\"]}");
	struct entry e = entry_of("room.a", 9, REASON_MENTION);
	struct entry no = entry_of("hall", 9, REASON_MENTION);

	(void)state;
	assert_int_equal(reader_decide(&e, &a, NULL, 1), V_DELIVER);
	assert_int_equal(reader_decide(&no, &a, NULL, 1), V_DROP);
	acl_row_free(&a);
}

/* "A failed delete leaves the entry pending, so it is retried and given
 * up after ten redeliveries." */
static void
test_failed_effect_is_retried_then_given_up(void **state)
{
	(void)state;
	assert_int_equal(reader_after_failure(1), V_RETRY);
	assert_int_equal(reader_after_failure(READER_MAX_DELIVERIES - 1), V_RETRY);
	assert_int_equal(reader_after_failure(READER_MAX_DELIVERIES), V_GIVE_UP);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_owner_is_retried_then_given_up),
		cmocka_unit_test(test_retired_lifecycle_is_removed_at_first_meeting),
		cmocka_unit_test(test_entry_outside_the_current_acl_is_dropped),
		cmocka_unit_test(test_durable_entry_needs_the_membership_interval),
		cmocka_unit_test(test_mention_needs_only_the_acl),
		cmocka_unit_test(test_failed_effect_is_retried_then_given_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
