/*
 * cotal: the operator CLI of a Cotal delivery mesh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "launcher/launcher.h"
#include "cli/profiles.h"
#include "lib/log.h"
#include "lib/version.h"
#include "lib/nats/natsconn.h"
#include "lib/creds/tlsca.h"
#include "lib/wire/tokens.h"

#ifndef COTAL_BUNDLED_NATS_SERVER
#define COTAL_BUNDLED_NATS_SERVER ""
#endif

static const struct command {
	const char *group, *verb;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "mesh", "init", cmd_mesh_init, "--dev [--root DIR] [--port N] [--nats-server PATH] [--sync-interval always|default] [--cluster N [--port P,..] [--route-port R,..]] --space S...  make a local dev mesh (one broker, or a cluster)" },
	{ "mesh", "start", cmd_mesh_start, "[--root DIR] [--nats-server PATH] [--node N]  run its broker(s) in the background" },
	{ "mesh", "stop", cmd_mesh_stop, "[--root DIR] [--node N]  stop its broker(s)" },
	{ "space", "provision", cmd_space_provision, "S [--root DIR] [--server URL] [--replicas N] [--storage SIZE]  streams, buckets (WIRE.md §3)" },
	{ "creds", "mint", cmd_creds_mint, "--space S --profile P [--out FILE] ...  mint a credential" },
	{ "creds", "audit", cmd_creds_audit, "FILE [--profile P] [--space S] [--root DIR] [--account A] [--json]  what a credential may do, for reviewers" },
	{ "agent", "add", cmd_agent_add, "NAME --space S --allow ch1,ch2  mint an agent, its ACL row and dlv_ durable" },
	{ "agent", "post", cmd_agent_post, "NAME CHANNEL TEXT --space S [--id ID]  post as the agent" },
	{ "agent", "recv", cmd_agent_recv, "NAME --space S [--wait MS]  surface the agent's delivered frames" },
	{ "agent", "join", cmd_agent_join, "NAME CHANNEL --space S  join durably (durableJoin, as the agent)" },
	{ "agent", "leave", cmd_agent_leave, "NAME CHANNEL --space S [--generation N]  leave durably" },
	{ "agent", "memberships", cmd_agent_memberships, "NAME --space S  the agent's open durable memberships" },
	{ "agent", "history", cmd_agent_history, "NAME CHANNEL --space S [--limit N]  read a channel's history" },
	{ "admin", "inventory", cmd_admin_inventory, "PRINCIPAL UID --space S [--wait MS]  a lifecycle's membership rows" },
	{ "admin", "evict", cmd_admin_evict, "PRINCIPAL... --space S [--wait MS]  verified eviction" },
	{ "admin", "liveness", cmd_admin_liveness, "[PRINCIPAL] --space S [--wait MS]  the daemon's responder, or a principal's" },
	{ "admin", "reload", cmd_admin_reload, "--space S [--expect SHA256HEX] [--wait MS]  adopt the delivery credential" },
	{ "status", NULL, cmd_status, "--space S [--root DIR] | --spaces MANIFEST  is the daemon (each lane) serving, per worker" },
	{ "up", NULL, cmd_up, "--space S [--root DIR] [--detach] [--nats-server PATH] [--creds-ttl SECONDS] [--metrics ADDR]  broker, space, credential and daemon; reports it once serving" },
	{ "down", NULL, cmd_down, "--space S [--root DIR]  stop the space's delivery daemon (and the broker up started)" },
	{ "deliver", NULL, cmd_deliver, "--space S ...  deprecated: runs cotal-deliveryd with the same arguments" },
};

/* Every command's line, or only group's: on stdout for --help, on stderr
 * after a usage error. */
static void
usage_lines(FILE *f, const char *group)
{
	fprintf(f, "usage: cotal <command> [args]\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (group == NULL || strcmp(commands[i].group, group) == 0)
			fprintf(f, "  cotal %s%s%s %s\n", commands[i].group,
			    commands[i].verb ? " " : "", commands[i].verb ? commands[i].verb : "",
			    commands[i].help);
	fprintf(f, "\n  cotal --help | --version\n"
	    "  cotal <command> --help  that command's line\n"
	    "The operator CLI of a Cotal delivery mesh (man 1 cotal).\n");
}

static void
usage(void)
{
	usage_lines(stderr, NULL);
}

/* --help (or --version) anywhere after the command's words. */
static bool
wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

static bool
wants_version(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--version") == 0)
			return true;
	return false;
}

bool
cli_root_or_space(int argc, char **argv, int *i, const char **root, const char **space)
{
	const char **to = strcmp(argv[*i], "--root") == 0 ? root :
	    strcmp(argv[*i], "--space") == 0 ? space : NULL;

	if (to == NULL || *i + 1 >= argc)
		return false;
	*to = argv[++*i];
	return true;
}

const char *
cli_esc(const char *s)
{
	/* A ring: a printf may print several at once. Each is as long as it
	 * needs (a message's text is not cut); the last few stay reachable. */
	static char *ring[CLI_ESC_RING];
	static size_t next;
	size_t n;
	char *out;

	if (s == NULL)
		return NULL;
	n = strlen(s);
	if ((out = malloc(4 * n + 1)) == NULL)
		return "(out of memory)";
	log_escape(s, n, out, 4 * n + 1);
	free(ring[next]);
	ring[next] = out;
	next = (next + 1) % CLI_ESC_RING;
	return out;
}

int
cli_parse_port(const char *s, int *port)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 1 || v > 65535) {
		log_errx("--port: \"%s\" is not a port number (1-65535)", s);
		return -1;
	}
	*port = (int)v;
	return 0;
}

const char *
cli_nats_server_path(void)
{
	const char *env = getenv("COTAL_NATS_SERVER");

	if (env != NULL && *env != '\0')
		return env;
	if (*COTAL_BUNDLED_NATS_SERVER != '\0' && access(COTAL_BUNDLED_NATS_SERVER, X_OK) == 0)
		return COTAL_BUNDLED_NATS_SERVER;
	return "nats-server";
}

int
cli_space_creds_path(const struct workspace *ws, const char *space, const char *profile,
		     char *path, size_t len, char *err, size_t errlen)
{
	char dir[WS_PATH_MAX];

	if (ws_space_dir(ws, space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	snprintf(path, len, "%s/%s.creds", dir, profile);
	return 0;
}

int
cli_connect_space(const struct workspace *ws, const char *space, const char *server_opt,
		  const char *profile, struct creds *c, natsConnection **nc, char *err,
		  size_t errlen)
{
	char path[WS_FILE_MAX], name[128];

	if (cli_space_creds_path(ws, space, profile, path, sizeof(path), err, errlen) != 0)
		return -1;
	snprintf(name, sizeof(name), "cotal-cli %s", profile);
	return cli_connect_file(ws, space, server_opt, path, name, c, nc, err, errlen);
}

int
cli_connect_file(const struct workspace *ws, const char *space, const char *server_opt,
		 const char *path, const char *name, struct creds *c, natsConnection **nc,
		 char *err, size_t errlen)
{
	struct conn_opts o = { .name = name };

	return cli_connect_opts(ws, space, server_opt, path, &o, c, nc, err, errlen);
}

int
cli_tls_begin(const char *space, const char *url, bool required, struct cli_tls *t,
	      struct conn_opts *o, char *err, size_t errlen)
{
	char ca[WS_PATH_MAX], first[1024];
	int ncerts;

	memset(t, 0, sizeof(*t));
	if (!required)
		return 0;
	if (ws_registry_tls_ca(space, ca, sizeof(ca), err, errlen) != 0)
		return -1;
	if (ca[0] == '\0') {
		snprintf(err, errlen, "the mesh of space %s demands TLS (mesh registry tlsRequired), "
		    "and its record names no CA (\"tlsCa\") to verify the broker with; refusing "
		    "to dial in plaintext", space);
		return -1;
	}
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(url, ","), url);
	if (tls_url_host(first, t->host, sizeof(t->host)) != 0) {
		snprintf(err, errlen, "server URL %s: no host name to verify the broker as", first);
		return -1;
	}
	if (tls_ca_load(ca, &t->pem, &ncerts, err, errlen) != 0)
		return -1;
	o->tls_host = t->host;
	o->tls_ca_pem = t->pem;
	return 0;
}

void
cli_tls_end(struct cli_tls *t, struct conn_opts *o)
{
	free(t->pem);
	t->pem = NULL;
	o->tls_host = NULL;
	o->tls_ca_pem = NULL;
}

int
cli_connect_opts(const struct workspace *ws, const char *space, const char *server_opt,
		 const char *path, struct conn_opts *o, struct creds *c, natsConnection **nc,
		 char *err, size_t errlen)
{
	char url[1024], why[1024];
	struct cli_tls t;
	bool tls = false;
	int rc;

	if (ws_server_url(ws, space, server_opt, url, sizeof(url), &tls, err, errlen) != 0)
		return -1;
	if (cli_tls_begin(space, url, tls, &t, o, err, errlen) != 0)
		return -1;
	if (creds_load(path, c, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s", why);
		cli_tls_end(&t, o);
		return -1;
	}
	o->url = url;
	rc = conn_open(o, c, nc, err, errlen);
	o->url = NULL;
	cli_tls_end(&t, o);
	if (rc != 0) {
		creds_free(c);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	log_init(NULL, stderr);
	/* jansson seeds its hash from /dev/urandom on first use. */
	json_object_seed(0);
	umask(077);
	if (argc < 2) {
		usage();
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage_lines(stdout, NULL);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		cotal_version_print(stdout, "cotal");
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		if (strcmp(argv[1], c->group) != 0)
			continue;
		if (c->verb == NULL) {
			if (wants_help(argc - 2, argv + 2)) {
				fprintf(stdout, "usage: cotal %s %s\n", c->group, c->help);
				return 0;
			}
			if (wants_version(argc - 2, argv + 2)) {
				cotal_version_print(stdout, "cotal");
				return 0;
			}
			return c->fn(argc - 2, argv + 2);
		}
		if (argc >= 3 && strcmp(argv[2], c->verb) == 0) {
			if (wants_help(argc - 3, argv + 3)) {
				fprintf(stdout, "usage: cotal %s %s %s\n", c->group, c->verb, c->help);
				return 0;
			}
			if (wants_version(argc - 3, argv + 3)) {
				cotal_version_print(stdout, "cotal");
				return 0;
			}
			int rc = c->fn(argc - 3, argv + 3);
			nats_Close();
			return rc;
		}
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].group) == 0 && wants_help(argc - 2, argv + 2)) {
			usage_lines(stdout, argv[1]);
			return 0;
		} else if (strcmp(argv[1], commands[i].group) == 0 &&
		    wants_version(argc - 2, argv + 2)) {
			cotal_version_print(stdout, "cotal");
			return 0;
		}
	log_errx("unknown command \"%s%s%s\"", argv[1], argc >= 3 ? " " : "", argc >= 3 ? argv[2] : "");
	usage();
	return 2;
}
