/*
 * The log's escaping (lib/log.c log_escape): issue 27, "every log line
 * escapes C0 and C1 control bytes and DEL (one escaping function for the
 * supervisor's lines and relayed worker lines)".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"

/* A literal's bytes, NULs included, through log_escape. */
#define ESC(lit) esc((lit), sizeof(lit) - 1)

static const char *
esc(const char *in, size_t n)
{
	static char out[256];

	log_escape(in, n, out, sizeof(out));
	return out;
}

static void
test_c0_del_and_c1_are_written_as_hex(void **state)
{
	(void)state;
	/* A lease holder named with an OSC title sequence. */
	assert_string_equal(ESC("a\033]0;owned\007b"), "a\\x1b]0;owned\\x07b");
	assert_string_equal(ESC("x\ny\r\tz"), "x\\x0ay\\x0d\\x09z");
	assert_string_equal(ESC("\177"), "\\x7f");
	assert_string_equal(ESC("n\0ul"), "n\\x00ul");
	/* U+009B, the 8-bit CSI, in UTF-8. */
	assert_string_equal(ESC("\xc2\x9b" "31m"), "\\xc2\\x9b31m");
}

static void
test_text_and_valid_utf8_pass_unchanged(void **state)
{
	(void)state;
	assert_string_equal(ESC("✓ fanout: bound to CHAT_demo"),
	    "✓ fanout: bound to CHAT_demo");
	/* U+00A0 and beyond are printable; ✓ carries the byte 0x9c inside. */
	assert_string_equal(ESC("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");
	assert_string_equal(ESC("a\\x1b"), "a\\x1b");
}

static void
test_bytes_of_no_valid_sequence_are_escaped(void **state)
{
	(void)state;
	assert_string_equal(ESC("\x9b" "2J"), "\\x9b2J");
	assert_string_equal(ESC("\xe2\x9c"), "\\xe2\\x9c");
	assert_string_equal(ESC("\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* a surrogate */
}

static void
test_an_escape_is_never_cut(void **state)
{
	char out[8];

	(void)state;
	/* "ab" and one escape fit in 7 bytes and the NUL; the second does not. */
	assert_int_equal(log_escape("ab\033\033", 4, out, sizeof(out)), 6);
	assert_string_equal(out, "ab\\x1b");
	assert_int_equal(log_escape("a✓", strlen("a✓"), out, 4), 1);
	assert_string_equal(out, "a");
}

/* The logger writing into a file of its own, to be read back. */
struct capture {
	char path[32];
	FILE *f;
};

static void
capture_start(struct capture *c, const char *name)
{
	int fd;

	snprintf(c->path, sizeof(c->path), "/tmp/test_log.XXXXXX");
	assert_true((fd = mkstemp(c->path)) >= 0);
	assert_non_null(c->f = fdopen(fd, "w+"));
	log_init(name, c->f);
}

/* What was written, into buf (NUL-ended); the logger back on stderr. */
static void
capture_end(struct capture *c, char *buf, size_t len)
{
	size_t n;

	log_init(NULL, stderr);
	rewind(c->f);
	n = fread(buf, 1, len - 1, c->f);
	buf[n] = '\0';
	fclose(c->f);
	unlink(c->path);
}

/* A whole line through the logger: one line, escaped. */
static void
test_a_log_line_is_one_escaped_line(void **state)
{
	struct capture c;
	char buf[512];

	(void)state;
	capture_start(&c, "registry");
	log_warnx("lease held by %s", "evil\033]0;pwned\007\nforged line");
	capture_end(&c, buf, sizeof(buf));
	assert_string_equal(buf, "! registry: lease held by evil\\x1b]0;pwned\\x07\\x0aforged line\n");
}

/* Issue 28: "Repeated lines from one cause are rate-limited with a count
 * (\"… 1,234 more like this in the last 60 s\")". */
static void
test_lines_of_one_cause_are_limited_and_counted(void **state)
{
	struct log_limit l = LOG_LIMIT_INIT;
	uint64_t report;
	int said = 0;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		said += log_limit_admit(&l, 5000 + i, 60000, &report);
		assert_int_equal(report, 0);
	}
	assert_int_equal(said, LOG_LIMIT_LINES);
	/* Still in the window: counted, not said. */
	assert_false(log_limit_admit(&l, 5000 + 59999, 60000, &report));
	assert_int_equal(report, 0);
	/* The next window's first line says the count of the last. */
	assert_true(log_limit_admit(&l, 5000 + 60000, 60000, &report));
	assert_int_equal(report, 1000 - LOG_LIMIT_LINES + 1);
	assert_true(log_limit_admit(&l, 5000 + 60001, 60000, &report));
	assert_int_equal(report, 0);
	/* A quiet window reports nothing. */
	assert_true(log_limit_admit(&l, 5000 + 200000, 60000, &report));
	assert_int_equal(report, 0);
	/* Another cap (a relayed worker's lines: SUP_RELAY_LINES). */
	struct log_limit r = LOG_LIMIT_INIT;
	int n = 0;
	for (int i = 0; i < 50; i++)
		n += log_limit_admit_n(&r, 100, 60000, 30, &report);
	assert_int_equal(n, 30);
	assert_true(log_limit_admit_n(&r, 60100, 60000, 30, &report));
	assert_int_equal(report, 20);
}

/* The count, written: the first line after the window says it. */
static void
test_the_count_is_said_with_the_next_line(void **state)
{
	static struct log_limit l = LOG_LIMIT_INIT;
	struct capture c;
	char buf[8192];

	(void)state;
	capture_start(&c, NULL);
	for (int i = 0; i < 1244; i++)
		log_warnx_limited(&l, "refused %d", i);
	/* The window ends (as if 60 s went by). */
	l.since_ms -= LOG_LIMIT_WINDOW_MS;
	log_warnx_limited(&l, "refused again");
	capture_end(&c, buf, sizeof(buf));
	assert_non_null(strstr(buf, "! refused 9\n! … 1,234 more like this in the last 60 s\n"
	    "! refused again\n"));
	assert_null(strstr(buf, "refused 10\n"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_c0_del_and_c1_are_written_as_hex),
		cmocka_unit_test(test_text_and_valid_utf8_pass_unchanged),
		cmocka_unit_test(test_bytes_of_no_valid_sequence_are_escaped),
		cmocka_unit_test(test_an_escape_is_never_cut),
		cmocka_unit_test(test_a_log_line_is_one_escaped_line),
		cmocka_unit_test(test_lines_of_one_cause_are_limited_and_counted),
		cmocka_unit_test(test_the_count_is_said_with_the_next_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
