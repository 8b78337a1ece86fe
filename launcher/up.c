/*
 * `cotal up [--space S] [--root DIR] [--detach]`: bring the space's delivery
 * plane up on the workspace's mesh and report the daemon only when it
 * serves (seed: "cotal up reports the daemon only when it is actually
 * serving"). In the foreground it stays: it restarts a daemon it started
 * that dies while the workspace's broker runs, stops it on Ctrl-C or when
 * that broker exits, and renews the run's credential at 75 % of its life.
 *
 * `cotal deliver ...`: the deprecated entry; one line, then the daemon.
 */
#include "launcher/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "lib/clock.h"
#include "cli/mint.h"
#include "lib/wire/ctlclient.h"
#include "lib/log.h"
#include "lib/pidfile.h"

#define UP_SERVE_WAIT_MS 30000    /* a launched daemon gets this long to serve */
#define UP_TICK_MS 250
/* The seed: a failed restart is retried after the 30 s lease TTL; and 3 s
 * more, for the broker to expire the row (2.14 does it up to a second or
 * two late). */
#define UP_RETRY_MS 33000
#define UP_CREDS_TTL_S 86400      /* the run's credential: 24 h unless --creds-ttl */
#define UP_RENEW_PERCENT 75
#define REASON_MAX 2048

const char *
launch_daemon_path(void)
{
	const char *env = getenv("COTAL_DELIVERYD");

	if (env != NULL && *env != '\0')
		return env;
	if (*COTAL_BUILT_DELIVERYD != '\0' && access(COTAL_BUILT_DELIVERYD, X_OK) == 0)
		return COTAL_BUILT_DELIVERYD;
	return "cotal-deliveryd";
}

/* How long a launched daemon gets to serve. A test build may shorten it
 * (COTAL_TEST_SERVE_WAIT_MS), so the e2e suite meets the not-bound warning
 * without waiting the whole 30 s. */
static int
serve_wait_ms(void)
{
#ifdef COTAL_TEST_HOOKS
	const char *env = getenv("COTAL_TEST_SERVE_WAIT_MS");

	if (env != NULL && atoi(env) > 0)
		return atoi(env);
#endif
	return UP_SERVE_WAIT_MS;
}

/* ---- one run ---- */

struct up {
	struct space_files f;
	bool detach;
	bool dev;             /* the workspace runs its own broker (dev mesh) */
	bool open;            /* and that mesh is open (no authentication) */
	bool broker_started;  /* and this up started it */
	bool tls;             /* the mesh registry demands TLS */
	const char *metrics;  /* --metrics ADDR, passed to the daemon */
	int64_t creds_ttl_s;
	int64_t renew_at;     /* wall ms; 0: not the renewal owner (it minted nothing) */
	sigset_t sigs, oldmask;
	pid_t child;
	int64_t launched_wall;
	off_t log_from;       /* the log's size at the launch */
	int stop_sig;         /* a signal asked up to stop */
};

static const char *
cause_of(int status, char *buf, size_t len)
{
	if (WIFEXITED(status)) {
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	} else if (WIFSIGNALED(status)) {
		const char *n = sigabbrev_np(WTERMSIG(status));
		if (n != NULL)
			snprintf(buf, len, "killed by SIG%s", n);
		else
			snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	} else {
		snprintf(buf, len, "status %d", status);
	}
	return buf;
}

/* What the daemon wrote since the launch, its first 256 KB (a refusal, or
 * the metrics server's address, comes within a few lines): NUL-ended, to
 * free; NULL when it cannot be read. */
static char *
log_since_launch(const struct up *u)
{
	size_t cap = 256 * 1024, len = 0;
	char *text = malloc(cap + 1);
	int fd = open(u->f.log, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (text == NULL || fd < 0 || lseek(fd, u->log_from, SEEK_SET) < 0) {
		free(text);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (len < cap && (r = read(fd, text + len, cap - len)) > 0)
		len += (size_t)r;
	close(fd);
	text[len] = '\0';
	return text;
}

/* The daemon's own reason, from what it logged since the launch: its last
 * "✗" line, and the lease holder's line after it when there is one. */
static void
reason_from_log(const struct up *u, char *out, size_t outlen, char *detail, size_t dlen)
{
	static const char holder_mark[] = "• delivery: the lease of shard 0 is held by";
	const char *p, *last = NULL, *holder = NULL;
	char *text = log_since_launch(u);

	out[0] = detail[0] = '\0';
	if (text == NULL)
		return;
	for (p = text; *p != '\0';) {
		const char *nl = strchr(p, '\n'), *t = log_line_text(p);
		if (strncmp(t, "✗ ", strlen("✗ ")) == 0)
			last = t, holder = NULL;
		else if (last != NULL && strncmp(t, holder_mark, strlen(holder_mark)) == 0)
			holder = t;
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	if (last != NULL) {
		last += strlen("✗ ");
		snprintf(out, outlen, "%.*s", (int)strcspn(last, "\n"), last);
	}
	if (holder != NULL) {
		holder += strlen("• ");
		snprintf(detail, dlen, "%.*s", (int)strcspn(holder, "\n"), holder);
	}
	free(text);
}

static off_t
log_size(const struct up *u)
{
	struct stat st;

	return stat(u->f.log, &st) == 0 ? st.st_size : 0;
}

/* Fork and exec the daemon: its own process group (Ctrl-C reaches up, which
 * stops it the seed's way); detached, its own session with stdout and
 * stderr on the space's log. */
static pid_t
launch(struct up *u)
{
	const char *bin = launch_daemon_path();
	char *argv[10];
	int n = 0;
	pid_t pid;

	argv[n++] = (char *)"cotal-deliveryd";
	argv[n++] = (char *)"--space";
	argv[n++] = u->f.space;
	argv[n++] = (char *)"--root";
	argv[n++] = u->f.ws.root;
	if (u->tls)
		argv[n++] = (char *)"--tls";
	if (u->metrics != NULL) {
		argv[n++] = (char *)"--metrics";
		argv[n++] = (char *)u->metrics;
	}
	argv[n] = NULL;
	u->log_from = log_size(u);
	u->launched_wall = wall_ms();
	fflush(NULL);
	if ((pid = fork()) < 0) {
		log_warn("up: fork");
		return -1;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &u->oldmask, NULL);
		if (u->detach) {
			setsid();
			int fd = open(u->f.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd < 0 || nul < 0)
				_exit(127);
			dup2(nul, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		} else {
			setpgid(0, 0);
		}
		closefrom(3);
		/* The daemon is up's child, not a service manager's main
		 * process: were up run by one, the daemon must neither speak
		 * to it nor wait as a unit's start does (issue 42). */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		execvp(bin, argv);
		fprintf(stderr, "✗ up: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	u->child = pid;
	return pid;
}

enum served { SERVED, EXITED, NOT_BOUND, INTERRUPTED };

/* A stop signal queued for up (zero wait). */
static int
pending_stop(struct up *u)
{
	struct timespec zero = { 0, 0 };
	siginfo_t si;
	int sig;

	while ((sig = sigtimedwait(&u->sigs, &si, &zero)) > 0)
		if (sig != SIGCHLD) {
			u->stop_sig = sig;
			return sig;
		}
	return 0;
}

/* Wait until the daemon serves: its pid record names it (written once it
 * holds the lease) and its live.delivery responder answers "bound" from
 * its own reading of a ready lease row. */
static enum served
wait_serving(struct up *u, int *status, int64_t *took_ms)
{
	int64_t start = mono_ms(), end = start + serve_wait_ms();
	struct cli_session mgr = { 0 };
	bool have_mgr = false;
	char err[2048];
	enum served r = NOT_BOUND;

	while (mono_ms() < end) {
		if (waitpid(u->child, status, WNOHANG) == u->child) {
			u->child = 0;
			r = EXITED;
			break;
		}
		if (pending_stop(u)) {
			r = INTERRUPTED;
			break;
		}
		if (pidfile_read(u->f.pid, err, sizeof(err)) == u->child) {
			if (!have_mgr)
				have_mgr = cli_manager_open(&u->f.ws, u->f.space, NULL, &mgr, err,
				    sizeof(err)) == 0;
			char inst[256], why[512];
			if (have_mgr && ctl_liveness(mgr.client, 1000, inst, sizeof(inst), why,
			    sizeof(why)) == LIVE_BOUND) {
				r = SERVED;
				break;
			}
		}
		struct timespec ts = { 0, 100 * 1000000L };
		nanosleep(&ts, NULL);
	}
	*took_ms = mono_ms() - start;
	if (have_mgr)
		cli_session_close(&mgr);
	return r;
}

/* ---- the run's credential ---- */

static bool
holds_dev_signer(const struct up *u)
{
	char path[WS_FILE_MAX];

	snprintf(path, sizeof(path), "%s/keys/space.%s-signing.nk", u->f.ws.mesh, u->f.key);
	return access(path, R_OK) == 0;
}

/* Mint the run's delivery credential (the same user key when one is there:
 * the daemon pins its identity) and mark it as the run's. */
static int
mint_run_creds(struct up *u, bool renewal)
{
	struct mint_req req = { .profile = PROFILE_DELIVERY, .space = u->f.space };
	struct creds old = { 0 };
	struct minted m;
	char err[1024];
	int rc = -1;

	req.exp = (int64_t)time(NULL) + u->creds_ttl_s;
	if (access(u->f.creds, F_OK) == 0) {
		if (creds_load(u->f.creds, &old, err, sizeof(err)) != 0) {
			log_errx("up: %s", err);
			return -1;
		}
		req.seed = old.seed;
	}
	if (mint_user(&u->f.ws, &req, &m, err, sizeof(err)) != 0) {
		log_errx("up: mint the run's delivery credential: %s", err);
		goto out;
	}
	if (ws_write_file(u->f.creds, m.creds, strlen(m.creds), 0600, err, sizeof(err)) != 0) {
		log_errx("up: %s", err);
		minted_free(&m);
		goto out;
	}
	json_t *run = json_pack("{s:s, s:s, s:I}", "mintedBy", "cotal up", "user", m.user_pub,
	    "expires", (json_int_t)req.exp);
	if (run == NULL || ws_write_json(u->f.run, run, 0600, err, sizeof(err)) != 0)
		log_warnx("up: cannot write %s: %s", u->f.run, run ? err : "out of memory");
	json_decref(run);
	log_info("%s the run's delivery credential %s (user %.12s…, expires in %lld s)",
	    renewal ? "renewed" : "minted", u->f.creds, m.user_pub, (long long)u->creds_ttl_s);
	minted_free(&m);
	u->renew_at = wall_ms() + u->creds_ttl_s * 1000 * UP_RENEW_PERCENT / 100;
	rc = 0;
out:
	if (old.jwt != NULL)
		creds_free(&old);
	return rc;
}

/* At 75 % of the credential's life: a fresh JWT for the same key, adopted
 * by the daemon over reloadCreds (WIRE.md §5). */
static void
renew(struct up *u)
{
	struct cli_session mgr;
	struct ctl_result res;
	char err[2048];

	if (mint_run_creds(u, true) != 0) {
		u->renew_at = wall_ms() + 60000;
		log_warnx("up: the renewal failed; trying again in 60 s");
		return;
	}
	if (cli_manager_open(&u->f.ws, u->f.space, NULL, &mgr, err, sizeof(err)) != 0) {
		log_warnx("up: renewed credential written, but reloadCreds could not be asked: %s",
		    err);
		return;
	}
	ctl_call_retry(mgr.client, RAIL_ADMIN, "reloadCreds", NULL, 5000, 15000, &res);
	if (res.outcome == CTL_REPLIED && res.ok)
		log_ok("delivery daemon adopted the renewed credential (reloadCreds)");
	else
		log_warnx("delivery daemon did not adopt the renewed credential: %s",
		    res.outcome == CTL_REPLIED ? (res.error ? res.error : "refused") : res.why);
	ctl_result_free(&res);
	cli_session_close(&mgr);
}

/*
 * Run a `cotal` command for its exit status, its stdout (a report for
 * the command's own users) kept in a temporary file: copied to stderr when
 * it fails and show_on_failure is set, else dropped. stderr passes.
 */
static int
run_quiet(int (*cmd)(int, char **), int argc, char **argv, bool show_on_failure)
{
	FILE *rep = tmpfile();
	int saved = dup(1), rc;
	char line[1024];

	fflush(stdout);
	if (saved >= 0 && rep != NULL)
		dup2(fileno(rep), 1);
	rc = cmd(argc, argv);
	fflush(stdout);
	if (saved >= 0) {
		dup2(saved, 1);
		close(saved);
	}
	if (rep == NULL)
		return rc;
	if (rc != 0 && show_on_failure) {
		rewind(rep);
		while (fgets(line, sizeof(line), rep) != NULL)
			fputs(line, stderr);
	}
	fclose(rep);
	return rc;
}

/* ---- the steps ---- */

static int
bring_broker(struct up *u, const char *nats_server)
{
	char err[512];
	json_t *mesh = ws_dev_mesh(&u->f.ws, err, sizeof(err));

	u->dev = mesh != NULL;
	json_decref(mesh);
	u->open = u->dev && ws_dev_mesh_open(&u->f.ws);
	if (!u->dev || cli_mesh_running(&u->f.ws))
		return 0;
	char *args[] = { (char *)"--root", u->f.ws.root, (char *)"--nats-server",
		(char *)nats_server, NULL };
	/* Started, or tried: a cluster's nodes run even when the wait for its
	 * meta group fails, and they are this up's for cotal down to stop. */
	u->broker_started = true;
	return cmd_mesh_start(nats_server != NULL ? 4 : 2, args) != 0 ? -1 : 0;
}

/* Its per-stream report is for `cotal space provision`; up says one line. */
static int
provision(struct up *u)
{
	char *args[] = { u->f.space, (char *)"--root", u->f.ws.root, NULL };

	return run_quiet(cmd_space_provision, 3, args, false);
}

static void
record(struct up *u)
{
	struct up_record r = { .launcher = u->detach ? 0 : getpid(), .daemon = u->child,
		.broker_started = u->broker_started, .detached = u->detach };
	struct up_record was;

	/* A broker an earlier up started stays that up's to stop. */
	if (up_record_read(&u->f, &was) == 0 && was.broker_started)
		r.broker_started = true;
	up_record_write(&u->f, &r);
}

/* A stop lands: cotal down stopped the daemon (or is stopping it). */
static bool
stopped_from_outside(struct up *u)
{
	return launch_last_stop(&u->f) >= u->launched_wall;
}

/* Launch and report; 0 serving (or bound late), 1 not serving, 2 stopped
 * by cotal down while starting. */
/* --metrics: where the daemon's metrics server listens, as it said. */
static void
say_metrics(const struct up *u)
{
	static const char mark[] = "delivery: metrics server (pid ";
	char *text, *p, *url, *end;

	if (u->metrics == NULL || (text = log_since_launch(u)) == NULL)
		return;
	if ((p = strstr(text, mark)) != NULL && (url = strstr(p, ") on http://")) != NULL &&
	    (end = strstr(url, "/metrics and /healthz")) != NULL && end - url < 200) {
		url += strlen(") on ");
		log_info("metrics: %.*s/metrics, health: %.*s/healthz", (int)(end - url), url,
		    (int)(end - url), url);
	}
	free(text);
}

static int
start_daemon(struct up *u, bool again)
{
	char cause[64], reason[REASON_MAX], detail[REASON_MAX];
	int status = 0;
	int64_t took;

	if (launch(u) < 0)
		return 1;
	record(u);
	switch (wait_serving(u, &status, &took)) {
	case SERVED:
		if (again)
			log_ok("delivery daemon running again (pid %ld, serving %lld ms after the "
			    "restart)", (long)u->child, (long long)took);
		else
			log_ok("delivery daemon serving space %s (pid %ld, %lld ms after the launch; "
			    "log %s)", u->f.space, (long)u->child, (long long)took, u->f.log);
		say_metrics(u);
		return 0;
	case NOT_BOUND:
		log_warnx("delivery daemon (pid %ld) started but is not serving yet: its "
		    "live.delivery responder is not bound %d s after the launch; see %s",
		    (long)u->child, serve_wait_ms() / 1000, u->f.log);
		return 0;
	case INTERRUPTED:
		return 0; /* the loop stops it */
	case EXITED:
		break;
	}
	if (stopped_from_outside(u)) {
		log_info("delivery daemon (%s) stopped by cotal down while starting; it stays "
		    "stopped", cause_of(status, cause, sizeof(cause)));
		return 2;
	}
	reason_from_log(u, reason, sizeof(reason), detail, sizeof(detail));
	log_errx("delivery daemon for space %s exited (%s) without serving%s%s", u->f.space,
	    cause_of(status, cause, sizeof(cause)), reason[0] ? ": " : "", reason);
	if (detail[0] != '\0')
		log_info("%s", detail);
	return 1;
}

/* Stop the daemon the seed's way (the stop `cotal down` uses). */
static void
stop_daemon(struct up *u)
{
	if (launch_stop(&u->f, u->child) == STOP_DONE)
		u->child = 0;
	else if (u->child > 0 && waitpid(u->child, NULL, WNOHANG) == u->child)
		u->child = 0;
}

static void
final_record(struct up *u)
{
	struct up_record r = { .broker_started = u->broker_started };
	struct up_record was;

	if (up_record_read(&u->f, &was) != 0)
		return; /* cotal down removed it: nothing left to stop */
	r.broker_started = r.broker_started || was.broker_started;
	up_record_write(&u->f, &r);
}

/* The foreground: supervise until a stop. */
static int
supervise(struct up *u)
{
	int64_t retry_at = 0;
	char cause[64];
	/* The workspace's own broker, running when supervision began. */
	bool broker_watch = u->dev && cli_mesh_running(&u->f.ws);

	for (;;) {
		struct timespec tick = { 0, UP_TICK_MS * 1000000L };
		siginfo_t si;
		int sig = u->stop_sig ? u->stop_sig : sigtimedwait(&u->sigs, &si, &tick);

		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			log_info("up: %s; stopping the delivery daemon", sig == SIGINT ?
			    "interrupted (Ctrl-C)" : sig == SIGTERM ? "received SIGTERM" :
			    "received SIGHUP");
			stop_daemon(u);
			final_record(u);
			return 0;
		}
		if (u->child > 0) {
			int status;
			if (waitpid(u->child, &status, WNOHANG) == u->child) {
				u->child = 0;
				cause_of(status, cause, sizeof(cause));
				bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
				    (WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM ||
				    WTERMSIG(status) == SIGINT));
				if (clean || stopped_from_outside(u)) {
					log_info("delivery daemon exited (%s)%s; it stays stopped", cause,
					    stopped_from_outside(u) ? ", stopped by cotal down" : "");
					final_record(u);
					return 0;
				}
				if (!u->dev || !cli_mesh_running(&u->f.ws)) {
					log_warnx("delivery daemon exited (%s) and this workspace's broker is "
					    "not running; not restarting it", cause);
					final_record(u);
					return 1;
				}
				log_warnx("delivery daemon exited (%s) while nats-server is running - "
				    "restarting it", cause);
				retry_at = mono_ms();
			}
		}
		if (broker_watch && !cli_mesh_running(&u->f.ws)) {
			log_warnx("up: nats-server exited under cotal up; stopping the delivery daemon");
			stop_daemon(u);
			final_record(u);
			return 1;
		}
		/* A stop that lands between two attempts wins, at once. */
		if (u->child == 0 && retry_at != 0 && stopped_from_outside(u)) {
			log_info("delivery daemon stopped by cotal down between two restart attempts; "
			    "not restarting it");
			final_record(u);
			return 0;
		}
		if (u->child == 0 && retry_at != 0 && mono_ms() >= retry_at) {
			retry_at = 0;
			int r = start_daemon(u, true);
			if (r == 2) {
				final_record(u);
				return 0;
			}
			if (r != 0) {
				log_warnx("up: the restart failed; trying again in %d s (the lease's 30 s "
				    "TTL, and the broker's expiry)", UP_RETRY_MS / 1000);
				retry_at = mono_ms() + UP_RETRY_MS;
			}
		}
		if (u->renew_at != 0 && u->child > 0 && wall_ms() >= u->renew_at)
			renew(u);
	}
}

int
cmd_up(int argc, char **argv)
{
	const char *root = NULL, *space = NULL, *nats_server = NULL;
	static struct up u;
	char err[WS_FILE_MAX + 1024];
	pid_t have;

	memset(&u, 0, sizeof(u));
	u.creds_ttl_s = UP_CREDS_TTL_S;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (strcmp(a, "--space") == 0 && more)
			space = argv[++i];
		else if (strcmp(a, "--root") == 0 && more)
			root = argv[++i];
		else if (strcmp(a, "--nats-server") == 0 && more)
			nats_server = argv[++i];
		else if (strcmp(a, "--detach") == 0)
			u.detach = true;
		else if (strcmp(a, "--metrics") == 0 && more)
			u.metrics = argv[++i];
		else if (strcmp(a, "--creds-ttl") == 0 && more) {
			char *end;
			long long v = strtoll(argv[++i], &end, 10);
			if (*end != '\0' || v < 20 || v > 366LL * 86400) {
				log_errx("up: --creds-ttl %s: seconds, 20 to %lld", argv[i],
				    366LL * 86400);
				return CLI_USAGE;
			}
			u.creds_ttl_s = v;
		} else {
			log_errx("up: unknown or incomplete argument \"%s\"", a);
			return CLI_USAGE;
		}
	}
	if (space == NULL) {
		log_errx("up: --space is required");
		return CLI_USAGE;
	}
	/*
	 * The stop signals are up's to take (sigtimedwait), from the start:
	 * before the first broker connection, whose library threads inherit
	 * this mask. A thread that did not block SIGINT would take a Ctrl-C
	 * with its default action, and up would die leaving its daemon
	 * running (SIGSTOPped, even, with nobody to stop it).
	 */
	sigemptyset(&u.sigs);
	sigaddset(&u.sigs, SIGINT);
	sigaddset(&u.sigs, SIGTERM);
	sigaddset(&u.sigs, SIGHUP);
	sigaddset(&u.sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &u.sigs, &u.oldmask);
	if (space_files(root, space, &u.f, err, sizeof(err)) != 0) {
		log_errx("up: %s", err);
		return 1;
	}

	/* A daemon of the space already runs here: a detached up has nothing
	 * to do, a foreground one cannot supervise what it did not start. */
	if ((have = pidfile_read(u.f.pid, err, sizeof(err))) > 0 &&
	    pidfile_verify(have, u.f.space) != 0) {
		if (u.detach) {
			log_ok("delivery daemon for space %s already running (pid %ld)", space,
			    (long)have);
			return 0;
		}
		log_errx("up: a delivery daemon for space %s already runs here (pid %ld, %s); stop "
		    "it with cotal down --space %s first", space, (long)have, u.f.pid, space);
		return 1;
	}

	int brought = bring_broker(&u, nats_server);
	/* A broker this up started is cotal down's to stop, however up ends
	 * from here (a failed step, a Ctrl-C before the launch), its own start
	 * included. */
	if (u.broker_started) {
		struct up_record r = { .broker_started = true, .detached = true };
		up_record_write(&u.f, &r);
	}
	if (brought != 0)
		return 1;
	/* The seed: open dev mode has no delivery daemon. Its broker runs (the
	 * live path needs no daemon); cotal down stops it if up started it. */
	if (u.open) {
		log_warnx("up: space %s: %s", space, WS_OPEN_MESH_NO_DAEMON);
		log_info("up: the open mesh's broker %s; no delivery daemon started",
		    u.broker_started ? "started (cotal down stops it)" : "runs");
		return 0;
	}
	char url[1024];
	if (ws_server_url(&u.f.ws, space, NULL, url, sizeof(url), &u.tls, err, sizeof(err)) != 0) {
		log_errx("up: %s", err);
		return 1;
	}
	if (provision(&u) != 0)
		return 1;
	if (holds_dev_signer(&u)) {
		if (mint_run_creds(&u, false) != 0)
			return 1;
	} else {
		/* The operator's credential: audited, used, never removed. */
		char *args[] = { u.f.creds, (char *)"--space", u.f.space, NULL };
		if (access(u.f.creds, F_OK) != 0) {
			log_errx("up: no delivery credential at %s, and this workspace holds no dev "
			    "signer to mint one; put the credential your toolchain minted there",
			    u.f.creds);
			return 1;
		}
		/* Its report is for reviewers: shown when it fails. */
		if (run_quiet(cmd_creds_audit, 3, args, true) != 0) {
			log_errx("up: the delivery credential %s does not pass its audit (its report "
			    "above names what it lacks)", u.f.creds);
			return 1;
		}
	}

	/* A stop asked while up prepared: nothing launched, nothing to stop. */
	if (pending_stop(&u)) {
		log_info("up: %s before the daemon was launched; not launching it",
		    u.stop_sig == SIGINT ? "interrupted (Ctrl-C)" : "stopped");
		return 1;
	}
	int rc = start_daemon(&u, false);
	if (rc == 2) {
		final_record(&u);
		return 0;
	}
	if (rc != 0 || u.detach) {
		if (rc == 0 && u.stop_sig != 0)
			log_warnx("up: interrupted before the daemon was seen serving; it runs on, "
			    "detached (cotal status --space %s; cotal down --space %s stops it)", space,
			    space);
		else if (rc == 0)
			log_info("detached: the daemon's lines go to %s; stop it with cotal down "
			    "--space %s", u.f.log, space);
		else
			final_record(&u);
		return rc;
	}
	log_info("up: supervising the delivery daemon (Ctrl-C stops it)");
	return supervise(&u);
}

int
cmd_deliver(int argc, char **argv)
{
	const char *bin = launch_daemon_path();
	char **args = calloc((size_t)argc + 2, sizeof(*args));

	if (args == NULL)
		return 1;
	fprintf(stderr, "! cotal deliver is deprecated: run cotal-deliveryd with the same "
	    "arguments, or the systemd preset (dist/systemd/cotal-deliveryd@.service)\n");
	args[0] = (char *)"cotal-deliveryd";
	for (int i = 0; i < argc; i++)
		args[i + 1] = argv[i];
	fflush(NULL);
	execvp(bin, args);
	log_errx("deliver: exec %s: %s", bin, strerror(errno));
	free(args);
	return 127;
}
