/*
 * Opening a broker connection under a user credential: the JWT and the
 * nonce signature come from callbacks, so the seed is only ever handled by
 * our own nkeys code (in the daemon, by the supervisor over IPC).
 */
#ifndef COTAL_NATSCONN_H
#define COTAL_NATSCONN_H

#include <nats/nats.h>
#include <stddef.h>

#include "lib/creds.h"

#define CONNECT_TRIES 3 /* an auth refusal is retried: see natsconn.c */

struct conn_opts {
	const char *url;
	const char *name;     /* connection name shown in CONNZ */
	int timeout_ms;       /* connect timeout, default 5000 */
	int max_reconnect;    /* -1 forever, 0 none (default) */
	natsErrHandler on_error; /* asynchronous errors (permission violations) */
	void *on_error_arg;
	/* The connection dropped / closed for good (NULL: not watched). */
	natsConnectionHandler on_disconnected;
	natsConnectionHandler on_closed;
	void *on_conn_arg;
};

/*
 * Connect with the credential c (kept alive by the caller for as long as the
 * connection lives: the callbacks read it on every reconnect). The inbox
 * prefix is the credential's own (lib/tokens.h inbox_prefix).
 * 0 on success, -1 with err holding the broker's or library's words.
 */
int conn_open(const struct conn_opts *o, const struct creds *c,
	      natsConnection **out, char *err, size_t errlen);

/* The text of a nats.c failure: status text plus nats_GetLastError. */
void conn_strerror(natsStatus s, char *buf, size_t len);

#endif
