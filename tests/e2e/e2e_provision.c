/*
 * End-to-end test of space provisioning (cli/provision.c): starts its own
 * nats-server with JetStream on a free loopback port in a temp dir and checks
 * the streams, buckets and DLV durables against WIRE.md §3, read back from
 * the broker. Binary: $COTAL_TEST_NATS_SERVER, else the Debian package's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "cli/provision.h"

/* ------------------------------------------------------------------------
 * Broker start/stop. Plain (no-operator) mode; the operator-mode harness
 * replaces these functions. Every started broker is registered so atexit
 * and a SIGABRT handler can kill it however the run ends.
 * ---------------------------------------------------------------------- */

#define BROKERS_MAX 4
#define BROKER_READY_MS 10000
#define BROKER_STOP_MS 5000
#define POLL_MS 20
#define URL_MAX 128
/* nats.c library shutdown; its objects outlive a failed assertion. */
#define CLOSE_WAIT_MS 2000

struct broker {
	pid_t pid;
	char dir[PATH_MAX];
	char url[URL_MAX];
};

static volatile sig_atomic_t broker_pids[BROKERS_MAX];
static struct broker *brokers[BROKERS_MAX];
static bool broker_hooks_installed;

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Async-signal-safe: kill(2) only, then die of the same signal. */
static void
broker_kill_on_signal(int sig)
{
	int i;

	for (i = 0; i < BROKERS_MAX; i++)
		if (broker_pids[i] > 0)
			kill((pid_t)broker_pids[i], SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void
broker_stop(struct broker *b)
{
	int i, status, waited = 0;

	if (b == NULL)
		return;
	if (b->pid > 0) {
		kill(b->pid, SIGTERM);
		while (waitpid(b->pid, &status, WNOHANG) == 0) {
			if (waited >= BROKER_STOP_MS) {
				kill(b->pid, SIGKILL);
				waitpid(b->pid, &status, 0);
				break;
			}
			sleep_ms(POLL_MS);
			waited += POLL_MS;
		}
	}
	for (i = 0; i < BROKERS_MAX; i++) {
		if (brokers[i] == b) {
			brokers[i] = NULL;
			broker_pids[i] = 0;
		}
	}
	b->pid = -1;
	if (b->dir[0] != '\0')
		nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	b->dir[0] = '\0';
}

static void
broker_stop_all(void)
{
	int i;

	for (i = 0; i < BROKERS_MAX; i++)
		if (brokers[i] != NULL)
			broker_stop(brokers[i]);
}

static const char *
broker_binary(void)
{
	const char *env = getenv("COTAL_TEST_NATS_SERVER");

	if (env != NULL && env[0] != '\0')
		return env;
	/* Debian 12's package installs /usr/sbin/nats-server. */
	if (access("/usr/bin/nats-server", X_OK) == 0)
		return "/usr/bin/nats-server";
	return "/usr/sbin/nats-server";
}

static int
free_loopback_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd, port = -1;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void
broker_dump_log(const struct broker *b)
{
	char path[PATH_MAX + 16], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/server.log", b->dir);
	f = fopen(path, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		fprintf(stderr, "  nats-server: %s", line);
	fclose(f);
}

/* Poll until the broker accepts a client (and answers $JS.API.INFO when it
 * runs JetStream), or it died, or BROKER_READY_MS passed. */
static int
broker_wait_ready(struct broker *b, const char *url, bool jetstream)
{
	int waited, status;

	for (waited = 0; waited < BROKER_READY_MS; waited += POLL_MS) {
		natsConnection *nc = NULL;

		if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
			b->pid = -1;
			return -1;
		}
		if (natsConnection_ConnectTo(&nc, url) == NATS_OK) {
			jsCtx *js = NULL;
			jsAccountInfo *ai = NULL;
			bool ok = !jetstream;

			if (jetstream && natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
			    js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK)
				ok = true;
			jsAccountInfo_Destroy(ai);
			jsCtx_Destroy(js);
			natsConnection_Destroy(nc);
			if (ok)
				return 0;
		}
		sleep_ms(POLL_MS);
	}
	return -1;
}

/* Start a broker; extra_conf is appended to the config (NULL for none),
 * userinfo ("user:pass@" or "") goes into the client URL. */
static int
broker_start(struct broker *b, bool jetstream, const char *extra_conf, const char *userinfo)
{
	char conf[PATH_MAX + 16], log[PATH_MAX + 16], url[URL_MAX];
	const char *bin = broker_binary();
	FILE *f;
	int port, slot, i;

	memset(b, 0, sizeof(*b));
	b->pid = -1;
	if (!broker_hooks_installed) {
		atexit(broker_stop_all);
		/* SIGSEGV is left to the sanitizers; PR_SET_PDEATHSIG in the
		 * child covers a crash. */
		signal(SIGABRT, broker_kill_on_signal);
		broker_hooks_installed = true;
	}
	for (slot = 0; slot < BROKERS_MAX && brokers[slot] != NULL; slot++)
		;
	if (slot == BROKERS_MAX)
		return -1;
	snprintf(b->dir, sizeof(b->dir), "%s/cotal-e2e-prov.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(b->dir) == NULL) {
		b->dir[0] = '\0';
		return -1;
	}
	brokers[slot] = b;
	port = free_loopback_port();
	snprintf(conf, sizeof(conf), "%s/nats.conf", b->dir);
	snprintf(log, sizeof(log), "%s/server.log", b->dir);
	f = fopen(conf, "w");
	if (port < 0 || f == NULL) {
		if (f != NULL)
			fclose(f);
		broker_stop(b);
		return -1;
	}
	fprintf(f, "listen: \"127.0.0.1:%d\"\n", port);
	if (jetstream)
		/* Every space provisioned here reserves its storage budget
		 * (4 GiB) against the cap: 1 TB holds them all, whatever the
		 * disk (the default cap is 75 % of its free space). */
		fprintf(f, "jetstream { store_dir: \"%s/js\", max_file_store: 1TB }\n", b->dir);
	if (extra_conf != NULL)
		fprintf(f, "%s\n", extra_conf);
	fclose(f);

	b->pid = fork();
	if (b->pid < 0) {
		broker_stop(b);
		return -1;
	}
	if (b->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		/* Die with the test even if it is SIGKILLed. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		for (i = 0; i < BROKERS_MAX; i++)
			broker_pids[i] = 0;
		execl(bin, bin, "-c", conf, (char *)NULL);
		_exit(127);
	}
	broker_pids[slot] = b->pid;
	snprintf(b->url, sizeof(b->url), "nats://127.0.0.1:%d", port);
	snprintf(url, sizeof(url), "nats://%s127.0.0.1:%d", userinfo ? userinfo : "", port);
	if (broker_wait_ready(b, url, jetstream) != 0) {
		fprintf(stderr, "broker %s did not come up on %s\n", bin, b->url);
		broker_dump_log(b);
		broker_stop(b);
		return -1;
	}
	snprintf(b->url, sizeof(b->url), "%s", url);
	return 0;
}

static natsConnection *
broker_connect(const struct broker *b)
{
	natsConnection *nc = NULL;
	natsOptions *o = NULL;

	if (natsOptions_Create(&o) != NATS_OK)
		return NULL;
	natsOptions_SetURL(o, b->url);
	/* A dead broker must fail the test at once, not stall it. */
	natsOptions_SetAllowReconnect(o, false);
	if (natsConnection_Connect(&nc, o) != NATS_OK)
		nc = NULL;
	natsOptions_Destroy(o);
	return nc;
}

/* ------------------------------------------------------------------------
 * Fixtures and helpers
 * ---------------------------------------------------------------------- */

#define NS_SEC INT64_C(1000000000)
#define NS_MIN (60 * NS_SEC)
#define NS_HOUR (60 * NS_MIN)
#define ERR_MAX 4096
#define NAME_MAX_T 512
#define STREAMS 11
/* 255-byte broker name limit minus "KV_cotal_channels_". */
#define BROKER_NAME_FIT 237
#define UID1 "0123456789abcdefghijklmnop"
#define UID2 "zyxwvutsrqponmlkjihgfedcba012345"

static struct broker g_broker;
static natsConnection *g_nc;
static jsCtx *g_js;

static int
group_setup(void **state)
{
	(void)state;
	if (broker_start(&g_broker, true, NULL, NULL) != 0)
		return -1;
	g_nc = broker_connect(&g_broker);
	if (g_nc == NULL || natsConnection_JetStream(&g_js, g_nc, NULL) != NATS_OK)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	jsCtx_Destroy(g_js);
	g_js = NULL;
	natsConnection_Destroy(g_nc);
	g_nc = NULL;
	broker_stop(&g_broker);
	return 0;
}

/* Run space_provision with the report captured in memory. */
struct run {
	int rc;
	char err[ERR_MAX];
	char *report;
	size_t report_len;
};

static void
provision_run(natsConnection *nc, const char *space, struct run *r)
{
	FILE *f;

	memset(r, 0, sizeof(*r));
	f = open_memstream(&r->report, &r->report_len);
	assert_non_null(f);
	r->rc = space_provision(nc, space, f, r->err, sizeof(r->err));
	fclose(f);
}

static int
count_lines_with(const char *text, const char *prefix)
{
	const char *p = text;
	size_t n = strlen(prefix);
	int count = 0;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, prefix, n) == 0)
			count++;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return count;
}

static bool
stream_exists(const char *name)
{
	jsStreamInfo *si = NULL;
	natsStatus s = js_GetStreamInfo(&si, g_js, name, NULL, NULL);

	jsStreamInfo_Destroy(si);
	return s == NATS_OK;
}

/* The contract of WIRE.md §3, written out literally so the test does not
 * share the table it checks. Subjects are after "cotal.<s>." except KV. */
struct want_stream {
	const char *prefix;
	bool kv;
	const char *subjects[2];
	int64_t per_subject;
	int64_t duplicates;
	int64_t max_age;
	bool allow_direct;
	int64_t max_bytes; /* the default budget's share (docs/launching.md "Provisioning") */
};

/* max_bytes: 4 GiB (4294967296) / 1000 × the stream's per-mille share:
 * CHAT 300, INBOX 100, DLV 450, EPT_REQ 20, EPT 40, channels 10, members
 * 30, presence 10, delivery 1, records 29; the read-ACL bucket none. */
static const struct want_stream wire_streams[STREAMS] = {
	{"CHAT_", false, {"chat.>", NULL}, 1000, 2 * NS_MIN, 0, true, 1288490100},
	{"INBOX_", false, {"dinbox.>", NULL}, 1000, 2 * NS_HOUR, 0, false, 429496700},
	{"DLV_", false, {"dlv.>", NULL}, 1000, 2 * NS_HOUR, 0, false, 1932735150},
	{"EPT_REQ_", false, {"ept.*.*.*.*.schedule", NULL}, -1, 2 * NS_MIN, 0, false, 85899340},
	{"EPT_", false, {"ept.*.*.*.*.armed", "ept.*.*.*.*.fire"}, -1, 2 * NS_MIN, 0, false,
	 171798680},
	{"cotal_channels_", true, {NULL, NULL}, 1, 2 * NS_MIN, 0, true, 42949670},
	{"cotal_acl_", true, {NULL, NULL}, 1, 2 * NS_MIN, 0, true, -1}, /* issue 39: no cap */
	{"cotal_members_", true, {NULL, NULL}, 1, 2 * NS_MIN, 0, true, 128849010},
	{"cotal_presence_", true, {NULL, NULL}, 1, 6 * NS_SEC, 6 * NS_SEC, true, 42949670},
	{"cotal_delivery_", true, {NULL, NULL}, 1, 30 * NS_SEC, 30 * NS_SEC, true, 4294967},
	{"cotal_records_", true, {NULL, NULL}, 1, 2 * NS_MIN, 0, true, 124554043},
};

/* Like assert_int_equal, but names the stream and field on a mismatch. */
#define EXPECT_FIELD(stream, field, have, want)                                             \
	do {                                                                                \
		if ((int64_t)(have) != (int64_t)(want))                                     \
			fail_msg("%s: %s is %" PRId64 ", want %" PRId64, (stream), (field), \
				 (int64_t)(have), (int64_t)(want));                         \
	} while (0)

static void
wire_stream_name(const struct want_stream *w, const char *tok, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s%s%s", w->kv ? "KV_" : "", w->prefix, tok);
}

static void
assert_stream_matches_wire(const struct want_stream *w, const char *tok)
{
	char name[NAME_MAX_T], subj[2][NAME_MAX_T];
	jsStreamInfo *si = NULL;
	jsStreamConfig *c;
	int nsubj = 0, i;

	wire_stream_name(w, tok, name, sizeof(name));
	if (w->kv) {
		snprintf(subj[nsubj++], NAME_MAX_T, "$KV.%s%s.>", w->prefix, tok);
	} else {
		for (i = 0; i < 2 && w->subjects[i] != NULL; i++)
			snprintf(subj[nsubj++], NAME_MAX_T, "cotal.%s.%s", tok, w->subjects[i]);
	}
	if (js_GetStreamInfo(&si, g_js, name, NULL, NULL) != NATS_OK)
		fail_msg("stream %s missing", name);
	c = si->Config;
	assert_string_equal(c->Name, name);
	EXPECT_FIELD(name, "subjects count", c->SubjectsLen, nsubj);
	for (i = 0; i < nsubj; i++)
		assert_string_equal(c->Subjects[i], subj[i]);
	EXPECT_FIELD(name, "retention", c->Retention, js_LimitsPolicy);
	EXPECT_FIELD(name, "storage", c->Storage, js_FileStorage);
	EXPECT_FIELD(name, "replicas", c->Replicas, 1);
	EXPECT_FIELD(name, "discard", c->Discard, w->kv ? js_DiscardNew : js_DiscardOld);
	EXPECT_FIELD(name, "max msgs per subject", c->MaxMsgsPerSubject, w->per_subject);
	EXPECT_FIELD(name, "duplicates", c->Duplicates, w->duplicates);
	EXPECT_FIELD(name, "max age", c->MaxAge, w->max_age);
	EXPECT_FIELD(name, "allow direct", c->AllowDirect, w->allow_direct);
	EXPECT_FIELD(name, "max bytes", c->MaxBytes, w->max_bytes);
	EXPECT_FIELD(name, "allow rollup", c->AllowRollup, w->kv);
	EXPECT_FIELD(name, "deny delete", c->DenyDelete, w->kv);
	EXPECT_FIELD(name, "deny purge", c->DenyPurge, false);
	EXPECT_FIELD(name, "sealed", c->Sealed, false);
	EXPECT_FIELD(name, "mirror", c->Mirror != NULL, false);
	EXPECT_FIELD(name, "sources", c->SourcesLen, 0);
	jsStreamInfo_Destroy(si);
}

/* ------------------------------------------------------------------------
 * Tests
 * ---------------------------------------------------------------------- */

static void
test_fresh_space_creates_all_streams(void **state)
{
	struct run r;
	int i;

	(void)state;
	/* Bytes outside [A-Za-z0-9_-] become '_' in the token. */
	provision_run(g_nc, "fresh space/1", &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.err, "");
	assert_int_equal(count_lines_with(r.report, "✓ created "), STREAMS);
	assert_int_equal(count_lines_with(r.report, "• exists "), 0);
	assert_non_null(strstr(r.report, "✓ created stream CHAT_fresh_space_1\n"));
	assert_non_null(strstr(r.report, "✓ created KV bucket cotal_members_fresh_space_1 "));
	for (i = 0; i < STREAMS; i++)
		assert_stream_matches_wire(&wire_streams[i], "fresh_space_1");
	free(r.report);
}

static void
test_second_run_is_idempotent(void **state)
{
	struct run r;

	(void)state;
	provision_run(g_nc, "twice", &r);
	assert_int_equal(r.rc, 0);
	free(r.report);
	provision_run(g_nc, "twice", &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.err, "");
	assert_int_equal(count_lines_with(r.report, "• exists "), STREAMS);
	assert_int_equal(count_lines_with(r.report, "✓ created "), 0);
	assert_int_equal(count_lines_with(r.report, "✗ "), 0);
	free(r.report);
}

static void
test_conflicting_stream_is_refused_and_untouched(void **state)
{
	const char *subjects[] = {"cotal.conflict.dinbox.>"};
	jsStreamInfo *si = NULL;
	jsStreamConfig sc;
	struct run r;

	(void)state;
	/* INBOX made with server defaults: 2 min window, unlimited per subject. */
	jsStreamConfig_Init(&sc);
	sc.Name = "INBOX_conflict";
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	assert_int_equal(js_AddStream(&si, g_js, &sc, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);
	si = NULL;

	provision_run(g_nc, "conflict", &r);
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "stream INBOX_conflict exists with a conflicting config: "
				   "duplicate window 2m0s (want 2h0m0s); "
				   "max messages per subject -1 (want 1000)");
	assert_non_null(strstr(r.report, "✗ stream INBOX_conflict exists"));
	free(r.report);

	assert_int_equal(js_GetStreamInfo(&si, g_js, "INBOX_conflict", NULL, NULL), NATS_OK);
	assert_int_equal(si->Config->Duplicates, 2 * NS_MIN);
	assert_int_equal(si->Config->MaxMsgsPerSubject, -1);
	jsStreamInfo_Destroy(si);
	/* A refused space is left as it was: nothing else was created. */
	assert_false(stream_exists("CHAT_conflict"));
	assert_false(stream_exists("KV_cotal_members_conflict"));
}

static void
test_every_conflicting_stream_is_named(void **state)
{
	const char *chat_subj[] = {"cotal.multi.chat.>", "cotal.multi.extra"};
	const char *dlv_subj[] = {"cotal.multi.dlv.>"};
	jsStreamInfo *si = NULL;
	jsStreamConfig sc;
	struct run r;

	(void)state;
	jsStreamConfig_Init(&sc);
	sc.Name = "CHAT_multi";
	sc.Subjects = chat_subj;
	sc.SubjectsLen = 2;
	sc.MaxMsgsPerSubject = 1000;
	sc.AllowDirect = true;
	sc.Storage = js_MemoryStorage;
	assert_int_equal(js_AddStream(&si, g_js, &sc, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);
	si = NULL;
	jsStreamConfig_Init(&sc);
	sc.Name = "DLV_multi";
	sc.Subjects = dlv_subj;
	sc.SubjectsLen = 1;
	sc.MaxMsgsPerSubject = 1000;
	sc.Duplicates = 2 * NS_HOUR;
	sc.Retention = js_WorkQueuePolicy;
	assert_int_equal(js_AddStream(&si, g_js, &sc, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);

	provision_run(g_nc, "multi", &r);
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "stream CHAT_multi exists with a conflicting config: "
				   "subjects [cotal.multi.chat.> cotal.multi.extra] "
				   "(want [cotal.multi.chat.>]); storage memory (want file) "
				   "(and 1 more conflicting: DLV_multi)");
	assert_non_null(strstr(r.report, "✗ stream DLV_multi exists with a conflicting config: "
					 "retention workqueue (want limits)\n"));
	free(r.report);
}

static void
test_buckets_made_by_nats_c_count_as_existing(void **state)
{
	kvStore *kv = NULL;
	kvConfig kc;
	struct run r;

	(void)state;
	/* Our KV streams must be exactly what nats.c itself makes, so a bucket an
	 * agent library created first is accepted. */
	kvConfig_Init(&kc);
	kc.Bucket = "cotal_members_libkv";
	kc.History = 1;
	assert_int_equal(js_CreateKeyValue(&kv, g_js, &kc), NATS_OK);
	kvStore_Destroy(kv);
	kv = NULL;
	kvConfig_Init(&kc);
	kc.Bucket = "cotal_presence_libkv";
	kc.History = 1;
	kc.TTL = 6 * NS_SEC;
	assert_int_equal(js_CreateKeyValue(&kv, g_js, &kc), NATS_OK);
	kvStore_Destroy(kv);

	provision_run(g_nc, "libkv", &r);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.report, "• exists KV bucket cotal_members_libkv "));
	assert_non_null(strstr(r.report, "• exists KV bucket cotal_presence_libkv "));
	assert_int_equal(count_lines_with(r.report, "✓ created "), STREAMS - 2);
	free(r.report);
}

static void
test_kv_buckets_bind_and_work(void **state)
{
	static const char *const buckets[] = {"cotal_channels_kv", "cotal_acl_kv",
					      "cotal_members_kv", "cotal_presence_kv",
					      "cotal_delivery_kv", "cotal_records_kv"};
	const char *key = "general/local.alice." UID1;
	const char *value = "{\"channel\":\"general\",\"generation\":1}";
	kvEntry *e = NULL;
	kvStore *kv = NULL;
	uint64_t rev = 0;
	struct run r;
	size_t i;

	(void)state;
	provision_run(g_nc, "kv", &r);
	assert_int_equal(r.rc, 0);
	free(r.report);
	for (i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
		if (js_KeyValue(&kv, g_js, buckets[i]) != NATS_OK)
			fail_msg("js_KeyValue(%s): %s", buckets[i], nats_GetLastError(NULL));
		kvStore_Destroy(kv);
		kv = NULL;
	}
	assert_int_equal(js_KeyValue(&kv, g_js, "cotal_members_kv"), NATS_OK);
	assert_int_equal(kvStore_PutString(&rev, kv, key, value), NATS_OK);
	assert_true(rev > 0);
	assert_int_equal(kvStore_Get(&e, kv, key), NATS_OK);
	assert_string_equal(kvEntry_ValueString(e), value);
	assert_int_equal(kvEntry_Revision(e), rev);
	kvEntry_Destroy(e);
	e = NULL;
	/* History 1 + rollup: a put replaces, a delete leaves a tombstone. */
	assert_int_equal(kvStore_PutString(&rev, kv, key, "{}"), NATS_OK);
	assert_int_equal(kvStore_Delete(kv, key), NATS_OK);
	assert_int_equal(kvStore_Get(&e, kv, key), NATS_NOT_FOUND);
	kvStore_Destroy(kv);
}

static void
test_member_durable_created_and_idempotent(void **state)
{
	char err[ERR_MAX];
	jsConsumerInfo *ci = NULL;
	jsConsumerConfig *c;
	struct run r;

	(void)state;
	provision_run(g_nc, "durable", &r);
	assert_int_equal(r.rc, 0);
	free(r.report);

	assert_int_equal(provision_member_durable(g_nc, "durable", "local", "alice", UID1, err,
						  sizeof(err)),
			 0);
	assert_string_equal(err, "");
	assert_int_equal(js_GetConsumerInfo(&ci, g_js, "DLV_durable", "dlv_local-alice-" UID1, NULL,
					    NULL),
			 NATS_OK);
	c = ci->Config;
	assert_string_equal(c->Durable, "dlv_local-alice-" UID1);
	assert_string_equal(c->FilterSubject, "cotal.durable.dlv.local.alice." UID1);
	assert_int_equal(c->AckPolicy, js_AckExplicit);
	assert_int_equal(c->AckWait, 60 * NS_SEC);
	assert_int_equal(c->DeliverPolicy, js_DeliverAll);
	assert_true(c->DeliverSubject == NULL || c->DeliverSubject[0] == '\0');
	jsConsumerInfo_Destroy(ci);
	ci = NULL;

	assert_int_equal(provision_member_durable(g_nc, "durable", "local", "alice", UID1, err,
						  sizeof(err)),
			 0);
	/* A 32-char uid and a principal owner token work the same. */
	assert_int_equal(provision_member_durable(g_nc, "durable", "u_abcdefghijklmnopqrstuvwxyz",
						  "bot_2", UID2, err, sizeof(err)),
			 0);
	assert_int_equal(js_GetConsumerInfo(&ci, g_js, "DLV_durable",
					    "dlv_u_abcdefghijklmnopqrstuvwxyz-bot_2-" UID2, NULL,
					    NULL),
			 NATS_OK);
	jsConsumerInfo_Destroy(ci);
}

static void
test_conflicting_member_durable_is_refused(void **state)
{
	char err[ERR_MAX];
	jsConsumerInfo *ci = NULL;
	jsConsumerConfig cc;
	struct run r;

	(void)state;
	provision_run(g_nc, "cdur", &r);
	assert_int_equal(r.rc, 0);
	free(r.report);
	jsConsumerConfig_Init(&cc);
	cc.Durable = "dlv_local-bob-" UID1;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = 30 * NS_SEC;
	cc.FilterSubject = "cotal.cdur.dlv.local.bob." UID1;
	assert_int_equal(js_AddConsumer(&ci, g_js, "DLV_cdur", &cc, NULL, NULL), NATS_OK);
	jsConsumerInfo_Destroy(ci);
	ci = NULL;

	assert_int_equal(
		provision_member_durable(g_nc, "cdur", "local", "bob", UID1, err, sizeof(err)), -1);
	assert_string_equal(err, "consumer dlv_local-bob-" UID1 " on DLV_cdur exists with a "
				 "conflicting config: ack wait 30s (want 1m0s)");
	assert_int_equal(js_GetConsumerInfo(&ci, g_js, "DLV_cdur", "dlv_local-bob-" UID1, NULL, NULL),
			 NATS_OK);
	assert_int_equal(ci->Config->AckWait, 30 * NS_SEC);
	jsConsumerInfo_Destroy(ci);
}

static void
test_member_durable_needs_a_provisioned_space(void **state)
{
	char err[ERR_MAX];

	(void)state;
	assert_int_equal(provision_member_durable(g_nc, "nodlv", "local", "alice", UID1, err,
						  sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "DLV_nodlv"));
	assert_non_null(strstr(err, "stream not found (err_code 10059)"));
}

static void
test_bad_input_is_refused_naming_the_field(void **state)
{
	char err[ERR_MAX], longname[SPACE_NAME_MAX + 2];
	static const char *const bad_uids[] = {"short", "0123456789ABCDEFGHIJKLMNOP",
					       "0123456789abcdefghijklmnop0123456",
					       "0123456789abcdefghijklmno-"};
	size_t i;

	(void)state;
	assert_int_equal(provision_member_durable(g_nc, "bad", "bad.owner", "alice", UID1, err,
						  sizeof(err)),
			 -1);
	assert_true(strncmp(err, "owner: ", 7) == 0);
	assert_int_equal(provision_member_durable(g_nc, "bad", "", "alice", UID1, err, sizeof(err)),
			 -1);
	assert_true(strncmp(err, "owner: ", 7) == 0);
	assert_int_equal(provision_member_durable(g_nc, "bad", NULL, "alice", UID1, err, sizeof(err)),
			 -1);
	assert_true(strncmp(err, "owner: ", 7) == 0);
	assert_int_equal(provision_member_durable(g_nc, "bad", "local", "a-b", UID1, err, sizeof(err)),
			 -1);
	assert_true(strncmp(err, "actor: ", 7) == 0);
	for (i = 0; i < sizeof(bad_uids) / sizeof(bad_uids[0]); i++) {
		assert_int_equal(provision_member_durable(g_nc, "bad", "local", "alice", bad_uids[i],
							  err, sizeof(err)),
				 -1);
		assert_true(strncmp(err, "uid: ", 5) == 0);
	}

	memset(longname, 'x', SPACE_NAME_MAX + 1);
	longname[SPACE_NAME_MAX + 1] = '\0';
	assert_int_equal(space_provision(g_nc, longname, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "space: name longer than 256 bytes");
	assert_int_equal(
		provision_member_durable(g_nc, longname, "local", "alice", UID1, err, sizeof(err)), -1);
	assert_string_equal(err, "space: name longer than 256 bytes");
	assert_int_equal(space_provision(g_nc, NULL, NULL, err, sizeof(err)), -1);
	assert_true(strncmp(err, "space: ", 7) == 0);
	assert_int_equal(space_provision(NULL, "nonc", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "connection"));
	/* A tiny err buffer is truncated, never overrun. */
	assert_int_equal(space_provision(g_nc, longname, NULL, err, 6), -1);
	assert_string_equal(err, "space");
	/* Nothing reached the broker for the refused names. */
	assert_false(stream_exists("CHAT_xxxxxxxx"));
}

static void
test_space_names_past_the_broker_name_limit_are_refused(void **state)
{
	char name[SPACE_NAME_MAX + 1], chat[SPACE_NAME_MAX + 8];
	char err[ERR_MAX];
	struct run r;

	(void)state;
	/* Within our 256-byte bound, but KV_cotal_channels_<s> would pass the
	 * broker's 255-byte name limit: refused before anything is created. */
	memset(name, 'y', BROKER_NAME_FIT + 1);
	name[BROKER_NAME_FIT + 1] = '\0';
	assert_int_equal(space_provision(g_nc, name, NULL, err, sizeof(err)), -1);
	assert_string_equal(err, "space: name of 238 bytes is too long to provision: stream "
				 "KV_cotal_channels_<s> would be 256 bytes, the broker allows 255 "
				 "(space names up to 237 bytes fit)");
	snprintf(chat, sizeof(chat), "CHAT_%s", name);
	assert_false(stream_exists(chat));
	memset(name, 'y', SPACE_NAME_MAX);
	name[SPACE_NAME_MAX] = '\0';
	assert_int_equal(space_provision(g_nc, name, NULL, err, sizeof(err)), -1);
	assert_true(strncmp(err, "space: name of 256 bytes is too long", 36) == 0);

	/* The longest name that fits provisions completely. */
	name[BROKER_NAME_FIT] = '\0';
	provision_run(g_nc, name, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(count_lines_with(r.report, "✓ created "), STREAMS);
	free(r.report);
}

static void
test_broker_refusal_is_reported_in_its_words(void **state)
{
	const char *subjects[] = {"cotal.overlap.chat.>"};
	jsStreamInfo *si = NULL;
	jsStreamConfig sc;
	struct run r;

	(void)state;
	/* Another stream already captures the space's chat subjects. */
	jsStreamConfig_Init(&sc);
	sc.Name = "LEGACY_overlap";
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	assert_int_equal(js_AddStream(&si, g_js, &sc, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);

	provision_run(g_nc, "overlap", &r);
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "create stream CHAT_overlap: subjects overlap with an existing "
				   "stream (err_code 10065)");
	assert_non_null(strstr(r.report, "✗ create stream CHAT_overlap: "));
	free(r.report);
}

/* A broker whose user may not create streams, and one without JetStream. */
static struct broker g_denied;

#define DENY_CREATE_CONF                                                                    \
	"authorization { users = [ { user: prov, password: prov, permissions: {"          \
	" publish: { allow: [\">\"], deny: [\"$JS.API.STREAM.CREATE.>\"] },"              \
	" subscribe: { allow: [\">\"] } } } ] }"

static int
denied_setup(void **state)
{
	(void)state;
	return broker_start(&g_denied, true, DENY_CREATE_CONF, "prov:prov@");
}

static int
nojs_setup(void **state)
{
	(void)state;
	return broker_start(&g_denied, false, NULL, NULL);
}

static int
other_teardown(void **state)
{
	(void)state;
	broker_stop(&g_denied);
	return 0;
}

static void
test_permission_denial_names_the_subject(void **state)
{
	natsConnection *nc;
	struct run r;

	(void)state;
	nc = broker_connect(&g_denied);
	assert_non_null(nc);
	provision_run(nc, "denied", &r);
	natsConnection_Destroy(nc);
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "create stream CHAT_denied: permission denied by the broker: "
				   "Permissions Violation for Publish to "
				   "\"$JS.API.STREAM.CREATE.CHAT_denied\"");
	free(r.report);
}

static void
test_no_jetstream_is_reported(void **state)
{
	natsConnection *nc;
	struct run r;
	char err[ERR_MAX];

	(void)state;
	nc = broker_connect(&g_denied);
	assert_non_null(nc);
	provision_run(nc, "nojs", &r);
	assert_int_equal(r.rc, -1);
	assert_string_equal(r.err, "stream info CHAT_nojs: no answer from JetStream (is JetStream "
				   "enabled for this account, and may this credential publish to "
				   "$JS.API.STREAM.INFO.CHAT_nojs?)");
	free(r.report);
	assert_int_equal(
		provision_member_durable(nc, "nojs", "local", "alice", UID1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no answer from JetStream"));
	natsConnection_Destroy(nc);
}

/*
 * Issue 28: "`cotal space provision` sets `max_bytes` on every bucket and
 * stream where WIRE.md leaves it open (document the values, refuse nothing
 * that exists, and report the difference as it does for other settings)".
 * test_fresh_space_creates_all_streams checks the default budget's values;
 * here another budget scales them (a bucket no higher than 128 MiB), a
 * budget out of range is refused naming --storage, and one the broker
 * cannot reserve is refused in its words, naming --storage.
 */
static void
test_the_storage_budget_sets_max_bytes(void **state)
{
	jsStreamInfo *si = NULL;
	char err[ERR_MAX];
	FILE *f;
	char *report = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(f = open_memstream(&report, &len));
	assert_int_equal(space_provision_storage(g_nc, "budget", 1, INT64_C(16) << 30, f, err,
	    sizeof(err)), 0);
	fclose(f);
	free(report);
	assert_int_equal(js_GetStreamInfo(&si, g_js, "CHAT_budget", NULL, NULL), NATS_OK);
	EXPECT_FIELD("CHAT_budget", "max bytes", si->Config->MaxBytes, INT64_C(17179869) * 300);
	jsStreamInfo_Destroy(si);
	si = NULL;
	assert_int_equal(js_GetStreamInfo(&si, g_js, "KV_cotal_members_budget", NULL, NULL),
	    NATS_OK);
	EXPECT_FIELD("KV_cotal_members_budget", "max bytes", si->Config->MaxBytes,
	    INT64_C(128) << 20);
	jsStreamInfo_Destroy(si);

	assert_int_equal(space_provision_storage(g_nc, "tiny", 1, INT64_C(100) << 20, NULL, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "--storage 104857600 bytes: expected 268435456 (256 MiB) to"));
	assert_false(stream_exists("CHAT_tiny"));

	/* 64 TiB: CHAT alone would reserve 19 TiB of the broker's 1 TB. */
	assert_int_equal(space_provision_storage(g_nc, "huge", 1, INT64_C(64) << 40, NULL, err,
	    sizeof(err)), -1);
	if (strstr(err, "create stream CHAT_huge") == NULL ||
	    strstr(err, "the broker cannot reserve its max_bytes of 21110623253100 bytes") == NULL ||
	    strstr(err, "provision with a smaller --storage") == NULL)
		fail_msg("expected the broker's refusal, naming --storage, in: %s", err);
}

/* "refuse nothing that exists, and report the difference": a stream made
 * before this version (no max_bytes) is kept, and the report says so. */
static void
test_an_existing_stream_without_max_bytes_is_kept_and_reported(void **state)
{
	struct prov_stream ps;
	jsStreamInfo *si = NULL;
	char err[ERR_MAX];
	struct run r;

	(void)state;
	assert_int_equal(provision_stream_expected(PROV_CHAT, "older", 0, &ps, err, sizeof(err)), 0);
	ps.cfg.MaxBytes = -1;
	assert_int_equal(js_AddStream(&si, g_js, &ps.cfg, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);
	si = NULL;
	provision_run(g_nc, "older", &r);
	assert_int_equal(r.rc, 0);
	if (strstr(r.report, "• exists stream CHAT_older\n  ! stream CHAT_older: max bytes "
	    "unlimited (want 1.20 GiB); left as it is (not a conflict)\n") == NULL)
		fail_msg("expected the difference reported in:\n%s", r.report);
	assert_int_equal(count_lines_with(r.report, "✓ created "), STREAMS - 1);
	free(r.report);
	assert_int_equal(js_GetStreamInfo(&si, g_js, "CHAT_older", NULL, NULL), NATS_OK);
	EXPECT_FIELD("CHAT_older", "max bytes", si->Config->MaxBytes, -1);
	jsStreamInfo_Destroy(si);
}

/*
 * Issue 39: "Buckets are sized so that a space's history never makes the
 * broker refuse or discard a row the manager or the daemon writes." The
 * read-ACL bucket keeps a row per lifecycle forever: it has no max_bytes,
 * and the smallest budget's space takes more rows than its old cap (1 %
 * of 256 MiB, 2.56 MiB: about 15,700 such rows) held. A space provisioned
 * before has its cap lifted in place, and the report says so.
 */
#define PAST_OLD_CAP 20000

static void
test_the_read_acl_bucket_is_never_full(void **state)
{
	struct prov_stream ps;
	jsStreamInfo *si = NULL;
	jsPubAck *pa = NULL;
	char err[ERR_MAX], subj[256], want[256];
	const char *tomb = "{\"allowSubscribe\":[\"general\",\"ops.>\"],\"retired\":true}";
	struct run r;

	(void)state;
	assert_int_equal(space_provision_storage(g_nc, "history", 1, PROV_STORAGE_MIN, NULL, err,
	    sizeof(err)), 0);
	assert_int_equal(js_GetStreamInfo(&si, g_js, "KV_cotal_acl_history", NULL, NULL), NATS_OK);
	EXPECT_FIELD("KV_cotal_acl_history", "max bytes", si->Config->MaxBytes, -1);
	jsStreamInfo_Destroy(si);
	si = NULL;
	for (int i = 0; i < PAST_OLD_CAP; i++) {
		snprintf(subj, sizeof(subj), "$KV.cotal_acl_history.u_abcdefghijklmnopqrstuvwxyz."
		    "agent%d.%026d", i, i);
		assert_int_equal(js_PublishAsync(g_js, subj, tomb, (int)strlen(tomb), NULL), NATS_OK);
	}
	assert_int_equal(js_PublishAsyncComplete(g_js, NULL), NATS_OK);
	natsMsgList pending = { 0 };
	int failed = 0;
	if (js_PublishAsyncGetPendingList(&pending, g_js) == NATS_OK) {
		failed = pending.Count;
		natsMsgList_Destroy(&pending);
	}
	assert_int_equal(failed, 0);
	/* One more, acknowledged: the bucket still takes rows. */
	snprintf(subj, sizeof(subj), "$KV.cotal_acl_history.local.last.%026d", 0);
	assert_int_equal(js_Publish(&pa, g_js, subj, tomb, (int)strlen(tomb), NULL, NULL), NATS_OK);
	jsPubAck_Destroy(pa);
	assert_int_equal(js_GetStreamInfo(&si, g_js, "KV_cotal_acl_history", NULL, NULL), NATS_OK);
	assert_int_equal(si->State.Msgs, PAST_OLD_CAP + 1);
	printf("• %d read-ACL rows (%llu bytes) in the bucket of a 256 MiB space; its old cap "
	    "was 2684354 bytes\n", PAST_OLD_CAP + 1, (unsigned long long)si->State.Bytes);
	assert_true(si->State.Bytes > INT64_C(268435456) / 1000 * 10);
	jsStreamInfo_Destroy(si);
	si = NULL;

	/* A space provisioned before: its bucket capped, lifted by the next
	 * provision. */
	assert_int_equal(provision_stream_expected(PROV_KV_ACL, "capped", 0, &ps, err,
	    sizeof(err)), 0);
	ps.cfg.MaxBytes = 42949670;
	assert_int_equal(js_AddStream(&si, g_js, &ps.cfg, NULL, NULL), NATS_OK);
	jsStreamInfo_Destroy(si);
	si = NULL;
	provision_run(g_nc, "capped", &r);
	assert_int_equal(r.rc, 0);
	snprintf(want, sizeof(want), "✓ bucket cotal_acl_capped no longer capped at 42949670 "
	    "bytes: it keeps a row for every lifecycle the space ever had\n");
	if (strstr(r.report, want) == NULL || strstr(r.report, "left as it is") != NULL)
		fail_msg("expected the cap lifted, and said, in:\n%s", r.report);
	free(r.report);
	assert_int_equal(js_GetStreamInfo(&si, g_js, "KV_cotal_acl_capped", NULL, NULL), NATS_OK);
	EXPECT_FIELD("KV_cotal_acl_capped", "max bytes", si->Config->MaxBytes, -1);
	jsStreamInfo_Destroy(si);
	/* And once lifted, the next run has nothing to say of it. */
	provision_run(g_nc, "capped", &r);
	assert_int_equal(r.rc, 0);
	assert_null(strstr(r.report, "no longer capped"));
	free(r.report);
}

static void
test_expected_configs_are_exposed(void **state)
{
	struct prov_stream ps;
	struct prov_consumer pc;
	char err[ERR_MAX], diff[ERR_MAX];
	int k;

	(void)state;
	for (k = 0; k < PROV_STREAM_KINDS; k++) {
		char name[NAME_MAX_T];

		assert_int_equal(provision_stream_expected((enum prov_stream_kind)k, "a.b", 0, &ps, err,
							   sizeof(err)),
				 0);
		wire_stream_name(&wire_streams[k], "a_b", name, sizeof(name));
		assert_string_equal(ps.name, name);
		assert_int_equal(provision_stream_diff(&ps.cfg, &ps.cfg, diff, sizeof(diff)), 0);
		assert_string_equal(diff, "");
	}
	assert_int_equal(provision_stream_expected(PROV_KV_DELIVERY, "", 0, &ps, err, sizeof(err)), 0);
	assert_string_equal(ps.bucket, "cotal_delivery__");
	assert_string_equal(ps.subjects[0], "$KV.cotal_delivery__.>");
	assert_int_equal(provision_stream_expected(PROV_STREAM_KINDS, "a", 0, &ps, err, sizeof(err)),
			 -1);
	assert_int_equal(provision_member_durable_expected("s", "o", "a", UID1, &pc, err, sizeof(err)),
			 0);
	assert_string_equal(pc.stream, "DLV_s");
	assert_string_equal(pc.cfg.Durable, "dlv_o-a-" UID1);
	assert_string_equal(pc.cfg.FilterSubject, "cotal.s.dlv.o.a." UID1);
	assert_int_equal(provision_consumer_diff(&pc.cfg, &pc.cfg, diff, sizeof(diff)), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expected_configs_are_exposed),
		cmocka_unit_test(test_the_storage_budget_sets_max_bytes),
		cmocka_unit_test(test_an_existing_stream_without_max_bytes_is_kept_and_reported),
		cmocka_unit_test(test_the_read_acl_bucket_is_never_full),
		cmocka_unit_test(test_fresh_space_creates_all_streams),
		cmocka_unit_test(test_second_run_is_idempotent),
		cmocka_unit_test(test_conflicting_stream_is_refused_and_untouched),
		cmocka_unit_test(test_every_conflicting_stream_is_named),
		cmocka_unit_test(test_buckets_made_by_nats_c_count_as_existing),
		cmocka_unit_test(test_kv_buckets_bind_and_work),
		cmocka_unit_test(test_member_durable_created_and_idempotent),
		cmocka_unit_test(test_conflicting_member_durable_is_refused),
		cmocka_unit_test(test_member_durable_needs_a_provisioned_space),
		cmocka_unit_test(test_bad_input_is_refused_naming_the_field),
		cmocka_unit_test(test_space_names_past_the_broker_name_limit_are_refused),
		cmocka_unit_test(test_broker_refusal_is_reported_in_its_words),
		cmocka_unit_test_setup_teardown(test_permission_denial_names_the_subject,
						denied_setup, other_teardown),
		cmocka_unit_test_setup_teardown(test_no_jetstream_is_reported, nojs_setup,
						other_teardown),
	};
	int failed;

	failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
	broker_stop_all();
	/* Release nats.c's global state so LeakSanitizer sees only real leaks. */
	if (nats_CloseAndWait(CLOSE_WAIT_MS) != NATS_OK)
		fprintf(stderr, "nats.c objects still alive at exit (a leak in the test path)\n");
	return failed;
}
