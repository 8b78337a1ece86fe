/*
 * `cotal status --spaces MANIFEST [--run-dir DIR]`: a delivery host and
 * each of its lanes. Reads the host's pid record and status file (where
 * the host writes them: lib/manifest.h, manifest_host_files) and, for each
 * lane, the lane's own status file in its root: serving or not, since
 * when, reopens, and its workers' counters.
 *
 * Exit status: 0 every lane serving; 1 some lane not serving (or a file
 * that cannot be read); 3 no host running for the manifest.
 */
#include "cli/cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/manifest.h"
#include "lib/wire/tokens.h"
#include "supervisor/pidfile.h"

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

/* One lane: the host's view, then the lane's own. true when serving. */
static bool
print_lane(const struct manifest_lane *m, json_t *hl)
{
	char when[64], err[WS_FILE_MAX + 256], key[SPACE_KEY_MAX + 1], path[WS_FILE_MAX];
	struct workspace ws;
	json_t *doc;
	bool serving = false;

	if (hl == NULL) {
		printf("lane %s: not opened by the host (added to the manifest since? SIGHUP the host)\n",
		    m->space);
		return false;
	}
	const char *state = json_string_value(json_object_get(hl, "state"));
	json_int_t pid = json_integer_value(json_object_get(hl, "pid"));
	const char *last = json_string_value(json_object_get(hl, "lastExit"));
	printf("lane %s: %s", m->space, state != NULL ? state : "?");
	if (pid > 0)
		printf(", pid %lld", (long long)pid);
	printf(" since %s, reopens %lld", clock_of(json_integer_value(json_object_get(hl, "since")),
	    when, sizeof(when)), (long long)json_integer_value(json_object_get(hl, "reopens")));
	if (json_integer_value(json_object_get(hl, "reopenAt")) > 0)
		printf(", reopening at %s", clock_of(json_integer_value(json_object_get(hl,
		    "reopenAt")), when, sizeof(when)));
	if (last != NULL && *last != '\0')
		printf(", last exit: %s", last);
	printf("\n");
	if (pid <= 0)
		return false;

	/* The root the host opened the lane with (the manifest may have
	 * changed since, without a SIGHUP). */
	const char *root = json_string_value(json_object_get(hl, "root"));
	space_key(m->space, key, sizeof(key));
	if (ws_locate(root != NULL ? root : m->root, &ws, err, sizeof(err)) != 0) {
		printf("  ! %s\n", err);
		return false;
	}
	snprintf(path, sizeof(path), "%s/delivery.%s.status.json", ws.cotal, key);
	if (access(path, F_OK) != 0) {
		printf("  no status yet (%s)\n", path);
		return false;
	}
	if ((doc = ws_read_json(path, LANE_STATUS_MAX, err, sizeof(err))) == NULL) {
		printf("  ! %s\n", err);
		return false;
	}
	if (json_integer_value(json_object_get(doc, "pid")) != pid) {
		printf("  no status of this run yet (%s names pid %lld)\n", path,
		    (long long)json_integer_value(json_object_get(doc, "pid")));
		json_decref(doc);
		return false;
	}
	const char *shard = json_string_value(json_object_get(doc, "shard"));
	serving = shard != NULL && strcmp(shard, "serving") == 0;
	printf("  shard 0 %s since %s, broker %s\n", shard != NULL ? shard : "?",
	    clock_of(json_integer_value(json_object_get(doc, "shardSince")), when, sizeof(when)),
	    json_string_value(json_object_get(doc, "server")) ?: "?");
	status_print_workers(doc, "    ");
	json_decref(doc);
	return serving;
}

int
cmd_status_host(int argc, char **argv)
{
	const char *manifest = NULL, *run_dir = getenv("RUNTIME_DIRECTORY");
	char err[WS_FILE_MAX + 1024], pidp[PATH_MAX + 64], statp[PATH_MAX + 64], when[64];
	struct manifest m;
	json_t *host;
	pid_t pid;
	size_t serving = 0;

	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--spaces") == 0 && k + 1 < argc)
			manifest = argv[++k];
		else if (strcmp(argv[k], "--run-dir") == 0 && k + 1 < argc)
			run_dir = argv[++k];
		else {
			log_errx("status: unknown or incomplete argument \"%s\"", argv[k]);
			fprintf(stderr, "usage: cotal status --spaces MANIFEST [--run-dir DIR]\n");
			return 2;
		}
	}
	if (manifest == NULL) {
		log_errx("status: --spaces needs the manifest");
		return 2;
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
		printf("delivery host for %s: not running (%s)\n", manifest, pid == 0 ?
		    "no pid record" : "its recorded pid is no delivery host now");
		manifest_free(&m);
		return 3;
	}
	if ((host = ws_read_json(statp, HOST_STATUS_MAX, err, sizeof(err))) == NULL) {
		printf("delivery host for %s: pid %ld, no status yet (%s)\n", manifest, (long)pid,
		    err);
		manifest_free(&m);
		return 1;
	}
	if (json_integer_value(json_object_get(host, "pid")) != pid) {
		printf("delivery host for %s: pid %ld, its status file %s is another run's\n",
		    manifest, (long)pid, statp);
		json_decref(host);
		manifest_free(&m);
		return 1;
	}
	printf("delivery host for %s: pid %ld, up since %s, %zu lane%s%s\n", manifest, (long)pid,
	    clock_of(json_integer_value(json_object_get(host, "started")), when, sizeof(when)),
	    m.n, m.n == 1 ? "" : "s", json_is_true(json_object_get(host, "stopping")) ?
	    " (stopping)" : "");
	for (size_t i = 0; i < m.n; i++)
		serving += print_lane(&m.lanes[i], host_lane(host, m.lanes[i].space));
	printf("%zu of %zu lane%s serving\n", serving, m.n, m.n == 1 ? "" : "s");
	int rc = serving == m.n ? 0 : 1;
	json_decref(host);
	manifest_free(&m);
	return rc;
}
