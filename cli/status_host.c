/*
 * `cotal status --spaces MANIFEST [--run-dir DIR] [--json]`: a delivery
 * host and each of its lanes. Reads the host's pid record and status file
 * (where the host writes them: lib/manifest.h, manifest_host_files) and,
 * for each lane, the lane's own status file in its root: serving or not,
 * since when, reopens, and its workers' counters. With --json, one JSON
 * document for scripts (docs/status-json.md): the host's, and for each
 * lane an entry of the shape `cotal status --space S --json` prints.
 *
 * Exit status: 0 every lane serving; 1 some lane not serving (or a file
 * that cannot be read); 3 no host running for the manifest.
 */
#include "cli/cli.h"
#include "cli/status_doc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/procstat.h"
#include "lib/manifest.h"
#include "lib/pidfile.h"
#include "lib/wire/tokens.h"

#define HOST_STATUS_MAX (4 * 1024 * 1024)
#define LANE_STATUS_MAX (256 * 1024)

static const char *
clock_of(json_int_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%FT%TZ", &tm) == 0)
		snprintf(buf, len, "?");
	return buf;
}

/* The host's entry for space, or NULL: the current one, not a
 * predecessor a reload is still closing. */
static json_t *
host_lane(json_t *host, const char *space)
{
	json_t *l, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(host, "lanes"), i, l) {
		const char *s = json_string_value(json_object_get(l, "space"));
		const char *st = json_string_value(json_object_get(l, "state"));
		if (s == NULL || strcmp(s, space) != 0)
			continue;
		if (found == NULL || (st != NULL && strcmp(st, "closed") != 0 &&
		    strcmp(st, "stopping") != 0))
			found = l;
	}
	return found;
}

/* What the CLI found of one lane, for its human lines and its JSON entry
 * alike: the host's view, then the lane's own status file. */
struct lane_view {
	const struct manifest_lane *m;
	json_t *hl;                  /* the host's entry (borrowed), NULL: not opened */
	json_int_t pid;              /* the lane's process, 0: none now */
	char path[WS_FILE_MAX];      /* its status file, "" when not located */
	json_t *doc;                 /* its status of this run, or NULL */
	bool serving;
	bool failed;                 /* note says what could not be read */
	char note[WS_FILE_MAX + 512]; /* why there is no doc (a lane with a pid) */
};

static void
lane_read(const struct manifest_lane *m, json_t *hl, struct lane_view *lv)
{
	char err[WS_FILE_MAX + 256], key[SPACE_KEY_MAX + 1];
	struct workspace ws;
	json_t *doc;

	memset(lv, 0, sizeof(*lv));
	lv->m = m;
	lv->hl = hl;
	if (hl == NULL || (lv->pid = json_integer_value(json_object_get(hl, "pid"))) <= 0) {
		lv->pid = 0;
		return;
	}
	/* The root the host opened the lane with (the manifest may have
	 * changed since, without a SIGHUP). */
	const char *root = json_string_value(json_object_get(hl, "root"));
	space_key(m->space, key, sizeof(key));
	if (ws_locate(root != NULL ? root : m->root, &ws, err, sizeof(err)) != 0) {
		lv->failed = true;
		snprintf(lv->note, sizeof(lv->note), "%s", err);
		return;
	}
	snprintf(lv->path, sizeof(lv->path), "%s/delivery.%s.status.json", ws.cotal, key);
	if (access(lv->path, F_OK) != 0) {
		snprintf(lv->note, sizeof(lv->note), "no status yet (%s)", lv->path);
		return;
	}
	if ((doc = ws_read_json(lv->path, LANE_STATUS_MAX, err, sizeof(err))) == NULL) {
		lv->failed = true;
		snprintf(lv->note, sizeof(lv->note), "%s", err);
		return;
	}
	if (json_integer_value(json_object_get(doc, "pid")) != lv->pid) {
		snprintf(lv->note, sizeof(lv->note), "no status of this run yet (%s names pid %lld)",
		    lv->path, (long long)json_integer_value(json_object_get(doc, "pid")));
		json_decref(doc);
		return;
	}
	const char *shard = json_string_value(json_object_get(doc, "shard"));
	lv->serving = shard != NULL && strcmp(shard, "serving") == 0;
	lv->doc = doc;
}

/* One lane: the host's view, then the lane's own. */
static void
lane_print(const struct lane_view *lv)
{
	char when[64];
	json_t *hl = lv->hl;

	if (hl == NULL) {
		printf("lane %s: not opened by the host (added to the manifest since? SIGHUP the host)\n",
		    lv->m->space);
		return;
	}
	const char *state = json_string_value(json_object_get(hl, "state"));
	const char *last = json_string_value(json_object_get(hl, "lastExit"));
	printf("lane %s: %s", lv->m->space, state != NULL ? state : "?");
	if (lv->pid > 0)
		printf(", pid %lld", (long long)lv->pid);
	printf(" since %s, reopens %lld", clock_of(json_integer_value(json_object_get(hl, "since")),
	    when, sizeof(when)), (long long)json_integer_value(json_object_get(hl, "reopens")));
	if (json_integer_value(json_object_get(hl, "reopenAt")) > 0)
		printf(", reopening at %s", clock_of(json_integer_value(json_object_get(hl,
		    "reopenAt")), when, sizeof(when)));
	if (last != NULL && *last != '\0')
		printf(", last exit: %s", last);
	printf("\n");
	if (lv->note[0] != '\0')
		printf("  %s%s\n", lv->failed ? "! " : "", lv->note);
	if (lv->doc == NULL)
		return;
	printf("  shard 0 %s since %s, broker %s\n",
	    json_string_value(json_object_get(lv->doc, "shard")) ?: "?",
	    clock_of(json_integer_value(json_object_get(lv->doc, "shardSince")), when,
	    sizeof(when)), json_string_value(json_object_get(lv->doc, "server")) ?: "?");
	status_print_workers(lv->doc, "    ");
}

/* One lane as an entry of the shape `cotal status --space S --json`
 * prints (a lane writes no pid record), with the host's view of it. */
static json_t *
lane_json(struct lane_view *lv)
{
	char reason[WS_FILE_MAX + 512];

	if (lv->hl == NULL)
		snprintf(reason, sizeof(reason), "not opened by the host (added to the manifest "
		    "since? SIGHUP the host)");
	else if (lv->pid <= 0)
		snprintf(reason, sizeof(reason), "no process now (the host says the lane is %s)",
		    json_string_value(json_object_get(lv->hl, "state")) ?: "?");
	else
		snprintf(reason, sizeof(reason), "%s", lv->note);
	if (lv->doc != NULL)
		procstat_annotate_workers(lv->doc);
	return json_pack("{s:s, s:s, s:b, s:o, s:o, s:n, s:o, s:o, s:O, s:O}",
	    "space", lv->m->space, "state", lv->pid > 0 ? "running" : "not running",
	    "serving", lv->serving,
	    "reason", reason[0] != '\0' ? json_string(reason) : json_null(),
	    "pid", lv->pid > 0 ? json_integer(lv->pid) : json_null(),
	    "pidRecord",
	    "statusFile", lv->path[0] != '\0' ? json_string(lv->path) : json_null(),
	    "process", procstat_json(lv->pid),
	    "status", lv->doc != NULL ? lv->doc : json_null(),
	    "lane", lv->hl != NULL ? lv->hl : json_null());
}

/* The host's document: its verdict, and the lanes' entries when the host
 * runs (entries taken). */
static int
host_json(const char *manifest, const char *state, const char *reason, pid_t pid,
	  const char *pidp, const char *statp, json_t *host, json_t *entries, size_t serving,
	  size_t lanes)
{
	bool running = strcmp(state, "running") == 0;
	json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:I}, s:s, s:o, s:O, s:I, "
	    "s:I, s:o}", "schema", STATUS_SCHEMA, "manifest", manifest, "state", state,
	    "reason", reason != NULL ? json_string(reason) : json_null(),
	    "pid", running ? json_integer(pid) : json_null(),
	    "pidRecord", "path", pidp, "pid", (json_int_t)pid,
	    "statusFile", statp,
	    "process", running ? procstat_json(pid) : json_null(),
	    "status", host != NULL ? host : json_null(),
	    "lanesServing", (json_int_t)serving, "lanesTotal", (json_int_t)lanes,
	    "spaces", entries != NULL ? entries : json_array());
	int rc = status_json_print(doc);

	json_decref(doc);
	return rc;
}

int
cmd_status_host(int argc, char **argv)
{
	const char *manifest = NULL, *run_dir = getenv("RUNTIME_DIRECTORY");
	char err[WS_FILE_MAX + 1024], pidp[PATH_MAX + 64], statp[PATH_MAX + 64], when[64];
	char reason[WS_FILE_MAX + 2 * PATH_MAX + 128];
	struct manifest m;
	json_t *host;
	pid_t pid;
	size_t serving = 0;
	bool json = false;

	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--spaces") == 0 && k + 1 < argc)
			manifest = argv[++k];
		else if (strcmp(argv[k], "--run-dir") == 0 && k + 1 < argc)
			run_dir = argv[++k];
		else if (strcmp(argv[k], "--json") == 0)
			json = true;
		else {
			log_errx("status: unknown or incomplete argument \"%s\"", argv[k]);
			return CLI_USAGE;
		}
	}
	if (manifest == NULL) {
		log_errx("status: --spaces needs the manifest");
		return CLI_USAGE;
	}
	if (manifest_load(manifest, &m, err, sizeof(err)) != 0) {
		log_errx("status: %s", err);
		return 1;
	}
	if (manifest_host_files(manifest, run_dir, pidp, sizeof(pidp), statp, sizeof(statp), err,
	    sizeof(err)) != 0) {
		log_errx("status: %s", err);
		manifest_free(&m);
		return 1;
	}
	if ((pid = pidfile_read(pidp, err, sizeof(err))) < 0) {
		log_errx("status: %s", err); /* unreadable: not "not running" */
		manifest_free(&m);
		return 1;
	}
	if (pid == 0 || pidfile_verify_host(pid) == 0) {
		const char *why = pid == 0 ? "no pid record" :
		    "its recorded pid is no delivery host now";
		if (json)
			host_json(manifest, "not running", why, pid, pidp, statp, NULL, NULL, 0, m.n);
		else
			printf("delivery host for %s: not running (%s)\n", manifest, why);
		manifest_free(&m);
		return 3;
	}
	if ((host = ws_read_json(statp, HOST_STATUS_MAX, err, sizeof(err))) == NULL) {
		snprintf(reason, sizeof(reason), "no status yet (%s)", err);
		if (json)
			host_json(manifest, "running", reason, pid, pidp, statp, NULL, NULL, 0, m.n);
		else
			printf("delivery host for %s: pid %ld, %s\n", manifest, (long)pid, reason);
		manifest_free(&m);
		return 1;
	}
	if (json_integer_value(json_object_get(host, "pid")) != pid) {
		snprintf(reason, sizeof(reason), "its status file %s is another run's", statp);
		if (json)
			host_json(manifest, "running", reason, pid, pidp, statp, NULL, NULL, 0, m.n);
		else
			printf("delivery host for %s: pid %ld, %s\n", manifest, (long)pid, reason);
		json_decref(host);
		manifest_free(&m);
		return 1;
	}
	if (!json)
		printf("delivery host for %s: pid %ld, up since %s, %zu lane%s%s\n", manifest,
		    (long)pid, clock_of(json_integer_value(json_object_get(host, "started")), when,
		    sizeof(when)), m.n, m.n == 1 ? "" : "s",
		    json_is_true(json_object_get(host, "stopping")) ? " (stopping)" : "");
	json_t *entries = json_array();
	for (size_t i = 0; i < m.n; i++) {
		struct lane_view lv;
		lane_read(&m.lanes[i], host_lane(host, m.lanes[i].space), &lv);
		serving += lv.serving;
		if (json)
			json_array_append_new(entries, lane_json(&lv));
		else
			lane_print(&lv);
		json_decref(lv.doc);
	}
	int rc = serving == m.n ? 0 : 1;
	if (json) {
		if (host_json(manifest, "running", NULL, pid, pidp, statp, host, entries, serving,
		    m.n) != 0)
			rc = 1;
		entries = NULL;
	} else
		printf("%zu of %zu lane%s serving\n", serving, m.n, m.n == 1 ? "" : "s");
	json_decref(entries);
	json_decref(host);
	manifest_free(&m);
	return rc;
}
