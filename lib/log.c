/*
 * Logging: one line per event, each starting with the WIRE.md §8 prefix
 * (✓ ! ✗ •) so operators and callers can grep for it. The process name
 * follows the prefix only for workers ("fanout", "reader", ...).
 */
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *log_proc;
static int log_fd = 2;
static int log_tee_fd = -1;
static int log_verbose = -1;
static bool stamp_primary, stamp_tee;

#define LOG_LINE_MAX 4096

void
log_init(const char *procname, FILE *out)
{
	log_proc = procname;
	log_fd = out ? fileno(out) : 2;
	log_tee_fd = -1;
	stamp_primary = stamp_tee = false;
}

void
log_tee(int fd)
{
	log_tee_fd = fd;
}

void
log_stamp(bool primary, bool tee)
{
	stamp_primary = primary;
	stamp_tee = tee;
}

size_t
log_stamp_prefix(char *buf, size_t len)
{
	return stamp_primary ? log_stamp_format(wall_ms(), buf, len) : 0;
}

bool
log_stream_wants_stamp(int fd)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (isatty(fd) || fstat(fd, &st) != 0)
		return false;
	/* systemd sets it to "<device>:<inode>" of the stream it connected
	 * stdout and stderr to; a process whose fd is another stream (a file
	 * it was redirected to) stamps. */
	if (js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		return false;
	return true;
}

size_t
log_stamp_format(int64_t ms, char *buf, size_t len)
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	int w;

	if (len < LOG_STAMP_LEN + 1 || gmtime_r(&secs, &tm) == NULL) {
		if (len > 0)
			buf[0] = '\0';
		return 0;
	}
	w = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return w == LOG_STAMP_LEN ? (size_t)w : 0;
}

const char *
log_line_text(const char *line)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";

	for (size_t i = 0; i < LOG_STAMP_LEN; i++) {
		char c = line[i];
		if (shape[i] == 'd' ? !(c >= '0' && c <= '9') : c != shape[i])
			return line;
	}
	return line + LOG_STAMP_LEN;
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

size_t
log_escape(const char *in, size_t n, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;

	if (outlen == 0)
		return 0;
	for (size_t i = 0; i < n;) {
		bool astral;
		size_t len = 1, esc = 0;
		if (p[i] < 0x20 || p[i] == 0x7f)
			esc = 1;
		else if (p[i] >= 0x80) {
			len = utf8_seq(p + i, n - i, &astral);
			/* C1 (U+0080 to U+009F) is C2 80 to C2 9F; a byte of no
			 * valid sequence may be read as C1 by an 8-bit terminal. */
			if (len == 0)
				len = esc = 1;
			else if (len == 2 && p[i] == 0xc2 && p[i + 1] <= 0x9f)
				esc = 2;
		}
		size_t need = esc > 0 ? 4 * esc : len;
		if (o + need >= outlen)
			break;
		if (esc == 0)
			memcpy(out + o, p + i, len), o += len;
		for (size_t k = 0; k < esc; k++) {
			out[o++] = '\\', out[o++] = 'x';
			out[o++] = hex[p[i + k] >> 4], out[o++] = hex[p[i + k] & 15];
		}
		i += len;
	}
	out[o] = '\0';
	return o;
}

/*
 * One write(2) per line: workers and the supervisor share the log file
 * (O_APPEND), so a line is never interleaved with another process's.
 */
static void
vlog(const char *prefix, const char *fmt, va_list ap, int with_errno)
{
	char text[LOG_LINE_MAX], line[LOG_STAMP_LEN + LOG_LINE_MAX];
	int saved = errno;
	size_t n = 0, t = 0, st = 0;
	int w;

	/* The stamp first, then the line: one buffer, so that each output
	 * gets its line in one write, with or without the stamp. */
	if (stamp_primary || (stamp_tee && log_tee_fd >= 0))
		st = log_stamp_format(wall_ms(), line, sizeof(line));
	n = st;
	w = snprintf(line + n, sizeof(line) - n, "%s%s%s", prefix, log_proc ? log_proc : "",
	    log_proc && *log_proc ? ": " : "");
	n += w > 0 ? (size_t)w : 0;
	w = vsnprintf(text, sizeof(text), fmt, ap);
	if (w > 0)
		t = (size_t)w < sizeof(text) ? (size_t)w : sizeof(text) - 1;
	if (with_errno && t < sizeof(text) - 1) {
		w = snprintf(text + t, sizeof(text) - t, ": %s", strerror(saved));
		if (w > 0)
			t += (size_t)w < sizeof(text) - t ? (size_t)w : sizeof(text) - t - 1;
	}
	/* One event, one line, shown as it is: a newline inside a message
	 * would forge a line, a terminal escape (a lease holder's name, a
	 * broker's error) would drive the operator's terminal. */
	n += log_escape(text, t, line + n, sizeof(line) - n - 1);
	line[n++] = '\n';
	if (stamp_primary)
		write_all(log_fd, line, n);
	else
		write_all(log_fd, line + st, n - st);
	if (log_tee_fd >= 0 && log_tee_fd != log_fd) {
		if (stamp_tee)
			write_all(log_tee_fd, line, n);
		else
			write_all(log_tee_fd, line + st, n - st);
	}
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

bool
log_limit_admit(struct log_limit *l, int64_t now_ms, int64_t window_ms, uint64_t *report)
{
	return log_limit_admit_n(l, now_ms, window_ms, LOG_LIMIT_LINES, report);
}

bool
log_limit_admit_n(struct log_limit *l, int64_t now_ms, int64_t window_ms, int max,
		  uint64_t *report)
{
	bool say;

	*report = 0;
	pthread_mutex_lock(&l->mu);
	if (l->since_ms == 0 || now_ms - l->since_ms >= window_ms) {
		*report = l->more;
		l->since_ms = now_ms;
		l->said = 0;
		l->more = 0;
	}
	say = l->said < max;
	if (say)
		l->said++;
	else
		l->more++;
	pthread_mutex_unlock(&l->mu);
	return say;
}

int64_t
log_limit_window_ms(void)
{
	static int64_t window;

	if (window == 0) {
		int64_t w = LOG_LIMIT_WINDOW_MS;
#ifdef COTAL_TEST_HOOKS
		const char *e = getenv("COTAL_TEST_LOG_WINDOW_MS");
		if (e != NULL && atoll(e) > 0)
			w = atoll(e);
#endif
		window = w;
	}
	return window;
}

/* 1234567 as "1,234,567". */
static void
thousands(uint64_t n, char *out, size_t len)
{
	char digits[32];
	size_t nd = (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, n), o = 0;

	for (size_t i = 0; i < nd && o + 2 < len; i++) {
		if (i > 0 && (nd - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = digits[i];
	}
	out[o] = '\0';
}

void
log_warnx_limited(struct log_limit *l, const char *fmt, ...)
{
	int64_t window = log_limit_window_ms();
	uint64_t report;
	char n[40];
	va_list ap;

	if (!log_limit_admit(l, mono_ms(), window, &report))
		return;
	if (report > 0) {
		thousands(report, n, sizeof(n));
		if (window % 1000 == 0)
			log_warnx("… %s more like this in the last %lld s", n,
			    (long long)(window / 1000));
		else
			log_warnx("… %s more like this in the last %lld ms", n, (long long)window);
	}
	va_start(ap, fmt);
	vlog("! ", fmt, ap, 0);
	va_end(ap);
}

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
