/*
 * Meshes made with the `cotal` CLI as an operator would: a dev mesh for one
 * space on one broker, the space provisioned, its standing credentials
 * (the foreign grants of COTAL_TEST_GRANTS too), a view of another space of
 * the same mesh, and its registry record; a user signed by hand; a test
 * program's group teardown.
 */
#include "tests/harness/harness_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/dev_signer.h"
#include "cli/mint.h"
#include "lib/creds/nkeys.h"
#include "lib/names.h"
#include "lib/wire/ctlclient.h"
#include "lib/wire/tokens.h"

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

bool
h_conf_value(const char *conf, const char *key, char *out, size_t outlen)
{
	char line[H_PATH_MAX + 64];
	size_t kl = strlen(key);
	bool found = false;
	FILE *f = fopen(conf, "r");

	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, key, kl) != 0 || p[kl] != ':')
			continue;
		p += kl + 1;
		while (*p == ' ' || *p == '"')
			p++;
		size_t n = strcspn(p, "\"\r\n");
		if (n < outlen) {
			memcpy(out, p, n);
			out[n] = '\0';
			found = true;
		}
	}
	if (f != NULL)
		fclose(f);
	return found;
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

int
h_mint_raw(struct mesh *m, const char *file, json_t *pub_allow, json_t *sub_allow,
	   bool own_inbox, char *path, size_t len)
{
	char kpath[H_PATH_MAX * 2], key[512], err[512], seed[NKEY_SEED_LEN + 1];
	char upub[NKEY_PUBLIC_LEN + 1];
	struct nkey signer, user;
	json_t *mj = NULL, *claims = NULL;
	char *jwt = NULL, *text = NULL;
	FILE *f = NULL;
	int rc = -1;

	space_key(m->space, key, sizeof(key));
	snprintf(kpath, sizeof(kpath), "%s/.cotal/mesh/keys/space.%s-signing.nk", m->dir, key);
	if (devkey_load(kpath, NKEY_ACCOUNT, 0, &signer, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ harness: the space's signing key: %s\n", err);
		return -1;
	}
	if (nkey_generate(NKEY_USER, &user) != 0) {
		fprintf(stderr, "✗ harness: no user key\n");
		nkey_wipe(&signer);
		return -1;
	}
	nkey_public(&user, upub);
	if (own_inbox) {
		char inbox[INBOX_PREFIX_MAX], pat[INBOX_PREFIX_MAX + 4];
		if (!inbox_prefix(upub, inbox, sizeof(inbox))) {
			fprintf(stderr, "✗ harness: no inbox prefix for %s\n", upub);
			goto out;
		}
		snprintf(pat, sizeof(pat), "%s.>", inbox);
		json_array_append_new(sub_allow, json_string(pat));
	}
	snprintf(kpath, sizeof(kpath), "%s/.cotal/mesh/dev-mesh.json", m->dir);
	mj = json_load_file(kpath, 0, NULL);
	struct dev_user_spec spec = { .name = "raw", .sub_pub = upub,
		.issuer_account = json_string_value(json_object_get(json_object_get(
		    json_object_get(mj, "spaces"), m->space), "account")),
		.pub_allow = pub_allow, .sub_allow = sub_allow };
	claims = dev_user_claims(&spec);
	if ((jwt = dev_jwt_sign(claims, &signer, err, sizeof(err))) == NULL) {
		fprintf(stderr, "✗ harness: signing %s: %s\n", file, err);
		goto out;
	}
	nkey_seed_text(&user, seed);
	text = creds_format(jwt, seed);
	snprintf(path, len, "%s/%s", m->dir, file);
	if (text == NULL || (f = fopen(path, "w")) == NULL) {
		fprintf(stderr, "✗ harness: cannot write %s\n", path);
		goto out;
	}
	fputs(text, f);
	fclose(f);
	chmod(path, 0600);
	rc = 0;
out:
	free(text);
	free(jwt);
	json_decref(claims);
	json_decref(mj);
	nkey_wipe(&user);
	nkey_wipe(&signer);
	return rc;
}

int
h_teardown(void **state)
{
	struct h_fixture *fx = *state;

	if (fx == NULL)
		return 0;
	if (fx->daemon != NULL)
		h_daemon_kill(fx->daemon);
	if (fx->client != NULL)
		ctl_client_free(*fx->client);
	for (size_t i = 0; i < sizeof(fx->conns) / sizeof(fx->conns[0]) && fx->conns[i]; i++)
		h_close(fx->conns[i]);
	if (fx->mesh != NULL)
		h_mesh_down(fx->mesh);
	return 0;
}
