/*
 * Logging. One line per event, prefixed per WIRE.md §8:
 *   "✓ " success, "! " warning, "✗ " failure, "• " information.
 * fatal()/fatalx() log and exit(1); fatal() appends strerror(errno).
 */
#ifndef COTAL_LOG_H
#define COTAL_LOG_H

#include <stdarg.h>
#include <stdio.h>

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
