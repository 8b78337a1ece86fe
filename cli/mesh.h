/*
 * The dev mesh's files, shared by `cotal mesh init` (mesh.c), which writes
 * them, and `cotal mesh start | stop` (mesh_run.c), which runs the brokers.
 *
 * A one-broker mesh has node 0: nats-server.conf, .pid, .log and the store
 * jetstream/. A cluster (`mesh init --cluster N`) has nodes 1..N, each with
 * nats-server-<i>.conf, .pid, .log and its own store jetstream-<i>/.
 */
#ifndef COTAL_CLI_MESH_H
#define COTAL_CLI_MESH_H

#include <stdio.h>

#define MESH_NODES_MAX 7 /* a cluster of 3, 5 or 7; more is not a dev mesh */

/* "<mesh dir>/nats-server[-<node>].<ext>" into out. */
static inline void
mesh_node_file(const char *mesh_dir, int node, const char *ext, char *out, size_t outlen)
{
	if (node == 0)
		snprintf(out, outlen, "%s/nats-server.%s", mesh_dir, ext);
	else
		snprintf(out, outlen, "%s/nats-server-%d.%s", mesh_dir, node, ext);
}

#endif
