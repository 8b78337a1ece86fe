/*
 * The supervisor's side of --metrics (and a delivery host's): it binds the
 * listening socket, starts the metrics server (metrics/, a confined process
 * of its own) with that socket and a channel, restarts it when it dies, and
 * every second sends it a snapshot: the status documents rendered
 * (service/exposition.h) and what /healthz says. It never reads a byte
 * of HTTP.
 */
#ifndef COTAL_SERVICE_METRICS_H
#define COTAL_SERVICE_METRICS_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "lib/log.h"
#include "service/relay.h"
#include "service/restart.h"

#define METRICS_DEFAULT_ADDR "127.0.0.1"
#define METRICS_TICK_MS 1000
#define METRICS_RELAY_LINES 100 /* the server's lines a log window, past which counted */

struct metrics_srv {
	char addr[96];              /* what --metrics named, for log lines */
	int listen_fd;              /* -1: --metrics not given */
	int ch;                     /* our end; -1 while no server runs */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool drop, seccomp_log;
	const char *self_exe;
	int log_fd;                 /* where the server's lines are relayed */
	struct relay relay;         /* its stderr */
	struct event_base *base;
	struct event *ev_tick, *ev_restart, *ev_write;
	/* The snapshot on its way to the server (metrics.c's pump). */
	char *out;
	size_t out_len, out_off;
	bool out_begun;
	struct ipc_metrics_begin out_begin;
	struct log_limit too_big;
	struct restart_state restart;
	/* Called every METRICS_TICK_MS: builds the documents and calls
	 * metrics_send. */
	void (*tick)(struct metrics_srv *m, void *arg);
	void *arg;
};

/* Zero state: no --metrics. */
void metrics_init(struct metrics_srv *m);

/*
 * --metrics ADDR:PORT (or PORT, or :PORT: on METRICS_DEFAULT_ADDR; an IPv6
 * address in brackets): bind and listen now, before anything is started,
 * so a port in use or an address not ours is refused at once. 0, or -1
 * with err naming the option and the system's answer.
 */
int metrics_listen(struct metrics_srv *m, const char *arg, char *err, size_t errlen);

/* Start the server (when --metrics was given) on base; m's uid, gid, drop,
 * seccomp_log, self_exe, log_fd, tick and arg set by the caller. */
void metrics_begin(struct metrics_srv *m, struct event_base *base);

/* A reaped child: true when it was the metrics server (restarted after its
 * backoff unless stopping). */
bool metrics_reaped(struct metrics_srv *m, pid_t pid, int wstatus, bool stopping);

/* Render the documents and hand them to the server. */
void metrics_send(struct metrics_srv *m, json_t *const *docs, size_t n);

/* Stop the server (SIGKILL: it holds nothing to save) and free. */
void metrics_end(struct metrics_srv *m);

#endif
