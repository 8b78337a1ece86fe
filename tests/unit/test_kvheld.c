/*
 * Issue 39: the rows a worker met, held exactly instead of a mirror of the
 * bucket (lib/nats/kvheld.h). Driven by hand: reads as the bucket would
 * answer them, writes as the tail gives them. A row is held once read, goes
 * at a write after the one it was read at and not at one before, is not
 * held when a write, a reset or another read raced its read, and the rows
 * held are bounded in two generations. Run under valgrind.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/nats/kvheld.h"
#include "lib/nats/kvwatch.h"

#define K "general/local.alice.0123456789abcdefghijklmnop"
#define OTHER "general/local.bob.0123456789abcdefghijklmnop"

/* A row "junk" does not decode; any other is held as its own copy. */
static void *
decode(const char *key, const char *value, size_t len)
{
	(void)key;
	if (value == NULL || (len == 4 && memcmp(value, "junk", 4) == 0))
		return NULL;
	return strndup(value, len);
}

static int resets; /* the owner's on_reset calls */

static void
on_reset(void *arg)
{
	(void)arg;
	resets++;
}

static void
init(struct kvheld *h, size_t max)
{
	kvheld_init(h, max, decode, free, NULL, on_reset, NULL);
}

static void
write_of(struct kvheld *h, const char *key, const char *value, uint64_t rev)
{
	struct kvw_entry e = { .key = key, .value = value, .len = value ? strlen(value) : 0,
		.revision = rev };

	kvheld_apply(h, &e);
}

static void
read_as(struct kvheld *h, const char *key, const char *value, uint64_t rev)
{
	assert_int_equal(kvheld_read_begin(h, key), 0);
	kvheld_read_done(h, key, value, value ? strlen(value) : 0, rev);
}

static size_t
count(const struct kvheld *h)
{
	return h->cur.count + h->old.count;
}

static void
test_a_row_read_is_held(void **state)
{
	struct kvheld h;

	(void)state;
	init(&h, 16);
	assert_null(kvheld_get(&h, K));
	write_of(&h, K, "a", 1); /* a write of a row nobody read holds nothing */
	assert_int_equal(count(&h), 0);
	read_as(&h, K, "a", 1);
	assert_string_equal(kvheld_get(&h, K), "a");
	/* No row, or one that does not decode: nothing held. */
	read_as(&h, OTHER, NULL, 0);
	read_as(&h, OTHER, "junk", 2);
	assert_null(kvheld_get(&h, OTHER));
	assert_int_equal(count(&h), 1);
	assert_int_equal(h.asking.count, 0);
	kvheld_free(&h);
}

static void
test_a_later_write_drops_a_held_row(void **state)
{
	struct kvheld h;

	(void)state;
	init(&h, 16);
	read_as(&h, K, "b", 5);
	write_of(&h, K, "a", 3); /* older than the read: the tail is behind */
	write_of(&h, K, "b", 5); /* the one read */
	assert_string_equal(kvheld_get(&h, K), "b");
	write_of(&h, K, "c", 6);
	assert_null(kvheld_get(&h, K));
	read_as(&h, K, "c", 6);
	write_of(&h, K, NULL, 7); /* deleted */
	assert_null(kvheld_get(&h, K));
	/* A read that answers older than what is held changes nothing. */
	read_as(&h, K, "d", 9);
	read_as(&h, K, "c", 6);
	assert_string_equal(kvheld_get(&h, K), "d");
	kvheld_free(&h);
}

static void
test_a_raced_read_is_not_held(void **state)
{
	struct kvheld h;

	(void)state;
	init(&h, 16);
	/* A write of the key while it was read. */
	assert_int_equal(kvheld_read_begin(&h, K), 0);
	write_of(&h, K, "b", 4);
	kvheld_read_done(&h, K, "a", 1, 3);
	assert_null(kvheld_get(&h, K));
	/* A write of another key does not matter. */
	assert_int_equal(kvheld_read_begin(&h, K), 0);
	write_of(&h, OTHER, "x", 5);
	kvheld_read_done(&h, K, "b", 1, 4);
	assert_string_equal(kvheld_get(&h, K), "b");
	/* A reset while it was read: writes may have been passed. */
	assert_int_equal(kvheld_read_begin(&h, OTHER), 0);
	resets = 0;
	kvheld_reset(&h);
	assert_int_equal(resets, 1);
	assert_int_equal(count(&h), 0);
	kvheld_read_done(&h, OTHER, "x", 1, 5);
	assert_null(kvheld_get(&h, OTHER));
	/* Two reads of one key at once: neither is held. */
	assert_int_equal(kvheld_read_begin(&h, K), 0);
	assert_int_equal(kvheld_read_begin(&h, K), 0);
	kvheld_read_done(&h, K, "b", 1, 4);
	kvheld_read_done(&h, K, "b", 1, 4);
	assert_null(kvheld_get(&h, K));
	/* Three, overlapping, with a write between: a read that began after
	 * the write but overlaps one from before it is not held either. */
	assert_int_equal(kvheld_read_begin(&h, K), 0);     /* A */
	assert_int_equal(kvheld_read_begin(&h, K), 0);     /* B */
	write_of(&h, K, "c", 6);                           /* W */
	kvheld_read_done(&h, K, "b", 1, 4);                /* A ends */
	assert_int_equal(kvheld_read_begin(&h, K), 0);     /* C */
	kvheld_read_done(&h, K, "b", 1, 4);                /* B ends */
	kvheld_read_done(&h, K, "c", 1, 6);                /* C ends */
	assert_null(kvheld_get(&h, K));
	assert_int_equal(h.asking.count, 0);
	/* An owner's own key marked changed: the read is not held. */
	assert_int_equal(kvheld_read_begin(&h, "local.alice"), 0);
	kvheld_changed(&h, "local.alice");
	assert_false(kvheld_read_end(&h, "local.alice"));
	assert_int_equal(kvheld_read_begin(&h, "local.alice"), 0);
	assert_true(kvheld_read_end(&h, "local.alice"));
	/* Alone again: held. */
	read_as(&h, K, "c", 6);
	assert_string_equal(kvheld_get(&h, K), "c");
	kvheld_free(&h);
}

/* Bounded: two generations of half; a row used again moves to the newer,
 * the older is dropped at a turn; a write drops a row of either. */
static void
test_held_rows_are_bounded(void **state)
{
	struct kvheld h;
	char key[64];

	(void)state;
	init(&h, 8);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "a%d", i);
		read_as(&h, key, "v", 1);
	}
	assert_int_equal(h.cur.count, 4);
	assert_int_equal(h.turns, 0);
	read_as(&h, "b", "v", 1);
	assert_int_equal(h.turns, 1);
	assert_int_equal(h.cur.count, 1);
	assert_int_equal(h.old.count, 4);
	assert_non_null(kvheld_get(&h, "a0")); /* used again: the newer generation */
	assert_int_equal(h.cur.count, 2);
	assert_non_null(strmap_get(&h.old, "a1"));
	write_of(&h, "a1", "w", 2);
	assert_null(kvheld_get(&h, "a1"));
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		read_as(&h, key, "v", 1);
	}
	/* The second turn dropped what was not used since the first. */
	assert_int_equal(h.turns, 2);
	assert_non_null(kvheld_get(&h, "a0"));
	assert_non_null(kvheld_get(&h, "b"));
	assert_null(kvheld_get(&h, "a2"));
	assert_null(kvheld_get(&h, "a3"));
	assert_true(count(&h) <= 8);
	kvheld_free(&h);
}

/* A load under way (kvheld_load) is raced by a write of a key its pattern
 * matches, or a reset; not by another key's write. */
static void
test_a_load_is_raced_by_a_matching_write(void **state)
{
	struct kvheld h;
	struct kvheld_ask *a = calloc(1, sizeof(*a));

	(void)state;
	init(&h, 16);
	assert_non_null(a);
	a->readers = 1;
	assert_int_equal(strmap_put(&h.loading, "general/local.*.*", a, NULL), 0);
	write_of(&h, "general/u_x.alice.uid", "v", 1);   /* another owner */
	write_of(&h, "general.x/local.alice.uid", "v", 2); /* another channel */
	write_of(&h, "general/local.alice", "v", 3);     /* too few tokens */
	assert_false(a->changed);
	write_of(&h, K, "v", 4);
	assert_true(a->changed);
	a->changed = false;
	kvheld_reset(&h);
	assert_true(a->changed);
	kvheld_free(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_row_read_is_held),
		cmocka_unit_test(test_a_later_write_drops_a_held_row),
		cmocka_unit_test(test_a_raced_read_is_not_held),
		cmocka_unit_test(test_held_rows_are_bounded),
		cmocka_unit_test(test_a_load_is_raced_by_a_matching_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
