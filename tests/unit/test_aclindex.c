/*
 * Issue 39: the read-ACL index holds the rows a worker met, read exactly
 * from the bucket, and loads nothing at start; a tail of the bucket drops
 * a held row at a write after the one it was read at. A read is kept
 * exactly (never when a write of its key came while it was read, nor across
 * a tail's reset) and up to a bound. The index's steps driven by hand:
 * reads as the bucket would answer them, writes as the tail gives them.
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

#include "lib/nats/kvwatch.h"
#include "lib/wire/aclindex.h"

#define LC "local.alice.0123456789abcdefghijklmnop"
#define BOB "local.bob.0123456789abcdefghijklmnop"
#define LIVE "{\"allowSubscribe\":[\"general\",\"ops.*\"]}"
#define NARROW "{\"allowSubscribe\":[\"ops.*\"]}"
#define TOMB "{\"allowSubscribe\":[],\"retired\":true}"

static void
apply(struct aclindex *x, const char *key, const char *value, uint64_t rev)
{
	struct kvw_entry e = { .key = key, .value = value, .len = value ? strlen(value) : 0,
		.revision = rev };

	aclindex_apply(x, &e);
}

/* A read of lc as the bucket answers it: value written at rev. */
static void
read_as(struct aclindex *x, const char *lc, const char *value, uint64_t rev)
{
	struct acl_row r;

	assert_int_equal(aclindex_read_begin(x, lc), 0);
	acl_row_parse(value, value ? strlen(value) : 0, &r);
	aclindex_read_done(x, lc, &r, rev);
	acl_row_free(&r);
}

/* Nothing is held until it is read; a live row read is held, decoded. */
static void
test_a_live_row_read_is_held(void **state)
{
	struct aclindex x;
	const struct acl_row *r;

	(void)state;
	aclindex_init(&x);
	assert_null(aclindex_get(&x, LC));
	/* Writes of rows nobody read hold nothing. */
	apply(&x, LC, LIVE, 1);
	apply(&x, BOB, TOMB, 2);
	assert_int_equal(x.rows.count + x.old.count + x.tombs.count, 0);
	read_as(&x, LC, LIVE, 1);
	assert_non_null(r = aclindex_get(&x, LC));
	assert_int_equal(r->state, ACL_LIVE);
	assert_int_equal(r->npatterns, 2);
	assert_true(acl_covers(r, "general"));
	assert_int_equal(x.asking.count, 0);
	aclindex_free(&x);
}

/* A held row goes at a write after the one it was read at (narrowed,
 * retired, deleted); a write the read already saw, brought late by the
 * tail, changes nothing. */
static void
test_a_later_write_drops_a_held_row(void **state)
{
	struct aclindex x;
	const struct acl_row *r;

	(void)state;
	aclindex_init(&x);
	read_as(&x, LC, NARROW, 5);
	apply(&x, LC, LIVE, 3);   /* older than the read */
	apply(&x, LC, NARROW, 5); /* the one read */
	assert_non_null(r = aclindex_get(&x, LC));
	assert_false(acl_covers(r, "general"));
	apply(&x, LC, LIVE, 6);   /* widened after the read */
	assert_null(aclindex_get(&x, LC));
	read_as(&x, LC, LIVE, 6);
	assert_true(acl_covers(aclindex_get(&x, LC), "general"));
	apply(&x, LC, TOMB, 7);
	assert_null(aclindex_get(&x, LC));
	read_as(&x, LC, NARROW, 8);  /* live again (the manager's mistake) */
	apply(&x, LC, NULL, 9);      /* deleted */
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.rows.count + x.old.count, 0);
	aclindex_free(&x);
}

static void
test_a_read_retirement_is_held(void **state)
{
	struct aclindex x;

	(void)state;
	aclindex_init(&x);
	read_as(&x, LC, TOMB, 4);
	assert_non_null(strmap_get(&x.tombs, LC));
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.asking.count, 0);
	/* Any write of the key forgets it (a purge makes it no row). */
	apply(&x, LC, NULL, 9);
	assert_null(strmap_get(&x.tombs, LC));
	/* No row, an undecodable one, or a failed read, is never held. */
	read_as(&x, LC, NULL, 0);
	read_as(&x, LC, "{\"allowSubscribe\":\"general\"}", 10);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, NULL, 0);
	assert_int_equal(x.tombs.count + x.rows.count, 0);
	assert_int_equal(x.asking.count, 0);
	aclindex_free(&x);
}

static void
done_as(struct aclindex *x, const char *lc, const char *value, uint64_t rev)
{
	struct acl_row r;

	acl_row_parse(value, strlen(value), &r);
	aclindex_read_done(x, lc, &r, rev);
	acl_row_free(&r);
}

static void
test_a_read_raced_by_a_write_is_not_held(void **state)
{
	struct aclindex x;

	(void)state;
	aclindex_init(&x);
	/* A write of the key while it was read: the read may be older. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	apply(&x, LC, NARROW, 4);
	done_as(&x, LC, LIVE, 3);
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	apply(&x, LC, TOMB, 5);
	done_as(&x, LC, TOMB, 5);
	assert_int_equal(x.tombs.count, 0);
	/* A write of another key does not matter. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	apply(&x, BOB, LIVE, 6);
	done_as(&x, LC, TOMB, 5);
	assert_int_equal(x.tombs.count, 1);
	/* A tail's reset while it was read: writes may have been passed. */
	apply(&x, LC, NULL, 7);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_reset(&x);
	done_as(&x, LC, LIVE, 8);
	assert_null(aclindex_get(&x, LC));
	/* Two reads of one key at once: neither is held. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	done_as(&x, LC, LIVE, 8);
	done_as(&x, LC, LIVE, 8);
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.asking.count, 0);
	/* Three, overlapping, with a write between: a read that began after
	 * the write but overlaps one from before it is not held either. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* A */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* B */
	apply(&x, LC, NARROW, 9);                             /* W */
	done_as(&x, LC, LIVE, 8);                             /* A ends */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* C */
	done_as(&x, LC, LIVE, 8);                             /* B ends */
	done_as(&x, LC, NARROW, 9);                           /* C ends */
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.asking.count, 0);
	/* Alone again, after all that: held. */
	read_as(&x, LC, NARROW, 9);
	assert_non_null(aclindex_get(&x, LC));
	aclindex_free(&x);
}

/* What an alias's rows say is held until a write of any of them, and a
 * read of them under way is not kept. */
static void
test_an_alias_read_is_held_until_a_write_of_its_rows(void **state)
{
	struct aclindex x;
	struct aclindex_alias a = { .nlive = 1, .live = { "0123456789abcdefghijklmnop" } }, got;
	char err[256];

	(void)state;
	aclindex_init(&x);
	pthread_mutex_init(&x.mirror.mu, NULL); /* aclindex_alias takes the lock */
	acl_row_parse(LIVE, strlen(LIVE), &a.row);
	assert_int_equal(aclindex_read_begin(&x, "local.alice"), 0);
	aclindex_alias_done(&x, "local.alice", &a);
	/* Held: answered without the bucket (the index has no connection). */
	assert_int_equal(aclindex_alias(&x, "local.alice", &got, err, sizeof(err)), 0);
	assert_int_equal(got.nlive, 1);
	assert_string_equal(got.live[0], "0123456789abcdefghijklmnop");
	assert_true(acl_covers(&got.row, "ops.x"));
	aclindex_alias_free(&got);
	apply(&x, BOB, LIVE, 1);
	assert_non_null(strmap_get(&x.aliases, "local.alice"));
	apply(&x, "local.alice.zzzzzzzzzzzzzzzzzzzzzzzzzz", LIVE, 2); /* a new lifecycle */
	assert_null(strmap_get(&x.aliases, "local.alice"));
	/* Raced by a write of one of its rows: not kept. */
	assert_int_equal(aclindex_read_begin(&x, "local.alice"), 0);
	apply(&x, LC, TOMB, 3);
	aclindex_alias_done(&x, "local.alice", &a);
	assert_null(strmap_get(&x.aliases, "local.alice"));
	/* A key that is not an alias's is refused before any read. */
	assert_int_equal(aclindex_alias(&x, "local", &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an alias"));
	assert_int_equal(aclindex_alias(&x, "local.al*ce", &got, err, sizeof(err)), -1);
	assert_int_equal(x.asking.count, 0);
	aclindex_alias_free(&a);
	pthread_mutex_destroy(&x.mirror.mu);
	aclindex_free(&x);
}

static void
test_reset_forgets_everything(void **state)
{
	struct aclindex x;
	struct aclindex_alias a = { .retired = true, .retired_uid = "0123456789abcdefghijklmnop" };

	(void)state;
	aclindex_init(&x);
	read_as(&x, LC, LIVE, 1);
	read_as(&x, BOB, TOMB, 2);
	assert_int_equal(aclindex_read_begin(&x, "local.carol"), 0);
	aclindex_alias_done(&x, "local.carol", &a);
	assert_int_equal(x.rows.count, 1);
	assert_int_equal(x.tombs.count, 1);
	assert_int_equal(x.aliases.count, 1);
	aclindex_reset(&x);
	assert_int_equal(x.rows.count + x.old.count + x.tombs.count + x.aliases.count, 0);
	aclindex_free(&x);
}

/* The rows held are bounded: two generations of half the bound; a row
 * used again moves to the newer, the older is dropped at a turn. */
static void
test_held_rows_are_bounded(void **state)
{
	struct aclindex x;
	char key[64], first[64];

	(void)state;
	aclindex_init(&x);
	snprintf(first, sizeof(first), "local.a0.0123456789abcdefghijklmnop");
	for (int i = 0; i < ACLINDEX_ROWS_MAX / 2; i++) {
		snprintf(key, sizeof(key), "local.a%d.0123456789abcdefghijklmnop", i);
		read_as(&x, key, LIVE, (uint64_t)i + 1);
	}
	assert_int_equal(x.rows.count, ACLINDEX_ROWS_MAX / 2);
	assert_int_equal(x.row_turns, 0);
	read_as(&x, "local.b.0123456789abcdefghijklmnop", LIVE, 1);
	assert_int_equal(x.row_turns, 1);
	assert_int_equal(x.rows.count, 1);
	assert_int_equal(x.old.count, ACLINDEX_ROWS_MAX / 2);
	/* Used again: moved to the newer generation. */
	assert_non_null(aclindex_get(&x, first));
	assert_int_equal(x.rows.count, 2);
	/* A write drops a row of the older generation too. */
	apply(&x, "local.a1.0123456789abcdefghijklmnop", NARROW, 1u << 30);
	assert_null(aclindex_get(&x, "local.a1.0123456789abcdefghijklmnop"));
	for (int i = 0; i < ACLINDEX_ROWS_MAX / 2; i++) {
		snprintf(key, sizeof(key), "local.c%d.0123456789abcdefghijklmnop", i);
		read_as(&x, key, LIVE, 1);
	}
	/* The second turn dropped what was not used since the first. */
	assert_int_equal(x.row_turns, 2);
	assert_non_null(aclindex_get(&x, first));
	assert_null(aclindex_get(&x, "local.a2.0123456789abcdefghijklmnop"));
	assert_true(x.rows.count + x.old.count <= ACLINDEX_ROWS_MAX);
	aclindex_free(&x);
}

static void
test_held_retirements_are_bounded(void **state)
{
	struct aclindex x;
	char key[64];

	(void)state;
	aclindex_init(&x);
	for (int i = 0; i <= ACLINDEX_TOMBS_MAX; i++) {
		snprintf(key, sizeof(key), "local.a%d.0123456789abcdefghijklmnop", i);
		read_as(&x, key, TOMB, 1);
	}
	/* The bound reached: forgotten at once (read again when met), the
	 * newest kept. */
	assert_int_equal(x.tomb_resets, 1);
	assert_int_equal(x.tombs.count, 1);
	assert_non_null(strmap_get(&x.tombs, key));
	aclindex_free(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_live_row_read_is_held),
		cmocka_unit_test(test_a_later_write_drops_a_held_row),
		cmocka_unit_test(test_a_read_retirement_is_held),
		cmocka_unit_test(test_a_read_raced_by_a_write_is_not_held),
		cmocka_unit_test(test_an_alias_read_is_held_until_a_write_of_its_rows),
		cmocka_unit_test(test_reset_forgets_everything),
		cmocka_unit_test(test_held_rows_are_bounded),
		cmocka_unit_test(test_held_retirements_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
