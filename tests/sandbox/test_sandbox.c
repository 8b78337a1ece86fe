/*
 * test_sandbox: the worker sandbox seen from outside. Starts a plain
 * nats-server (no auth, JetStream on, 127.0.0.1, a free port) and runs
 * sandbox_probe once per mode: what a worker must not do kills it with
 * SIGSYS, what it must do (a broker roundtrip through nats.c) works, and
 * every nats.c thread carries the filter.
 *
 * The broker is $COTAL_TEST_NATS_SERVER, else Debian's /usr/sbin/nats-server.
 * Run as root (as CI does), the probe drops to nobody.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>
#include <seccomp.h>

#include "sandbox/sandbox.h"

#define DEFAULT_NATS_SERVER "/usr/sbin/nats-server"
#define BROKER_START_MS 10000  /* nats-server accepts connections within this */
#define PROBE_WAIT_MS 30000    /* a probe that runs longer is hung */
#define PROBE_READY_MS 15000   /* sleep mode: connected within this */
#define PROBE_SLEEP_S "3"      /* sleep mode: time to inspect /proc */
#define POLL_STEP_MS 20
#define URL_MAX 64
#define PATH_MAX_LEN 512
#define LINE_MAX_LEN 256
#define FD_OPEN_FILES 4096     /* close everything above stderr before exec */

struct broker {
	pid_t pid;
	uint16_t port;
	char dir[PATH_MAX_LEN];
	char url[URL_MAX];
};

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A port the kernel just gave out and took back: free for a moment. */
static uint16_t
free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
		close(fd);
		return 0;
	}
	close(fd);
	return ntohs(sin.sin_port);
}

static int
port_accepts(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, rc;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 0;
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
	return rc == 0;
}

static void
close_from(int lowfd)
{
	for (int fd = lowfd; fd < FD_OPEN_FILES; fd++)
		close(fd);
}

static int
broker_start(void **state)
{
	static struct broker b;
	const char *bin = getenv("COTAL_TEST_NATS_SERVER");
	char port[8];

	if (bin == NULL || *bin == '\0')
		bin = DEFAULT_NATS_SERVER;
	snprintf(b.dir, sizeof(b.dir), "/tmp/cotal-sandbox-test.XXXXXX");
	if (mkdtemp(b.dir) == NULL || (b.port = free_port()) == 0)
		return -1;
	snprintf(port, sizeof(port), "%u", (unsigned)b.port);
	snprintf(b.url, sizeof(b.url), "nats://127.0.0.1:%u", (unsigned)b.port);

	if ((b.pid = fork()) < 0)
		return -1;
	if (b.pid == 0) {
		int nul = open("/dev/null", O_RDWR);

		/* The broker goes with the test, however the test ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (nul >= 0) {
			dup2(nul, STDOUT_FILENO);
			dup2(nul, STDERR_FILENO);
		}
		close_from(STDERR_FILENO + 1);
		execl(bin, bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", b.dir,
		    (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; waited < BROKER_START_MS; waited += POLL_STEP_MS) {
		if (port_accepts(b.port)) {
			*state = &b;
			return 0;
		}
		if (waitpid(b.pid, NULL, WNOHANG) == b.pid) {
			fprintf(stderr, "%s exited before accepting connections\n", bin);
			return -1;
		}
		sleep_ms(POLL_STEP_MS);
	}
	fprintf(stderr, "%s did not accept connections on %u\n", bin, (unsigned)b.port);
	kill(b.pid, SIGKILL);
	waitpid(b.pid, NULL, 0);
	return -1;
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int
broker_stop(void **state)
{
	struct broker *b = *state;

	if (b == NULL)
		return 0;
	kill(b->pid, SIGTERM);
	waitpid(b->pid, NULL, 0);
	nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* Start the probe with argv; its stdout goes to *out when out is given. */
static pid_t
probe_start(const char *const *args, int *out)
{
	char *argv[8] = { SANDBOX_PROBE_PATH };
	int pfd[2] = { -1, -1 };
	pid_t pid;

	for (int i = 0; i < 6 && args[i] != NULL; i++)
		argv[i + 1] = (char *)args[i];
	if (out != NULL && pipe2(pfd, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (out != NULL)
			dup2(pfd[1], STDOUT_FILENO);
		close_from(STDERR_FILENO + 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (out != NULL) {
		close(pfd[1]);
		*out = pfd[0];
	}
	return pid;
}

/* The probe's wait status, or -1 when it had to be killed as hung. */
static int
probe_wait(pid_t pid)
{
	int status;

	for (int waited = 0; waited < PROBE_WAIT_MS; waited += POLL_STEP_MS) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		sleep_ms(POLL_STEP_MS);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	fprintf(stderr, "probe %d hung and was killed\n", (int)pid);
	return -1;
}

static int
probe_run(const char *const *args)
{
	pid_t pid = probe_start(args, NULL);

	assert_true(pid > 0);
	return probe_wait(pid);
}

static void
assert_killed_by_seccomp(const char *mode)
{
	const char *args[] = { mode, NULL };
	int status = probe_run(args);

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
		fail_msg("probe %s: status 0x%x, want killed by SIGSYS", mode, status);
}

static void
assert_exits_zero(const char *const *args)
{
	int status = probe_run(args);

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("probe %s: status 0x%x, want exit 0", args[0], status);
}

/* A worker never runs another program. */
static void
test_execve_kills_worker(void **state)
{
	(void)state;
	assert_killed_by_seccomp("execve");
}

/* A worker writes no file: its openat is refused. */
static void
test_open_for_writing_fails(void **state)
{
	const char *args[] = { "open-write", NULL };
	int status;

	(void)state;
	status = probe_run(args);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || access("/tmp/x", F_OK) == 0)
		fail_msg("probe open-write: status 0x%x, want exit 1 and no /tmp/x", status);
}

/* A worker has IP sockets only: no raw packet access. */
static void
test_packet_socket_kills_worker(void **state)
{
	(void)state;
	assert_killed_by_seccomp("socket-packet");
}

/* No file opens; TCP to the broker, and (Landlock ABI 4) to nothing else. */
static void
test_landlock_leaves_the_broker_alone(void **state)
{
	struct broker *b = *state;
	const char *args[] = { "landlock", b->url, NULL };

	assert_exits_zero(args);
}

/* The same on a kernel without Landlock: no file opens all the same. */
static void
test_without_landlock_no_file_opens(void **state)
{
	struct broker *b = *state;
	const char *args[] = { "landlock", b->url, NULL };

	setenv("COTAL_PROBE_NO_LANDLOCK", "1", 1);
	assert_exits_zero(args);
	unsetenv("COTAL_PROBE_NO_LANDLOCK");
}

/*
 * Issue 27: "for every worker role, the probe tries, after confinement: a
 * Unix socket to a listening path in the test's directory, an abstract
 * socket, a UDP socket, a raw socket, opening a 0600 file of the same user
 * in the workspace, $CREDENTIALS_DIRECTORY, and /proc/<supervisor>/mem;
 * each must fail, and the test names which succeeded." The probe keeps
 * this test's user (root in CI, with its capabilities: only the sandbox
 * stands in the way), and this test stands for its supervisor. Then the
 * same with Landlock made unavailable: never "warn and run".
 */
static int
listen_unix(const struct sockaddr_un *sun, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (const struct sockaddr *)sun, len), 0);
	assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static void
put_secret(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "-----BEGIN USER NKEY SEED-----\n", 31), 31);
	close(fd);
}

static void
test_no_role_escapes_its_sandbox(void **state)
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer",
		"metrics" };
	struct broker *b = *state;
	struct sockaddr_un path = { .sun_family = AF_UNIX }, abs = { .sun_family = AF_UNIX };
	char sock[PATH_MAX_LEN], ws[PATH_MAX_LEN], creds[PATH_MAX_LEN], credsdir[PATH_MAX_LEN];
	char mem[64], name[64], escaped[4096] = "";
	size_t used = 0;
	int lp, la;

	snprintf(sock, sizeof(sock), "%s/agent.sock", b->dir);
	snprintf(path.sun_path, sizeof(path.sun_path), "%s", sock);
	snprintf(name, sizeof(name), "cotal-probe-%d", (int)getpid());
	memcpy(abs.sun_path + 1, name, strlen(name));
	lp = listen_unix(&path, sizeof(path));
	la = listen_unix(&abs, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(name)));
	snprintf(ws, sizeof(ws), "%s/.cotal", b->dir);
	assert_int_equal(mkdir(ws, 0700), 0);
	snprintf(ws, sizeof(ws), "%s/.cotal/delivery.creds", b->dir);
	put_secret(ws);
	snprintf(credsdir, sizeof(credsdir), "%s/credentials", b->dir);
	assert_int_equal(mkdir(credsdir, 0700), 0);
	snprintf(creds, sizeof(creds), "%s/delivery.creds", credsdir);
	put_secret(creds);
	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)getpid());
	char port[16];
	snprintf(port, sizeof(port), "%d", b->port);
	/* The last two are the metrics server's alone: a worker dials its
	 * broker, the metrics server makes no socket at all (issue 29). */
	const char *const attempts[][2] = { { "unix", sock }, { "abstract", name },
		{ "socketpair", NULL }, { "udp", NULL }, { "udp6", NULL }, { "raw", NULL },
		{ "open", ws }, { "open", creds }, { "open", mem }, { "tcp", port },
		{ "listen", NULL } };
	const size_t worker_attempts = sizeof(attempts) / sizeof(attempts[0]) - 2;

	setenv("COTAL_PROBE_NODROP", "1", 1);
	setenv("CREDENTIALS_DIRECTORY", credsdir, 1);
	for (int landlock = 1; landlock >= 0; landlock--) {
		if (!landlock)
			setenv("COTAL_PROBE_NO_LANDLOCK", "1", 1);
		for (size_t r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
			setenv("COTAL_PROBE_ROLE", roles[r], 1);
			bool metrics = strcmp(roles[r], "metrics") == 0;
			for (size_t k = 0; k < (metrics ? sizeof(attempts) / sizeof(attempts[0]) :
			    worker_attempts); k++) {
				const char *args[] = { "escape", attempts[k][0], attempts[k][1],
					NULL };
				int status = probe_run(args);
				bool refused = (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) ||
				    (WIFEXITED(status) && WEXITSTATUS(status) == 0);
				if (!refused && used < sizeof(escaped))
					used += (size_t)snprintf(escaped + used, sizeof(escaped) - used,
					    "\n  %s%s: %s %s (status 0x%x)", roles[r],
					    landlock ? "" : " without Landlock", attempts[k][0],
					    attempts[k][1] ? attempts[k][1] : "", status);
			}
		}
	}
	unsetenv("COTAL_PROBE_NO_LANDLOCK");
	unsetenv("COTAL_PROBE_ROLE");
	unsetenv("COTAL_PROBE_NODROP");
	unsetenv("CREDENTIALS_DIRECTORY");
	close(lp);
	close(la);
	if (used > 0)
		fail_msg("a confined worker did what it must not:%s", escaped);
}

/*
 * Issue 41, finding 1: "refuse MSG_FASTOPEN (and any flag that connects) in
 * every confined role's filter". A TCP Fast Open connect opens its
 * connection inside the send path, which the Landlock port rule of some
 * kernels does not check. Each worker role's filter, from inside a process
 * confined by it, with Landlock and without, is refused by the filter itself
 * (EPERM, where Landlock's refusal is EACCES) through sendto and sendmsg,
 * to a loopback port that listens (unconfined, it connects: checked first,
 * so the test shows the filter is what stands in the way).
 */
static void
test_fast_open_is_refused_by_the_filter(void **state)
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
	static const char *const ways[] = { "tfo", "tfo-msg" };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	char port[16], bad[2048] = "";
	size_t used = 0;
	int lfd;

	(void)state;
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 64), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	snprintf(port, sizeof(port), "%u", (unsigned)ntohs(sin.sin_port));

	/* Unconfined, the same send connects (the kernel's client-side Fast
	 * Open, on by default). */
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(cfd >= 0);
	ssize_t n = sendto(cfd, "x", 1, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&sin,
	    sizeof(sin));
	if (n != 1)
		fail_msg("an unconfined Fast Open connect to %s: %s", port, strerror(errno));
	close(cfd);

	setenv("COTAL_PROBE_NODROP", "1", 1);
	for (int landlock = 1; landlock >= 0; landlock--) {
		if (!landlock)
			setenv("COTAL_PROBE_NO_LANDLOCK", "1", 1);
		for (size_t r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
			setenv("COTAL_PROBE_ROLE", roles[r], 1);
			for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
				const char *args[] = { "escape", ways[w], port, NULL };
				int status = probe_run(args);
				if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) &&
				    used < sizeof(bad))
					used += (size_t)snprintf(bad + used, sizeof(bad) - used,
					    "\n  %s%s, %s: %s (status 0x%x)", roles[r],
					    landlock ? "" : " without Landlock", ways[w],
					    WIFEXITED(status) && WEXITSTATUS(status) == 3 ?
					    "connected" : WIFEXITED(status) && WEXITSTATUS(status) == 4 ?
					    "refused, not by the filter" : "not refused with EPERM",
					    status);
			}
		}
	}
	unsetenv("COTAL_PROBE_NO_LANDLOCK");
	unsetenv("COTAL_PROBE_ROLE");
	unsetenv("COTAL_PROBE_NODROP");
	close(lfd);
	if (used > 0)
		fail_msg("a Fast Open connect was not refused by the filter:%s", bad);
}

/*
 * Issue 41, finding 8: "COTAL_SECCOMP=log is honoured in release builds
 * [...] Test hooks only (a test build)". The decision for each build and
 * value; check-systemd shows the package's daemon ignoring it.
 */
static void
test_seccomp_log_is_a_test_builds_alone(void **state)
{
	bool ignored;

	(void)state;
	assert_false(sandbox_seccomp_log_wanted("log", false, &ignored));
	assert_true(ignored);
	assert_true(sandbox_seccomp_log_wanted("log", true, &ignored));
	assert_false(ignored);
	assert_false(sandbox_seccomp_log_wanted(NULL, false, &ignored));
	assert_false(ignored);
	assert_false(sandbox_seccomp_log_wanted("kill", true, &ignored));
	assert_false(ignored);
	assert_false(sandbox_seccomp_log_wanted("LOG", false, &ignored));
	assert_false(ignored);
	/* This build is a test build (the suites need the hooks). */
	assert_true(SANDBOX_TEST_BUILD);
}

/* The nats.c work of a worker fits in the filter: publish, flush,
 * request/reply, JetStream publish, clean shutdown. */
static void
test_nats_roundtrip_under_filter(void **state)
{
	struct broker *b = *state;
	const char *args[] = { "nats", b->url, NULL };

	assert_exits_zero(args);
}

/*
 * Issue 27: "If a piece of confinement that the project relies on for the
 * credential's secrecy cannot be applied, the daemon does not start
 * (naming what failed and the kernel's answer)". A parent filter hides
 * seccomp from the daemon as a kernel without it would (seccomp(2) answers
 * ENOSYS, prctl(PR_SET_SECCOMP) EINVAL): it refuses before reading
 * anything. Without the filter the same command gets past that check (and
 * stops at the missing root).
 */
static int
daemon_run(bool hide_seccomp, char *out, size_t outlen)
{
	int pfd[2], status;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		if (hide_seccomp) {
			scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
			if (ctx == NULL || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
			    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(seccomp), 0) != 0 ||
			    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(prctl), 1,
			    SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP, 0)) != 0 || seccomp_load(ctx) != 0)
				_exit(126);
		}
		execl(DAEMON_PATH, "cotal-deliveryd", "--space", "sandbox", "--root",
		    "/nonexistent/cotal-sandbox-test", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (used < outlen - 1 && (n = read(pfd[0], out + used, outlen - 1 - used)) > 0)
		used += (size_t)n;
	out[used] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return status;
}

static void
test_no_daemon_without_seccomp(void **state)
{
	char out[2048];
	int status;

	(void)state;
	/* The parent filter answers seccomp(2) with ENOSYS, as a kernel
	 * without seccomp filters does: the refusal quotes that answer. */
	char want[512];
	snprintf(want, sizeof(want), "✗ delivery: the kernel cannot confine the workers: seccomp "
	    "(SECCOMP_GET_ACTION_AVAIL for SECCOMP_RET_KILL_PROCESS): %s; refusing",
	    strerror(ENOSYS));
	status = daemon_run(true, out, sizeof(out));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || strstr(out, want) == NULL)
		fail_msg("without seccomp: status 0x%x, output:\n%s", status, out);
	status = daemon_run(false, out, sizeof(out));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 1 || strstr(out, "seccomp") != NULL ||
	    strstr(out, "--root /nonexistent/cotal-sandbox-test") == NULL)
		fail_msg("with seccomp: status 0x%x, output:\n%s", status, out);
}

/* Read one line "Key:\tvalue" of a status file into val. */
static int
status_field(const char *path, const char *key, char *val, size_t vallen)
{
	char line[LINE_MAX_LEN];
	size_t klen = strlen(key);
	FILE *f;
	int found = -1;

	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			snprintf(val, vallen, "%s", line + klen + 1);
			val[strcspn(val, "\n")] = '\0';
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

static void
assert_status_field(const char *path, const char *key, const char *want)
{
	char val[LINE_MAX_LEN];

	if (status_field(path, key, val, sizeof(val)) != 0)
		fail_msg("%s: no %s line", path, key);
	if (strcmp(val, want) != 0)
		fail_msg("%s: %s:%s, want %s", path, key, val, want);
}

/* When the test runs as root the probe must not: no uid field is 0. */
static void
assert_not_root(const char *path)
{
	char val[LINE_MAX_LEN], *p, *end;

	if (status_field(path, "Uid", val, sizeof(val)) != 0)
		fail_msg("%s: no Uid line", path);
	for (p = val;; p = end) {
		long id = strtol(p, &end, 10);

		if (end == p)
			break;
		if (id == 0)
			fail_msg("%s: Uid:%s still has root", path, val);
	}
}

/*
 * The filter is loaded before nats.c's first call, so every thread the
 * library starts inherits it (STYLE.md): check each of /proc/<pid>/task.
 */
static void
test_nats_threads_inherit_filter(void **state)
{
	struct broker *b = *state;
	const char *args[] = { "sleep", PROBE_SLEEP_S, b->url, NULL };
	char path[PATH_MAX_LEN], ready[8] = { 0 };
	struct pollfd pfd = { .events = POLLIN };
	struct dirent *de;
	int threads = 0, status;
	DIR *dir;
	pid_t pid;

	assert_true((pid = probe_start(args, &pfd.fd)) > 0);
	if (poll(&pfd, 1, PROBE_READY_MS) != 1 || read(pfd.fd, ready, 6) != 6 ||
	    strcmp(ready, "ready\n") != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("probe sleep: not ready within %d ms", PROBE_READY_MS);
	}
	close(pfd.fd);

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	assert_status_field(path, "Seccomp", "\t2");
	assert_status_field(path, "NoNewPrivs", "\t1");
	if (geteuid() == 0)
		assert_not_root(path);

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	assert_non_null(dir = opendir(path));
	while ((de = readdir(dir)) != NULL) {
		char task[PATH_MAX_LEN];

		if (de->d_name[0] == '.')
			continue;
		snprintf(task, sizeof(task), "/proc/%d/task/%.32s/status", (int)pid, de->d_name);
		assert_status_field(task, "Seccomp", "\t2");
		assert_status_field(task, "NoNewPrivs", "\t1");
		if (geteuid() == 0)
			assert_not_root(task);
		threads++;
	}
	closedir(dir);
	/* The main thread plus nats.c's own: the check saw library threads. */
	if (threads < 2)
		fail_msg("probe sleep: %d thread(s), want nats.c threads too", threads);

	status = probe_wait(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("probe sleep: status 0x%x, want exit 0", status);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_execve_kills_worker),
		cmocka_unit_test(test_open_for_writing_fails),
		cmocka_unit_test(test_packet_socket_kills_worker),
		cmocka_unit_test(test_landlock_leaves_the_broker_alone),
		cmocka_unit_test(test_without_landlock_no_file_opens),
		cmocka_unit_test(test_no_role_escapes_its_sandbox),
		cmocka_unit_test(test_fast_open_is_refused_by_the_filter),
		cmocka_unit_test(test_seccomp_log_is_a_test_builds_alone),
		cmocka_unit_test(test_no_daemon_without_seccomp),
		cmocka_unit_test(test_nats_roundtrip_under_filter),
		cmocka_unit_test(test_nats_threads_inherit_filter),
	};

	return cmocka_run_group_tests(tests, broker_start, broker_stop);
}
