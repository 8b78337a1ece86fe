/*
 * What a process costs (lib/procstat.h): /proc/<pid>/stat's fields read
 * into RSS bytes and CPU seconds. Issue 29: "process: the supervisor's and
 * each worker's RSS and CPU seconds".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/procstat.h"

#define PAGE 4096L
#define TICKS 100L

/* The shape of a real line (a `cat`'s, comm changed): utime (field 14) 150,
 * stime (15) 50, rss (24) 412 pages; tpgid (8) is -1 as in a real one. */
#define STAT_TAIL "S 25558 25558 15217 0 -1 4194304 101 0 0 0 150 50 0 0 20 0 1 0 " \
	"2326305 3133440 412 18446744073709551615 94168654254080 94168654273961 " \
	"140727265975504 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94168654289968 " \
	"94168654291584 94169011789824 140727265978823 140727265978843 " \
	"140727265978843 140727265980395 0\n"

static int
parse(const char *text, struct procstat *ps)
{
	/* An exactly-sized copy without a NUL: "need not end in NUL". */
	size_t len = strlen(text);
	char *p = malloc(len > 0 ? len : 1);
	int rc;

	assert_non_null(p);
	memcpy(p, text, len);
	rc = procstat_parse(p, len, PAGE, TICKS, ps);
	free(p);
	return rc;
}

/* "comm may hold spaces and ')' itself, the fields follow the last ')'". */
static void
test_fields_follow_the_last_parenthesis(void **state)
{
	static const char *const lines[] = {
		"25560 (cat) " STAT_TAIL,
		"123 (a) b) " STAT_TAIL,
		"123 (a) S 1 (x) " STAT_TAIL,
		"7 () " STAT_TAIL,
		"7 (()) " STAT_TAIL,
	};
	struct procstat ps;

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		memset(&ps, 0xa5, sizeof(ps));
		assert_int_equal(parse(lines[i], &ps), 0);
		/* rss pages x page size; (utime + stime) / ticks. */
		assert_int_equal(ps.rss_bytes, 412 * PAGE);
		assert_true(ps.cpu_seconds == 2.0);
	}
}

static void
test_units_are_bytes_and_seconds(void **state)
{
	struct procstat ps;
	char line[1024];

	(void)state;
	assert_int_equal(procstat_parse("1 (x) " STAT_TAIL, strlen("1 (x) " STAT_TAIL), 16384, 250,
	    &ps), 0);
	assert_int_equal(ps.rss_bytes, 412 * 16384);
	assert_true(ps.cpu_seconds == 0.8);
	/* The last field needed, rss, may end the text. */
	snprintf(line, sizeof(line), "1 (x) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 7");
	assert_int_equal(parse(line, &ps), 0);
	assert_int_equal(ps.rss_bytes, 7 * PAGE);
	assert_true(ps.cpu_seconds == 0.07);
	/* The state and the start time (field 22: a pid's identity beside its
	 * number, supervisor/holder.h). */
	assert_int_equal(ps.state, 'S');
	assert_true(ps.start_ticks == 5);
	snprintf(line, sizeof(line), "1 (x) Z 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 9 6 7");
	assert_int_equal(parse(line, &ps), 0);
	assert_int_equal(ps.state, 'Z');
	assert_true(ps.start_ticks == 9);
}

/* "-1 when it does not have their shape". */
static void
test_malformed_lines_are_refused(void **state)
{
	static const char *const lines[] = {
		"",
		"25560 cat S 1 2 3",                               /* no ')' */
		"25560 (cat S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 7",
		"25560 (cat)",                                     /* nothing after */
		"25560 (cat) ",
		"25560 (cat)S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 7",
		"25560 (cat) SS 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 7",
		"25560 (cat) S",
		"25560 (cat) S ",
		/* Truncated: 20 of the 21 fields 4 to 24. */
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6",
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 ",
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6\n",
		/* Non-digits in a field. */
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3x 4 0 0 20 0 1 0 5 6 7",
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 seven",
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 ? 4 0 0 20 0 1 0 5 6 7",
		"25560 (cat) S 1 1 1 0 -1 0 0 0 0 0 3\t4 0 0 20 0 1 0 5 6 7",
	};
	struct procstat ps;

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		if (parse(lines[i], &ps) != -1)
			fail_msg("accepted: \"%s\"", lines[i]);
}

/* The text is bounded: 1024 bytes or more is not a stat line; nor is a
 * page size or tick rate that is not positive. */
static void
test_bounds_and_units_are_checked(void **state)
{
	char line[1100];
	struct procstat ps;
	size_t n;

	(void)state;
	n = (size_t)snprintf(line, sizeof(line), "1 (x) " STAT_TAIL);
	assert_int_equal(procstat_parse(line, n, 0, TICKS, &ps), -1);
	assert_int_equal(procstat_parse(line, n, -4096, TICKS, &ps), -1);
	assert_int_equal(procstat_parse(line, n, PAGE, 0, &ps), -1);
	/* A comm padded so the line is 1023 bytes: read; 1024: refused. */
	memset(line, ' ', sizeof(line));
	memcpy(line, "1 (", 3);
	n = strlen(") " STAT_TAIL);
	memcpy(line + 1023 - n, ") " STAT_TAIL, n);
	assert_int_equal(procstat_parse(line, 1023, PAGE, TICKS, &ps), 0);
	assert_int_equal(ps.rss_bytes, 412 * PAGE);
	memmove(line + 1024 - n, line + 1023 - n, n);
	assert_int_equal(procstat_parse(line, 1024, PAGE, TICKS, &ps), -1);
	assert_int_equal(procstat_parse(line, 1099, PAGE, TICKS, &ps), -1);
}

static pid_t
pid_max(void)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	long v = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld", &v), 1);
	fclose(f);
	return (pid_t)v;
}

/* "0, or -1 when pid runs no more". */
static void
test_read_of_this_process_and_of_none(void **state)
{
	struct procstat ps;
	pid_t child;
	int status;

	(void)state;
	memset(&ps, 0, sizeof(ps));
	assert_int_equal(procstat_read(getpid(), &ps), 0);
	assert_true(ps.rss_bytes > 0);
	assert_true(ps.rss_bytes % (uint64_t)sysconf(_SC_PAGESIZE) == 0);
	assert_true(ps.cpu_seconds >= 0);

	/* pid_max is one past the highest pid the kernel hands out. */
	assert_int_equal(procstat_read(pid_max(), &ps), -1);
	assert_int_equal(procstat_read(0, &ps), -1);
	assert_int_equal(procstat_read(-1, &ps), -1);
	/* A child that has exited and been reaped. */
	if ((child = fork()) == 0)
		_exit(0);
	assert_true(child > 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(procstat_read(child, &ps), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields_follow_the_last_parenthesis),
		cmocka_unit_test(test_units_are_bytes_and_seconds),
		cmocka_unit_test(test_malformed_lines_are_refused),
		cmocka_unit_test(test_bounds_and_units_are_checked),
		cmocka_unit_test(test_read_of_this_process_and_of_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
