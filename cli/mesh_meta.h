/*
 * A dev cluster's JetStream meta group as its nodes' stores record it:
 * which nodes the group lacks. Shared by `cotal mesh start` (mesh_run.c),
 * which restarts a node left out, and the test harness, which does the same
 * for the clusters it starts. Reads files only; no broker is asked.
 *
 * Why a node is left out: nats-server 2.10 now and then starts a node whose
 * raft messages are all dropped for the life of its process
 * (setSystemAccount starts the raft send queue's goroutine before it stores
 * the system account; a queue that looks first has no account, and
 * processInboundClientMsg drops what it sends). Fixed in 2.11.0. Such a node
 * answers clients and looks online, but the meta leader never hears it, so
 * it never joins the group: replicas cannot be placed ("no suitable peers
 * for placement"). A restart of that node clears it.
 */
#ifndef COTAL_CLI_MESH_META_H
#define COTAL_CLI_MESH_META_H

#include <stdbool.h>
#include <stddef.h>

#define MESH_META_NODES_MAX 16

/* One node: its server_name and its JetStream store_dir (as in its config). */
struct mesh_meta_node {
	const char *server_name;
	const char *store_dir;
};

/* A node's raft peer id: nats-server's getHash(server_name), the first 8
 * bytes of its SHA-256 mapped onto 62 letters and digits. */
bool mesh_meta_peer_id(const char *server_name, char id[9]);

/*
 * The meta group as one store records it: the raft peer state file
 * <store_dir>/jetstream/<system account>/_js_/_meta_/peers.idx
 * (nats-server's encodePeerState, the same from 2.9 to 2.14: cluster size
 * and peer count, little-endian uint32 each, then 8-byte peer ids). The
 * number of peers read into ids (at most max), or -1 when there is none yet.
 */
int mesh_meta_peers(const char *store_dir, int *cluster_size, char ids[][9], int max);

/*
 * Which of n nodes the meta group lacks: absent from the peer state of a
 * majority of the nodes (a node left out still records its own bootstrap
 * state, itself alone, or the group's without itself). out[i] true: left
 * out. Each node's record as words into why. Returns the number left out;
 * 0 once every node records all n as known peers; -1 while that is not so
 * and nobody is left out yet (no verdict).
 */
int mesh_meta_left_out(const struct mesh_meta_node *nodes, int n, bool *out, char *why,
		       size_t whylen);

#endif
