/*
 * `cotal status --space S`: is the daemon serving, per worker, with
 * counters. Reads the pid record (.cotal/delivery.<key>.pid) and the
 * supervisor's status file, and believes a pid only when it is alive and
 * its command line names a delivery daemon of the space ("stale record",
 * exit 3, otherwise; a command line that cannot be read is trusted).
 */
#include "cli/cli.h"
#include "launcher/launcher.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/wire/tokens.h"
#include "supervisor/pidfile.h"

#define STATUS_MAX (256 * 1024)

/* The workers of a daemon's status file, one line each, after indent. */
void
status_print_workers(json_t *doc, const char *indent)
{
	json_t *workers, *w;
	size_t i;

	workers = json_object_get(doc, "workers");
	json_array_foreach(workers, i, w) {
		const char *name;
		json_t *v;
		char counters[512] = "";
		size_t off = 0;
		json_object_foreach(json_object_get(w, "counters"), name, v) {
			int n = snprintf(counters + off, sizeof(counters) - off, " %s=%lld", name,
			    (long long)json_integer_value(v));
			if (n < 0 || (size_t)n >= sizeof(counters) - off)
				break;
			off += (size_t)n;
		}
		const char *last = json_string_value(json_object_get(w, "lastExit"));
		printf("%s%-8s %-12s pid %-7lld restarts %lld%s%s%s\n",
		    indent, json_string_value(json_object_get(w, "role")),
		    json_string_value(json_object_get(w, "state")),
		    (long long)json_integer_value(json_object_get(w, "pid")),
		    (long long)json_integer_value(json_object_get(w, "restarts")), counters,
		    last && *last ? "  last exit: " : "", last && *last ? last : "");
		const char *conf = json_string_value(json_object_get(w, "confinement"));
		if (conf != NULL)
			printf("%s  %s\n", indent, conf);
	}
}

int
cmd_status(int argc, char **argv)
{
	struct launch_files f;
	char err[WS_FILE_MAX + 256];
	const char *space, *path, *rpath;
	pid_t rpid;
	json_t *doc;
	int rc;

	for (int k = 0; k < argc; k++)
		if (strcmp(argv[k], "--spaces") == 0)
			return cmd_status_host(argc, argv);
	if ((rc = launch_files_args("status", argc, argv, &f)) != 0)
		return rc;
	space = f.space;
	path = f.status;
	/* The pid record first: the daemon writes it once it holds its lease
	 * and removes it at a clean exit. */
	rpath = f.pid;
	if ((rpid = pidfile_read(rpath, err, sizeof(err))) < 0) {
		log_errx("status: %s", err);
		return 1;
	}
	if (rpid > 0 && pidfile_verify(rpid, space) == 0) {
		printf("delivery daemon for space %s: stale record (pid %ld in %s is not a running "
		    "delivery daemon; cotal down clears it)\n", space, (long)rpid, rpath);
		return 3;
	}
	if (access(path, F_OK) != 0) {
		if (rpid > 0) {
			/* Serving, but its first status is not written yet. */
			printf("delivery daemon for space %s: pid %ld (no status yet)\n", space,
			    (long)rpid);
			return 0;
		}
		printf("delivery daemon for space %s: not running (no %s)\n", space, path);
		return 3;
	}
	if ((doc = ws_read_json(path, STATUS_MAX, err, sizeof(err))) == NULL) {
		log_errx("status: %s", err);
		return 1;
	}
	long pid = (long)json_integer_value(json_object_get(doc, "pid"));
	if (pid <= 1 || pid > INT_MAX || pidfile_verify((pid_t)pid, space) == 0) {
		json_decref(doc);
		if (rpid > 0) {
			/* A status file a dead daemon left; the recorded one runs. */
			printf("delivery daemon for space %s: pid %ld (no status yet)\n", space,
			    (long)rpid);
			return 0;
		}
		printf("delivery daemon for space %s: stale record (pid %ld is not a running "
		    "delivery daemon)\n", space, pid);
		return 3;
	}
	const char *server = json_string_value(json_object_get(doc, "server"));
	printf("delivery daemon for space %s: pid %ld, broker %s\n", space, pid,
	    server != NULL ? server : "?");
	if (rpid == 0)
		printf("  no pid record yet (%s is written once the daemon holds its lease)\n",
		    rpath);
	else if (rpid != (pid_t)pid)
		printf("  ! the pid record names pid %ld, the status file pid %ld\n", (long)rpid,
		    pid);
	status_print_workers(doc, "  ");
	json_decref(doc);
	return 0;
}
