/*
 * The metrics' text (service/exposition.h): status documents to the
 * Prometheus text format 0.0.4 or OpenMetrics 1.0. Runs in the supervisor
 * and in a delivery host; pure.
 *
 * The two formats differ here only in a family's name and type lines: an
 * OpenMetrics counter family is named without its samples' "_total", an
 * info family without "_info" (type info), and the text ends "# EOF".
 */
#include "service/exposition.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

#ifndef COTAL_VERSION
#define COTAL_VERSION "unknown"
#endif

enum kind { GAUGE, COUNTER, INFO };

struct out {
	char *p;
	size_t len, cap;
	bool om;
};

static void
put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			fatalx("exposition: a line cannot be formatted");
		if ((size_t)n < o->cap - o->len)
			break;
		size_t cap = o->cap * 2 + (size_t)n;
		char *p = realloc(o->p, cap);
		if (p == NULL)
			fatalx("out of memory");
		o->p = p;
		o->cap = cap;
	}
	o->len += (size_t)n;
}

/* A label value, escaped as both formats want: \\, \" and \n. */
static void
put_value(struct out *o, const char *v)
{
	put(o, "\"");
	for (; v != NULL && *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			put(o, "\\%c", *v);
		else if (*v == '\n')
			put(o, "\\n");
		else
			put(o, "%c", *v);
	}
	put(o, "\"");
}

static void
family(struct out *o, const char *sample, enum kind k, const char *help)
{
	size_t n = strlen(sample);

	if (o->om && k == COUNTER)
		n -= strlen("_total");
	if (o->om && k == INFO)
		n -= strlen("_info");
	put(o, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)n, sample, help, (int)n, sample,
	    k == COUNTER ? "counter" : k == INFO && o->om ? "info" : "gauge");
}

/* One sample: name{space="…"[,k="v"]…} value. The labels after space come
 * in pairs, NULL-terminated. */
static void
sample(struct out *o, const char *name, const char *space, double v, int integral, ...)
{
	va_list ap;
	const char *k;

	put(o, "%s{space=", name);
	put_value(o, space);
	va_start(ap, integral);
	while ((k = va_arg(ap, const char *)) != NULL) {
		put(o, ",%s=", k);
		put_value(o, va_arg(ap, const char *));
	}
	va_end(ap);
	if (integral)
		put(o, "} %.0f\n", v);
	else
		put(o, "} %.3f\n", v);
}

static const char *
str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

static bool
num(json_t *o, const char *key, double *v)
{
	json_t *j = json_object_get(o, key);

	if (!json_is_number(j))
		return false;
	*v = json_number_value(j);
	return true;
}

/* A worker whose broker connection is up: running, and connected or
 * quiesced (a quiesced worker keeps its connection). */
static bool
worker_connected(json_t *w)
{
	const char *st = str(w, "state");

	return strcmp(st, "connected") == 0 || strcmp(st, "quiesced") == 0;
}

/* ---- the workers' counters ---- */

static const struct counter_row {
	const char *role, *key, *metric, *help;
	const char *label, *value; /* a label the row adds, or NULL */
} counter_rows[] = {
	{ "fanout", "posts", "cotal_delivery_fanout_posts_total",
	    "Posts of durable channels the fan-out fetched from CHAT.", NULL, NULL },
	{ "fanout", "copies", "cotal_delivery_fanout_copies_total",
	    "Copies the fan-out wrote into members' INBOX stores.", NULL, NULL },
	{ "fanout", "acked", "cotal_delivery_fanout_acked_total",
	    "Posts acknowledged once every member's copy was written.", NULL, NULL },
	{ "fanout", "dropped", "cotal_delivery_fanout_dropped_total",
	    "Posts acknowledged without any copy: not of the chat shape, undecodable, or not "
	    "sent by who they claim.", NULL, NULL },
	{ "fanout", "retried", "cotal_delivery_fanout_retried_total",
	    "Posts the fan-out left to be delivered again after a failure.", NULL, NULL },
	{ "fanout", "batches", "cotal_delivery_fanout_batches_total",
	    "Fetches of the fan-out's durable consumer that returned posts.", NULL, NULL },
	{ "fanout", "replayed", "cotal_delivery_fanout_replayed_total",
	    "Posts handed over again after they were acked (the broker lost the acks), acked "
	    "again without a second copy.", NULL, NULL },
	{ "reader", "entries", "cotal_delivery_reader_entries_total",
	    "INBOX entries the reader fetched.", NULL, NULL },
	{ "reader", "delivered", "cotal_delivery_reader_delivered_total",
	    "Entries re-authorized and written to the member's DLV consumer.", NULL, NULL },
	{ "reader", "denied", "cotal_delivery_reader_denied_total",
	    "Entries refused: the member's current read ACL or membership interval denies "
	    "them.", NULL, NULL },
	{ "reader", "gaveup", "cotal_delivery_reader_gave_up_total",
	    "Entries given up after their last retry (they stay in INBOX).", NULL, NULL },
	{ "reader", "removed", "cotal_delivery_reader_removed_total",
	    "Entries removed without delivery (the membership row is gone).", NULL, NULL },
	{ "reader", "retried", "cotal_delivery_reader_retried_total",
	    "Entries left to be read again after a failure.", NULL, NULL },
	{ "reader", "batches", "cotal_delivery_reader_batches_total",
	    "Fetches of the reader's durable consumer that returned entries.", NULL, NULL },
	{ "reader", "replayed", "cotal_delivery_reader_replayed_total",
	    "Entries handed over again after they were acked (the broker lost the acks), acked "
	    "again without a second frame.", NULL, NULL },
	{ "registry", "requests", "cotal_delivery_registry_requests_total",
	    "Requests on the delivery rails.", NULL, NULL },
	{ "registry", "joins", "cotal_delivery_registry_joins_total",
	    "durableJoin requests that wrote a membership row.", NULL, NULL },
	{ "registry", "leaves", "cotal_delivery_registry_leaves_total",
	    "durableLeave requests that closed a membership row.", NULL, NULL },
	{ "registry", "refused", "cotal_delivery_registry_refused_total",
	    "Requests refused (bad request, a bound, not allowed, re-checking).", NULL, NULL },
	{ "registry", "inventories", "cotal_delivery_registry_inventories_total",
	    "Inventories the manager took (lifecycleMemberships).", NULL, NULL },
	{ "registry", "member_reads", "cotal_delivery_registry_member_reads_total",
	    "Reads of the membership registry that answered requests (one per listMemberships, "
	    "one per group of inventories answered together).", NULL, NULL },
	{ "registry", "evictions", "cotal_delivery_registry_evictions_total",
	    "Connections evicted through $SYS (a retired lifecycle).", NULL, NULL },
	{ "registry", "unanswered", "cotal_delivery_registry_unanswered_total",
	    "Requests dropped without an answer (no reply subject, or a forged one).", NULL,
	    NULL },
	{ "registry", "dropped_ctl", "cotal_delivery_registry_dropped_total",
	    "Requests the client library dropped because a rail fell behind.", "rail", "ctl" },
	{ "registry", "dropped_admin", "cotal_delivery_registry_dropped_total", NULL, "rail",
	    "admin" },
	{ "registry", "dropped_live", "cotal_delivery_registry_dropped_total", NULL, "rail",
	    "live" },
	{ "registry", "shed", "cotal_delivery_registry_shed_total",
	    "Requests of a caller past its share dropped without an answer.", NULL, NULL },
	{ "timer", "requests", "cotal_delivery_timer_requests_total",
	    "Requests to the timer writer.", NULL, NULL },
	{ "timer", "armed", "cotal_delivery_timer_armed_total",
	    "Checkpoint timers armed.", NULL, NULL },
	{ "timer", "fired", "cotal_delivery_timer_fired_total",
	    "Checkpoint timers that fired.", NULL, NULL },
	{ "timer", "refused", "cotal_delivery_timer_refused_total",
	    "Timer requests refused.", NULL, NULL },
	{ "fanout", "violations", "cotal_delivery_violations_total",
	    "Permission violations the broker reported on a worker's connection.", "role",
	    "fanout" },
	{ "reader", "violations", "cotal_delivery_violations_total", NULL, "role", "reader" },
	{ "registry", "violations", "cotal_delivery_violations_total", NULL, "role",
	    "registry" },
	{ "timer", "violations", "cotal_delivery_violations_total", NULL, "role", "timer" },
};

static void
worker_counters(struct out *o, json_t *const *docs, size_t n)
{
	const size_t rows = sizeof(counter_rows) / sizeof(counter_rows[0]);

	for (size_t r = 0; r < rows; r++) {
		const struct counter_row *c = &counter_rows[r];
		if (c->help != NULL)
			family(o, c->metric, COUNTER, c->help);
		for (size_t d = 0; d < n; d++) {
			json_t *w;
			size_t i;
			double v;
			json_array_foreach(json_object_get(docs[d], "workers"), i, w) {
				if (strcmp(str(w, "role"), c->role) != 0 ||
				    !num(json_object_get(w, "counters"), c->key, &v))
					continue;
				sample(o, c->metric, str(docs[d], "space"), v, true, c->label, c->value,
				    NULL);
			}
		}
	}
}

/* ---- the families ---- */

static void
daemon_state(struct out *o, json_t *const *docs, size_t n, int64_t now_ms)
{
	family(o, "cotal_delivery_build_info", INFO, "The delivery daemon's version.");
	for (size_t d = 0; d < n; d++)
		sample(o, "cotal_delivery_build_info", str(docs[d], "space"), 1, true, "version",
		    COTAL_VERSION, NULL);
	family(o, "cotal_delivery_snapshot_timestamp_seconds", GAUGE,
	    "When these figures were taken (Unix time): a scrape serves the last snapshot, so "
	    "time() minus this says how stale they are.");
	for (size_t d = 0; d < n; d++)
		sample(o, "cotal_delivery_snapshot_timestamp_seconds", str(docs[d], "space"),
		    (double)now_ms / 1000.0, false, NULL);
	family(o, "cotal_delivery_serving", GAUGE,
	    "1 while this daemon serves the space under a ready lease.");
	for (size_t d = 0; d < n; d++)
		sample(o, "cotal_delivery_serving", str(docs[d], "space"),
		    strcmp(str(docs[d], "shard"), "serving") == 0, true, NULL);
	family(o, "cotal_delivery_standby", GAUGE,
	    "1 while this daemon waits as a standby for the space's lease.");
	for (size_t d = 0; d < n; d++)
		sample(o, "cotal_delivery_standby", str(docs[d], "space"),
		    strcmp(str(docs[d], "shard"), "standby") == 0, true, NULL);
}

static void
lease(struct out *o, json_t *const *docs, size_t n, int64_t now_ms)
{
	double v;

	family(o, "cotal_delivery_lease_renewals_total", COUNTER,
	    "Renewals of the space's lease row that the broker took.");
	for (size_t d = 0; d < n; d++)
		if (num(json_object_get(docs[d], "lease"), "renewals", &v))
			sample(o, "cotal_delivery_lease_renewals_total", str(docs[d], "space"), v,
			    true, NULL);
	family(o, "cotal_delivery_lease_renewal_failures_total", COUNTER,
	    "Renewals of the lease row that failed.");
	for (size_t d = 0; d < n; d++)
		if (num(json_object_get(docs[d], "lease"), "renewalFailures", &v))
			sample(o, "cotal_delivery_lease_renewal_failures_total", str(docs[d], "space"),
			    v, true, NULL);
	family(o, "cotal_delivery_lease_seconds_since_renewal", GAUGE,
	    "Seconds since the lease row was last renewed (none before the first renewal).");
	for (size_t d = 0; d < n; d++)
		if (num(json_object_get(docs[d], "lease"), "lastRenewalAt", &v) && v > 0)
			sample(o, "cotal_delivery_lease_seconds_since_renewal", str(docs[d], "space"),
			    (double)(now_ms - (int64_t)v) / 1000.0, false, NULL);
}

static void
broker(struct out *o, json_t *const *docs, size_t n)
{
	json_t *b, *w, *c;
	size_t i;
	double v;

	family(o, "cotal_delivery_broker_connected", GAUGE,
	    "1 while a connection of the daemon to the broker is up (connection: resident, "
	    "or a worker's role).");
	for (size_t d = 0; d < n; d++) {
		const char *space = str(docs[d], "space");
		b = json_object_get(docs[d], "broker");
		if ((c = json_object_get(b, "connected")) != NULL && json_is_boolean(c))
			sample(o, "cotal_delivery_broker_connected", space, json_is_true(c), true,
			    "connection", "resident", NULL);
		json_array_foreach(json_object_get(docs[d], "workers"), i, w)
			sample(o, "cotal_delivery_broker_connected", space, worker_connected(w), true,
			    "connection", str(w, "role"), NULL);
	}
	family(o, "cotal_delivery_broker_reconnects_total", COUNTER,
	    "Times the resident connection came back after a loss.");
	for (size_t d = 0; d < n; d++)
		if (num(json_object_get(docs[d], "broker"), "reconnects", &v))
			sample(o, "cotal_delivery_broker_reconnects_total", str(docs[d], "space"), v,
			    true, NULL);
	family(o, "cotal_delivery_broker_server_info", INFO,
	    "The broker server the resident connection uses.");
	for (size_t d = 0; d < n; d++) {
		const char *url = str(json_object_get(docs[d], "broker"), "inUse");
		if (url[0] != '\0')
			sample(o, "cotal_delivery_broker_server_info", str(docs[d], "space"), 1, true,
			    "server", url, NULL);
	}
}

static void
credentials(struct out *o, json_t *const *docs, size_t n, int64_t now_ms)
{
	json_t *c, *r;
	size_t i;
	double v;

	family(o, "cotal_delivery_credential_expiry_seconds", GAUGE,
	    "Seconds until a credential the daemon holds expires (none for one that never "
	    "does); negative once expired.");
	for (size_t d = 0; d < n; d++)
		json_array_foreach(json_object_get(docs[d], "credentials"), i, c)
			if (num(c, "expiresAt", &v) && v > 0)
				sample(o, "cotal_delivery_credential_expiry_seconds",
				    str(docs[d], "space"), (v - (double)now_ms) / 1000.0, false,
				    "credential", str(c, "name"), "user", str(c, "user"), NULL);
	family(o, "cotal_delivery_credential_reloads_total", COUNTER,
	    "Renewed credentials adopted, and candidates refused (reloadCreds and the "
	    "daemon's own re-read).");
	for (size_t d = 0; d < n; d++) {
		r = json_object_get(docs[d], "reloads");
		if (num(r, "adopted", &v))
			sample(o, "cotal_delivery_credential_reloads_total", str(docs[d], "space"), v,
			    true, "outcome", "adopted", NULL);
		if (num(r, "refused", &v))
			sample(o, "cotal_delivery_credential_reloads_total", str(docs[d], "space"), v,
			    true, "outcome", "refused", NULL);
	}
}

static void
workers(struct out *o, json_t *const *docs, size_t n)
{
	json_t *w;
	size_t i;
	double v;

	family(o, "cotal_delivery_worker_up", GAUGE,
	    "1 while a worker runs with its broker connection up.");
	for (size_t d = 0; d < n; d++)
		json_array_foreach(json_object_get(docs[d], "workers"), i, w)
			sample(o, "cotal_delivery_worker_up", str(docs[d], "space"), worker_connected(w),
			    true, "role", str(w, "role"), NULL);
	family(o, "cotal_delivery_worker_restarts_total", COUNTER,
	    "Times the supervisor restarted a worker.");
	for (size_t d = 0; d < n; d++)
		json_array_foreach(json_object_get(docs[d], "workers"), i, w)
			if (num(w, "restarts", &v))
				sample(o, "cotal_delivery_worker_restarts_total", str(docs[d], "space"), v,
				    true, "role", str(w, "role"), NULL);
	worker_counters(o, docs, n);
}

/* ---- the data path's lag and latency ---- */

/* The worker of role in doc, or NULL. */
static json_t *
worker_of(json_t *doc, const char *role)
{
	json_t *w;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		if (strcmp(str(w, "role"), role) == 0)
			return w;
	return NULL;
}

static void
lag(struct out *o, json_t *const *docs, size_t n, int64_t now_ms)
{
	static const char *const consumers[] = { "fanout", "reader" };
	static const char *const rails[][2] = { { "waiting_ctl", "ctl" },
		{ "waiting_admin", "admin" }, { "waiting_inventory", "inventory" } };
	double v;

	family(o, "cotal_delivery_consumer_pending_messages", GAUGE,
	    "Messages the worker's durable consumer has still to deliver, and the batch it "
	    "works on (consumer: fanout on CHAT, reader on INBOX).");
	for (size_t d = 0; d < n; d++)
		for (size_t c = 0; c < 2; c++)
			if (num(json_object_get(worker_of(docs[d], consumers[c]), "gauges"), "pending",
			    &v))
				sample(o, "cotal_delivery_consumer_pending_messages", str(docs[d], "space"),
				    v, true, "consumer", consumers[c], NULL);
	family(o, "cotal_delivery_consumer_oldest_unacked_age_seconds", GAUGE,
	    "Age of the oldest message of the batch the worker has fetched and not yet "
	    "acknowledged; 0 while it holds none.");
	for (size_t d = 0; d < n; d++)
		for (size_t c = 0; c < 2; c++)
			if (num(json_object_get(worker_of(docs[d], consumers[c]), "gauges"), "oldest_at",
			    &v))
				sample(o, "cotal_delivery_consumer_oldest_unacked_age_seconds",
				    str(docs[d], "space"), v > 0 && now_ms > (int64_t)v ?
				    (double)(now_ms - (int64_t)v) / 1000.0 : 0, false, "consumer",
				    consumers[c], NULL);
	family(o, "cotal_delivery_registry_caller_refusals_total", COUNTER,
	    "Requests of the callers refused most on the agents' rail past their share "
	    "(answered or shed), since the registry started: its ten most refused.");
	for (size_t d = 0; d < n; d++) {
		json_t *e;
		size_t i;
		json_array_foreach(json_object_get(worker_of(docs[d], "registry"), "refusedBy"), i,
		    e)
			if (num(e, "count", &v))
				sample(o, "cotal_delivery_registry_caller_refusals_total",
				    str(docs[d], "space"), v, true, "principal", str(e, "principal"),
				    NULL);
	}
	family(o, "cotal_delivery_registry_waiting_requests", GAUGE,
	    "Requests waiting in the registry's queues (rail: ctl, admin, inventory).");
	for (size_t d = 0; d < n; d++)
		for (size_t r = 0; r < 3; r++)
			if (num(json_object_get(worker_of(docs[d], "registry"), "gauges"), rails[r][0],
			    &v))
				sample(o, "cotal_delivery_registry_waiting_requests", str(docs[d], "space"),
				    v, true, "rail", rails[r][1], NULL);
}

/* One worker's latency histogram as a Prometheus histogram (cumulative
 * buckets, +Inf, sum, count). */
static void
histogram(struct out *o, json_t *const *docs, size_t n, const char *role, const char *name,
    const char *help)
{
	char bucket[128], sum[128], count[128], le[32];

	snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	snprintf(sum, sizeof(sum), "%s_sum", name);
	snprintf(count, sizeof(count), "%s_count", name);
	put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t d = 0; d < n; d++) {
		json_t *lat = json_object_get(worker_of(docs[d], role), "latency");
		json_t *buckets = json_object_get(lat, "buckets"), *bounds = json_object_get(lat,
		    "boundsMs");
		double total = 0, s;
		if (!json_is_array(buckets) || json_array_size(buckets) !=
		    json_array_size(bounds) + 1 || !num(lat, "sumSeconds", &s))
			continue;
		for (size_t b = 0; b < json_array_size(buckets); b++) {
			total += json_number_value(json_array_get(buckets, b));
			if (b < json_array_size(bounds))
				snprintf(le, sizeof(le), "%g",
				    json_number_value(json_array_get(bounds, b)) / 1000.0);
			else
				snprintf(le, sizeof(le), "+Inf");
			sample(o, bucket, str(docs[d], "space"), total, true, "le", le, NULL);
		}
		sample(o, sum, str(docs[d], "space"), s, false, NULL);
		sample(o, count, str(docs[d], "space"), total, true, NULL);
	}
}

static void
processes(struct out *o, json_t *const *docs, size_t n)
{
	static const struct {
		const char *key, *metric, *help;
		enum kind kind;
		bool integral;
	} costs[] = {
		{ "rssBytes", "cotal_delivery_process_resident_memory_bytes",
		    "Resident memory of the supervisor and each worker, in bytes.", GAUGE, true },
		{ "cpuSeconds", "cotal_delivery_process_cpu_seconds_total",
		    "CPU time (user and system) of the supervisor and each worker.", COUNTER,
		    false },
	};
	json_t *w;
	size_t i;
	double v;

	for (size_t k = 0; k < 2; k++) {
		family(o, costs[k].metric, costs[k].kind, costs[k].help);
		for (size_t d = 0; d < n; d++) {
			const char *space = str(docs[d], "space");
			if (num(json_object_get(docs[d], "process"), costs[k].key, &v))
				sample(o, costs[k].metric, space, v, costs[k].integral, "process",
				    "supervisor", NULL);
			json_array_foreach(json_object_get(docs[d], "workers"), i, w)
				if (num(json_object_get(w, "process"), costs[k].key, &v))
					sample(o, costs[k].metric, space, v, costs[k].integral, "process",
					    str(w, "role"), NULL);
		}
	}
}

char *
exposition_render(json_t *const *docs, size_t n, int64_t now_ms, bool openmetrics, size_t *len)
{
	struct out o = { .cap = 16384, .om = openmetrics };

	if ((o.p = malloc(o.cap)) == NULL)
		fatalx("out of memory");
	o.p[0] = '\0';
	daemon_state(&o, docs, n, now_ms);
	lease(&o, docs, n, now_ms);
	broker(&o, docs, n);
	credentials(&o, docs, n, now_ms);
	workers(&o, docs, n);
	lag(&o, docs, n, now_ms);
	histogram(&o, docs, n, "reader", "cotal_delivery_copy_latency_seconds",
	    "From a post stored in CHAT to its frame stored in a member's DLV (one observation "
	    "per frame).");
	histogram(&o, docs, n, "fanout", "cotal_delivery_fanout_latency_seconds",
	    "From a post stored in CHAT to its last copy stored in a member's INBOX (one "
	    "observation per post with copies).");
	processes(&o, docs, n);
	if (openmetrics)
		put(&o, "# EOF\n");
	*len = o.len;
	return o.p;
}

/* Append to /healthz's reason (used bytes of len so far); once the line
 * is full the rest is left out (never a pointer past the buffer). */
static void __attribute__((format(printf, 4, 5)))
reason_add(char *reason, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*used + 1 >= len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(reason + *used, len - *used, fmt, ap);
	va_end(ap);
	if (k > 0)
		*used += (size_t)k < len - *used ? (size_t)k : len - *used - 1;
}

int
exposition_health(json_t *const *docs, size_t n, char *reason, size_t len)
{
	size_t used = 0;
	int bad = 0;

	if (n == 0) {
		snprintf(reason, len, "not serving: no space");
		return 503;
	}
	reason[0] = '\0';
	for (size_t d = 0; d < n; d++) {
		const char *shard = str(docs[d], "shard");
		if (strcmp(shard, "serving") != 0)
			reason_add(reason, len, &used, "%s%s %s (%s)", bad++ == 0 ? "not serving: " :
			    ", ", n == 1 ? "the space" : "space", str(docs[d], "space"),
			    shard[0] != '\0' ? shard : "no state");
	}
	/* Serving, but a role down (restarting, or crash-looping at its
	 * capped backoff): not healthy, and which role says so (issue 42). */
	for (size_t d = 0; d < n && bad == 0; d++) {
		json_t *w;
		size_t i;
		json_array_foreach(json_object_get(docs[d], "workers"), i, w)
			if (strcmp(str(w, "state"), "down") == 0)
				reason_add(reason, len, &used, "%s%s %s without its %s worker (down, %s)",
				    used == 0 ? "degraded: " : ", ", n == 1 ? "the space" : "space",
				    str(docs[d], "space"), str(w, "role"),
				    json_is_true(json_object_get(w, "crashLooping")) ? "crash-looping" :
				    "restarting");
	}
	if (bad > 0 || used > 0)
		return 503;
	if (n == 1)
		snprintf(reason, len, "serving space %s", str(docs[0], "space"));
	else
		snprintf(reason, len, "serving all %zu spaces", n);
	return 200;
}
