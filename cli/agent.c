/*
 * `cotal agent add`: a minimal agent for demos, tests and operators. It mints
 * the agent's credential (principal local.<user key>), writes the lifecycle's
 * read-ACL row and creates its dlv_ durable, as the manager and the
 * provisioner would on a production mesh.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mint.h"
#include "cli/provision.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/tokens.h"
#include "lib/wsnames.h"

#define AGENT_NAME_MAX 64

static int
agent_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > AGENT_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

/* Write the lifecycle's read-ACL row (create only: a lifecycle is new). */
static int
write_acl_row(natsConnection *nc, const char *space, const char *principal,
	      const char *uid, const char *const *allow, size_t nallow, char *err,
	      size_t errlen)
{
	char s[SPACE_TOKEN_MAX + 1], bucket[SPACE_TOKEN_MAX + 32], key[256], why[512];
	jsCtx *js = NULL;
	kvStore *kv = NULL;
	uint64_t rev = 0;
	json_t *row, *list = json_array();
	char *text;
	natsStatus st;
	int rc = -1;

	space_token(space, s, sizeof(s));
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", s);
	snprintf(key, sizeof(key), "%s.%s", principal, uid);
	for (size_t i = 0; i < nallow; i++)
		json_array_append_new(list, json_string(allow[i]));
	row = json_pack("{s:o, s:i, s:I}", "allowSubscribe", list, "revision", 1,
	    "updatedAt", (json_int_t)wall_ms());
	text = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	st = natsConnection_JetStream(&js, nc, NULL);
	if (st == NATS_OK)
		st = js_KeyValue(&kv, js, bucket);
	if (st != NATS_OK) {
		conn_strerror(st, why, sizeof(why));
		snprintf(err, errlen, "bind KV %s: %s (was the space provisioned? run: "
		    "cotal space provision %s)", bucket, why, space);
		goto out;
	}
	st = kvStore_Create(&rev, kv, key, text, (int)strlen(text));
	if (st != NATS_OK) {
		conn_strerror(st, why, sizeof(why));
		snprintf(err, errlen, "create ACL row %s/%s: %s", bucket, key, why);
		goto out;
	}
	rc = 0;
out:
	free(text);
	kvStore_Destroy(kv);
	jsCtx_Destroy(js);
	return rc;
}

int
cmd_agent_add(int argc, char **argv)
{
	const char *root = NULL, *space = NULL, *server = NULL, *name = NULL;
	const char *allow[PROFILE_MAX_ALLOW];
	char err[4096], dir[WS_PATH_MAX], path[WS_FILE_MAX], uid[27];
	struct mint_req req = { .profile = PROFILE_AGENT };
	struct workspace ws;
	struct minted m = { 0 };
	struct creds sup = { 0 }, prov = { 0 };
	natsConnection *nc = NULL;
	int have_allow = 0, rc = 1;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (cli_root_or_space(argc, argv, &i, &root, &space))
			continue;
		if (strcmp(a, "--server") == 0 && more)
			server = argv[++i];
		else if (strcmp(a, "--allow") == 0 && more) {
			if (cli_split_allow(argv[++i], allow, &req.nallow) != 0)
				return 1;
			have_allow = 1;
		} else if (a[0] != '-' && name == NULL)
			name = a;
		else {
			log_errx("agent add: unknown or incomplete argument \"%s\"", a);
			goto usage;
		}
	}
	if (name == NULL || space == NULL || !have_allow) {
		log_errx("agent add: NAME, --space and --allow are required");
		goto usage;
	}
	if (!agent_name_valid(name)) {
		log_errx("agent add: NAME \"%s\" must be 1-%d chars of [A-Za-z0-9_-]",
		    name, AGENT_NAME_MAX);
		return 1;
	}
	/* A space the workspace does not hold is named with those it does,
	 * and nothing is made for it (issue 43). */
	if (ws_locate(root, &ws, err, sizeof(err)) != 0 ||
	    ws_space_known(&ws, space, err, sizeof(err)) != 0 ||
	    ws_space_dir(&ws, space, true, dir, sizeof(dir), err, sizeof(err)) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/agents", dir);
	if (ws_mkdirs(path, err, sizeof(err)) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/agents/%s.creds", dir, name);
	if (access(path, F_OK) == 0) {
		log_errx("agent add: an agent named %s already exists in space %s (%s)",
		    name, space, path);
		return 1;
	}
	new_lifecycle_uid(uid);
	req.space = space;
	req.name = name;
	req.uid = uid;
	req.allow = allow;
	if (mint_user(&ws, &req, &m, err, sizeof(err)) != 0)
		goto fail;

	/* The read-ACL row, as the manager writes it. */
	if (cli_connect_space(&ws, space, server, "supervisor", &sup, &nc, err, sizeof(err)) != 0 ||
	    write_acl_row(nc, space, m.principal, uid, allow, req.nallow, err, sizeof(err)) != 0)
		goto fail;
	natsConnection_Destroy(nc);
	nc = NULL;

	/* The per-lifecycle durable, as provisioning makes it (WIRE.md §3). */
	if (cli_connect_space(&ws, space, server, "provisioner", &prov, &nc, err, sizeof(err)) != 0 ||
	    provision_member_durable(nc, space, "local", m.user_pub, uid, err, sizeof(err)) != 0)
		goto fail;

	if (ws_write_file(path, m.creds, strlen(m.creds), 0600, err, sizeof(err)) != 0)
		goto fail;
	json_t *rec = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "principal",
	    m.principal, "lifecycleUid", uid, "creds", path);
	snprintf(path, sizeof(path), "%s/agents/%s.json", dir, name);
	int w = ws_write_json(path, rec, 0600, err, sizeof(err));
	json_decref(rec);
	if (w != 0)
		goto fail;
	printf("principal %s\nuid %s\ncreds %s/agents/%s.creds\n", m.principal, uid, dir, name);
	rc = 0;
	goto out;
fail:
	log_errx("agent add: %s", err);
	goto out;
usage:
	rc = CLI_USAGE;
out:
	natsConnection_Destroy(nc);
	if (sup.jwt)
		creds_free(&sup);
	if (prov.jwt)
		creds_free(&prov);
	minted_free(&m);
	return rc;
}
