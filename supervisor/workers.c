/*
 * The workers: spawn (fork + exec of this binary, two socketpairs), the
 * IPC dispatch of the main and sign channels, reaping and restarting with
 * backoff. A worker that speaks garbage is killed and restarted: a peer
 * that breaks the protocol is broken or compromised.
 */
#include "supervisor/kick.h"
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/wire/tokens.h"
#include "service/childenv.h"
#include "worker/worker.h"

static const char *const roles[SUP_WORKERS] = { "fanout", "reader", "registry", "timer" };

static void worker_spawn(struct sup_worker *w);

static void
worker_kill(struct sup_worker *w, const char *why)
{
	if (w->pid > 0) {
		log_errx("delivery: worker %s (pid %ld): %s; killing it", w->role, (long)w->pid, why);
		kill(w->pid, SIGKILL);
	}
}

static void
close_channels(struct sup_worker *w)
{
	if (w->ev_ch) {
		event_free(w->ev_ch);
		w->ev_ch = NULL;
	}
	if (w->ev_sign) {
		event_free(w->ev_sign);
		w->ev_sign = NULL;
	}
	if (w->ch >= 0)
		close(w->ch);
	if (w->sign >= 0)
		close(w->sign);
	w->ch = w->sign = -1;
}

/*
 * One frame from a worker's channel: 1 with a message, 0 when there is
 * nothing to read yet, -1 when the channel is done. A channel that closed
 * (the worker is exiting) or spoke garbage (the worker is killed) is no
 * longer listened to; the reaper restarts the worker.
 */
static int
worker_recv(struct sup_worker *w, int fd, struct ipc_msg *m)
{
	char err[256];
	int rc = ipc_recv(fd, w->buf, IPC_TO_SUPERVISOR, m, err, sizeof(err));

	if (rc < 0 && err[0] == '\0' && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (rc <= 0) {
		if (rc < 0)
			worker_kill(w, err[0] ? err : "ipc receive failed");
		close_channels(w);
		return -1;
	}
	return 1;
}

/* A request only the registry may make: true from it; from any other
 * worker false, the worker killed (why) and its channels closed. */
static bool
from_registry(struct sup_worker *w, const char *why)
{
	if (strcmp(w->role, "registry") == 0)
		return true;
	worker_kill(w, why);
	close_channels(w);
	return false;
}

static void
on_main(evutil_socket_t fd, short what, void *arg)
{
	struct sup_worker *w = arg;
	struct ipc_msg m;

	(void)what;
	if (worker_recv(w, fd, &m) <= 0)
		return;
	switch (m.type) {
	case IPC_READY:
		if (w->phase == WP_STARTING) {
			w->phase = WP_RUNNING;
			log_ok("delivery: worker %s up (pid %ld), confined, own broker connection",
			    w->role, (long)w->pid);
			/* WIRE.md §8's line is the supervisor's, written when the
			 * timer is bound: no worker line can read as it. */
			if (w->policy == &restart_timer)
				log_ok("timer writer up (space %s) — workflow pauses on this space "
				    "expire", w->sup->space);
			if (workers_all_running(w->sup))
				shard_workers_bound(w->sup);
		}
		break;
	case IPC_REFUSALS:
		if (strcmp(w->role, "registry") != 0) {
			worker_kill(w, "sent REFUSALS, which only the registry reports");
			break;
		}
		memcpy(&w->refusals, m.payload, sizeof(w->refusals));
		w->have_refusals = true;
		w->sup->status_dirty = true;
		break;
	case IPC_STATUS:
		memcpy(&w->status, m.payload, sizeof(w->status));
		w->have_status = true;
		w->sup->status_dirty = true;
		resident_workers_reach(w->sup);
		break;
	case IPC_QUIESCED:
		log_debug("worker %s quiesced", w->role);
		w->quiesced = true;
		shard_worker_quiesced(w->sup);
		break;
	case IPC_KICK_REQ:
		if (from_registry(w, "ipc: KICK_REQ from a worker that sweeps no broker"))
			kick_request(w, &m);
		break;
	case IPC_RELOAD_REQ:
		if (from_registry(w, "ipc: RELOAD_REQ from a worker that serves no admin rail"))
			reload_request(w, &m);
		break;
	default:
		worker_kill(w, "ipc: a message the main channel does not carry");
		close_channels(w);
	}
}

/*
 * The sign channel: the supervisor's table of permitted requests (think
 * OpenSSH's monitor). Every worker may have its own connection's nonce
 * signed; only the registry may have a $SYS user's signed, for the
 * eviction sweeps, and only for a user that was provisioned.
 */
static void
on_sign(evutil_socket_t fd, short what, void *arg)
{
	struct sup_worker *w = arg;
	const struct sup_creds *as;
	uint8_t sig[NKEY_SIG_LEN];
	const uint8_t *nonce;
	size_t nlen;
	struct ipc_msg m;
	char err[256];

	(void)what;
	if (worker_recv(w, fd, &m) <= 0)
		return;
	switch (m.type) {
	case IPC_SIGN_REQ:
		as = &w->sup->creds;
		nonce = m.payload;
		nlen = m.len;
		break;
	case IPC_SIGN_SYS:
		/* The observer's alone: the evictor's KICKs are the
		 * supervisor's to send (kick.c), never a worker's. */
		if (strcmp(w->role, "registry") != 0 || m.payload[0] != IPC_SYS_OBSERVER ||
		    !w->sup->have_sys[m.payload[0]]) {
			worker_kill(w, "ipc: a $SYS signature this worker may not ask for");
			close_channels(w);
			return;
		}
		as = &w->sup->sys[m.payload[0]];
		nonce = m.payload + 1;
		nlen = m.len - 1;
		break;
	default:
		worker_kill(w, "ipc: only SIGN_REQ and SIGN_SYS ride the sign channel");
		close_channels(w);
		return;
	}
	if (!budget_take(&w->budget, sup_now_ms())) {
		/* More than its connections need (the first connect, the
		 * reconnects at their backoff): refused, and said at most
		 * LOG_LIMIT_LINES a window, its count in the status. */
		uint64_t untold;
		w->signs_refused++;
		w->sup->status_dirty = true;
		if (log_limit_admit(&w->sign_lines, sup_now_ms(), log_limit_window_ms(), &untold))
			log_warnx("delivery: worker %s (pid %ld) asks for nonce signatures faster than "
			    "its connections need (%d at once, then one every %d ms, kept across "
			    "restarts): refused (%llu refused so far%s)", w->role, (long)w->pid,
			    SIGN_BURST, SIGN_REFILL_MS, (unsigned long long)w->signs_refused,
			    untold > 0 ? ", some not logged: the count is in cotal status" : "");
		if (++w->signs_refused_life > SIGN_REFUSED_MAX) {
			char why[128];
			snprintf(why, sizeof(why), "sent more than %d refused signing requests",
			    SIGN_REFUSED_MAX);
			worker_kill(w, why);
			close_channels(w);
			return;
		}
		ipc_send(fd, IPC_SIGN_REP, NULL, 0);
		return;
	}
	if (sup_sign_nonce(as, nonce, nlen, sig, err, sizeof(err)) != 0) {
		/* A worker that asks to sign anything else is not to be trusted. */
		worker_kill(w, err);
		ipc_send(fd, IPC_SIGN_REP, NULL, 0);
		close_channels(w);
		return;
	}
	ipc_send(fd, IPC_SIGN_REP, sig, sizeof(sig));
}

static void
on_restart(evutil_socket_t fd, short what, void *arg)
{
	struct sup_worker *w = arg;

	(void)fd, (void)what;
	if (!w->sup->stopping)
		worker_spawn(w);
}

/* In the child between fork and exec: async-signal-safe calls only. */
static void
child_exec(struct sup_worker *w, int ch, int sign, int logw)
{
	struct sup *s = w->sup;
	char *argv[] = { (char *)"cotal-deliveryd", (char *)"--worker", (char *)w->role, NULL };

	/* Workers never outlive the supervisor. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Move every fd we keep above the target numbers first: the log may
	 * well sit on fd 3 or 4 itself. */
	int hch = fcntl(ch, F_DUPFD_CLOEXEC, 16), hsign = fcntl(sign, F_DUPFD_CLOEXEC, 16);
	int hlog = fcntl(logw, F_DUPFD_CLOEXEC, 16), nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (hch < 0 || hsign < 0 || hlog < 0 || nul < 0)
		_exit(126);
	if (dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(hlog, 2) < 0 ||
	    dup2(hch, WORKER_FD_MAIN) < 0 || dup2(hsign, WORKER_FD_SIGN) < 0)
		_exit(126);
	/* Nothing else crosses exec: not the broker socket, not the creds. */
	closefrom(WORKER_FD_SIGN + 1);
	/* (Built in workers_init: nothing is allocated here.) */
	execve(s->self_exe, argv, child_env());
	_exit(127);
}

/* The registry's JWTs of the $SYS users (never their seeds). */
static int
send_sys_creds(struct sup_worker *w, enum ipc_sys which)
{
	const struct sup_creds *c = &w->sup->sys[which];
	struct ipc_sys_creds h = { .which = which };
	size_t jl = strlen(c->c.jwt);
	uint8_t *buf;
	int rc;

	snprintf(h.inbox_prefix, sizeof(h.inbox_prefix), "%s", c->inbox);
	snprintf(h.user, sizeof(h.user), "%s", c->user_pub);
	snprintf(h.account, sizeof(h.account), "%s", w->sup->creds.account);
	if (sizeof(h) + jl > IPC_MAX_PAYLOAD || (buf = malloc(sizeof(h) + jl)) == NULL)
		return -1;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), c->c.jwt, jl);
	rc = ipc_send(w->ch, IPC_SYS_CREDS, buf, sizeof(h) + jl);
	free(buf);
	return rc;
}

/* What the lease says, for the liveness rail and the re-checking refusal. */
static int
send_lease(struct sup_worker *w)
{
	struct ipc_lease l = { .state = w->sup->shard == SHARD_SERVING ? IPC_LEASE_SERVING :
		w->sup->shard == SHARD_RECHECKING ? IPC_LEASE_RECHECKING : IPC_LEASE_NONE };

	snprintf(l.instance, sizeof(l.instance), "%s", w->sup->instance);
	return ipc_send(w->ch, IPC_LEASE, &l, sizeof(l));
}

void
workers_send_lease(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++)
		if (strcmp(s->workers[i].role, "registry") == 0 && s->workers[i].ch >= 0 &&
		    send_lease(&s->workers[i]) != 0)
			worker_kill(&s->workers[i], "cannot send it the lease state");
}

static int
send_registry_extras(struct sup_worker *w)
{
	for (int which = IPC_SYS_OBSERVER; which <= IPC_SYS_EVICTOR; which++)
		if (w->sup->have_sys[which] && send_sys_creds(w, which) != 0)
			return -1;
	return send_lease(w);
}

static void
worker_spawn(struct sup_worker *w)
{
	struct sup *s = w->sup;
	struct ipc_config cfg;
	int chp[2], sgp[2], logp[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chp) != 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sgp) != 0 ||
	    pipe2(logp, O_CLOEXEC) != 0)
		fatal("delivery: socketpair for worker %s", w->role);
	pid = fork();
	if (pid < 0)
		fatal("delivery: fork worker %s", w->role);
	if (pid == 0)
		child_exec(w, chp[1], sgp[1], logp[1]);
	close(chp[1]);
	close(sgp[1]);
	close(logp[1]);
	relay_open(&w->relay, s->base, logp[0]);
	w->pid = pid;
	w->ch = chp[0];
	w->sign = sgp[0];
	w->phase = WP_STARTING;
	w->have_status = false;
	w->signs_refused_life = 0;
	w->have_refusals = false;
	restart_started(&w->restart, sup_now_ms());
	evutil_make_socket_nonblocking(w->ch);
	evutil_make_socket_nonblocking(w->sign);
	w->ev_ch = event_new(s->base, w->ch, EV_READ | EV_PERSIST, on_main, w);
	w->ev_sign = event_new(s->base, w->sign, EV_READ | EV_PERSIST, on_sign, w);
	event_add(w->ev_ch, NULL);
	event_add(w->ev_sign, NULL);

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.role, sizeof(cfg.role), "%s", w->role);
	snprintf(cfg.space, sizeof(cfg.space), "%s", s->space);
	snprintf(cfg.url, sizeof(cfg.url), "%s", s->url);
	snprintf(cfg.tls_host, sizeof(cfg.tls_host), "%s", s->tls_host);
	snprintf(cfg.inbox_prefix, sizeof(cfg.inbox_prefix), "%s", s->creds.inbox);
	cfg.seccomp_log = s->seccomp_log;
	for (int i = 0; i < IPC_SERVERS_MAX; i++)
		cfg.broker_ports[i] = s->ports[i];
	cfg.uid = s->uid;
	cfg.gid = s->gid;
	cfg.drop_privs = s->drop;
	cfg.features_off = (s->register_off ? IPC_OFF_REGISTER : 0) |
	    (s->reader_memory_off ? IPC_OFF_READER_MEMORY : 0) |
	    (s->watch_fc_off ? IPC_OFF_WATCH_FC : 0);
	cfg.max_memberships = s->max_memberships;
	cfg.max_channels = s->max_channels;
	/* The socket buffer holds both: a blocking worker reads them at once. */
	if (ipc_send(w->ch, IPC_CONFIG, &cfg, sizeof(cfg)) != 0 ||
	    ipc_send(w->ch, IPC_JWT, s->creds.c.jwt, strlen(s->creds.c.jwt)) != 0 ||
	    /* The CA before the worker confines itself (it opens no file). */
	    (s->tls_host[0] != '\0' &&
	    ipc_send(w->ch, IPC_TLS_CA, s->tls_ca, strlen(s->tls_ca)) != 0) ||
	    (strcmp(w->role, "registry") == 0 && send_registry_extras(w) != 0) ||
	    (s->shard == SHARD_RECHECKING && ipc_send(w->ch, IPC_QUIESCE, NULL, 0) != 0))
		worker_kill(w, "cannot send its configuration");
	/* A worker started while the lease is re-checked begins quiesced: it
	 * reads the QUIESCE before its loop starts (worker/worker.c). */
	w->quiesced = false;
	s->status_dirty = true;
	log_debug("worker %s spawned (pid %ld)", w->role, (long)pid);
}

void
workers_init(struct sup *s)
{
	child_env_build();
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		memset(w, 0, sizeof(*w));
		w->sup = s;
		w->role = roles[i];
		w->policy = strcmp(roles[i], "timer") == 0 ? &restart_timer : &restart_delivery;
		restart_init(&w->restart, w->policy);
		/* Once per role, not per process: a worker that crashes and
		 * is respawned spends from the same budget. */
		budget_init(&w->budget, sup_now_ms(), SIGN_BURST, SIGN_REFILL_MS);
		pthread_mutex_init(&w->sign_lines.mu, NULL);
		/* Workers may not write files: each one's stderr is a pipe
		 * relayed into the log, SUP_RELAY_LINES a window across its
		 * respawns. */
		relay_init(&w->relay, w->role, "this worker", SUP_RELAY_LINES, s->log_fd);
		w->relay.timer_voice = w->policy == &restart_timer;
		w->ch = w->sign = -1;
		w->ev_restart = evtimer_new(s->base, on_restart, w);
	}
}

void
workers_start_all(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++)
		worker_spawn(&s->workers[i]);
}

void
workers_stop_all(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		evtimer_del(w->ev_restart);
		if (w->pid > 0) {
			w->phase = WP_STOPPING;
			if (w->ch < 0 || ipc_send(w->ch, IPC_STOP, NULL, 0) != 0)
				kill(w->pid, SIGKILL);
		}
	}
}

void
workers_kill_all(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++)
		if (s->workers[i].pid > 0) {
			log_warnx("delivery: worker %s (pid %ld) did not stop in %d ms; killing it",
			    s->workers[i].role, (long)s->workers[i].pid, SUP_STOP_GRACE_MS);
			kill(s->workers[i].pid, SIGKILL);
		}
}

bool
workers_all_running(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++)
		if (s->workers[i].phase != WP_RUNNING)
			return false;
	return true;
}

void
workers_quiesce(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		w->quiesced = false;
		if (w->pid > 0 && w->ch >= 0 && ipc_send(w->ch, IPC_QUIESCE, NULL, 0) != 0)
			worker_kill(w, "cannot send it QUIESCE");
	}
}

void
workers_resume(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		if (w->pid > 0 && w->ch >= 0 && ipc_send(w->ch, IPC_RESUME, NULL, 0) != 0)
			worker_kill(w, "cannot send it RESUME");
	}
}

/* A worker that is not running makes no effect: it counts as quiet. */
bool
workers_all_quiesced(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++) {
		const struct sup_worker *w = &s->workers[i];
		if (w->pid > 0 && w->ch >= 0 && !w->quiesced)
			return false;
	}
	return true;
}

bool
workers_all_down(struct sup *s)
{
	for (int i = 0; i < SUP_WORKERS; i++)
		if (s->workers[i].pid > 0)
			return false;
	return true;
}

void
workers_reap(struct sup *s)
{
	int wstatus;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
		struct sup_worker *w = NULL;
		for (int i = 0; i < SUP_WORKERS; i++)
			if (s->workers[i].pid == pid)
				w = &s->workers[i];
		if (w == NULL) {
			metrics_reaped(&s->metrics, pid, wstatus, s->stopping);
			continue;
		}
		restart_cause(wstatus, w->last_exit, sizeof(w->last_exit));
		close_channels(w);
		shard_worker_quiesced(s);
		w->pid = 0;
		w->have_status = false;
		s->status_dirty = true;
		resident_workers_reach(s);
		if (s->stopping) {
			w->phase = WP_DOWN;
			if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
				log_warnx("delivery: worker %s (pid %ld) %s while stopping", w->role,
				    (long)pid, w->last_exit);
			continue;
		}
		bool loop, was_looping = restart_looping(&w->restart, w->policy, sup_now_ms());
		int64_t delay = restart_after_death(&w->restart, w->policy, sup_now_ms(), &loop);
#ifdef COTAL_TEST_HOOKS
		/* A test build may restart later: COTAL_TEST_RESTART_DELAY_MS (the
		 * e2e suite's Prometheus, scraping every second, sees the gap). */
		if (getenv("COTAL_TEST_RESTART_DELAY_MS") != NULL &&
		    atoi(getenv("COTAL_TEST_RESTART_DELAY_MS")) > delay)
			delay = atoi(getenv("COTAL_TEST_RESTART_DELAY_MS"));
		/* Or sooner: COTAL_TEST_RESTART_MAX_MS caps the backoff (a crash
		 * loop reached in seconds). */
		if (getenv("COTAL_TEST_RESTART_MAX_MS") != NULL &&
		    atoi(getenv("COTAL_TEST_RESTART_MAX_MS")) < delay)
			delay = atoi(getenv("COTAL_TEST_RESTART_MAX_MS"));
#endif
		w->phase = WP_DOWN;
		/* A crash loop degrades the daemon, it never ends it: said once
		 * as the loop begins; the worker is restarted at its capped
		 * backoff and the other roles keep serving (issue 42). */
		if (loop && !was_looping)
			log_errx("delivery: worker %s is crash-looping (%s; more than %d restarts "
			    "in %lld s): restarting it at most %lld s apart; the other roles keep "
			    "serving", w->role, w->last_exit, RESTART_LOOP_MAX,
			    (long long)(w->policy->loop_window_ms / 1000),
			    (long long)(w->policy->max_ms / 1000));
		log_warnx("delivery: worker %s (pid %ld) %s — restarting in %lld ms", w->role,
		    (long)pid, w->last_exit, (long long)delay);
		/* And the timer writer's own line for operators (WIRE.md §8). */
		if (w->policy == &restart_timer)
			log_warnx("timer writer: down (%s) — retrying in %llds; pauses on this space "
			    "do not expire until it is back", w->last_exit, (long long)(delay / 1000));
		struct timeval tv = { delay / 1000, (delay % 1000) * 1000 };
		evtimer_add(w->ev_restart, &tv);
	}
}

void
workers_free(struct sup *s)
{
	child_env_free();
	for (int i = 0; i < SUP_WORKERS; i++) {
		close_channels(&s->workers[i]);
		relay_close(&s->workers[i].relay);
		if (s->workers[i].ev_restart)
			event_free(s->workers[i].ev_restart);
	}
}

