/*
 * The caller's side of the control rails (WIRE.md §5, the seed's control
 * surface), for the CLI and the tests: a request goes out on the caller's
 * own rail subject with the caller's own reply subject
 * "<request subject>.reply.<random>" (never _INBOX), and its reply is read
 * as {ok, data?, error?}.
 *
 * The seed: "An endpoint's pending control and delivery requests reject if
 * their connection closes, including when the endpoint stops or replaces
 * it. The request is not replayed on the new connection: a lost reply does
 * not prove that the operation did not run. A liveness probe interrupted
 * this way returns unknown, not unbound."
 *
 * "Normal replies, timeouts and broker no-responder answers keep their
 * usual classification."
 *
 * A client watches its connection through the handlers it installs with
 * ctl_client_conn_opts(): a close fails every pending request at once with
 * CTL_CLOSED, and ctl_client_attach() with a new connection fails those
 * pending on the old one the same way. A disconnect that nats.c is still
 * reconnecting is not a close: a pending request keeps waiting for its
 * reply (its reply subscription is renewed on the rebuilt connection) and
 * otherwise times out. A request is handed to the broker only while the
 * connection is up; the connection keeps no reconnect buffer, so nothing
 * is sent after its caller stopped waiting.
 */
#ifndef COTAL_CTLCLIENT_H
#define COTAL_CTLCLIENT_H

#include <jansson.h>
#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/wire/ctlreq.h"
#include "lib/nats/natsconn.h"

#define CTL_CLIENT_PENDING_MAX 64   /* requests in flight on one client */
#define CTL_RETRY_GAP_MS 1000       /* the seed: later retries at most 1 s apart */

/* How a request ended. */
enum ctl_outcome {
	CTL_REPLIED = 0,     /* a reply arrived and parsed: see ok/error/data */
	CTL_TIMEOUT,         /* nothing within the timeout */
	CTL_NO_RESPONDERS,   /* the broker said nobody serves the subject */
	CTL_CLOSED,          /* the connection closed or was replaced under it */
	CTL_BAD_REPLY,       /* something arrived that is no reply */
	CTL_FAILED,          /* could not be sent (err says why) */
};
const char *ctl_outcome_name(enum ctl_outcome o);

struct ctl_client;

/*
 * A client that calls as principal "<owner>.<actor>" named name (from.name)
 * in space (its name, as the credential's space), e.g. the CLI's agent.
 * NULL when out of memory or the tokens are not identity tokens.
 */
struct ctl_client *ctl_client_new(const char *space, const char *owner, const char *actor,
				  const char *name);
void ctl_client_free(struct ctl_client *c);
/* Install the client's close handler (and no reconnect buffer) into o
 * before conn_open. */
void ctl_client_conn_opts(struct ctl_client *c, struct conn_opts *o);
/* Use nc from now on; requests pending on an earlier connection fail with
 * CTL_CLOSED at once. */
void ctl_client_attach(struct ctl_client *c, natsConnection *nc);

/* The outcome of one call. */
struct ctl_result {
	enum ctl_outcome outcome;
	bool ok;              /* CTL_REPLIED: the reply's ok */
	json_t *reply;        /* CTL_REPLIED: the whole reply (owned) */
	json_t *data;         /* borrowed from reply, may be NULL */
	const char *error;    /* borrowed from reply, may be NULL */
	char why[512];        /* what went wrong for every other outcome */
};
void ctl_result_free(struct ctl_result *r);

/*
 * One request {op, args, from:{id, name}} on rail (RAIL_CTL or RAIL_ADMIN);
 * args may be NULL (not sent) and is not stolen. Waits up to timeout_ms.
 */
void ctl_call(struct ctl_client *c, enum rail rail, const char *op, json_t *args,
	      int timeout_ms, struct ctl_result *out);

/*
 * The seed's retry cadence for a caller that waits for the daemon: only a
 * request that times out or finds no responder is retried; the first retry
 * runs at once, later ones at most CTL_RETRY_GAP_MS apart, shortened as the
 * wait runs out; nothing is sent once total_ms has passed. A refusal, a bad
 * reply or a closed connection ends it at once.
 */
void ctl_call_retry(struct ctl_client *c, enum rail rail, const char *op, json_t *args,
		    int per_try_ms, int total_ms, struct ctl_result *out);

/* The liveness probe (WIRE.md §5): what the caller concludes. */
enum liveness {
	LIVE_BOUND = 0,
	LIVE_UNBOUND,   /* no responders */
	LIVE_STALE,
	LIVE_UNKNOWN,   /* timeout, refusal, unreadable reply, connection closed */
};
const char *liveness_name(enum liveness l);
/* Probe P.live.delivery.<o>.<a> (empty body); the responder's instance
 * into instance when it answered. */
enum liveness ctl_liveness(struct ctl_client *c, int timeout_ms, char *instance, size_t len,
			   char *why, size_t whylen);

#endif
