/*
 * `cotal down --space S [--root DIR]`: stop the space's delivery daemon.
 *
 * The pid record (.cotal/delivery.<key>.pid) names the daemon. It is
 * signalled only when the process behind it is alive and its command line
 * names a delivery daemon of the space (or cannot be read: the check only
 * downgrades on proof); a record whose pid is gone or now belongs to another
 * program is cleared without a signal. SIGTERM, then SIGKILL to a daemon
 * that has not exited 15 seconds later. Signals go through a pidfd opened
 * before the check, so a number reused after it is never signalled.
 */
#include "cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/tokens.h"
#include "supervisor/pidfile.h"

#define DOWN_TERM_GRACE_MS 15000  /* the seed: SIGKILL 15 s after SIGTERM */
#define DOWN_KILL_WAIT_MS 5000    /* confirming the death after SIGKILL */
#define STATUS_MAX (256 * 1024)

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Signal the process: through pidfd when there is one. */
static int
send_signal(int pidfd, pid_t pid, int sig)
{
	if (pidfd >= 0)
		return pidfd_send_signal(pidfd, sig, NULL, 0);
	return kill(pid, sig);
}

/* Wait up to ms for the process to exit (a zombie has exited). */
static bool
wait_exit(int pidfd, pid_t pid, const char *space, int ms)
{
	int64_t end = now_ms() + ms;

	for (;;) {
		int64_t left = end - now_ms();
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };
			int r = poll(&p, 1, left > 0 ? (int)(left < 100 ? left : 100) : 0);
			if (r > 0)
				return true;
		} else {
			if (pidfile_verify(pid, space) == 0)
				return true;
			struct timespec ts = { 0, 50 * 1000000L };
			nanosleep(&ts, NULL);
		}
		if (left <= 0)
			return false;
	}
}

/* The status file the daemon left, when it names pid. */
static void
remove_status_of(const char *path, pid_t pid)
{
	char err[256];
	json_t *doc;

	if (access(path, F_OK) != 0)
		return;
	if ((doc = ws_read_json(path, STATUS_MAX, err, sizeof(err))) == NULL)
		return;
	if (json_integer_value(json_object_get(doc, "pid")) == (json_int_t)pid)
		unlink(path);
	json_decref(doc);
}

int
cmd_down(int argc, char **argv)
{
	struct daemon_files f;
	char err[WS_FILE_MAX + 256];
	const char *space, *rpath, *spath;
	pid_t pid;
	int pidfd, rc;

	if ((rc = cli_daemon_files("down", argc, argv, &f)) != 0)
		return rc;
	space = f.space;
	rpath = f.pid;
	spath = f.status;
	if ((pid = pidfile_read(rpath, err, sizeof(err))) < 0) {
		log_errx("down: %s; not signalling anything", err);
		return 1;
	}
	if (pid == 0) {
		log_info("delivery daemon for space %s: not running (no %s)", space, rpath);
		return 0;
	}

	/* Open the handle first, then verify: the handle then names the
	 * process verified, or one already gone (signals to it fail). */
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0 && errno != ENOSYS && errno != ESRCH) {
		log_errx("down: pidfd_open %ld: %s", (long)pid, strerror(errno));
		return 1;
	}
	bool gone = pidfd < 0 && errno == ESRCH;
	if (gone || pidfile_verify(pid, space) == 0) {
		pidfile_remove_if_ours(rpath, pid);
		remove_status_of(spath, pid);
		log_warnx("delivery daemon for space %s: stale record (pid %ld in %s is not a "
		    "running delivery daemon); cleared it without a signal", space, (long)pid, rpath);
		if (pidfd >= 0)
			close(pidfd);
		return 0;
	}

	if (send_signal(pidfd, pid, SIGTERM) != 0 && errno != ESRCH) {
		log_errx("down: cannot signal the delivery daemon (pid %ld): %s", (long)pid,
		    strerror(errno));
		rc = 1;
		goto out;
	}
	log_info("delivery daemon for space %s: sent SIGTERM to pid %ld", space, (long)pid);
	if (!wait_exit(pidfd, pid, space, DOWN_TERM_GRACE_MS)) {
		log_warnx("delivery daemon for space %s: pid %ld has not exited %d s after "
		    "SIGTERM; sending SIGKILL", space, (long)pid, DOWN_TERM_GRACE_MS / 1000);
		if (send_signal(pidfd, pid, SIGKILL) != 0 && errno != ESRCH) {
			log_errx("down: cannot kill the delivery daemon (pid %ld): %s", (long)pid,
			    strerror(errno));
			rc = 1;
			goto out;
		}
		if (!wait_exit(pidfd, pid, space, DOWN_KILL_WAIT_MS)) {
			log_errx("down: the delivery daemon (pid %ld) is still there %d s after "
			    "SIGKILL", (long)pid, DOWN_KILL_WAIT_MS / 1000);
			rc = 1;
			goto out;
		}
	}
	/* A clean exit removed both; a killed daemon left them. */
	pidfile_remove_if_ours(rpath, pid);
	remove_status_of(spath, pid);
	log_ok("delivery daemon for space %s stopped (pid %ld)", space, (long)pid);
out:
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}
