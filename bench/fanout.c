/*
 * bench/fanout: the durable data path's throughput and latency, as a ratio
 * against the raw broker measured in the same run (issue 4, "Benchmark").
 *
 * For each member count M it posts to a durable channel with M members and
 * measures, end to end through the real daemon:
 *   - copies/s from CHAT to DLV (every copy costs an INBOX and a DLV store),
 *   - post-to-DLV latency (p50, p99) of a stream of posts paced at 10 % and
 *     50 % of the copies/s just measured (--latency-at),
 *   - the daemon's and the broker's CPU per copy (/proc/<pid>/stat of the
 *     supervisor, its workers and nats-server),
 * and the raw ceiling: one C client publishing the same number of copies
 * asynchronously, with message ids, to a stream set up like INBOX_<s>.
 *
 * Members are lifecycles written straight into the ACL and members buckets
 * (as the manager and the registry would); frames land in DLV_<s> whether
 * or not a dlv_ consumer exists, so none is made for them.
 *
 *   bench_fanout [--copies N] [--members 1,10,100,1000] [--other-rows R]
 *                [--latency-posts K] [--latency-at F,F] [--sync always|default]
 *                [--cluster] [--rows-rss N] [--metrics-compare ROUNDS]
 *                [--before DAEMON]
 *
 * --rows-rss N: after the rounds, every worker's RSS before and after N
 * lifecycles' read-ACL and membership rows are added (memory per row).
 *
 * --cluster: on a 3-node cluster on loopback (h_cluster_up), every stream
 * with 3 replicas, the raw stream too; the broker's CPU is the three nodes'.
 *
 * --sync: the broker store's sync_interval in the config `cotal mesh init`
 * writes (always, its default: every write on disk before its ack; or the
 * broker's own background flush), so the cost of durability is measured.
 *
 * --before DAEMON: every M measured twice in the run, on this build and on
 * DAEMON (an earlier build's cotal-deliveryd), the order alternating.
 *
 * The mesh, the rounds and the raw broker's figures are bench/datapath.c's.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/datapath.h"

#define MAX_ROUNDS 8

/* A worker's resident memory in kB (VmRSS). */
static long
rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * Issue 18: memory per row. n lifecycles, each with a read-ACL row and a
 * membership row (on n / 100 channels of 100 members), published to the
 * buckets asynchronously; a post on one of the channels then makes the
 * fan-out and the reader read their mirrors to the end (the barrier), and
 * every worker's RSS is read before and after. Bytes per lifecycle (one
 * ACL row and one membership row).
 */
static void
rows_rss(int n)
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
	char subj[512], body[1024], actor[40], uid[27], channel[64];
	long before[4], after[4];
	jsPubOptions po;

	for (int k = 0; k < 4; k++)
		before[k] = rss_kb(h_daemon_worker_pid(&dmn, roles[k]));
	uint64_t join = 0;
	if (h_chat_last_seq(&prov, &mesh, &join) != 0)
		die("chat info", NULL);
	for (int i = 0; i < n; i++) {
		random_token(actor, 21, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
		random_token(uid, 27, "abcdefghijklmnopqrstuvwxyz0123456789");
		snprintf(channel, sizeof(channel), "rows-%d", i / 100);
		snprintf(subj, sizeof(subj), "$KV.cotal_acl_%s.local.%s.%s", mesh.token, actor, uid);
		int len = snprintf(body, sizeof(body), "{\"allowSubscribe\":[\"%s\"],\"revision\":1,"
		    "\"updatedAt\":%" PRId64 "}", channel, now_ns() / 1000000);
		if (js_PublishAsync(prov.js, subj, body, len, NULL) != NATS_OK)
			die("acl row", subj);
		snprintf(subj, sizeof(subj), "$KV.cotal_members_%s.%s/local.%s.%s", mesh.token, channel,
		    actor, uid);
		len = snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"owner\":\"local.%s\","
		    "\"lifecycleUid\":\"%s\",\"state\":\"durable-active\",\"joinCursor\":%" PRIu64
		    ",\"generation\":1,\"activated\":true,\"writerIdentity\":\"bench\","
		    "\"updatedAt\":%" PRId64 "}", channel, actor, uid, join, now_ns() / 1000000);
		if (js_PublishAsync(prov.js, subj, body, len, NULL) != NATS_OK)
			die("member row", subj);
	}
	jsPubOptions_Init(&po);
	po.MaxWait = 120000;
	if (js_PublishAsyncComplete(prov.js, &po) != NATS_OK)
		die("rows", "PubAcks missing");
	char dlv[256];
	snprintf(dlv, sizeof(dlv), "DLV_%s", mesh.token);
	uint64_t base = stream_last_seq(dlv);
	post_burst("rows-0", 1, 0);
	wait_copies(base + 100, now_ns(), "rows-0");
	sleep(2);
	for (int k = 0; k < 4; k++)
		after[k] = rss_kb(h_daemon_worker_pid(&dmn, roles[k]));
	printf("\nmemory per row: %d lifecycles, each a read-ACL row and a membership row\n\n", n);
	printf("| worker | RSS before | RSS after | bytes per lifecycle (ACL row + membership row) |\n");
	printf("|---|---:|---:|---:|\n");
	for (int k = 0; k < 4; k++)
		printf("| %s | %.1f MB | %.1f MB | %.0f |\n", roles[k], before[k] / 1024.0,
		    after[k] / 1024.0, (double)(after[k] - before[k]) * 1024 / n);
}

/* Rows on channels nobody posts to: routing must not pay for them. */
static void
add_other_rows(int n)
{
	for (int done = 0; done < n; done += 100) {
		char ch[64];
		snprintf(ch, sizeof(ch), "other-%d", done / 100);
		free(add_members(ch, n - done < 100 ? n - done : 100, 0));
	}
}

/* ---- --metrics-compare (issue 29): the daemon's CPU per copy with
 * --metrics on, scraped every second, beside off, in one run ---- */

#define IDLE_S 20 /* the idle measure of each round */
static int metrics_port;
static _Atomic bool scraping;

static void *
scraper(void *arg)
{
	static char body[H_HTTP_BODY_MAX];

	(void)arg;
	while (atomic_load(&scraping)) {
		h_http_get(metrics_port, "/metrics", NULL, body, sizeof(body), NULL, 0);
		sleep(1);
	}
	return NULL;
}

/* The metrics server's pid, from the daemon's last line naming it. */
static pid_t
metrics_server_pid(void)
{
	char line[1024];
	long pid = 0;
	FILE *f = fopen(dmn.log, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *at = strstr(line, "metrics server (pid ");
		if (at != NULL)
			pid = atol(at + strlen("metrics server (pid "));
	}
	fclose(f);
	return (pid_t)pid;
}

/* Rounds of M=100, off and on in the order off, on, on, off, off, on, …
 * (a drift of the machine or the stores over the run falls on both alike);
 * the metrics server's own CPU is counted with the daemon's. */
static void
metrics_compare(int copies, int rounds, int lat_posts)
{
	double on_us = 0, off_us = 0, on_srv = 0, on_cs = 0, off_cs = 0;
	pthread_t th;

	metrics_port = h_free_port();
	printf("| round | --metrics | idle: daemon CPU ms/s | copies/s | daemon CPU µs/copy | "
	    "of it, the metrics server |\n|---:|---|---:|---:|---:|---:|\n");
	for (int i = 0; i < 2 * rounds; i++) {
		bool on = i % 4 == 1 || i % 4 == 2;
		struct result r;
		char addr[32];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", metrics_port);
		daemon_restart(NULL, on ? addr : NULL);
		pid_t srv = on ? metrics_server_pid() : 0;
		uint64_t s0 = srv > 0 ? h_proc_ticks(srv) : 0;
		if (on) {
			atomic_store(&scraping, true);
			if (pthread_create(&th, NULL, scraper, NULL) != 0)
				die("scraper", "cannot start its thread");
		}
		/* Idle first: what the daemon (and the metrics server) cost a
		 * second with no post at all, the fixed price of --metrics. */
		sleep(3);
		uint64_t unused[2], i0 = daemon_ticks(unused) + (srv > 0 ? h_proc_ticks(srv) : 0);
		sleep(IDLE_S);
		uint64_t i1 = daemon_ticks(unused) + (srv > 0 ? h_proc_ticks(srv) : 0);
		double idle_ms = (double)(i1 - i0) / (double)sysconf(_SC_CLK_TCK) * 1000 / IDLE_S;
		fprintf(stderr, "• M=100, --metrics %s ...\n", on ? "on, scraped every second" : "off");
		run_round(100, copies, 0, lat_posts, &r);
		double srv_us = 0;
		if (on) {
			uint64_t s1 = srv > 0 ? h_proc_ticks(srv) : 0;
			srv_us = (double)(s1 - s0) / (double)sysconf(_SC_CLK_TCK) * 1e6 /
			    ((double)r.posts * r.members);
			atomic_store(&scraping, false);
			pthread_join(th, NULL);
		}
		double total = r.daemon_us + srv_us;
		printf("| %d | %s | %.1f | %.0f | %.2f | %.2f |\n", i + 1, on ? "on" : "off", idle_ms,
		    r.copies_s, total, srv_us);
		fflush(stdout);
		*(on ? &on_us : &off_us) += total / rounds;
		*(on ? &on_cs : &off_cs) += r.copies_s / rounds;
		on_srv += on ? srv_us / rounds : 0;
	}
	printf("\nmean of %d rounds each: off %.2f µs/copy (%.0f copies/s), on %.2f µs/copy "
	    "(%.0f copies/s; the metrics server %.3f); on ÷ off %.3f\n", rounds, off_us, off_cs,
	    on_us, on_cs, on_srv, on_us / off_us);
}

int
main(int argc, char **argv)
{
	int members[MAX_ROUNDS] = { 1, 10, 100, 1000 }, nm = 4, copies = 100000;
	int other_rows = 10000, lat_posts = 200, rss_rows = 0, compare_rounds = 0;
	const char *sync = "always", *before = NULL;
	struct result res[2 * MAX_ROUNDS + 1];
	int nres = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--copies") == 0 && i + 1 < argc)
			copies = atoi(argv[++i]);
		else if (strcmp(argv[i], "--other-rows") == 0 && i + 1 < argc)
			other_rows = atoi(argv[++i]);
		else if (strcmp(argv[i], "--latency-posts") == 0 && i + 1 < argc)
			lat_posts = atoi(argv[++i]);
		else if (strcmp(argv[i], "--sync") == 0 && i + 1 < argc &&
		    (strcmp(argv[i + 1], "always") == 0 || strcmp(argv[i + 1], "default") == 0))
			sync = argv[++i];
		else if (strcmp(argv[i], "--cluster") == 0)
			on_cluster = true;
		else if (strcmp(argv[i], "--metrics-compare") == 0 && i + 1 < argc)
			compare_rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--rows-rss") == 0 && i + 1 < argc)
			rss_rows = atoi(argv[++i]);
		else if (strcmp(argv[i], "--before") == 0 && i + 1 < argc)
			before = argv[++i];
		else if (strcmp(argv[i], "--latency-at") == 0 && i + 1 < argc) {
			nlat = 0;
			for (char *t = strtok(argv[++i], ","); t && nlat < LAT_MAX; t = strtok(NULL, ","))
				if ((lat_at[nlat] = atof(t)) > 0 && lat_at[nlat] <= 1)
					nlat++;
		}
		else if (strcmp(argv[i], "--members") == 0 && i + 1 < argc) {
			nm = 0;
			for (char *t = strtok(argv[++i], ","); t && nm < MAX_ROUNDS; t = strtok(NULL, ","))
				members[nm++] = atoi(t);
		} else {
			fprintf(stderr, "usage: bench_fanout [--copies N] [--members 1,10,100,1000] "
			    "[--other-rows R] [--latency-posts K] [--latency-at 0.1,0.5] [--sync always|default] "
			    "[--cluster] [--rows-rss N] [--metrics-compare ROUNDS] [--before DAEMON]\n");
			return 2;
		}
	}
	if (before != NULL && access(before, X_OK) != 0)
		die("--before", "not an executable cotal-deliveryd");
	bench_up(sync);

	if (compare_rounds > 0) {
		metrics_compare(copies, compare_rounds, lat_posts);
		nm = 0;
		other_rows = 0;
	}
	/* With --before: each M measured on both builds in one run, the order
	 * alternating from one M to the next (after, before; before, after),
	 * so a drift of the machine falls on both alike. */
	for (int i = 0; i < nm; i++)
		for (int k = 0; k < (before != NULL ? 2 : 1); k++) {
			bool after = before == NULL || (i + k) % 2 == 0;
			if (before != NULL)
				daemon_restart(after ? NULL : before, NULL);
			fprintf(stderr, "• M=%d%s ...\n", members[i], before == NULL ? "" : after ?
			    " (this build)" : " (--before)");
			run_round(members[i], copies, 0, lat_posts, &res[nres]);
			res[nres++].code = after ? "after" : "before";
		}
	if (other_rows > 0) {
		if (before != NULL)
			daemon_restart(NULL, NULL);
		fprintf(stderr, "• M=100 with %d rows on other channels ...\n", other_rows);
		add_other_rows(other_rows);
		run_round(100, copies, other_rows, lat_posts, &res[nres]);
		res[nres++].code = "after";
	}

	if (compare_rounds > 0)
		goto done;
	if (on_cluster)
		printf("broker: a 3-node cluster on loopback, every stream with 3 replicas "
		    "(the raw stream too)\n");
	if (before != NULL)
		printf("before: %s\n", before);
	printf("broker store sync: %s\n\n", strcmp(sync, "always") == 0 ?
	    "sync_interval: always (every write on disk before its ack)" :
	    "the broker's default (background flush every 2 min)");
	printf("|%s members | other rows | posts | copies/s | raw broker msgs/s | ratio |",
	    before != NULL ? " code |" : "");
	for (int k = 0; k < nlat; k++)
		printf(" p50/p99 ms at %.0f %% |", lat_at[k] * 100);
	printf(" daemon CPU µs/copy (fan-out, reader) | broker CPU µs/copy | broker CPU µs/raw msg "
	    "| broker ÷ raw | broker CPU µs/raw delivery+ack | broker ÷ floor "
	    "| posts per fan-out batch | entries per reader batch | JS API requests per 1000 copies |\n"
	    "|%s---:|---:|---:|---:|---:|---:|", before != NULL ? "---|" : "");
	for (int k = 0; k < nlat; k++)
		printf("---:|");
	printf("---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nres; i++) {
		struct result *r = &res[i];
		if (before != NULL)
			printf("| %s ", r->code);
		printf("| %d | %d | %d | %.0f | %.0f | %.2f |", r->members, r->other_rows, r->posts,
		    r->copies_s, r->raw_s, r->copies_s / r->raw_s);
		for (int k = 0; k < nlat; k++)
			printf(" %.1f / %.1f |", r->p50[k], r->p99[k]);
		/* The floor: a copy is two stored publishes and one delivery
		 * with its ack, what a client doing only that costs the broker. */
		double floor = 2 * r->raw_broker_us + r->raw_consume_us;
		printf(" %.1f (%.1f, %.1f) | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f |\n",
		    r->daemon_us, r->fanout_us, r->reader_us, r->broker_us, r->raw_broker_us,
		    r->broker_us / r->raw_broker_us, r->raw_consume_us, r->broker_us / floor,
		    r->posts_per_batch, r->entries_per_batch, r->api_per_kcopy);
	}
done:
	if (rss_rows > 0)
		rows_rss(rss_rows);
	bench_down();
	return 0;
}
