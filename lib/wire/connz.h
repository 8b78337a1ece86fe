/*
 * What the eviction sweep reads from the broker, checked: CONNZ reply pages
 * of the space account, their connection entries (whose principal each one
 * is), and KICK replies. All of it is network input: every field the sweep
 * relies on is type-checked here, within named bounds, and nothing here
 * talks to a broker (unit-tested and fuzzed as it is).
 *
 * On a cluster every server answers CONNZ of the account for its own
 * connections, each reply naming its server in the "server" envelope
 * (name, id, cluster); a reply covers that one server.
 */
#ifndef COTAL_CONNZ_H
#define COTAL_CONNZ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/wire/records.h"

#define SWEEP_PAGE 1024            /* CONNZ limit per page */
#define SWEEP_SERVER_ID_MAX 64
#define SWEEP_SERVER_NAME_MAX 64   /* server.name we page by and quote */
#define SWEEP_VERSION_MAX 32

/* printf into buf (NULL or 0-length: nothing). */
void note_say(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Append "; "-separated text to a note (truncated to fit). */
void note_add(char *note, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Is p a principal "<o>.<a>" (a principal owner, an identity-token actor)? */
bool connz_principal_valid(const char *p);

/*
 * The principal a CONNZ connection entry belongs to: its JWT tag
 * "principal:<o>.<a>", else its authorized_user "<o>-<a>" (dash-form)
 * turned into "<o>.<a>"; the owner must be a principal owner. 0 with the
 * principal in out, -1 when the entry names none.
 */
int connz_entry_principal(const json_t *conn, char *out, size_t outlen);
/* Does the entry name this principal (any of its principal tags, else its
 * authorized_user)? */
bool connz_entry_names(const json_t *conn, const char *principal);
/* Each principal an entry names, handed to fn (true stops); how many. */
size_t connz_entry_each(const json_t *conn, bool (*fn)(const char *principal, void *arg),
			void *arg);

/* A server id we may put in a subject: one token of [A-Za-z0-9_-]. */
bool connz_server_id_valid(const char *s, size_t n);
/* A server version that has KICK: 2.10 or newer ("2.10.27", "2.11.0-RC.1"). */
bool connz_version_has_kick(const char *ver);

/*
 * One CONNZ reply page, checked for everything the sweep relies on:
 * {"server":{"id", "name"?, "cluster"?, "ver"?}, "data":{"server_id",
 * "num_connections", "total", "offset" (= the offset asked for),
 * "connections":[{"cid", "tags"?, "authorized_user"?, "account"?}, ...]}}
 * with server.id a server id and data.server_id the same one (a server
 * that does not know the account answers an empty page without it),
 * server.name, when present, a short name without control characters,
 * num_connections the array's length (at most SWEEP_PAGE), cids strictly
 * ascending, tags an array of strings. A broker error
 * {"error":{"code","description"}} or a missing or mistyped field: -1 with
 * why.
 */
struct connz_page {
	char server_id[SWEEP_SERVER_ID_MAX + 1];
	char server_name[SWEEP_SERVER_NAME_MAX + 1]; /* "" when the reply names none */
	bool clustered;          /* server.cluster is a non-empty name */
	char version[SWEEP_VERSION_MAX]; /* server.ver, "" when absent or not a short string */
	long long total;
	long long offset;
	size_t n;                /* entries */
	const json_t *conns;     /* data.connections, borrowed from the reply */
};
int connz_page_parse(const json_t *reply, long long offset, struct connz_page *p, char *why,
		     size_t whylen);

/* A KICK reply: 1 accepted ({"server":{...}} and no "error"), 0 refused
 * (why has the broker's code and words), -1 undecodable. */
int kick_reply_parse(const char *data, size_t len, char *why, size_t whylen);

#endif
