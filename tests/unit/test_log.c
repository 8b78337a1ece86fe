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
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
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

/* ---- time stamps (issue 29) ---- */

/* "Log lines carry an RFC 3339 timestamp in every log file the project
 * writes": UTC, milliseconds, then the line as before. */
static void
test_a_stamp_is_rfc3339_utc_to_the_millisecond(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(log_stamp_format(0, buf, sizeof(buf)), LOG_STAMP_LEN);
	assert_string_equal(buf, "1970-01-01T00:00:00.000Z ");
	assert_int_equal(log_stamp_format(INT64_C(1764945746123), buf, sizeof(buf)),
	    LOG_STAMP_LEN);
	assert_string_equal(buf, "2025-12-05T14:42:26.123Z ");
	assert_int_equal(log_stamp_format(INT64_C(1764945746007), buf, sizeof(buf)),
	    LOG_STAMP_LEN);
	assert_string_equal(buf, "2025-12-05T14:42:26.007Z ");
	/* Too small a buffer: nothing, never a cut stamp. */
	assert_int_equal(log_stamp_format(0, buf, LOG_STAMP_LEN), 0);
	assert_string_equal(buf, "");
	/* Read past, and only when it is one. */
	assert_string_equal(log_line_text("2025-12-05T14:42:26.123Z ✓ up"), "✓ up");
	assert_string_equal(log_line_text("✓ up"), "✓ up");
	assert_string_equal(log_line_text("2025-12-05 14:42:26.123Z ✓ up"),
	    "2025-12-05 14:42:26.123Z ✓ up");
	assert_string_equal(log_line_text("2025-12-05T14:42"), "2025-12-05T14:42");
	assert_string_equal(log_line_text(""), "");
}

/* The file stamped, its copy not (a terminal or journald: each stamps or
 * needs none), each in one write; and the stamp is the time of the line. */
static void
test_the_file_is_stamped_and_its_copy_as_asked(void **state)
{
	struct capture c, tee;
	char buf[512], copy[512];
	int64_t before = wall_ms(), at;
	struct tm tm = { 0 };
	int ms;

	(void)state;
	capture_start(&tee, NULL);
	int tee_fd = dup(fileno(tee.f));
	capture_start(&c, NULL);
	log_tee(tee_fd);
	log_stamp(true, false);
	log_ok("delivery daemon up (space %s)", "demo");
	fsync(tee_fd);
	close(tee_fd);
	capture_end(&c, buf, sizeof(buf));
	int64_t after = wall_ms();
	rewind(tee.f);
	size_t n = fread(copy, 1, sizeof(copy) - 1, tee.f);
	copy[n] = '\0';
	fclose(tee.f);
	unlink(tee.path);
	assert_string_equal(copy, "✓ delivery daemon up (space demo)\n");
	assert_int_equal(strlen(buf), LOG_STAMP_LEN + strlen(copy));
	assert_string_equal(buf + LOG_STAMP_LEN, copy);
	assert_int_equal(sscanf(buf, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ ", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms), 7);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	at = (int64_t)timegm(&tm) * 1000 + ms;
	assert_true(at >= before && at <= after);
	/* log_init starts over: no stamp, no copy. */
	capture_start(&c, NULL);
	log_ok("plain");
	capture_end(&c, buf, sizeof(buf));
	assert_string_equal(buf, "✓ plain\n");
}

/* Which streams want stamps: a file or a pipe, not a terminal, and not the
 * stream JOURNAL_STREAM names (systemd's journal stamps each line). */
static void
test_a_stream_wants_stamps_unless_a_terminal_or_the_journal(void **state)
{
	char path[] = "/tmp/test_log.XXXXXX", js[64];
	int fd = mkstemp(path), p[2], pt;
	struct stat st;

	(void)state;
	assert_true(fd >= 0);
	unsetenv("JOURNAL_STREAM");
	assert_true(log_stream_wants_stamp(fd));
	assert_int_equal(pipe(p), 0);
	assert_true(log_stream_wants_stamp(p[1]));
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	assert_false(log_stream_wants_stamp(fd));
	assert_true(log_stream_wants_stamp(p[1])); /* another stream than the journal's */
	setenv("JOURNAL_STREAM", "garbage", 1);
	assert_true(log_stream_wants_stamp(fd));
	unsetenv("JOURNAL_STREAM");
	if ((pt = posix_openpt(O_RDWR | O_NOCTTY)) >= 0) {
		assert_int_equal(grantpt(pt), 0);
		assert_int_equal(unlockpt(pt), 0);
		int tty = open(ptsname(pt), O_RDWR | O_NOCTTY);
		assert_true(tty >= 0);
		assert_false(log_stream_wants_stamp(tty));
		close(tty);
		close(pt);
	}
	assert_false(log_stream_wants_stamp(-1));
	close(p[0]);
	close(p[1]);
	close(fd);
	unlink(path);
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
		cmocka_unit_test(test_a_stamp_is_rfc3339_utc_to_the_millisecond),
		cmocka_unit_test(test_the_file_is_stamped_and_its_copy_as_asked),
		cmocka_unit_test(test_a_stream_wants_stamps_unless_a_terminal_or_the_journal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
