/* The delivery host: see host.h. Its loop, the manifest, its records. */
#include "host/host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "host/lane.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/manifest.h"
#include "lib/pidfile.h"
#include "sandbox/sandbox.h"
#include "service/metrics.h"
#include "service/notify.h"

/* A reload's closed lanes may still be stopping beside their successors. */
#define HOST_LANES_MAX (2 * MANIFEST_LANES_MAX)
#define HOST_TICK_MS 1000

struct host {
	const char *manifest;
	struct lane_exec x;
	char self_exe[PATH_MAX];
	char pid_path[PATH_MAX + 64], status_path[PATH_MAX + 64];
	struct lane *lanes[HOST_LANES_MAX];
	size_t n;
	bool stopping;
	bool dirty;              /* the status file is behind */
	int64_t started_wall_ms;
	/* --metrics: one endpoint for every lane (service/metrics.h), its
	 * events on a libevent base run from this loop. */
	struct metrics_srv metrics;
	struct event_base *eb;
};

static void
usage(void)
{
	fprintf(stderr, "usage: cotal-deliveryd --spaces MANIFEST [--server URL] [--run-dir DIR] "
	    "[--user USER] [--metrics [ADDR:]PORT]\n");
	exit(2);
}

/* ---- lanes ---- */

static int
host_add(struct host *h, const struct manifest_lane *m)
{
	struct lane *l;

	if (h->n == HOST_LANES_MAX || (l = lane_new(m)) == NULL) {
		log_errx("host: lane %s: no room (%d lanes at most, stopping ones included)",
		    m->space, HOST_LANES_MAX);
		return -1;
	}
	h->lanes[h->n++] = l;
	h->dirty = true;
	return 0;
}

/* A lane of space still running or stopping (a predecessor a reload closed). */
static bool
space_busy(const struct host *h, const struct lane *self)
{
	for (size_t i = 0; i < h->n; i++) {
		const struct lane *o = h->lanes[i];
		if (o != self && o->pid > 0 && strcmp(o->m.space, self->m.space) == 0)
			return true;
	}
	return false;
}

static struct lane *
lane_of_pid(struct host *h, pid_t pid)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->lanes[i]->pid == pid)
			return h->lanes[i];
	return NULL;
}

static void
reap(struct host *h)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct lane *l = lane_of_pid(h, pid);
		if (l == NULL) {
			metrics_reaped(&h->metrics, pid, status, h->stopping);
			continue;
		}
		lane_relay(l, true); /* its last lines before the host's */
		lane_exited(l, status);
		h->dirty = true;
	}
}

static void
sweep_done(struct host *h)
{
	size_t k = 0;

	for (size_t i = 0; i < h->n; i++) {
		if (lane_done(h->lanes[i])) {
			lane_free(h->lanes[i]);
			h->dirty = true;
		} else
			h->lanes[k++] = h->lanes[i];
	}
	h->n = k;
}

static void
stop_all(struct host *h, const char *why)
{
	if (h->stopping)
		return;
	h->stopping = true;
	log_info("host: %s; stopping %zu lane%s", why, h->n, h->n == 1 ? "" : "s");
	notify_send("STOPPING=1");
	for (size_t i = 0; i < h->n; i++)
		lane_close(h->lanes[i]);
	h->dirty = true;
}

/* SIGHUP: the manifest again; only what changed is touched. */
static void
reload(struct host *h)
{
	struct manifest m;
	char err[1024];
	size_t opened = 0, closed = 0, before = h->n;

	if (manifest_load(h->manifest, &m, err, sizeof(err)) != 0) {
		log_errx("host: SIGHUP: %s; every lane stays as it is", err);
		return;
	}
	for (size_t i = 0; i < h->n; i++) {
		struct lane *l = h->lanes[i];
		const struct manifest_lane *e = manifest_find(&m, l->m.space);
		if (l->closing)
			continue;
		if (e == NULL || strcmp(e->root, l->m.root) != 0 ||
		    strcmp(e->server, l->m.server) != 0) {
			log_info("host: SIGHUP: lane %s %s; closing it", l->m.space, e == NULL ?
			    "is no longer in the manifest" : "changed its root or server");
			lane_close(l);
			closed++;
		}
	}
	for (size_t j = 0; j < m.n; j++) {
		bool have = false;
		for (size_t i = 0; i < h->n && !have; i++)
			have = !h->lanes[i]->closing &&
			    strcmp(h->lanes[i]->m.space, m.lanes[j].space) == 0;
		if (!have && host_add(h, &m.lanes[j]) == 0)
			opened++;
	}
	/* The others are untouched but for their logs: SIGHUP makes a lane's
	 * daemon reopen its log file (a rotation, dist/logrotate). */
	for (size_t i = 0; i < before && i < h->n; i++)
		if (!h->lanes[i]->closing && h->lanes[i]->pid > 0)
			kill(h->lanes[i]->pid, SIGHUP);
	log_info("host: SIGHUP: manifest %s re-read: %zu lane%s to open, %zu to close, the "
	    "others untouched (their logs reopened)", h->manifest, opened, opened == 1 ? "" : "s",
	    closed);
	manifest_free(&m);
	h->dirty = true;
}

/* ---- records ---- */

static void
write_status(struct host *h)
{
	json_t *lanes = json_array(), *doc;
	char err[512];

	for (size_t i = 0; i < h->n; i++) {
		const struct lane *l = h->lanes[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "space", l->m.space,
		    "root", l->m.root, "state", lane_state_name(l), "pid", (json_int_t)l->pid,
		    "since", (json_int_t)l->since_wall_ms, "reopens",
		    (json_int_t)l->rs.restarts, "lastExit", l->last_exit);
		if (l->m.server[0] != '\0')
			json_object_set_new(o, "server", json_string(l->m.server));
		if (l->state == LANE_REOPENING && !l->closing)
			json_object_set_new(o, "reopenAt", json_integer(wall_ms() +
			    (l->reopen_at > mono_ms() ? l->reopen_at - mono_ms() : 0)));
		json_array_append_new(lanes, o);
	}
	doc = json_pack("{s:I, s:s, s:I, s:b, s:I, s:o}", "pid", (json_int_t)getpid(),
	    "manifest", h->manifest, "started", (json_int_t)h->started_wall_ms, "stopping",
	    h->stopping, "updatedAt", (json_int_t)wall_ms(), "lanes", lanes);
	if (doc == NULL || ws_replace_json(h->status_path, doc, 0600, err, sizeof(err)) != 0)
		log_warnx("host: cannot write %s: %s", h->status_path, doc ? err : "out of memory");
	json_decref(doc);
	h->dirty = false;
}

/* Every second with --metrics: each lane's status document (a lane that
 * does not run says so), to the one endpoint. */
static void
metrics_tick(struct metrics_srv *m, void *arg)
{
	struct host *h = arg;
	json_t *docs[HOST_LANES_MAX] = { 0 };
	size_t n = 0;

	for (size_t i = 0; i < h->n; i++)
		if (!h->lanes[i]->closing)
			docs[n++] = lane_status_doc(h->lanes[i]);
	metrics_send(m, docs, n);
	for (size_t i = 0; i < n; i++)
		json_decref(docs[i]);
}

/* ---- the loop ---- */

static int
next_timeout(const struct host *h)
{
	int64_t now = mono_ms(), t = now + HOST_TICK_MS;

	for (size_t i = 0; i < h->n; i++) {
		const struct lane *l = h->lanes[i];
		/* One waiting for its predecessor's exit is woken by SIGCHLD. */
		if (l->state == LANE_REOPENING && !l->closing && l->reopen_at < t &&
		    !space_busy(h, l))
			t = l->reopen_at;
		if (l->state == LANE_STOPPING && l->kill_at < t)
			t = l->kill_at;
	}
	return t > now ? (int)(t - now) : 0;
}

static void
run(struct host *h, int sfd)
{
	struct pollfd pfd[3 + HOST_LANES_MAX];
	struct lane *owner[3 + HOST_LANES_MAX];
	int64_t wd_ms = notify_watchdog_interval_ms(), wd_next = mono_ms();

	for (;;) {
		nfds_t n = 0;
		pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (size_t i = 0; i < h->n; i++)
			if (h->lanes[i]->out >= 0) {
				owner[n] = h->lanes[i];
				pfd[n++] = (struct pollfd){ .fd = h->lanes[i]->out, .events = POLLIN };
			}
		/* The metrics server's lines and its channel wake the loop too;
		 * libevent then runs what is ready, and its due tick. */
		nfds_t lanes_end = n;
		if (h->metrics.relay.rd >= 0)
			pfd[n++] = (struct pollfd){ .fd = h->metrics.relay.rd, .events = POLLIN };
		if (h->metrics.ch >= 0 && h->metrics.out != NULL)
			pfd[n++] = (struct pollfd){ .fd = h->metrics.ch, .events = POLLOUT };
		if (poll(pfd, n, next_timeout(h)) < 0 && errno != EINTR)
			fatal("host: poll");
		if (h->eb != NULL)
			event_base_loop(h->eb, EVLOOP_NONBLOCK);
		n = lanes_end;

		for (nfds_t k = 1; k < n; k++)
			if (pfd[k].revents != 0)
				lane_relay(owner[k], false);
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				switch (si.ssi_signo) {
				case SIGTERM:
					stop_all(h, "received SIGTERM");
					break;
				case SIGINT:
					stop_all(h, "received SIGINT");
					break;
				case SIGHUP:
					if (!h->stopping)
						reload(h);
					break;
				case SIGCHLD:
					break;
				}
			}
		}
		reap(h);
		for (size_t i = 0; i < h->n; i++) {
			struct lane *l = h->lanes[i];
			lane_kill_late(l);
			if (!h->stopping && l->state == LANE_REOPENING && !l->closing &&
			    mono_ms() >= l->reopen_at && !space_busy(h, l)) {
				lane_open(l, &h->x);
				h->dirty = true;
			}
		}
		sweep_done(h);
		if (h->dirty)
			write_status(h);
		if (h->stopping && h->n == 0)
			return;
		if (wd_ms > 0 && mono_ms() >= wd_next) {
			notify_send("WATCHDOG=1");
			wd_next = mono_ms() + wd_ms;
		}
	}
}

/* --metrics: the socket bound now (a refusal names the option), the
 * server confined as the lanes' workers are (--user, default nobody). */
static int
host_metrics(struct host *h, const char *opt)
{
	char err[512];

	if (metrics_listen(&h->metrics, opt, err, sizeof(err)) != 0) {
		log_errx("host: %s", err);
		return -1;
	}
	if (geteuid() == 0) {
		const char *user = h->x.user != NULL ? h->x.user : "nobody";
		if (sandbox_lookup_user(user, &h->metrics.uid, &h->metrics.gid, err,
		    sizeof(err)) != 0) {
			log_errx("host: --user %s: %s", user, err);
			return -1;
		}
		h->metrics.drop = true;
	}
	bool log_ignored;
	h->metrics.seccomp_log = sandbox_seccomp_log_requested(&log_ignored);
	if (log_ignored)
		log_warnx("host: COTAL_SECCOMP=log ignored: only a test build logs seccomp "
		    "violations instead of killing; this build kills");
	h->metrics.self_exe = h->self_exe;
	h->metrics.log_fd = 2;
	h->metrics.tick = metrics_tick;
	h->metrics.arg = h;
	if ((h->eb = event_base_new()) == NULL) {
		log_errx("host: cannot start the metrics server's event loop");
		return -1;
	}
	return 0;
}

int
host_main(int argc, char **argv)
{
	static struct host h;
	const char *run_dir = getenv("RUNTIME_DIRECTORY");
	char err[1024], first[PATH_MAX];
	struct manifest m;
	sigset_t sigs;
	int sfd;
	pid_t other;

	const char *metrics_opt = NULL;

	log_init(NULL, stderr);
	log_stamp(log_stream_wants_stamp(2), false);
	metrics_init(&h.metrics);
	for (int i = 1; i < argc; i++) {
		bool more = i + 1 < argc;
		if (strcmp(argv[i], "--spaces") == 0 && more)
			h.manifest = argv[++i];
		else if (strcmp(argv[i], "--server") == 0 && more)
			h.x.server = argv[++i];
		else if (strcmp(argv[i], "--run-dir") == 0 && more)
			run_dir = argv[++i];
		else if (strcmp(argv[i], "--user") == 0 && more)
			h.x.user = argv[++i];
		else if (strcmp(argv[i], "--metrics") == 0 && more)
			metrics_opt = argv[++i];
		else {
			log_errx("host: unknown or incomplete argument \"%s\" (a host takes --spaces, "
			    "--server, --run-dir and --user; each lane's space and root come from the "
			    "manifest)", argv[i]);
			usage();
		}
	}
	if (h.manifest == NULL)
		usage();
	/* systemd lists several RuntimeDirectory= paths colon-separated. */
	if (run_dir != NULL && strchr(run_dir, ':') != NULL) {
		snprintf(first, sizeof(first), "%.*s", (int)strcspn(run_dir, ":"), run_dir);
		run_dir = first;
	}
	/* A lane's pipe must never be handed fd 0, 1 or 2. */
	int nul;
	while ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && nul <= 2)
		fcntl(nul, F_SETFD, 0);
	if (nul > 2)
		close(nul);
	/* The whole manifest is valid before anything starts. */
	if (manifest_load(h.manifest, &m, err, sizeof(err)) != 0) {
		log_errx("host: %s", err);
		return 1;
	}
	if (manifest_host_files(h.manifest, run_dir, h.pid_path, sizeof(h.pid_path),
	    h.status_path, sizeof(h.status_path), err, sizeof(err)) != 0) {
		log_errx("host: %s", err);
		manifest_free(&m);
		return 1;
	}
	if ((other = pidfile_read(h.pid_path, err, sizeof(err))) > 0 && other != getpid() &&
	    pidfile_verify_host(other) != 0) {
		log_errx("host: another delivery host (pid %ld) serves from this run directory (its "
		    "record %s); a second host for the same spaces belongs on another machine or "
		    "--run-dir, where the lanes' leases decide", (long)other, h.pid_path);
		manifest_free(&m);
		return 1;
	}
	ssize_t n = readlink("/proc/self/exe", h.self_exe, sizeof(h.self_exe) - 1);
	if (n <= 0) {
		log_warn("host: readlink /proc/self/exe");
		manifest_free(&m);
		return 1;
	}
	h.self_exe[n] = '\0';
	h.x.self_exe = h.self_exe;
	if (metrics_opt != NULL && host_metrics(&h, metrics_opt) != 0) {
		manifest_free(&m);
		return 1;
	}
	h.started_wall_ms = wall_ms();

	/* Read and cleared before any lane exists: the host alone speaks to
	 * systemd. */
	notify_init();
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		log_warn("host: signalfd");
		manifest_free(&m);
		return 1;
	}
	/* Without its record the host could not be found, stopped or shown. */
	if (pidfile_write(h.pid_path, getpid(), err, sizeof(err)) != 0) {
		log_errx("host: cannot write its pid record %s: %s (--run-dir names where)",
		    h.pid_path, err);
		close(sfd);
		return 1;
	}
	for (size_t i = 0; i < m.n; i++)
		host_add(&h, &m.lanes[i]);
	log_ok("delivery host up (pid %ld): %zu lane%s from %s; status %s", (long)getpid(), m.n,
	    m.n == 1 ? "" : "s", h.manifest, h.status_path);
	manifest_free(&m);
	notify_sendf("READY=1\nSTATUS=%zu lanes", h.n);
	metrics_begin(&h.metrics, h.eb);

	run(&h, sfd);

	metrics_end(&h.metrics);
	if (h.eb != NULL)
		event_base_free(h.eb);
	close(sfd);
	pidfile_remove_if_ours(h.pid_path, getpid());
	unlink(h.status_path);
	log_info("host: every lane stopped; exiting");
	return 0;
}
