/*
 * A confined child's stderr into the log (service/relay.h). Runs in the
 * supervisor's and the host's event loop.
 */
#include "service/relay.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"

void
relay_init(struct relay *r, const char *role, const char *noun, int cap, int out)
{
	memset(r, 0, sizeof(*r));
	r->role = role;
	r->noun = noun;
	r->cap = cap;
	r->out = out;
	r->rd = -1;
	pthread_mutex_init(&r->limit.mu, NULL);
}

/* One line, as the log has it. Worker lines go to the log file only;
 * stderr carries the supervisor's own lines. */
static void
relay_line(struct relay *r, const char *line, size_t n)
{
	static const char *const marks[] = { "✓ ", "! ", "✗ ", "• " };
	/* The one line of WIRE.md §8 a worker writes in its own voice. Every
	 * other relayed line keeps "delivery <role>: ", so no worker reads as
	 * the supervisor: "timer writer up" and "timer writer: down" are the
	 * supervisor's (workers.c). */
	static const char voice[] = "timer writer: refused a .schedule request permanently (";
	char out[LOG_STAMP_LEN + RELAY_LINE_MAX + 128], who[64];
	size_t off = 0, wl, ml = 0, from = 0, st;
	bool own = false;
	uint64_t untold;
	int64_t window = log_limit_window_ms();

	if (!log_limit_admit_n(&r->limit, mono_ms(), window, r->cap, &untold))
		return;
	/* Stamped as the supervisor's own lines in the file (lib/log.h). */
	st = log_stamp_prefix(out, sizeof(out));
	if (untold > 0) {
		int k = snprintf(out + st, sizeof(out) - st, "! delivery %s: … %llu more lines of "
		    "%s not written in the last %lld s (its cap: %d lines a window)\n", r->role,
		    (unsigned long long)untold, r->noun, (long long)(window / 1000), r->cap);
		if (k > 0 && write(r->out, out, st + (size_t)k) < 0)
			return;
	}
	off = st;
	wl = (size_t)snprintf(who, sizeof(who), "delivery %s: ", r->role);
	for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]) && !own; k++) {
		ml = strlen(marks[k]);
		own = n >= ml + wl && memcmp(line, marks[k], ml) == 0 &&
		    memcmp(line + ml, who, wl) == 0;
	}
	if (!own)
		off += (size_t)snprintf(out + off, sizeof(out) - off, "! delivery %s (unformatted): ",
		    r->role);
	else if (r->timer_voice && n >= ml + wl + sizeof(voice) - 1 &&
	    memcmp(line + ml + wl, voice, sizeof(voice) - 1) == 0) {
		memcpy(out + off, line, ml);
		off += ml;
		from = ml + wl;
	}
	/* The child's log escaped its own lines; anything else it wrote (a
	 * library's words on stderr) is escaped the same way here. */
	off += log_escape(line + from, n - from, out + off, sizeof(out) - off - 1);
	out[off++] = '\n';
	if (write(r->out, out, off) < 0)
		return;
}

/* One read per wake-up: a chatty child cannot starve the event loop. */
static void
on_read(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;
	ssize_t n;
	char *start, *nl;

	(void)what;
	n = read(fd, r->buf + r->len, sizeof(r->buf) - r->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		relay_close(r);
		return;
	}
	r->len += (size_t)n;
	start = r->buf;
	while ((nl = memchr(start, '\n', r->len - (size_t)(start - r->buf))) != NULL) {
		relay_line(r, start, (size_t)(nl - start));
		start = nl + 1;
	}
	r->len -= (size_t)(start - r->buf);
	memmove(r->buf, start, r->len);
	if (r->len == sizeof(r->buf)) {
		relay_line(r, r->buf, r->len);
		r->len = 0;
	}
}

void
relay_open(struct relay *r, struct event_base *base, int rd)
{
	relay_close(r);
	r->rd = rd;
	evutil_make_socket_nonblocking(rd);
	r->ev = event_new(base, rd, EV_READ | EV_PERSIST, on_read, r);
	event_add(r->ev, NULL);
}

void
relay_close(struct relay *r)
{
	if (r->len > 0)
		relay_line(r, r->buf, r->len);
	r->len = 0;
	if (r->ev != NULL) {
		event_free(r->ev);
		r->ev = NULL;
	}
	if (r->rd >= 0)
		close(r->rd);
	r->rd = -1;
}
