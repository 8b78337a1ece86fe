/*
 * cotal-deliveryd's one entry: it reads the command line only as far as
 * choosing the role this process is asked to be, and hands over to it:
 *
 *   --worker ROLE          a worker (worker/, run with its role's room:
 *                          worker-fanout/, worker-reader/, worker-registry/,
 *                          worker-timer/), started so by a supervisor
 *   --metrics-process ...  the metrics server (metrics/), started so by a
 *                          supervisor or a host
 *   --help, --version, --confinement
 *                          said here, nothing else done
 *   --spaces MANIFEST      the delivery host of many spaces (host/), unless
 *                          --lane says this is one of its lanes
 *   anything else          the supervisor of one space (supervisor/)
 *
 * It may do nothing else: no file, no credential, no connection, no
 * confinement of its own (each role confines itself). Beneath it the
 * supervisor and the host are siblings, neither calling the other; what
 * both use is in service/.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "lib/version.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "supervisor/main.h"
#include "worker/worker.h"
#include "worker-fanout/fanout.h"
#include "worker-reader/reader.h"
#include "worker-registry/registry.h"
#include "worker-timer/timer.h"

/* The usage: on stdout for --help (exit 0), on stderr after a usage error
 * (exit 2). */
static void
usage_to(FILE *f, int code)
{
	fprintf(f, "usage: cotal-deliveryd --space S [--root DIR] [--server URL[,URL...]] "
	    "[--creds FILE] [--user NAME] [--tls] [--tls-ca FILE] [--standby]\n"
	    "                       [--max-memberships N] [--max-channels N] "
	    "[--metrics [ADDR:]PORT]\n"
	    "       cotal-deliveryd --spaces MANIFEST [--server URL] [--run-dir DIR] "
	    "[--user NAME] [--metrics [ADDR:]PORT]\n"
	    "       cotal-deliveryd --confinement\n"
	    "       cotal-deliveryd --help | --version\n"
	    "The delivery service of a Cotal agent mesh (man 8 cotal-deliveryd).\n");
	exit(code);
}

/* The roles `--worker` runs. */
static const struct worker_role *const worker_roles[] = {
	&fanout_role, &reader_role, &registry_role, &timer_role, NULL,
};

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--worker") == 0)
		return worker_main(argv[2], worker_roles);
	if (argc >= 2 && strcmp(argv[1], "--metrics-process") == 0)
		return metrics_main(argc, argv);
	/* --help and --version, wherever they stand: nothing else is done. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			usage_to(stdout, 0);
		if (strcmp(argv[i], "--version") == 0) {
			cotal_version_print(stdout, "cotal-deliveryd");
			return 0;
		}
	}
	/* What every role's sandbox holds per kernel: docs/security.md's
	 * table comes from here (ctest unit_confinement_table compares). */
	if (argc == 2 && strcmp(argv[1], "--confinement") == 0) {
		sandbox_table(stdout);
		return 0;
	}
	/* Many spaces: the host (host/), which holds no credential. A lane
	 * (--lane) never is one, whatever its space is called. */
	bool host = false, lane = false;
	for (int i = 1; i < argc; i++) {
		host = host || strcmp(argv[i], "--spaces") == 0;
		lane = lane || strcmp(argv[i], "--lane") == 0;
	}
	if (host && !lane)
		return host_main(argc, argv);

	/* One space: the supervisor. Its own usage errors (an unknown
	 * argument, no --space) are said here, after its line. */
	int rc = supervisor_main(argc, argv);
	if (rc == SUPERVISOR_USAGE)
		usage_to(stderr, 2);
	return rc;
}
