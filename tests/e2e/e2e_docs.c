/*
 * e2e_docs: every example command of README.md and the pages of docs/, extracted
 * from the pages when the test runs (the rule: docs/development.md,
 * "Tested examples"), run for real with /bin/sh against dev meshes on a
 * real broker (operator/JWT mode, the build's cotal and cotal-deliveryd
 * first on PATH, HOME a fresh directory per page), or named in NOT_RUN
 * with the reason it cannot run here (issue 43).
 *
 * What is checked: each example exits as its page implies (0, or what
 * EXPECT says with its reason); the output lines a page shows after a `$ `
 * command are lines of its output, numbers and `…` taken as any value; no
 * example is neither run nor listed; and no entry of NOT_RUN, EXPECT,
 * SUBST or GROUND names text no page holds any more. A failure names the
 * page, the line and the command.
 *
 * This file holds the tables, the running and the tests; reading the
 * examples out of the pages, and matching a shown line against a run's
 * output, is docs_pages.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/docs_pages.h"
#include "tests/harness/harness.h"

#ifndef COTAL_SOURCE_DIR
#error "COTAL_SOURCE_DIR must name the source tree holding README.md and docs/"
#endif

#define EX_MAX 256
#define REPORT_MAX (64 * 1024)
#define RUN_TIMEOUT_S "60" /* one example's bound: a hung command fails */
#define READY_MS 30000     /* a foreground daemon's READY=1 */

/* ---- the tables: the one place a doc writer edits besides the page ---- */

/*
 * Examples that do not run here, each with the reason. An entry no page
 * holds any more fails the test.
 */
static const struct {
	const char *cmd;
	const char *why;
} NOT_RUN[] = {
	{ "make demo", "installs Debian packages (apt, root) and runs the whole demo; "
		       "its steps are the examples of docs/launching.md and docs/rails.md" },
	{ "make check", "runs every test, this one included" },
	{ "make deb", "builds and lintian-checks the Debian package: minutes, debhelper" },
	{ "apt install ./build/deb/cotal-deliveryd_0.1.0_amd64.deb", "root: installs the package on this system" },
	{ "install -d -m 0700 /etc/cotal/demo", "root: the packaged service's /etc/cotal" },
	{ "install -m 0600 delivery.creds sys-observer.creds sys-evictor.creds /etc/cotal/demo/",
	  "root: the packaged service's /etc/cotal" },
	{ "systemctl enable --now cotal-deliveryd@demo", "root and systemd: the installed unit (tests/systemd runs it)" },
	{ "systemctl edit cotal-deliveryd@demo", "root and systemd, and an editor" },
	{ "echo 'COTAL_DELIVERYD_ARGS=--server nats://10.0.0.5:4222' > /etc/cotal/demo.env",
	  "root: the packaged service's /etc/cotal, for a broker at 10.0.0.5" },
	{ "journalctl -u cotal-deliveryd@demo", "systemd's journal of the installed unit" },
	{ "man cotal-deliveryd", "the installed man page (unit_man_pages checks the pages)" },
	{ "make bench", "a benchmark: minutes of load (docs/BENCHMARKS.md records the runs)" },
	{ "make bench BENCH_ARGS=\"--members 100 --copies 200000 --latency-posts 200\"", "a benchmark" },
	{ "make bench BENCH_ARGS=\"--sync default --members 10,100,1000 --copies 50000 --other-rows 0 --latency-posts 300\"",
	  "a benchmark" },
	{ "make bench BENCH_ARGS=\"--members 10 --copies 1000 --other-rows 0 --rows-rss 100000\"", "a benchmark" },
	{ "build/bench/bench_fanout --sync default --members 10,100,1000 --copies 50000 --other-rows 0 --latency-posts 300",
	  "a benchmark" },
	{ "build/bench/bench_fanout --sync default --members 100 --copies 20000 --other-rows 0 --latency-posts 100",
	  "a benchmark" },
	{ "build/bench/bench_fanout --sync always  --members 100 --copies 20000 --other-rows 0 --latency-posts 100",
	  "a benchmark" },
	{ "build/bench/bench_fanout --members 10,100 --copies 20000 --other-rows 0 --latency-posts 100", "a benchmark" },
	{ "build/bench/bench_fanout --cluster --members 10,100 --copies 20000 --other-rows 0 --latency-posts 100",
	  "a benchmark" },
	{ "for m in default always default always; do build/bench/bench_fanout --sync $m --members 10,100 --copies 50000 --other-rows 0 --latency-posts 100; done",
	  "a benchmark" },
	{ "make bench-guard", "the benchmark guard: make check runs it (bench_guard)" },
	{ "make bench-guard DAEMON=<an earlier cotal-deliveryd>", "the benchmark guard on another build" },
	{ "make bench BEFORE=<an earlier cotal-deliveryd> BENCH_ARGS=\"--sync default --members 100,1000 --copies 90000 --other-rows 0 --latency-posts 100\"",
	  "a benchmark of two builds" },
	{ "make bench-host", "a benchmark" },
	{ "make bench-host BENCH_ARGS=\"--lanes 5,20\"", "a benchmark" },
	{ "make bench-hostile", "a benchmark" },
	{ "make bench-hostile BENCH_ARGS=\"--pad 262144\"", "a benchmark" },
	{ "make bench BENCH_ARGS=\"--metrics-compare 2 --copies 20000 --latency-posts 20\"", "a benchmark" },
	{ "make chaos", "root, and an hour of faults (chaos_short_* run 75 s of it)" },
	{ "make chaos CHAOS_SECONDS=300", "root, and minutes of faults" },
	{ "make chaos CHAOS_SEED=3201", "root, and an hour of faults" },
	{ "cotal-deliveryd --space demo --root ~/cl-host2 --standby",
	  "another host, with its own copy of the root (e2e_cluster runs standbys)" },
	{ "cotal-deliveryd --spaces /etc/cotal/spaces.json [--server URL] [--run-dir DIR] [--user NAME]",
	  "a synopsis: a delivery host's default run directory is /run/cotal and its lanes run as "
	  "the cotal user (root); e2e_host runs hosts" },
	{ "cotal status --spaces /etc/cotal/spaces.json [--run-dir DIR]", "the synopsis's host, not run" },
	{ "kill -HUP <host pid>", "the synopsis's host, not run" },
	{ "cotal up --space demo [--root DIR] [--detach] [--creds-ttl SECONDS] [--nats-server PATH] [--metrics ADDR]",
	  "a synopsis: without --detach it keeps the terminal; the page's first block runs "
	  "cotal up --detach" },
};

/*
 * Examples whose outcome is not "exits 0", or that keep running: each with
 * the reason, from its page.
 */
enum how { EXIT, FOREGROUND };
static const struct {
	const char *cmd;
	enum how how;
	int exit;            /* EXIT: the status wanted */
	int output_lines;    /* of the shown output, how many lines are compared (-1: all) */
	const char *why;
} EXPECT[] = {
	{ "cotal-deliveryd --space demo --root ~/mesh", FOREGROUND, 0, -1,
	  "\"by hand, foreground; Ctrl-C or SIGTERM stops it\": READY=1, then SIGTERM, exit 0" },
	{ "cotal-deliveryd --space demo --root ~/cl", FOREGROUND, 0, -1,
	  "the daemon of a cluster, foreground: READY=1, then SIGTERM, exit 0" },
	{ "cotal-deliveryd --space demo --root ~/mesh --metrics 127.0.0.1:9464", FOREGROUND, 0, -1,
	  "the daemon, foreground, serving /metrics for the page's curl: READY=1, SIGTERM, exit 0" },
	{ "cotal admin evict local.UCX… local.UDY… --space demo", EXIT, 0, 0,
	  "exit 0; its shown lines are of agents still connected (one kicked, one found again "
	  "by an incomplete scan): here neither agent holds a connection, so none is kicked" },
};

/*
 * What a page's words stand for here (documented text -> test text, the
 * shell's variables set by the test). Applied in order, after the
 * optional `[...]` parts are dropped.
 */
static const struct {
	const char *doc, *test;
} SUBST[] = {
	{ "--port 4222", "--port $PORT" },
	{ "--cluster 3", "--cluster 3 --port $CLUSTER_PORTS --route-port $ROUTE_PORTS" },
	{ "/etc/cotal/", "$HOME/etc/" },
	{ "/var/lib/cotal", "$HOME/mesh" },
	{ "127.0.0.1:9464", "127.0.0.1:$METRICS_PORT" },
	{ "local.UCX…", "$ALICE_PRINCIPAL" },
	{ "local.UDY…", "$BOB_PRINCIPAL" },
	{ "3k9v…", "$ALICE_UID" },
};

/*
 * What a page's examples presume before its first one runs (run as the
 * examples are, each must exit 0). A page not listed starts from an empty
 * HOME.
 */
#define INIT "cotal mesh init --dev --root ~/mesh --port $PORT --space demo"
#define SERVE INIT, "cotal up --space demo --root ~/mesh --detach"
static const struct {
	const char *page;
	const char *steps[6];
} GROUND[] = {
	{ "README.md", { SERVE } },
	{ "docs/credentials.md", { INIT, "mkdir -p ~/etc" } },
	{ "docs/daemon.md", { INIT, "cotal mesh start --root ~/mesh", "cotal space provision demo --root ~/mesh" } },
	{ "docs/observing.md", { INIT, "cotal mesh start --root ~/mesh", "cotal space provision demo --root ~/mesh" } },
	{ "docs/rails.md", { SERVE, "cotal agent add bob --space demo --allow general --root ~/mesh",
			     "echo \"$BOB_PRINCIPAL\" > ~/mesh/holders.txt" } },
	{ "docs/service.md", { SERVE } },
	{ "docs/status-json.md", { SERVE } },
};

/* Programs an example may run; an example of any other that NOT_RUN does
 * not list fails the test unrun. */
static const char *const RUNNABLE[] = { "cotal", "cotal-deliveryd", "curl" };

/* ---- the examples, and the failures found ---- */

static struct docs_example ex[EX_MAX];
static int nex;
static char report[REPORT_MAX];
static int nfail;

static void
failf(const struct docs_example *e, const char *fmt, ...)
{
	size_t n = strlen(report);
	va_list ap;

	if (e != NULL)
		n += (size_t)snprintf(report + n, sizeof(report) - n, "%s:%d: `%s`: ", e->page, e->line,
		    e->cmd);
	if (n >= sizeof(report))
		return;
	va_start(ap, fmt);
	n += (size_t)vsnprintf(report + n, sizeof(report) - n, fmt, ap);
	va_end(ap);
	if (n + 2 < sizeof(report))
		strcat(report, "\n");
	nfail++;
}

/* ---- what is done with an example ---- */

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int
not_run_index(const char *cmd)
{
	for (size_t i = 0; i < N(NOT_RUN); i++)
		if (strcmp(NOT_RUN[i].cmd, cmd) == 0)
			return (int)i;
	return -1;
}

static int
expect_index(const char *cmd)
{
	for (size_t i = 0; i < N(EXPECT); i++)
		if (strcmp(EXPECT[i].cmd, cmd) == 0)
			return (int)i;
	return -1;
}

static bool
runnable(const char *cmd)
{
	size_t w = strcspn(cmd, " \t\n");
	for (size_t i = 0; i < N(RUNNABLE); i++)
		if (strlen(RUNNABLE[i]) == w && strncmp(cmd, RUNNABLE[i], w) == 0)
			return true;
	return false;
}

/* The command as run: its optional parts (an unquoted `[` that starts a
 * word, to its matching `]`) dropped, then SUBST applied; used[] counts
 * each SUBST entry applied. */
static void
as_run(const char *cmd, char *out, size_t outlen, int *used)
{
	char tmp[DOCS_CMD_MAX * 2];
	size_t o = 0;
	char q = 0;

	for (size_t i = 0; cmd[i] != '\0' && o + 1 < sizeof(tmp); i++) {
		char c = cmd[i];
		if (q != 0) {
			if (c == q)
				q = 0;
		} else if (c == '\'' || c == '"') {
			q = c;
		} else if (c == '[' && i > 0 && cmd[i - 1] == ' ') {
			int depth = 0;
			for (; cmd[i] != '\0'; i++) {
				depth += cmd[i] == '[' ? 1 : cmd[i] == ']' ? -1 : 0;
				if (depth == 0)
					break;
			}
			while (o > 0 && tmp[o - 1] == ' ')
				o--;
			if (cmd[i] == '\0')
				break;
			continue;
		}
		tmp[o++] = c;
	}
	tmp[o] = '\0';
	for (size_t k = 0; k < N(SUBST); k++) {
		char *at, next[DOCS_CMD_MAX * 2];
		size_t from = 0;
		while ((at = strstr(tmp + from, SUBST[k].doc)) != NULL) {
			size_t pre = (size_t)(at - tmp);
			snprintf(next, sizeof(next), "%.*s%s%s", (int)pre, tmp, SUBST[k].test,
			    at + strlen(SUBST[k].doc));
			memcpy(tmp, next, sizeof(tmp));
			from = pre + strlen(SUBST[k].test);
			if (used != NULL)
				used[k]++;
		}
	}
	snprintf(out, outlen, "%s", tmp);
}

/* ---- running ---- */

static char bindir[H_PATH_MAX], home[H_PATH_MAX * 2];
static char vars[32][512]; /* NAME=value, exported to every example */
static int nvars;
static const char *nats_bin;

static void
var_set(const char *name, const char *value)
{
	size_t l = strlen(name);
	for (int i = 0; i < nvars; i++)
		if (strncmp(vars[i], name, l) == 0 && vars[i][l] == '=') {
			snprintf(vars[i], sizeof(vars[i]), "%s=%s", name, value);
			return;
		}
	assert_true(nvars < 32);
	snprintf(vars[nvars++], sizeof(vars[0]), "%s=%s", name, value);
}

/* The environment of an example: the test's own, HOME, PATH with the
 * build's binaries first, the broker, the variables SUBST names, and
 * NOTIFY_SOCKET when notify is not NULL. Built before fork. */
static char **
example_env(const char *notify)
{
	extern char **environ;
	size_t n = 0, cap = 64 + (size_t)nvars;
	char **env;

	for (char **e = environ; *e != NULL; e++)
		cap++;
	env = calloc(cap, sizeof(*env));
	assert_non_null(env);
	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, "HOME=", 5) != 0 && strncmp(*e, "PATH=", 5) != 0 &&
		    strncmp(*e, "COTAL_", 6) != 0 && strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 &&
		    strncmp(*e, "XDG_", 4) != 0)
			env[n++] = strdup(*e);
	const char *path = getenv("PATH");
	assert_true(asprintf(&env[n++], "HOME=%s", home) > 0);
	assert_true(asprintf(&env[n++], "PATH=%s:%s", bindir, path ? path : "/usr/bin:/bin") > 0);
	assert_true(asprintf(&env[n++], "COTAL_NATS_SERVER=%s", nats_bin) > 0);
	if (notify != NULL)
		assert_true(asprintf(&env[n++], "NOTIFY_SOCKET=%s", notify) > 0);
	for (int i = 0; i < nvars; i++)
		env[n++] = strdup(vars[i]);
	env[n] = NULL;
	return env;
}

/* Where an example runs: ~/mesh once it exists (the pages' commands
 * without --root find their workspace above the working directory),
 * else HOME. */
static void
example_cwd(char *out, size_t len)
{
	struct stat st;
	snprintf(out, len, "%s/mesh", home);
	if (stat(out, &st) != 0)
		snprintf(out, len, "%s", home);
}

/* Run cmd with /bin/sh (bounded by timeout(1)) to its end; its stdout and
 * stderr into out. Its exit status (128 + signal), or -1. */
static int
sh_run(const char *cmd, char *out, size_t outlen)
{
	char cwd[H_PATH_MAX * 3];
	char **env = example_env(NULL);
	char *argv[] = { (char *)"timeout", (char *)"-k", (char *)"5", (char *)RUN_TIMEOUT_S,
		(char *)"/bin/sh", (char *)"-c", (char *)cmd, NULL };
	int pfd[2], st;

	example_cwd(cwd, sizeof(cwd));
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		if (chdir(cwd) != 0)
			_exit(126);
		execvpe("timeout", argv, env);
		_exit(127);
	}
	h_env_free(env);
	close(pfd[1]);
	h_read_to_end(pfd[0], out, outlen);
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* `cotal agent add NAME` says "principal P" and "uid U" (docs/credentials.md):
 * kept as NAME_PRINCIPAL and NAME_UID (upper case) for the examples after. */
static void
note_agent(const char *cmd, const char *out)
{
	char name[64], var[96], val[256];
	const char *p;

	if (sscanf(cmd, "cotal agent add %63[A-Za-z0-9_]", name) != 1)
		return;
	for (char *c = name; *c != '\0'; c++)
		*c = (char)toupper((unsigned char)*c);
	if ((p = strstr(out, "principal ")) != NULL && sscanf(p + 10, "%255s", val) == 1) {
		snprintf(var, sizeof(var), "%s_PRINCIPAL", name);
		var_set(var, val);
	}
	if ((p = strstr(out, "\nuid ")) != NULL && sscanf(p + 5, "%255s", val) == 1) {
		snprintf(var, sizeof(var), "%s_UID", name);
		var_set(var, val);
	}
}

/* text with SUBST applied and the variables it names ($NAME, $HOME)
 * expanded to their values: a shown output line as this run prints it. */
static void
expand_shown(const char *text, char *out, size_t len)
{
	char sub[DOCS_CMD_MAX * 2];
	size_t o = 0;

	as_run(text, sub, sizeof(sub), NULL);
	for (const char *s = sub; *s != '\0' && o + 1 < len; s++) {
		size_t w = 0;
		if (*s == '$')
			while (isalnum((unsigned char)s[1 + w]) || s[1 + w] == '_')
				w++;
		if (w == 0) {
			out[o++] = *s;
			continue;
		}
		const char *val = NULL;
		if (w == 4 && strncmp(s + 1, "HOME", 4) == 0)
			val = home;
		for (int i = 0; i < nvars && val == NULL; i++)
			if (strncmp(vars[i], s + 1, w) == 0 && vars[i][w] == '=')
				val = vars[i] + w + 1;
		if (val != NULL)
			o += (size_t)snprintf(out + o, len - o, "%s", val);
		else /* not a variable of the test's: the page's own text */
			o += (size_t)snprintf(out + o, len - o, "%.*s", (int)w + 1, s);
		if (o >= len)
			o = len - 1;
		s += w;
	}
	out[o] = '\0';
}

/* The shown lines (the first `want` of them, -1: all) are lines of out, in
 * any order (a daemon lists rows in no fixed order). */
static void
check_output(const struct docs_example *e, int want, const char *out)
{
	int upto = want < 0 || want > e->nout ? e->nout : want;

	for (int k = 0; k < upto; k++) {
		char shown[2048];
		expand_shown(e->out[k], shown, sizeof(shown));
		if (!docs_shown_in_output(shown, out)) {
			failf(e, "the page shows the line \"%s\" (line %d), which is not in its "
			    "output (numbers and … stand for any value):\n%s", e->out[k], e->line + 1 + k, out);
			return;
		}
	}
}

struct fg {
	pid_t pid;
	const struct docs_example *e;
	char log[H_PATH_MAX * 3];
};
static struct fg fgs[8];
static int nfg;

/* A foreground example: in the background with NOTIFY_SOCKET, its output
 * in a log; it must say READY=1. Stopped at its page's end. */
static void
run_foreground(const struct docs_example *e, const char *cmd)
{
	char name[128], seen[4096] = "", cwd[H_PATH_MAX * 3];
	int fd = h_notify_listener(name, sizeof(name));
	struct fg *g = &fgs[nfg];
	char **env = example_env(name);
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", NULL, NULL };
	char exec_cmd[DOCS_CMD_MAX * 2 + 8];

	assert_true(nfg < 8);
	snprintf(exec_cmd, sizeof(exec_cmd), "exec %s", cmd);
	argv[2] = exec_cmd;
	snprintf(g->log, sizeof(g->log), "%s/fg-%d.log", home, e->line);
	example_cwd(cwd, sizeof(cwd));
	int lfd = open(g->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(lfd >= 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(lfd, 1);
		dup2(lfd, 2);
		if (chdir(cwd) != 0)
			_exit(126);
		execve("/bin/sh", argv, env);
		_exit(127);
	}
	h_env_free(env);
	close(lfd);
	h_track(pid);
	g->pid = pid;
	g->e = e;
	nfg++;
	if (!h_datagram_has(fd, "READY=1", READY_MS, seen, sizeof(seen))) {
		char *log = h_file_text(g->log, 0);
		failf(e, "no READY=1 within %d ms (notifications: %s); its output:\n%s", READY_MS, seen,
		    log ? log : "(none)");
		free(log);
	}
	close(fd);
}

static void
stop_foreground(void)
{
	for (int i = nfg - 1; i >= 0; i--) {
		int st = 0;
		kill(fgs[i].pid, SIGTERM);
		if (waitpid(fgs[i].pid, &st, 0) == fgs[i].pid &&
		    !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			char *log = h_file_text(fgs[i].log, 0);
			failf(fgs[i].e, "after SIGTERM it ended with status 0x%x, want exit 0; its output:\n%s", st,
			    log ? log : "(none)");
			free(log);
		}
	}
	nfg = 0;
}

/* Whatever a page left running: its foreground daemons, then each
 * workspace under HOME downed and its brokers stopped. */
static void
page_down(void)
{
	char out[4096];

	stop_foreground();
	if (home[0] != '\0')
		sh_run("for r in \"$HOME\"/*/; do [ -d \"$r.cotal\" ] || continue; "
		       "cotal down --space demo --root \"$r\"; cotal mesh stop --root \"$r\"; done; true",
		    out, sizeof(out));
}

static void
set_ports(void)
{
	char v[128];
	int p[7];

	/* Seven distinct free ports: asked one at a time, each checked against
	 * the ones before. */
	for (int i = 0; i < 7; i++) {
		bool dup;
		do {
			p[i] = h_free_port();
			assert_true(p[i] > 0);
			dup = false;
			for (int j = 0; j < i; j++)
				dup = dup || p[j] == p[i];
		} while (dup);
	}
	snprintf(v, sizeof(v), "%d", p[0]);
	var_set("PORT", v);
	snprintf(v, sizeof(v), "%d", p[1]);
	var_set("METRICS_PORT", v);
	snprintf(v, sizeof(v), "%d,%d,%d", p[2], p[3], p[4]);
	var_set("CLUSTER_PORTS", v);
	/* The route ports: one more than each client port would collide
	 * nowhere known; free ports asked again. */
	int r[3];
	for (int i = 0; i < 3; i++) {
		bool dup;
		do {
			r[i] = h_free_port();
			dup = false;
			for (int j = 0; j < 7; j++)
				dup = dup || p[j] == r[i];
			for (int j = 0; j < i; j++)
				dup = dup || r[j] == r[i];
		} while (dup);
	}
	snprintf(v, sizeof(v), "%d,%d,%d", r[0], r[1], r[2]);
	var_set("ROUTE_PORTS", v);
}

static int subst_used[N(SUBST)];
static int ground_used[N(GROUND)];

static void
run_page(const char *root, int pageno, int from, int to)
{
	char out[H_OUT_MAX], cmd[DOCS_CMD_MAX * 2];
	const char *page = ex[from].page;

	snprintf(home, sizeof(home), "%s/page%02d", root, pageno);
	assert_int_equal(mkdir(home, 0700), 0);
	nvars = 0;
	set_ports();
	for (size_t g = 0; g < N(GROUND); g++) {
		if (strcmp(GROUND[g].page, page) != 0)
			continue;
		ground_used[g]++;
		for (int s = 0; s < 6 && GROUND[g].steps[s] != NULL; s++) {
			int rc = sh_run(GROUND[g].steps[s], out, sizeof(out));
			note_agent(GROUND[g].steps[s], out);
			if (rc != 0) {
				failf(NULL, "%s: the ground step `%s` exited %d:\n%s", page, GROUND[g].steps[s],
				    rc, out);
				page_down();
				return;
			}
		}
	}
	for (int i = from; i < to; i++) {
		const struct docs_example *e = &ex[i];
		int x = expect_index(e->cmd);
		/* Listed, or of a program never run here (the first test names it). */
		if (not_run_index(e->cmd) >= 0 || !runnable(e->cmd))
			continue;
		as_run(e->cmd, cmd, sizeof(cmd), subst_used);
		if (getenv("COTAL_TEST_VERBOSE") != NULL)
			fprintf(stderr, "%s:%d: $ %s\n", e->page, e->line, cmd);
		if (x >= 0 && EXPECT[x].how == FOREGROUND) {
			run_foreground(e, cmd);
			continue;
		}
		int want = x >= 0 ? EXPECT[x].exit : 0;
		int rc = sh_run(cmd, out, sizeof(out));
		if (getenv("COTAL_TEST_VERBOSE") != NULL)
			fprintf(stderr, "%s[exit %d]\n", out, rc);
		note_agent(cmd, out);
		if (rc != want) {
			failf(e, "exit %d, want %d (run as `%s`); its output:\n%s", rc, want, cmd, out);
			continue;
		}
		check_output(e, x >= 0 ? EXPECT[x].output_lines : -1, out);
	}
	page_down();
}

/* ---- the tests ---- */

/* Every example is run or listed, and every table entry still names what
 * some page holds. No broker needed. */
static void
test_tables_match_the_pages(void **state)
{
	(void)state;
	report[0] = '\0';
	nfail = 0;
	nex = docs_extract_all(COTAL_SOURCE_DIR, ex, EX_MAX);
	assert_true(nex > 0);
	for (int i = 0; i < nex; i++)
		if (not_run_index(ex[i].cmd) < 0 && !runnable(ex[i].cmd))
			failf(&ex[i], "neither run (its program is none of cotal, cotal-deliveryd, curl) "
			    "nor listed in NOT_RUN with a reason");
	for (size_t k = 0; k < N(NOT_RUN); k++) {
		bool found = false;
		for (int i = 0; i < nex && !found; i++)
			found = strcmp(ex[i].cmd, NOT_RUN[k].cmd) == 0;
		if (!found)
			failf(NULL, "NOT_RUN names `%s`, which no page shows any more", NOT_RUN[k].cmd);
	}
	for (size_t k = 0; k < N(EXPECT); k++) {
		bool found = false;
		for (int i = 0; i < nex && !found; i++)
			found = strcmp(ex[i].cmd, EXPECT[k].cmd) == 0;
		if (!found)
			failf(NULL, "EXPECT names `%s`, which no page shows any more", EXPECT[k].cmd);
	}
	int used[N(SUBST)] = { 0 };
	char tmp[DOCS_CMD_MAX * 2];
	for (int i = 0; i < nex; i++)
		if (not_run_index(ex[i].cmd) < 0)
			as_run(ex[i].cmd, tmp, sizeof(tmp), used);
	for (size_t k = 0; k < N(SUBST); k++)
		if (used[k] == 0)
			failf(NULL, "SUBST replaces \"%s\", which no example run holds any more", SUBST[k].doc);
	for (size_t g = 0; g < N(GROUND); g++) {
		bool found = false;
		for (int i = 0; i < nex && !found; i++)
			found = strcmp(ex[i].page, GROUND[g].page) == 0 && not_run_index(ex[i].cmd) < 0;
		if (!found)
			failf(NULL, "GROUND prepares %s, which has no example run any more", GROUND[g].page);
	}
	if (nfail > 0) {
		fprintf(stderr, "%s", report);
		fail_msg("%d problem(s) with the pages' examples, each named above", nfail);
	}
}

static void
test_every_example_runs_as_its_page_says(void **state)
{
	char root[H_PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	int run = 0, listed = 0, pageno = 0;

	(void)state;
	report[0] = '\0';
	nfail = 0;
	nex = docs_extract_all(COTAL_SOURCE_DIR, ex, EX_MAX);
	/* The broker: as the harness picks the default one. */
	nats_bin = getenv("COTAL_TEST_NATS_SERVER");
	if (nats_bin == NULL || *nats_bin == '\0')
		nats_bin = access(COTAL_BUNDLED_NATS_SERVER, X_OK) == 0 ? COTAL_BUNDLED_NATS_SERVER
									 : "/usr/sbin/nats-server";
	snprintf(root, sizeof(root), "%s/cotal-e2e-docs-XXXXXX", tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(root));
	snprintf(bindir, sizeof(bindir), "%s/bin", root);
	assert_int_equal(mkdir(bindir, 0700), 0);
	char link[H_PATH_MAX + 32];
	snprintf(link, sizeof(link), "%s/cotal", bindir);
	assert_int_equal(symlink(COTAL_CLI_PATH, link), 0);
	snprintf(link, sizeof(link), "%s/cotal-deliveryd", bindir);
	assert_int_equal(symlink(COTAL_DAEMON_PATH, link), 0);
	for (int i = 0; i < nex; i++) {
		if (not_run_index(ex[i].cmd) >= 0)
			listed++;
		else if (runnable(ex[i].cmd))
			run++;
	}
	for (int i = 0; i < nex;) {
		int j = i;
		bool any = false;
		while (j < nex && strcmp(ex[j].page, ex[i].page) == 0) {
			any = any || not_run_index(ex[j].cmd) < 0;
			j++;
		}
		if (any)
			run_page(root, ++pageno, i, j);
		i = j;
	}
	home[0] = '\0';
	printf("e2e_docs: %d examples: %d run, %d listed as not run\n", nex, run, listed);
	if (nfail > 0) {
		/* The report on stderr: cmocka cuts a long message. */
		fprintf(stderr, "%s", report);
		fail_msg("%d example(s) failed, each named above (their root: %s)", nfail, root);
	}
	if (getenv("COTAL_TEST_KEEP") == NULL) {
		char rm[H_PATH_MAX + 16];
		snprintf(rm, sizeof(rm), "rm -rf '%s'", root);
		assert_int_equal(system(rm), 0);
	}
}

static int
teardown_pages(void **state)
{
	(void)state;
	page_down();
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_match_the_pages),
		cmocka_unit_test_teardown(test_every_example_runs_as_its_page_says, teardown_pages),
	};
	if (argc > 1 && strcmp(argv[1], "--list") == 0) {
		nex = docs_extract_all(COTAL_SOURCE_DIR, ex, EX_MAX);
		for (int i = 0; i < nex; i++) {
			printf("%s:%d: %s%s\n", ex[i].page, ex[i].line, ex[i].cmd,
			    not_run_index(ex[i].cmd) >= 0 ? "   [not run]" : "");
			for (int k = 0; k < ex[i].nout; k++)
				printf("    | %s\n", ex[i].out[k]);
		}
		return 0;
	}
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, NULL, NULL));
}
