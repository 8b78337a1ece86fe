/*
 * The metrics' text (service/exposition.h): status documents, shaped as
 * supervisor/status.c's status_doc() writes them, rendered in the
 * Prometheus text format 0.0.4 and OpenMetrics 1.0, and what /healthz says.
 * Issue 29: "names follow Prometheus' naming conventions: `cotal_delivery_…`,
 * `_total` for counters, base units"; "one endpoint for all lanes, each
 * series labelled with its `space`".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "service/exposition.h"

#define NOW_MS INT64_C(1700000000000)
#define PROMTOOL "/usr/bin/promtool"

/* ---- status documents ---- */

static json_t *
process_cost(json_int_t rss, double cpu)
{
	return json_pack("{s:I, s:f}", "rssBytes", rss, "cpuSeconds", cpu);
}

static json_t *
worker(const char *role, const char *state, json_int_t restarts, json_t *counters)
{
	json_t *w = json_pack("{s:s, s:I, s:s, s:I, s:s, s:o, s:s}", "role", role, "pid",
	    (json_int_t)1000, "state", state, "restarts", restarts, "lastExit", "",
	    "counters", counters, "confinement", "landlock abi 7, seccomp");

	assert_non_null(w);
	return w;
}

/* A document as status_doc() writes it, with the processes' costs added as
 * service/metrics.c adds them. The space serves unless shard says
 * otherwise; its counters are fixed numbers the tests look for. */
static json_t *
status_doc(const char *space, const char *shard)
{
	json_t *workers = json_array(), *doc, *w;

	w = worker("fanout", "connected", 2, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "posts", (json_int_t)4, "copies", (json_int_t)12, "acked", (json_int_t)4, "dropped",
	    (json_int_t)0, "retried", (json_int_t)1, "batches", (json_int_t)3, "violations",
	    (json_int_t)0));
	json_object_set_new(w, "process", process_cost(2097152, 0.25));
	json_array_append_new(workers, w);
	w = worker("reader", "connected", 0, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "entries", (json_int_t)12, "delivered", (json_int_t)11, "denied", (json_int_t)1,
	    "gaveup", (json_int_t)0, "removed", (json_int_t)0, "retried", (json_int_t)0,
	    "batches", (json_int_t)2, "violations", (json_int_t)0));
	json_object_set_new(w, "process", process_cost(3145728, 0.5));
	json_array_append_new(workers, w);
	w = worker("registry", "disconnected", 1, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:I, s:I, s:I, s:I}", "requests", (json_int_t)9, "joins", (json_int_t)3,
	    "leaves", (json_int_t)1, "refused", (json_int_t)2, "inventories", (json_int_t)1,
	    "member_reads", (json_int_t)1, "evictions", (json_int_t)0, "unanswered",
	    (json_int_t)0, "dropped_ctl", (json_int_t)3, "dropped_admin", (json_int_t)0,
	    "dropped_live", (json_int_t)5, "shed", (json_int_t)0, "violations", (json_int_t)1));
	json_array_append_new(workers, w);
	w = worker("timer", "quiesced", 0, json_pack("{s:I, s:I, s:I, s:I, s:I}", "requests",
	    (json_int_t)6, "armed", (json_int_t)2, "fired", (json_int_t)1, "refused",
	    (json_int_t)0, "violations", (json_int_t)0));
	json_array_append_new(workers, w);

	doc = json_pack("{s:I, s:s, s:s, s:s, s:I, s:b, s:I, s:o, s:{s:I, s:I, s:I}, "
	    "s:{s:b, s:I, s:s}, s:[{s:s, s:s, s:I}, {s:s, s:s, s:I}], s:{s:I, s:I}}",
	    "pid", (json_int_t)4242, "space", space, "server", "nats://127.0.0.1:4222",
	    "shard", shard, "shardSince", (json_int_t)(NOW_MS - 60000), "lane", 0,
	    "updatedAt", (json_int_t)(NOW_MS - 100), "workers", workers,
	    "lease", "renewals", (json_int_t)7, "renewalFailures", (json_int_t)1,
	    "lastRenewalAt", (json_int_t)(NOW_MS - 2500),
	    "broker", "connected", 1, "reconnects", (json_int_t)2, "inUse",
	    "nats://127.0.0.1:4222",
	    "credentials",
	    "name", "delivery", "user", "UDELIVERY", "expiresAt", (json_int_t)(NOW_MS + 86400123),
	    "name", "sys-observer", "user", "USYS", "expiresAt", (json_int_t)0,
	    "reloads", "adopted", (json_int_t)1, "refused", (json_int_t)0);
	assert_non_null(doc);
	json_object_set_new(doc, "process", process_cost(1048576, 1.125));
	return doc;
}

static json_t *
worker_of(json_t *doc, const char *role)
{
	json_t *w;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		if (strcmp(json_string_value(json_object_get(w, "role")), role) == 0)
			return w;
	fail_msg("no worker %s", role);
	return NULL;
}

static char *
render(json_t *const *docs, size_t n, bool openmetrics)
{
	size_t len;
	char *text = exposition_render(docs, n, NOW_MS, openmetrics, &len);

	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	return text;
}

/* ---- reading the text ---- */

static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void
assert_line(const char *text, const char *line)
{
	if (!has_line(text, line))
		fail_msg("no line \"%s\" in:\n%s", line, text);
}

/* Lines starting with prefix. */
static int
count_lines(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	int k = 0;

	for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, prefix, n) == 0)
			k++;
	}
	return k;
}

/* The text without its # lines: the samples, in order. */
static char *
samples_of(const char *text)
{
	char *out = calloc(1, strlen(text) + 1), *o = out;

	assert_non_null(out);
	for (const char *p = text; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t n = nl != NULL ? (size_t)(nl - p) + 1 : strlen(p);
		if (*p != '#') {
			memcpy(o, p, n);
			o += n;
		}
		p += n;
	}
	return out;
}

#define FAMILIES_MAX 128
#define SERIES_MAX 1024

/*
 * The exposition's grammar as both formats want it: every line ends in
 * "\n"; a family is "# HELP name text" then "# TYPE name type", once; its
 * samples follow at once, all together, each named as its family is (with
 * "_total" for an OpenMetrics counter, "_info" for an OpenMetrics info,
 * "_bucket", "_sum" or "_count" for a histogram), and
 * no two samples are the same series; OpenMetrics ends "# EOF".
 */
static void
assert_well_formed(const char *text, bool openmetrics)
{
	static char families[FAMILIES_MAX][128], series[SERIES_MAX][512];
	char family[128] = "", type[16] = "";
	size_t nf = 0, ns = 0, len = strlen(text);
	const char *p = text;

	assert_true(len > 0 && text[len - 1] == '\n');
	if (openmetrics) {
		assert_true(len >= 6 && strcmp(text + len - 6, "# EOF\n") == 0);
		assert_int_equal(count_lines(text, "# EOF"), 1);
		len -= 6;
	}
	while (p < text + len) {
		const char *nl = strchr(p, '\n');
		char line[1024], name[128], kind[16];
		size_t n = (size_t)(nl - p);

		assert_true(n < sizeof(line));
		memcpy(line, p, n);
		line[n] = '\0';
		p = nl + 1;
		if (strncmp(line, "# HELP ", 7) == 0) {
			assert_int_equal(sscanf(line + 7, "%127s", name), 1);
			for (size_t f = 0; f < nf; f++)
				if (strcmp(families[f], name) == 0)
					fail_msg("family %s declared twice", name);
			assert_true(nf < FAMILIES_MAX);
			strcpy(families[nf++], name);
			/* Its TYPE line next. */
			nl = strchr(p, '\n');
			n = (size_t)(nl - p);
			assert_true(n < sizeof(line));
			memcpy(line, p, n);
			line[n] = '\0';
			p = nl + 1;
			if (sscanf(line, "# TYPE %127s %15s", family, kind) != 2 ||
			    strcmp(family, name) != 0)
				fail_msg("HELP %s is not followed by its TYPE: %s", name, line);
			assert_true(strcmp(kind, "gauge") == 0 || strcmp(kind, "counter") == 0 ||
			    strcmp(kind, "histogram") == 0 || (openmetrics && strcmp(kind, "info") == 0));
			strcpy(type, kind);
			continue;
		}
		if (line[0] == '#')
			fail_msg("a # line that is neither HELP nor TYPE: %s", line);
		/* A sample of the family declared last. */
		static const char *const histogram_suffixes[] = { "_bucket", "_sum", "_count" };
		size_t nn = strcspn(line, "{ "), fl = strlen(family);
		const char *suffix = line + fl;
		bool named = family[0] != '\0' && nn >= fl && strncmp(line, family, fl) == 0;
		if (named && strcmp(type, "histogram") == 0) {
			bool any = false;
			for (size_t k = 0; k < 3; k++)
				any |= nn - fl == strlen(histogram_suffixes[k]) &&
				    strncmp(suffix, histogram_suffixes[k], nn - fl) == 0;
			named = any;
		} else if (named) {
			const char *want = !openmetrics ? "" : strcmp(type, "counter") == 0 ?
			    "_total" : strcmp(type, "info") == 0 ? "_info" : "";
			named = nn - fl == strlen(want) && strncmp(suffix, want, nn - fl) == 0;
		}
		if (!named)
			fail_msg("sample \"%s\" is not under its family's header (last: %s)", line,
			    family);
		assert_true(line[nn] == '{' && strstr(line, "} ") != NULL);
		*strstr(line, "} ") = '\0';
		for (size_t s = 0; s < ns; s++)
			if (strcmp(series[s], line) == 0)
				fail_msg("series %s} twice", line);
		assert_true(ns < SERIES_MAX && strlen(line) < sizeof(series[0]));
		strcpy(series[ns++], line);
	}
}

/* ---- the tests ---- */

/* "per worker: up, restarts, the counters `cotal status` shows today";
 * "the credential: seconds until expiry"; "seconds since the last
 * renewal"; "process: the supervisor's and each worker's RSS and CPU
 * seconds". */
static void
test_series_have_their_exact_lines(void **state)
{
	json_t *doc = status_doc("s", "serving");
	char *text = render(&doc, 1, false);

	(void)state;
	assert_line(text, "cotal_delivery_build_info{space=\"s\",version=\"" COTAL_VERSION "\"} 1");
	assert_line(text, "cotal_delivery_serving{space=\"s\"} 1");
	assert_line(text, "cotal_delivery_standby{space=\"s\"} 0");
	assert_line(text, "cotal_delivery_lease_renewals_total{space=\"s\"} 7");
	assert_line(text, "cotal_delivery_lease_renewal_failures_total{space=\"s\"} 1");
	/* lastRenewalAt is 2.5 s before now. */
	assert_line(text, "cotal_delivery_lease_seconds_since_renewal{space=\"s\"} 2.500");
	assert_line(text, "cotal_delivery_broker_connected{space=\"s\",connection=\"resident\"} 1");
	assert_line(text, "cotal_delivery_broker_connected{space=\"s\",connection=\"fanout\"} 1");
	assert_line(text, "cotal_delivery_broker_connected{space=\"s\",connection=\"registry\"} 0");
	assert_line(text, "cotal_delivery_broker_reconnects_total{space=\"s\"} 2");
	assert_line(text, "cotal_delivery_broker_server_info{space=\"s\","
	    "server=\"nats://127.0.0.1:4222\"} 1");
	/* (expiresAt - now) / 1000, to the millisecond. */
	assert_line(text, "cotal_delivery_credential_expiry_seconds{space=\"s\","
	    "credential=\"delivery\",user=\"UDELIVERY\"} 86400.123");
	assert_line(text, "cotal_delivery_credential_reloads_total{space=\"s\",outcome=\"adopted\"} 1");
	assert_line(text, "cotal_delivery_credential_reloads_total{space=\"s\",outcome=\"refused\"} 0");
	/* Up is running with the connection up: connected and quiesced are,
	 * disconnected is not. */
	assert_line(text, "cotal_delivery_worker_up{space=\"s\",role=\"fanout\"} 1");
	assert_line(text, "cotal_delivery_worker_up{space=\"s\",role=\"reader\"} 1");
	assert_line(text, "cotal_delivery_worker_up{space=\"s\",role=\"registry\"} 0");
	assert_line(text, "cotal_delivery_worker_up{space=\"s\",role=\"timer\"} 1");
	assert_line(text, "cotal_delivery_worker_restarts_total{space=\"s\",role=\"fanout\"} 2");
	assert_line(text, "cotal_delivery_worker_restarts_total{space=\"s\",role=\"registry\"} 1");
	assert_line(text, "cotal_delivery_fanout_posts_total{space=\"s\"} 4");
	assert_line(text, "cotal_delivery_fanout_copies_total{space=\"s\"} 12");
	assert_line(text, "cotal_delivery_reader_delivered_total{space=\"s\"} 11");
	assert_line(text, "cotal_delivery_reader_denied_total{space=\"s\"} 1");
	assert_line(text, "cotal_delivery_reader_gave_up_total{space=\"s\"} 0");
	assert_line(text, "cotal_delivery_registry_joins_total{space=\"s\"} 3");
	assert_line(text, "cotal_delivery_registry_member_reads_total{space=\"s\"} 1");
	assert_line(text, "cotal_delivery_registry_dropped_total{space=\"s\",rail=\"ctl\"} 3");
	assert_line(text, "cotal_delivery_registry_dropped_total{space=\"s\",rail=\"live\"} 5");
	assert_line(text, "cotal_delivery_timer_armed_total{space=\"s\"} 2");
	assert_line(text, "cotal_delivery_violations_total{space=\"s\",role=\"registry\"} 1");
	assert_line(text, "cotal_delivery_violations_total{space=\"s\",role=\"timer\"} 0");
	assert_line(text, "cotal_delivery_process_resident_memory_bytes{space=\"s\","
	    "process=\"supervisor\"} 1048576");
	assert_line(text, "cotal_delivery_process_resident_memory_bytes{space=\"s\","
	    "process=\"reader\"} 3145728");
	assert_line(text, "cotal_delivery_process_cpu_seconds_total{space=\"s\","
	    "process=\"supervisor\"} 1.125");
	assert_line(text, "cotal_delivery_process_cpu_seconds_total{space=\"s\","
	    "process=\"fanout\"} 0.250");
	/* A credential past its expiry reads negative. */
	free(text);
	json_object_set_new(json_array_get(json_object_get(doc, "credentials"), 0), "expiresAt",
	    json_integer(NOW_MS - 1500));
	text = render(&doc, 1, false);
	assert_line(text, "cotal_delivery_credential_expiry_seconds{space=\"s\","
	    "credential=\"delivery\",user=\"UDELIVERY\"} -1.500");
	free(text);
	json_decref(doc);
}

/* The text format: each family has one HELP and one TYPE line, and they
 * precede its samples. */
static void
test_each_family_is_declared_once_before_its_samples(void **state)
{
	json_t *docs[2] = { status_doc("a", "serving"), status_doc("b", "standby") };

	(void)state;
	for (int om = 0; om <= 1; om++) {
		char *one = render(docs, 1, om), *two = render(docs, 2, om);
		assert_well_formed(one, om);
		assert_well_formed(two, om);
		assert_int_equal(count_lines(one, "# HELP "), count_lines(two, "# HELP "));
		assert_int_equal(count_lines(one, "# HELP "), count_lines(one, "# TYPE "));
		free(one);
		free(two);
	}
	json_decref(docs[0]);
	json_decref(docs[1]);
}

/* "a host's one endpoint holds every lane's": two spaces' samples under
 * one family header, each with its space. */
static void
test_two_spaces_share_one_family_header(void **state)
{
	json_t *docs[2] = { status_doc("a", "serving"), status_doc("b", "standby") };
	char *text;
	const char *fam, *next;

	(void)state;
	json_object_set_new(json_object_get(worker_of(docs[1], "fanout"), "counters"), "copies",
	    json_integer(30));
	text = render(docs, 2, false);
	assert_int_equal(count_lines(text, "# TYPE cotal_delivery_fanout_copies_total "), 1);
	assert_non_null(fam = strstr(text, "# TYPE cotal_delivery_fanout_copies_total counter\n"));
	assert_non_null(next = strstr(fam + 1, "# HELP "));
	const char *a = strstr(fam, "\ncotal_delivery_fanout_copies_total{space=\"a\"} 12\n");
	const char *b = strstr(fam, "\ncotal_delivery_fanout_copies_total{space=\"b\"} 30\n");
	assert_true(a != NULL && a < next);
	assert_true(b != NULL && b < next);
	assert_line(text, "cotal_delivery_serving{space=\"a\"} 1");
	assert_line(text, "cotal_delivery_serving{space=\"b\"} 0");
	assert_line(text, "cotal_delivery_standby{space=\"b\"} 1");
	assert_int_equal(count_lines(text, "cotal_delivery_worker_up{space=\"a\","), 4);
	assert_int_equal(count_lines(text, "cotal_delivery_worker_up{space=\"b\","), 4);
	free(text);
	json_decref(docs[0]);
	json_decref(docs[1]);
}

/* "A label value, escaped as both formats want: \\, \" and \n." */
static void
test_label_values_are_escaped(void **state)
{
	json_t *doc = status_doc("we\"ird\\sp\nace", "serving");

	(void)state;
	for (int om = 0; om <= 1; om++) {
		char *text = render(&doc, 1, om);
		assert_line(text, "cotal_delivery_serving{space=\"we\\\"ird\\\\sp\\nace\"} 1");
		assert_line(text, "cotal_delivery_fanout_copies_total{space=\"we\\\"ird\\\\sp\\nace\"} 12");
		/* Nothing raw got through: every line is a header or a sample. */
		assert_well_formed(text, om);
		free(text);
	}
	json_decref(doc);
}

/* "an OpenMetrics counter family is named without its samples' "_total",
 * an info family without "_info" (type info), and the text ends "# EOF"";
 * the samples are the same. */
static void
test_openmetrics_differs_in_family_lines_only(void **state)
{
	json_t *docs[2] = { status_doc("a", "serving"), status_doc("b", "rechecking") };
	char *text = render(docs, 2, false), *om = render(docs, 2, true);
	char *ts, *os;

	(void)state;
	assert_line(text, "# TYPE cotal_delivery_fanout_copies_total counter");
	assert_line(om, "# TYPE cotal_delivery_fanout_copies counter");
	assert_line(om, "# HELP cotal_delivery_fanout_copies Copies the fan-out wrote into "
	    "members' INBOX stores.");
	assert_line(om, "cotal_delivery_fanout_copies_total{space=\"a\"} 12");
	assert_line(text, "# TYPE cotal_delivery_build_info gauge");
	assert_line(om, "# TYPE cotal_delivery_build info");
	assert_line(text, "# TYPE cotal_delivery_broker_server_info gauge");
	assert_line(om, "# TYPE cotal_delivery_broker_server info");
	assert_line(om, "cotal_delivery_broker_server_info{space=\"b\",server=\"nats://127.0.0.1:4222\"} 1");
	assert_line(om, "# TYPE cotal_delivery_process_cpu_seconds counter");
	assert_line(om, "# TYPE cotal_delivery_serving gauge");
	assert_int_equal(count_lines(om, "# TYPE cotal_delivery_fanout_copies_total"), 0);
	assert_int_equal(count_lines(text, "# EOF"), 0);
	assert_true(strcmp(om + strlen(om) - 6, "# EOF\n") == 0);
	ts = samples_of(text);
	os = samples_of(om);
	assert_string_equal(ts, os);
	free(ts);
	free(os);
	free(text);
	free(om);
	json_decref(docs[0]);
	json_decref(docs[1]);
}

/* "A field a document lacks leaves its series out; nothing is invented." */
static void
test_a_missing_field_leaves_its_series_out(void **state)
{
	json_t *doc = status_doc("s", "serving"), *bare;
	char *text, *samples;

	(void)state;
	/* No renewal yet: no seconds since one. */
	json_object_set_new(json_object_get(doc, "lease"), "lastRenewalAt", json_integer(0));
	/* A credential that never expires: no expiry. */
	json_object_set_new(json_array_get(json_object_get(doc, "credentials"), 0), "expiresAt",
	    json_integer(0));
	/* Not connected: no server in use. */
	json_object_set_new(json_object_get(doc, "broker"), "inUse", json_string(""));
	json_object_del(json_object_get(doc, "broker"), "connected");
	json_object_del(json_object_get(doc, "reloads"), "refused");
	json_object_del(doc, "process");
	json_object_del(worker_of(doc, "reader"), "process");
	json_object_del(worker_of(doc, "fanout"), "restarts");
	json_object_del(json_object_get(worker_of(doc, "fanout"), "counters"), "copies");
	json_object_del(json_object_get(worker_of(doc, "registry"), "counters"), "dropped_ctl");
	text = render(&doc, 1, false);
	assert_well_formed(text, false);
	assert_int_equal(count_lines(text, "cotal_delivery_lease_seconds_since_renewal{"), 0);
	assert_int_equal(count_lines(text, "cotal_delivery_credential_expiry_seconds{"), 0);
	assert_int_equal(count_lines(text, "cotal_delivery_broker_server_info{"), 0);
	assert_int_equal(count_lines(text, "cotal_delivery_broker_connected{space=\"s\","
	    "connection=\"resident\"}"), 0);
	assert_int_equal(count_lines(text, "cotal_delivery_credential_reloads_total{"), 1);
	assert_int_equal(count_lines(text, "cotal_delivery_process_resident_memory_bytes{"), 1);
	assert_line(text, "cotal_delivery_process_resident_memory_bytes{space=\"s\","
	    "process=\"fanout\"} 2097152");
	assert_int_equal(count_lines(text, "cotal_delivery_worker_restarts_total{space=\"s\","
	    "role=\"fanout\"}"), 0);
	assert_int_equal(count_lines(text, "cotal_delivery_fanout_copies_total{"), 0);
	assert_line(text, "cotal_delivery_fanout_posts_total{space=\"s\"} 4");
	assert_int_equal(count_lines(text, "cotal_delivery_registry_dropped_total{space=\"s\","
	    "rail=\"ctl\"}"), 0);
	/* The family is still declared, its other rails still there. */
	assert_line(text, "# TYPE cotal_delivery_registry_dropped_total counter");
	assert_line(text, "cotal_delivery_registry_dropped_total{space=\"s\",rail=\"admin\"} 0");
	free(text);
	json_decref(doc);

	/* A document with only a space and its shard: the daemon's state and
	 * when it was taken, no more. */
	bare = json_pack("{s:s, s:s}", "space", "s", "shard", "claiming");
	text = render(&bare, 1, false);
	assert_well_formed(text, false);
	samples = samples_of(text);
	assert_string_equal(samples,
	    "cotal_delivery_build_info{space=\"s\",version=\"" COTAL_VERSION "\"} 1\n"
	    "cotal_delivery_snapshot_timestamp_seconds{space=\"s\"} 1700000000.000\n"
	    "cotal_delivery_serving{space=\"s\"} 0\n"
	    "cotal_delivery_standby{space=\"s\"} 0\n");
	free(samples);
	free(text);
	json_decref(bare);
}

/* "200 when every one is serving under a ready lease, else 503; the
 * one-line reason either way." */
static void
test_health_says_which_space_does_not_serve(void **state)
{
	json_t *docs[3] = { status_doc("a", "serving"), status_doc("b", "standby"),
		status_doc("c", "claiming") };
	json_t *one = status_doc("s", "serving"), *bare;
	char reason[256], small[24];

	(void)state;
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 200);
	assert_string_equal(reason, "serving space s");
	json_object_set_new(one, "shard", json_string("rechecking"));
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "not serving: the space s (rechecking)");
	json_object_del(one, "shard");
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "not serving: the space s (no state)");

	json_object_set_new(docs[1], "shard", json_string("serving"));
	assert_int_equal(exposition_health(docs, 2, reason, sizeof(reason)), 200);
	assert_string_equal(reason, "serving all 2 spaces");
	json_object_set_new(docs[1], "shard", json_string("standby"));
	assert_int_equal(exposition_health(docs, 2, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "not serving: space b (standby)");
	assert_int_equal(exposition_health(docs, 3, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "not serving: space b (standby), space c (claiming)");
	/* A reason longer than its buffer is cut, still one C string. */
	memset(small, 'x', sizeof(small));
	assert_int_equal(exposition_health(docs, 3, small, sizeof(small)), 503);
	assert_string_equal(small, "not serving: space b (s");

	assert_int_equal(exposition_health(NULL, 0, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "not serving: no space");

	/* Issue 42: serving with a role down is not healthy, and says which
	 * role, and whether it is crash-looping. */
	json_t *reader = json_array_get(json_object_get(one, "workers"), 1);
	json_object_set_new(one, "shard", json_string("serving"));
	json_object_set_new(reader, "state", json_string("down"));
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "degraded: the space s without its reader worker (down, "
	    "restarting)");
	json_object_set_new(reader, "crashLooping", json_true());
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 503);
	assert_string_equal(reason, "degraded: the space s without its reader worker (down, "
	    "crash-looping)");
	json_object_set_new(reader, "state", json_string("connected"));
	assert_int_equal(exposition_health(&one, 1, reason, sizeof(reason)), 200);

	bare = json_pack("{s:s, s:s}", "space", "s", "shard", "serving");
	assert_int_equal(exposition_health(&bare, 1, reason, sizeof(reason)), 200);
	json_decref(bare);
	json_decref(one);
	for (int i = 0; i < 3; i++)
		json_decref(docs[i]);
}

/* "`promtool check metrics` on a scrape": a two-space rendering. Skipped
 * only where promtool is not installed. */
static void
test_a_rendering_passes_promtool(void **state)
{
	json_t *docs[2] = { status_doc("a", "serving"), status_doc("b", "standby") };
	char dir[] = "/tmp/test_exposition.XXXXXX", path[2][64], cmd[256];
	const char *names[2] = { "text.prom", "openmetrics.txt" };

	(void)state;
	if (access(PROMTOOL, X_OK) != 0) {
		json_decref(docs[0]);
		json_decref(docs[1]);
		skip();
	}
	assert_non_null(mkdtemp(dir));
	for (int om = 0; om <= 1; om++) {
		char *text = render(docs, 2, om);
		FILE *f;
		snprintf(path[om], sizeof(path[om]), "%s/%s", dir, names[om]);
		assert_non_null(f = fopen(path[om], "w"));
		assert_int_equal(fputs(text, f) >= 0, 1);
		assert_int_equal(fclose(f), 0);
		free(text);
	}
	snprintf(cmd, sizeof(cmd), PROMTOOL " check metrics < %s", path[0]);
	int rc = system(cmd);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	for (int om = 0; om <= 1; om++)
		assert_int_equal(unlink(path[om]), 0);
	assert_int_equal(rmdir(dir), 0);
	json_decref(docs[0]);
	json_decref(docs[1]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_series_have_their_exact_lines),
		cmocka_unit_test(test_each_family_is_declared_once_before_its_samples),
		cmocka_unit_test(test_two_spaces_share_one_family_header),
		cmocka_unit_test(test_label_values_are_escaped),
		cmocka_unit_test(test_openmetrics_differs_in_family_lines_only),
		cmocka_unit_test(test_a_missing_field_leaves_its_series_out),
		cmocka_unit_test(test_health_says_which_space_does_not_serve),
		cmocka_unit_test(test_a_rendering_passes_promtool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
