/*
 * Logging: one line per event, each starting with the WIRE.md §8 prefix
 * (✓ ! ✗ •) so operators and callers can grep for it. The process name
 * follows the prefix only for workers ("fanout", "reader", ...).
 */
#include "lib/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *log_proc;
static FILE *log_out;
static int log_verbose = -1;

void
log_init(const char *procname, FILE *out)
{
	log_proc = procname;
	log_out = out;
}

static void
vlog(const char *prefix, const char *fmt, va_list ap, int with_errno)
{
	FILE *out = log_out ? log_out : stderr;
	int saved = errno;

	fputs(prefix, out);
	if (log_proc != NULL && *log_proc != '\0')
		fprintf(out, "%s: ", log_proc);
	vfprintf(out, fmt, ap);
	if (with_errno)
		fprintf(out, ": %s", strerror(saved));
	fputc('\n', out);
	fflush(out);
	errno = saved;
}

#define LOG_FN(fn, prefix, with_errno)         \
	void fn(const char *fmt, ...)          \
	{                                      \
		va_list ap;                    \
		va_start(ap, fmt);             \
		vlog(prefix, fmt, ap, with_errno); \
		va_end(ap);                    \
	}

LOG_FN(log_ok, "✓ ", 0)
LOG_FN(log_info, "• ", 0)
LOG_FN(log_warnx, "! ", 0)
LOG_FN(log_warn, "! ", 1)
LOG_FN(log_errx, "✗ ", 0)

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_verbose < 0)
		log_verbose = getenv("COTAL_DEBUG") != NULL;
	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vlog("• ", fmt, ap, 0);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("✗ ", fmt, ap, 1);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("✗ ", fmt, ap, 0);
	va_end(ap);
	exit(1);
}
