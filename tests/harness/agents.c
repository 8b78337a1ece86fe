/*
 * The end-to-end test harness (see harness.h). It drives the real `cotal`
 * CLI and a real nats-server; nothing here stands in for the broker.
 */
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>

#include "lib/nats/natsconn.h"
#include "lib/wire/tokens.h"

#ifndef COTAL_CLI_PATH
#error "COTAL_CLI_PATH must name the cotal binary"
#endif
#ifndef COTAL_DAEMON_PATH
#error "COTAL_DAEMON_PATH must name the cotal-deliveryd binary"
#endif
#ifndef COTAL_BUNDLED_NATS_SERVER
#define COTAL_BUNDLED_NATS_SERVER ""
#endif

#define MAX_BROKERS 16
#define MAX_DIRS 16
#define BROKER_WAIT_MS 10000
#define STOP_WAIT_MS 10000
#define PORT_TRIES 5

static pid_t brokers[MAX_BROKERS];
static char dirs[MAX_DIRS][H_DIR_MAX];
static int ndirs;
static enum h_broker which_broker;
static bool cleanup_armed;

/*
 * A test that hangs is a bug to find, and ctest's timeout kills it without
 * a word. COTAL_TEST_STUCK_S (tests/CMakeLists.txt: the test's TIMEOUT less
 * 20 s) arms an alarm; when it rings, gdb prints every thread's stack onto
 * stderr, which ctest keeps, and the test goes on to its timeout.
 */
static void
on_stuck(int sig)
{
	static const char said[] = "\n• stuck: this test ran past COTAL_TEST_STUCK_S; every "
	    "thread's stack follows (gdb)\n";
	char pid[24];
	int n = 0;
	pid_t me = getpid(), c;

	(void)sig;
	/* Only async-signal-safe work: format the pid by hand, fork, exec. */
	for (pid_t v = me; v > 0 && n < 20; v /= 10)
		n++;
	pid[n] = '\0';
	for (pid_t v = me; n > 0; v /= 10)
		pid[--n] = (char)('0' + v % 10);
	if (write(2, said, sizeof(said) - 1) < 0)
		return;
	if ((c = fork()) == 0) {
		dup2(2, 1);
		execlp("gdb", "gdb", "-p", pid, "-batch", "-nx", "-ex", "thread apply all bt",
		    (char *)NULL);
		_exit(127);
	}
	if (c > 0)
		waitpid(c, NULL, 0);
}

void
h_use_broker(enum h_broker b)
{
	const char *stuck = getenv("COTAL_TEST_STUCK_S");

	which_broker = b;
	/* One case (or a pattern of them) by hand: COTAL_TEST_FILTER. */
	if (getenv("COTAL_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("COTAL_TEST_FILTER"));
	if (stuck != NULL && atoi(stuck) > 0) {
		signal(SIGALRM, on_stuck);
		alarm((unsigned)atoi(stuck));
	}
}

enum h_broker
h_broker_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--broker-29") == 0)
			return H_BROKER_29;
		if (strcmp(argv[i], "--broker-214") == 0)
			return H_BROKER_214;
	}
	return H_BROKER_210;
}

static int64_t now_ms(void);

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void
track_broker(pid_t pid, bool add)
{
	for (int i = 0; i < MAX_BROKERS; i++)
		if (add ? brokers[i] == 0 : brokers[i] == pid) {
			brokers[i] = add ? pid : 0;
			return;
		}
}

static void
kill_brokers(void)
{
	for (int i = 0; i < MAX_BROKERS; i++)
		if (brokers[i] > 0) {
			kill(brokers[i], SIGKILL);
			waitpid(brokers[i], NULL, 0);
			brokers[i] = 0;
		}
}

static int
rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static void
cleanup_at_exit(void)
{
	kill_brokers();
	if (getenv("COTAL_TEST_KEEP") != NULL) {
		for (int i = 0; i < ndirs; i++)
			fprintf(stderr, "• kept test directory %s\n", dirs[i]);
		return;
	}
	for (int i = 0; i < ndirs; i++)
		nftw(dirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	ndirs = 0;
}

int
h_done(int failed)
{
	nats_Close();
	if (failed == 0)
		return 0;
	kill_brokers();
	fprintf(stderr, "• %d test(s) failed: ending without LeakSanitizer's exit report (a failed "
	    "assertion leaves what its test held allocated)\n", failed);
	for (int i = 0; i < ndirs; i++)
		fprintf(stderr, "• kept test directory %s\n", dirs[i]);
	fflush(NULL);
	_exit(failed > 0 && failed < 126 ? failed : 125);
}

static void
cleanup_on_signal(int sig)
{
	/* Only async-signal-safe work here: kill, then die of the signal. */
	for (int i = 0; i < MAX_BROKERS; i++)
		if (brokers[i] > 0)
			kill(brokers[i], SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
arm_cleanup(void)
{
	static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP };

	if (cleanup_armed)
		return;
	cleanup_armed = true;
	atexit(cleanup_at_exit);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], cleanup_on_signal);
}

static const char *
broker_binary(void)
{
	static const char *const env[] = {
		[H_BROKER_210] = "COTAL_TEST_NATS_SERVER",
		[H_BROKER_29] = "COTAL_TEST_NATS_SERVER_29",
		[H_BROKER_214] = "COTAL_TEST_NATS_SERVER_214",
	};
	static const char *const bundled[] = {
		[H_BROKER_210] = COTAL_BUNDLED_NATS_SERVER,
		[H_BROKER_29] = "/usr/sbin/nats-server",
		[H_BROKER_214] = COTAL_BUNDLED_NATS_SERVER_214,
	};
	const char *v = getenv(env[which_broker]);

	if (v != NULL && *v != '\0')
		return v;
	if (access(bundled[which_broker], X_OK) == 0)
		return bundled[which_broker];
	return "/usr/sbin/nats-server";
}

int
h_broker_version(void)
{
	char cmd[H_PATH_MAX + 32], line[256];
	int major = 0, minor = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' --version 2>&1", broker_binary());
	if ((f = popen(cmd, "r")) == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL ||
	    sscanf(line, "nats-server: v%d.%d", &major, &minor) != 2)
		major = minor = 0;
	pclose(f);
	return major * 100 + minor;
}

int
h_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static bool
port_accepts(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

#define ENV_MAX 512

/*
 * The environment of a child, built before fork: a threaded process (nats.c
 * runs threads here) may only call async-signal-safe functions between fork
 * and exec, and setenv is not one. The caller frees with env_free.
 */
static char **
env_for(struct mesh *m)
{
	extern char **environ;
	char **env = calloc(ENV_MAX + 3, sizeof(*env));
	size_t n = 0;

	for (char **e = environ; *e != NULL && n < ENV_MAX; e++)
		if (strncmp(*e, "COTAL_HOME=", 11) != 0 && strncmp(*e, "COTAL_NATS_SERVER=", 18) != 0)
			env[n++] = strdup(*e);
	if (asprintf(&env[n++], "COTAL_HOME=%s", m->home) < 0 ||
	    asprintf(&env[n++], "COTAL_NATS_SERVER=%s", m->nats_bin) < 0)
		abort();
	env[n] = NULL;
	return env;
}

static void
env_free(char **env)
{
	for (char **e = env; *e != NULL; e++)
		free(*e);
	free(env);
}

/*
 * Start argv in the background with the mesh's environment, stdout and
 * stderr appended to logpath. The child dies with the test, however the
 * test dies, and inherits none of the test's own broker connections.
 */
static pid_t
spawn_logged(struct mesh *m, char *const argv[], const char *logpath)
{
	char **env = env_for(m);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		closefrom(3);
		execve(argv[0], argv, env);
		_exit(127);
	}
	env_free(env);
	if (fd >= 0)
		close(fd);
	return pid;
}

/* Run argv with the mesh's environment; capture output. */
static int
run_capture(struct mesh *m, char *const argv[], char *out, size_t outlen)
{
	int pipefd[2];
	pid_t pid;
	size_t got = 0;
	int status;

	char **env = env_for(m);

	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		env_free(env);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		env_free(env);
		return -1;
	}
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		/* Not the test's own broker connections. */
		closefrom(3);
		execve(argv[0], argv, env);
		_exit(127);
	}
	env_free(env);
	close(pipefd[1]);
	for (;;) {
		char tmp[4096];
		ssize_t r = read(pipefd[0], tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (out != NULL && got + 1 < outlen) {
			size_t n = (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
			memcpy(out + got, tmp, n);
			got += n;
		}
	}
	close(pipefd[0]);
	if (out != NULL && outlen > 0)
		out[got] = '\0';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (getenv("COTAL_TEST_VERBOSE") != NULL && out != NULL)
		fprintf(stderr, "$ %s %s %s\n%s", argv[0], argv[1] ? argv[1] : "",
		    argv[1] && argv[2] ? argv[2] : "", out);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The CLI's argv: args (NULL-ended) then "--root <dir>" (every cotal
 * command takes it anywhere). */
static void
cotal_argv(struct mesh *m, char **argv, size_t max, va_list ap)
{
	size_t n = 0;
	char *a;

	argv[n++] = (char *)COTAL_CLI_PATH;
	while ((a = va_arg(ap, char *)) != NULL && n + 3 < max)
		argv[n++] = a;
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	argv[n] = NULL;
}

int
h_cotal(struct mesh *m, char *out, size_t outlen, ...)
{
	char *argv[64];
	va_list ap;

	va_start(ap, outlen);
	cotal_argv(m, argv, 64, ap);
	va_end(ap);
	return run_capture(m, argv, out, outlen);
}

int
h_cotal_argv(struct mesh *m, char *out, size_t outlen, char *const args[])
{
	char *argv[128];
	size_t n = 0;

	argv[n++] = (char *)COTAL_CLI_PATH;
	for (size_t i = 0; args[i] != NULL && n + 3 < 128; i++)
		argv[n++] = args[i];
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	argv[n] = NULL;
	return run_capture(m, argv, out, outlen);
}

int
h_registry_set(struct mesh *m, const char *field, json_t *value)
{
	char reg[H_PATH_MAX * 2], key[512];
	json_t *doc;
	int rc;

	space_key(m->space, key, sizeof(key));
	snprintf(reg, sizeof(reg), "%s/meshes/space.%s.json", m->home, key);
	if ((doc = json_load_file(reg, 0, NULL)) == NULL) {
		json_decref(value);
		return -1;
	}
	if (value != NULL)
		json_object_set_new(doc, field, value);
	else
		json_object_del(doc, field);
	rc = json_dump_file(doc, reg, 0) == 0 ? 0 : -1;
	json_decref(doc);
	return rc;
}

void
h_track(pid_t pid)
{
	track_broker(pid, true);
}

pid_t
h_cotal_spawn(struct mesh *m, const char *outpath, ...)
{
	char *argv[64];
	va_list ap;

	va_start(ap, outpath);
	cotal_argv(m, argv, 64, ap);
	va_end(ap);
	return spawn_logged(m, argv, outpath);
}

/* Start the broker of conf listening on port; its pid into *pidp. */
static int
broker_spawn(struct mesh *m, const char *conf, int port, const char *logname, pid_t *pidp)
{
	char logp[H_PATH_MAX + 32];
	char *argv[] = { m->nats_bin, (char *)"-c", (char *)conf, NULL };
	pid_t pid;

	snprintf(logp, sizeof(logp), "%s/%s", m->dir, logname);
	if ((pid = spawn_logged(m, argv, logp)) < 0)
		return -1;
	track_broker(pid, true);
	*pidp = pid;
	for (int waited = 0; waited < BROKER_WAIT_MS; waited += 20) {
		int status;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			track_broker(pid, false);
			*pidp = 0;
			fprintf(stderr, "✗ harness: %s exited at start (see %s)\n", m->nats_bin, logp);
			return -1;
		}
		if (port_accepts(port))
			return 0;
		sleep_ms(20);
	}
	fprintf(stderr, "✗ harness: broker did not listen on %d within %d ms\n", port,
	    BROKER_WAIT_MS);
	return -1;
}

int
h_broker_start(struct mesh *m)
{
	return broker_spawn(m, m->conf, m->port, "broker.log", &m->broker);
}

static int
pid_signal(pid_t *pidp, int sig)
{
	int status;

	if (*pidp <= 0)
		return 0;
	kill(*pidp, sig);
	for (int waited = 0; waited < STOP_WAIT_MS; waited += 20) {
		if (waitpid(*pidp, &status, WNOHANG) == *pidp) {
			track_broker(*pidp, false);
			*pidp = 0;
			return 0;
		}
		sleep_ms(20);
	}
	kill(*pidp, SIGKILL);
	waitpid(*pidp, &status, 0);
	track_broker(*pidp, false);
	*pidp = 0;
	return -1;
}

static int
broker_signal(struct mesh *m, int sig)
{
	return pid_signal(&m->broker, sig);
}

int
h_node_start(struct mesh *m, int i)
{
	char logname[32];

	if (i < 0 || i >= m->nnodes)
		return -1;
	snprintf(logname, sizeof(logname), "broker-%d.log", i + 1);
	return broker_spawn(m, m->nodes[i].conf, m->nodes[i].port, logname, &m->nodes[i].pid);
}

int
h_node_kill(struct mesh *m, int i)
{
	return i >= 0 && i < m->nnodes ? pid_signal(&m->nodes[i].pid, SIGKILL) : -1;
}

int
h_node_stop(struct mesh *m, int i)
{
	return i >= 0 && i < m->nnodes ? pid_signal(&m->nodes[i].pid, SIGTERM) : -1;
}

int
h_broker_stop(struct mesh *m)
{
	return broker_signal(m, SIGTERM);
}

int
h_broker_kill(struct mesh *m)
{
	return broker_signal(m, SIGKILL);
}

int
h_broker_restart(struct mesh *m)
{
	if (h_broker_stop(m) != 0)
		return -1;
	return h_broker_start(m);
}

/* The broker store's sync for the meshes made here: `cotal mesh init`'s
 * default (always), unless COTAL_TEST_SYNC_INTERVAL names another (the
 * benchmark measures both). */
static const char *
sync_interval(void)
{
	const char *v = getenv("COTAL_TEST_SYNC_INTERVAL");

	return v != NULL && *v != '\0' ? v : "always";
}

/* The temporary root of a new mesh for one space. */
static int
mesh_dir_make(struct mesh *m, const char *space)
{
	const char *tmp = getenv("TMPDIR");

	memset(m, 0, sizeof(*m));
	arm_cleanup();
	snprintf(m->dir, sizeof(m->dir), "%s/cotal-e2e-XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(m->dir) == NULL || ndirs == MAX_DIRS)
		return -1;
	snprintf(dirs[ndirs++], H_DIR_MAX, "%s", m->dir);
	snprintf(m->home, sizeof(m->home), "%s/home", m->dir);
	snprintf(m->space, sizeof(m->space), "%s", space);
	space_token(space, m->token, sizeof(m->token));
	snprintf(m->conf, sizeof(m->conf), "%s/.cotal/mesh/nats-server.conf", m->dir);
	snprintf(m->nats_bin, sizeof(m->nats_bin), "%s", broker_binary());
	return 0;
}

/* COTAL_TEST_GRANTS=FILE: the daemon's standing credentials carry the
 * grants another Cotal toolchain mints (delivery-grants.json), not the
 * project's own profiles. */
static int
mesh_foreign_grants(struct mesh *m)
{
	char out[H_OUT_MAX];
	const char *grants = getenv("COTAL_TEST_GRANTS");
	static const char *const foreign[] = { "delivery", "sys-observer", "sys-evictor" };

	for (size_t i = 0; grants != NULL && i < sizeof(foreign) / sizeof(foreign[0]); i++)
		if (h_cotal(m, out, sizeof(out), "creds", "mint", "--space", m->space, "--profile",
		    foreign[i], "--grants", grants, "--force", NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal creds mint --grants %s failed:\n%s", grants,
			    out);
			return -1;
		}
	return 0;
}

int
h_mesh_up(struct mesh *m, const char *space, bool provision)
{
	char out[H_OUT_MAX], port[16];

	if (mesh_dir_make(m, space) != 0)
		return -1;
	for (int tries = 0; tries < PORT_TRIES; tries++) {
		m->port = h_free_port();
		snprintf(port, sizeof(port), "%d", m->port);
		/* The config for the broker under test: init asks it what it
		 * accepts (sync_interval). */
		if (h_cotal(m, out, sizeof(out), "mesh", "init", "--dev", "--port", port,
		    "--space", space, "--nats-server", m->nats_bin, "--sync-interval",
		    sync_interval(), NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal mesh init failed:\n%s", out);
			return -1;
		}
		snprintf(m->url, sizeof(m->url), "nats://127.0.0.1:%d", m->port);
		if (h_broker_start(m) == 0)
			break;
		if (tries + 1 == PORT_TRIES)
			return -1;
	}
	if (provision && h_cotal(m, out, sizeof(out), "space", "provision", space, NULL) != 0) {
		fprintf(stderr, "✗ harness: cotal space provision failed:\n%s", out);
		return -1;
	}
	return mesh_foreign_grants(m);
}

/* n distinct free loopback ports into ports[]. */
static int
free_ports(int *ports, int n)
{
	for (int i = 0; i < n; i++) {
		int again = 0;
		do {
			ports[i] = h_free_port();
			again = 0;
			for (int k = 0; k < i; k++)
				again |= ports[k] == ports[i];
		} while (again && ports[i] > 0);
		if (ports[i] <= 0)
			return -1;
	}
	return 0;
}

#define CLUSTER_READY_MS 60000 /* JetStream elects its meta leader, then places */
/* A node the JetStream meta leader hears from joins the meta group within a
 * second or two (the leader's first heartbeat answer proposes it). */
#define META_JOIN_MS 20000
#define META_JOIN_RESTARTS 2

/* A value of node i's config ("key: value", quotes dropped) into out. */
static bool
node_conf_value(struct mesh *m, int i, const char *key, char *out, size_t outlen)
{
	char line[H_PATH_MAX + 64];
	size_t kl = strlen(key);
	bool found = false;
	FILE *f = fopen(m->nodes[i].conf, "r");

	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, key, kl) != 0 || p[kl] != ':')
			continue;
		p += kl + 1;
		while (*p == ' ' || *p == '"')
			p++;
		size_t n = strcspn(p, "\"\r\n");
		if (n < outlen) {
			memcpy(out, p, n);
			out[n] = '\0';
			found = true;
		}
	}
	if (f != NULL)
		fclose(f);
	return found;
}

/* Node i's raft peer id: nats-server's getHash(server_name), the first 8
 * bytes of its SHA-256 mapped onto 62 letters and digits. */
static bool
node_peer_id(struct mesh *m, int i, char id[9])
{
	static const char digits[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	unsigned char sha[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char name[128];

	if (!node_conf_value(m, i, "server_name", name, sizeof(name)) ||
	    EVP_Digest(name, strlen(name), sha, &len, EVP_sha256(), NULL) != 1 || len < 8)
		return false;
	for (int k = 0; k < 8; k++)
		id[k] = digits[sha[k] % 62];
	id[8] = '\0';
	return true;
}

/*
 * The JetStream meta group as node i's store records it: the raft peer
 * state file <store_dir>/jetstream/<system account>/_js_/_meta_/peers.idx
 * (nats-server's encodePeerState, the same from 2.9 to 2.14: cluster size
 * and peer count, little-endian uint32 each, then 8-byte peer ids). The
 * number of peers read, or -1 when there is none yet.
 */
static int
meta_peers(struct mesh *m, int i, int *csz, char ids[][9], int max)
{
	char store[H_PATH_MAX], pat[H_PATH_MAX + 64];
	unsigned char buf[8 + 8 * H_NODES_MAX];
	glob_t g;
	size_t n = 0;
	int count = -1;

	if (!node_conf_value(m, i, "store_dir", store, sizeof(store)))
		return -1;
	snprintf(pat, sizeof(pat), "%s/jetstream/*/_js_/_meta_/peers.idx", store);
	if (glob(pat, 0, NULL, &g) != 0)
		return -1;
	FILE *f = fopen(g.gl_pathv[0], "rb");
	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
	}
	globfree(&g);
	if (n < 8)
		return -1;
	*csz = (int)(buf[0] | buf[1] << 8 | buf[2] << 16 | (unsigned)buf[3] << 24);
	count = (int)(buf[4] | buf[5] << 8 | buf[6] << 16 | (unsigned)buf[7] << 24);
	if (count < 0 || count > max || n < 8 + 8 * (size_t)count)
		return -1;
	for (int k = 0; k < count; k++) {
		memcpy(ids[k], buf + 8 + 8 * k, 8);
		ids[k][8] = '\0';
	}
	return count;
}

/*
 * Which nodes the JetStream meta group lacks: absent from the meta peer
 * state of a majority of the nodes (a node left out still records its own
 * bootstrap state, itself alone, or the group's without itself). Into
 * out[] (true: left out), and each node's record as words into why. The
 * number left out; 0 once every node records all n as known peers; -1
 * while that is not so and nobody is left out yet.
 */
static int
meta_left_out(struct mesh *m, int n, bool *out, char *why, size_t whylen)
{
	char ids[H_NODES_MAX][H_NODES_MAX][9], self[H_NODES_MAX][9];
	int count[H_NODES_MAX], csz[H_NODES_MAX], full = 0, left = 0;
	size_t w = 0;

	for (int i = 0; i < n; i++) {
		if (!node_peer_id(m, i, self[i]))
			snprintf(self[i], sizeof(self[i]), "?");
		csz[i] = 0;
		count[i] = meta_peers(m, i, &csz[i], ids[i], H_NODES_MAX);
		full += count[i] == n && csz[i] == n;
		w += (size_t)snprintf(why + w, w < whylen ? whylen - w : 0,
		    "%snode %d (peer %s): ", i ? "; " : "", i + 1, self[i]);
		if (count[i] < 0)
			w += (size_t)snprintf(why + w, w < whylen ? whylen - w : 0, "no meta state");
		else
			w += (size_t)snprintf(why + w, w < whylen ? whylen - w : 0,
			    "cluster size %d, known peers", csz[i]);
		for (int k = 0; k < count[i]; k++)
			w += (size_t)snprintf(why + w, w < whylen ? whylen - w : 0, " %s", ids[i][k]);
	}
	if (full == n)
		return 0;
	for (int i = 0; i < n; i++) {
		int absent = 0;
		for (int j = 0; j < n; j++) {
			bool listed = false;
			for (int k = 0; k < count[j]; k++)
				listed = listed || strcmp(ids[j][k], self[i]) == 0;
			absent += count[j] >= 0 && !listed;
		}
		out[i] = self[i][0] != '?' && absent > n / 2;
		left += out[i];
	}
	return left > 0 ? left : -1;
}

/*
 * Every node in the JetStream meta group before the space is placed. A node
 * the meta leader never hears from stays out of it: its replicas cannot be
 * placed ("no suitable peers for placement", no reason given: the leader's
 * peer list is one short). nats-server 2.10 starts such a node now and
 * then: setSystemAccount starts the raft send queue's goroutine
 * (newSendQ) before it stores the system account (sysAcc.Store), and a
 * goroutine that looks first registers its client with no account; every
 * raft message the node sends after that (vote requests, append entry
 * answers) is dropped (processInboundClientMsg: c.acc == nil), for the
 * life of the process, while it hears the others. Fixed in 2.11.0 (the
 * queue is given the account). Such a node is restarted: it is a broker
 * that came up broken, not a state of the cluster under test.
 */
static int
cluster_meta_joined(struct mesh *m, int n)
{
	char why[2048];
	bool out[H_NODES_MAX];

	for (int round = 0;; round++) {
		int left = -1;
		for (int64_t until = now_ms() + META_JOIN_MS; now_ms() < until;) {
			if ((left = meta_left_out(m, n, out, why, sizeof(why))) == 0)
				return 0;
			sleep_ms(250);
		}
		if (left < 0) {
			/* No verdict (a broker that keeps no peers.idx): placement
			 * will tell. */
			fprintf(stderr, "• harness: the JetStream meta group did not record all %d "
			    "nodes within %d ms (%s); provisioning anyway\n", n, META_JOIN_MS, why);
			return 0;
		}
		if (round == META_JOIN_RESTARTS) {
			fprintf(stderr, "✗ harness: the JetStream meta group still lacks a node after "
			    "%d restarts: %s\n", round, why);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (!out[i])
				continue;
			fprintf(stderr, "• harness: node %d is not in the JetStream meta group %d ms "
			    "after start (%s): its raft messages never reach the leader (nats-server "
			    "2.10's send queue without an account); restarting it\n", i + 1,
			    META_JOIN_MS, why);
			h_node_kill(m, i);
			if (h_node_start(m, i) != 0)
				return -1;
		}
	}
}

int
h_cluster_up(struct mesh *m, const char *space, int n, int replicas)
{
	char out[H_OUT_MAX], plist[H_NODES_MAX * 8], rlist[H_NODES_MAX * 8], reps[16];
	int ports[2 * H_NODES_MAX];

	if (n < 3 || n > H_NODES_MAX || mesh_dir_make(m, space) != 0)
		return -1;
	m->nnodes = n;
	for (int tries = 0;; tries++) {
		size_t pu = 0, ru = 0;
		if (free_ports(ports, 2 * n) != 0)
			return -1;
		m->url[0] = '\0';
		for (int i = 0; i < n; i++) {
			struct node *nd = &m->nodes[i];
			nd->port = ports[i];
			nd->route_port = ports[n + i];
			snprintf(nd->conf, sizeof(nd->conf), "%s/.cotal/mesh/nats-server-%d.conf",
			    m->dir, i + 1);
			snprintf(nd->url, sizeof(nd->url), "nats://127.0.0.1:%d", nd->port);
			pu += (size_t)snprintf(plist + pu, sizeof(plist) - pu, "%s%d", i ? "," : "",
			    nd->port);
			ru += (size_t)snprintf(rlist + ru, sizeof(rlist) - ru, "%s%d", i ? "," : "",
			    nd->route_port);
			snprintf(m->url + strlen(m->url), sizeof(m->url) - strlen(m->url), "%s%s",
			    i ? "," : "", nd->url);
		}
		snprintf(reps, sizeof(reps), "%d", n);
		if (h_cotal(m, out, sizeof(out), "mesh", "init", "--dev", "--cluster", reps, "--port",
		    plist, "--route-port", rlist, "--space", space, "--nats-server", m->nats_bin,
		    "--sync-interval", sync_interval(), NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal mesh init --cluster failed:\n%s", out);
			return -1;
		}
		int up = 0;
		for (int i = 0; i < n && h_node_start(m, i) == 0; i++)
			up++;
		if (up == n)
			break;
		for (int i = 0; i < n; i++)
			h_node_kill(m, i);
		if (tries + 1 == PORT_TRIES)
			return -1;
	}
	m->port = m->nodes[0].port;
	if (cluster_meta_joined(m, n) != 0)
		return -1;
	if (replicas > 0) {
		/* The cluster answers JetStream requests once its meta leader is
		 * elected: provision until then. */
		snprintf(reps, sizeof(reps), "%d", replicas);
		int64_t until = now_ms() + CLUSTER_READY_MS;
		while (h_cotal(m, out, sizeof(out), "space", "provision", space, "--replicas", reps,
		    NULL) != 0) {
			if (now_ms() > until) {
				char why[2048];
				bool left[H_NODES_MAX];
				meta_left_out(m, n, left, why, sizeof(why));
				fprintf(stderr, "✗ harness: cotal space provision --replicas %s failed "
				    "for %d ms (JetStream meta group: %s):\n%s", reps, CLUSTER_READY_MS,
				    why, out);
				return -1;
			}
			sleep_ms(500);
		}
	}
	return mesh_foreign_grants(m);
}

void
h_mesh_down(struct mesh *m)
{
	h_broker_kill(m);
	for (int i = 0; i < m->nnodes; i++)
		h_node_kill(m, i);
}

/* Find "word value" on a line of the CLI's output. */
static bool
out_field(const char *out, const char *word, char *val, size_t vallen)
{
	size_t wl = strlen(word);

	for (const char *p = out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, word, wl) == 0 && p[wl] == ' ') {
			const char *v = p + wl + 1, *e = strchr(v, '\n');
			size_t n = e ? (size_t)(e - v) : strlen(v);
			if (n >= vallen)
				return false;
			memcpy(val, v, n);
			val[n] = '\0';
			return true;
		}
	}
	return false;
}

int
h_agent_add(struct mesh *m, const char *name, const char *allow, struct agent *a)
{
	char out[H_OUT_MAX], *dot;

	memset(a, 0, sizeof(*a));
	if (h_cotal(m, out, sizeof(out), "agent", "add", name, "--space", m->space,
	    "--allow", allow, NULL) != 0) {
		fprintf(stderr, "✗ harness: cotal agent add %s failed:\n%s", name, out);
		return -1;
	}
	snprintf(a->name, sizeof(a->name), "%s", name);
	if (!out_field(out, "principal", a->principal, sizeof(a->principal)) ||
	    !out_field(out, "uid", a->uid, sizeof(a->uid)) ||
	    !out_field(out, "creds", a->creds, sizeof(a->creds)) ||
	    (dot = strchr(a->principal, '.')) == NULL) {
		fprintf(stderr, "✗ harness: unexpected agent add output:\n%s", out);
		return -1;
	}
	snprintf(a->owner, sizeof(a->owner), "%.*s", (int)(dot - a->principal), a->principal);
	snprintf(a->actor, sizeof(a->actor), "%s", dot + 1);
	return 0;
}

int
h_mint(struct mesh *m, const char *profile, const char *file, const char *extra1,
       const char *extra2, char *out, size_t outlen)
{
	char text[H_OUT_MAX];

	snprintf(out, outlen, "%s/%s", m->dir, file);
	int rc = h_cotal(m, text, sizeof(text), "creds", "mint", "--space", m->space,
	    "--profile", profile, "--out", out, "--force",
	    extra1 ? extra1 : (char *)NULL, extra2, NULL);
	if (rc != 0)
		fprintf(stderr, "✗ harness: cotal creds mint failed:\n%s", text);
	return rc;
}

#define SINKS 64
static struct sink sinks[SINKS];
static pthread_mutex_t sinks_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t sinks_once = PTHREAD_ONCE_INIT;
static unsigned next_sink;

static void
sinks_init(void)
{
	for (int i = 0; i < SINKS; i++)
		pthread_mutex_init(&sinks[i].mu, NULL);
}

static struct sink *
sink_open(void)
{
	struct sink *k;

	pthread_once(&sinks_once, sinks_init);
	pthread_mutex_lock(&sinks_mu);
	k = &sinks[next_sink++ % SINKS];
	pthread_mutex_unlock(&sinks_mu);
	pthread_mutex_lock(&k->mu);
	k->live = true;
	k->nviolations = 0;
	pthread_mutex_unlock(&k->mu);
	return k;
}

static void
on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg)
{
	struct sink *k = arg;
	const char *text = NULL;

	(void)sub;
	natsConnection_GetLastError(nc, &text);
	pthread_mutex_lock(&k->mu);
	if (k->live && k->nviolations < H_VIOLATIONS_MAX)
		snprintf(k->violations[k->nviolations++], sizeof(k->violations[0]), "%s: %s",
		    natsStatus_GetText(err), text ? text : "");
	pthread_mutex_unlock(&k->mu);
}

static int
connect_opts(struct conn_opts o, const char *creds_path, struct conn *c, char *err,
	     size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->sink = sink_open();
	o.on_error_arg = c->sink;
	if (creds_load(creds_path, &c->creds, err, errlen) != 0)
		goto fail;
	if (conn_open(&o, &c->creds, &c->nc, err, errlen) != 0)
		goto fail;
	if (natsConnection_JetStream(&c->js, c->nc, NULL) != NATS_OK) {
		snprintf(err, errlen, "jetstream context");
		goto fail;
	}
	return 0;
fail:
	h_close(c);
	return -1;
}

int
h_connect(struct mesh *m, const char *creds_path, struct conn *c, char *err, size_t errlen)
{
	struct conn_opts o = { .url = m->url, .name = "cotal-e2e", .timeout_ms = 5000,
		.on_error = on_async_error };

	return connect_opts(o, creds_path, c, err, errlen);
}

int
h_connect_url(struct mesh *m, const char *url, const char *creds_path, struct conn *c,
	      char *err, size_t errlen)
{
	struct conn_opts o = { .url = url != NULL ? url : m->url, .name = "cotal-e2e",
		.timeout_ms = 5000, .on_error = on_async_error, .max_reconnect = -1,
		.reconnect_wait_ms = 250 };

	return connect_opts(o, creds_path, c, err, errlen);
}

int
h_connect_profile(struct mesh *m, const char *profile, struct conn *c, char *err,
		  size_t errlen)
{
	char path[H_PATH_MAX * 2], key[512];

	space_key(m->space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/%s.creds", m->dir, key, profile);
	return h_connect(m, path, c, err, errlen);
}

void
h_close(struct conn *c)
{
	jsCtx_Destroy(c->js);
	natsConnection_Destroy(c->nc);
	if (c->creds.jwt != NULL)
		creds_free(&c->creds);
	if (c->sink != NULL) {
		pthread_mutex_lock(&c->sink->mu);
		c->sink->live = false;
		pthread_mutex_unlock(&c->sink->mu);
	}
	memset(c, 0, sizeof(*c));
}

bool
h_violation(struct conn *c, const char *needle, int ms)
{
	struct sink *k = c->sink;

	for (int waited = 0; ; waited += 20) {
		pthread_mutex_lock(&k->mu);
		for (int i = 0; i < k->nviolations; i++)
			if (strstr(k->violations[i], needle) != NULL) {
				pthread_mutex_unlock(&k->mu);
				return true;
			}
		pthread_mutex_unlock(&k->mu);
		if (waited >= ms)
			return false;
		natsConnection_Flush(c->nc);
		sleep_ms(20);
	}
}

static int64_t
now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int post_with(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
		     const char *id, const char *text, uint64_t *seq, bool dedup);

int
h_post(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
       const char *id, const char *text, uint64_t *seq)
{
	return post_with(c, m, a, channel, id, text, seq, false);
}

int
h_post_dedup(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	     const char *id, const char *text, uint64_t *seq)
{
	return post_with(c, m, a, channel, id, text, seq, true);
}

static int
post_with(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	  const char *id, const char *text, uint64_t *seq, bool dedup)
{
	jsPubOptions po;
	char subj[1024], from[256];
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	json_t *msg;
	char *body;
	natsStatus s;

	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", m->token, a->owner, a->actor, channel);
	snprintf(from, sizeof(from), "%s.%s", a->owner, a->actor);
	msg = json_pack("{s:s, s:I, s:s, s:{s:s, s:s}, s:[{s:s, s:s}], s:s}",
	    "id", id, "ts", (json_int_t)now_ms(), "space", m->space,
	    "from", "id", from, "name", a->name,
	    "parts", "kind", "text", "text", text, "channel", channel);
	body = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	jsPubOptions_Init(&po);
	if (dedup) {
		po.MsgId = id;
		po.MaxWait = 3000;
	}
	s = js_Publish(&pa, c->js, subj, body, (int)strlen(body), dedup ? &po : NULL, &jerr);
	free(body);
	if (s != NATS_OK)
		return -1;
	if (seq != NULL)
		*seq = pa->Sequence;
	jsPubAck_Destroy(pa);
	return 0;
}

/* Bind (never create) the agent's dlv_ durable, as the agent does. */
static natsSubscription *
dlv_bind(struct conn *c, struct mesh *m, const struct agent *a, char *durable, size_t dlen,
	 char *err, size_t errlen)
{
	char stream[256];
	natsSubscription *sub = NULL;
	jsSubOptions so;
	jsErrCode jerr = 0;
	natsStatus s;

	snprintf(stream, sizeof(stream), "DLV_%s", m->token);
	snprintf(durable, dlen, "dlv_%s-%s-%s", a->owner, a->actor, a->uid);
	jsSubOptions_Init(&so);
	so.Stream = stream;
	so.Consumer = durable;
	so.ManualAck = true;
	s = js_PullSubscribe(&sub, c->js, NULL, durable, NULL, &so, &jerr);
	if (s != NATS_OK) {
		char why[512];
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "bind %s: %s (jerr %d)", durable, why, (int)jerr);
		return NULL;
	}
	return sub;
}

int
h_dlv_fetch(struct conn *c, struct mesh *m, const struct agent *a, int ms, bool ack,
	    natsMsg **out, char *err, size_t errlen)
{
	char durable[512];
	natsSubscription *sub = NULL;
	natsMsgList list = { 0 };
	jsErrCode jerr = 0;
	natsStatus s;

	*out = NULL;
	if ((sub = dlv_bind(c, m, a, durable, sizeof(durable), err, errlen)) == NULL)
		return -1;
	s = natsSubscription_Fetch(&list, sub, 1, ms, &jerr);
	if (s == NATS_OK && list.Count > 0) {
		*out = list.Msgs[0];
		list.Msgs[0] = NULL;
		if (ack)
			natsMsg_Ack(*out, NULL);
	}
	natsMsgList_Destroy(&list);
	natsSubscription_Destroy(sub);
	if (s != NATS_OK && s != NATS_TIMEOUT) {
		char why[512];
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "fetch %s: %s", durable, why);
		return -1;
	}
	return 0;
}

int
h_kv_put(struct conn *c, struct mesh *m, const char *name, const char *key,
	 const char *value, char *err, size_t errlen)
{
	char bucket[256], why[512];
	kvStore *kv = NULL;
	uint64_t rev;
	natsStatus s;

	snprintf(bucket, sizeof(bucket), "cotal_%s_%s", name, m->token);
	s = js_KeyValue(&kv, c->js, bucket);
	if (s == NATS_OK)
		s = kvStore_PutString(&rev, kv, key, value);
	kvStore_Destroy(kv);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "put %s/%s: %s", bucket, key, why);
		return -1;
	}
	return 0;
}

char *
h_kv_get(struct conn *c, struct mesh *m, const char *name, const char *key, char *err,
	 size_t errlen)
{
	char bucket[256], why[512];
	kvStore *kv = NULL;
	kvEntry *e = NULL;
	char *val = NULL;
	natsStatus s;

	snprintf(bucket, sizeof(bucket), "cotal_%s_%s", name, m->token);
	s = js_KeyValue(&kv, c->js, bucket);
	if (s == NATS_OK)
		s = kvStore_Get(&e, kv, key);
	if (s == NATS_OK)
		val = strndup(kvEntry_ValueString(e), (size_t)kvEntry_ValueLen(e));
	else if (s == NATS_NOT_FOUND)
		snprintf(err, errlen, "not found");
	else {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "get %s/%s: %s", bucket, key, why);
	}
	kvEntry_Destroy(e);
	kvStore_Destroy(kv);
	return val;
}

int
h_daemon_start(struct mesh *m, struct daemon *d, ...)
{
	char *argv[32], outp[H_PATH_MAX + 32], key[512];
	int n = 0;
	va_list ap;
	char *a;
	pid_t pid;

	memset(d, 0, sizeof(*d));
	space_key(m->space, key, sizeof(key));
	snprintf(d->log, sizeof(d->log), "%s/.cotal/delivery.%s.log", m->dir, key);
	snprintf(d->status, sizeof(d->status), "%s/.cotal/delivery.%s.status.json", m->dir, key);
	argv[n++] = (char *)COTAL_DAEMON_PATH;
	argv[n++] = (char *)"--space";
	argv[n++] = m->space;
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	va_start(ap, d);
	while ((a = va_arg(ap, char *)) != NULL && n < 30)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	snprintf(outp, sizeof(outp), "%s/daemon.out", m->dir);
	if ((pid = spawn_logged(m, argv, outp)) < 0)
		return -1;
	track_broker(pid, true);
	d->pid = pid;
	return 0;
}

pid_t
h_daemon_spawn(struct mesh *m, const char *outpath, ...)
{
	char *argv[32], *a;
	int n = 0;
	va_list ap;
	pid_t pid;

	argv[n++] = (char *)COTAL_DAEMON_PATH;
	va_start(ap, outpath);
	while ((a = va_arg(ap, char *)) != NULL && n < 31)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	if ((pid = spawn_logged(m, argv, outpath)) > 0)
		track_broker(pid, true);
	return pid;
}

void
h_space_view(const struct mesh *m, const char *space, struct mesh *out)
{
	*out = *m;
	snprintf(out->space, sizeof(out->space), "%s", space);
	space_token(space, out->token, sizeof(out->token));
}

json_t *
h_daemon_status(struct daemon *d)
{
	return json_load_file(d->status, 0, NULL);
}

pid_t
h_daemon_worker_pid(struct daemon *d, const char *role)
{
	json_t *doc = h_daemon_status(d), *w;
	pid_t pid = 0;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		if (strcmp(json_string_value(json_object_get(w, "role")), role) == 0)
			pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
	json_decref(doc);
	return pid;
}

uint64_t
h_daemon_counter(struct daemon *d, const char *role, const char *name)
{
	json_t *doc = h_daemon_status(d), *w;
	uint64_t v = 0;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		if (strcmp(json_string_value(json_object_get(w, "role")), role) == 0)
			v = (uint64_t)json_integer_value(json_object_get(json_object_get(w, "counters"),
			    name));
	json_decref(doc);
	return v;
}

int
h_daemon_wait_connected(struct daemon *d, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		json_t *doc = h_daemon_status(d), *w;
		size_t i, ok = 0, all = 0;
		json_array_foreach(json_object_get(doc, "workers"), i, w) {
			all++;
			ok += strcmp(json_string_value(json_object_get(w, "state")), "connected") == 0;
		}
		json_decref(doc);
		if (all > 0 && ok == all)
			return 0;
		if (d->pid > 0 && waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			track_broker(d->pid, false);
			d->pid = 0;
			return -1;
		}
		sleep_ms(50);
	}
	return -1;
}

int
h_daemon_wait_exit(struct daemon *d, int ms)
{
	int status;

	for (int waited = 0; waited <= ms; waited += 10) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			track_broker(d->pid, false);
			d->pid = 0;
			return status;
		}
		sleep_ms(10);
	}
	return -1;
}

void
h_daemon_kill(struct daemon *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		track_broker(d->pid, false);
		d->pid = 0;
	}
}

bool
h_log_has(const char *path, const char *needle, int ms)
{
	for (int waited = 0; ; waited += 50) {
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			char line[8192];
			while (fgets(line, sizeof(line), f) != NULL)
				if (strstr(line, needle) != NULL) {
					fclose(f);
					return true;
				}
			fclose(f);
		}
		if (waited >= ms)
			return false;
		sleep_ms(50);
	}
}

int
h_daemon_run(struct mesh *m, const char *cwd, char *out, size_t outlen, ...)
{
	char *argv[32];
	int n = 0;
	va_list ap;
	char *a;

	argv[n++] = (char *)COTAL_DAEMON_PATH;
	va_start(ap, outlen);
	while ((a = va_arg(ap, char *)) != NULL && n < 30)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	char here[H_PATH_MAX];
	if (getcwd(here, sizeof(here)) == NULL || (cwd != NULL && chdir(cwd) != 0))
		return -1;
	int rc = run_capture(m, argv, out, outlen);
	if (chdir(here) != 0)
		return -1;
	return rc;
}

/* ---- the data path ---- */

int
h_chat_last_seq(struct conn *c, struct mesh *m, uint64_t *seq)
{
	char stream[256];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "CHAT_%s", m->token);
	if (js_GetStreamInfo(&si, c->js, stream, NULL, &jerr) != NATS_OK)
		return -1;
	*seq = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return 0;
}

int64_t
h_stream_msgs(struct conn *c, const char *stream)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	int64_t n;

	if (js_GetStreamInfo(&si, c->js, stream, NULL, &jerr) != NATS_OK)
		return -1;
	n = (int64_t)si->State.Msgs;
	jsStreamInfo_Destroy(si);
	return n;
}

int
h_member_put(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	     uint64_t join, uint64_t leave, uint64_t generation, char *err, size_t errlen)
{
	char key[1024], owner[256];
	json_t *row;
	char *body;
	int rc;

	snprintf(key, sizeof(key), "%s/%s.%s.%s", channel, a->owner, a->actor, a->uid);
	snprintf(owner, sizeof(owner), "%s.%s", a->owner, a->actor);
	row = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:s, s:I}", "channel", channel,
	    "owner", owner, "lifecycleUid", a->uid,
	    "state", leave ? "live-confirmed" : "durable-active", "joinCursor", (json_int_t)join,
	    "generation", (json_int_t)generation, "activated", 1, "writerIdentity", "test",
	    "updatedAt", (json_int_t)now_ms());
	if (leave)
		json_object_set_new(row, "leaveCursor", json_integer((json_int_t)leave));
	body = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	rc = h_kv_put(c, m, "members", key, body, err, errlen);
	free(body);
	return rc;
}

int
h_acl_put(struct conn *c, struct mesh *m, const struct agent *a, const char *allow, bool retired,
	  char *err, size_t errlen)
{
	char key[512], body[4096];

	snprintf(key, sizeof(key), "%s.%s.%s", a->owner, a->actor, a->uid);
	if (retired)
		snprintf(body, sizeof(body),
		    "{\"allowSubscribe\":[],\"revision\":9,\"updatedAt\":%lld,\"retired\":true,"
		    "\"retiredAt\":%lld}", (long long)now_ms(), (long long)now_ms());
	else
		snprintf(body, sizeof(body), "{\"allowSubscribe\":%s,\"revision\":2,\"updatedAt\":%lld}",
		    allow, (long long)now_ms());
	return h_kv_put(c, m, "acl", key, body, err, errlen);
}

json_t *
h_dlv_drain(struct conn *c, struct mesh *m, const struct agent *a, int ms, int quiet_ms,
	    bool *headers_ok, char *err, size_t errlen)
{
	char durable[512];
	natsSubscription *sub = NULL;
	jsErrCode jerr = 0;
	json_t *out = json_array();
	natsStatus s;
	int wait = ms;

	*headers_ok = true;
	if ((sub = dlv_bind(c, m, a, durable, sizeof(durable), err, errlen)) == NULL) {
		json_decref(out);
		return NULL;
	}
	for (;;) {
		natsMsgList list = { 0 };
		s = natsSubscription_Fetch(&list, sub, 256, wait, &jerr);
		if (s != NATS_OK || list.Count == 0) {
			natsMsgList_Destroy(&list);
			break;
		}
		for (int i = 0; i < list.Count; i++) {
			const char *h = NULL;
			natsMsg *msg = list.Msgs[i];
			if (natsMsgHeader_Get(msg, "Cotal-Delivery-Frame", &h) != NATS_OK ||
			    strcmp(h, "1") != 0)
				*headers_ok = false;
			json_t *v = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg),
			    0, NULL);
			json_array_append_new(out, v ? v : json_null());
			natsMsg_Ack(msg, NULL);
		}
		natsMsgList_Destroy(&list);
		wait = quiet_ms;
	}
	natsConnection_Flush(c->nc);
	natsSubscription_Destroy(sub);
	return out;
}

/* ---- TLS ---- */

int
h_tls_make(struct mesh *m, const char *name, const char *sans, struct tls_files *t)
{
	char script[8 * H_PATH_MAX], out[H_OUT_MAX];
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", script, NULL };

	snprintf(t->dir, sizeof(t->dir), "%s/tls-%s", m->dir, name);
	snprintf(t->ca, sizeof(t->ca), "%s/ca.pem", t->dir);
	snprintf(t->cert, sizeof(t->cert), "%s/server.pem", t->dir);
	snprintf(t->key, sizeof(t->key), "%s/server.key", t->dir);
	/* P-256 keys; a CA with keyCertSign, a server certificate for sans. */
	snprintf(script, sizeof(script),
	    "set -e; mkdir -p '%s'; cd '%s'\n"
	    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout ca.key -out ca.pem -days 2 -subj '/CN=cotal test CA %s' "
	    "-addext basicConstraints=critical,CA:TRUE "
	    "-addext keyUsage=critical,keyCertSign,cRLSign\n"
	    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	    "-keyout server.key -out server.csr -subj '/CN=cotal test broker %s'\n"
	    "printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n"
	    "extendedKeyUsage=serverAuth\\n' > server.ext\n"
	    "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	    "-days 2 -extfile server.ext -out server.pem\n"
	    "chmod 600 ca.key server.key\n",
	    t->dir, t->dir, name, name, sans);
	if (run_capture(m, argv, out, sizeof(out)) != 0) {
		fprintf(stderr, "✗ harness: making the TLS files %s failed:\n%s", t->dir, out);
		return -1;
	}
	return 0;
}

/* Copy the file from to the file to: 0, or -1. */
static int
copy_file(const char *from, const char *to)
{
	char buf[4096];
	size_t n;
	FILE *in = fopen(from, "r"), *out = in ? fopen(to, "w") : NULL;
	int rc = in != NULL && out != NULL ? 0 : -1;

	while (rc == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			rc = -1;
	if (in != NULL && ferror(in))
		rc = -1;
	if (out != NULL && fclose(out) != 0)
		rc = -1;
	if (in != NULL)
		fclose(in);
	return rc;
}

int
h_broker_tls(struct mesh *m, const struct tls_files *t, const char *extra)
{
	char plain[H_PATH_MAX + 16];
	FILE *f;

	/* The config as `cotal mesh init` wrote it, kept aside once. */
	snprintf(plain, sizeof(plain), "%s.plain", m->conf);
	if (access(plain, F_OK) != 0 ? copy_file(m->conf, plain) : copy_file(plain, m->conf))
		return -1;
	if (t != NULL) {
		if ((f = fopen(m->conf, "a")) == NULL)
			return -1;
		fprintf(f, "tls {\n  cert_file: \"%s\"\n  key_file: \"%s\"\n  timeout: 2\n}\n",
		    t->cert, t->key);
		fclose(f);
	}
	if (extra != NULL) {
		if ((f = fopen(m->conf, "a")) == NULL)
			return -1;
		fprintf(f, "%s\n", extra);
		fclose(f);
	}
	return h_broker_restart(m);
}
