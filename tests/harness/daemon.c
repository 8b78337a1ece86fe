/*
 * The daemon under test: cotal-deliveryd started in the background or run
 * to its end, waited for (ready: its workers connected, its log saying so)
 * and killed; its status file read (a worker's pid, state and counters) and
 * its log searched. A suite's setup on a serving daemon.
 */
#include "tests/harness/harness_int.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/names.h"

#ifndef COTAL_DAEMON_PATH
#error "COTAL_DAEMON_PATH must name the cotal-deliveryd binary"
#endif

const char *h_daemon_bin = COTAL_DAEMON_PATH;

int
h_daemon_start(struct mesh *m, struct daemon *d, ...)
{
	char *argv[32], outp[H_PATH_MAX + 32], key[512];
	int n = 0;
	va_list ap;
	char *a;
	pid_t pid;

	memset(d, 0, sizeof(*d));
	space_key(m->space, key, sizeof(key));
	snprintf(d->log, sizeof(d->log), "%s/.cotal/delivery.%s.log", m->dir, key);
	snprintf(d->status, sizeof(d->status), "%s/.cotal/delivery.%s.status.json", m->dir, key);
	argv[n++] = (char *)h_daemon_bin;
	argv[n++] = (char *)"--space";
	argv[n++] = m->space;
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	va_start(ap, d);
	while ((a = va_arg(ap, char *)) != NULL && n < 30)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	snprintf(outp, sizeof(outp), "%s/daemon.out", m->dir);
	if ((pid = hi_spawn_in(m, argv, outp, m->daemon_netns)) < 0)
		return -1;
	hi_track(pid, true);
	d->pid = pid;
	return 0;
}

pid_t
h_daemon_spawn(struct mesh *m, const char *outpath, ...)
{
	char *argv[32], *a;
	int n = 0;
	va_list ap;
	pid_t pid;

	argv[n++] = (char *)COTAL_DAEMON_PATH;
	va_start(ap, outpath);
	while ((a = va_arg(ap, char *)) != NULL && n < 31)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	if ((pid = hi_spawn_logged(m, argv, outpath)) > 0)
		hi_track(pid, true);
	return pid;
}

json_t *
h_daemon_status(struct daemon *d)
{
	return json_load_file(d->status, 0, NULL);
}

/* The status file's entry of a worker role (borrowed from doc), or NULL. */
static json_t *
worker_of(json_t *doc, const char *role)
{
	json_t *w, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w) {
		const char *r = json_string_value(json_object_get(w, "role"));
		if (r != NULL && strcmp(r, role) == 0)
			found = w;
	}
	return found;
}

pid_t
h_daemon_worker_pid(struct daemon *d, const char *role)
{
	json_t *doc = h_daemon_status(d);
	pid_t pid = (pid_t)json_integer_value(json_object_get(worker_of(doc, role), "pid"));

	json_decref(doc);
	return pid;
}

/* A worker role's counter: 0 when the worker has none by that name, -1 when
 * the status file lists no such worker (or there is none). */
static int64_t
counter_read(struct daemon *d, const char *role, const char *name)
{
	json_t *doc = h_daemon_status(d), *w = worker_of(doc, role);
	int64_t v = -1;

	if (w != NULL)
		v = json_integer_value(json_object_get(json_object_get(w, "counters"), name));
	json_decref(doc);
	return v;
}

uint64_t
h_daemon_counter(struct daemon *d, const char *role, const char *name)
{
	int64_t v = counter_read(d, role, name);

	return v > 0 ? (uint64_t)v : 0;
}

int64_t
h_daemon_counter_reaches(struct daemon *d, const char *role, const char *name, int64_t want,
			 int ms)
{
	int64_t v, until = mono_ms() + ms;

	while ((v = counter_read(d, role, name)) < want && mono_ms() < until)
		hi_sleep_ms(100);
	return v;
}

void
h_daemon_print(struct daemon *d)
{
	json_t *doc = h_daemon_status(d), *w;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w) {
		char *c = json_dumps(json_object_get(w, "counters"), JSON_COMPACT);
		fprintf(stderr, "  worker %s: pid %lld state %s restarts %lld lastExit \"%s\" %s\n",
		    json_string_value(json_object_get(w, "role")),
		    (long long)json_integer_value(json_object_get(w, "pid")),
		    json_string_value(json_object_get(w, "state")),
		    (long long)json_integer_value(json_object_get(w, "restarts")),
		    json_string_value(json_object_get(w, "lastExit")), c ? c : "");
		free(c);
	}
	if (doc == NULL)
		fprintf(stderr, "  no status file %s\n", d->status);
	json_decref(doc);
}

int
h_daemon_wait_connected(struct daemon *d, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		json_t *doc = h_daemon_status(d), *w;
		size_t i, ok = 0, all = 0;
		json_array_foreach(json_object_get(doc, "workers"), i, w) {
			all++;
			ok += strcmp(json_string_value(json_object_get(w, "state")), "connected") == 0;
		}
		json_decref(doc);
		if (all > 0 && ok == all)
			return 0;
		if (d->pid > 0 && waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			hi_track(d->pid, false);
			d->pid = 0;
			return -1;
		}
		hi_sleep_ms(50);
	}
	return -1;
}

/* h_daemon_ready with its lines in ap. */
static int
ready_v(struct daemon *d, int ms, va_list ap)
{
	const char *line;

	if (h_daemon_wait_connected(d, ms) != 0) {
		fprintf(stderr, "✗ the daemon did not bring its workers up; see %s\n", d->log);
		return -1;
	}
	while ((line = va_arg(ap, const char *)) != NULL)
		if (!h_log_has(d->log, line, ms)) {
			fprintf(stderr, "✗ the daemon did not log \"%s\" within %d ms; see %s\n", line,
			    ms, d->log);
			return -1;
		}
	return 0;
}

int
h_daemon_ready(struct daemon *d, int ms, ...)
{
	va_list ap;
	int rc;

	va_start(ap, ms);
	rc = ready_v(d, ms, ap);
	va_end(ap);
	return rc;
}

int
h_mesh_prov_up(struct mesh *m, const char *space, struct conn *prov)
{
	char err[1024];

	if (h_mesh_up(m, space, true) != 0)
		return -1;
	if (h_connect_profile(m, "provisioner", prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	return 0;
}

int
h_metrics_daemon_start(struct mesh *m, struct daemon *d, const char *creds, int *port)
{
	char addr[64];

	if ((*port = h_free_port()) <= 0)
		return -1;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", *port);
	if (creds != NULL)
		return h_daemon_start(m, d, "--creds", creds, "--metrics", addr, NULL);
	return h_daemon_start(m, d, "--metrics", addr, NULL);
}

int
h_daemon_up(struct mesh *m, const char *space, struct conn *prov, struct daemon *d, int ms, ...)
{
	va_list ap;
	int rc;

	if (h_mesh_prov_up(m, space, prov) != 0)
		return -1;
	if (h_daemon_start(m, d, NULL) != 0) {
		fprintf(stderr, "✗ the daemon did not start\n");
		return -1;
	}
	va_start(ap, ms);
	rc = ready_v(d, ms, ap);
	va_end(ap);
	return rc;
}

int
h_daemon_wait_exit(struct daemon *d, int ms)
{
	int status;

	for (int waited = 0; waited <= ms; waited += 10) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			hi_track(d->pid, false);
			d->pid = 0;
			return status;
		}
		hi_sleep_ms(10);
	}
	return -1;
}

void
h_daemon_stop(struct daemon *d, int ms)
{
	if (d->pid > 0 && kill(d->pid, SIGTERM) == 0 && h_daemon_wait_exit(d, ms) >= 0)
		return;
	h_daemon_kill(d);
}

void
h_daemon_kill(struct daemon *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		hi_track(d->pid, false);
		d->pid = 0;
	}
}

bool
h_log_has(const char *path, const char *needle, int ms)
{
	for (int waited = 0; ; waited += 50) {
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			char line[8192];
			while (fgets(line, sizeof(line), f) != NULL)
				if (strstr(line, needle) != NULL) {
					fclose(f);
					return true;
				}
			fclose(f);
		}
		if (waited >= ms)
			return false;
		hi_sleep_ms(50);
	}
}

int
h_log_count_after(const char *path, long from, const char *needle)
{
	char line[8192];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return 0;
	if (fseek(f, from, SEEK_SET) == 0)
		while (fgets(line, sizeof(line), f) != NULL)
			n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

int
h_log_count(const char *path, const char *needle)
{
	char line[8192];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

void
h_log_print_tail(const char *path, int n)
{
	char line[8192], (*ring)[512] = calloc((size_t)n, sizeof(*ring));
	long total = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL || ring == NULL || n <= 0) {
		fprintf(stderr, "  (no log at %s)\n", path);
		if (f != NULL)
			fclose(f);
		free(ring);
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *slot = ring[total++ % n];
		size_t len = strnlen(line, sizeof(ring[0]) - 2);
		memcpy(slot, line, len);
		if (len > 0 && slot[len - 1] != '\n')
			slot[len++] = '\n';
		slot[len] = '\0';
	}
	fclose(f);
	fprintf(stderr, "  the last %ld lines of %s:\n", total < n ? total : (long)n, path);
	for (long i = total < n ? 0 : total - n; i < total; i++)
		fprintf(stderr, "  | %s", ring[i % n]);
	free(ring);
}

int
h_daemon_run(struct mesh *m, const char *cwd, char *out, size_t outlen, ...)
{
	char *argv[32];
	int n = 0;
	va_list ap;
	char *a;

	argv[n++] = (char *)COTAL_DAEMON_PATH;
	va_start(ap, outlen);
	while ((a = va_arg(ap, char *)) != NULL && n < 30)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	char here[H_PATH_MAX];
	if (getcwd(here, sizeof(here)) == NULL || (cwd != NULL && chdir(cwd) != 0))
		return -1;
	int rc = hi_run_capture(m, argv, out, outlen);
	if (chdir(here) != 0)
		return -1;
	return rc;
}

void
h_sleep_ms(int ms)
{
	hi_sleep_ms(ms);
}

uint64_t
h_proc_ticks(pid_t pid)
{
	char path[64], buf[2048];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (pid <= 0 || (f = fopen(path, "r")) == NULL)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After the command's closing parenthesis: state, then utime and
	 * stime as the 12th and 13th fields. */
	const char *p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	    &ut, &st) != 2)
		return 0;
	return ut + st;
}

long
h_proc_kb(pid_t pid, const char *file, const char *field)
{
	char path[64], line[256];
	size_t fl = strlen(field);
	long kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, fl) == 0 && line[fl] == ':' &&
		    sscanf(line + fl + 1, "%ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

long
h_daemon_rss_kb(struct daemon *d)
{
	json_t *doc = h_daemon_status(d), *w;
	long kb = h_proc_kb(d->pid, "status", "VmRSS");
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		kb += h_proc_kb((pid_t)json_integer_value(json_object_get(w, "pid")), "status",
		    "VmRSS");
	json_decref(doc);
	return kb;
}

long long
h_daemon_restarts(struct daemon *d)
{
	json_t *doc = h_daemon_status(d), *w;
	long long n = 0;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		n += json_integer_value(json_object_get(w, "restarts"));
	json_decref(doc);
	return n;
}

void
h_space_account(struct mesh *m, char *out, size_t len)
{
	char path[H_PATH_MAX];
	json_t *mj;

	snprintf(path, sizeof(path), "%s/.cotal/mesh/dev-mesh.json", m->dir);
	mj = json_load_file(path, 0, NULL);
	snprintf(out, len, "%s", json_string_value(json_object_get(json_object_get(json_object_get(mj,
	    "spaces"), m->space), "account")) ?: "");
	json_decref(mj);
}

/* n, less suffix when text[0..n) ends with it. */
static int
strip(const char *text, int n, const char *suffix)
{
	int sl = (int)strlen(suffix);

	return n >= sl && strncmp(text + n - sl, suffix, (size_t)sl) == 0 ? n - sl : n;
}

int
h_audit_agrees(struct mesh *m, const char *creds, const char *profile, const char *said,
	       char *why, size_t whylen)
{
	char *out = malloc(H_OUT_MAX), acct[128], line[8192];
	int rc, refusals = 0;
	const char *p, *e;

	if (out == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	const char *words = strcmp(profile, "sys-observer") == 0 ? "the $SYS observer credential " :
	    strcmp(profile, "sys-evictor") == 0 ? "the $SYS evictor credential " : "the credential ";
	h_space_account(m, acct, sizeof(acct));
	rc = h_cotal(m, out, H_OUT_MAX, "creds", "audit", creds, "--profile", profile, "--space",
	    m->space, "--account", acct, NULL);
	/* Each of the daemon's lines, its mark and "delivery: " off, found as
	 * a line of the audit's verdict. */
	for (p = said; *p != '\0'; p = *e ? e + 1 : e) {
		const char *x, *text, *mark = "!";
		bool refusal;
		e = strchr(p, '\n');
		if (e == NULL)
			e = p + strlen(p);
		int n = (int)(e - p);
		if ((x = memmem(p, (size_t)n, "✗ delivery: ", strlen("✗ delivery: "))) != NULL &&
		    n > 13 && strncmp(e - 13, "; not binding", 13) == 0)
			refusal = true;
		else if ((x = memmem(p, (size_t)n, "! delivery: ", strlen("! delivery: "))) != NULL &&
		    memmem(p, (size_t)n, " is off", 7) != NULL)
			refusal = false;
		else if ((x = memmem(p, (size_t)n, "• delivery: ", strlen("• delivery: "))) != NULL &&
		    memmem(p, (size_t)n, "no feature of the daemon needs", 30) != NULL) {
			refusal = false; /* a note of the verdict's */
			mark = "•";
		} else
			continue;
		text = strstr(x, ": ") + 2;
		int tn = (int)(e - text);
		/* Only what it said of this credential: named by its kind's
		 * words or by its file. */
		if (strncmp(text, words, strlen(words)) != 0 &&
		    !memmem(text, (size_t)tn, creds, strlen(creds)))
			continue;
		/* A refusal is in the audit's words too, a ✗ line of its
		 * verdict or, for the file itself, its reason for exit 2. */
		char file[sizeof(line)] = "";
		if (refusal) {
			tn = strip(text, tn, "; not binding");
			refusals++;
			snprintf(line, sizeof(line), "  ✗ %.*s\n", tn, text);
			snprintf(file, sizeof(file), "creds audit: %.*s", tn, text);
		} else
			snprintf(line, sizeof(line), "  %s %.*s\n", mark, tn, text);
		if (strstr(out, line) == NULL && (file[0] == '\0' || strstr(out, file) == NULL)) {
			snprintf(why, whylen, "the daemon said \"%.*s\", the audit of %s (profile %s) "
			    "did not:\n%s", tn, text, creds, profile, out);
			free(out);
			return -1;
		}
	}
	if (refusals > 0 ? rc != 1 && rc != 2 : rc != 0) {
		snprintf(why, whylen, "the daemon %s %s, yet its audit (profile %s) exited %d:\n%s",
		    refusals > 0 ? "refused" : "took", creds, profile, rc, out);
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

char *
h_file_text(const char *path, long from)
{
	FILE *f = fopen(path, "r");
	char *t;
	size_t n;

	if (f == NULL)
		return NULL;
	if (fseek(f, from, SEEK_SET) != 0) {
		fclose(f);
		return NULL;
	}
	if ((t = malloc(H_OUT_MAX)) == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(t, 1, H_OUT_MAX - 1, f);
	t[n] = '\0';
	fclose(f);
	return t;
}

int
h_evict_ledger(const char *path, size_t *verified)
{
	json_t *l = json_load_file(path, 0, NULL), *v;
	size_t i;
	int sent = l != NULL ? (int)json_integer_value(json_object_get(l, "sent")) : -1;

	*verified = 0;
	json_array_foreach(json_object_get(l, "verified"), i, v)
		*verified += json_array_size(v);
	json_decref(l);
	return sent;
}
