/* The lease holder's record (holder.h). Runs in the supervisor. */
#include "supervisor/holder.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/procstat.h"
#include "lib/workspace.h"

/* The first line of path, without its newline, into out: 0, or -1. */
static int
first_line(const char *path, char *out, size_t outlen)
{
	char err[128];
	size_t len;
	char *text = ws_read_file(path, 256, &len, err, sizeof(err));

	if (text == NULL)
		return -1;
	text[strcspn(text, "\n")] = '\0';
	int rc = text[0] != '\0' && strlen(text) < outlen ? 0 : -1;
	if (rc == 0)
		memcpy(out, text, strlen(text) + 1);
	free(text);
	return rc;
}

/* A record only this user could have written (ws_read_secret: no link, a
 * regular file of its own, readable by no one else), parsed. 0, or -1
 * with err. */
static int
record_read(const char *path, struct holder_rec *r, char *err, size_t errlen)
{
	size_t len;
	char *text = ws_read_secret(path, HOLDER_RECORD_MAX, &len, err, errlen);

	if (text == NULL)
		return -1;
	int rc = holder_record_parse(text, len, r, err, errlen);
	free(text);
	return rc;
}

int
holder_here(char machine[HOLDER_ID_MAX], char boot[HOLDER_ID_MAX], char *err, size_t errlen)
{
	if (first_line("/etc/machine-id", machine, HOLDER_ID_MAX) != 0) {
		snprintf(err, errlen, "/etc/machine-id cannot be read");
		return -1;
	}
	/* The boot id only hastens a proof: a unit with ProcSubset=pid cannot
	 * read it, and the pid with its start time proves the same. */
	if (first_line("/proc/sys/kernel/random/boot_id", boot, HOLDER_ID_MAX) != 0)
		boot[0] = '\0';
#ifdef COTAL_TEST_HOOKS
	/* A test build may stand on another machine. */
	if (getenv("COTAL_TEST_MACHINE_ID") != NULL)
		snprintf(machine, HOLDER_ID_MAX, "%s", getenv("COTAL_TEST_MACHINE_ID"));
#endif
	return 0;
}

int
holder_pid_start(pid_t pid, unsigned long long *start)
{
	struct procstat ps;

	/* A zombie or a dead task runs no more. */
	if (procstat_read(pid, &ps) != 0 || ps.state == 'Z' || ps.state == 'X')
		return -1;
	*start = ps.start_ticks;
	return 0;
}

int
holder_record_write(const char *path, const char *holder, const char *incarnation, char *err,
		    size_t errlen)
{
	char machine[HOLDER_ID_MAX], boot[HOLDER_ID_MAX];
	unsigned long long start;

	if (holder_here(machine, boot, err, errlen) != 0)
		return -1;
	if (holder_pid_start(getpid(), &start) != 0) {
		snprintf(err, errlen, "this process's start time cannot be read");
		return -1;
	}
	json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "holder", holder,
	    "incarnation", incarnation, "machine", machine, "boot", boot,
	    "pid", (json_int_t)getpid(), "start", (json_int_t)start);
	int rc = doc != NULL ? ws_replace_json(path, doc, 0600, err, errlen) : -1;
	json_decref(doc);
	return rc;
}

/* A string field of at most len - 1 bytes, printable ASCII; empty only
 * when may_be_empty. */
static int
text_field(json_t *doc, const char *name, char *out, size_t len, char *err, size_t errlen,
	   bool may_be_empty)
{
	const char *v = json_string_value(json_object_get(doc, name));

	if (v == NULL || (v[0] == '\0' && !may_be_empty) || strlen(v) >= len) {
		snprintf(err, errlen, "%s: missing, empty or longer than %zu", name, len - 1);
		return -1;
	}
	for (const char *c = v; *c != '\0'; c++)
		if (*c <= ' ' || *c > '~') {
			snprintf(err, errlen, "%s: a byte 0x%02x", name, (unsigned)(unsigned char)*c);
			return -1;
		}
	snprintf(out, len, "%s", v);
	return 0;
}

int
holder_record_parse(const char *text, size_t len, struct holder_rec *r, char *err, size_t errlen)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je), *pid, *start;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(doc)) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	pid = json_object_get(doc, "pid");
	start = json_object_get(doc, "start");
	if (text_field(doc, "holder", r->holder, sizeof(r->holder), err, errlen, false) != 0 ||
	    text_field(doc, "incarnation", r->incarnation, sizeof(r->incarnation), err,
	    errlen, false) != 0 ||
	    text_field(doc, "machine", r->machine, sizeof(r->machine), err, errlen, false) != 0 ||
	    text_field(doc, "boot", r->boot, sizeof(r->boot), err, errlen, true) != 0)
		goto out;
	if (!json_is_integer(pid) || json_integer_value(pid) <= 1) {
		snprintf(err, errlen, "pid: not a process id");
		goto out;
	}
	if (!json_is_integer(start) || json_integer_value(start) < 0) {
		snprintf(err, errlen, "start: not a start time");
		goto out;
	}
	r->pid = (long long)json_integer_value(pid);
	r->start = (unsigned long long)json_integer_value(start);
	rc = 0;
out:
	json_decref(doc);
	return rc;
}

bool
holder_proves_dead(const struct holder_rec *r, const struct lease_row *row,
		   const char *here_machine, const char *here_boot, int pid_state,
		   unsigned long long pid_start, char *why, size_t whylen)
{
	if (strcmp(r->incarnation, row->incarnation) != 0 || strcmp(r->holder, row->holder) != 0) {
		snprintf(why, whylen, "the record names incarnation %.48s, the row %.48s",
		    r->incarnation, row->incarnation);
		return false;
	}
	if (strcmp(r->machine, here_machine) != 0) {
		snprintf(why, whylen, "the holder ran on machine %.40s, not this one", r->machine);
		return false;
	}
	if (r->boot[0] != '\0' && here_boot[0] != '\0' && strcmp(r->boot, here_boot) != 0) {
		snprintf(why, whylen, "the machine booted since pid %lld held it", r->pid);
		return true;
	}
	if (pid_state != 0) {
		snprintf(why, whylen, "pid %lld is gone", r->pid);
		return true;
	}
	if (pid_start != r->start) {
		snprintf(why, whylen, "pid %lld is another process now", r->pid);
		return true;
	}
	snprintf(why, whylen, "pid %lld still runs", r->pid);
	return false;
}

bool
holder_record_proves_dead(const char *path, const struct lease_row *row, char *why,
			  size_t whylen)
{
	char machine[HOLDER_ID_MAX], boot[HOLDER_ID_MAX], err[512];
	struct holder_rec r;
	unsigned long long start = 0;

	if (record_read(path, &r, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "no record of this machine's holder to trust (none, not a file "
		    "of this user's alone, or unreadable): %s", err);
		return false;
	}
	if (holder_here(machine, boot, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "%s", err);
		return false;
	}
	int state = holder_pid_start((pid_t)r.pid, &start);
	return holder_proves_dead(&r, row, machine, boot, state, start, why, whylen);
}

void
holder_record_remove_if_ours(const char *path, const char *incarnation)
{
	char err[512];
	struct holder_rec r;

	if (record_read(path, &r, err, sizeof(err)) == 0 &&
	    strcmp(r.incarnation, incarnation) == 0)
		unlink(path);
}
