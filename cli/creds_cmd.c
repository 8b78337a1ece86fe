/*
 * `cotal creds mint`: mint one credential of a profile on a dev mesh.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/mint.h"
#include "lib/log.h"
#include "lib/wire/tokens.h"

#define MAX_ALLOW PROFILE_MAX_ALLOW
#define ALLOW_TEXT_MAX (MAX_ALLOW * 4097)

/* Split "a,b,c" into at most MAX_ALLOW entries (the text is modified). */
int
cli_split_allow(char *text, const char **out, size_t *n)
{
	*n = 0;
	if (strlen(text) > ALLOW_TEXT_MAX) {
		log_errx("--allow: longer than %d bytes", ALLOW_TEXT_MAX);
		return -1;
	}
	for (char *save = NULL, *tok = strtok_r(text, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_ALLOW) {
			log_errx("--allow: at most %d channel patterns", MAX_ALLOW);
			return -1;
		}
		out[(*n)++] = tok;
	}
	return 0;
}

static int
parse_epoch(const char *opt, const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (*s == '\0' || *end != '\0') {
		log_errx("%s: \"%s\" is not a whole number of seconds", opt, s);
		return -1;
	}
	*out = v;
	return 0;
}

int
cmd_creds_mint(int argc, char **argv)
{
	const char *root = NULL, *space = NULL, *pname = NULL, *out = NULL;
	const char *allow[MAX_ALLOW];
	char err[1024], dir[WS_PATH_MAX], path[WS_FILE_MAX], uidbuf[27];
	struct mint_req req = { 0 };
	struct workspace ws;
	struct minted m;
	int force = 0, renew = 0;
	struct creds old = { 0 };
	int64_t v;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (cli_root_or_space(argc, argv, &i, &root, &space))
			continue;
		if (strcmp(a, "--profile") == 0 && more)
			pname = argv[++i];
		else if (strcmp(a, "--out") == 0 && more)
			out = argv[++i];
		else if (strcmp(a, "--name") == 0 && more)
			req.name = argv[++i];
		else if (strcmp(a, "--owner") == 0 && more)
			req.owner = argv[++i];
		else if (strcmp(a, "--uid") == 0 && more)
			req.uid = argv[++i];
		else if (strcmp(a, "--allow") == 0 && more) {
			if (cli_split_allow(argv[++i], allow, &req.nallow) != 0)
				return 1;
			req.allow = allow;
		} else if (strcmp(a, "--expires") == 0 && more) {
			if (parse_epoch(a, argv[++i], &v) != 0)
				return 1;
			if (v <= 0) {
				log_errx("--expires: must be a positive number of seconds");
				return 1;
			}
			req.exp = (int64_t)time(NULL) + v;
		} else if (strcmp(a, "--expires-at") == 0 && more) {
			if (parse_epoch(a, argv[++i], &req.exp) != 0)
				return 1;
			if (req.exp <= 0) {
				log_errx("--expires-at: must be a positive epoch second");
				return 1;
			}
		} else if (strcmp(a, "--grants") == 0 && more)
			req.grants = argv[++i];
		else if (strcmp(a, "--force") == 0)
			force = 1;
		else if (strcmp(a, "--renew") == 0)
			renew = 1;
		else {
			log_errx("creds mint: unknown or incomplete argument \"%s\"", a);
			goto usage;
		}
	}
	if (space == NULL || pname == NULL) {
		log_errx("creds mint: --space and --profile are required");
		goto usage;
	}
	if (profile_from_name(pname, &req.profile) != 0) {
		log_errx("creds mint: --profile \"%s\" is not one of delivery, agent, "
		    "supervisor, provisioner, sys-observer, sys-evictor", pname);
		return 1;
	}
	if (req.grants != NULL && req.profile != PROFILE_DELIVERY &&
	    req.profile != PROFILE_SYS_OBSERVER && req.profile != PROFILE_SYS_EVICTOR) {
		log_errx("creds mint: --grants takes the delivery, sys-observer or sys-evictor "
		    "profile, not %s", pname);
		return 1;
	}
	req.space = space;
	if (req.profile == PROFILE_AGENT && req.uid == NULL) {
		new_lifecycle_uid(uidbuf);
		req.uid = uidbuf;
	}
	if (req.exp != 0 && req.exp <= (int64_t)time(NULL))
		log_warnx("creds mint: --expires-at %lld is in the past: the broker will "
		    "refuse this credential", (long long)req.exp);
	if (ws_locate(root, &ws, err, sizeof(err)) != 0) {
		log_errx("creds mint: %s", err);
		return 1;
	}
	if (out == NULL) {
		if (ws_space_dir(&ws, space, true, dir, sizeof(dir), err, sizeof(err)) != 0) {
			log_errx("creds mint: %s", err);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/%s.creds", dir, pname);
		out = path;
	}
	/* --renew: the same user key (a daemon pins its identity), a fresh
	 * JWT; the file is replaced. */
	if (renew) {
		if (creds_load(out, &old, err, sizeof(err)) != 0) {
			log_errx("creds mint --renew: %s", err);
			return 1;
		}
		req.seed = old.seed;
		force = 1;
	}
	if (!force && access(out, F_OK) == 0) {
		log_errx("creds mint: %s exists; pass --force to replace it (or --out FILE)", out);
		return 1;
	}
	int minted = mint_user(&ws, &req, &m, err, sizeof(err));
	if (renew)
		creds_free(&old);
	if (minted != 0) {
		log_errx("creds mint: %s", err);
		return 1;
	}
	if (ws_write_file(out, m.creds, strlen(m.creds), 0600, err, sizeof(err)) != 0) {
		log_errx("creds mint: %s", err);
		minted_free(&m);
		return 1;
	}
	printf("creds %s\nuser %s\n", out, m.user_pub);
	if (m.principal[0] != '\0')
		printf("principal %s\n", m.principal);
	if (req.profile == PROFILE_AGENT)
		printf("uid %s\n", req.uid);
	minted_free(&m);
	return 0;
usage:
	return CLI_USAGE;
}
