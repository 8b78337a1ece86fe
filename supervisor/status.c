/*
 * The status file `cotal status` reads: .cotal/delivery.<key>.status.json,
 * rewritten (atomically) when a worker's state or counters change.
 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/workspace.h"
#include "sandbox/sandbox.h"

#define STATUS_READ_MAX (1 << 20)

static const char *
phase_name(const struct sup_worker *w)
{
	static const char *const states[] = { "starting", "connected", "disconnected", "quiesced" };

	switch (w->phase) {
	case WP_DOWN:
		return "down";
	case WP_STOPPING:
		return "stopping";
	case WP_STARTING:
		return "starting";
	case WP_RUNNING:
		return w->have_status && w->status.state < 4 ? states[w->status.state] : "running";
	}
	return "?";
}

/* What the worker's sandbox holds on this kernel (sandbox/describe.c), as
 * its own start line said it. */
static const char *
confinement(const struct sup *s, const struct sup_worker *w, char *line, size_t len)
{
	uint16_t ports[SANDBOX_PORTS_MAX] = { 0 };

	for (int r = SANDBOX_FANOUT; r <= SANDBOX_TIMER; r++)
		if (strcmp(sandbox_role_name((enum sandbox_role)r), w->role) == 0) {
			for (int i = 0; i < SANDBOX_PORTS_MAX && i < IPC_SERVERS_MAX; i++)
				ports[i] = s->ports[i];
			sandbox_describe((enum sandbox_role)r, s->landlock_abi, s->seccomp_log, ports,
			    line, len);
			return line;
		}
	return "unknown role";
}

/* A worker's gauges and latency histogram (ipc.h), for the roles that
 * have them; nothing before its first STATUS. */
static void
measures(const struct sup_worker *w, json_t *wo)
{
	json_t *gauges = json_object(), *buckets, *bounds;
	const char *lat = ipc_latency_name(w->role);

	if (!w->have_status) {
		json_decref(gauges);
		return;
	}
	for (unsigned k = 0; k < IPC_GAUGES; k++) {
		const char *name = ipc_gauge_name(w->role, k);
		if (name[0] != '\0')
			json_object_set_new(gauges, name, json_integer((json_int_t)w->status.gauges[k]));
	}
	if (json_object_size(gauges) > 0)
		json_object_set_new(wo, "gauges", gauges);
	else
		json_decref(gauges);
	if (w->have_refusals) {
		json_t *by = json_array();
		for (uint32_t i = 0; i < w->refusals.n && i < IPC_REFUSALS_TOP; i++)
			json_array_append_new(by, json_pack("{s:s, s:I}", "principal",
			    w->refusals.top[i].principal, "count",
			    (json_int_t)w->refusals.top[i].count));
		json_object_set_new(wo, "refusedBy", by);
	}
	if (lat[0] == '\0')
		return;
	buckets = json_array();
	bounds = json_array();
	for (int b = 0; b <= IPC_LATENCY_BUCKETS; b++) {
		json_array_append_new(buckets, json_integer((json_int_t)w->status.latency[b]));
		if (b < IPC_LATENCY_BUCKETS)
			json_array_append_new(bounds, json_integer(ipc_latency_bounds_ms[b]));
	}
	json_object_set_new(wo, "latency", json_pack("{s:s, s:o, s:o, s:f}", "of", lat,
	    "boundsMs", bounds, "buckets", buckets, "sumSeconds",
	    (double)w->status.latency_sum_us / 1e6));
}

/* One credential: its user and when it expires (0: never). */
static json_t *
credential(const char *name, const struct sup_creds *c)
{
	return json_pack("{s:s, s:s, s:I}", "name", name, "user", c->user_pub, "expiresAt",
	    (json_int_t)c->exp * 1000);
}

json_t *
status_doc(struct sup *s)
{
	static const char *const sys_names[] = { [IPC_SYS_OBSERVER] = "sys-observer",
		[IPC_SYS_EVICTOR] = "sys-evictor" };
	struct timeval tv;
	char line[1024], server[IPC_URL_MAX] = "";
	json_t *list = json_array(), *creds = json_array();

	gettimeofday(&tv, NULL);
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		json_t *counters = json_object();
		for (unsigned k = 0; k < IPC_COUNTERS; k++) {
			const char *name = ipc_counter_name(w->role, k);
			if (name[0] != '\0')
				json_object_set_new(counters, name,
				    json_integer(w->have_status ? (json_int_t)w->status.counters[k] : 0));
		}
		json_t *wo = json_pack("{s:s, s:I, s:s, s:I, s:b, s:s, s:o, s:s, s:I}",
		    "role", w->role, "pid", (json_int_t)w->pid, "state", phase_name(w),
		    "restarts", (json_int_t)w->restart.restarts, "crashLooping",
		    restart_looping(&w->restart, w->policy, sup_now_ms()), "lastExit", w->last_exit,
		    "counters", counters, "confinement", confinement(s, w, line, sizeof(line)),
		    "signaturesRefused", (json_int_t)w->signs_refused);
		measures(w, wo);
		json_array_append_new(list, wo);
	}
	json_array_append_new(creds, credential("delivery", &s->creds));
	for (int i = IPC_SYS_OBSERVER; i <= IPC_SYS_EVICTOR; i++)
		if (s->have_sys[i])
			json_array_append_new(creds, credential(sys_names[i], &s->sys[i]));
	if (s->nc != NULL && s->stats.connected &&
	    natsConnection_GetConnectedUrl(s->nc, server, sizeof(server)) != NATS_OK)
		server[0] = '\0';
	static const char *const shard_names[] = { "claiming", "starting", "serving",
		"rechecking", "standby" };
	return json_pack("{s:I, s:s, s:s, s:s, s:I, s:b, s:I, s:o, s:{s:I, s:I, s:I}, "
	    "s:{s:b, s:I, s:s}, s:o, s:{s:I, s:I}}", "pid", (json_int_t)getpid(),
	    "space", s->space, "server", s->url, "shard", shard_names[s->shard], "shardSince",
	    (json_int_t)s->shard_since_ms, "lane", s->lane,
	    "updatedAt", (json_int_t)tv.tv_sec * 1000 + tv.tv_usec / 1000, "workers", list,
	    "lease", "renewals", (json_int_t)s->stats.renewals, "renewalFailures",
	    (json_int_t)s->stats.renewal_failures, "lastRenewalAt",
	    (json_int_t)s->stats.last_renewal_ms,
	    "broker", "connected", s->stats.connected, "reconnects",
	    (json_int_t)s->stats.reconnects, "inUse", server,
	    "credentials", creds,
	    "reloads", "adopted", (json_int_t)s->stats.reloads_adopted, "refused",
	    (json_int_t)s->stats.reloads_refused);
}

/* The pid the status file names (0: none, unreadable or not a status). */
static long
status_pid(const struct sup *s)
{
	char err[256];
	size_t len;
	char *text = ws_read_file(s->status_path, STATUS_READ_MAX, &len, err, sizeof(err));
	json_t *doc = text != NULL ? json_loadb(text, len, 0, NULL) : NULL;
	json_int_t pid = json_integer_value(json_object_get(doc, "pid"));

	json_decref(doc);
	free(text);
	return pid > 0 ? (long)pid : 0;
}

/* Another live process's status (a daemon of this space serving from this
 * root while this one waits for its lease): left to it. */
static bool
status_of_another(const struct sup *s)
{
	long pid = status_pid(s);

	return pid > 0 && pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

void
status_write(struct sup *s)
{
	char err[512];

	/* A standby of the same root (--standby, or a start under a service
	 * manager waiting for the lease) does not cover the holder's file. */
	if (s->shard == SHARD_STANDBY && status_of_another(s)) {
		s->status_dirty = false;
		return;
	}
	json_t *doc = status_doc(s);

	if (ws_replace_json(s->status_path, doc, 0600, err, sizeof(err)) != 0)
		log_warnx("delivery: cannot write the status file: %s", err);
	json_decref(doc);
	s->status_dirty = false;
}

void
status_remove(struct sup *s)
{
	/* Only this daemon's own: a refused standby leaves the holder's. */
	if (status_pid(s) == (long)getpid())
		unlink(s->status_path);
}
