/*
 * The daemon's stop, shared by `cotal down` and `cotal up` (Ctrl-C, a
 * broker that exits under it), and the launcher's records (launcher.h).
 *
 * The pid record (.cotal/delivery.<key>.pid) names the daemon. It is
 * signalled only when the process behind it is alive and its command line
 * names a delivery daemon of the space (or cannot be read: the check only
 * downgrades on proof); a record whose pid is gone or now belongs to another
 * program is cleared without a signal. SIGTERM, then SIGKILL to a daemon
 * that has not exited 15 seconds later. Signals go through a pidfd opened
 * before the check, so a number reused after it is never signalled.
 */
#include "launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/pidfile.h"
#include "lib/wire/tokens.h"

#define UP_RECORD_MAX (64 * 1024)

/* ---- the launcher's record ---- */

int
up_record_write(const struct space_files *f, const struct up_record *r)
{
	char err[WS_FILE_MAX + 256];
	json_t *doc = json_pack("{s:I, s:I, s:b, s:b}", "launcher", (json_int_t)r->launcher,
	    "daemon", (json_int_t)r->daemon, "brokerStarted", r->broker_started, "detached",
	    r->detached);
	int rc = doc != NULL ? ws_write_json(f->up, doc, 0600, err, sizeof(err)) : -1;

	json_decref(doc);
	if (rc != 0)
		log_warnx("up: cannot write %s: %s", f->up, doc != NULL ? err : "out of memory");
	return rc;
}

int
up_record_read(const struct space_files *f, struct up_record *r)
{
	char err[WS_FILE_MAX + 256];
	json_t *doc;

	memset(r, 0, sizeof(*r));
	if (access(f->up, F_OK) != 0 || (doc = ws_read_json(f->up, UP_RECORD_MAX, err,
	    sizeof(err))) == NULL)
		return -1;
	json_int_t l = json_integer_value(json_object_get(doc, "launcher"));
	json_int_t d = json_integer_value(json_object_get(doc, "daemon"));
	/* Never a value kill(2) would read as a process group. */
	r->launcher = l > 1 && l < INT32_MAX ? (pid_t)l : 0;
	r->daemon = d > 1 && d < INT32_MAX ? (pid_t)d : 0;
	r->broker_started = json_is_true(json_object_get(doc, "brokerStarted"));
	r->detached = json_is_true(json_object_get(doc, "detached"));
	json_decref(doc);
	return 0;
}

void
up_record_remove(const struct space_files *f)
{
	unlink(f->up);
}

/* ---- the reservation ---- */

/* The reservation's fd, or -1 (busy: errno EWOULDBLOCK). */
static int
reserve(const struct space_files *f)
{
	int fd = open(f->stop, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The stop's time, written into the reservation while it is held: up
 * restarts nothing stopped after it launched. */
static void
mark_stop(int fd)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "%lld\n", (long long)wall_ms());

	if (ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) == n)
		fsync(fd);
}

int64_t
launch_last_stop(const struct space_files *f)
{
	char text[32] = "";
	int fd = open(f->stop, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	return strtoll(text, NULL, 10);
}

/* ---- the stop ---- */

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
	int64_t end = mono_ms() + ms;

	for (;;) {
		int64_t left = end - mono_ms();
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };
			if (poll(&p, 1, left > 0 ? (int)(left < 100 ? left : 100) : 0) > 0)
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
	if ((doc = ws_read_json(path, UP_RECORD_MAX, err, sizeof(err))) == NULL)
		return;
	if (json_integer_value(json_object_get(doc, "pid")) == (json_int_t)pid)
		unlink(path);
	json_decref(doc);
}

/* The run's credential goes with the daemon, and only when `up` minted it. */
static void
remove_run_creds(const struct space_files *f)
{
	if (access(f->run, F_OK) != 0)
		return;
	if (unlink(f->creds) != 0 && errno != ENOENT) {
		log_warnx("down: cannot remove the run's credential %s: %s", f->creds,
		    strerror(errno));
		return;
	}
	unlink(f->run);
	log_info("delivery daemon for space %s: removed the run's credential %s (cotal up "
	    "minted it)", f->space, f->creds);
}

/* Stop pid (verified first). */
static enum stop_outcome
stop_pid(const struct space_files *f, pid_t pid)
{
	enum stop_outcome rc = STOP_DONE;
	int pidfd = pidfd_open(pid, 0);

	if (pidfd < 0 && errno != ENOSYS && errno != ESRCH) {
		log_errx("down: pidfd_open %ld: %s", (long)pid, strerror(errno));
		return STOP_FAILED;
	}
	bool gone = pidfd < 0 && errno == ESRCH;
	if (gone || pidfile_verify(pid, f->space) == 0) {
		pidfile_remove_if_ours(f->pid, pid);
		remove_status_of(f->status, pid);
		log_warnx("delivery daemon for space %s: stale record (pid %ld in %s is not a "
		    "running delivery daemon); cleared it without a signal", f->space, (long)pid,
		    f->pid);
		goto done;
	}
	if (send_signal(pidfd, pid, SIGTERM) != 0 && errno != ESRCH) {
		log_errx("down: cannot signal the delivery daemon (pid %ld): %s", (long)pid,
		    strerror(errno));
		rc = STOP_FAILED;
		goto out;
	}
	log_info("delivery daemon for space %s: sent SIGTERM to pid %ld", f->space, (long)pid);
	if (!wait_exit(pidfd, pid, f->space, STOP_TERM_GRACE_MS)) {
		log_warnx("delivery daemon for space %s: pid %ld has not exited %d s after "
		    "SIGTERM; sending SIGKILL", f->space, (long)pid, STOP_TERM_GRACE_MS / 1000);
		if (send_signal(pidfd, pid, SIGKILL) != 0 && errno != ESRCH) {
			log_errx("down: cannot kill the delivery daemon (pid %ld): %s", (long)pid,
			    strerror(errno));
			rc = STOP_FAILED;
			goto out;
		}
		if (!wait_exit(pidfd, pid, f->space, STOP_KILL_WAIT_MS)) {
			log_errx("down: the delivery daemon (pid %ld) is still there %d s after "
			    "SIGKILL; its credential stays", (long)pid, STOP_KILL_WAIT_MS / 1000);
			rc = STOP_FAILED;
			goto out;
		}
	}
	/* A clean exit removed both; a killed daemon left them. */
	pidfile_remove_if_ours(f->pid, pid);
	remove_status_of(f->status, pid);
	log_ok("delivery daemon for space %s stopped (pid %ld)", f->space, (long)pid);
done:
	remove_run_creds(f);
out:
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}

enum stop_outcome
launch_stop(const struct space_files *f, pid_t known)
{
	char err[WS_FILE_MAX + 256];
	struct up_record up;
	enum stop_outcome rc;
	pid_t pid;
	int fd;

	if ((fd = reserve(f)) < 0) {
		if (errno == EWOULDBLOCK) {
			log_errx("down: another stop of the delivery daemon for space %s is running "
			    "(cotal down, or cotal up stopping it); not signalling", f->space);
			return STOP_BUSY;
		}
		log_errx("down: %s: %s", f->stop, strerror(errno));
		return STOP_FAILED;
	}
	mark_stop(fd);
	if ((pid = pidfile_read(f->pid, err, sizeof(err))) < 0) {
		log_errx("down: %s; not signalling anything", err);
		close(fd);
		return STOP_FAILED;
	}
	/* A record whose process is gone or another program: cleared without
	 * a signal, and the daemon may still be one without a record yet. */
	if (pid > 0 && pidfile_verify(pid, f->space) == 0) {
		pidfile_remove_if_ours(f->pid, pid);
		remove_status_of(f->status, pid);
		log_warnx("delivery daemon for space %s: stale record (pid %ld in %s is not a "
		    "running delivery daemon); cleared it without a signal", f->space, (long)pid,
		    f->pid);
		pid = 0;
	}
	/* No record: a daemon still claiming its lease (a replacement `up` is
	 * starting) has none yet. */
	if (pid == 0 && known > 0 && pidfile_verify(known, f->space) != 0)
		pid = known;
	if (pid == 0 && up_record_read(f, &up) == 0 && up.daemon > 0 &&
	    pidfile_verify(up.daemon, f->space) != 0)
		pid = up.daemon;
	if (pid == 0) {
		log_info("delivery daemon for space %s: not running", f->space);
		remove_run_creds(f);
		rc = STOP_DONE;
	} else {
		rc = stop_pid(f, pid);
	}
	close(fd);
	return rc;
}

int
cmd_down(int argc, char **argv)
{
	struct space_files f;
	struct up_record up;
	int arc;

	if ((arc = space_files_args("down", argc, argv, &f)) != 0)
		return arc;
	enum stop_outcome rc = launch_stop(&f, 0);
	if (rc != STOP_DONE)
		return (int)rc;
	/* The broker after the daemon, when `up` started it: the workspace
	 * runs its own then. One started by hand stays. */
	if (up_record_read(&f, &up) == 0) {
		up_record_remove(&f);
		if (up.broker_started) {
			char *args[] = { (char *)"--root", f.ws.root, NULL };
			log_info("stopping the broker cotal up started for this workspace");
			return cmd_mesh_stop(2, args) == 0 ? 0 : 1;
		}
	}
	return 0;
}
