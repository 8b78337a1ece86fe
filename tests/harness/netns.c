/*
 * A test network (issue 32): hosts that are network namespaces of the
 * test's own making, each joined by a veth pair to one bridge in the test's
 * namespace, where the test's own clients sit. Brokers of a cluster and the
 * daemon each get a host, so the network between them can be cut: nft rules
 * in a host's namespace drop what it exchanges with a peer address, or a
 * share of all its packets; tc shapes its link (netem where the kernel has
 * it, else a token bucket). Nothing leaves the machine: the bridge has no
 * uplink and no route is added.
 *
 * Names carry the test's pid ("cc<pid>..."), so two runs never meet, and a
 * run that died without cleaning up is swept by the next one.
 */
#include "tests/harness/harness_int.h"

#include <dirent.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_net *armed; /* torn down at exit */

/* Run a command line (sh -c), quiet; its output into out when given. Its
 * exit status, or -1. */
static int
sh(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	FILE *f;
	size_t got = 0;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	if (out != NULL && outlen > 0) {
		got = fread(out, 1, outlen - 1, f);
		out[got] = '\0';
	} else {
		char sink[256];
		while (fread(sink, 1, sizeof(sink), f) > 0)
			;
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run cmd, saying on stderr what failed. */
static int
must(const char *what, const char *fmt, ...)
{
	char cmd[1024], out[1024];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if ((rc = sh(out, sizeof(out), "%s 2>&1", cmd)) != 0) {
		fprintf(stderr, "✗ harness: %s: `%s` exited %d: %s", what, cmd, rc, out);
		return -1;
	}
	return 0;
}

/* Namespaces and bridges of runs whose process is gone. */
static void
sweep_dead(void)
{
	DIR *d = opendir("/var/run/netns");
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		long pid = 0;
		if (sscanf(e->d_name, "cc%ldh", &pid) == 1 && pid > 0 && kill((pid_t)pid, 0) != 0)
			sh(NULL, 0, "ip netns del '%s' 2>/dev/null", e->d_name);
	}
	if (d != NULL)
		closedir(d);
	if ((d = opendir("/sys/class/net")) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		long pid = 0;
		char tail = 0;
		if (sscanf(e->d_name, "cc%ld%c", &pid, &tail) == 2 && tail == 'b' && pid > 0 &&
		    kill((pid_t)pid, 0) != 0)
			sh(NULL, 0, "ip link del '%s' 2>/dev/null", e->d_name);
	}
	closedir(d);
}

static void
net_atexit(void)
{
	if (armed != NULL)
		h_net_down(armed);
}

bool
h_net_possible(char *why, size_t whylen)
{
	if (geteuid() != 0) {
		snprintf(why, whylen, "a test network needs root (network namespaces, nft)");
		return false;
	}
	if (sh(NULL, 0, "command -v ip >/dev/null && command -v nft >/dev/null") != 0) {
		snprintf(why, whylen, "a test network needs ip (iproute2) and nft (nftables): "
		    "make deps installs them");
		return false;
	}
	return true;
}

int
h_net_up(struct h_net *n, int hosts)
{
	int pid = (int)getpid();
	char why[256];

	if (!h_net_possible(why, sizeof(why))) {
		fprintf(stderr, "✗ harness: %s\n", why);
		return -1;
	}
	if (hosts < 1 || hosts > H_NET_HOSTS_MAX)
		return -1;
	sweep_dead();
	memset(n, 0, sizeof(*n));
	n->nhosts = hosts;
	snprintf(n->bridge, sizeof(n->bridge), "cc%db", pid);
	/* 10.A.B.0/24, A and B from the pid, and none an interface of this
	 * machine has an address in (another run's bridge): runs side by side
	 * never share one. */
	for (int k = 0;; k++) {
		char out[256] = "";
		int v = pid + k;
		snprintf(n->subnet, sizeof(n->subnet), "10.%d.%d", 100 + (v / 256) % 100, v % 256);
		if (sh(out, sizeof(out), "ip -o addr show to %s.0/24", n->subnet) == 0 &&
		    out[0] == '\0')
			break;
		if (k == 64) {
			fprintf(stderr, "✗ harness: no free 10.x.y.0/24 for a test network\n");
			return -1;
		}
	}
	snprintf(n->gateway, sizeof(n->gateway), "%s.1", n->subnet);
	armed = n;
	static bool registered;
	if (!registered) {
		atexit(net_atexit);
		registered = true;
	}
	/* No spanning tree: a port forwards as soon as it is up. */
	if (must("the test network's bridge", "ip link add %s type bridge stp_state 0 "
	    "forward_delay 0", n->bridge) != 0)
		return -1;
	n->up = true;
	if (must("the bridge's address", "ip addr add %s/24 dev %s", n->gateway, n->bridge) != 0 ||
	    must("the bridge up", "ip link set %s up", n->bridge) != 0)
		return -1;
	for (int i = 0; i < hosts; i++) {
		struct h_host *h = &n->host[i];
		snprintf(h->netns, sizeof(h->netns), "cc%dh%d", pid, i);
		snprintf(h->veth, sizeof(h->veth), "cc%dh%d", pid, i);
		snprintf(h->addr, sizeof(h->addr), "%s.%d", n->subnet, 10 + i);
		if (must("a test host", "ip netns add %s", h->netns) != 0 ||
		    must("its link", "ip link add %s type veth peer name eth0 netns %s", h->veth,
		    h->netns) != 0 ||
		    must("its link on the bridge", "ip link set %s master %s up", h->veth,
		    n->bridge) != 0 ||
		    must("its address", "ip -n %s addr add %s/24 dev eth0", h->netns, h->addr) != 0 ||
		    must("its link up", "ip -n %s link set eth0 up", h->netns) != 0 ||
		    must("its loopback", "ip -n %s link set lo up", h->netns) != 0 ||
		    must("its filter", "ip netns exec %s nft 'add table inet cotal_test; "
		    "add chain inet cotal_test in { type filter hook input priority 0; "
		    "policy accept; }; add chain inet cotal_test out { type filter hook output "
		    "priority 0; policy accept; }'", h->netns) != 0)
			return -1;
	}
	return 0;
}

void
h_net_down(struct h_net *n)
{
	if (!n->up)
		return;
	for (int i = 0; i < n->nhosts; i++)
		if (n->host[i].netns[0] != '\0')
			sh(NULL, 0, "ip netns del %s 2>/dev/null", n->host[i].netns);
	sh(NULL, 0, "ip link del %s 2>/dev/null", n->bridge);
	n->up = false;
	if (armed == n)
		armed = NULL;
}

int
h_net_cut(struct h_net *n, int host, const char *peer)
{
	const char *ns = n->host[host].netns;

	return must("a cut", "ip netns exec %s nft 'add rule inet cotal_test in ip saddr %s drop; "
	    "add rule inet cotal_test out ip daddr %s drop'", ns, peer, peer);
}

int
h_net_loss(struct h_net *n, int host, int percent)
{
	const char *ns = n->host[host].netns;

	return must("a lossy link", "ip netns exec %s nft 'add rule inet cotal_test in iifname "
	    "eth0 numgen random mod 100 < %d drop; add rule inet cotal_test out oifname eth0 "
	    "numgen random mod 100 < %d drop'", ns, percent, percent);
}

bool
h_net_has_netem(void)
{
	static int has = -1;

	if (has < 0) {
		/* Asked on a dummy link of a throw-away namespace. */
		char ns[32];
		snprintf(ns, sizeof(ns), "cc%dhnetem", (int)getpid());
		has = sh(NULL, 0, "ip netns add %s && ip netns exec %s tc qdisc add dev lo root "
		    "netem delay 1ms 2>/dev/null", ns, ns) == 0;
		sh(NULL, 0, "ip netns del %s 2>/dev/null", ns);
	}
	return has == 1;
}

int
h_net_slow(struct h_net *n, int host, int delay_ms, char *how, size_t howlen)
{
	const char *ns = n->host[host].netns;

	if (h_net_has_netem()) {
		snprintf(how, howlen, "netem delay %d ms ± %d ms", delay_ms, delay_ms / 4);
		return must("a slow link", "ip netns exec %s tc qdisc replace dev eth0 root netem "
		    "delay %dms %dms", ns, delay_ms, delay_ms / 4);
	}
	/* No sch_netem in this kernel: a token bucket of 256 kbit/s with a
	 * queue of delay_ms, which delays what fits and drops the rest. */
	snprintf(how, howlen, "token bucket 256 kbit/s, queue %d ms (no netem in this kernel)",
	    delay_ms);
	return must("a slow link", "ip netns exec %s tc qdisc replace dev eth0 root tbf rate "
	    "256kbit burst 16kb latency %dms", ns, delay_ms);
}

int
h_net_heal(struct h_net *n, int host)
{
	const char *ns = n->host[host].netns;

	sh(NULL, 0, "ip netns exec %s tc qdisc del dev eth0 root 2>/dev/null", ns);
	return must("a heal", "ip netns exec %s nft 'flush chain inet cotal_test in; "
	    "flush chain inet cotal_test out'", ns);
}

/* Every "127.0.0.1:<port>" of the file at path that is a node's own port
 * (client or route) made that node's address. */
static int
rewrite_addrs(struct mesh *m, const char *path)
{
	char *text = h_file_text(path, 0), *out;
	size_t cap, w = 0;
	FILE *f;

	if (text == NULL) {
		fprintf(stderr, "✗ harness: cannot read %s\n", path);
		return -1;
	}
	cap = strlen(text) * 2 + 1;
	out = malloc(cap);
	for (const char *p = text; *p != '\0';) {
		int port = 0, len = 0, node = -1;
		if (strncmp(p, "127.0.0.1:", 10) == 0 && sscanf(p + 10, "%d%n", &port, &len) == 1)
			for (int i = 0; i < m->nnodes; i++)
				if (m->nodes[i].port == port || m->nodes[i].route_port == port)
					node = i;
		if (node >= 0) {
			w += (size_t)snprintf(out + w, cap - w, "%s:%d", m->nodes[node].addr, port);
			p += 10 + len;
		} else
			out[w++] = *p++;
	}
	out[w] = '\0';
	free(text);
	if ((f = fopen(path, "w")) == NULL) {
		free(out);
		return -1;
	}
	fputs(out, f);
	free(out);
	return fclose(f) == 0 ? 0 : -1;
}

int
hi_net_place(struct mesh *m, struct h_net *n)
{
	char path[H_PATH_MAX + 64];
	glob_t g;
	int rc = 0;

	if (m->nnodes + 1 > n->nhosts) {
		fprintf(stderr, "✗ harness: %d nodes and the daemon need %d test hosts, not %d\n",
		    m->nnodes, m->nnodes + 1, n->nhosts);
		return -1;
	}
	m->url[0] = '\0';
	for (int i = 0; i < m->nnodes; i++) {
		struct node *nd = &m->nodes[i];
		snprintf(nd->netns, sizeof(nd->netns), "%s", n->host[i].netns);
		snprintf(nd->addr, sizeof(nd->addr), "%s", n->host[i].addr);
		snprintf(nd->url, sizeof(nd->url), "nats://%s:%d", n->host[i].addr, nd->port);
		snprintf(m->url + strlen(m->url), sizeof(m->url) - strlen(m->url), "%s%s",
		    i ? "," : "", nd->url);
		rc |= rewrite_addrs(m, nd->conf);
	}
	snprintf(m->daemon_netns, sizeof(m->daemon_netns), "%s", n->host[m->nnodes].netns);
	snprintf(path, sizeof(path), "%s/.cotal/mesh/dev-mesh.json", m->dir);
	rc |= rewrite_addrs(m, path);
	snprintf(path, sizeof(path), "%s/meshes/*.json", m->home);
	if (glob(path, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			rc |= rewrite_addrs(m, g.gl_pathv[i]);
		globfree(&g);
	}
	return rc;
}
