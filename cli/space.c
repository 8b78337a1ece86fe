/*
 * `cotal space provision S`: the streams and buckets of WIRE.md §3, made
 * with the space's provisioner credential.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/provision.h"
#include "lib/log.h"

int
cmd_space_provision(int argc, char **argv)
{
	const char *root = NULL, *server = NULL, *space = NULL;
	int replicas = 1;
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
		} else if (argv[i][0] != '-' && space == NULL)
			space = argv[i];
		else {
			log_errx("space provision: unknown or incomplete argument \"%s\"", argv[i]);
			fprintf(stderr, "usage: cotal space provision S [--root DIR] [--server URL] "
			    "[--replicas N]\n");
			return 1;
		}
	}
	if (space == NULL) {
		log_errx("space provision: name the space");
		return 1;
	}
	if (ws_locate(root, &ws, err, sizeof(err)) != 0 ||
	    cli_connect_space(&ws, space, server, "provisioner", &c, &nc, err, sizeof(err)) != 0) {
		log_errx("space provision: %s", err);
		return 1;
	}
	rc = space_provision_replicas(nc, space, replicas, stdout, err, sizeof(err));
	if (rc != 0)
		log_errx("space provision: %s", err);
	else
		log_ok("space %s provisioned", space);
	natsConnection_Destroy(nc);
	creds_free(&c);
	return rc == 0 ? 0 : 1;
}
