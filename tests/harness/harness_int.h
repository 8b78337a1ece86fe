/*
 * What the harness's files share, not for test programs: the processes and
 * directories that die with the test (run.c), children run with a mesh's
 * environment (spawn.c), brokers started and signalled (brokers.c), and a
 * new mesh's directory and credentials (mesh.c). Names begin with hi_, so
 * none meets a test program's own.
 */
#ifndef COTAL_HARNESS_INT_H
#define COTAL_HARNESS_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "tests/harness/harness.h"

#define PORT_TRIES 5 /* a mesh's ports taken meanwhile: picked again */

/* The broker in use (h_use_broker). */
extern enum h_broker hi_broker;

static inline void
hi_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* run.c: pid SIGKILLed at the test's end (add), or no longer (it ended). */
void hi_track(pid_t pid, bool add);
/* Kill what is tracked and remove the directories kept at the test's end;
 * armed once. */
void hi_arm_cleanup(void);
/* dir removed at the test's end (named when it fails): 0, or -1 when too
 * many are. */
int hi_keep_dir(const char *dir);

/* brokers.c: the nats-server binary in use. */
const char *hi_broker_binary(void);
/* Start the broker of conf listening on port, logging to <dir>/logname; its
 * pid into *pidp. 0 once it listens, or -1. */
int hi_broker_spawn(struct mesh *m, const char *conf, int port, const char *logname,
		    pid_t *pidp);
/* The same in network namespace netns listening on addr (a node on a test
 * network, netns.c). */
int hi_broker_spawn_at(struct mesh *m, const char *conf, const char *netns, const char *addr,
		       int port, const char *logname, pid_t *pidp);
/* Send sig to *pidp and wait (SIGKILL after a while): 0, or -1 when it had
 * to be killed. *pidp is 0 then. */
int hi_pid_signal(pid_t *pidp, int sig);

/* spawn.c: argv in the background, with the mesh's environment, its output
 * appended to logpath; it dies with the test. */
pid_t hi_spawn_logged(struct mesh *m, char *const argv[], const char *logpath);
/* The same in network namespace netns (a name `ip netns` knows; NULL or
 * "": the test's own). */
pid_t hi_spawn_in(struct mesh *m, char *const argv[], const char *logpath, const char *netns);
/* argv run to its end with the mesh's environment, its output into out:
 * its exit status (128 + signal), or -1. */
int hi_run_capture(struct mesh *m, char *const argv[], char *out, size_t outlen);

/* netns.c: the nodes of m (made by `cotal mesh init --cluster` on
 * loopback) placed on net's hosts 0..n-1, the daemon on host n: their
 * addresses in the nodes' configs, the mesh record and m->url. */
int hi_net_place(struct mesh *m, struct h_net *n);

/* mesh.c: the --sync-interval of a mesh made here. */
const char *hi_sync_interval(void);
/* The temporary root of a new mesh for space, its names filled in. */
int hi_mesh_dir_make(struct mesh *m, const char *space);
/* COTAL_TEST_GRANTS: the daemon's credentials minted with those grants. */
int hi_mesh_foreign_grants(struct mesh *m);

#endif
