/*
 * Issue 39: the read-ACL index keeps live rows only; a retirement read
 * from the bucket is remembered exactly (never when a write of its key
 * came while it was read, nor across a watch's reset) and up to a bound.
 * The mirror's callbacks driven with entries as the watch gives them.
 */
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
#define LIVE "{\"allowSubscribe\":[\"general\",\"ops.*\"]}"
#define NARROW "{\"allowSubscribe\":[\"ops.*\"]}"
#define TOMB "{\"allowSubscribe\":[],\"retired\":true}"
#define JUNK "{\"allowSubscribe\":\"general\"}"

static struct kvw_entry
put(const char *key, const char *value, uint64_t rev)
{
	struct kvw_entry e = { .key = key, .value = value, .len = value ? strlen(value) : 0,
		.revision = rev };
	return e;
}

static void
apply(struct aclindex *x, const char *key, const char *value, uint64_t rev)
{
	struct kvw_entry e = put(key, value, rev);

	aclindex_apply(x, &e);
}

static void
test_keep_live_rows_only(void **state)
{
	struct kvw_entry e;

	(void)state;
	e = put(LC, LIVE, 1);
	assert_true(aclindex_keep(NULL, &e));
	e = put(LC, TOMB, 2);
	assert_false(aclindex_keep(NULL, &e));
	/* "retired" in a live row's channel names: decoded, and kept. */
	e = put(LC, "{\"allowSubscribe\":[\"retired\"]}", 3);
	assert_true(aclindex_keep(NULL, &e));
	e = put(LC, "{\"allowSubscribe\":[],\"retired\":false}", 4);
	assert_true(aclindex_keep(NULL, &e));
	e = put(LC, NULL, 5);
	assert_false(aclindex_keep(NULL, &e));
}

static void
test_insert_update_retire_delete(void **state)
{
	struct aclindex x;
	const struct acl_row *r;

	(void)state;
	aclindex_init(&x, true);
	apply(&x, LC, LIVE, 1);
	assert_non_null(r = aclindex_get(&x, LC));
	assert_int_equal(r->state, ACL_LIVE);
	assert_int_equal(r->npatterns, 2);
	assert_true(acl_covers(r, "general"));
	/* Narrowed: the same key, the new row. */
	apply(&x, LC, NARROW, 2);
	assert_non_null(r = aclindex_get(&x, LC));
	assert_false(acl_covers(r, "general"));
	assert_true(acl_covers(r, "ops.x"));
	/* Retired: no live row any more, nothing held for it. */
	apply(&x, LC, TOMB, 3);
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.rows.count, 0);
	assert_int_equal(x.tombs.count, 0);
	/* An undecodable row and a delete hold nothing either. */
	apply(&x, LC, JUNK, 4);
	assert_null(aclindex_get(&x, LC));
	apply(&x, LC, LIVE, 5);
	apply(&x, LC, NULL, 6);
	assert_null(aclindex_get(&x, LC));
	assert_int_equal(x.rows.count, 0);
	aclindex_free(&x);
}

static void
test_a_read_retirement_is_remembered(void **state)
{
	struct aclindex x;
	struct acl_row tomb = { .state = ACL_RETIRED }, none = { .state = ACL_UNKNOWN };

	(void)state;
	aclindex_init(&x, true);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, &tomb);
	assert_non_null(strmap_get(&x.tombs, LC));
	assert_int_equal(x.asking.count, 0);
	/* Any write of the key forgets it (a purge makes it no row). */
	apply(&x, LC, NULL, 9);
	assert_null(strmap_get(&x.tombs, LC));
	/* No row, or a failed read, is never remembered. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, &none);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, NULL);
	assert_int_equal(x.tombs.count, 0);
	assert_int_equal(x.asking.count, 0);
	aclindex_free(&x);
}

static void
test_a_read_raced_by_a_write_is_not_remembered(void **state)
{
	struct aclindex x;
	struct acl_row tomb = { .state = ACL_RETIRED };

	(void)state;
	aclindex_init(&x, true);
	/* A write of the key while it was read: the read is older. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	apply(&x, LC, TOMB, 4);
	aclindex_read_done(&x, LC, &tomb);
	assert_int_equal(x.tombs.count, 0);
	/* A write of another key does not matter. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	apply(&x, "local.bob.0123456789abcdefghijklmnop", LIVE, 5);
	aclindex_read_done(&x, LC, &tomb);
	assert_int_equal(x.tombs.count, 1);
	/* A watch's reset while it was read: writes may have been passed. */
	apply(&x, LC, NULL, 6);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_reset(&x);
	aclindex_read_done(&x, LC, &tomb);
	assert_int_equal(x.tombs.count, 0);
	/* Two reads of one key at once: neither is remembered. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, &tomb);
	aclindex_read_done(&x, LC, &tomb);
	assert_int_equal(x.tombs.count, 0);
	assert_int_equal(x.asking.count, 0);
	/* Three, overlapping, with a write between (a review's case): a read
	 * that began after the write but overlaps one from before it is not
	 * remembered either. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* A */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* B */
	apply(&x, LC, NULL, 7);                               /* W */
	aclindex_read_done(&x, LC, &tomb);                    /* A ends */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);     /* C */
	aclindex_read_done(&x, LC, &tomb);                    /* B ends */
	aclindex_read_done(&x, LC, &tomb);                    /* C ends */
	assert_int_equal(x.tombs.count, 0);
	assert_int_equal(x.asking.count, 0);
	/* Alone again, after all that: remembered. */
	assert_int_equal(aclindex_read_begin(&x, LC), 0);
	aclindex_read_done(&x, LC, &tomb);
	assert_int_equal(x.tombs.count, 1);
	aclindex_free(&x);
}

/* What an alias's rows said is forgotten at any write of one of its
 * lifecycles' rows, and a read of them under way is not remembered. */
static void
test_an_alias_read_is_forgotten_at_a_write_of_its_rows(void **state)
{
	struct aclindex x;
	struct aclindex_alias *a;

	(void)state;
	aclindex_init(&x, true);
	assert_non_null(a = calloc(1, sizeof(*a)));
	a->retired = true;
	assert_int_equal(strmap_put(&x.aliases, "local.alice", a, NULL), 0);
	apply(&x, "local.bob.0123456789abcdefghijklmnop", LIVE, 1);
	assert_non_null(strmap_get(&x.aliases, "local.alice"));
	apply(&x, LC, LIVE, 2); /* a new lifecycle of local.alice */
	assert_null(strmap_get(&x.aliases, "local.alice"));
	assert_int_equal(aclindex_read_begin(&x, "local.alice"), 0);
	apply(&x, LC, TOMB, 3);
	assert_false(aclindex_read_end(&x, "local.alice"));
	assert_int_equal(aclindex_read_begin(&x, "local.alice"), 0);
	assert_true(aclindex_read_end(&x, "local.alice"));
	assert_int_equal(x.asking.count, 0);
	aclindex_free(&x);
}

/* The live lifecycles of an alias, kept as rows come and go: one look-up
 * for the fan-out's mentions and the registry's callers. */
static void
test_an_alias_lives_are_kept(void **state)
{
	struct aclindex x;
	const char *lcs[2];
	const char *other = "local.alice.zzzzzzzzzzzzzzzzzzzzzzzzzz";

	(void)state;
	aclindex_init(&x, true);
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 0);
	apply(&x, LC, LIVE, 1);
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 1);
	assert_string_equal(lcs[0], LC);
	assert_ptr_equal(lcs[0], strmap_key(&x.rows, LC)); /* the rows map's own key */
	apply(&x, LC, NARROW, 2); /* still live: still one */
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 1);
	assert_ptr_equal(lcs[0], strmap_key(&x.rows, LC));
	apply(&x, other, LIVE, 3); /* the manager's mistake: two at once */
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 2);
	apply(&x, LC, TOMB, 4);
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 1);
	assert_string_equal(lcs[0], other);
	apply(&x, other, NULL, 5);
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 0);
	assert_int_equal(x.lives.count, 0);
	/* A key that is not a lifecycle is a row, but no alias's. */
	apply(&x, "local.alice.NOT-A-UID", LIVE, 6);
	assert_int_equal(aclindex_alias_lives(&x, "local.alice", lcs, 2), 0);
	apply(&x, LC, LIVE, 7);
	aclindex_reset(&x);
	assert_int_equal(x.lives.count, 0);
	aclindex_free(&x);
}

static void
test_reset_forgets_everything(void **state)
{
	struct aclindex x;
	struct acl_row tomb = { .state = ACL_RETIRED };

	(void)state;
	aclindex_init(&x, true);
	apply(&x, LC, LIVE, 1);
	assert_int_equal(aclindex_read_begin(&x, "local.bob.0123456789abcdefghijklmnop"), 0);
	aclindex_read_done(&x, "local.bob.0123456789abcdefghijklmnop", &tomb);
	assert_int_equal(x.rows.count, 1);
	assert_int_equal(x.tombs.count, 1);
	aclindex_reset(&x);
	assert_int_equal(x.rows.count, 0);
	assert_int_equal(x.tombs.count, 0);
	aclindex_free(&x);
}

static void
test_remembered_retirements_are_bounded(void **state)
{
	struct aclindex x;
	struct acl_row tomb = { .state = ACL_RETIRED };
	char key[64];

	(void)state;
	aclindex_init(&x, true);
	for (int i = 0; i <= ACLINDEX_TOMBS_MAX; i++) {
		snprintf(key, sizeof(key), "local.a%d.0123456789abcdefghijklmnop", i);
		assert_int_equal(aclindex_read_begin(&x, key), 0);
		aclindex_read_done(&x, key, &tomb);
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
		cmocka_unit_test(test_keep_live_rows_only),
		cmocka_unit_test(test_insert_update_retire_delete),
		cmocka_unit_test(test_a_read_retirement_is_remembered),
		cmocka_unit_test(test_a_read_raced_by_a_write_is_not_remembered),
		cmocka_unit_test(test_an_alias_read_is_forgotten_at_a_write_of_its_rows),
		cmocka_unit_test(test_an_alias_lives_are_kept),
		cmocka_unit_test(test_reset_forgets_everything),
		cmocka_unit_test(test_remembered_retirements_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
