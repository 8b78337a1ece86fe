/*
 * Logging: one line per event, each starting with the WIRE.md §8 prefix
 * (✓ ! ✗ •) so operators and callers can grep for it. The process name
 * follows the prefix only for workers ("fanout", "reader", ...).
 */
#include "lib/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_proc;
static int log_fd = 2;
static int log_tee_fd = -1;
static int log_verbose = -1;

#define LOG_LINE_MAX 4096

void
log_init(const char *procname, FILE *out)
{
	log_proc = procname;
	log_fd = out ? fileno(out) : 2;
}

void
log_tee(int fd)
{
	log_tee_fd = fd;
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/*
 * One write(2) per line: workers and the supervisor share the log file
 * (O_APPEND), so a line is never interleaved with another process's.
 */
static void
vlog(const char *prefix, const char *fmt, va_list ap, int with_errno)
{
	char line[LOG_LINE_MAX];
	int saved = errno;
	size_t n = 0;
	int w;

	w = snprintf(line, sizeof(line), "%s%s%s", prefix, log_proc ? log_proc : "",
	    log_proc && *log_proc ? ": " : "");
	n = w > 0 ? (size_t)w : 0;
	w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (w > 0)
		n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
	if (with_errno && n < sizeof(line) - 1) {
		w = snprintf(line + n, sizeof(line) - n, ": %s", strerror(saved));
		if (w > 0)
			n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
	}
	/* One event, one line: a newline inside a message would forge one. */
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	write_all(log_fd, line, n);
	if (log_tee_fd >= 0 && log_tee_fd != log_fd)
		write_all(log_tee_fd, line, n);
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
