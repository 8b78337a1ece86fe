/*
 * Restart policy of the workers (pure logic, unit-tested): exponential
 * backoff reset after a healthy run, and the crash-loop bound past which a
 * worker's deaths are said (the log, the status, /healthz) while it is
 * still restarted at its capped backoff: a crash loop degrades the daemon,
 * it never ends it (issue 42; the daemon exits only for the lease, the
 * broker or the credential). Like Postfix's master, the policy reasons
 * about how long the child ran before it died.
 */
#ifndef COTAL_SERVICE_RESTART_H
#define COTAL_SERVICE_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RESTART_LOOP_MAX 10 /* restarts allowed inside the loop window */

struct restart_policy {
	int64_t initial_ms;       /* first delay */
	int64_t max_ms;           /* cap of the doubling */
	int64_t healthy_ms;       /* a run this long resets the delay */
	int64_t loop_window_ms;   /* crash-loop window */
	bool loop_reported;       /* a crash loop is said (never fatal) */
};

/* Delivery workers: 100 ms doubling to 30 s, reset after 60 s; more than
 * 10 restarts in 5 minutes are a crash loop, said. */
extern const struct restart_policy restart_delivery;
/* The timer writer (the seed's writer): 5 s doubling to 300 s; a fault
 * there never takes delivery down. */
extern const struct restart_policy restart_timer;
/* A lane of a delivery host (host/): 1 s doubling to 30 s (a lost lease
 * outlives its holder by up to its 30 s TTL), reset after 60 s; a lane
 * that keeps closing is reopened for as long as the host runs. */
extern const struct restart_policy restart_lane;
/* The metrics server (--metrics): the same pacing as a lane; it never
 * takes delivery down with it, however often it dies. */
extern const struct restart_policy restart_metrics;

struct restart_state {
	int64_t started_ms;                    /* when the current run began */
	int64_t next_ms;                       /* the delay the next quick death gets */
	int64_t deaths[RESTART_LOOP_MAX + 1];  /* ring of recent death times */
	unsigned ndeaths;
	unsigned restarts;                     /* total, for status */
};

void restart_init(struct restart_state *s, const struct restart_policy *p);
void restart_started(struct restart_state *s, int64_t now_ms);
/*
 * The worker died at now_ms. Returns the delay before restarting it; sets
 * *crash_loop when this death makes more than RESTART_LOOP_MAX restarts
 * inside the window and the policy reports crash loops.
 */
int64_t restart_after_death(struct restart_state *s, const struct restart_policy *p,
			    int64_t now_ms, bool *crash_loop);
/* Is it in a crash loop at now_ms: more than RESTART_LOOP_MAX deaths inside
 * the window before now_ms (and the policy reports crash loops)? */
bool restart_looping(const struct restart_state *s, const struct restart_policy *p,
		     int64_t now_ms);

/* "exit status 3", "killed by SIGSYS", from a waitpid status. */
void restart_cause(int wstatus, char *buf, size_t len);

#endif
