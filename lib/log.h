/*
 * Logging. One line per event, prefixed per WIRE.md §8:
 *   "✓ " success, "! " warning, "✗ " failure, "• " information.
 * fatal()/fatalx() log and exit(1); fatal() appends strerror(errno).
 */
#ifndef COTAL_LOG_H
#define COTAL_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Copy the n bytes of in to out (outlen bytes, NUL-terminated), every C0
 * control byte, DEL, C1 control (U+0080 to U+009F) and byte of no valid
 * UTF-8 sequence written as \xHH: what every log line and every line
 * relayed from another process goes through. Stops before an escape or a
 * character that would not fit. The bytes written, without the NUL.
 */
size_t log_escape(const char *in, size_t n, char *out, size_t outlen);

/* Write to out (NULL: fd 2); no copy, no time stamps. */
void log_init(const char *procname, FILE *out);
/* Also copy every line to fd (-1: none), e.g. stderr beside the log file. */
void log_tee(int fd);
/*
 * Time stamps (issue 29): every line written to a log file begins with
 * when it was written, RFC 3339 in UTC to the millisecond, then a space:
 *   2026-12-05T14:22:26.123Z ✓ delivery daemon up (space demo)
 * primary: on the output log_init named; tee: on the copy. A worker's
 * lines carry none (the supervisor stamps them as it relays them).
 */
#define LOG_STAMP_LEN 25 /* "2026-12-05T14:22:26.123Z " */
void log_stamp(bool primary, bool tee);
/* A line another process wrote, about to go to the primary output in one
 * write (a worker's relayed, a lane's): its stamp of now into buf (at least
 * LOG_STAMP_LEN + 1 bytes) when that output is stamped; its length, 0 when
 * it is not. */
size_t log_stamp_prefix(char *buf, size_t len);
/* Does a stream written to fd want stamps: a file or a pipe, not a
 * terminal, and not journald's stream (JOURNAL_STREAM names it: the
 * journal stamps each line itself)? */
bool log_stream_wants_stamp(int fd);
/* The stamp of wall time ms (since the epoch) into buf (at least
 * LOG_STAMP_LEN + 1 bytes), with its trailing space: its length. */
size_t log_stamp_format(int64_t ms, char *buf, size_t len);
/* A logged line past its stamp, if it has one (its mark then comes). */
const char *log_line_text(const char *line);
void log_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_errx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Lines of one cause, rate-limited (issue 28, "Bounded logs"): at most
 * LOG_LIMIT_LINES in a window of LOG_LIMIT_WINDOW_MS; past that they are
 * counted, and the first line after the window says how many were not
 * written: "… 1,234 more like this in the last 60 s". One struct per
 * cause (a static at the call site, LOG_LIMIT_INIT); any thread.
 */
#define LOG_LIMIT_LINES 10
#define LOG_LIMIT_WINDOW_MS 60000
struct log_limit {
	pthread_mutex_t mu;
	int64_t since_ms;  /* the window's start (0: none yet) */
	int said;          /* lines written in it */
	uint64_t more;     /* lines not written in it */
};
#define LOG_LIMIT_INIT { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0 }
/* The decision, at now_ms in a window of window_ms: true to write the line;
 * *report is the count of the window that just ended, to be said first (0:
 * nothing to say). */
bool log_limit_admit(struct log_limit *l, int64_t now_ms, int64_t window_ms, uint64_t *report);
/* The same with max lines a window instead of LOG_LIMIT_LINES. */
bool log_limit_admit_n(struct log_limit *l, int64_t now_ms, int64_t window_ms, int max,
		       uint64_t *report);
/* A warning of the cause l. */
void log_warnx_limited(struct log_limit *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The window every limited line uses: LOG_LIMIT_WINDOW_MS, or in a test
 * build COTAL_TEST_LOG_WINDOW_MS. */
int64_t log_limit_window_ms(void);

void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
