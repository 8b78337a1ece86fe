/*
 * `cotal space provision S`: the streams and buckets of WIRE.md §3, made
 * with the space's provisioner credential, each with its share of the
 * space's storage budget as max_bytes (--storage, default 4 GiB).
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/provision.h"
#include "lib/clock.h"
#include "lib/log.h"

/* "4G", "512M", "1T", "300000000": a byte count, K/M/G/T binary (an
 * optional "iB" or "B" after the letter). 0, or -1. */
static int
size_arg(const char *arg, int64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	unsigned long long v;
	int shift = 0;

	if (arg[0] < '0' || arg[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno != 0)
		return -1;
	if (*end != '\0') {
		const char *u = strchr(units, *end);
		if (u == NULL)
			return -1;
		shift = 10 * (int)(u - units + 1);
		end++;
		if (strcmp(end, "iB") != 0 && strcmp(end, "B") != 0 && *end != '\0')
			return -1;
	}
	if (v > (unsigned long long)INT64_MAX >> shift)
		return -1;
	*out = (int64_t)(v << shift);
	return 0;
}

/* How long a space provisioned with replicas waits for the cluster to
 * place them: a cluster started by hand, or a dev cluster's later start
 * (`cotal mesh start` waits for the meta group on a first start only),
 * may still be electing its JetStream meta leader. */
#define CLUSTER_PLACE_WAIT_MS 30000

/*
 * Provision (idempotent), and with replicas, while the cluster's JetStream
 * does not answer yet ("Timeout") or cannot place the replicas yet (err_code
 * 10005, "no suitable peers for placement"), again for up to
 * CLUSTER_PLACE_WAIT_MS, said once. Each attempt's report is printed only
 * for the attempt that ends it.
 */
static int
provision_until_placed(natsConnection *nc, const char *space, int replicas, int64_t storage,
		       char *err, size_t errlen)
{
	int64_t until = mono_ms() + CLUSTER_PLACE_WAIT_MS;
	bool said = false;

	for (;;) {
		char *text = NULL;
		size_t len = 0;
		FILE *report = open_memstream(&text, &len);
		int rc = space_provision_storage(nc, space, replicas, storage,
		    report != NULL ? report : stdout, err, errlen);
		bool early = replicas > 1 && rc != 0 && mono_ms() < until &&
		    (strstr(err, "Timeout") != NULL || strstr(err, "err_code 10005") != NULL);
		if (report != NULL) {
			fclose(report);
			if (!early)
				fputs(text, stdout);
			free(text);
		}
		if (!early) {
			if (rc != 0 && said && strstr(err, "err_code 10005") != NULL)
				log_info("space provision: the JetStream meta group may lack a node: "
				    "nats-server 2.10 now and then starts a node whose raft messages "
				    "are dropped, and only its restart clears it (`cotal mesh start` "
				    "does that for a dev cluster); docs/cluster.md");
			return rc;
		}
		if (!said)
			log_info("space provision: waiting up to %d s for the cluster's JetStream "
			    "to place %d replicas (%s)", CLUSTER_PLACE_WAIT_MS / 1000, replicas, err);
		said = true;
		struct timespec ts = { 0, 500 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

int
cmd_space_provision(int argc, char **argv)
{
	const char *root = NULL, *server = NULL, *space = NULL;
	int replicas = 1;
	int64_t storage = 0;
	char err[2048];
	struct workspace ws;
	struct creds c = { 0 };
	natsConnection *nc = NULL;
	int rc;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			root = argv[++i];
		else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
			server = argv[++i];
		else if (strcmp(argv[i], "--replicas") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*argv[i] == '\0' || *end != '\0' || v < 1 || v > PROV_REPLICAS_MAX) {
				log_errx("space provision: --replicas %s: expected 1 to %d (3 on a "
				    "3-node cluster)", argv[i], PROV_REPLICAS_MAX);
				return 1;
			}
			replicas = (int)v;
		} else if (strcmp(argv[i], "--storage") == 0 && i + 1 < argc) {
			if (size_arg(argv[++i], &storage) != 0 || storage < PROV_STORAGE_MIN ||
			    storage > PROV_STORAGE_MAX) {
				log_errx("space provision: --storage %s: expected a size from 256M to "
				    "64T (K, M, G, T: powers of 1024)", argv[i]);
				return 1;
			}
		} else if (argv[i][0] != '-' && space == NULL)
			space = argv[i];
		else {
			log_errx("space provision: unknown or incomplete argument \"%s\"", argv[i]);
			return CLI_USAGE;
		}
	}
	if (space == NULL) {
		log_errx("space provision: S, the space to provision, is required");
		return CLI_USAGE;
	}
	if (ws_locate(root, &ws, err, sizeof(err)) != 0 ||
	    cli_connect_space(&ws, space, server, "provisioner", &c, &nc, err, sizeof(err)) != 0) {
		log_errx("space provision: %s", err);
		return 1;
	}
	rc = provision_until_placed(nc, space, replicas, storage, err, sizeof(err));
	if (rc != 0)
		log_errx("space provision: %s", err);
	else
		log_ok("space %s provisioned", space);
	natsConnection_Destroy(nc);
	creds_free(&c);
	return rc == 0 ? 0 : 1;
}
