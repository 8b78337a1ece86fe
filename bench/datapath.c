/*
 * bench/datapath: what the data path's benchmarks share (bench/fanout
 * reports, bench/guard checks): a dev mesh with the real daemon and 16
 * posting agents, members written straight into the buckets, one round of
 * posts copied to M members timed end to end, and the raw broker measured
 * beside it (its ceiling, its CPU per stored publish and per delivery with
 * its ack, the floor a copy cannot cost the broker less than).
 */
#include "bench/datapath.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/nats/natsconn.h"
#include "lib/creds/perms.h"
#include "lib/nats/pull.h"

#define POLL_MS 20
#define STALL_S 60 /* no progress this long: the round failed */

struct mesh mesh;
struct daemon dmn;
struct conn prov;
bool on_cluster;
double lat_at[LAT_MAX] = { 0.1, 0.5 };
int nlat = 2;
/* CHAT keeps 1000 posts per sender and channel (WIRE.md §3): posts come
 * from several senders, and the burst is paced to stay within what the
 * fan-out has fetched, as a real mesh of many agents would be. */
#define POSTERS 16
#define POST_BACKLOG_MAX 3000
static struct agent posters[POSTERS];
static struct conn post_conns[POSTERS];

int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
die(const char *what, const char *err)
{
	fprintf(stderr, "✗ bench: %s: %s\n", what, err ? err : "");
	if (dmn.pid > 0)
		fprintf(stderr, "  daemon log: %s\n", dmn.log);
	exit(1);
}


/* The daemon's tree: the supervisor and each worker in its status file;
 * the fan-out's and the reader's own shares in role[0], role[1]. */
uint64_t
daemon_ticks(uint64_t role[2])
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
	uint64_t t = h_proc_ticks(dmn.pid);

	for (int i = 0; i < 4; i++) {
		pid_t p = h_daemon_worker_pid(&dmn, roles[i]);
		uint64_t c = p > 0 ? h_proc_ticks(p) : 0;
		if (i < 2)
			role[i] = c;
		t += c;
	}
	return t;
}

/* The account's JetStream API requests so far ($JS.API.INFO): the stream
 * and consumer infos the daemon asks (barriers, lead polls) and the rest. */
static uint64_t
api_total(void)
{
	jsAccountInfo *ai = NULL;
	jsErrCode jerr = 0;
	uint64_t n = 0;

	if (js_GetAccountInfo(&ai, prov.js, NULL, &jerr) == NATS_OK) {
		n = ai->API.Total;
		jsAccountInfo_Destroy(ai);
	}
	return n;
}

uint64_t
worker_counter(const char *role, const char *name)
{
	return h_daemon_counter(&dmn, role, name);
}

uint64_t
stream_last_seq(const char *stream)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	uint64_t seq;

	if (js_GetStreamInfo(&si, prov.js, stream, NULL, &jerr) != NATS_OK)
		die("stream info", stream);
	seq = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return seq;
}

void
random_token(char *out, size_t n, const char *alphabet)
{
	size_t k = strlen(alphabet);

	for (size_t i = 0; i + 1 < n; i++)
		out[i] = alphabet[(size_t)rand() % k];
	out[n - 1] = '\0';
}

/* Write n synthetic members of channel: ACL row allowing it, member row
 * joined now. Returns them (malloc'd). */
struct lc *
add_members(const char *channel, int n, uint64_t join)
{
	struct lc *v = calloc((size_t)n, sizeof(*v));
	char err[1024], key[512], body[1024], bucket[256];
	kvStore *acl = NULL, *mem = NULL;
	uint64_t rev;

	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", mesh.token);
	if (js_KeyValue(&acl, prov.js, bucket) != NATS_OK)
		die("bind", bucket);
	snprintf(bucket, sizeof(bucket), "cotal_members_%s", mesh.token);
	if (js_KeyValue(&mem, prov.js, bucket) != NATS_OK)
		die("bind", bucket);
	for (int i = 0; i < n; i++) {
		random_token(v[i].actor, 21, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
		random_token(v[i].uid, 27, "abcdefghijklmnopqrstuvwxyz0123456789");
		snprintf(key, sizeof(key), "local.%s.%s", v[i].actor, v[i].uid);
		snprintf(body, sizeof(body), "{\"allowSubscribe\":[\"%s\"],\"revision\":1,"
		    "\"updatedAt\":%" PRId64 "}", channel, now_ns() / 1000000);
		if (kvStore_PutString(&rev, acl, key, body) != NATS_OK)
			die("put acl row", key);
		snprintf(key, sizeof(key), "%s/local.%s.%s", channel, v[i].actor, v[i].uid);
		snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"owner\":\"local.%s\","
		    "\"lifecycleUid\":\"%s\",\"state\":\"durable-active\",\"joinCursor\":%" PRIu64
		    ",\"generation\":1,\"activated\":true,\"writerIdentity\":\"bench\","
		    "\"updatedAt\":%" PRId64 "}", channel, v[i].actor, v[i].uid, join,
		    now_ns() / 1000000);
		if (kvStore_PutString(&rev, mem, key, body) != NATS_OK)
			die("put member row", key);
	}
	(void)err;
	kvStore_Destroy(acl);
	kvStore_Destroy(mem);
	return v;
}

/* The fan-out's backlog: posts not yet fetched. */
static uint64_t
fanout_backlog(void)
{
	char stream[256];
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	uint64_t n;

	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	if (js_GetConsumerInfo(&ci, prov.js, stream, "fanout", NULL, &jerr) != NATS_OK)
		die("consumer info", "fanout");
	n = ci->NumPending;
	jsConsumerInfo_Destroy(ci);
	return n;
}

/* Publish n posts to channel asynchronously, round robin over the posters;
 * each text carries its publish time. */
void
post_burst(const char *channel, int n, int gap_us)
{
	char subj[512], body[1024], id[64];
	jsPubOptions po;
	int64_t start = now_ns();

	for (int i = 0; i < n; i++) {
		const struct agent *a = &posters[i % POSTERS];
		/* Paced by the clock, not by sleeps that add up. */
		for (int64_t due = start + (int64_t)i * gap_us * 1000, t; gap_us > 0 &&
		    (t = now_ns()) < due;)
			usleep((useconds_t)((due - t) / 1000));
		if (gap_us == 0 && i % 256 == 0)
			while (fanout_backlog() > POST_BACKLOG_MAX)
				usleep(2000);
		snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", mesh.token, a->owner,
		    a->actor, channel);
		snprintf(id, sizeof(id), "%s-%d-%" PRId64, channel, i, now_ns());
		int len = snprintf(body, sizeof(body), "{\"id\":\"%s\",\"ts\":%" PRId64 ","
		    "\"space\":\"%s\",\"from\":{\"id\":\"%s.%s\",\"name\":\"%s\"},"
		    "\"parts\":[{\"kind\":\"text\",\"text\":\"%" PRId64 "\"}],\"channel\":\"%s\"}",
		    id, now_ns() / 1000000, mesh.space, a->owner, a->actor, a->name, now_ns(), channel);
		if (js_PublishAsync(post_conns[i % POSTERS].js, subj, body, len, NULL) != NATS_OK)
			die("publish", subj);
		/* Paced: the post leaves now, not after libnats's flusher has
		 * held it back for a millisecond (lib/nats/natsconn.h conn_push); the
		 * clock in its text started at the publish. */
		if (gap_us > 0)
			natsConnection_FlushTimeout(post_conns[i % POSTERS].nc, 1000);
	}
	jsPubOptions_Init(&po);
	po.MaxWait = 60000;
	for (int k = 0; k < POSTERS; k++)
		if (js_PublishAsyncComplete(post_conns[k].js, &po) != NATS_OK)
			die("publish", "PubAcks missing");
}

/* Wait until DLV's last sequence reaches target; seconds taken from t0. */
double
wait_copies(uint64_t target, int64_t t0, const char *what)
{
	char dlv[256];
	uint64_t last = 0, seen = 0;
	int64_t progress = now_ns();

	snprintf(dlv, sizeof(dlv), "DLV_%s", mesh.token);
	for (;;) {
		last = stream_last_seq(dlv);
		if (last >= target)
			return (double)(now_ns() - t0) / 1e9;
		if (last != seen) {
			seen = last;
			progress = now_ns();
		} else if (now_ns() - progress > (int64_t)STALL_S * 1000000000) {
			char why[128];
			snprintf(why, sizeof(why), "DLV stuck at %" PRIu64 " of %" PRIu64, last, target);
			die(what, why);
		}
		usleep(POLL_MS * 1000);
	}
}

struct paced {
	const char *ch;
	int k, gap_us;
};

static void *
latency_poster(void *arg)
{
	struct paced *a = arg;

	post_burst(a->ch, a->k, a->gap_us);
	return NULL;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Paced posts; latency = arrival in DLV of the copy for one member (the
 * last written), read as it arrives through a pull consumer on its frame
 * subject (lib/nats/pull.c: a lone message is handed on at once). */
static void
measure_latency(const char *channel, const struct lc *sample, int k, int gap_us, double *p50,
		double *p99)
{
	char stream[256], filter[512], err[512], inbox[REPLY_INBOX_MAX];
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	struct puller pl;
	int64_t *lat = calloc((size_t)k, sizeof(*lat));
	int got = 0;

	snprintf(stream, sizeof(stream), "DLV_%s", mesh.token);
	snprintf(filter, sizeof(filter), "cotal.%s.dlv.local.%s.%s", mesh.token, sample->actor,
	    sample->uid);
	jsConsumerConfig_Init(&cc);
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckNone;
	cc.DeliverPolicy = js_DeliverNew;
	cc.InactiveThreshold = (int64_t)60 * 1000000000;
	if (jwt_reply_inbox(prov.creds.jwt, inbox, sizeof(inbox), err, sizeof(err)) != 0 ||
	    js_AddConsumer(&ci, prov.js, stream, &cc, NULL, &jerr) != NATS_OK ||
	    pull_attach(prov.nc, inbox, stream, ci->Name, &pl, err, sizeof(err)) != 0)
		die("latency consumer", filter);
	/* Posts paced on a thread of their own; frames read here. */
	pthread_t th;
	struct paced arg = { channel, k, gap_us };
	pthread_create(&th, NULL, latency_poster, &arg);
	int64_t deadline = now_ns() + ((int64_t)k * gap_us / 1000 + 30000) * 1000000;
	while (got < k && now_ns() < deadline) {
		natsMsgList list = { 0 };
		if (pull_fetch(&pl, 64, 200, &list) == NATS_OK) {
			int64_t t = now_ns();
			for (int i = 0; i < list.Count && got < k; i++) {
				const char *d = natsMsg_GetData(list.Msgs[i]);
				const char *p = strstr(d, "\"text\":\"");
				if (p != NULL)
					lat[got++] = t - strtoll(p + 8, NULL, 10);
			}
		}
		natsMsgList_Destroy(&list);
	}
	pthread_join(th, NULL);
	pull_close(&pl);
	js_DeleteConsumer(prov.js, stream, ci->Name, NULL, &jerr);
	jsConsumerInfo_Destroy(ci);
	if (got < k)
		die("latency", "frames missing");
	qsort(lat, (size_t)k, sizeof(*lat), cmp_i64);
	*p50 = (double)lat[k / 2] / 1e6;
	*p99 = (double)lat[(k * 99) / 100 < k ? (k * 99) / 100 : k - 1] / 1e6;
	free(lat);
}

/* The raw ceiling: n async publishes with message ids from one client to a
 * stream set up like INBOX_<s>. msgs/s. */
static double raw_broker_us; /* broker CPU per raw message, last run */
static double raw_consume_us; /* broker CPU per message delivered and acked, last run */


/* The broker's CPU: every node's on a cluster. */
uint64_t
broker_ticks(void)
{
	uint64_t t = 0;

	if (mesh.nnodes == 0)
		return h_proc_ticks(mesh.broker);
	for (int i = 0; i < mesh.nnodes; i++)
		t += h_proc_ticks(mesh.nodes[i].pid);
	return t;
}

/*
 * The broker's floor for the reader's share of a copy: every message of the
 * raw stream delivered through a durable explicit-ack pull consumer (as
 * WIRE.md §3 makes `reader`) and acked one by one, the way a copy's entry
 * is. Broker CPU per message.
 */
static double
raw_consume(const char *stream, int n)
{
	char err[512], inbox[REPLY_INBOX_MAX];
	jsConsumerConfig cc;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	struct puller pl;
	int got = 0;

	jsConsumerConfig_Init(&cc);
	cc.Durable = "raw";
	cc.AckPolicy = js_AckExplicit;
	cc.MaxAckPending = 1000;
	if (jwt_reply_inbox(prov.creds.jwt, inbox, sizeof(inbox), err, sizeof(err)) != 0 ||
	    js_AddConsumer(&ci, prov.js, stream, &cc, NULL, &jerr) != NATS_OK ||
	    pull_attach(prov.nc, inbox, stream, "raw", &pl, err, sizeof(err)) != 0)
		die("raw consumer", stream);
	/* What the stream kept (1,000 per subject). */
	n = (int)ci->NumPending;
	jsConsumerInfo_Destroy(ci);
	if (n == 0)
		die("raw consumer", "nothing to consume");
	uint64_t b0 = broker_ticks();
	while (got < n) {
		natsMsgList list = { 0 };
		if (pull_fetch(&pl, 500, 1000, &list) != NATS_OK || list.Count == 0)
			die("raw consumer", "stalled");
		for (int i = 0; i < list.Count; i++)
			pull_ack(&pl, list.Msgs[i]);
		got += list.Count;
		natsMsgList_Destroy(&list);
	}
	natsConnection_Flush(prov.nc);
	double us = (double)(broker_ticks() - b0) / (double)sysconf(_SC_CLK_TCK) * 1e6 / n;
	pull_close(&pl);
	return us;
}

static double
raw_ceiling(int n, int members)
{
	static int round;
	char name[64], subj[128], filter[64], id[64], body[1024];
	jsStreamConfig sc;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	jsPubOptions po;
	natsMsg *m = NULL;

	snprintf(name, sizeof(name), "BENCH_RAW_%d", ++round);
	/* The provisioner may publish under $KV.> only. */
	snprintf(filter, sizeof(filter), "$KV.bench_raw_%d.>", round);
	const char *subjects[] = { filter };
	jsStreamConfig_Init(&sc);
	sc.Name = name;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	sc.MaxMsgsPerSubject = 1000;
	sc.Duplicates = (int64_t)2 * 3600 * 1000000000;
	sc.Replicas = on_cluster ? 3 : 1; /* the same replication as the space's */
	if (js_AddStream(&si, prov.js, &sc, NULL, &jerr) != NATS_OK)
		die("raw stream", name);
	jsStreamInfo_Destroy(si);
	memset(body, 'x', 300);
	body[300] = '\0';
	uint64_t b0 = broker_ticks();
	int64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(subj, sizeof(subj), "$KV.bench_raw_%d.m%d", round, i % members);
		snprintf(id, sizeof(id), "raw-%d-%d", round, i);
		natsMsg_Create(&m, subj, NULL, body, 300);
		natsMsgHeader_Set(m, "Nats-Msg-Id", id);
		if (js_PublishMsgAsync(prov.js, &m, NULL) != NATS_OK)
			die("raw publish", subj);
		natsMsg_Destroy(m);
	}
	jsPubOptions_Init(&po);
	po.MaxWait = 60000;
	if (js_PublishAsyncComplete(prov.js, &po) != NATS_OK)
		die("raw publish", "PubAcks missing");
	double s = (double)(now_ns() - t0) / 1e9;
	raw_broker_us = (double)(broker_ticks() - b0) / (double)sysconf(_SC_CLK_TCK) * 1e6 / n;
	raw_consume_us = raw_consume(name, n);
	js_DeleteStream(prov.js, name, NULL, &jerr);
	return n / s;
}

void
run_round(int m, int copies, int other_rows, int lat_posts, struct result *r)
{
	char channel[64], dlv[256];
	uint64_t join, base;
	int posts = copies / m > 0 ? copies / m : 1;
	long hz = sysconf(_SC_CLK_TCK);

	/* A channel of its own each round: a round that reused another's
	 * would copy to both rounds' members and count only its own. */
	static int round_no;
	snprintf(channel, sizeof(channel), "bench-%d-%d-%d", m, other_rows, round_no++);
	snprintf(dlv, sizeof(dlv), "DLV_%s", mesh.token);
	if (h_chat_last_seq(&prov, &mesh, &join) != 0)
		die("chat info", NULL);
	struct lc *v = add_members(channel, m, join);
	/* Let the daemon's mirrors take the rows in before timing. */
	sleep(1);
	/* The raw ceiling is measured just before and just after the round,
	 * and the two averaged: on a shared machine it drifts by tens of
	 * percent from minute to minute. */
	int total_copies = posts * m;
	double raw_before = raw_ceiling(total_copies, m);
	base = stream_last_seq(dlv);
	uint64_t r0[2], r1[2];
	uint64_t d0 = daemon_ticks(r0), b0 = broker_ticks();
	uint64_t fb0 = worker_counter("fanout", "batches"), fp0 = worker_counter("fanout", "posts");
	uint64_t rb0 = worker_counter("reader", "batches"), re0 = worker_counter("reader", "entries");
	uint64_t api0 = api_total();
	int64_t t0 = now_ns();
	post_burst(channel, posts, 0);
	double secs = wait_copies(base + (uint64_t)posts * (uint64_t)m, t0, channel);
	uint64_t d1 = daemon_ticks(r1), b1 = broker_ticks();
	uint64_t api1 = api_total();
	/* The status file follows the counters within a second. */
	sleep(2);
	uint64_t fb = worker_counter("fanout", "batches") - fb0, rbat = worker_counter("reader",
	    "batches") - rb0;
	r->api_per_kcopy = (double)(api1 - api0) * 1000 / ((double)posts * m);
	r->posts_per_batch = fb ? (double)(worker_counter("fanout", "posts") - fp0) / fb : 0;
	r->entries_per_batch = rbat ? (double)(worker_counter("reader", "entries") - re0) / rbat : 0;
	uint64_t total = (uint64_t)posts * (uint64_t)m;

	r->members = m;
	r->posts = posts;
	r->other_rows = other_rows;
	r->copies_s = (double)total / secs;
	r->daemon_us = (double)(d1 - d0) / (double)hz * 1e6 / (double)total;
	r->broker_us = (double)(b1 - b0) / (double)hz * 1e6 / (double)total;
	/* A worker restarted meanwhile has a new pid: its share reads 0. */
	r->fanout_us = r1[0] >= r0[0] ? (double)(r1[0] - r0[0]) / (double)hz * 1e6 / (double)total : 0;
	r->reader_us = r1[1] >= r0[1] ? (double)(r1[1] - r0[1]) / (double)hz * 1e6 / (double)total : 0;
	/* Latency at fractions of the measured throughput (issue 18: 10 % and
	 * 50 %), so it is the path's own and not a queue's. */
	for (int k = 0; lat_posts > 0 && k < nlat; k++) {
		int gap = (int)(1e6 * m / (r->copies_s * lat_at[k]));
		measure_latency(channel, &v[m - 1], lat_posts, gap < 200 ? 200 : gap, &r->p50[k],
		    &r->p99[k]);
	}
	double rb = raw_broker_us, rc = raw_consume_us;
	r->raw_s = (raw_before + raw_ceiling(total_copies, m)) / 2;
	r->raw_broker_us = (rb + raw_broker_us) / 2;
	r->raw_consume_us = (rc + raw_consume_us) / 2;
	free(v);
}

void
bench_up(const char *sync)
{
	char err[1024];

	srand((unsigned)now_ns());
	setenv("COTAL_TEST_SYNC_INTERVAL", sync, 1);
	if (on_cluster ? h_cluster_up(&mesh, "bench", 3, 3) != 0 : h_mesh_up(&mesh, "bench", true) != 0)
		die("mesh", "cannot bring the broker up");
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0)
		die("provisioner", err);
	for (int k = 0; k < POSTERS; k++) {
		char name[32];
		snprintf(name, sizeof(name), "poster%d", k);
		if (h_agent_add(&mesh, name, "bench", &posters[k]) != 0 ||
		    h_connect(&mesh, posters[k].creds, &post_conns[k], err, sizeof(err)) != 0)
			die("poster", err);
	}
	daemon_restart(NULL, NULL);
}

void
daemon_restart(const char *bin, const char *metrics_addr)
{
	if (dmn.pid > 0)
		h_daemon_stop(&dmn, 10000);
	h_daemon_bin = bin != NULL ? bin : COTAL_DAEMON_PATH;
	int rc = metrics_addr != NULL ? h_daemon_start(&mesh, &dmn, "--metrics", metrics_addr, NULL) :
	    h_daemon_start(&mesh, &dmn, NULL);
	if (rc != 0 || h_daemon_wait_connected(&dmn, 20000) != 0 ||
	    !h_log_has(dmn.log, "fan-out bound", 20000) || !h_log_has(dmn.log, "reader bound", 20000))
		die("daemon", "did not bind its durables");
}

void
bench_down(void)
{
	h_daemon_kill(&dmn);
	for (int k = 0; k < POSTERS; k++)
		h_close(&post_conns[k]);
	h_close(&prov);
	h_mesh_down(&mesh);
	nats_Close();
}
