/*
 * Issue 29: `cotal status --json` and `cotal status --spaces ... --json`
 * against a real broker and the real daemon:
 *
 *   "`cotal status --json` (and `--spaces … --json`) with the same facts
 *    as the metrics, for scripts; the human output stays."
 *   "`cotal status --json` output validated against a schema file in
 *    `docs/`."
 *
 * Each document is validated with `python3 -m jsonschema` (Debian's
 * python3-jsonschema) against docs/status.schema.json, and its values
 * checked against the daemon itself: its pid, its credential's expiry (the
 * JWT's exp), its workers' counters after durable posts, what /proc says
 * each process costs.
 */
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define READY_MS 30000
#define COUNT_MS 15000  /* for a counter to reach the status file */
#define POSTS 6         /* from ann to room; ben and cat copied */
#define SCHEMA_NAME "cotal-delivery-status/1"

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov;
static struct h_fixture fx = { &mesh, &dmn, NULL, { &prov } };
static char schema[PATH_MAX], rpath[H_PATH_MAX * 2], credsp[H_PATH_MAX * 2];
static const char *python;

/* docs/status.schema.json of this source tree. */
static int
schema_locate(void)
{
	char src[PATH_MAX];
	const char *env = getenv("COTAL_STATUS_SCHEMA");

	if (env != NULL) {
		snprintf(schema, sizeof(schema), "%s", env);
	} else {
		snprintf(src, sizeof(src), "%s", __FILE__);
		char *slash = strrchr(src, '/');
		if (slash == NULL)
			return -1;
		*slash = '\0';
		snprintf(schema, sizeof(schema), "%s/../../docs/status.schema.json", src);
	}
	if (access(schema, R_OK) != 0) {
		fprintf(stderr, "✗ the schema %s cannot be read (COTAL_STATUS_SCHEMA names "
		    "another)\n", schema);
		return -1;
	}
	return 0;
}

static int
setup(void **state)
{
	char out[H_OUT_MAX], err[1024], key[512], cmd[PATH_MAX + 64];

	*state = &fx;
	/* Debian's own Python, where make deps installs python3-jsonschema: a
	 * python3 earlier on the PATH (pyenv's) may not have it. */
	python = getenv("COTAL_TEST_PYTHON") ? getenv("COTAL_TEST_PYTHON") : "/usr/bin/python3";
	snprintf(cmd, sizeof(cmd), "%s -c 'import jsonschema' 2>/dev/null", python);
	if (system(cmd) != 0) {
		fprintf(stderr, "✗ %s cannot import jsonschema: install python3-jsonschema "
		    "(make deps)\n", python);
		return -1;
	}
	if (schema_locate() != 0 || h_mesh_up(&mesh, "statusjson", true) != 0)
		return -1;
	/* A delivery credential that expires, for expiresAt to be checked. */
	if (h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space, "--profile",
	    "delivery", "--force", "--expires", "86400", NULL) != 0) {
		fprintf(stderr, "✗ cotal creds mint:\n%s", out);
		return -1;
	}
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	space_key(mesh.space, key, sizeof(key));
	snprintf(rpath, sizeof(rpath), "%s/.cotal/delivery.%s.pid", mesh.dir, key);
	snprintf(credsp, sizeof(credsp), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	if (h_daemon_start(&mesh, &dmn, NULL) != 0)
		return -1;
	return h_daemon_ready(&dmn, READY_MS, "delivery daemon up", NULL);
}

/* Run `cotal status ARGS` (with --root <dir> unless a host's): stdout
 * into <dir>/<name>.json, stderr into <dir>/<name>.err. Its exit status. */
static int
status_run(const char *args, const char *name, char *outp, size_t outlen)
{
	char cmd[H_PATH_MAX * 8], root[H_DIR_MAX + 16] = "";
	int st;

	if (strstr(args, "--spaces") == NULL)
		snprintf(root, sizeof(root), "--root '%s'", mesh.dir);
	snprintf(outp, outlen, "%s/%s.json", mesh.dir, name);
	snprintf(cmd, sizeof(cmd), "'%s' status %s %s > '%s' 2> '%s/%s.err'", COTAL_CLI_PATH,
	    args, root, outp, mesh.dir, name);
	st = system(cmd);
	if (!WIFEXITED(st))
		fail_msg("%s did not exit", cmd);
	return WEXITSTATUS(st);
}

/* The file at path is one JSON document the schema accepts; parsed. */
static json_t *
validated(const char *path)
{
	char cmd[H_PATH_MAX * 8], vout[H_PATH_MAX * 2 + 16], text[8192] = "";
	json_error_t jerr;
	json_t *doc;

	/* One document: json_load_file refuses anything after it. */
	if ((doc = json_load_file(path, 0, &jerr)) == NULL)
		fail_msg("%s is not one JSON document: %s (line %d)", path, jerr.text, jerr.line);
	snprintf(vout, sizeof(vout), "%s.validation", path);
	snprintf(cmd, sizeof(cmd), "%s -m jsonschema -i '%s' '%s' > '%s' 2>&1", python, path,
	    schema, vout);
	int st = system(cmd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		FILE *f = fopen(vout, "r");
		if (f != NULL) {
			text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
			fclose(f);
		}
		fail_msg("%s does not validate against %s:\n%s", path, schema, text);
	}
	assert_string_equal(json_string_value(json_object_get(doc, "schema")), SCHEMA_NAME);
	return doc;
}

/* stderr of a run said nothing. */
static void
quiet(const char *name)
{
	char path[H_PATH_MAX * 2];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s.err", mesh.dir, name);
	assert_int_equal(stat(path, &st), 0);
	if (st.st_size != 0)
		fail_msg("cotal status wrote on stderr: see %s", path);
}

/* The delivery credential's exp (the JWT's, seconds). */
static int64_t
creds_exp(void)
{
	struct creds c;
	struct jwt j;
	char err[512];
	int64_t exp;

	if (creds_load(credsp, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	if (jwt_decode(c.jwt, strlen(c.jwt), &j, err, sizeof(err)) != 0)
		fail_msg("%s: %s", credsp, err);
	exp = j.exp;
	jwt_free(&j);
	creds_free(&c);
	return exp;
}

/* utime + stime of a process now, in seconds (the kernel's clock ticks). */
static double
cpu_now(pid_t pid)
{
	char path[64], buf[2048];
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
	    &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A "process" of the document is pid's as /proc says it: its resident set
 * within a factor of two of VmRSS now, its CPU seconds no more than now. */
static void
process_is(json_t *proc, pid_t pid, const char *what)
{
	if (!json_is_object(proc))
		fail_msg("%s (pid %ld): no process in the document", what, (long)pid);
	json_int_t rss = json_integer_value(json_object_get(proc, "rssBytes"));
	double cpu = json_number_value(json_object_get(proc, "cpuSeconds"));
	long vmrss = h_proc_kb(pid, "status", "VmRSS") * 1024;
	double cpu_later = cpu_now(pid);

	printf("• %s (pid %ld): rssBytes %lld (VmRSS now %ld), cpuSeconds %.2f\n", what,
	    (long)pid, (long long)rss, vmrss, cpu);
	if (rss <= 0 || vmrss <= 0 || rss > 2 * (json_int_t)vmrss || 2 * rss < (json_int_t)vmrss)
		fail_msg("%s (pid %ld): rssBytes %lld, VmRSS %ld bytes", what, (long)pid,
		    (long long)rss, vmrss);
	if (cpu < 0 || cpu > cpu_later + 1e-9)
		fail_msg("%s (pid %ld): cpuSeconds %f, /proc says %f later", what, (long)pid, cpu,
		    cpu_later);
}

/* Every worker of a daemon's status document runs (its pid in /proc) and
 * has its process and counters; the roles all four. */
static void
workers_are_live(json_t *status)
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
	json_t *workers = json_object_get(status, "workers");

	assert_int_equal(json_array_size(workers), 4);
	for (size_t i = 0; i < 4; i++) {
		json_t *w = json_array_get(workers, i);
		assert_string_equal(json_string_value(json_object_get(w, "role")), roles[i]);
		pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
		assert_true(pid > 1);
		assert_true(json_is_object(json_object_get(w, "counters")));
		assert_true(json_object_size(json_object_get(w, "counters")) > 0);
		process_is(json_object_get(w, "process"), pid, roles[i]);
	}
}

/* A counter of a role in a daemon's status document. */
static json_int_t
counter_of(json_t *status, const char *role, const char *name)
{
	json_t *w;
	size_t i;

	json_array_foreach(json_object_get(status, "workers"), i, w)
		if (strcmp(json_string_value(json_object_get(w, "role")), role) == 0)
			return json_integer_value(json_object_get(json_object_get(w, "counters"),
			    name));
	fail_msg("no worker %s", role);
	return -1;
}

/* Wait up to ms for the pid record to name pid and the status file to say
 * its shard serves. */
static bool
daemon_serving(pid_t pid, int ms)
{
	for (int64_t end = mono_ms() + ms;; h_nap(100)) {
		FILE *f = fopen(rpath, "r");
		long rec = 0;
		if (f != NULL) {
			if (fscanf(f, "%ld", &rec) != 1)
				rec = 0;
			fclose(f);
		}
		json_t *doc = h_daemon_status(&dmn);
		const char *shard = json_string_value(json_object_get(doc, "shard"));
		bool ok = rec == pid && shard != NULL && strcmp(shard, "serving") == 0;
		json_decref(doc);
		if (ok)
			return true;
		if (mono_ms() >= end)
			return false;
	}
}

/*
 * "`cotal status --json` output validated against a schema file in
 * `docs/`." A serving daemon after 6 durable posts to 3 members: the
 * document validates, says running and serving, names the daemon's pid
 * (and its record), embeds its status with the copies counted (12: the
 * sender is not copied), the credential's expiry as the JWT's exp × 1000,
 * and each process's cost as /proc says it. The human output stays.
 */
static void
test_status_json_of_a_serving_daemon_matches_the_daemon(void **state)
{
	static const char *const names[3] = { "ann", "ben", "cat" };
	struct member m[3];
	char err[1024], outp[H_PATH_MAX * 2], args[512], id[32], out[H_OUT_MAX];

	(void)state;
	assert_true(daemon_serving(dmn.pid, READY_MS));
	for (int i = 0; i < 3; i++) {
		if (h_member_add(&mesh, names[i], "room", NULL, &m[i], err, sizeof(err)) != 0 ||
		    h_member_join(&prov, &mesh, &m[i].a, "room", 1, err, sizeof(err)) != 0)
			fail_msg("%s: %s", names[i], err);
	}
	for (int k = 0; k < POSTS; k++) {
		snprintf(id, sizeof(id), "sj-%d", k);
		assert_int_equal(h_post(&m[0].c, &mesh, &m[0].a, "room", id, "hi", NULL), 0);
	}
	/* Every copy delivered, and counted in the status file. */
	for (int i = 1; i < 3; i++) {
		bool hdr = false;
		json_t *frames = h_dlv_drain_n(&m[i].c, &mesh, &m[i].a, POSTS, 20000, 1000, &hdr, err,
		    sizeof(err));
		if (frames == NULL)
			fail_msg("%s: %s", names[i], err);
		assert_int_equal(json_array_size(frames), POSTS);
		json_decref(frames);
	}
	assert_int_equal(h_daemon_counter_reaches(&dmn, "fanout", "copies", 2 * POSTS, COUNT_MS),
	    2 * POSTS);
	assert_int_equal(h_daemon_counter_reaches(&dmn, "fanout", "posts", POSTS, COUNT_MS), POSTS);

	snprintf(args, sizeof(args), "--space '%s' --json", mesh.space);
	assert_int_equal(status_run(args, "serving", outp, sizeof(outp)), 0);
	quiet("serving");
	json_t *doc = validated(outp);
	assert_string_equal(json_string_value(json_object_get(doc, "space")), mesh.space);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "running");
	assert_true(json_is_true(json_object_get(doc, "serving")));
	assert_true(json_is_null(json_object_get(doc, "reason")));
	assert_int_equal(json_integer_value(json_object_get(doc, "pid")), dmn.pid);
	json_t *rec = json_object_get(doc, "pidRecord");
	assert_string_equal(json_string_value(json_object_get(rec, "path")), rpath);
	assert_int_equal(json_integer_value(json_object_get(rec, "pid")), dmn.pid);
	assert_string_equal(json_string_value(json_object_get(doc, "statusFile")), dmn.status);
	process_is(json_object_get(doc, "process"), dmn.pid, "supervisor");

	json_t *st = json_object_get(doc, "status");
	assert_int_equal(json_integer_value(json_object_get(st, "pid")), dmn.pid);
	assert_string_equal(json_string_value(json_object_get(st, "space")), mesh.space);
	assert_string_equal(json_string_value(json_object_get(st, "shard")), "serving");
	assert_false(json_is_true(json_object_get(st, "lane")));
	workers_are_live(st);
	assert_int_equal(counter_of(st, "fanout", "posts"), POSTS);
	assert_int_equal(counter_of(st, "fanout", "copies"), 2 * POSTS);

	json_t *cred = json_array_get(json_object_get(st, "credentials"), 0);
	int64_t exp = creds_exp();
	assert_string_equal(json_string_value(json_object_get(cred, "name")), "delivery");
	assert_true(exp > 0);
	assert_int_equal(json_integer_value(json_object_get(cred, "expiresAt")), exp * 1000);
	printf("• delivery credential expiresAt %lld = the JWT's exp %lld × 1000\n",
	    (long long)json_integer_value(json_object_get(cred, "expiresAt")), (long long)exp);
	json_t *broker = json_object_get(st, "broker");
	const char *in_use = json_string_value(json_object_get(broker, "inUse"));
	assert_true(json_is_true(json_object_get(broker, "connected")));
	assert_true(in_use != NULL && in_use[0] != '\0');
	printf("• broker in use %s (the mesh's %s)\n", in_use, mesh.url);
	json_decref(doc);

	/* The human output stays. */
	char human[H_OUT_MAX];
	snprintf(out, sizeof(out), "delivery daemon for space %s: pid %ld, broker ", mesh.space,
	    (long)dmn.pid);
	assert_int_equal(h_cotal(&mesh, human, sizeof(human), "status", "--space", mesh.space,
	    NULL), 0);
	assert_memory_equal(human, out, strlen(out));
	assert_non_null(strstr(human, "\n  fanout   connected"));
	assert_null(strchr(human, '{'));
	for (int i = 0; i < 3; i++)
		h_close(&m[i].c);
}

/*
 * "`cotal status --json` output validated against a schema file in
 * `docs/`." When no daemon runs: exit 3, state "not running", no status,
 * no process; a record naming a process that is no delivery daemon (this
 * test): exit 3, "stale record" with that pid. Both validate.
 */
static void
test_status_json_when_not_running_and_stale(void **state)
{
	char outp[H_PATH_MAX * 2], args[512];
	FILE *f;

	(void)state;
	h_daemon_stop(&dmn, 15000);
	snprintf(args, sizeof(args), "--space '%s' --json", mesh.space);
	assert_int_equal(status_run(args, "stopped", outp, sizeof(outp)), 3);
	quiet("stopped");
	json_t *doc = validated(outp);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "not running");
	assert_false(json_is_true(json_object_get(doc, "serving")));
	assert_true(json_is_null(json_object_get(doc, "pid")));
	assert_true(json_is_null(json_object_get(doc, "process")));
	assert_true(json_is_null(json_object_get(doc, "status")));
	assert_non_null(json_string_value(json_object_get(doc, "reason")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "pidRecord"),
	    "pid")), 0);
	json_decref(doc);

	assert_non_null(f = fopen(rpath, "w"));
	fprintf(f, "%ld\n", (long)getpid());
	fclose(f);
	assert_int_equal(status_run(args, "stale", outp, sizeof(outp)), 3);
	quiet("stale");
	doc = validated(outp);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "stale record");
	assert_int_equal(json_integer_value(json_object_get(doc, "pid")), getpid());
	assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "pidRecord"),
	    "pid")), getpid());
	assert_true(json_is_null(json_object_get(doc, "status")));
	json_decref(doc);
	unlink(rpath);

	/* Errors stay on stderr, naming what is wrong; nothing on stdout. */
	char errp[H_PATH_MAX * 2];
	struct stat st;
	assert_int_equal(status_run("--space '' --json --bogus", "bad", outp, sizeof(outp)), 2);
	assert_int_equal(stat(outp, &st), 0);
	assert_int_equal(st.st_size, 0);
	snprintf(errp, sizeof(errp), "%s/bad.err", mesh.dir);
	assert_true(h_log_has(errp, "unknown or incomplete argument \"--bogus\"", 0));
}

/* The host's status entry of the one lane: its pid, 0 while none. */
static pid_t
host_lane_pid(const char *hoststat)
{
	json_t *doc = json_load_file(hoststat, 0, NULL);
	pid_t pid = (pid_t)json_integer_value(json_object_get(json_array_get(json_object_get(doc,
	    "lanes"), 0), "pid"));

	json_decref(doc);
	return pid;
}

/*
 * "`cotal status --json` output validated against a schema file in
 * `docs/`." The --spaces form: one document for a host serving one lane,
 * the host's pid and cost, one entry of the --space shape for the lane
 * (no pid record: a lane writes none) with the host's view of it. After
 * the host stops: exit 3, "not running". Both validate.
 */
static void
test_status_json_of_a_host_and_its_lanes(void **state)
{
	char manifest[H_PATH_MAX * 2], rundir[H_PATH_MAX * 2], hoststat[H_PATH_MAX * 3];
	char outp[H_PATH_MAX * 2], hostout[H_PATH_MAX * 2], args[H_PATH_MAX * 5];
	pid_t host, lane = 0;
	FILE *f;

	(void)state;
	h_daemon_stop(&dmn, 15000); /* the lease is the lane's now */
	snprintf(manifest, sizeof(manifest), "%s/spaces.json", mesh.dir);
	snprintf(rundir, sizeof(rundir), "%s/run", mesh.dir);
	snprintf(hoststat, sizeof(hoststat), "%s/spaces.host.json", rundir);
	snprintf(hostout, sizeof(hostout), "%s/host.out", mesh.dir);
	mkdir(rundir, 0700);
	assert_non_null(f = fopen(manifest, "w"));
	fprintf(f, "{\"spaces\":[{\"space\":\"%s\",\"root\":\"%s\"}]}\n", mesh.space, mesh.dir);
	fclose(f);
	host = h_daemon_spawn(&mesh, hostout, "--spaces", manifest, "--run-dir", rundir, NULL);
	assert_true(host > 0);
	/* Serving: the lane's own status file names the pid the host gave it. */
	for (int64_t end = mono_ms() + READY_MS;; h_nap(100)) {
		json_t *doc = h_daemon_status(&dmn);
		const char *shard = json_string_value(json_object_get(doc, "shard"));
		lane = host_lane_pid(hoststat);
		bool ok = lane > 0 && json_integer_value(json_object_get(doc, "pid")) == lane &&
		    shard != NULL && strcmp(shard, "serving") == 0;
		json_decref(doc);
		if (ok)
			break;
		if (mono_ms() >= end)
			fail_msg("the host's lane is not serving; see %s", hostout);
	}

	snprintf(args, sizeof(args), "--spaces '%s' --run-dir '%s' --json", manifest, rundir);
	assert_int_equal(status_run(args, "host", outp, sizeof(outp)), 0);
	quiet("host");
	json_t *doc = validated(outp);
	assert_string_equal(json_string_value(json_object_get(doc, "manifest")), manifest);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "running");
	assert_int_equal(json_integer_value(json_object_get(doc, "pid")), host);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "pidRecord"),
	    "pid")), host);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "status"),
	    "pid")), host);
	process_is(json_object_get(doc, "process"), host, "host");
	assert_int_equal(json_integer_value(json_object_get(doc, "lanesServing")), 1);
	assert_int_equal(json_integer_value(json_object_get(doc, "lanesTotal")), 1);
	json_t *spaces = json_object_get(doc, "spaces");
	assert_int_equal(json_array_size(spaces), 1);
	json_t *e = json_array_get(spaces, 0);
	assert_string_equal(json_string_value(json_object_get(e, "space")), mesh.space);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "running");
	assert_true(json_is_true(json_object_get(e, "serving")));
	assert_int_equal(json_integer_value(json_object_get(e, "pid")), lane);
	assert_true(json_is_null(json_object_get(e, "pidRecord")));
	assert_string_equal(json_string_value(json_object_get(e, "statusFile")), dmn.status);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "lane"), "pid")),
	    lane);
	process_is(json_object_get(e, "process"), lane, "lane");
	json_t *st = json_object_get(e, "status");
	assert_int_equal(json_integer_value(json_object_get(st, "pid")), lane);
	assert_true(json_is_true(json_object_get(st, "lane")));
	workers_are_live(st);
	json_decref(doc);

	/* The human output stays. */
	char human[H_OUT_MAX];
	snprintf(args, sizeof(args), "'%s' status --spaces '%s' --run-dir '%s' > '%s/human.out' "
	    "2>&1", COTAL_CLI_PATH, manifest, rundir, mesh.dir);
	assert_int_equal(system(args), 0);
	snprintf(human, sizeof(human), "%s/human.out", mesh.dir);
	assert_true(h_log_has(human, "1 of 1 lane serving", 0));
	assert_false(h_log_has(human, "{", 0));

	int wst;
	kill(host, SIGTERM);
	assert_int_equal(waitpid(host, &wst, 0), host);
	assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
	snprintf(args, sizeof(args), "--spaces '%s' --run-dir '%s' --json", manifest, rundir);
	assert_int_equal(status_run(args, "host-stopped", outp, sizeof(outp)), 3);
	quiet("host-stopped");
	doc = validated(outp);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "not running");
	assert_true(json_is_null(json_object_get(doc, "pid")));
	assert_true(json_is_null(json_object_get(doc, "status")));
	assert_int_equal(json_array_size(json_object_get(doc, "spaces")), 0);
	json_decref(doc);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_json_of_a_serving_daemon_matches_the_daemon),
		cmocka_unit_test(test_status_json_when_not_running_and_stale),
		cmocka_unit_test(test_status_json_of_a_host_and_its_lanes),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
