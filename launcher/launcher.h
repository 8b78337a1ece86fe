/*
 * The launcher: `cotal up`, the stop `cotal down` and `up` share, and the
 * deprecated `cotal deliver`. It runs as the operator, in the `cotal` CLI's
 * process; it is no part of the daemon.
 *
 * May: start the workspace's own broker (the dev mesh) and provision the
 * space the way `cotal mesh start` and `cotal space provision` do; mint the
 * run's delivery credential when the workspace holds the space's dev
 * signer; fork and exec cotal-deliveryd and signal the daemon it started or
 * the one the space's pid record names, after checking that the process is
 * a delivery daemon of the space; ask the daemon's rails as the space's
 * manager (the supervisor credential): liveness and reloadCreds.
 * Never: read a seed into anything but the credential file it writes, put a
 * credential on an argv or in an environment, or signal a process it has
 * not verified.
 *
 * Files (in the workspace's .cotal/):
 *   delivery.<key>.up.json     the launcher's record: its own pid, the
 *                              daemon it started, whether it started the
 *                              broker; `cotal down` reads it to stop a
 *                              daemon that has no pid record yet and to
 *                              stop a broker `up` started.
 *   delivery.<key>.stop        the stop reservation (flock) and the time
 *                              of the last stop: a daemon stopped after
 *                              `up` launched it is not restarted.
 *   space.<key>/delivery.run.json   present when `up` minted the run's
 *                              credential: the stop removes that
 *                              credential once the daemon's death is
 *                              confirmed, and never one the operator put.
 */
#ifndef COTAL_LAUNCHER_H
#define COTAL_LAUNCHER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/spacefiles.h"
#include "lib/workspace.h"

#define STOP_TERM_GRACE_MS 15000  /* the seed: SIGKILL 15 s after SIGTERM */
#define STOP_KILL_WAIT_MS 5000    /* confirming the death after SIGKILL */



/* The stop `cotal down` and `cotal up` use. */
enum stop_outcome {
	STOP_DONE = 0,    /* stopped, or nothing was running */
	STOP_FAILED = 1,  /* said why */
	STOP_BUSY = 2,    /* another stop holds the reservation */
};
/*
 * Take the reservation, mark the stop, and stop the space's daemon: the one
 * the pid record names, else `known` (a daemon `up` started, still without a
 * record), else the one the launcher's record names. SIGTERM, SIGKILL after
 * STOP_TERM_GRACE_MS; once its death is confirmed, its record and status
 * go, and the run's credential when `up` minted it. A pid that is no
 * delivery daemon of the space is never signalled.
 */
enum stop_outcome launch_stop(const struct space_files *f, pid_t known);
/* When the last stop was asked for (wall ms), 0 when never. */
int64_t launch_last_stop(const struct space_files *f);

/* The launcher's record. */
struct up_record {
	pid_t launcher, daemon;
	bool broker_started; /* `up` started the workspace's own broker */
	bool detached;
};
int up_record_write(const struct space_files *f, const struct up_record *r);
int up_record_read(const struct space_files *f, struct up_record *r);
void up_record_remove(const struct space_files *f);

/* The daemon binary: $COTAL_DELIVERYD, the build's own, else
 * "cotal-deliveryd" on PATH. */
const char *launch_daemon_path(void);

int cmd_up(int argc, char **argv);
int cmd_deliver(int argc, char **argv);
/* `cotal down --space S [--root DIR]`: launch_stop, then the broker when
 * `up` started it. */
int cmd_down(int argc, char **argv);

#endif
