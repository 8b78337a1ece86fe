/*
 * bench/host: a delivery host's memory per lane and its start-up (issue 17,
 * "Measure"): `cotal-deliveryd --spaces MANIFEST` with 1, 10 and 50 lanes,
 * one space (one account) each, on one broker.
 *
 * For each lane count N it starts the host and measures:
 *   - start-up: from the host's start until every lane serves (each lane's
 *     own status file names the pid the host gave it and a serving shard);
 *   - PSS per lane: Pss from /proc/<pid>/smaps_rollup summed over the
 *     lane's processes (its supervisor and its four workers), read once
 *     every lane has served 5 s; the mean and the largest lane, and the
 *     host's own PSS apart;
 * then stops the host with SIGTERM (every lane releases its lease) and
 * times that too. Memory is reported as it is, not as a ratio: there is no
 * raw-broker counterpart of a lane's memory.
 *
 *   bench_host [--lanes 1,10,50]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

#define MAX_ROUNDS 8
#define LANES_MAX 64
#define SERVE_WAIT_MS 120000
#define SETTLE_MS 5000

static struct mesh base;
static char names[LANES_MAX][16];

static void
die(const char *what, const char *err)
{
	fprintf(stderr, "✗ bench: %s: %s\n", what, err ? err : "");
	exit(1);
}

/* Pss of a process, kB (0 when gone). */
static long
pss_kb(pid_t pid)
{
	return h_proc_kb(pid, "smaps_rollup", "Pss");
}

static json_t *
lane_status(int i)
{
	char key[512], path[H_PATH_MAX * 3];

	space_key(names[i], key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.status.json", base.dir, key);
	return json_load_file(path, 0, NULL);
}

/* The host's pid for lane i (0 when none). */
static pid_t
lane_pid(const char *hoststat, int i)
{
	json_t *doc = json_load_file(hoststat, 0, NULL), *l;
	pid_t pid = 0;
	size_t k;

	json_array_foreach(json_object_get(doc, "lanes"), k, l)
		if (strcmp(json_string_value(json_object_get(l, "space")), names[i]) == 0)
			pid = (pid_t)json_integer_value(json_object_get(l, "pid"));
	json_decref(doc);
	return pid;
}

static bool
serving(const char *hoststat, int i)
{
	pid_t pid = lane_pid(hoststat, i);
	json_t *doc = lane_status(i);
	const char *shard = json_string_value(json_object_get(doc, "shard"));
	bool ok = pid > 0 && json_integer_value(json_object_get(doc, "pid")) == pid &&
	    shard != NULL && strcmp(shard, "serving") == 0;

	json_decref(doc);
	return ok;
}

/* A lane's PSS: its supervisor and every worker its status file names. */
static long
lane_pss_kb(const char *hoststat, int i, int *procs)
{
	json_t *doc = lane_status(i), *w;
	long kb = pss_kb(lane_pid(hoststat, i));
	size_t k;

	*procs = 1;
	json_array_foreach(json_object_get(doc, "workers"), k, w) {
		pid_t p = (pid_t)json_integer_value(json_object_get(w, "pid"));
		if (p > 0) {
			kb += pss_kb(p);
			(*procs)++;
		}
	}
	json_decref(doc);
	return kb;
}

/* Add spaces [from, to) to the mesh: one `mesh init` naming them all. */
static void
spaces_add(int from, int to)
{
	char out[H_OUT_MAX], *args[8 + 2 * LANES_MAX];
	int n = 0;

	args[n++] = (char *)"mesh";
	args[n++] = (char *)"init";
	args[n++] = (char *)"--dev";
	args[n++] = (char *)"--nats-server";
	args[n++] = base.nats_bin;
	for (int i = from; i < to; i++) {
		args[n++] = (char *)"--space";
		args[n++] = names[i];
	}
	args[n] = NULL;
	if (h_cotal_argv(&base, out, sizeof(out), args) != 0)
		die("mesh init", out);
}

int
main(int argc, char **argv)
{
	int lanes[MAX_ROUNDS] = { 1, 10, 50 }, nl = 3, most = 0;
	char out[H_OUT_MAX], manifest[H_PATH_MAX * 2], rundir[H_PATH_MAX * 2];
	char hoststat[H_PATH_MAX * 3], hostout[H_PATH_MAX * 3];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--lanes") == 0 && i + 1 < argc) {
			nl = 0;
			for (char *t = strtok(argv[++i], ","); t && nl < MAX_ROUNDS; t = strtok(NULL, ","))
				lanes[nl++] = atoi(t);
		} else {
			fprintf(stderr, "usage: bench_host [--lanes 1,10,50]\n");
			return 2;
		}
	}
	for (int r = 0; r < nl; r++) {
		if (lanes[r] < 1 || lanes[r] > LANES_MAX)
			die("--lanes", "each count 1 to 64");
		most = lanes[r] > most ? lanes[r] : most;
	}
	for (int i = 0; i < most; i++)
		snprintf(names[i], sizeof(names[i]), "b%02d", i);

	h_use_broker(H_BROKER_210);
	if (h_mesh_up(&base, names[0], true) != 0)
		die("mesh", "h_mesh_up");
	spaces_add(1, most);
	if (h_broker_restart(&base) != 0)
		die("broker", "restart with every space's account");
	for (int i = 1; i < most; i++)
		if (h_cotal(&base, out, sizeof(out), "space", "provision", names[i], NULL) != 0)
			die("space provision", out);
	snprintf(manifest, sizeof(manifest), "%s/spaces.json", base.dir);
	snprintf(rundir, sizeof(rundir), "%s/run", base.dir);
	snprintf(hoststat, sizeof(hoststat), "%s/spaces.host.json", rundir);
	mkdir(rundir, 0700);

	printf("# bench/host: nats-server 2.10, %d cores, %d spaces provisioned\n",
	    (int)sysconf(_SC_NPROCESSORS_ONLN), most);
	printf("| lanes | all serving after | PSS per lane (mean) | largest lane | processes per lane "
	    "| host PSS | stopped after |\n|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int r = 0; r < nl; r++) {
		int n = lanes[r], procs = 0;
		FILE *f = fopen(manifest, "w");
		if (f == NULL)
			die("manifest", manifest);
		fprintf(f, "{\"spaces\":[");
		for (int i = 0; i < n; i++)
			fprintf(f, "%s{\"space\":\"%s\",\"root\":\"%s\"}", i ? "," : "", names[i],
			    base.dir);
		fprintf(f, "]}\n");
		fclose(f);
		snprintf(hostout, sizeof(hostout), "%s/host-%d.out", base.dir, n);
		int64_t t0 = mono_ms();
		pid_t host = h_daemon_spawn(&base, hostout, "--spaces", manifest, "--run-dir", rundir,
		    NULL);
		if (host <= 0)
			die("host", "spawn");
		int ready = 0;
		while (ready < n) {
			ready = 0;
			for (int i = 0; i < n; i++)
				ready += serving(hoststat, i);
			if (mono_ms() - t0 > SERVE_WAIT_MS)
				die("start-up", hostout);
			if (ready < n)
				h_sleep_ms(50);
		}
		int64_t up_ms = mono_ms() - t0;
		h_sleep_ms(SETTLE_MS);
		long sum = 0, max = 0;
		for (int i = 0; i < n; i++) {
			long kb = lane_pss_kb(hoststat, i, &procs);
			sum += kb;
			max = kb > max ? kb : max;
		}
		long host_kb = pss_kb(host);
		int64_t t1 = mono_ms();
		int st;
		kill(host, SIGTERM);
		waitpid(host, &st, 0);
		int64_t down_ms = mono_ms() - t1;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("stop", hostout);
		printf("| %d | %.2f s | %.1f MB | %.1f MB | %d | %.1f MB | %.2f s |\n", n,
		    (double)up_ms / 1000, (double)sum / n / 1024, (double)max / 1024, procs,
		    (double)host_kb / 1024, (double)down_ms / 1000);
		fflush(stdout);
	}
	h_mesh_down(&base);
	return 0;
}
