/*
 * The nemesis of a chaos run: one fault at a time, dealt from a deck
 * shuffled by the run's seed (the same seed, the same faults in the same
 * order), with a pause of 1 to 4 s between two (0.5 to 2 s after a
 * worker's kill). Every fault is recorded with when it
 * began and when it was healed, for the checker.
 *
 * Like systemd with the unit's Restart=on-failure, a supervisor that exits
 * (a crash loop, the broker gone past the watchdog) or is killed is started
 * again a second later (RestartSec); a supervisor stopped past the unit's
 * WatchdogSec=30s is either killed and restarted, as the watchdog would, or
 * let go on (a paused machine).
 */
#include "tests/chaos/chaos.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RESTART_SEC_MS 1000 /* the units' RestartSec=1s */
#define WATCHDOG_SEC 30

static uint64_t rng;

static uint64_t
rnd(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return rng >> 33;
}

static int
between(int lo, int hi)
{
	return lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
}

static struct fault *
begin(const char *kind, const char *fmt, ...)
{
	static struct fault spare;
	struct fault *f = C.nf < FAULTS_MAX ? &C.f[C.nf++] : &spare;
	va_list ap;

	memset(f, 0, sizeof(*f));
	snprintf(f->kind, sizeof(f->kind), "%s", kind);
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
	f->start_ms = now_ms();
	say("%-16s %s", kind, f->detail);
	return f;
}

static void
end(struct fault *f)
{
	f->end_ms = now_ms();
}

/* ---- the daemon, as systemd keeps it ---- */

static long log_from; /* the log's size when the running daemon started */

int
daemon_start(void)
{
	struct stat st;

	log_from = C.d.log[0] && stat(C.d.log, &st) == 0 ? (long)st.st_size : 0;
	if (h_daemon_start(&C.mesh, &C.d, NULL) != 0)
		return -1;
	C.daemon_restarts++;
	return 0;
}

/* The last "✗" line the daemon that exited wrote, why it exited. */
static void
last_refusal(char *out, size_t len)
{
	struct stat st;
	long from = log_from;

	/* Its last lines: h_file_text reads at most H_OUT_MAX - 1 bytes. */
	if (stat(C.d.log, &st) == 0 && (long)st.st_size - (H_OUT_MAX - 1) > from)
		from = (long)st.st_size - (H_OUT_MAX - 1);
	char *text = h_file_text(C.d.log, from), *line = NULL, *p;

	snprintf(out, len, "no ✗ line in its log");
	if (text == NULL)
		return;
	for (p = text; (p = strstr(p, "✗ ")) != NULL; p++)
		line = p;
	if (line != NULL)
		snprintf(out, len, "%.*s", (int)strcspn(line, "\n"), line);
	free(text);
}

void
daemon_keep_alive(void)
{
	int st;

	if (C.d.pid > 0) {
		if ((st = h_daemon_wait_exit(&C.d, 0)) < 0)
			return;
		C.daemon_exits++;
		last_refusal(C.last_exit, sizeof(C.last_exit));
		say("%-16s the supervisor exited (%s %d): %s; restarting it as Restart=on-failure "
		    "would", "daemon-exit", WIFEXITED(st) ? "status" : "signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), C.last_exit);
	}
	h_nap(RESTART_SEC_MS);
	if (daemon_start() != 0)
		say("! the daemon did not start; trying again in %d ms", RESTART_SEC_MS);
}

/* Wait ms, keeping the daemon alive meanwhile. */
static void
hold(int ms)
{
	for (int64_t until = now_ms() + ms; now_ms() < until;) {
		daemon_keep_alive();
		int left = (int)(until - now_ms());
		h_nap(left < 200 ? (left > 0 ? left : 0) : 200);
	}
}

static void
supervisor_reap_restart(void)
{
	if (C.d.pid > 0) {
		kill(C.d.pid, SIGKILL);
		h_daemon_wait_exit(&C.d, 10000);
	}
	h_nap(RESTART_SEC_MS);
	daemon_start();
}

/* ---- the faults ---- */

/* The parent of pid, from /proc (0 when gone). */
static pid_t
parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		sscanf(p + 1, " %*c %d", &ppid);
	fclose(f);
	return (pid_t)ppid;
}

static void
worker_kill(void)
{
	json_t *doc = NULL, *w;
	pid_t pids[16];
	const char *roles[16];
	size_t i;
	int n = 0;

	/* A supervisor still starting its workers gets 3 s; else the card
	 * is spent without a kill. */
	for (int64_t until = now_ms() + 3000;; hold(200)) {
		json_decref(doc);
		doc = h_daemon_status(&C.d);
		n = 0;
		json_array_foreach(json_object_get(doc, "workers"), i, w) {
			pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
			n += pid > 0 && C.d.pid > 0 && parent_of(pid) == C.d.pid;
		}
		if (n > 0 || now_ms() > until)
			break;
	}
	n = 0;

	json_array_foreach(json_object_get(doc, "workers"), i, w) {
		pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
		/* Only a worker of the supervisor running now: a status file
		 * left by a killed one names pids that may be anyone's. */
		if (pid > 0 && n < 16 && C.d.pid > 0 && parent_of(pid) == C.d.pid) {
			roles[n] = json_string_value(json_object_get(w, "role"));
			pids[n++] = pid;
		}
	}
	if (n > 0) {
		int k = between(0, n - 1);
		struct fault *f = begin("worker-kill", "%s (pid %d)", roles[k] ? roles[k] : "?",
		    (int)pids[k]);
		kill(pids[k], SIGKILL);
		end(f);
	}
	json_decref(doc);
}

static void
supervisor_kill(void)
{
	if (C.d.pid <= 0)
		return;
	struct fault *f = begin("supervisor-kill", "pid %d, restarted %d ms later", (int)C.d.pid,
	    RESTART_SEC_MS);
	supervisor_reap_restart();
	end(f);
}

static void
supervisor_stop(void)
{
	if (C.d.pid <= 0)
		return;
	int s = between(WATCHDOG_SEC + 1, WATCHDOG_SEC + 10);
	bool resume = rnd() & 1;
	struct fault *f = begin("supervisor-stop", "pid %d SIGSTOPped %d s, then %s", (int)C.d.pid,
	    s, resume ? "SIGCONT (a paused machine)" : "killed and restarted (WatchdogSec=30s)");

	if (C.d.pid > 0)
		kill(C.d.pid, SIGSTOP);
	h_nap(s * 1000);
	if (resume && C.d.pid > 0)
		kill(C.d.pid, SIGCONT);
	else
		supervisor_reap_restart();
	end(f);
}

static void
broker_kill(void)
{
	int s = between(1, 20);
	struct fault *f = begin("broker-kill", "SIGKILL, restarted on its store %d s later", s);

	h_broker_kill(&C.mesh);
	hold(s * 1000);
	while (h_broker_start(&C.mesh) != 0) {
		say("! the broker did not start again; retrying");
		hold(1000);
	}
	end(f);
}

static void
reload(void)
{
	char out[H_OUT_MAX];
	int rc;
	struct fault *f = begin("creds-reload", "cotal creds mint --renew, cotal admin reload");

	rc = h_cotal(&C.mesh, out, sizeof(out), "creds", "mint", "--space", C.mesh.space,
	    "--profile", "delivery", "--renew", NULL);
	if (rc == 0)
		rc = h_cotal(&C.mesh, out, sizeof(out), "admin", "reload", "--space", C.mesh.space,
		    NULL);
	snprintf(f->detail + strlen(f->detail), sizeof(f->detail) - strlen(f->detail), ": %s %.80s",
	    rc == 0 ? "adopted" : "refused", rc == 0 ? "" : out);
	if (rc != 0)
		say("  %s", f->detail);
	end(f);
}

static void
node_kill(void)
{
	int i = between(0, C.mesh.nnodes - 1), s = between(2, 15);
	int leader = h_meta_leader(&C.mesh);
	struct fault *f = begin("node-kill", "node %d%s, restarted %d s later", i + 1,
	    leader == i ? " (meta leader)" : "", s);

	h_node_kill(&C.mesh, i);
	hold(s * 1000);
	while (h_node_start(&C.mesh, i) != 0) {
		say("! node %d did not start again; retrying", i + 1);
		hold(1000);
	}
	end(f);
}

static void
heal_all_hosts(void)
{
	for (int h = 0; h < C.net.nhosts; h++)
		h_net_heal(&C.net, h);
}

static void
partition(const char *kind)
{
	int s = between(5, 20), i = between(0, C.mesh.nnodes - 1);
	int dh = C.mesh.nnodes; /* the daemon's host */
	struct fault *f;

	if (strcmp(kind, "part-nodes") == 0) {
		int j = (i + between(1, C.mesh.nnodes - 1)) % C.mesh.nnodes;
		f = begin(kind, "node %d | node %d for %d s", i + 1, j + 1, s);
		h_net_cut(&C.net, i, C.net.host[j].addr);
		h_net_cut(&C.net, j, C.net.host[i].addr);
	} else if (strcmp(kind, "part-daemon") == 0) {
		f = begin(kind, "daemon | node %d for %d s", i + 1, s);
		h_net_cut(&C.net, i, C.net.host[dh].addr);
		h_net_cut(&C.net, dh, C.net.host[i].addr);
	} else {
		/* Minority/majority: node i alone on one side; the daemon on
		 * the minority's side half the time (it then reaches only a
		 * node without quorum). */
		bool daemon_minority = rnd() & 1;
		f = begin(kind, "node %d | the other nodes, the daemon with the %s, for %d s", i + 1,
		    daemon_minority ? "minority" : "majority", s);
		for (int j = 0; j < C.mesh.nnodes; j++) {
			if (j == i)
				continue;
			h_net_cut(&C.net, i, C.net.host[j].addr);
			h_net_cut(&C.net, j, C.net.host[i].addr);
			if (daemon_minority) {
				h_net_cut(&C.net, j, C.net.host[dh].addr);
				h_net_cut(&C.net, dh, C.net.host[j].addr);
			}
		}
		if (!daemon_minority) {
			h_net_cut(&C.net, i, C.net.host[dh].addr);
			h_net_cut(&C.net, dh, C.net.host[i].addr);
		}
	}
	hold(s * 1000);
	heal_all_hosts();
	end(f);
}

static void
link_fault(bool slow)
{
	int s = between(10, 30), i = between(0, C.mesh.nnodes), pct = between(5, 30);
	int delay = between(50, 400);
	char how[160] = "", who[32];
	struct fault *f;

	if (i == C.mesh.nnodes)
		snprintf(who, sizeof(who), "the daemon");
	else
		snprintf(who, sizeof(who), "node %d", i + 1);
	if (slow) {
		h_net_slow(&C.net, i, delay, how, sizeof(how));
		f = begin("link-slow", "%s: %s for %d s", who, how, s);
	} else {
		h_net_loss(&C.net, i, pct);
		f = begin("link-loss", "%s: %d %% of packets dropped for %d s", who, pct, s);
	}
	hold(s * 1000);
	h_net_heal(&C.net, i);
	end(f);
}

/* ---- the schedule ---- */

/*
 * Faults are dealt from a deck, shuffled by the seed and dealt again when
 * empty: a run of any length meets every kind in these proportions (a
 * 30-minute run deals a deck 6 to 9 times), not only on average.
 */
struct card {
	const char *kind;
	int n; /* in one deck */
};

/* One node: the daemon's processes and the broker (about 275 s a deck). */
static const struct card single_deck[] = {
	{ "worker-kill", 60 }, { "broker-kill", 3 }, { "supervisor-kill", 2 },
	{ "supervisor-stop", 1 }, { "creds-reload", 1 },
};
/* A cluster: nodes, the network between them and to the daemon (about
 * 210 s a deck). */
static const struct card cluster_deck[] = {
	{ "worker-kill", 8 }, { "node-kill", 2 }, { "part-nodes", 2 }, { "part-daemon", 2 },
	{ "part-minority", 2 }, { "link-loss", 1 }, { "link-slow", 1 }, { "supervisor-kill", 1 },
	{ "creds-reload", 1 },
};

#define DECK_MAX 128

static const char *
pick(void)
{
	static const char *deck[DECK_MAX];
	static int left;

	if (left == 0) {
		const struct card *c = C.mode == MODE_CLUSTER ? cluster_deck : single_deck;
		size_t n = C.mode == MODE_CLUSTER ? sizeof(cluster_deck) / sizeof(cluster_deck[0]) :
		    sizeof(single_deck) / sizeof(single_deck[0]);
		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < c[i].n && left < DECK_MAX; k++)
				deck[left++] = c[i].kind;
		for (int i = left - 1; i > 0; i--) {
			int j = between(0, i);
			const char *t = deck[i];
			deck[i] = deck[j];
			deck[j] = t;
		}
	}
	return deck[--left];
}

int
nemesis_run(int seconds)
{
	int64_t until = now_ms() + (int64_t)seconds * 1000;

	rng = C.seed;
	while (now_ms() < until) {
		const char *k = pick();

		if (strcmp(k, "worker-kill") == 0)
			worker_kill();
		else if (strcmp(k, "supervisor-kill") == 0)
			supervisor_kill();
		else if (strcmp(k, "supervisor-stop") == 0)
			supervisor_stop();
		else if (strcmp(k, "broker-kill") == 0)
			broker_kill();
		else if (strcmp(k, "creds-reload") == 0)
			reload();
		else if (strcmp(k, "node-kill") == 0)
			node_kill();
		else if (strncmp(k, "part-", 5) == 0)
			partition(k);
		else if (strcmp(k, "link-loss") == 0)
			link_fault(false);
		else if (strcmp(k, "link-slow") == 0)
			link_fault(true);
		/* A worker's kill is over at once: the next fault sooner. */
		hold(strcmp(k, "worker-kill") == 0 ? between(500, 2000) : between(1000, 4000));
	}
	return 0;
}

void
nemesis_heal_all(void)
{
	if (C.mode == MODE_CLUSTER) {
		heal_all_hosts();
		for (int i = 0; i < C.mesh.nnodes; i++)
			if (C.mesh.nodes[i].pid <= 0)
				h_node_start(&C.mesh, i);
	} else if (C.mesh.broker <= 0)
		h_broker_start(&C.mesh);
	if (C.d.pid > 0)
		kill(C.d.pid, SIGCONT);
	daemon_keep_alive();
	if (C.d.pid <= 0)
		daemon_start();
}
