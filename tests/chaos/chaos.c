/*
 * cotal-chaos: a run of the daemon under random faults (issue 32). See
 * chaos.h for the parts; docs/RELIABILITY.md for what the faults cost and
 * the runs reported.
 *
 *   cotal-chaos [--cluster] [--seconds N] [--seed S] [--members M]
 *               [--rate R] [--drain S] [--out FILE] [--broker-29|--broker-214]
 *
 * --cluster: three nodes, every stream with three replicas, each node and
 * the daemon in a network namespace of their own (root: nft, ip). Without
 * it, one broker on loopback. --seed replays a run's schedule of faults
 * (printed at the start). Exit 0 when nothing was lost and nothing
 * unauthorized surfaced, 1 otherwise, 2 when the run could not be set up.
 */
#include "tests/chaos/chaos.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct chaos C;

int64_t
now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

void
say(const char *fmt, ...)
{
	va_list ap;
	int64_t t = C.t0_ms ? now_ms() - C.t0_ms : 0;

	printf("[%7.1f s] ", (double)t / 1000);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void
usage(void)
{
	fprintf(stderr, "usage: cotal-chaos [--cluster] [--seconds N] [--seed S] [--members M] "
	    "[--rate R] [--drain S] [--out FILE] [--broker-29|--broker-214]\n");
	exit(2);
}

static long
num(const char *flag, const char *v, long lo, long hi)
{
	char *end;
	long n = v ? strtol(v, &end, 10) : 0;

	if (v == NULL || *end != '\0' || n < lo || n > hi) {
		fprintf(stderr, "cotal-chaos: %s wants a number from %ld to %ld\n", flag, lo, hi);
		exit(2);
	}
	return n;
}

static void
args(int argc, char **argv)
{
	C.mode = MODE_SINGLE;
	C.seconds = 180;
	C.members = 10;
	C.rate = 8;
	C.drain_s = 300;
	C.seed = (uint64_t)now_ms() ^ (uint64_t)getpid() << 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--cluster") == 0)
			C.mode = MODE_CLUSTER;
		else if (strcmp(a, "--seconds") == 0)
			C.seconds = (int)num(a, v, 10, 86400), i++;
		else if (strcmp(a, "--seed") == 0) {
			char *end;
			if (v == NULL || (C.seed = strtoull(v, &end, 10), *end != '\0'))
				usage();
			i++;
		} else if (strcmp(a, "--members") == 0)
			C.members = (int)num(a, v, CHURNERS + 1, MEMBERS_MAX), i++;
		else if (strcmp(a, "--rate") == 0)
			C.rate = (int)num(a, v, 1, 50), i++;
		else if (strcmp(a, "--drain") == 0)
			C.drain_s = (int)num(a, v, 30, 3600), i++;
		else if (strcmp(a, "--out") == 0 && v != NULL)
			C.out = v, i++;
		else if (strcmp(a, "--broker-29") != 0 && strcmp(a, "--broker-214") != 0)
			usage();
	}
	if ((int64_t)C.seconds * C.rate >= POSTS_MAX) {
		fprintf(stderr, "cotal-chaos: %d s at %d posts a second is more than %d posts\n",
		    C.seconds, C.rate, POSTS_MAX);
		exit(2);
	}
}

static int
setup(void)
{
	char err[1024];

	if (C.mode == MODE_CLUSTER) {
		if (h_net_up(&C.net, 4) != 0 ||
		    h_cluster_net_up(&C.mesh, &C.net, "chaos", 3, 3) != 0)
			return -1;
		say("cluster: 3 nodes (%s, %s, %s), the daemon on %s, bridge %s", C.net.host[0].addr,
		    C.net.host[1].addr, C.net.host[2].addr, C.net.host[3].addr, C.net.bridge);
		if (!h_net_has_netem())
			say("! this kernel has no tc netem (sch_netem): a slow link is a token "
			    "bucket instead, packet loss is nft's");
	} else if (h_mesh_up(&C.mesh, "chaos", true) != 0)
		return -1;
	say("broker: nats-server %d.%d, sync_interval %s; mesh in %s", h_broker_version() / 100,
	    h_broker_version() % 100, getenv("COTAL_TEST_SYNC_INTERVAL") ?
	    getenv("COTAL_TEST_SYNC_INTERVAL") : "always", C.mesh.dir);
	if (daemon_start() != 0 ||
	    h_daemon_ready(&C.d, 60000, "fan-out bound", "reader bound", NULL) != 0)
		return -1;
	if (load_setup(err, sizeof(err)) != 0) {
		say("✗ the load: %s", err);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	int rc;
	long missing = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	h_use_broker(h_broker_arg(argc, argv));
	args(argc, argv);
	C.t0_ms = now_ms();
	say("cotal-chaos: %s, %d s of faults, %d members (%d churning), %d posts/s, seed %" PRIu64,
	    C.mode == MODE_CLUSTER ? "3-node cluster (R3)" : "one node", C.seconds, C.members,
	    CHURNERS, C.rate, C.seed);
	if (setup() != 0) {
		say("✗ the run could not be set up (daemon log: %s)", C.d.log);
		if (C.mode == MODE_CLUSTER)
			h_net_down(&C.net);
		return h_done(2);
	}
	C.t0_ms = now_ms();
	say("load on: posts to channel %s, members surfacing", C.channel);
	load_start();
	nemesis_run(C.seconds);
	say("faults over: the load stops, every fault healed, the churners joined and allowed");
	load_stop_posting();
	nemesis_heal_all();
	churn_stop();
	for (int64_t until = now_ms() + (int64_t)C.drain_s * 1000; now_ms() < until;) {
		daemon_keep_alive();
		if ((missing = load_missing()) == 0)
			break;
		h_nap(1000);
	}
	say("%s owed frame%s missing %.1f s after the faults", missing ? "" : "no",
	    missing == 1 ? "" : "s", (double)(now_ms() - C.load_end_ms) / 1000);
	if (missing)
		say("  (%ld missing)", missing);
	/* A late second copy would show up within a pull or two. */
	h_nap(3000);
	load_stop();
	rc = check_report();
	say("daemon log: %s", C.d.log);
	h_daemon_stop(&C.d, 5000);
	load_free();
	h_mesh_down(&C.mesh);
	if (C.mode == MODE_CLUSTER)
		h_net_down(&C.net);
	return h_done(rc);
}
