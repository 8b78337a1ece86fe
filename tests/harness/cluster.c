/*
 * A dev mesh on a cluster of 3 to 5 nodes on loopback, every node started
 * and in the JetStream meta group before the space is placed: a node that
 * nats-server 2.10 started mute (its raft messages dropped) is found from
 * the nodes' stores and restarted. And one node started, stopped, killed;
 * a stream's replicas current again, a mute one restarted.
 */
#include "tests/harness/harness_int.h"

#include <glob.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>


#include "cli/mesh_meta.h"
#include "lib/clock.h"

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
	return h_conf_value(m->nodes[i].conf, key, out, outlen);
}

/*
 * Which nodes the JetStream meta group lacks (cli/mesh_meta.c reads the
 * nodes' peer state files), the nodes named and placed by their configs.
 * Into out[] (true: left out) and why; the number left out, 0 once every
 * node records all n, -1 while no verdict.
 */
static int
meta_left_out(struct mesh *m, int n, bool *out, char *why, size_t whylen)
{
	char names[H_NODES_MAX][128], stores[H_NODES_MAX][H_PATH_MAX];
	struct mesh_meta_node nodes[H_NODES_MAX];

	for (int i = 0; i < n; i++) {
		if (!node_conf_value(m, i, "server_name", names[i], sizeof(names[i])))
			names[i][0] = '\0';
		if (!node_conf_value(m, i, "store_dir", stores[i], sizeof(stores[i])))
			snprintf(stores[i], sizeof(stores[i]), "/nonexistent");
		nodes[i].server_name = names[i];
		nodes[i].store_dir = stores[i];
	}
	return mesh_meta_left_out(nodes, n, out, why, whylen);
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
 * that came up broken, not a state of the cluster under test. What its log
 * said is printed, for the record.
 */
static void node_evidence(struct mesh *m, int i, pid_t pid);

static int
cluster_meta_joined(struct mesh *m, int n)
{
	char why[2048];
	bool out[H_NODES_MAX];

	for (int round = 0;; round++) {
		int left = -1;
		for (int64_t until = mono_ms() + META_JOIN_MS; mono_ms() < until;) {
			if ((left = meta_left_out(m, n, out, why, sizeof(why))) == 0)
				return 0;
			hi_sleep_ms(250);
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
			    "after start (%s): its raft messages never reach the leader (see "
			    "h_stream_current for why nats-server 2.10 does this); restarting it. "
			    "Its log since that start:\n", i + 1, META_JOIN_MS, why);
			fflush(stderr);
			node_evidence(m, i, m->nodes[i].pid);
			fflush(stdout);
			h_node_kill(m, i);
			if (h_node_start(m, i) != 0)
				return -1;
		}
	}
}

static int cluster_up(struct mesh *m, struct h_net *net, const char *space, int n,
		      int replicas);

int
h_cluster_up(struct mesh *m, const char *space, int n, int replicas)
{
	return cluster_up(m, NULL, space, n, replicas);
}

int
h_cluster_net_up(struct mesh *m, struct h_net *net, const char *space, int n, int replicas)
{
	return cluster_up(m, net, space, n, replicas);
}

static int
cluster_up(struct mesh *m, struct h_net *net, const char *space, int n, int replicas)
{
	char out[H_OUT_MAX], plist[H_NODES_MAX * 8], rlist[H_NODES_MAX * 8], reps[16];
	int ports[2 * H_NODES_MAX];

	if (n < 3 || n > H_NODES_MAX || hi_mesh_dir_make(m, space) != 0)
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
		    "--sync-interval", hi_sync_interval(), NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal mesh init --cluster failed:\n%s", out);
			return -1;
		}
		if (net != NULL && hi_net_place(m, net) != 0)
			return -1;
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
		int64_t until = mono_ms() + CLUSTER_READY_MS;
		while (h_cotal(m, out, sizeof(out), "space", "provision", space, "--replicas", reps,
		    NULL) != 0) {
			if (mono_ms() > until) {
				char why[2048];
				bool left[H_NODES_MAX];
				meta_left_out(m, n, left, why, sizeof(why));
				fprintf(stderr, "✗ harness: cotal space provision --replicas %s failed "
				    "for %d ms (JetStream meta group: %s):\n%s", reps, CLUSTER_READY_MS,
				    why, out);
				return -1;
			}
			hi_sleep_ms(500);
		}
	}
	return hi_mesh_foreign_grants(m);
}

/*
 * A raft snapshot a killed node left unfinished (snap.<term>.<index>.tmp in
 * a group's snapshots/ directory, often empty): nats-server 2.14.0 takes it
 * for the group's snapshot at the next start and refuses to start at all
 * ("Snapshot corrupt, too short", then "Can't start JetStream: raft:
 * snapshot corrupt"), for every start after. 2.14.1 ignores such files
 * (nats-server 8ece76c81, "NRG: ignore temporary snapshot files on
 * recovery"); the npm registry has 2.14.0 only, so the harness does what
 * the fixed broker does before it starts a node: the file is removed, and
 * the removal said with its path and size. CI's chaos_short_cluster met it
 * when a node-kill landed in the meta group's snapshot write: node 2 never
 * started again.
 */
static void
unfinished_snapshots_drop(struct mesh *m, int i)
{
	char store[H_PATH_MAX], pat[H_PATH_MAX + 64];
	glob_t g;

	if (!node_conf_value(m, i, "store_dir", store, sizeof(store)))
		return;
	snprintf(pat, sizeof(pat), "%s/jetstream/*/_js_/*/snapshots/snap.*.tmp", store);
	if (glob(pat, 0, NULL, &g) != 0)
		return;
	for (size_t k = 0; k < g.gl_pathc; k++) {
		struct stat st;
		long long size = stat(g.gl_pathv[k], &st) == 0 ? (long long)st.st_size : -1;
		if (unlink(g.gl_pathv[k]) == 0)
			fprintf(stderr, "! harness: node %d: removed the unfinished raft snapshot %s "
			    "(%lld bytes) its kill left; nats-server 2.14.0 would refuse to start on "
			    "it (fixed in 2.14.1, which ignores such files)\n", i + 1, g.gl_pathv[k],
			    size);
	}
	globfree(&g);
}

int
h_node_start(struct mesh *m, int i)
{
	char logname[32];
	int rc;

	if (i < 0 || i >= m->nnodes)
		return -1;
	unfinished_snapshots_drop(m, i);
	snprintf(logname, sizeof(logname), "broker-%d.log", i + 1);
	if (m->nodes[i].netns[0] != '\0')
		rc = hi_broker_spawn_at(m, m->nodes[i].conf, m->nodes[i].netns, m->nodes[i].addr,
		    m->nodes[i].port, logname, &m->nodes[i].pid);
	else
		rc = hi_broker_spawn(m, m->nodes[i].conf, m->nodes[i].port, logname,
		    &m->nodes[i].pid);
	if (rc == 0)
		m->nodes[i].started_ms = mono_ms();
	return rc;
}

int
h_node_kill(struct mesh *m, int i)
{
	return i >= 0 && i < m->nnodes ? hi_pid_signal(&m->nodes[i].pid, SIGKILL) : -1;
}

int
h_node_stop(struct mesh *m, int i)
{
	return i >= 0 && i < m->nnodes ? hi_pid_signal(&m->nodes[i].pid, SIGTERM) : -1;
}

/*
 * Every replica current (it holds what the leader applied) and heard by its
 * leader since its broker last started: "current" alone says nothing of
 * the second (raft.go Peers(): ps.li >= n.applied), so a node restarted
 * into a stream with nothing new reads current while its leader cannot
 * hear it.
 *
 * A replica its stream leader has not heard from since its broker started,
 * MUTE_MS ago, though the broker runs: a follower answers every append
 * entry, heartbeats included (one a second when idle), and the leader
 * counts any answer as hearing from it (raft.go trackPeer; the replica's
 * "active"), so a healthy node restarted is heard within a second or two
 * of its routes coming up. One that is not is a broker that came up unable
 * to reach the leader, which nats-server 2.10 does now and then: its raft
 * send queue may start without an account (setSystemAccount starts it
 * before it stores the system account; fixed in 2.11.0) and drop all it
 * sends. CI also saw a restarted node unheard twice in a row, which that
 * rare race does not explain; its cause is not known (a candidate: the
 * restart's simultaneous route dials end in duplicate route resolution,
 * the "Duplicate Route" closes in its log). Both last for the life of the
 * process and the next start is a new draw. So such a node is
 * restarted, each time judged from its own start, at most MUTE_RESTARTS
 * times, and what its log said about its routes and raft is printed.
 */
#define MUTE_MS 10000
#define MUTE_RESTARTS 4
#define EVIDENCE_LINES 12

/* The warnings, errors and route closes node i's broker logged since it
 * last started (its pid's lines), at most EVIDENCE_LINES of them. */
static void
node_evidence(struct mesh *m, int i, pid_t pid)
{
	char path[H_PATH_MAX + 32], line[1024], tag[32];
	int shown = 0, skipped = 0;

	snprintf(path, sizeof(path), "%s/broker-%d.log", m->dir, i + 1);
	snprintf(tag, sizeof(tag), "[%d] ", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, tag, strlen(tag)) != 0 ||
		    strstr(line, "Error trying to connect to route") != NULL ||
		    (strstr(line, "[ERR]") == NULL && strstr(line, "[WRN]") == NULL &&
		    strstr(line, "connection closed") == NULL))
			continue;
		if (shown == EVIDENCE_LINES) {
			skipped++;
			continue;
		}
		printf("    node %d: %s", i + 1, line);
		if (strchr(line, '\n') == NULL)
			putchar('\n');
		shown++;
	}
	fclose(f);
	if (skipped > 0)
		printf("    node %d: (%d more such lines in %s)\n", i + 1, skipped, path);
}

/* The index of node cotal_dev_<k> of m, or -1. */
static int
node_of(const struct mesh *m, const char *name)
{
	int k = 0;

	return name != NULL && sscanf(name, "cotal_dev_%d", &k) == 1 && k >= 1 && k <= m->nnodes ?
	    k - 1 : -1;
}

int
h_stream_current(struct conn *c, struct mesh *m, const char *stream, int ms, char *err,
		 size_t errlen)
{
	char last[1024] = "no stream info yet";
	int restarts[H_NODES_MAX] = { 0 };

	for (int64_t until = mono_ms() + ms; mono_ms() < until;) {
		jsStreamInfo *si = NULL;
		jsErrCode jerr = 0;
		bool ok = false;
		natsStatus s = js_GetStreamInfo(&si, c->js, stream, NULL, &jerr);
		if (s != NATS_OK) {
			snprintf(last, sizeof(last), "stream info: %s (%d)", natsStatus_GetText(s),
			    (int)jerr);
		} else if (si->Cluster == NULL || si->Cluster->Leader == NULL) {
			snprintf(last, sizeof(last), "no leader");
		} else {
			jsClusterInfo *ci = si->Cluster;
			size_t w = (size_t)snprintf(last, sizeof(last), "leader %s, %d replicas:",
			    ci->Leader, ci->ReplicasLen);
			ok = ci->ReplicasLen == m->nnodes - 1;
			for (int k = 0; k < ci->ReplicasLen; k++) {
				jsPeerInfo *r = ci->Replicas[k];
				int node = node_of(m, r->Name);
				int64_t up = node >= 0 ? mono_ms() - m->nodes[node].started_ms : 0;
				bool unheard = node >= 0 && m->nodes[node].pid > 0 &&
				    (r->Active <= 0 || r->Active / 1000000 > up);
				ok = ok && r->Current && !r->Offline && !unheard;
				w += (size_t)snprintf(last + w, w < sizeof(last) ? sizeof(last) - w : 0,
				    " %s current %s offline %s active %lld ms lag %" PRIu64 "%s;",
				    r->Name ? r->Name : "?", r->Current ? "yes" : "no",
				    r->Offline ? "yes" : "no", (long long)(r->Active / 1000000),
				    r->Lag, unheard ? " (not heard since its broker started)" : "");
				if (!unheard || r->Offline || up < MUTE_MS ||
				    restarts[node] == MUTE_RESTARTS)
					continue;
				pid_t was = m->nodes[node].pid;
				restarts[node]++;
				printf("• %s: leader %s has not heard from %s since its broker (pid %d) "
				    "started %lld ms ago: it came up unable to reach the leader; "
				    "restarting node %d (restart %d of at most %d). Its log since "
				    "that start:\n", stream, ci->Leader, r->Name, (int)was,
				    (long long)up, node + 1, restarts[node], MUTE_RESTARTS);
				node_evidence(m, node, was);
				h_node_kill(m, node);
				if (h_node_start(m, node) != 0) {
					jsStreamInfo_Destroy(si);
					snprintf(err, errlen, "%s: node %d did not start again", stream,
					    node + 1);
					return -1;
				}
			}
		}
		jsStreamInfo_Destroy(si);
		if (ok)
			return 0;
		hi_sleep_ms(250);
	}
	snprintf(err, errlen, "%s: its replicas did not catch up within %d s (%s)", stream,
	    ms / 1000, last);
	return -1;
}

/*
 * The latest meta-leader line of one node's log: its timestamp (the
 * "YYYY/MM/DD hh:mm:ss.uuuuuu" after the pid, sortable as text) into ts,
 * and the node it names (itself for "Self is new ...") into *leader.
 */
static void
meta_line_last(struct mesh *m, int i, char *ts, size_t tslen, int *leader)
{
	char path[H_PATH_MAX + 32], line[1024];
	FILE *f;

	ts[0] = '\0';
	*leader = -1;
	snprintf(path, sizeof(path), "%s/broker-%d.log", m->dir, i + 1);
	if ((f = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *self = strstr(line, "Self is new JetStream cluster metadata leader");
		const char *other = strstr(line, "JetStream cluster new metadata leader: cotal_dev_");
		const char *t = strchr(line, ']');
		int who = -1;
		if ((self == NULL && other == NULL) || t == NULL || strlen(t) < 28)
			continue;
		if (self != NULL)
			who = i;
		else if (sscanf(other + strlen("JetStream cluster new metadata leader: cotal_dev_"),
		    "%d", &who) == 1)
			who -= 1;
		snprintf(ts, tslen, "%.26s", t + 2);
		*leader = who;
	}
	fclose(f);
}

int
h_meta_leader(struct mesh *m)
{
	char best[32] = "", ts[32];
	int leader = -1, who;

	for (int i = 0; i < m->nnodes; i++) {
		meta_line_last(m, i, ts, sizeof(ts), &who);
		if (ts[0] != '\0' && strcmp(ts, best) > 0) {
			snprintf(best, sizeof(best), "%s", ts);
			leader = who;
		}
	}
	return leader;
}
