/*
 * cotal-deliveryd: the delivery daemon of one Cotal space, the role the
 * binary's entry (daemon/main.c) hands over to (supervisor/main.h):
 *
 *   cotal-deliveryd --space S [--root DIR] [--server URL[,URL...]] [--creds FILE]
 *                   [--user NAME] [--tls] [--tls-ca FILE] [--standby]
 *                   [--max-memberships N] [--max-channels N]
 *
 * This process is the supervisor: it alone reads the credential and keeps
 * its seed (mlocked, non-dumpable); the fanout, reader, registry and timer
 * workers are this same binary started as `--worker ROLE`.
 */
#include "supervisor/main.h"

#include "supervisor/holder.h"
#include "supervisor/kick.h"
#include "supervisor/supervisor.h"
#include "service/notify.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/clock.h"
#include "lib/creds/jwt.h"
#include "lib/log.h"
#include "lib/pidfile.h"
#include "lib/procstat.h"
#include "lib/servers.h"
#include "lib/creds/tlsca.h"
#include "lib/creds/verdict.h"
#include "lib/wire/tokens.h"
#include "sandbox/sandbox.h"

static struct sup S;

int64_t
sup_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A bound's value from the command line: a whole number from 1 to max.
 * 0, or -1 with a line naming the option. */
static int
bound_arg(const char *opt, const char *arg, unsigned long max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno != 0 || *end != '\0' || arg[0] < '0' || arg[0] > '9' || v < 1 || v > max) {
		log_errx("delivery: %s: \"%s\" is not a whole number from 1 to %lu", opt, arg, max);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/*
 * SIGHUP: the log file opened again by its name, for a rotation (dist/
 * logrotate/cotal-deliveryd renames it, then signals). Both of its
 * descriptors (the relay's and the logger's) are pointed at the new file;
 * if it cannot be opened the old one is kept, and the line says why.
 */
static void
reopen_log(void)
{
	int fd = open(S.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0) {
		log_warn("delivery: SIGHUP: cannot reopen %s; writing on to the file it was", S.log_path);
		return;
	}
	fflush(S.log_file);
	if (dup3(fd, S.log_fd, O_CLOEXEC) < 0 || dup3(fd, fileno(S.log_file), O_CLOEXEC) < 0)
		log_warn("delivery: SIGHUP: cannot reopen %s", S.log_path);
	else
		log_info("delivery: SIGHUP: log reopened (%s)", S.log_path);
	close(fd);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what, (void)arg;
	switch (sig) {
	case SIGCHLD:
		workers_reap(&S);
		break;
	case SIGTERM:
	case SIGINT:
		if (S.stopping)
			break;
		log_info("delivery: received %s, exiting (space %s, shard 0)",
		    sig == SIGTERM ? "SIGTERM" : "SIGINT", S.space);
		sup_stop(&S, 0);
		break;
	case SIGHUP:
		/* (A credential reload goes over the admin rail.) */
		reopen_log();
		break;
	}
	if (S.stopping && workers_all_down(&S))
		event_base_loopbreak(S.base);
}

void
sup_stop(struct sup *s, int exit_code)
{
	struct timeval tv = { SUP_STOP_GRACE_MS / 1000, (SUP_STOP_GRACE_MS % 1000) * 1000 };

	if (s->stopping)
		return;
	s->stopping = true;
	s->exit_code = exit_code;
	notify_send("STOPPING=1");
	workers_stop_all(s);
	evtimer_add(s->ev_kill, &tv);
}

/* systemd's watchdog (WATCHDOG_USEC): the event loop is alive. */
static void
on_notify_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	notify_send("WATCHDOG=1");
}

static void
on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	workers_kill_all(&S);
}

static void
on_status_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	if (S.stopping && workers_all_down(&S)) {
		event_base_loopbreak(S.base);
		return;
	}
	if (S.status_dirty)
		status_write(&S);
}

/* Every second with --metrics: this daemon's status document, with what
 * its processes cost, to the metrics server. */
static void
metrics_tick(struct metrics_srv *m, void *arg)
{
	struct sup *s = arg;
	json_t *doc = status_doc(s);

	json_object_set_new(doc, "process", procstat_json(getpid()));
	procstat_annotate_workers(doc);
	metrics_send(m, &doc, 1);
	json_decref(doc);
}

/*
 * systemd's LoadCredential= copy of a credential file: $CREDENTIALS_DIRECTORY
 * /<file>, or for a host's lane (one unit, several spaces) /space.<key>.<file>
 * (LoadCredential=space.<key>.delivery.creds:...). "" when there is none.
 */
static void
systemd_cred(const char *file, char *out, size_t outlen)
{
	const char *cd = getenv("CREDENTIALS_DIRECTORY");

	out[0] = '\0';
	if (cd == NULL || *cd == '\0')
		return;
	if (S.lane)
		snprintf(out, outlen, "%s/space.%s.%s", cd, S.key, file);
	else
		snprintf(out, outlen, "%s/%s", cd, file);
	if (access(out, F_OK) != 0)
		out[0] = '\0';
}

/*
 * A credential file of the space: systemd's LoadCredential= copy when the
 * unit hands one in, else the workspace's (dir/file), whether or not it
 * exists. Under systemd the unit is the operator's word: a workspace copy
 * beside it is ignored, and said so.
 */
static void
cred_file(const char *dir, const char *file, char *out, size_t outlen)
{
	char alt[WS_FILE_MAX];

	snprintf(out, outlen, "%s/%s", dir, file);
	systemd_cred(file, alt, sizeof(alt));
	if (alt[0] == '\0')
		return;
	if (access(out, F_OK) == 0)
		log_warnx("delivery: ignoring %s: systemd's credential %s is the one in use "
		    "($CREDENTIALS_DIRECTORY wins over the workspace)", out, alt);
	snprintf(out, outlen, "%s", alt);
}

/* The credential: --creds, else systemd's, else the workspace's. */
static int
creds_path(const char *opt, char *out, size_t outlen, char *err, size_t errlen)
{
	char dir[WS_PATH_MAX];

	if (opt != NULL) {
		snprintf(out, outlen, "%s", opt);
		return 0;
	}
	if (ws_space_dir(&S.ws, S.space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	cred_file(dir, "delivery.creds", out, outlen);
	if (access(out, F_OK) == 0)
		return 0;
	if (getenv("CREDENTIALS_DIRECTORY") != NULL)
		snprintf(err, errlen, "no delivery credential: %s/delivery.creds is missing, and so "
		    "is $CREDENTIALS_DIRECTORY/%s%s%sdelivery.creds (pass --creds FILE)", dir,
		    S.lane ? "space." : "", S.lane ? S.key : "", S.lane ? "." : "");
	else
		snprintf(err, errlen, "no delivery credential: %s/delivery.creds is missing (pass "
		    "--creds FILE)", dir);
	return -1;
}

/*
 * The $SYS users eviction sweeps with (WIRE.md §7), admitted before the
 * daemon claims its lease (seed: "It refuses if the observer belongs to
 * another account, is missing, or is part of a present but torn
 * observer/evictor rotation. An absent evictor keeps the documented
 * pre-eviction, deny-new-only posture"). 0, or -1 with err. An observer of
 * another account is refused by the verdict (preflight.c, next), which
 * `cotal creds audit` asks too.
 */
static int
admit_sys_creds(char *err, size_t errlen)
{
	static const char *const files[] = { [IPC_SYS_OBSERVER] = "sys-observer.creds",
		[IPC_SYS_EVICTOR] = "sys-evictor.creds" };
	char dir[WS_PATH_MAX], path[3][WS_FILE_MAX], why[WS_FILE_MAX + 512];

	if (ws_space_dir(&S.ws, S.space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++) {
		cred_file(dir, files[w], path[w], sizeof(path[w]));
		if (access(path[w], F_OK) != 0)
			continue;
		if (sup_creds_load(path[w], w == IPC_SYS_OBSERVER ? NEED_SYS_OBSERVER : NEED_SYS_EVICTOR,
		    &S.sys[w], why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s; not binding", why);
			return -1;
		}
		S.have_sys[w] = true;
	}
	if (!S.have_sys[IPC_SYS_OBSERVER]) {
		snprintf(err, errlen, "no $SYS observer credential: %s is missing (eviction scans "
		    "and the start-up admission need it; provision it for space %s). Not binding.",
		    path[IPC_SYS_OBSERVER], S.space);
		return -1;
	}
	if (S.have_sys[IPC_SYS_EVICTOR] &&
	    strcmp(S.sys[IPC_SYS_EVICTOR].account, S.sys[IPC_SYS_OBSERVER].account) != 0) {
		snprintf(err, errlen, "the $SYS observer and evictor belong to different system "
		    "accounts (observer %s, evictor %s): a torn rotation. Not binding.",
		    S.sys[IPC_SYS_OBSERVER].account, S.sys[IPC_SYS_EVICTOR].account);
		return -1;
	}
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++)
		if (S.have_sys[w])
			log_info("delivery: %s (user %.12s…, sha256 %s)", files[w], S.sys[w].user_pub,
			    S.sys[w].fingerprint);
	if (!S.have_sys[IPC_SYS_EVICTOR])
		log_warnx("delivery: no %s: eviction is unavailable until it is provisioned "
		    "(deny-new-only posture)", path[IPC_SYS_EVICTOR]);
	return 0;
}

/* An opaque incarnation per process: what the liveness rail names. */
static void
make_instance(void)
{
	uint8_t r[12];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		fatal("delivery: getrandom");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(S.instance + 2 * i, 3, "%02x", r[i]);
}

static void
open_log(void)
{
	struct stat a, b;

	snprintf(S.log_path, sizeof(S.log_path), "%s/delivery.%s.log", S.ws.cotal, S.key);
	snprintf(S.status_path, sizeof(S.status_path), "%s/delivery.%s.status.json", S.ws.cotal,
	    S.key);
	S.log_fd = open(S.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (S.log_fd < 0)
		fatal("delivery: open %s", S.log_path);
	log_init(NULL, NULL);
	/* log_init(NULL, NULL) writes to fd 2; point it at the file and keep
	 * stderr as a copy unless stderr already is that file. */
	FILE *f = fdopen(dup(S.log_fd), "a");
	if (f == NULL)
		fatal("delivery: log");
	S.log_file = f;
	log_init(NULL, f);
	bool tee = fstat(2, &a) != 0 || fstat(S.log_fd, &b) != 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino;
	if (tee)
		log_tee(2);
	/* The file's lines carry their time; the copy on stderr does when
	 * it is a file too, not a terminal or journald (which stamps), nor a
	 * delivery host's pipe (the host stamps what it writes). */
	log_stamp(true, tee && !S.lane && log_stream_wants_stamp(2));
}

/* The lease is ours (at start, or a standby's claim): the record, the
 * workers. */
static void
serve_begin(struct sup *s)
{
	char err[WS_FILE_MAX + 256];

	/* The record names this process only once it holds the lease: one that
	 * loses it never overwrites the live holder's (seed). A host's lane
	 * writes none: the record is what cotal down signals for one space,
	 * and the host serves several (seed). */
	if (s->lane)
		goto start;
	snprintf(s->pid_path, sizeof(s->pid_path), "%s/delivery.%s.pid", s->ws.cotal, s->key);
	if (pidfile_write(s->pid_path, getpid(), err, sizeof(err)) != 0)
		log_warnx("delivery: cannot write %s: %s", s->pid_path, err);
	/* Which process holds the row, for a successor on this machine to
	 * prove it dead (holder.h). */
	if (s->holder_path[0] != '\0' && holder_record_write(s->holder_path, s->lease.holder,
	    s->lease.incarnation, err, sizeof(err)) != 0)
		log_warnx("delivery: cannot write %s: %s (a restart waits for this lease row to "
		    "age out)", s->holder_path, err);
start:
	log_info("delivery: supervisor up (space %s, pid %ld, broker %s); starting workers",
	    s->space, (long)getpid(), s->url);
	workers_start_all(s);
}

int
supervisor_main(int argc, char **argv)
{
	const char *root = NULL, *server = NULL, *copt = NULL, *user = "nobody";
	const char *tls_ca = NULL;
	bool tls_opt = false;
	char err[WS_FILE_MAX + 1024], path[WS_FILE_MAX], url[IPC_URL_MAX];
	struct rlimit nocore = { 0, 0 };
	static const int sigs[] = { SIGTERM, SIGINT, SIGCHLD, SIGHUP };

	/* Secrets never reach a core file or another process's ptrace. */
	prctl(PR_SET_DUMPABLE, 0);
	setrlimit(RLIMIT_CORE, &nocore);
	log_init(NULL, stderr);
	json_object_seed(0);
	/* Read and cleared before any child exists (notify.c). */
	notify_init();

	const char *metrics_opt = NULL;
	metrics_init(&S.metrics);
	S.max_memberships = SUP_MAX_MEMBERSHIPS;
	S.max_channels = SUP_MAX_CHANNELS;
	for (int i = 1; i < argc; i++) {
		int more = i + 1 < argc;
		if (strcmp(argv[i], "--space") == 0 && more)
			snprintf(S.space, sizeof(S.space), "%s", argv[++i]);
		else if (strcmp(argv[i], "--root") == 0 && more)
			root = argv[++i];
		else if (strcmp(argv[i], "--server") == 0 && more)
			server = argv[++i];
		else if (strcmp(argv[i], "--creds") == 0 && more)
			copt = argv[++i];
		else if (strcmp(argv[i], "--user") == 0 && more)
			user = argv[++i];
		else if (strcmp(argv[i], "--tls") == 0)
			tls_opt = true;
		else if (strcmp(argv[i], "--standby") == 0)
			S.standby = true;
		else if (strcmp(argv[i], "--lane") == 0)
			S.lane = true;
		else if (strcmp(argv[i], "--tls-ca") == 0 && more)
			tls_ca = argv[++i];
		else if (strcmp(argv[i], "--max-memberships") == 0 && more) {
			if (bound_arg(argv[i], argv[i + 1], IPC_MEMBERSHIPS_MAX,
			    &S.max_memberships) != 0)
				return 2;
			i++;
		} else if (strcmp(argv[i], "--metrics") == 0 && more) {
			metrics_opt = argv[++i];
		} else if (strcmp(argv[i], "--max-channels") == 0 && more) {
			if (bound_arg(argv[i], argv[i + 1], IPC_CHANNELS_MAX, &S.max_channels) != 0)
				return 2;
			i++;
		} else {
			log_errx("delivery: unknown or incomplete argument \"%s\"", argv[i]);
			return SUPERVISOR_USAGE;
		}
	}
	if (S.space[0] == '\0') {
		log_errx("delivery: --space is required");
		return SUPERVISOR_USAGE;
	}
	if (strlen(S.space) > SPACE_NAME_MAX) {
		log_errx("delivery: --space: longer than %d bytes", SPACE_NAME_MAX);
		return 2;
	}
	space_token(S.space, S.token, sizeof(S.token));
	space_key(S.space, S.key, sizeof(S.key));

	/* seccomp is what keeps the seed's secrecy from a compromised worker
	 * (docs/security.md): a kernel that cannot load its filters gets no
	 * daemon, before anything is read. */
	if (sandbox_can_confine(err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	/* The root first: a directory nobody set up holds no credential. */
	if (ws_locate(root, &S.ws, err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	open_log();
	if (ws_dev_mesh_open(&S.ws)) {
		log_errx("delivery: %s; not starting (space %s, %s)", WS_OPEN_MESH_NO_DAEMON,
		    S.space, S.ws.root);
		return 1;
	}
	/* The metrics' socket first: a port in use is refused before the
	 * lease is touched. */
	if (metrics_opt != NULL && metrics_listen(&S.metrics, metrics_opt, err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	if (creds_path(copt, path, sizeof(path), err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	/* The credential's own refusals (lib/creds/verdict.c's words, the
	 * audit's too) end "; not binding". */
	if (sup_creds_load(path, NEED_DELIVERY, &S.creds, err, sizeof(err)) != 0) {
		log_errx("delivery: %s; not binding", err);
		return 1;
	}
	log_info("delivery: credential %s (user %.12s…, account %.12s…, sha256 %s)", path,
	    S.creds.user_pub, S.creds.account, S.creds.fingerprint);
	if (admit_sys_creds(err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	if (preflight(&S) != 0) {
#ifdef COTAL_TEST_HOOKS
		/* A test build may go on regardless (COTAL_TEST_SKIP_PREFLIGHT),
		 * so the e2e suite can reach the workers' own handling of a
		 * broker's denial behind the preflight. */
		if (getenv("COTAL_TEST_SKIP_PREFLIGHT") == NULL)
#endif
			return 1;
	}
	make_instance();
	bool tls = false;
	if (ws_server_url(&S.ws, S.space, server, url, sizeof(url), &tls, err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	if (resolve_servers(url, S.url, sizeof(S.url), S.ports, err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	/* A TLS-required mesh is never dialled in plaintext. */
	if (transport(&S, tls ? "mesh registry tlsRequired" : tls_opt ? "--tls" : tls_ca ? "--tls-ca" :
	    NULL, tls_ca, url, err, sizeof(err)) != 0) {
		log_errx("delivery: %s", err);
		return 1;
	}
	if (geteuid() == 0) {
		if (sandbox_lookup_user(user, &S.uid, &S.gid, err, sizeof(err)) != 0) {
			log_errx("delivery: --user %s: %s", user, err);
			return 1;
		}
		S.drop = true;
	}
	bool log_ignored;
	S.seccomp_log = sandbox_seccomp_log_requested(&log_ignored);
	if (log_ignored)
		log_warnx("delivery: COTAL_SECCOMP=log ignored: only a test build logs seccomp "
		    "violations instead of killing; this build kills, as the start-up check "
		    "promises");
	if (S.seccomp_log)
		log_warnx("delivery: COTAL_SECCOMP=log: seccomp violations are logged, not killed "
		    "(diagnosis only)");
	/* seccomp holds the credential's secrecy on every kernel; Landlock
	 * adds the brokers' ports where the kernel has network rules. */
	S.landlock_abi = sandbox_landlock_abi();
	if (S.landlock_abi < 4)
		log_warnx("delivery: this kernel's Landlock (ABI %d%s) cannot narrow the workers' TCP "
		    "connections to the brokers' ports: the unit's IPAddressAllow= is the operator's "
		    "control (files and other sockets stay denied by seccomp)", S.landlock_abi,
		    S.landlock_abi == 0 ? ": none" : ", network rules need 4");
	ssize_t n = readlink("/proc/self/exe", S.self_exe, sizeof(S.self_exe) - 1);
	if (n <= 0)
		fatal("delivery: readlink /proc/self/exe");
	S.self_exe[n] = '\0';

	S.base = event_base_new();
	if (S.base == NULL)
		fatalx("delivery: cannot start the event loop");
	S.evpipe[0] = S.evpipe[1] = -1;
	/* A signal that arrives while the lease is claimed waits for the
	 * broker's answer (seed): blocked until the handlers are in place. */
	sigset_t stop_sigs, old_mask;
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &stop_sigs, &old_mask);
	signal(SIGPIPE, SIG_IGN);
	int rrc = resident_open(&S, err, sizeof(err));
	if (rrc == -3) {
		/* Stopped while the service manager's start waited for the broker. */
		log_info("delivery: received %s, exiting (space %s, shard 0)", err, S.space);
		resident_close(&S);
		event_base_free(S.base);
		return 0;
	}
	if (rrc != 0) {
		/* -2: demanded TLS refused (lib/nats/natsconn.h), the line says so. */
		if (rrc == -2)
			log_errx("delivery: %s", err);
		else
			log_errx("delivery: broker %s unreachable at start: %s; start the broker "
			    "(cotal mesh start, or cotal up for a dev mesh) or name another with "
			    "--server", S.url, err);
		resident_close(&S);
		event_base_free(S.base);
		return 1;
	}
	int claimed = shard_claim(&S);
	/* Under a service manager a refused start waits a lease's life as a
	 * standby before it exits 1 (lease.h): a holder that crashed elsewhere
	 * is succeeded at once, and the unit restarts it twice a minute at most. */
	if (claimed == 1 && !S.standby && notify_active())
		S.standby_until = mono_ms() + SERVICE_LEASE_WAIT_MS;
	if (claimed < 0 || (claimed == 1 && !S.standby && S.standby_until == 0)) {
		if (claimed == 1)
			shard_claim_refused(&S);
		resident_close(&S);
		event_base_free(S.base);
		return 1;
	}
	reload_init(&S);
	if (kick_init(&S) != 0)
		fatal("delivery: the KICK monitor's thread");
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		S.ev_sig[i] = evsignal_new(S.base, sigs[i], on_signal, NULL);
		event_add(S.ev_sig[i], NULL);
	}
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	S.ev_kill = evtimer_new(S.base, on_kill_timer, NULL);
	S.ev_status = event_new(S.base, -1, EV_PERSIST, on_status_timer, NULL);
	struct timeval every = { 0, 500 * 1000 };
	event_add(S.ev_status, &every);
	struct event *ev_wd = NULL;
	int64_t wd_ms = notify_watchdog_interval_ms();
	if (wd_ms > 0) {
		struct timeval wd = { (time_t)(wd_ms / 1000), (suseconds_t)(wd_ms % 1000) * 1000 };
		ev_wd = event_new(S.base, -1, EV_PERSIST, on_notify_watchdog, NULL);
		event_add(ev_wd, &wd);
	}

	workers_init(&S);
	S.metrics.uid = S.uid;
	S.metrics.gid = S.gid;
	S.metrics.drop = S.drop;
	S.metrics.seccomp_log = S.seccomp_log;
	S.metrics.self_exe = S.self_exe;
	S.metrics.log_fd = S.log_fd;
	S.metrics.tick = metrics_tick;
	S.metrics.arg = &S;
	metrics_begin(&S.metrics, S.base);
	S.on_claimed = serve_begin;
	if (claimed == 0)
		serve_begin(&S);
	else
		standby_begin(&S);
	event_base_dispatch(S.base);

	/* Reap what is left; the kill timer made sure nothing lingers. */
	while (!workers_all_down(&S)) {
		workers_kill_all(&S);
		int st;
		pid_t pid = wait(&st);
		if (pid < 0)
			break;
		for (int i = 0; i < SUP_WORKERS; i++)
			if (S.workers[i].pid == pid)
				S.workers[i].pid = 0;
	}
	/* The workers are gone: nothing acts on the shard any more. */
	shard_release(&S);
	shard_free(&S);
	standby_free(&S);
	reload_free(&S);
	kick_free(&S);
	if (S.pid_path[0] != '\0')
		pidfile_remove_if_ours(S.pid_path, getpid());
	/* A row the release could not delete (the broker gone past the
	 * watchdog's window) outlives this process by up to its TTL: the
	 * record stays, so the next start here proves this process dead and
	 * takes the row over at once instead of waiting it out. (A row another
	 * daemon took names another incarnation: the record proves nothing.) */
	if (S.holder_path[0] != '\0' && !S.lease.held)
		holder_record_remove_if_ours(S.holder_path, S.lease.incarnation);
	if (ev_wd != NULL)
		event_free(ev_wd);
	metrics_end(&S.metrics);
	resident_close(&S);
	status_remove(&S);
	workers_free(&S);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		event_free(S.ev_sig[i]);
	event_free(S.ev_kill);
	event_free(S.ev_status);
	event_base_free(S.base);
	sup_creds_free(&S.creds);
	free(S.tls_ca);
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++)
		if (S.have_sys[w])
			sup_creds_free(&S.sys[w]);
	return S.exit_code;
}
