/* The `cotal` operator CLI: one function per command. */
#ifndef COTAL_CLI_H
#define COTAL_CLI_H

#include <jansson.h>
#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/creds/creds.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/records.h"
#include "lib/wire/tokens.h"
#include "lib/workspace.h"

/* A command's return for a usage error: the dispatcher (main.c) prints the
 * command's usage line from the one table (commands.h) and exits 2. The
 * command has said what was wrong. */
#define CLI_USAGE (-2)

int cmd_mesh_init(int argc, char **argv);
int cmd_mesh_start(int argc, char **argv);
int cmd_mesh_stop(int argc, char **argv);
int cmd_space_provision(int argc, char **argv);
int cmd_creds_mint(int argc, char **argv);
int cmd_creds_audit(int argc, char **argv);
int cmd_agent_add(int argc, char **argv);
int cmd_agent_post(int argc, char **argv);
int cmd_agent_recv(int argc, char **argv);
int cmd_status(int argc, char **argv);
/* `cotal status --spaces MANIFEST [--run-dir DIR]` (status_host.c): what
 * cmd_status hands --spaces to. */
int cmd_status_host(int argc, char **argv);

/* The control rails (rails.c): as the agent itself ... */
int cmd_agent_join(int argc, char **argv);
int cmd_agent_leave(int argc, char **argv);
int cmd_agent_memberships(int argc, char **argv);
int cmd_agent_history(int argc, char **argv);
/* ... and as the manager (the space's supervisor credential). */
int cmd_admin_inventory(int argc, char **argv);
int cmd_admin_evict(int argc, char **argv);
int cmd_admin_liveness(int argc, char **argv);
int cmd_admin_reload(int argc, char **argv);

int cli_parse_port(const char *s, int *port);
/* The option at argv[*i] when it is one every space command takes, --root
 * DIR or --space NAME, with its value: taken (into *root or *space, *i
 * moved past the value), true. */
bool cli_root_or_space(int argc, char **argv, int *i, const char **root, const char **space);
/* Split "a,b,c" into at most PROFILE_MAX_ALLOW entries (text is modified). */
int cli_split_allow(char *text, const char **out, size_t *n);
/* The nats-server binary: $COTAL_NATS_SERVER, the 2.10 broker `make deps`
 * unpacked in the build tree, else "nats-server" on PATH. */
const char *cli_nats_server_path(void);
/* Every broker of the workspace's dev mesh runs (its pid file names a live
 * nats-server with its config). false without a dev mesh. */
bool cli_mesh_running(const struct workspace *ws);

/*
 * Connect to the space's broker as one of its standing credentials
 * (.cotal/space.<key>/<profile>.creds). c must outlive the connection.
 */
/* The same with any creds file (an agent's own), named `name` in CONNZ. */
int cli_connect_file(const struct workspace *ws, const char *space, const char *server_opt,
		     const char *path, const char *name, struct creds *c, natsConnection **nc,
		     char *err, size_t errlen);
int cli_connect_space(const struct workspace *ws, const char *space,
		      const char *server_opt, const char *profile, struct creds *c,
		      natsConnection **nc, char *err, size_t errlen);
/* The same with options o (its url is filled in here), e.g. a control
 * client's connection handlers. */
int cli_connect_opts(const struct workspace *ws, const char *space, const char *server_opt,
		     const char *path, struct conn_opts *o, struct creds *c, natsConnection **nc,
		     char *err, size_t errlen);
/* A TLS-required mesh (the registry's tlsRequired): the broker must prove
 * itself as the first URL's host with the registry's tlsCa, as the daemon
 * demands; o's TLS fields point into t until cli_tls_end. Nothing when not
 * required. 0, or -1 with err. */
struct cli_tls {
	char host[256];
	char *pem;
};
int cli_tls_begin(const char *space, const char *url, bool required, struct cli_tls *t,
		  struct conn_opts *o, char *err, size_t errlen);
void cli_tls_end(struct cli_tls *t, struct conn_opts *o);
/* .cotal/space.<key>/<profile>.creds into path. */
int cli_space_creds_path(const struct workspace *ws, const char *space, const char *profile,
			 char *path, size_t len, char *err, size_t errlen);

/* A connection with a control client on it (lib/wire/ctlclient.h). */
struct ctl_client;
struct cli_session {
	struct ctl_client *client;
	struct creds creds;
	natsConnection *nc;
};
/* As the space's manager: its standing supervisor credential, on the
 * space's broker (server: --server, or NULL). 0, or -1 with err. */
int cli_manager_open(const struct workspace *ws, const char *space, const char *server,
		     struct cli_session *s, char *err, size_t errlen);
void cli_session_close(struct cli_session *s);

/* An agent `cotal agent add` made: its record agents/<name>.json. */
struct agent_ref {
	struct workspace ws;
	char space[SPACE_NAME_MAX + 1];
	char token[SPACE_TOKEN_MAX + 1];
	char name[80];
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1], uid[UID_MAX + 1];
	char creds[WS_FILE_MAX];
};
int cli_agent_load(const char *root, const char *space, const char *name, struct agent_ref *r,
		   char *err, size_t errlen);
/* Connect as the agent itself (o: extra options, may be NULL). */
int cli_agent_connect(const struct agent_ref *r, const char *server, struct conn_opts *o,
		      struct creds *c, natsConnection **nc, char *err, size_t errlen);
/* One line per message, "<channel> <from.name>: <first text part>". */
void cli_print_message(const char *channel, const json_t *msg);
/* s (NULL stays NULL) with every control byte, DEL, C1 control and byte of
 * no valid UTF-8 sequence written as \xHH, as the log writes them: what the
 * CLI prints of bytes others chose (a JWT's name and grants, another
 * agent's name and text), so that no escape sequence reaches the terminal.
 * Valid until CLI_ESC_RING more calls. */
#define CLI_ESC_RING 16
const char *cli_esc(const char *s);

#endif
