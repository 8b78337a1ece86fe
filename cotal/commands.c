/*
 * cotal's interface, in one table (commands.h): what each command takes,
 * what each flag means, what each exit status says, and every text made
 * of them: --help, the usage line, the man page's synopsis lines and EXIT
 * STATUS, the bash completion.
 */
#include "cotal/commands.h"

#include <string.h>

#include "cli/cli.h"
#include "launcher/launcher.h"

/* ---- the flags ---- */

#define FLAG(id, n, a, r, h) static const struct cli_flag id = { n, a, r, h }

FLAG(F_SPACE, "--space", "S", true, "the space");
FLAG(F_ROOT, "--root", "DIR", false,
    "the workspace, the folder holding .cotal/ (else the nearest one above the working directory)");
FLAG(F_SERVER, "--server", "URL", false,
    "the broker (else the one the mesh registry records for the space)");
FLAG(F_JSON, "--json", NULL, false, "the answer as JSON, for scripts");
FLAG(F_NATS, "--nats-server", "PATH", false,
    "the nats-server binary (else $COTAL_NATS_SERVER, the build's, nats-server on PATH)");
FLAG(F_NODE, "--node", "N", false, "one node of a cluster mesh only");
FLAG(F_WAIT_AGENT, "--wait", "MS", false, "how long to wait for the daemon's answer (5000)");
FLAG(F_WAIT_RECV, "--wait", "MS", false, "how long to wait for frames (1000)");
FLAG(F_WAIT_ADMIN, "--wait", "MS", false,
    "how long to wait for the daemon, retrying as a manager does (15000)");

FLAG(F_INIT_DEV, "--dev", NULL, true,
    "a dev mesh: the workspace runs its own broker and signs its credentials");
FLAG(F_INIT_SPACE, "--space", "S", true, "a space of the mesh (more than one may be given)");
FLAG(F_INIT_PORT, "--port", "N,...", false,
    "the client port (a cluster: one per node, or the first of a run)");
FLAG(F_INIT_LISTEN, "--listen", "ADDR", false,
    "the address the broker listens on (127.0.0.1; beyond loopback with --open)");
FLAG(F_INIT_OPEN, "--open", NULL, false, "let the broker listen beyond loopback");
FLAG(F_INIT_SYNC, "--sync-interval", "always|default", false,
    "always: the broker syncs every write before acknowledging it");
FLAG(F_INIT_CLUSTER, "--cluster", "N", false,
    "N brokers (3 to 5) in a cluster, streams and buckets with 3 replicas");
FLAG(F_INIT_ROUTE, "--route-port", "R,...", false, "the cluster's route ports, one per node");

FLAG(F_PROV_REPLICAS, "--replicas", "N", false, "replicas of each stream and bucket (1 or 3)");
FLAG(F_PROV_STORAGE, "--storage", "SIZE", false,
    "the space's storage budget (4G), shared among its streams and buckets");

FLAG(F_MINT_SPACE, "--space", "S", true, "the space the credential serves");
FLAG(F_MINT_PROFILE, "--profile", "P", true,
    "delivery, sys-observer, sys-evictor, provisioner, supervisor or agent");
FLAG(F_MINT_OUT, "--out", "FILE", false, "where to write it (else the space's folder)");
FLAG(F_MINT_NAME, "--name", "NAME", false, "the JWT's name (else <profile>@<space>)");
FLAG(F_MINT_OWNER, "--owner", "O", false, "an agent's principal owner (local)");
FLAG(F_MINT_UID, "--uid", "UID", false, "an agent's lifecycle uid");
FLAG(F_MINT_ALLOW, "--allow", "CH,...", false, "an agent's channels");
FLAG(F_MINT_EXPIRES, "--expires", "SECONDS", false, "valid this long from now");
FLAG(F_MINT_EXPIRES_AT, "--expires-at", "EPOCH", false, "valid until this epoch second");
FLAG(F_MINT_GRANTS, "--grants", "FILE", false,
    "the grants from another Cotal toolchain's file instead of the profile's");
FLAG(F_MINT_FORCE, "--force", NULL, false, "overwrite an existing file");
FLAG(F_MINT_RENEW, "--renew", NULL, false, "keep the user key, mint a fresh expiry");

FLAG(F_AUDIT_PROFILE, "--profile", "P", false,
    "delivery, sys-observer or sys-evictor (else from the credential's name, then its grants)");
FLAG(F_AUDIT_ACCOUNT, "--account", "KEY", false,
    "the space's account key (else from the workspace)");
FLAG(F_AUDIT_SPACE, "--space", "S", false,
    "the space it serves (else from its name, its grants or the workspace)");

FLAG(F_ADD_ALLOW, "--allow", "CH,...", true, "the channels the agent may read");
FLAG(F_POST_ID, "--id", "ID", false, "the message's id (else a fresh one)");
FLAG(F_LEAVE_GEN, "--generation", "N", false,
    "the membership's generation (else the open row's)");
FLAG(F_HISTORY_LIMIT, "--limit", "N", false, "at most N messages");

FLAG(F_EVICT_FROM, "--from", "FILE", false, "principals, one a line (# comments)");
FLAG(F_EVICT_LEDGER, "--ledger", "FILE", false,
    "record each batch sent; run again with it to resume after the last");
FLAG(F_RELOAD_EXPECT, "--expect", "SHA256HEX", false,
    "adopt only the credential of this SHA-256 (of its JWT)");

FLAG(F_UP_DETACH, "--detach", NULL, false, "exit once the daemon serves (else supervise it)");
FLAG(F_UP_TTL, "--creds-ttl", "SECONDS", false,
    "the run credential's lifetime (86400; 20 s to 366 days)");
FLAG(F_UP_METRICS, "--metrics", "ADDR", false,
    "the daemon's /metrics and /healthz on ADDR (PORT, :PORT or ADDR:PORT)");

FLAG(F_STATUS_SPACES, "--spaces", "MANIFEST", true, "a delivery host's manifest");
FLAG(F_STATUS_RUNDIR, "--run-dir", "DIR", false,
    "where the host keeps its status (its unit's RuntimeDirectory)");

/* ---- the commands ---- */

#define RAIL_AGENT &F_SPACE, &F_ROOT, &F_SERVER, &F_WAIT_AGENT, &F_JSON
#define RAIL_ADMIN &F_SPACE, &F_ROOT, &F_SERVER, &F_WAIT_ADMIN, &F_JSON

const struct cli_command cli_commands[] = {
	{ "mesh", "init", cmd_mesh_init, NULL,
	  { &F_INIT_DEV, &F_INIT_SPACE, &F_ROOT, &F_INIT_PORT, &F_INIT_LISTEN, &F_INIT_OPEN, &F_NATS,
	    &F_INIT_SYNC, &F_INIT_CLUSTER, &F_INIT_ROUTE, NULL }, NULL,
	  "make a local dev mesh (one broker, or a cluster)" },
	{ "mesh", "start", cmd_mesh_start, NULL, { &F_ROOT, &F_NATS, &F_NODE, NULL }, NULL,
	  "run the mesh's broker(s) in the background" },
	{ "mesh", "stop", cmd_mesh_stop, NULL, { &F_ROOT, &F_NODE, NULL }, NULL,
	  "stop the mesh's broker(s)" },
	{ "space", "provision", cmd_space_provision, "S",
	  { &F_ROOT, &F_SERVER, &F_PROV_REPLICAS, &F_PROV_STORAGE, NULL }, NULL,
	  "create the space's streams and buckets (WIRE.md §3), idempotent" },
	{ "creds", "mint", cmd_creds_mint, NULL,
	  { &F_MINT_SPACE, &F_MINT_PROFILE, &F_ROOT, &F_MINT_OUT, &F_MINT_NAME, &F_MINT_OWNER,
	    &F_MINT_UID, &F_MINT_ALLOW, &F_MINT_EXPIRES, &F_MINT_EXPIRES_AT, &F_MINT_GRANTS,
	    &F_MINT_FORCE, &F_MINT_RENEW, NULL }, NULL,
	  "mint a credential with the dev signer" },
	{ "creds", "audit", cmd_creds_audit, "FILE",
	  { &F_AUDIT_PROFILE, &F_AUDIT_ACCOUNT, &F_ROOT, &F_AUDIT_SPACE, &F_JSON, NULL }, NULL,
	  "what a credential may do, grant by grant, and the daemon's verdict, for reviewers" },
	{ "agent", "add", cmd_agent_add, "NAME", { &F_SPACE, &F_ADD_ALLOW, &F_ROOT, &F_SERVER,
	  NULL }, NULL, "mint an agent, its read-ACL row and its dlv_ durable" },
	{ "agent", "post", cmd_agent_post, "NAME CHANNEL TEXT",
	  { &F_SPACE, &F_ROOT, &F_SERVER, &F_POST_ID, NULL }, NULL, "post as the agent" },
	{ "agent", "recv", cmd_agent_recv, "NAME", { &F_SPACE, &F_ROOT, &F_SERVER, &F_WAIT_RECV,
	  NULL }, NULL, "surface the agent's delivered frames, and ack them" },
	{ "agent", "join", cmd_agent_join, "NAME CHANNEL", { RAIL_AGENT, NULL }, NULL,
	  "join a channel durably (durableJoin, as the agent)" },
	{ "agent", "leave", cmd_agent_leave, "NAME CHANNEL", { RAIL_AGENT, &F_LEAVE_GEN, NULL },
	  NULL, "leave a channel durably (durableLeave)" },
	{ "agent", "memberships", cmd_agent_memberships, "NAME", { RAIL_AGENT, NULL }, NULL,
	  "the agent's open durable memberships" },
	{ "agent", "history", cmd_agent_history, "NAME CHANNEL",
	  { RAIL_AGENT, &F_HISTORY_LIMIT, NULL }, NULL, "read a channel's history" },
	{ "admin", "inventory", cmd_admin_inventory, "PRINCIPAL UID", { RAIL_ADMIN, NULL }, NULL,
	  "a lifecycle's membership rows (lifecycleMemberships)" },
	{ "admin", "evict", cmd_admin_evict, "[PRINCIPAL...]",
	  { &F_EVICT_FROM, &F_EVICT_LEDGER, RAIL_ADMIN, NULL }, NULL,
	  "verified eviction, 256 principals a request" },
	{ "admin", "liveness", cmd_admin_liveness, "[PRINCIPAL]", { RAIL_ADMIN, NULL }, NULL,
	  "whether the daemon's responder answers, or a principal's connections" },
	{ "admin", "reload", cmd_admin_reload, NULL, { RAIL_ADMIN, &F_RELOAD_EXPECT, NULL }, NULL,
	  "have the daemon adopt its credential file anew (reloadCreds)" },
	{ "up", NULL, cmd_up, NULL,
	  { &F_SPACE, &F_ROOT, &F_NATS, &F_UP_DETACH, &F_UP_TTL, &F_UP_METRICS, NULL }, NULL,
	  "the broker, the space, the run's credential and the daemon; reported once serving" },
	{ "down", NULL, cmd_down, NULL, { &F_SPACE, &F_ROOT, NULL }, NULL,
	  "stop the space's daemon, and the broker up started" },
	{ "status", NULL, cmd_status, NULL, { &F_SPACE, &F_ROOT, &F_JSON, NULL }, NULL,
	  "whether the daemon serves, per worker, with its counters" },
	{ "status", NULL, cmd_status, NULL, { &F_STATUS_SPACES, &F_STATUS_RUNDIR, &F_JSON, NULL },
	  NULL, "the same for each lane of a delivery host" },
	{ "deliver", NULL, cmd_deliver, NULL, { &F_SPACE, NULL }, "[args ...]",
	  "deprecated: runs cotal-deliveryd with the same arguments" },
};
const size_t cli_ncommands = sizeof(cli_commands) / sizeof(cli_commands[0]);

/* ---- the exit statuses (cotal(1) EXIT STATUS) ---- */

const struct cli_exit cli_exits[] = {
	{ 0, NULL, "success" },
	{ 1, NULL, "the command failed or was refused; the reason is on standard error" },
	{ 2, NULL, "a usage error; the reason and the command's usage line are on standard error" },
	{ 2, "creds audit", "the file itself is refused (a link, another owner, readable by "
	  "others, not a creds file), or what it audits against cannot be found" },
	{ 3, "status", "no daemon runs for the space (no host, with --spaces)" },
};
const size_t cli_nexits = sizeof(cli_exits) / sizeof(cli_exits[0]);

/* ---- the texts ---- */

static bool
same(const struct cli_command *c, const char *group, const char *verb)
{
	return strcmp(c->group, group) == 0 &&
	    (c->verb == NULL ? verb == NULL : verb != NULL && strcmp(c->verb, verb) == 0);
}

void
cli_synopsis(const struct cli_command *c, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "%s%s%s", c->group, c->verb ? " " : "",
	    c->verb ? c->verb : "");

	if (c->args != NULL && used < len)
		used += (size_t)snprintf(buf + used, len - used, " %s", c->args);
	for (int i = 0; c->flags[i] != NULL && used < len; i++) {
		const struct cli_flag *f = c->flags[i];
		used += (size_t)snprintf(buf + used, len - used, " %s%s%s%s%s",
		    f->required ? "" : "[", f->name, f->arg ? " " : "", f->arg ? f->arg : "",
		    f->required ? "" : "]");
	}
	if (c->tail != NULL && used < len)
		snprintf(buf + used, len - used, " %s", c->tail);
}

void
cli_list(FILE *f, const char *group)
{
	char syn[1024];

	fprintf(f, "usage: cotal <command> [args]\n\n");
	for (size_t i = 0; i < cli_ncommands; i++) {
		if (group != NULL && strcmp(cli_commands[i].group, group) != 0)
			continue;
		cli_synopsis(&cli_commands[i], syn, sizeof(syn));
		fprintf(f, "  cotal %s\n      %s\n", syn, cli_commands[i].summary);
	}
	fprintf(f, "\n  cotal --help | --version\n"
	    "  cotal <command> --help  that command's flags and exit statuses\n"
	    "The operator CLI of a Cotal delivery mesh (man 1 cotal).\n");
}

static void
exits(FILE *f, const char *name)
{
	fprintf(f, "\nexit status:\n");
	for (size_t i = 0; i < cli_nexits; i++)
		if (cli_exits[i].commands == NULL || strcmp(cli_exits[i].commands, name) == 0)
			fprintf(f, "  %d  %s\n", cli_exits[i].code, cli_exits[i].when);
}

void
cli_help(FILE *f, const char *group, const char *verb)
{
	char syn[1024], name[64];
	const struct cli_command *first = NULL;
	const struct cli_flag *shown[CLI_FLAGS_MAX * 2];
	size_t nshown = 0;

	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (!same(c, group, verb))
			continue;
		cli_synopsis(c, syn, sizeof(syn));
		fprintf(f, "%s cotal %s\n", first == NULL ? "usage:" : "      ", syn);
		if (first == NULL)
			first = c;
	}
	if (first == NULL)
		return;
	for (size_t i = 0; i < cli_ncommands; i++)
		if (same(&cli_commands[i], group, verb))
			fprintf(f, "\n%s", cli_commands[i].summary);
	fprintf(f, "\n\n");
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (!same(c, group, verb))
			continue;
		for (int k = 0; c->flags[k] != NULL; k++) {
			bool seen = false;
			for (size_t s = 0; s < nshown; s++)
				seen = seen || shown[s] == c->flags[k];
			if (seen || nshown == sizeof(shown) / sizeof(shown[0]))
				continue;
			shown[nshown++] = c->flags[k];
			snprintf(syn, sizeof(syn), "%s%s%s", c->flags[k]->name,
			    c->flags[k]->arg ? " " : "", c->flags[k]->arg ? c->flags[k]->arg : "");
			fprintf(f, "  %-22s %s%s\n", syn, c->flags[k]->help,
			    c->flags[k]->required ? " (required)" : "");
		}
	}
	snprintf(name, sizeof(name), "%s%s%s", group, verb ? " " : "", verb ? verb : "");
	exits(f, name);
}

void
cli_usage(const char *group, const char *verb)
{
	char syn[1024];
	bool first = true;

	for (size_t i = 0; i < cli_ncommands; i++) {
		if (!same(&cli_commands[i], group, verb))
			continue;
		cli_synopsis(&cli_commands[i], syn, sizeof(syn));
		fprintf(stderr, "%s cotal %s\n", first ? "usage:" : "      ", syn);
		first = false;
	}
}

/* mdoc: the positional arguments ("[PRINCIPAL...]" -> Oo Ar PRINCIPAL ... Oc). */
static void
mdoc_args(FILE *f, const char *args)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", args);
	for (char *t = strtok_r(buf, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
		bool open = t[0] == '[', close = t[strlen(t) - 1] == ']', more = false;
		if (open)
			t++;
		if (close)
			t[strlen(t) - 1] = '\0';
		if (strcmp(t, "...") == 0) {
			fprintf(f, "%s ...%s", open ? " Oo" : "", close ? " Oc" : "");
			continue;
		}
		if (strlen(t) > 3 && strcmp(t + strlen(t) - 3, "...") == 0) {
			t[strlen(t) - 3] = '\0';
			more = true;
		}
		fprintf(f, "%s Ar %s%s%s", open ? " Oo" : "", t, more ? " ..." : "",
		    close ? " Oc" : "");
	}
}

static void
mdoc(FILE *f)
{
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		fprintf(f, ".It Nm Cm %s%s%s", c->group, c->verb ? " " : "", c->verb ? c->verb : "");
		if (c->args != NULL)
			mdoc_args(f, c->args);
		for (int k = 0; c->flags[k] != NULL; k++) {
			const struct cli_flag *fl = c->flags[k];
			fprintf(f, "%s Fl %s", fl->required ? "" : " Oo", fl->name + 1);
			if (fl->arg != NULL)
				fprintf(f, " Ar %s", fl->arg);
			if (!fl->required)
				fprintf(f, " Oc");
		}
		if (c->tail != NULL)
			mdoc_args(f, c->tail);
		fprintf(f, "\n");
	}
}

static void
mdoc_exit(FILE *f)
{
	fprintf(f, ".Bl -tag -width Ds\n");
	for (size_t i = 0; i < cli_nexits; i++) {
		fprintf(f, ".It %d\n", cli_exits[i].code);
		if (cli_exits[i].commands != NULL)
			fprintf(f, ".Cm %s :\n", cli_exits[i].commands);
		fprintf(f, "%s.\n", cli_exits[i].when);
	}
	fprintf(f, ".El\n");
}

/* The completion: the commands, then each command's flags. */
static void
bash(FILE *f)
{
	fprintf(f, "# bash completion for cotal(1), printed by cotal from the one table of its\n"
	    "# commands (cotal/commands.c).\n_cotal()\n{\n"
	    "\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[1]}\" flags=\"\"\n"
	    "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W \"");
	for (size_t i = 0; i < cli_ncommands; i++)
		if (i == 0 || strcmp(cli_commands[i].group, cli_commands[i - 1].group) != 0)
			fprintf(f, "%s ", cli_commands[i].group);
	fprintf(f, "--help --version --interface\" -- \"$cur\"))\n\t\treturn\n\tfi\n"
	    "\tif [ \"$COMP_CWORD\" -eq 2 ]; then\n\t\tcase \"$cmd\" in\n");
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (c->verb == NULL || (i > 0 && strcmp(c->group, cli_commands[i - 1].group) == 0))
			continue;
		fprintf(f, "\t\t%s) COMPREPLY=($(compgen -W \"", c->group);
		for (size_t k = i; k < cli_ncommands && strcmp(cli_commands[k].group, c->group) == 0;
		    k++)
			fprintf(f, "%s%s", k > i ? " " : "", cli_commands[k].verb);
		fprintf(f, "\" -- \"$cur\")); return ;;\n");
	}
	fprintf(f, "\t\tesac\n\tfi\n\tcase \"$cmd\" in\n");
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (i > 0 && same(&cli_commands[i - 1], c->group, c->verb))
			continue; /* a second form: its flags join the first's below */
		if (c->verb != NULL)
			fprintf(f, "\t%s) [ \"${COMP_WORDS[2]}\" = %s ] && flags=\"", c->group, c->verb);
		else
			fprintf(f, "\t%s) flags=\"", c->group);
		for (size_t k = i; k < cli_ncommands && same(&cli_commands[k], c->group, c->verb);
		    k++)
			for (int j = 0; cli_commands[k].flags[j] != NULL; j++)
				fprintf(f, "%s ", cli_commands[k].flags[j]->name);
		fprintf(f, "\" ;;&\n");
	}
	fprintf(f, "\tesac\n\tcase \"$cur\" in\n"
	    "\t-*) COMPREPLY=($(compgen -W \"$flags --help --version\" -- \"$cur\")) ;;\n"
	    "\t*) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n\tesac\n}\n"
	    "complete -F _cotal cotal\n");
}

int
cli_interface(const char *what)
{
	if (strcmp(what, "mdoc") == 0)
		mdoc(stdout);
	else if (strcmp(what, "mdoc-exit") == 0)
		mdoc_exit(stdout);
	else if (strcmp(what, "bash") == 0)
		bash(stdout);
	else
		return 2;
	return 0;
}
