/*
 * Meshes made with the `cotal` CLI as an operator would: a dev mesh for one
 * space on one broker, the space provisioned, its standing credentials
 * (the foreign grants of COTAL_TEST_GRANTS too), a view of another space of
 * the same mesh, and its registry record.
 */
#include "tests/harness/harness_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/names.h"

/* The broker store's sync for the meshes made here: `cotal mesh init`'s
 * default (always), unless COTAL_TEST_SYNC_INTERVAL names another (the
 * benchmark measures both). */
const char *
hi_sync_interval(void)
{
	const char *v = getenv("COTAL_TEST_SYNC_INTERVAL");

	return v != NULL && *v != '\0' ? v : "always";
}

int
hi_mesh_dir_make(struct mesh *m, const char *space)
{
	const char *tmp = getenv("TMPDIR");

	memset(m, 0, sizeof(*m));
	hi_arm_cleanup();
	snprintf(m->dir, sizeof(m->dir), "%s/cotal-e2e-XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(m->dir) == NULL || hi_keep_dir(m->dir) != 0)
		return -1;
	snprintf(m->home, sizeof(m->home), "%s/home", m->dir);
	snprintf(m->space, sizeof(m->space), "%s", space);
	space_token(space, m->token, sizeof(m->token));
	snprintf(m->conf, sizeof(m->conf), "%s/.cotal/mesh/nats-server.conf", m->dir);
	snprintf(m->nats_bin, sizeof(m->nats_bin), "%s", hi_broker_binary());
	return 0;
}

/* COTAL_TEST_GRANTS=FILE: the daemon's standing credentials carry the
 * grants another Cotal toolchain mints (delivery-grants.json), not the
 * project's own profiles. */
int
hi_mesh_foreign_grants(struct mesh *m)
{
	char out[H_OUT_MAX];
	const char *grants = getenv("COTAL_TEST_GRANTS");
	static const char *const foreign[] = { "delivery", "sys-observer", "sys-evictor" };

	for (size_t i = 0; grants != NULL && i < sizeof(foreign) / sizeof(foreign[0]); i++)
		if (h_cotal(m, out, sizeof(out), "creds", "mint", "--space", m->space, "--profile",
		    foreign[i], "--grants", grants, "--force", NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal creds mint --grants %s failed:\n%s", grants,
			    out);
			return -1;
		}
	return 0;
}

int
h_mesh_up(struct mesh *m, const char *space, bool provision)
{
	char out[H_OUT_MAX], port[16];

	if (hi_mesh_dir_make(m, space) != 0)
		return -1;
	for (int tries = 0; tries < PORT_TRIES; tries++) {
		m->port = h_free_port();
		snprintf(port, sizeof(port), "%d", m->port);
		/* The config for the broker under test: init asks it what it
		 * accepts (sync_interval). */
		if (h_cotal(m, out, sizeof(out), "mesh", "init", "--dev", "--port", port,
		    "--space", space, "--nats-server", m->nats_bin, "--sync-interval",
		    hi_sync_interval(), NULL) != 0) {
			fprintf(stderr, "✗ harness: cotal mesh init failed:\n%s", out);
			return -1;
		}
		snprintf(m->url, sizeof(m->url), "nats://127.0.0.1:%d", m->port);
		if (h_broker_start(m) == 0)
			break;
		if (tries + 1 == PORT_TRIES)
			return -1;
	}
	if (provision && h_cotal(m, out, sizeof(out), "space", "provision", space, NULL) != 0) {
		fprintf(stderr, "✗ harness: cotal space provision failed:\n%s", out);
		return -1;
	}
	return hi_mesh_foreign_grants(m);
}

void
h_mesh_down(struct mesh *m)
{
	h_broker_kill(m);
	for (int i = 0; i < m->nnodes; i++)
		h_node_kill(m, i);
}

void
h_space_view(const struct mesh *m, const char *space, struct mesh *out)
{
	*out = *m;
	snprintf(out->space, sizeof(out->space), "%s", space);
	space_token(space, out->token, sizeof(out->token));
}

int
h_registry_set(struct mesh *m, const char *field, json_t *value)
{
	char reg[H_PATH_MAX * 2], key[512];
	json_t *doc;
	int rc;

	space_key(m->space, key, sizeof(key));
	snprintf(reg, sizeof(reg), "%s/meshes/space.%s.json", m->home, key);
	if ((doc = json_load_file(reg, 0, NULL)) == NULL) {
		json_decref(value);
		return -1;
	}
	if (value != NULL)
		json_object_set_new(doc, field, value);
	else
		json_object_del(doc, field);
	rc = json_dump_file(doc, reg, 0) == 0 ? 0 : -1;
	json_decref(doc);
	return rc;
}

int
h_mint(struct mesh *m, const char *profile, const char *file, const char *extra1,
       const char *extra2, char *out, size_t outlen)
{
	char text[H_OUT_MAX];

	snprintf(out, outlen, "%s/%s", m->dir, file);
	int rc = h_cotal(m, text, sizeof(text), "creds", "mint", "--space", m->space,
	    "--profile", profile, "--out", out, "--force",
	    extra1 ? extra1 : (char *)NULL, extra2, NULL);
	if (rc != 0)
		fprintf(stderr, "✗ harness: cotal creds mint failed:\n%s", text);
	return rc;
}
