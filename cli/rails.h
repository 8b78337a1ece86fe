/*
 * What the control-rail commands share (rails.c): their arguments, the
 * manager's session, and how a call that failed is said. The agent's
 * commands are rails.c's, the manager's admin.c's.
 */
#ifndef COTAL_CLI_RAILS_H
#define COTAL_CLI_RAILS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "cli/cli.h"
#include "lib/wire/ctlclient.h"

#define ADMIN_WAIT_MS 15000   /* the seed: a retirement's 15-second total wait */
#define ADMIN_TRY_MS 5000     /* one admin try within that wait */
#define WAIT_MAX_MS 600000
#define HISTORY_LIMIT_MAX 200 /* WIRE.md §5: readHistory's limit */
#define EVICT_MAX 256         /* WIRE.md §5: evictPrincipals' principals */
#define SHA256_HEX 64
#define RAIL_POS_MAX 4096     /* arguments of one command (admin evict: principals) */

/* The options a command takes besides --root, --space, --server, --json
 * and --wait. */
enum {
	OPT_GENERATION = 1 << 0,
	OPT_LIMIT = 1 << 1,
	OPT_EXPECT = 1 << 2,
	OPT_FROM = 1 << 3,    /* --from FILE */
	OPT_LEDGER = 1 << 4,  /* --ledger FILE */
};

struct rail_args {
	const char *verb;     /* "agent join": names the command in every refusal */
	const char *root, *space, *server;
	const char *pos[RAIL_POS_MAX];
	int npos;
	bool json;
	int wait_ms;
	uint64_t generation;  /* 0: not given */
	uint64_t limit;       /* 0: not given */
	char expect[SHA256_HEX + 1];
	const char *from, *ledger; /* NULL: not given */
};

/*
 * Parse argv: min_pos..max_pos positional arguments and the options in
 * opts. 0, or -1 after a refusal that names the argument.
 */
int parse_rail_args(const char *verb, int argc, char **argv, unsigned opts, int min_pos,
		    int max_pos, int wait_default, struct rail_args *a);
/* A usage error: CLI_USAGE (main.c prints the usage line from the table). */
int rails_usage(void);
/* Connect as the manager: the space's standing supervisor credential. 0, or
 * -1 after saying why. */
int admin_session(const struct rail_args *a, struct cli_session *s);
/* v as compact JSON on a line of stdout. */
void print_json(const json_t *v);
/* A call that did not end in ok:true: with --json a refusal's raw reply,
 * otherwise why, naming the command. 1. */
int call_failed(const struct rail_args *a, const struct ctl_result *r, enum rail rail);

#endif
