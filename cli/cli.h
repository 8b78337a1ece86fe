/* The `cotal` operator CLI: one function per command. */
#ifndef COTAL_CLI_H
#define COTAL_CLI_H

#include <nats/nats.h>
#include <stddef.h>

#include "lib/workspace.h"
#include "lib/creds.h"

int cmd_mesh_init(int argc, char **argv);
int cmd_mesh_start(int argc, char **argv);
int cmd_mesh_stop(int argc, char **argv);
int cmd_space_provision(int argc, char **argv);
int cmd_creds_mint(int argc, char **argv);
int cmd_agent_add(int argc, char **argv);
int cmd_agent_post(int argc, char **argv);
int cmd_agent_join(int argc, char **argv);
int cmd_agent_recv(int argc, char **argv);
int cmd_status(int argc, char **argv);

int cli_parse_port(const char *s, int *port);
/* Split "a,b,c" into at most PROFILE_MAX_ALLOW entries (text is modified). */
int cli_split_allow(char *text, const char **out, size_t *n);
/* The nats-server binary: $COTAL_NATS_SERVER, the 2.10 broker `make deps`
 * unpacked in the build tree, else "nats-server" on PATH. */
const char *cli_nats_server_path(void);

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

#endif
