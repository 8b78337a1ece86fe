/*
 * `cotal mesh start | stop`: run the dev mesh's brokers in the background
 * and stop them. A cluster mesh (`mesh init --cluster N`) starts and stops
 * every node, or the one --node names. Starting every node of a cluster
 * returns when each node's store records all of them in the JetStream meta
 * group; the nodes still left out when a 20 s round ends are restarted
 * (nats-server 2.10 now and then starts a node whose raft messages are
 * dropped for the life of its process; cli/mesh_meta.h, docs/cluster.md).
 * The stores keep that record across restarts, so the check sees such a
 * node on a cluster's first start only, where placement needs it.
 */
#include "cli/cli.h"
#include "cli/mesh.h"
#include "cli/mesh_meta.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procstat.h"

#define START_WAIT_MS 10000
#define STOP_WAIT_MS 10000
/* A cluster's JetStream meta group gets each round this long to hold every
 * node before the nodes it left out are restarted (META_RESTARTS rounds);
 * a round with no node to blame is given META_WAIT_MS. At most about
 * 3 x (20 s + the restarts) + 60 s in all. */
#define META_HEAR_MS 20000
#define META_RESTARTS 3
#define META_WAIT_MS 60000

/* Node n's broker pid from its pid file, when that process still runs
 * nats-server with node n's config. */
static pid_t
mesh_pid(const struct workspace *ws, int node)
{
	char path[WS_FILE_MAX], err[256], conf[WS_FILE_MAX], *text;
	size_t len;
	long pid;

	mesh_node_file(ws->mesh, node, "pid", path, sizeof(path));
	text = ws_read_file(path, 64, &len, err, sizeof(err));
	if (text == NULL)
		return 0;
	pid = strtol(text, NULL, 10);
	free(text);
	/* The pid may have been reused: it must be a broker of this mesh. */
	mesh_node_file(ws->mesh, node, "conf", conf, sizeof(conf));
	return ws_pid_runs(pid, "nats-server", "-c", conf) != 0 ? (pid_t)pid : 0;
}

static int mesh_nodes(json_t *mesh, int *nodes, int *ports, char *err, size_t errlen);

bool
cli_mesh_running(const struct workspace *ws)
{
	char err[512];
	json_t *mesh = ws_dev_mesh(ws, err, sizeof(err));
	int nodes[MESH_NODES_MAX], ports[MESH_NODES_MAX], n;
	bool all = true;

	if (mesh == NULL)
		return false;
	n = mesh_nodes(mesh, nodes, ports, err, sizeof(err));
	json_decref(mesh);
	if (n <= 0)
		return false;
	for (int i = 0; i < n; i++)
		all = all && mesh_pid(ws, nodes[i]) > 0;
	return all;
}

static int
port_open(const char *host, int port)
{
	struct sockaddr_in6 a6 = { 0 };
	struct sockaddr_in a4 = { 0 };
	int fd, rc;

	if (strchr(host, ':') != NULL) {
		a6.sin6_family = AF_INET6;
		a6.sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, host, &a6.sin6_addr);
		fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&a6, sizeof(a6));
	} else {
		a4.sin_family = AF_INET;
		a4.sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host,
		    &a4.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&a4, sizeof(a4));
	}
	if (fd >= 0)
		close(fd);
	return rc == 0;
}

/* The last line of the broker's log (a broker that refuses its config says
 * why there, e.g. `unknown field "sync_interval"` from a 2.9 broker). */
static bool
log_last_line(const char *path, char *out, size_t outlen)
{
	char tail[4096], *nl;
	size_t n = 0;
	FILE *f;

	out[0] = '\0';
	if ((f = fopen(path, "r")) == NULL)
		return false;
	if (fseek(f, -(long)(sizeof(tail) - 1), SEEK_END) != 0)
		rewind(f);
	n = fread(tail, 1, sizeof(tail) - 1, f);
	fclose(f);
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r'))
		n--;
	tail[n] = '\0';
	const char *line = (nl = memrchr(tail, '\n', n)) != NULL ? nl + 1 : tail;
	size_t len = strlen(line) < outlen ? strlen(line) : outlen - 1;
	memcpy(out, line, len);
	out[len] = '\0';
	return len > 0;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The nodes of the mesh: {0} for one broker, 1..N for a cluster, with
 * their client ports. The count, or -1 with err. */
static int
mesh_nodes(json_t *mesh, int *nodes, int *ports, char *err, size_t errlen)
{
	json_t *jc = json_object_get(mesh, "cluster");
	json_int_t n = json_integer_value(json_object_get(jc, "nodes"));
	json_t *jp = json_object_get(jc, "ports");

	if (jc == NULL) {
		nodes[0] = 0;
		ports[0] = (int)json_integer_value(json_object_get(mesh, "port"));
		return ports[0] > 0 && ports[0] <= 65535 ? 1 : -1;
	}
	if (n < 3 || n > MESH_NODES_MAX || json_array_size(jp) != (size_t)n) {
		snprintf(err, errlen, "dev-mesh.json: \"cluster\" needs nodes (3 to %d) and as "
		    "many ports", MESH_NODES_MAX);
		return -1;
	}
	for (int i = 0; i < (int)n; i++) {
		nodes[i] = i + 1;
		ports[i] = (int)json_integer_value(json_array_get(jp, (size_t)i));
		if (ports[i] < 1 || ports[i] > 65535) {
			snprintf(err, errlen, "dev-mesh.json: cluster.ports[%d] is not a port", i);
			return -1;
		}
	}
	return (int)n;
}

/* Start one node's broker, detached. 0, or 1 (logged); *started says
 * whether this call started it (false: it was running already). */
static int
node_start(const struct workspace *ws, const char *bin, const char *host, int node, int port,
	   bool *started)
{
	char conf[WS_FILE_MAX], logp[WS_FILE_MAX], name[32];
	pid_t pid;

	*started = false;
	if (node == 0)
		snprintf(name, sizeof(name), "broker");
	else
		snprintf(name, sizeof(name), "node %d", node);
	if ((pid = mesh_pid(ws, node)) > 0) {
		log_info("%s already running (pid %ld) at %s:%d", name, (long)pid, host, port);
		return 0;
	}
	*started = true;
	if (port_open(host, port)) {
		log_errx("mesh start: %s: %s:%d is already in use by another program", name, host,
		    port);
		return 1;
	}
	mesh_node_file(ws->mesh, node, "conf", conf, sizeof(conf));
	mesh_node_file(ws->mesh, node, "log", logp, sizeof(logp));

	pid = fork();
	if (pid < 0) {
		log_warn("mesh start: fork");
		return 1;
	}
	if (pid == 0) {
		/* Detach: own session, stdio onto the log, no inherited fds,
		 * and no signal mask of the caller's (cotal up blocks its stop
		 * signals to take them itself). */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		/* Above fd 2 first: with stdin closed, open() would hand out 0. */
		int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || nul < 0)
			_exit(127);
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		nul = fcntl(nul, F_DUPFD_CLOEXEC, 3);
		if (fd < 0 || nul < 0)
			_exit(127);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		closefrom(3);
		if (fork() != 0)
			_exit(0);
		/* A bare name is looked up on PATH, as a user expects. */
		execlp(bin, bin, "-c", conf, (char *)NULL);
		fprintf(stderr, "cotal mesh start: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	waitpid(pid, NULL, 0);
	for (int waited = 0; waited < START_WAIT_MS; waited += 50) {
		if (port_open(host, port) && mesh_pid(ws, node) > 0) {
			log_ok("%s up at nats://%s:%d (pid %ld, log %s)", name, host, port,
			    (long)mesh_pid(ws, node), logp);
			return 0;
		}
		sleep_ms(50);
	}
	char last[512];
	log_errx("mesh start: %s (%s) did not come up within %d ms%s%s; see %s", name, bin,
	    START_WAIT_MS, log_last_line(logp, last, sizeof(last)) ? ": " : "", last, logp);
	return 1;
}

/* Does pid run? A zombie does not (a detached broker is reaped by
 * whoever is PID 1, which may never do it). */
static bool
pid_alive(pid_t pid)
{
	struct procstat ps;

	return kill(pid, 0) == 0 && procstat_read(pid, &ps) == 0 && ps.state != 'Z' &&
	    ps.state != 'X';
}

/* SIGTERM, then SIGKILL after STOP_WAIT_MS (and up to as long again for it
 * to end); said either way. */
static void
pid_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	for (int waited = 0; waited < STOP_WAIT_MS && pid_alive(pid); waited += 50)
		sleep_ms(50);
	if (pid_alive(pid)) {
		log_warnx("broker pid %ld ignored SIGTERM for %d ms; sending SIGKILL", (long)pid,
		    STOP_WAIT_MS);
		kill(pid, SIGKILL);
		for (int waited = 0; waited < STOP_WAIT_MS && pid_alive(pid); waited += 50)
			sleep_ms(50);
	} else {
		log_ok("broker stopped (pid %ld)", (long)pid);
	}
}

/* Restart node: 0, or 1 (logged). */
static int
node_restart(const struct workspace *ws, const char *bin, const char *host, int node, int port)
{
	bool started;
	pid_t pid = mesh_pid(ws, node);

	if (pid > 0)
		pid_stop(pid);
	return node_start(ws, bin, host, node, port, &started);
}

/*
 * After every node of a cluster was started here: wait until the JetStream
 * meta group holds every node (each store's peer state lists all n). A round
 * that has not got there after META_HEAR_MS restarts the nodes the group
 * left out (cli/mesh_meta.c), at most META_RESTARTS rounds; a round with no
 * node to blame is given META_WAIT_MS. A SIGINT or SIGTERM pending (cotal
 * up blocks them to take them itself) ends the wait. 0, or 1 (logged,
 * naming the node and where its log is).
 */
static int
cluster_meta_wait(const struct workspace *ws, const char *bin, const char *host,
		  const int *nodes, const int *ports, int n)
{
	char names[MESH_NODES_MAX][32], stores[MESH_NODES_MAX][WS_FILE_MAX];
	struct mesh_meta_node mm[MESH_NODES_MAX];
	int64_t round_begun = mono_ms();
	int rounds = 0;

	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "cotal_dev_%d", nodes[i]);
		snprintf(stores[i], sizeof(stores[i]), "%s/jetstream-%d", ws->mesh, nodes[i]);
		mm[i].server_name = names[i];
		mm[i].store_dir = stores[i];
	}
	for (;;) {
		char why[2048];
		bool out[MESH_NODES_MAX];
		sigset_t pending;
		int left = mesh_meta_left_out(mm, n, out, why, sizeof(why));

		if (sigpending(&pending) == 0 &&
		    (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1)) {
			log_errx("mesh start: stopped while waiting for the JetStream meta group; the "
			    "nodes run (cotal mesh stop stops them)");
			return 1;
		}
		if (left == 0) {
			log_ok("cluster: every node is in the JetStream meta group");
			return 0;
		}
		int64_t now = mono_ms();
		if (left < 0 || now - round_begun < META_HEAR_MS) {
			if (now - round_begun >= META_WAIT_MS) {
				log_errx("mesh start: the cluster's JetStream meta group is not whole %d s "
				    "after the last start (%s); the nodes run and their logs are in %s",
				    META_WAIT_MS / 1000, why, ws->mesh);
				return 1;
			}
			sleep_ms(100);
			continue;
		}
		if (rounds == META_RESTARTS) {
			for (int i = 0; i < n; i++)
				if (out[i])
					log_errx("mesh start: node %d is still left out of the JetStream meta "
					    "group after %d restarts (%s); see %s/nats-server-%d.log", nodes[i],
					    META_RESTARTS, why, ws->mesh, nodes[i]);
			return 1;
		}
		rounds++;
		for (int i = 0; i < n; i++) {
			if (!out[i])
				continue;
			log_info("node %d is not in the JetStream meta group %d s after its start (%s): "
			    "restarting it (nats-server 2.10 now and then starts a node whose raft "
			    "messages are dropped; docs/cluster.md)", nodes[i], META_HEAR_MS / 1000, why);
			if (node_restart(ws, bin, host, nodes[i], ports[i]) != 0)
				return 1;
		}
		round_begun = mono_ms();
	}
}

/* "--node N": 0 (every node) or the node, -1 when not a node number. */
static int
parse_node(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s != '\0' && *end == '\0' && v >= 1 && v <= MESH_NODES_MAX ? (int)v : -1;
}

/* The nodes one command acts on: all, or the one `--node` names. */
static int
pick_nodes(const char *cmd, int only, int *nodes, int *ports, int n)
{
	if (only == 0)
		return n;
	if (nodes[0] == 0 || only > n) {
		log_errx("mesh %s: --node %d: %s", cmd, only, nodes[0] == 0 ?
		    "this dev mesh has one broker, no cluster" : "no such node in this cluster");
		return -1;
	}
	nodes[0] = only;
	ports[0] = ports[only - 1];
	return 1;
}

int
cmd_mesh_start(int argc, char **argv)
{
	const char *root = NULL, *bin = NULL;
	char err[1024], host[64];
	int nodes[MESH_NODES_MAX], ports[MESH_NODES_MAX], n, only = 0, rc = 0;
	struct workspace ws;
	json_t *mesh;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			root = argv[++i];
		else if (strcmp(argv[i], "--nats-server") == 0 && i + 1 < argc)
			bin = argv[++i];
		else if (strcmp(argv[i], "--node") == 0 && i + 1 < argc &&
		    (only = parse_node(argv[i + 1])) > 0)
			i++;
		else {
			log_errx("mesh start: unknown or incomplete argument \"%s\"", argv[i]);
			return CLI_USAGE;
		}
	}
	if (ws_locate(root, &ws, err, sizeof(err)) != 0 ||
	    (mesh = ws_dev_mesh(&ws, err, sizeof(err))) == NULL) {
		log_errx("mesh start: %s", err);
		return 1;
	}
	const char *listen = json_string_value(json_object_get(mesh, "listen"));
	snprintf(host, sizeof(host), "%s", listen ? listen : "127.0.0.1");
	n = mesh_nodes(mesh, nodes, ports, err, sizeof(err));
	json_decref(mesh);
	if (n < 0) {
		log_errx("mesh start: %s", err);
		return 1;
	}
	if ((n = pick_nodes("start", only, nodes, ports, n)) < 0)
		return 1;
	if (bin == NULL)
		bin = cli_nats_server_path();
	/* A cluster's JetStream waits for a quorum of routes: every node is
	 * started before any is waited for long. */
	int started_all = 0;
	for (int i = 0; i < n; i++) {
		bool started;
		rc |= node_start(&ws, bin, host, nodes[i], ports[i], &started);
		started_all += started;
	}
	/* Every node of a cluster started here: each must hear the leader. */
	if (rc == 0 && nodes[0] != 0 && only == 0 && started_all == n)
		rc = cluster_meta_wait(&ws, bin, host, nodes, ports, n);
	return rc;
}

int
cmd_mesh_stop(int argc, char **argv)
{
	const char *root = NULL;
	char err[1024];
	int nodes[MESH_NODES_MAX], ports[MESH_NODES_MAX], n, only = 0;
	struct workspace ws;
	json_t *mesh;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			root = argv[++i];
		else if (strcmp(argv[i], "--node") == 0 && i + 1 < argc &&
		    (only = parse_node(argv[i + 1])) > 0)
			i++;
		else {
			log_errx("mesh stop: unknown or incomplete argument \"%s\"", argv[i]);
			return CLI_USAGE;
		}
	}
	if (ws_locate(root, &ws, err, sizeof(err)) != 0 ||
	    (mesh = ws_dev_mesh(&ws, err, sizeof(err))) == NULL) {
		log_errx("mesh stop: %s", err);
		return 1;
	}
	n = mesh_nodes(mesh, nodes, ports, err, sizeof(err));
	json_decref(mesh);
	if (n < 0) {
		log_errx("mesh stop: %s", err);
		return 1;
	}
	if ((n = pick_nodes("stop", only, nodes, ports, n)) < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		pid_t pid = mesh_pid(&ws, nodes[i]);
		if (pid <= 0) {
			if (nodes[i] == 0)
				log_info("broker not running in %s", ws.root);
			else
				log_info("node %d not running in %s", nodes[i], ws.root);
			continue;
		}
		pid_stop(pid);
	}
	return 0;
}
