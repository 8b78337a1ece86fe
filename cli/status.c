/*
 * `cotal status [--space S]`: is the daemon serving, per worker, with
 * counters. Reads the supervisor's status file and believes it only when
 * the recorded pid is alive and is a delivery daemon.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/tokens.h"

#define STATUS_MAX (256 * 1024)

int
cmd_status(int argc, char **argv)
{
	const char *root = NULL, *space = NULL;
	char err[1024], path[WS_FILE_MAX], key[SPACE_KEY_MAX + 1];
	struct workspace ws;
	json_t *doc, *workers, *w;
	size_t i;

	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--root") == 0 && k + 1 < argc)
			root = argv[++k];
		else if (strcmp(argv[k], "--space") == 0 && k + 1 < argc)
			space = argv[++k];
		else {
			log_errx("status: unknown or incomplete argument \"%s\"", argv[k]);
			fprintf(stderr, "usage: cotal status --space S [--root DIR]\n");
			return 2;
		}
	}
	if (space == NULL) {
		log_errx("status: --space is required");
		return 2;
	}
	if (!space_key(space, key, sizeof(key))) {
		log_errx("status: --space: longer than %d bytes", SPACE_NAME_MAX);
		return 2;
	}
	if (ws_locate(root, &ws, err, sizeof(err)) != 0) {
		log_errx("status: %s", err);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/delivery.%s.status.json", ws.cotal, key);
	if (access(path, F_OK) != 0) {
		printf("delivery daemon for space %s: not running (no %s)\n", space, path);
		return 3;
	}
	if ((doc = ws_read_json(path, STATUS_MAX, err, sizeof(err))) == NULL) {
		log_errx("status: %s", err);
		return 1;
	}
	long pid = (long)json_integer_value(json_object_get(doc, "pid"));
	if (ws_pid_runs(pid, "cotal-deliveryd", NULL) == 0) {
		printf("delivery daemon for space %s: stale record (pid %ld is not a running "
		    "delivery daemon)\n", space, pid);
		json_decref(doc);
		return 3;
	}
	printf("delivery daemon for space %s: pid %ld, broker %s\n", space, pid,
	    json_string_value(json_object_get(doc, "server")));
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
		printf("  %-8s %-12s pid %-7lld restarts %lld%s%s%s\n",
		    json_string_value(json_object_get(w, "role")),
		    json_string_value(json_object_get(w, "state")),
		    (long long)json_integer_value(json_object_get(w, "pid")),
		    (long long)json_integer_value(json_object_get(w, "restarts")), counters,
		    last && *last ? "  last exit: " : "", last && *last ? last : "");
	}
	json_decref(doc);
	return 0;
}
