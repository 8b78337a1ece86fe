/*
 * bench/guard (issue 40): `make bench-guard`, run by `make check`. The data
 * path's cost per copy, checked against the broker measured in the same
 * run, so that a change that makes every copy dearer fails the build
 * instead of going unnoticed (the reader's cost doubled once, and nothing
 * compared).
 *
 * For M = 100 and M = 1000 members (bench/datapath.c's rounds, the broker's
 * own flush): three rounds each (--rounds), and of each quantity its
 * cheapest round, since noise on a shared machine only ever adds. Two ratios, CPU time over CPU time (a
 * loaded machine slows both sides, it does not fail the guard):
 *   - the daemon's CPU per copy (supervisor and workers) over the broker's
 *     CPU per raw stored publish, measured beside the round;
 *   - the broker's CPU per copy over its floor: two stored publishes and one
 *     delivery with its ack, what a bare client doing a copy's work costs
 *     it (docs/BENCHMARKS.md, "the broker's floor").
 * Each stays under its bound (below, and why in docs/BENCHMARKS.md), or the
 * guard says which and exits 1.
 *
 *   bench_guard [--members 100,1000] [--copies N] [--rounds R] [--daemon PATH]
 *
 * --daemon: the cotal-deliveryd to check (an earlier build's; this build's
 * by default): how the guard was shown to fail on the code before issue 40.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/datapath.h"

/* docs/BENCHMARKS.md, "The guard": the figures these are set from. */
#define GUARD_DAEMON_PER_RAW 1.80
#define GUARD_BROKER_PER_FLOOR 2.00

#define SIZES_MAX 4

int
main(int argc, char **argv)
{
	int members[SIZES_MAX] = { 100, 1000 }, nm = 2, copies = 60000, rounds = 3;
	const char *daemon = NULL;
	bool ok = true;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--copies") == 0 && i + 1 < argc)
			copies = atoi(argv[++i]);
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--daemon") == 0 && i + 1 < argc)
			daemon = argv[++i];
		else if (strcmp(argv[i], "--members") == 0 && i + 1 < argc) {
			nm = 0;
			for (char *t = strtok(argv[++i], ","); t && nm < SIZES_MAX; t = strtok(NULL, ","))
				members[nm++] = atoi(t);
		} else {
			fprintf(stderr, "usage: bench_guard [--members 100,1000] [--copies N] "
			    "[--rounds R] [--daemon PATH]\n");
			return 2;
		}
	}
	if (copies < 1000 || rounds < 1 || nm == 0)
		die("arguments", "--copies at least 1000, --rounds and --members at least one");
	if (daemon != NULL && access(daemon, X_OK) != 0)
		die("--daemon", "not an executable cotal-deliveryd");
	bench_up("default");
	if (daemon != NULL)
		daemon_restart(daemon, NULL);

	printf("bench-guard: %s, %d copies a round, each figure the least of %d rounds\n",
	    daemon != NULL ? daemon : "this build's daemon", copies, rounds);
	printf("| members | daemon µs/copy (fan-out, reader) | broker µs/raw publish | "
	    "daemon ÷ raw (bound %.2f) | broker µs/copy | broker µs/floor | broker ÷ floor "
	    "(bound %.2f) | copies/s ÷ raw |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
	    GUARD_DAEMON_PER_RAW, GUARD_BROKER_PER_FLOOR);
	for (int i = 0; i < nm; i++) {
		/* Each quantity's cheapest round: noise on a shared machine only
		 * adds (a neighbour's load, the disk's flush), to either side. */
		struct result b = { 0 };
		for (int k = 0; k < rounds; k++) {
			struct result r;
			fprintf(stderr, "• M=%d, round %d of %d ...\n", members[i], k + 1, rounds);
			run_round(members[i], copies, 0, 0, &r);
			if (k == 0) {
				b = r;
				continue;
			}
#define LEAST(f) (b.f = r.f < b.f ? r.f : b.f)
			LEAST(daemon_us), LEAST(fanout_us), LEAST(reader_us), LEAST(broker_us);
			LEAST(raw_broker_us), LEAST(raw_consume_us);
#undef LEAST
			b.copies_s = r.copies_s > b.copies_s ? r.copies_s : b.copies_s;
			b.raw_s = r.raw_s > b.raw_s ? r.raw_s : b.raw_s;
		}
		double floor = 2 * b.raw_broker_us + b.raw_consume_us;
		double q = b.daemon_us / b.raw_broker_us, f = b.broker_us / floor;
		printf("| %d | %.1f (%.1f, %.1f) | %.1f | %.2f%s | %.1f | %.1f | %.2f%s | %.2f |\n",
		    members[i], b.daemon_us, b.fanout_us, b.reader_us, b.raw_broker_us, q,
		    q > GUARD_DAEMON_PER_RAW ? " ✗" : "", b.broker_us, floor, f,
		    f > GUARD_BROKER_PER_FLOOR ? " ✗" : "", b.copies_s / b.raw_s);
		fflush(stdout);
		if (q > GUARD_DAEMON_PER_RAW) {
			fprintf(stderr, "✗ bench-guard: M=%d: the daemon spends %.2f × the broker's CPU "
			    "per raw stored publish on a copy, over the bound %.2f\n", members[i], q,
			    GUARD_DAEMON_PER_RAW);
			ok = false;
		}
		if (f > GUARD_BROKER_PER_FLOOR) {
			fprintf(stderr, "✗ bench-guard: M=%d: a copy costs the broker %.2f × its floor, "
			    "over the bound %.2f\n", members[i], f, GUARD_BROKER_PER_FLOOR);
			ok = false;
		}
	}
	fflush(stdout);
	bench_down();
	if (ok)
		printf("✓ bench-guard: every ratio within its bound\n");
	return ok ? 0 : 1;
}
