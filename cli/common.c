/*
 * What every cotal command shares (cli.h): the workspace's --root and
 * --space, escaping what it prints of others' bytes, the broker binary,
 * and the connections to a space's broker with a credential of the space.
 * Runs in the cotal process, as the operator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/profiles.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/creds/tlsca.h"
#include "lib/wire/tokens.h"

#ifndef COTAL_BUNDLED_NATS_SERVER
#define COTAL_BUNDLED_NATS_SERVER ""
#endif

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

