/*
 * bench/hostile: what one agent flooding its rail costs the others (issue
 * 28, "Measure"), in one run against the real daemon: another agent's
 * durableJoin latency (p50, p99) and the data path's copies/s, first with
 * no flood, then while one agent publishes listMemberships on its own
 * ctl.delivery subject as fast as its client allows (tests/harness/flood.c).
 *
 * Each phase posts K posts to a durable channel of M members (K × M copies
 * from CHAT to DLV) while the other agent joins and leaves channels of its
 * read ACL in a loop; copies/s is K × M over the time from the first post
 * to the last copy in DLV. Beside it, the raw broker in the same phase: one
 * client publishing K × M messages of the same size to a stream of its own,
 * with acknowledgements, so that what the flood takes from the broker
 * itself is told from what it takes from the daemon.
 *
 *   bench_hostile [--members M] [--posts K] [--pad BYTES]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/wire/ctlclient.h"
#include "tests/harness/harness.h"

#define CALL_MS 10000
#define COPY_WAIT_MS 180000
#define JOINS_MAX 200000
#define JOIN_CHANNELS 8 /* the joiner's channels, joined and left in turn */

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;

static void
die(const char *what, const char *err)
{
	fprintf(stderr, "bench_hostile: %s: %s\n", what, err);
	h_daemon_kill(&dmn);
	exit(1);
}

/* DLV_<s>'s last sequence. */
static uint64_t
dlv_last(void)
{
	uint64_t seq;

	if (h_stream_last_seq(&prov, &mesh, "DLV", &seq) != 0)
		die("stream info", "DLV");
	return seq;
}
/* ---- the other agent: joins and leaves, timed ---- */

struct joiner {
	struct h_peer *p;
	_Atomic bool stop;
	int64_t *ms;  /* each join's latency */
	int n;
	long refused;
	char first_error[256];
};

static void *
joiner_run(void *arg)
{
	struct joiner *j = arg;
	char ch[32];

	for (int i = 0; !atomic_load(&j->stop) && j->n < JOINS_MAX; i++) {
		struct ctl_result r;
		snprintf(ch, sizeof(ch), "j.c%d", i % JOIN_CHANNELS);
		int64_t t0 = mono_ms();
		ctl_call(j->p->cl, RAIL_CTL, "durableJoin", json_pack("{s:s}", "channel", ch),
		    CALL_MS, &r);
		int64_t took = mono_ms() - t0;
		if (r.outcome != CTL_REPLIED || !r.ok) {
			if (j->refused++ == 0)
				snprintf(j->first_error, sizeof(j->first_error), "%s", r.outcome ==
				    CTL_REPLIED ? (r.error ? r.error : "?") : ctl_outcome_name(r.outcome));
			ctl_result_free(&r);
			continue;
		}
		j->ms[j->n++] = took;
		json_int_t gen = json_integer_value(json_object_get(r.data, "generation"));
		ctl_result_free(&r);
		ctl_call(j->p->cl, RAIL_CTL, "durableLeave", json_pack("{s:s, s:I, s:s}", "channel",
		    ch, "generation", gen, "lifecycleUid", j->p->a.uid), CALL_MS, &r);
		ctl_result_free(&r);
	}
	return NULL;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t
pct(const int64_t *v, int n, int p)
{
	if (n == 0)
		return -1;
	int i = (int)((int64_t)n * p / 100);
	return v[i < n ? i : n - 1];
}

/* ---- one phase ---- */

struct phase {
	const char *name;
	bool flood;
	double copies_s, raw_s;
	int64_t p50, p99, worst;
	int joins;
	long refused;
	long flood_sent, flood_refused;
	char first_error[256];
};

/* The raw broker: n messages of size bytes to a stream of its own, each
 * acknowledged (async, at most 4096 outstanding): messages/s. */
static double
raw_publish(struct conn *c, int n, size_t size)
{
	jsPubOptions po;
	char *buf = malloc(size);
	jsErrCode jerr = 0;
	int64_t t0;

	if (buf == NULL)
		die("raw", "out of memory");
	memset(buf, 'r', size);
	js_PurgeStream(c->js, "RAW_HOSTILE", NULL, &jerr);
	t0 = mono_ms();
	for (int i = 0; i < n; i++)
		if (js_PublishAsync(c->js, "$KV.bench_raw_hostile.m", buf, (int)size, NULL) != NATS_OK)
			die("raw publish", "refused");
	jsPubOptions_Init(&po);
	po.MaxWait = COPY_WAIT_MS;
	if (js_PublishAsyncComplete(c->js, &po) != NATS_OK)
		die("raw publish", "not acknowledged in time");
	int64_t took = mono_ms() - t0;
	free(buf);
	return took > 0 ? n * 1000.0 / (double)took : 0;
}

/* n posts to "room", published asynchronously as fast as the broker
 * acknowledges them (a post a sync publish would cost the poster a disk
 * sync each under sync_interval: always: the data path would wait on it). */
static void
post_burst(struct h_peer *p, const char *tag, int n)
{
	char subj[512], body[1024];
	jsPubOptions po;

	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.room", mesh.token, p->a.owner,
	    p->a.actor);
	for (int i = 0; i < n; i++) {
		int len = snprintf(body, sizeof(body), "{\"id\":\"%s-%d\",\"ts\":%lld,"
		    "\"space\":\"%s\",\"from\":{\"id\":\"%s.%s\",\"name\":\"%s\"},"
		    "\"parts\":[{\"kind\":\"text\",\"text\":\"a post of the bench\"}],"
		    "\"channel\":\"room\"}", tag, i, (long long)wall_ms(), mesh.space, p->a.owner,
		    p->a.actor, p->a.name);
		if (js_PublishAsync(p->c.js, subj, body, len, NULL) != NATS_OK)
			die("post", subj);
	}
	jsPubOptions_Init(&po);
	po.MaxWait = COPY_WAIT_MS;
	if (js_PublishAsyncComplete(p->c.js, &po) != NATS_OK)
		die("post", "PubAcks missing");
}

static void
run_phase(struct phase *ph, struct h_peer *poster, struct h_peer *joiner, struct h_peer *flooder,
	  int members, int posts, size_t pad, struct conn *raw)
{
	struct joiner j = { .p = joiner };
	struct h_flood fl;
	pthread_t th;
	char err[256];
	int64_t t0, t1;

	if ((j.ms = calloc(JOINS_MAX, sizeof(*j.ms))) == NULL)
		die("joins", "out of memory");
	if (ph->flood) {
		if (h_flood_start(&mesh, flooder, pad, &fl, err, sizeof(err)) != 0)
			die("flood", err);
		h_nap(1000);
	}
	if (pthread_create(&th, NULL, joiner_run, &j) != 0)
		die("joiner", "thread");
	uint64_t base = dlv_last(), want = base + (uint64_t)posts * (uint64_t)members;
	t0 = mono_ms();
	post_burst(poster, ph->name, posts);
	while (dlv_last() < want) {
		if (mono_ms() - t0 > COPY_WAIT_MS)
			die("copies", "not all in DLV within 180 s");
		h_nap(20);
	}
	t1 = mono_ms();
	ph->copies_s = (double)(want - base) * 1000.0 / (double)(t1 - t0 > 0 ? t1 - t0 : 1);
	/* The raw broker, the flood (and the joins) still on. */
	ph->raw_s = raw_publish(raw, posts * members, 256);
	atomic_store(&j.stop, true);
	pthread_join(th, NULL);
	if (ph->flood) {
		h_flood_stop(&fl);
		ph->flood_sent = atomic_load(&fl.sent);
		ph->flood_refused = atomic_load(&fl.refused);
	}
	qsort(j.ms, (size_t)j.n, sizeof(*j.ms), cmp_i64);
	ph->joins = j.n;
	ph->p50 = pct(j.ms, j.n, 50);
	ph->p99 = pct(j.ms, j.n, 99);
	ph->worst = j.n > 0 ? j.ms[j.n - 1] : -1;
	ph->refused = j.refused;
	snprintf(ph->first_error, sizeof(ph->first_error), "%s", j.first_error);
	free(j.ms);
	h_nap(2000);
}

static void
peer(const char *name, const char *allow, struct h_peer *p)
{
	char err[1024];

	if (h_peer_up(&mesh, name, allow, p, err, sizeof(err)) != 0)
		die(name, err);
}

int
main(int argc, char **argv)
{
	int members = 10, posts = 1000;
	size_t pad = 0;
	struct h_peer poster, joiner, flooder, *m;
	struct phase ph[2] = { { .name = "quiet" }, { .name = "flood", .flood = true } };
	struct conn raw;
	char err[1024], name[32];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--members") == 0 && i + 1 < argc)
			members = atoi(argv[++i]);
		else if (strcmp(argv[i], "--posts") == 0 && i + 1 < argc)
			posts = atoi(argv[++i]);
		else if (strcmp(argv[i], "--pad") == 0 && i + 1 < argc)
			pad = (size_t)atol(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_hostile [--members M] [--posts K] [--pad BYTES]\n");
			return 2;
		}
	}
	/* CHAT keeps 1000 posts per sender and channel: one poster's phase
	 * stays within it. */
	if (members < 1 || members > 1000 || posts < 1 || posts > 1000) {
		fprintf(stderr, "bench_hostile: --members 1..1000, --posts 1..1000\n");
		return 2;
	}
	h_use_broker(H_BROKER_210);
	if (h_daemon_up(&mesh, "hostile", &prov, &dmn, 20000, "serving cotal.", "fan-out bound",
	    "reader bound", NULL) != 0)
		die("daemon", "not up");
	if ((m = calloc((size_t)members, sizeof(*m))) == NULL)
		die("members", "out of memory");
	for (int i = 0; i < members; i++) {
		struct ctl_result r;
		snprintf(name, sizeof(name), "member%d", i);
		peer(name, "room", &m[i]);
		ctl_call(m[i].cl, RAIL_CTL, "durableJoin", json_pack("{s:s}", "channel", "room"),
		    CALL_MS, &r);
		if (r.outcome != CTL_REPLIED || !r.ok)
			die("member join", r.error ? r.error : ctl_outcome_name(r.outcome));
		ctl_result_free(&r);
	}
	peer("poster", "room", &poster);
	peer("joiner", "j.>", &joiner);
	peer("flooder", "room", &flooder);
	if (h_connect_profile(&mesh, "provisioner", &raw, err, sizeof(err)) != 0)
		die("raw connection", err);
	{
		jsStreamConfig sc;
		/* The provisioner may publish under $KV.> only. */
		const char *subj[] = { "$KV.bench_raw_hostile.>" };
		jsStreamConfig_Init(&sc);
		sc.Name = "RAW_HOSTILE";
		sc.Subjects = subj;
		sc.SubjectsLen = 1;
		sc.Storage = js_FileStorage;
		if (js_AddStream(NULL, raw.js, &sc, NULL, NULL) != NATS_OK)
			die("raw stream", "cannot create RAW_HOSTILE");
	}

	for (int i = 0; i < 2; i++)
		run_phase(&ph[i], &poster, &joiner, &flooder, members, posts, pad, &raw);

	printf("# bench/hostile: nats-server 2.10, %ld cores, %d members, %d posts (%d copies) "
	    "a phase, flood padding %zu bytes\n", sysconf(_SC_NPROCESSORS_ONLN), members, posts,
	    members * posts, pad);
	printf("| phase | joins | join p50 ms | join p99 ms | slowest | refused | copies/s | raw "
	    "broker msgs/s | copies/raw | flood sent | flood refused |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < 2; i++)
		printf("| %s | %d | %lld | %lld | %lld | %ld | %.0f | %.0f | %.3f | %ld | %ld |\n",
		    ph[i].name, ph[i].joins, (long long)ph[i].p50, (long long)ph[i].p99,
		    (long long)ph[i].worst, ph[i].refused, ph[i].copies_s, ph[i].raw_s,
		    ph[i].raw_s > 0 ? ph[i].copies_s / ph[i].raw_s : 0, ph[i].flood_sent,
		    ph[i].flood_refused);
	printf("flood/quiet: join p50 %.2f×, p99 %.2f×, copies/s %.2f×, raw broker %.2f×\n",
	    ph[0].p50 > 0 ? (double)ph[1].p50 / (double)ph[0].p50 : 0,
	    ph[0].p99 > 0 ? (double)ph[1].p99 / (double)ph[0].p99 : 0,
	    ph[0].copies_s > 0 ? ph[1].copies_s / ph[0].copies_s : 0,
	    ph[0].raw_s > 0 ? ph[1].raw_s / ph[0].raw_s : 0);
	for (int i = 0; i < 2; i++)
		if (ph[i].refused > 0)
			printf("%s: %ld joins refused, the first: %s\n", ph[i].name, ph[i].refused,
			    ph[i].first_error);
	h_close(&raw);
	h_peer_down(&poster);
	h_peer_down(&joiner);
	h_peer_down(&flooder);
	for (int i = 0; i < members; i++)
		h_peer_down(&m[i]);
	free(m);
	h_daemon_kill(&dmn);
	h_close(&prov);
	h_mesh_down(&mesh);
	return ph[0].refused + ph[1].refused > 0 ? 1 : 0;
}
