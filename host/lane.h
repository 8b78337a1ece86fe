/*
 * One lane of the delivery host (host.h): its process, the relay of its
 * output, and its reopening. Internal to host/.
 */
#ifndef COTAL_HOST_LANE_H
#define COTAL_HOST_LANE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/manifest.h"
#include "service/restart.h"

#define LANE_LINE_MAX 4096          /* a longer relayed line is cut */
#define LANE_STOP_GRACE_MS 15000    /* SIGTERM, then SIGKILL (the seed's stop) */
#define LANE_READS_MAX 16           /* pipe reads per wake-up, per lane */

enum lane_state {
	LANE_REOPENING,   /* not running; (re)opened at reopen_at */
	LANE_RUNNING,
	LANE_STOPPING,    /* SIGTERM sent; SIGKILL at kill_at */
};

struct lane {
	struct manifest_lane m;
	enum lane_state state;
	bool closing;             /* closed by a reload or the host's stop: never reopened */
	pid_t pid;                /* 0 once reaped */
	int out;                  /* read end of its stdout and stderr; -1 once closed */
	char line[LANE_LINE_MAX]; /* a partial line */
	size_t used;
	int64_t since_wall_ms;    /* in this state since */
	int64_t reopen_at;        /* monotonic ms, LANE_REOPENING */
	int64_t kill_at;          /* monotonic ms, LANE_STOPPING */
	struct restart_state rs;
	unsigned opens;           /* times started */
	char last_exit[64];
};

/* What a lane is started with, beyond its manifest entry. */
struct lane_exec {
	const char *self_exe;     /* this binary */
	const char *server;       /* the host's --server, for entries without one */
	const char *user;         /* the host's --user, or NULL */
};

struct lane *lane_new(const struct manifest_lane *m);
void lane_free(struct lane *l);

/* Start the lane's daemon. 0, or -1 (logged; the lane is reopened later). */
int lane_open(struct lane *l, const struct lane_exec *x);

/* Relay what the lane wrote: whole lines, each as "[space] line". At EOF
 * (or with flush) a partial line too, and the pipe is closed at EOF. */
void lane_relay(struct lane *l, bool flush);

/* The lane's status document of this run for the metrics (its status
 * file, read from its root, with its processes' costs added), or, when it
 * has none (not started, reopening, a file of an earlier run), one that
 * says only its space and the lane's state: a lane that does not serve is
 * never left out. New reference. */
json_t *lane_status_doc(const struct lane *l);

/* The lane's process exited with wstatus: stopped for good (closing), or
 * scheduled to reopen with backoff. Logs either. */
void lane_exited(struct lane *l, int wstatus);

/* Stop the lane the seed's way; it is not reopened. */
void lane_close(struct lane *l);

/* Past kill_at: SIGKILL (logged). */
void lane_kill_late(struct lane *l);

/* Gone for good: closed, reaped, its pipe drained. */
bool lane_done(const struct lane *l);

const char *lane_state_name(const struct lane *l);

#endif
