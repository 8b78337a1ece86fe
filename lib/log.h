/*
 * Logging. One line per event, prefixed per WIRE.md §8:
 *   "✓ " success, "! " warning, "✗ " failure, "• " information.
 * fatal()/fatalx() log and exit(1); fatal() appends strerror(errno).
 */
#ifndef COTAL_LOG_H
#define COTAL_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/*
 * Copy the n bytes of in to out (outlen bytes, NUL-terminated), every C0
 * control byte, DEL, C1 control (U+0080 to U+009F) and byte of no valid
 * UTF-8 sequence written as \xHH: what every log line and every line
 * relayed from another process goes through. Stops before an escape or a
 * character that would not fit. The bytes written, without the NUL.
 */
size_t log_escape(const char *in, size_t n, char *out, size_t outlen);

void log_init(const char *procname, FILE *out);
/* Also copy every line to fd (-1: none), e.g. stderr beside the log file. */
void log_tee(int fd);
void log_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_errx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
