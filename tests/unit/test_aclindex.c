/*
 * Issue 39: the read-ACL index holds the rows a worker met (lib/nats/kvheld.h,
 * its own unit test): live rows and retirements, never no row or one that
 * does not decode; aclindex_get answers live rows only; a row held needs no
 * read. What an alias's rows say is held until a write of any of them, and
 * a read of them raced by one is not kept. Run under valgrind.
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
#define TOMB "{\"allowSubscribe\":[],\"retired\":true}"

static void
apply(struct aclindex *x, const char *key, const char *value, uint64_t rev)
{
	struct kvw_entry e = { .key = key, .value = value, .len = value ? strlen(value) : 0,
		.revision = rev };

	kvheld_apply(&x->rows, &e);
}

/* A read of lc as the bucket answers it: value written at rev. */
static void
read_as(struct aclindex *x, const char *lc, const char *value, uint64_t rev)
{
	assert_int_equal(kvheld_read_begin(&x->rows, lc), 0);
	kvheld_read_done(&x->rows, lc, value, value ? strlen(value) : 0, rev);
}

static void
init(struct aclindex *x)
{
	aclindex_init(x);
	pthread_mutex_init(&x->rows.tail.mu, NULL); /* the index's calls take the lock */
}

static void
fini(struct aclindex *x)
{
	pthread_mutex_destroy(&x->rows.tail.mu);
	aclindex_free(x);
}

/* Live rows and retirements are held; aclindex_get answers live ones. */
static void
test_live_rows_and_retirements_are_held(void **state)
{
	struct aclindex x;
	const struct acl_row *r;
	struct acl_row got[2];
	const char *lcs[2] = { LC, BOB };
	char err[256];

	(void)state;
	init(&x);
	read_as(&x, LC, LIVE, 1);
	read_as(&x, BOB, TOMB, 2);
	assert_non_null(r = aclindex_get(&x, LC));
	assert_int_equal(r->npatterns, 2);
	assert_true(acl_covers(r, "ops.x"));
	assert_null(aclindex_get(&x, BOB)); /* held, but not live */
	r = kvheld_get(&x.rows, BOB);
	assert_true(r != NULL && r->state == ACL_RETIRED);
	/* Both held: read without the bucket (the index has no connection). */
	assert_int_equal(aclindex_read_many(&x, lcs, 2, got, err, sizeof(err)), 0);
	assert_int_equal(got[0].state, ACL_LIVE);
	assert_true(acl_covers(&got[0], "general"));
	assert_int_equal(got[1].state, ACL_RETIRED);
	acl_row_free(&got[0]);
	acl_row_free(&got[1]);
	assert_int_equal(x.rows.reads, 0);
	/* A retirement written drops the live row held. */
	apply(&x, LC, TOMB, 3);
	assert_null(kvheld_get(&x.rows, LC));
	fini(&x);
}

/* No row, and one that does not decode, are never held: read again. */
static void
test_no_row_and_undecodable_are_not_held(void **state)
{
	struct aclindex x;

	(void)state;
	init(&x);
	read_as(&x, LC, NULL, 0);
	read_as(&x, LC, "{\"allowSubscribe\":\"general\"}", 4);
	read_as(&x, LC, "not json", 5);
	assert_int_equal(x.rows.cur.count + x.rows.old.count, 0);
	assert_int_equal(x.rows.asking.count, 0);
	fini(&x);
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
	init(&x);
	acl_row_parse(LIVE, strlen(LIVE), &a.row);
	assert_int_equal(kvheld_read_begin(&x.rows, "local.alice"), 0);
	aclindex_alias_done(&x, "local.alice", &a);
	/* Held: answered without the bucket. */
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
	assert_int_equal(kvheld_read_begin(&x.rows, "local.alice"), 0);
	apply(&x, LC, TOMB, 3);
	aclindex_alias_done(&x, "local.alice", &a);
	assert_null(strmap_get(&x.aliases, "local.alice"));
	/* A reset forgets the aliases held. */
	assert_int_equal(kvheld_read_begin(&x.rows, "local.alice"), 0);
	aclindex_alias_done(&x, "local.alice", &a);
	assert_int_equal(x.aliases.count, 1);
	kvheld_reset(&x.rows);
	assert_int_equal(x.aliases.count, 0);
	/* A key that is not an alias's is refused before any read. */
	assert_int_equal(aclindex_alias(&x, "local", &got, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not an alias"));
	assert_int_equal(aclindex_alias(&x, "local.al*ce", &got, err, sizeof(err)), -1);
	assert_int_equal(x.rows.asking.count, 0);
	aclindex_alias_free(&a);
	fini(&x);
}

/* Aliases held are bounded: past the bound, forgotten and read again. */
static void
test_held_aliases_are_bounded(void **state)
{
	struct aclindex x;
	struct aclindex_alias a = { .retired = true, .retired_uid = "0123456789abcdefghijklmnop" };
	char alias[64];

	(void)state;
	init(&x);
	for (int i = 0; i <= ACLINDEX_ALIASES_MAX; i++) {
		snprintf(alias, sizeof(alias), "local.a%d", i);
		assert_int_equal(kvheld_read_begin(&x.rows, alias), 0);
		aclindex_alias_done(&x, alias, &a);
	}
	assert_int_equal(x.aliases.count, 1);
	assert_non_null(strmap_get(&x.aliases, alias));
	fini(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live_rows_and_retirements_are_held),
		cmocka_unit_test(test_no_row_and_undecodable_are_not_held),
		cmocka_unit_test(test_an_alias_read_is_held_until_a_write_of_its_rows),
		cmocka_unit_test(test_held_aliases_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
