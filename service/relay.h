/*
 * A confined child's stderr, relayed into the log line by line (the
 * supervisor's and the host's event loop): each worker's, and the metrics
 * server's. The child is not trusted to format: it may only speak as itself
 * ("<mark> delivery <role>: "), control bytes are escaped (lib/log.c
 * log_escape), an overlong line is cut, and past cap lines a log window the
 * rest is counted, not written (issue 28).
 */
#ifndef COTAL_SERVICE_RELAY_H
#define COTAL_SERVICE_RELAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/log.h"

#define RELAY_LINE_MAX 4096 /* a longer relayed line is cut there */

struct relay {
	const char *role;       /* its lines begin "<mark> delivery <role>: " */
	const char *noun;       /* "this worker": the cap's line names it */
	bool timer_voice;       /* "! delivery timer: timer writer: refused a .schedule
	                         * request permanently (…" goes out as "! timer writer:
	                         * refused …" (WIRE.md §8); no other line loses its
	                         * "delivery <role>: " */
	int cap;                /* lines a log window */
	int out;                /* the log's descriptor */
	int rd;                 /* the pipe's read end; -1 while none */
	struct event *ev;
	struct log_limit limit; /* kept across the child's respawns */
	char buf[RELAY_LINE_MAX];
	size_t len;
};

/* Once, before the first child. */
void relay_init(struct relay *r, const char *role, const char *noun, int cap, int out);
/* Relay the pipe rd (a new child's stderr) on base; a pipe still open is
 * closed first, its partial line relayed. */
void relay_open(struct relay *r, struct event_base *base, int rd);
/* Relay a partial line left, stop watching, close the pipe. */
void relay_close(struct relay *r);

#endif
