/*
 * The servers one eviction scan must hear from. On a cluster every server
 * answers CONNZ of the space account for its own connections, so a scan
 * is complete only when every server answered and each one's pages were
 * all read (WIRE.md §5: "An incomplete scan never reports verifiedGone").
 *
 * How many to expect: at least as many as the daemon was given URLs (every
 * node of the cluster, lib/nats/natsconn.h conn_servers), and every other server
 * that answers is read too. Servers heard in earlier scans are remembered
 * by name, only so that a note can say which ones did not answer (a
 * restarted server keeps its name and gets a new id).
 *
 * Pure bookkeeping: no broker, bounded by SWEEP_SERVERS_MAX.
 */
#ifndef COTAL_ROSTER_H
#define COTAL_ROSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/wire/connz.h"

#define SWEEP_SERVERS_MAX 16  /* servers one scan reads; CONN_SERVERS_MAX URLs and more */

struct roster_server {
	char id[SWEEP_SERVER_ID_MAX + 1];
	char name[SWEEP_SERVER_NAME_MAX + 1];  /* "" when its replies name none */
	char version[SWEEP_VERSION_MAX];
	bool clustered;
	bool complete;  /* every page of this server was read */
};

struct roster {
	int expect;     /* servers that must answer (at least 1) */
	struct roster_server s[SWEEP_SERVERS_MAX];
	int n;
	int overflow;   /* answers from further servers, past SWEEP_SERVERS_MAX */
};

/* Names of servers heard in earlier scans, oldest first. */
struct roster_seen {
	char name[SWEEP_SERVERS_MAX][SWEEP_SERVER_NAME_MAX + 1];
	int n;
};

void roster_init(struct roster *r, int expect);
/*
 * The server that sent page p: its index, added when it is new (*added),
 * or -1 when SWEEP_SERVERS_MAX are already listed (counted in overflow).
 */
int roster_add(struct roster *r, const struct connz_page *p, bool *added);
/* The index of server id, or -1. */
int roster_find(const struct roster *r, const char *id);

/* While answers come in: go on waiting (ROSTER_WAIT), stop now
 * (ROSTER_DONE: the expected servers answered and none is clustered, so
 * nobody else will), or stop after a short grace for servers the daemon
 * was not given (ROSTER_GRACE: a clustered server is among them). */
enum roster_wait { ROSTER_WAIT, ROSTER_DONE, ROSTER_GRACE };
enum roster_wait roster_waiting(const struct roster *r);

/* Every expected server answered, no answer was left unread, and each
 * listed server was read completely. */
bool roster_complete(const struct roster *r);
/*
 * Why the roster is not complete for want of answers ("" when enough
 * answered): the servers of seen that did not answer by name, else how
 * many of the expected ones did not.
 */
void roster_missing(const struct roster *r, const struct roster_seen *seen, char *note,
		    size_t len);
/* Remember the names of the servers that answered (seen may be NULL). */
void roster_remember(const struct roster *r, struct roster_seen *seen);

#endif
