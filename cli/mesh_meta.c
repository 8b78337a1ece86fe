/*
 * Which nodes a dev cluster's JetStream meta group lacks, from the peer
 * state files of the nodes' stores (see mesh_meta.h). Linked into `cotal`
 * (mesh start) and the test harness; reads files, nothing else.
 */
#include "cli/mesh_meta.h"

#include <glob.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

bool
mesh_meta_peer_id(const char *server_name, char id[9])
{
	static const char digits[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	unsigned char sha[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (server_name[0] == '\0' ||
	    EVP_Digest(server_name, strlen(server_name), sha, &len, EVP_sha256(), NULL) != 1 ||
	    len < 8)
		return false;
	for (int k = 0; k < 8; k++)
		id[k] = digits[sha[k] % 62];
	id[8] = '\0';
	return true;
}

int
mesh_meta_peers(const char *store_dir, int *cluster_size, char ids[][9], int max)
{
	char pat[4096 + 64];
	unsigned char buf[8 + 8 * MESH_META_NODES_MAX];
	glob_t g;
	size_t n = 0;
	int count;

	if (max > MESH_META_NODES_MAX)
		max = MESH_META_NODES_MAX;
	snprintf(pat, sizeof(pat), "%s/jetstream/*/_js_/_meta_/peers.idx", store_dir);
	if (glob(pat, 0, NULL, &g) != 0)
		return -1;
	FILE *f = fopen(g.gl_pathv[0], "rb");
	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
	}
	globfree(&g);
	if (n < 8)
		return -1;
	*cluster_size = (int)(buf[0] | buf[1] << 8 | buf[2] << 16 | (unsigned)buf[3] << 24);
	count = (int)(buf[4] | buf[5] << 8 | buf[6] << 16 | (unsigned)buf[7] << 24);
	if (count < 0 || count > max || n < 8 + 8 * (size_t)count)
		return -1;
	for (int k = 0; k < count; k++) {
		memcpy(ids[k], buf + 8 + 8 * k, 8);
		ids[k][8] = '\0';
	}
	return count;
}

int
mesh_meta_left_out(const struct mesh_meta_node *nodes, int n, bool *out, char *why,
		   size_t whylen)
{
	char ids[MESH_META_NODES_MAX][MESH_META_NODES_MAX][9], self[MESH_META_NODES_MAX][9];
	int count[MESH_META_NODES_MAX], csz[MESH_META_NODES_MAX], full = 0, left = 0;
	size_t w = 0;

	if (n < 1 || n > MESH_META_NODES_MAX)
		return -1;
#define SAY(...) (w += (size_t)snprintf(why + w, w < whylen ? whylen - w : 0, __VA_ARGS__))
	for (int i = 0; i < n; i++) {
		if (!mesh_meta_peer_id(nodes[i].server_name, self[i]))
			snprintf(self[i], sizeof(self[i]), "?");
		csz[i] = 0;
		count[i] = mesh_meta_peers(nodes[i].store_dir, &csz[i], ids[i], MESH_META_NODES_MAX);
		full += count[i] == n && csz[i] == n;
		SAY("%snode %d (peer %s): ", i ? "; " : "", i + 1, self[i]);
		if (count[i] < 0)
			SAY("no meta state");
		else
			SAY("cluster size %d, known peers", csz[i]);
		for (int k = 0; k < count[i]; k++)
			SAY(" %s", ids[i][k]);
	}
#undef SAY
	if (full == n)
		return 0;
	for (int i = 0; i < n; i++) {
		int absent = 0;
		for (int j = 0; j < n; j++) {
			bool listed = false;
			for (int k = 0; k < count[j]; k++)
				listed = listed || strcmp(ids[j][k], self[i]) == 0;
			absent += count[j] >= 0 && !listed;
		}
		out[i] = self[i][0] != '?' && absent > n / 2;
		left += out[i];
	}
	return left > 0 ? left : -1;
}
