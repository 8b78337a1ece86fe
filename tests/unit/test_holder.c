/*
 * The lease holder's record (supervisor/holder.h), issue 42: "On start, a
 * daemon that finds the row held by an incarnation it can prove dead (its
 * own earlier process on this machine: the same machine id, and that
 * process gone or the machine rebooted since, recorded where only this
 * service writes) replaces the row [...] Any doubt (another machine, a
 * record it cannot trust, a revision that moved) keeps today's refusal."
 * The decision and the record's parse, pure; and this process's own record
 * read back (it runs: never dead).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/holder.h"

static struct holder_rec
rec(void)
{
	struct holder_rec r = { .pid = 4242, .start = 777 };

	snprintf(r.holder, sizeof(r.holder), "local.UDELIVERY");
	snprintf(r.incarnation, sizeof(r.incarnation), "abc123");
	snprintf(r.machine, sizeof(r.machine), "m1");
	snprintf(r.boot, sizeof(r.boot), "b1");
	return r;
}

static struct lease_row
row(const char *incarnation)
{
	struct lease_row w = { .since = 1 };

	snprintf(w.holder, sizeof(w.holder), "local.UDELIVERY");
	snprintf(w.incarnation, sizeof(w.incarnation), "%s", incarnation);
	return w;
}

static void
test_only_this_machines_dead_holder_is_proved_dead(void **state)
{
	struct holder_rec r = rec();
	struct lease_row w = row("abc123");
	char why[256];

	(void)state;
	/* Gone, or its pid another process's now, or the machine rebooted. */
	assert_true(holder_proves_dead(&r, &w, "m1", "b1", -1, 0, why, sizeof(why)));
	assert_string_equal(why, "pid 4242 is gone");
	assert_true(holder_proves_dead(&r, &w, "m1", "b1", 0, 778, why, sizeof(why)));
	assert_string_equal(why, "pid 4242 is another process now");
	assert_true(holder_proves_dead(&r, &w, "m1", "b2", 0, 777, why, sizeof(why)));
	assert_string_equal(why, "the machine booted since pid 4242 held it");
	/* Any doubt: it runs, another machine, another row. */
	assert_false(holder_proves_dead(&r, &w, "m1", "b1", 0, 777, why, sizeof(why)));
	assert_string_equal(why, "pid 4242 still runs");
	assert_false(holder_proves_dead(&r, &w, "m2", "b1", -1, 0, why, sizeof(why)));
	assert_false(holder_proves_dead(&r, &w, "m2", "b2", -1, 0, why, sizeof(why)));
	/* A boot id unknown (ProcSubset=pid) proves nothing by itself. */
	assert_false(holder_proves_dead(&r, &w, "m1", "", 0, 777, why, sizeof(why)));
	assert_true(holder_proves_dead(&r, &w, "m1", "", -1, 0, why, sizeof(why)));
	struct lease_row other = row("def456");
	assert_false(holder_proves_dead(&r, &other, "m1", "b1", -1, 0, why, sizeof(why)));
	snprintf(other.incarnation, sizeof(other.incarnation), "abc123");
	snprintf(other.holder, sizeof(other.holder), "local.UOTHER");
	assert_false(holder_proves_dead(&r, &other, "m1", "b1", -1, 0, why, sizeof(why)));
}

static void
test_a_record_is_read_strictly(void **state)
{
	struct holder_rec r;
	char err[256];
	const char good[] = "{\"holder\":\"local.U\",\"incarnation\":\"abc\",\"machine\":\"m\","
	    "\"boot\":\"b\",\"pid\":99,\"start\":5}";

	(void)state;
	assert_int_equal(holder_record_parse(good, strlen(good), &r, err, sizeof(err)), 0);
	assert_int_equal(r.pid, 99);
	assert_true(r.start == 5);
	const char *bad[] = {
		"[]",
		"{\"holder\":\"local.U\",\"incarnation\":\"abc\",\"machine\":\"m\",\"boot\":\"b\","
		    "\"pid\":1,\"start\":5}",
		"{\"holder\":\"local.U\",\"incarnation\":\"a b\",\"machine\":\"m\",\"boot\":\"b\","
		    "\"pid\":99,\"start\":5}",
		"{\"holder\":\"local.U\",\"incarnation\":\"abc\",\"machine\":\"m\",\"boot\":\"b\","
		    "\"pid\":99}",
		"{\"holder\":\"local.U\",\"incarnation\":\"abc\",\"machine\":\"m\",\"boot\":\"b\","
		    "\"pid\":99,\"start\":5,\"pid\":98}",
	};
	const char *field[] = { "not a JSON object", "pid", "incarnation", "start",
		"not a JSON object" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(holder_record_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)), -1);
		if (strstr(err, field[i]) == NULL)
			fail_msg("record %zu: \"%s\" does not name %s", i, err, field[i]);
	}
}

/* This process's own record: written 0600, read back, never proved dead
 * (it runs); made readable by others, or a link, it is not trusted. */
static void
test_a_running_holders_record_proves_nothing(void **state)
{
	char dir[] = "/tmp/test_holder.XXXXXX", path[128], link[128], err[256], why[256];
	struct lease_row w = row("inc-1");

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/holder.json", dir);
	snprintf(link, sizeof(link), "%s/link.json", dir);
	if (holder_record_write(path, "local.UDELIVERY", "inc-1", err, sizeof(err)) != 0) {
		/* No /etc/machine-id in this sandbox: nothing to prove here. */
		rmdir(dir);
		skip();
	}
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_false(holder_record_proves_dead(path, &w, why, sizeof(why)));
	assert_non_null(strstr(why, "still runs"));
	assert_int_equal(chmod(path, 0644), 0);
	assert_false(holder_record_proves_dead(path, &w, why, sizeof(why)));
	assert_non_null(strstr(why, "not a file of this user's alone"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(symlink(path, link), 0);
	assert_false(holder_record_proves_dead(link, &w, why, sizeof(why)));
	assert_non_null(strstr(why, "no record"));
	holder_record_remove_if_ours(path, "inc-2");
	assert_int_equal(access(path, F_OK), 0);
	holder_record_remove_if_ours(path, "inc-1");
	assert_int_not_equal(access(path, F_OK), 0);
	unlink(link);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_only_this_machines_dead_holder_is_proved_dead),
		cmocka_unit_test(test_a_record_is_read_strictly),
		cmocka_unit_test(test_a_running_holders_record_proves_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
