/* One lane of the delivery host: see lane.h. */
#include "host/lane.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procstat.h"
#include "lib/names.h"
#include "lib/workspace.h"
#include "service/metrics.h"

#define LANE_STATUS_MAX (256 * 1024) /* a lane's status file */

struct lane *
lane_new(const struct manifest_lane *m)
{
	struct lane *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->m = *m;
	l->state = LANE_REOPENING;
	l->out = -1;
	l->reopen_at = mono_ms();
	l->since_wall_ms = wall_ms();
	restart_init(&l->rs, &restart_lane);
	return l;
}

void
lane_free(struct lane *l)
{
	if (l == NULL)
		return;
	if (l->out >= 0)
		close(l->out);
	free(l);
}

static void
enter(struct lane *l, enum lane_state st)
{
	l->state = st;
	l->since_wall_ms = wall_ms();
}

int
lane_open(struct lane *l, const struct lane_exec *x)
{
	const char *server = l->m.server[0] != '\0' ? l->m.server : x->server;
	char *argv[12];
	int n = 0, p[2];
	pid_t pid;

	argv[n++] = (char *)"cotal-deliveryd";
	argv[n++] = (char *)"--space";
	argv[n++] = l->m.space;
	argv[n++] = (char *)"--root";
	argv[n++] = l->m.root;
	if (server != NULL) {
		argv[n++] = (char *)"--server";
		argv[n++] = (char *)server;
	}
	if (x->user != NULL) {
		argv[n++] = (char *)"--user";
		argv[n++] = (char *)x->user;
	}
	argv[n++] = (char *)"--lane";
	argv[n] = NULL;

	if (pipe2(p, O_CLOEXEC) != 0) {
		log_warn("host: lane %s: pipe", l->m.space);
		l->reopen_at = mono_ms() + restart_lane.initial_ms;
		return -1;
	}
	pid_t host = getpid();

	fflush(NULL);
	if ((pid = fork()) < 0) {
		log_warn("host: lane %s: fork", l->m.space);
		close(p[0]);
		close(p[1]);
		l->reopen_at = mono_ms() + restart_lane.initial_ms;
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		/* Its own process group: a terminal's Ctrl-C reaches the host,
		 * which stops the lanes; and the signals the host blocks are
		 * the lane's to take. */
		setpgid(0, 0);
		/* A host that dies (even by SIGKILL) stops its lanes the seed's
		 * way: each gets SIGTERM and releases its lease, so the host's
		 * restart finds the leases free instead of orphans holding them.
		 * The binary is not set-id: the setting survives the exec. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != host)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* The host's reload sends its lanes SIGHUP (reopen the log): a
		 * lane still starting ignores it until its handler is set. */
		signal(SIGHUP, SIG_IGN);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(127);
		closefrom(3);
		execv(x->self_exe, argv);
		fprintf(stderr, "✗ host: exec %s: %s\n", x->self_exe, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	if (l->out >= 0)
		close(l->out); /* the last run's pipe, drained */
	l->out = p[0];
	fcntl(l->out, F_SETFL, fcntl(l->out, F_GETFL) | O_NONBLOCK);
	l->used = 0;
	l->pid = pid;
	l->opens++;
	restart_started(&l->rs, mono_ms());
	enter(l, LANE_RUNNING);
	log_info("host: lane %s opened (pid %ld, root %s%s%s)", l->m.space, (long)pid, l->m.root,
	    server != NULL ? ", broker " : "", server != NULL ? server : "");
	return 0;
}

static void
emit(const struct lane *l, const char *s, size_t n)
{
	/* One write per line: lines of several lanes never interleave. */
	char out[LOG_STAMP_LEN + LANE_LINE_MAX + SPACE_NAME_MAX + 8];
	size_t st = log_stamp_prefix(out, sizeof(out));
	int w = snprintf(out + st, sizeof(out) - st, "[%s] ", l->m.space);

	if (w < 0)
		return;
	w += (int)st;
	/* A lane's lines were escaped by its own log; what else it wrote
	 * (a NUL, a terminal escape) is escaped here the same way. */
	w += (int)log_escape(s, n, out + w, sizeof(out) - (size_t)w - 1);
	out[w++] = '\n';
	if (write(2, out, (size_t)w) < 0)
		return;
}

void
lane_relay(struct lane *l, bool flush)
{
	/* A bounded share per wake-up: a chatty lane never holds the host
	 * (its signals, timers, the other lanes' pipes) in this loop. */
	for (int reads = 0; reads < LANE_READS_MAX; reads++) {
		if (l->out < 0)
			return;
		if (l->used == sizeof(l->line)) {
			/* A line over the bound: emitted cut, the rest follows as
			 * a line of its own. */
			emit(l, l->line, l->used);
			l->used = 0;
		}
		ssize_t r = read(l->out, l->line + l->used, sizeof(l->line) - l->used);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0) {
			size_t start = 0;
			l->used += (size_t)r;
			for (size_t i = 0; i < l->used; i++)
				if (l->line[i] == '\n') {
					emit(l, l->line + start, i - start);
					start = i + 1;
				}
			memmove(l->line, l->line + start, l->used - start);
			l->used -= start;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			/* EOF: the lane and its workers are gone. */
			if (l->used > 0)
				emit(l, l->line, l->used);
			l->used = 0;
			close(l->out);
			l->out = -1;
			return;
		}
		if (flush && l->used > 0) {
			emit(l, l->line, l->used);
			l->used = 0;
		}
		return;
	}
}

void
lane_exited(struct lane *l, int wstatus)
{
	bool loop;

	restart_cause(wstatus, l->last_exit, sizeof(l->last_exit));
	l->pid = 0;
	if (l->closing) {
		log_info("host: lane %s closed (%s)", l->m.space, l->last_exit);
		enter(l, LANE_REOPENING);
		return;
	}
	int64_t delay = restart_after_death(&l->rs, &restart_lane, mono_ms(), &loop);
	l->reopen_at = mono_ms() + delay;
	enter(l, LANE_REOPENING);
	log_warnx("host: lane %s exited (%s); reopening it in %lld ms (reopen %u; the other "
	    "lanes are not touched)", l->m.space, l->last_exit, (long long)delay,
	    l->rs.restarts);
}

void
lane_close(struct lane *l)
{
	l->closing = true;
	if (l->state == LANE_RUNNING && l->pid > 0) {
		if (kill(l->pid, SIGTERM) != 0)
			log_warn("host: lane %s: SIGTERM to pid %ld", l->m.space, (long)l->pid);
		l->kill_at = mono_ms() + LANE_STOP_GRACE_MS;
		enter(l, LANE_STOPPING);
	}
}

void
lane_kill_late(struct lane *l)
{
	if (l->state != LANE_STOPPING || l->pid <= 0 || mono_ms() < l->kill_at)
		return;
	log_warnx("host: lane %s (pid %ld) has not exited %d s after SIGTERM; sending SIGKILL",
	    l->m.space, (long)l->pid, LANE_STOP_GRACE_MS / 1000);
	kill(-l->pid, SIGKILL);
	kill(l->pid, SIGKILL);
	l->kill_at = INT64_MAX;
}

bool
lane_done(const struct lane *l)
{
	return l->closing && l->pid == 0 && l->out < 0;
}

const char *
lane_state_name(const struct lane *l)
{
	switch (l->state) {
	case LANE_REOPENING:
		return l->closing ? "closed" : l->opens == 0 ? "opening" : "reopening";
	case LANE_RUNNING:
		return "running";
	case LANE_STOPPING:
		return "stopping";
	}
	return "?";
}

json_t *
lane_status_doc(const struct lane *l)
{
	char err[WS_FILE_MAX + 256], key[SPACE_KEY_MAX + 1], path[WS_FILE_MAX + 64];
	struct workspace ws;
	json_t *doc = NULL;

	space_key(l->m.space, key, sizeof(key));
	if (l->pid > 0 && l->state == LANE_RUNNING &&
	    ws_locate(l->m.root, &ws, err, sizeof(err)) == 0) {
		snprintf(path, sizeof(path), "%s/delivery.%s.status.json", ws.cotal, key);
		if (access(path, F_OK) == 0 &&
		    (doc = ws_read_json(path, LANE_STATUS_MAX, err, sizeof(err))) != NULL &&
		    json_integer_value(json_object_get(doc, "pid")) != l->pid) {
			json_decref(doc);
			doc = NULL;
		}
	}
	if (doc == NULL)
		return json_pack("{s:s, s:s}", "space", l->m.space, "shard",
		    l->state == LANE_RUNNING ? "starting" : lane_state_name(l));
	json_object_set_new(doc, "process", procstat_json(l->pid));
	procstat_annotate_workers(doc);
	return doc;
}
