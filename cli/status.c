/*
 * `cotal status --space S [--json]`: is the daemon serving, per worker,
 * with counters. Reads the pid record (.cotal/delivery.<key>.pid) and the
 * supervisor's status file, and believes a pid only when it is alive and
 * its command line names a delivery daemon of the space ("stale record",
 * exit 3, otherwise; a command line that cannot be read is trusted).
 *
 * With --json the same verdict is one JSON document on stdout for scripts
 * (docs/status-json.md, schema docs/status.schema.json): the status file
 * as the daemon wrote it, and what the supervisor and each worker cost now
 * (resident memory, CPU seconds, from /proc). The exit status is the same.
 */
#include "cli/cli.h"
#include "cli/spacefiles.h"
#include "cli/status_doc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/pidfile.h"
#include "lib/procstat.h"
#include "lib/wire/tokens.h"

#define STATUS_MAX (256 * 1024)

/* ---- one space ---- */

/* What the records say of the space's daemon; each verdict has its human
 * line and its JSON state. */
enum space_verdict {
	SV_RUNNING,      /* the status file's daemon runs */
	SV_NO_STATUS,    /* the recorded daemon runs, its first status is not written */
	SV_OLD_STATUS,   /* the recorded daemon runs, the status file is a dead daemon's */
	SV_NOT_RUNNING,  /* no record, no status file */
	SV_STALE_RECORD, /* the record's pid is no delivery daemon of the space */
	SV_STALE_STATUS, /* no record, the status file's pid is no delivery daemon */
};

struct space_view {
	enum space_verdict v;
	pid_t rpid;  /* the pid record's, 0: none */
	long pid;    /* the status file's */
	json_t *doc; /* the status file of the running daemon (SV_RUNNING) */
};

/* Read the pid record and the status file: 0, or 1 having said on stderr
 * which of them cannot be read. */
static int
space_read(const struct space_files *f, struct space_view *sv)
{
	char err[WS_FILE_MAX + 256];
	json_t *doc;

	memset(sv, 0, sizeof(*sv));
	/* The pid record first: the daemon writes it once it holds its lease
	 * and removes it at a clean exit. */
	if ((sv->rpid = pidfile_read(f->pid, err, sizeof(err))) < 0) {
		log_errx("status: %s", err);
		return 1;
	}
	if (sv->rpid > 0 && pidfile_verify(sv->rpid, f->space) == 0) {
		sv->v = SV_STALE_RECORD;
		return 0;
	}
	if (access(f->status, F_OK) != 0) {
		/* Serving, but its first status is not written yet. */
		sv->v = sv->rpid > 0 ? SV_NO_STATUS : SV_NOT_RUNNING;
		return 0;
	}
	if ((doc = ws_read_json(f->status, STATUS_MAX, err, sizeof(err))) == NULL) {
		log_errx("status: %s", err);
		return 1;
	}
	sv->pid = (long)json_integer_value(json_object_get(doc, "pid"));
	if (sv->pid <= 1 || sv->pid > INT_MAX || pidfile_verify((pid_t)sv->pid, f->space) == 0) {
		json_decref(doc);
		/* A status file a dead daemon left; the recorded one runs. */
		sv->v = sv->rpid > 0 ? SV_OLD_STATUS : SV_STALE_STATUS;
		return 0;
	}
	sv->v = SV_RUNNING;
	sv->doc = doc;
	return 0;
}

static int
space_exit(const struct space_view *sv)
{
	return sv->v == SV_RUNNING || sv->v == SV_NO_STATUS || sv->v == SV_OLD_STATUS ? 0 : 3;
}

static int
space_print(const struct space_files *f, const struct space_view *sv)
{
	const char *space = f->space;

	switch (sv->v) {
	case SV_STALE_RECORD:
		printf("delivery daemon for space %s: stale record (pid %ld in %s is not a running "
		    "delivery daemon; cotal down clears it)\n", space, (long)sv->rpid, f->pid);
		break;
	case SV_NOT_RUNNING:
		printf("delivery daemon for space %s: not running (no %s)\n", space, f->status);
		break;
	case SV_NO_STATUS:
	case SV_OLD_STATUS:
		printf("delivery daemon for space %s: pid %ld (no status yet)\n", space,
		    (long)sv->rpid);
		break;
	case SV_STALE_STATUS:
		printf("delivery daemon for space %s: stale record (pid %ld is not a running "
		    "delivery daemon)\n", space, sv->pid);
		break;
	case SV_RUNNING: {
		const char *server = json_string_value(json_object_get(sv->doc, "server"));
		printf("delivery daemon for space %s: pid %ld, broker %s\n", space, sv->pid,
		    server != NULL ? server : "?");
		if (sv->rpid == 0)
			printf("  no pid record yet (%s is written once the daemon holds its "
			    "lease)\n", f->pid);
		else if (sv->rpid != (pid_t)sv->pid)
			printf("  ! the pid record names pid %ld, the status file pid %ld\n",
			    (long)sv->rpid, sv->pid);
		status_print_workers(sv->doc, "  ");
		break;
	}
	}
	return space_exit(sv);
}

static int
space_json(const struct space_files *f, struct space_view *sv)
{
	char reason[WS_FILE_MAX * 2 + 128] = "";
	const char *state = "running";
	json_int_t pid = 0;

	switch (sv->v) {
	case SV_STALE_RECORD:
		state = "stale record";
		pid = sv->rpid;
		snprintf(reason, sizeof(reason), "pid %ld in %s is not a running delivery daemon; "
		    "cotal down clears it", (long)sv->rpid, f->pid);
		break;
	case SV_NOT_RUNNING:
		state = "not running";
		snprintf(reason, sizeof(reason), "no %s", f->status);
		break;
	case SV_NO_STATUS:
		pid = sv->rpid;
		snprintf(reason, sizeof(reason), "no status yet (%s)", f->status);
		break;
	case SV_OLD_STATUS:
		pid = sv->rpid;
		snprintf(reason, sizeof(reason), "no status of this run yet (%s names pid %ld, "
		    "which is not running)", f->status, sv->pid);
		break;
	case SV_STALE_STATUS:
		state = "stale record";
		pid = sv->pid;
		snprintf(reason, sizeof(reason), "pid %ld of %s is not a running delivery daemon",
		    sv->pid, f->status);
		break;
	case SV_RUNNING:
		pid = sv->pid;
		procstat_annotate_workers(sv->doc);
		break;
	}
	const char *shard = json_string_value(json_object_get(sv->doc, "shard"));
	bool running = strcmp(state, "running") == 0;
	json_t *doc = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:{s:s, s:I}, s:s, s:o, s:O}",
	    "schema", STATUS_SCHEMA, "space", f->space, "state", state,
	    "serving", shard != NULL && strcmp(shard, "serving") == 0,
	    "reason", reason[0] != '\0' ? json_string(reason) : json_null(),
	    "pid", pid > 0 ? json_integer(pid) : json_null(),
	    "pidRecord", "path", f->pid, "pid", (json_int_t)sv->rpid,
	    "statusFile", f->status,
	    "process", running ? procstat_json(pid) : json_null(),
	    "status", sv->doc != NULL ? sv->doc : json_null());
	int rc = status_json_print(doc);
	json_decref(doc);
	return rc != 0 ? rc : space_exit(sv);
}

int
cmd_status(int argc, char **argv)
{
	struct space_files f;
	struct space_view sv;
	int n = 0, rc;
	bool json = false;

	for (int k = 0; k < argc; k++)
		if (strcmp(argv[k], "--spaces") == 0)
			return cmd_status_host(argc, argv);
	/* --json is this command's own, the rest every space command's: taken
	 * out of argv before those are read. */
	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--json") == 0)
			json = true;
		else
			argv[n++] = argv[k];
	}
	if ((rc = space_files_args("status", n, argv, &f)) != 0)
		return rc;
	if ((rc = space_read(&f, &sv)) != 0)
		return rc;
	rc = json ? space_json(&f, &sv) : space_print(&f, &sv);
	json_decref(sv.doc);
	return rc;
}
