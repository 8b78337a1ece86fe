/*
 * Verified eviction and principal liveness (WIRE.md §5 ctl.delivery-admin,
 * the seed's "verify-evicts every holder"): one shared sweep of the broker
 * per request, through the $SYS observer (CONNZ of the space account,
 * paged) and the $SYS evictor (KICK per connection, nats-server >= 2.10),
 * re-scanned up to SWEEP_ROUNDS times. An incomplete scan never reports
 * verifiedGone.
 *
 * The caller (the registry worker) owns the two connections: they are
 * opened under the observer's and the evictor's JWTs, with nonces signed by
 * the supervisor. evictor may be NULL: eviction is then unavailable, and
 * only liveness works.
 */
#ifndef COTAL_SWEEP_H
#define COTAL_SWEEP_H

#include <jansson.h>
#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/records.h"

#define SWEEP_PRINCIPALS_MAX 256   /* principals in one evictPrincipals request */
#define SWEEP_ROUNDS 3             /* verify rounds after the first scan */
#define SWEEP_PAGE 1024            /* CONNZ limit per page */
#define SWEEP_PAGES_MAX 256        /* pages of one scan: past that it is incomplete */
#define SWEEP_REQUEST_MS 3000      /* one CONNZ or KICK request */
#define SWEEP_NOTE_MAX 256
#define SWEEP_MATCHES_MAX 4096     /* connections of the named principals one scan keeps */
#define SWEEP_REPLY_MAX (64 * 1024 * 1024) /* a CONNZ reply we decode */
#define SWEEP_SERVER_ID_MAX 64

struct sweeper {
	natsConnection *observer;  /* $SYS observer: $SYS.REQ.ACCOUNT.<account>.CONNZ */
	natsConnection *evictor;   /* $SYS evictor: $SYS.REQ.SERVER.*.KICK; NULL: none */
	char account[64];          /* the space account's public key */
	/* Requests sent so far (logs and tests; start them at zero). */
	unsigned long connz_requests;
	unsigned long kick_requests;
};

/* WIRE.md §5 EvictionResult. */
struct eviction_result {
	char principal[PRINCIPAL_MAX + 1];
	int kicked;          /* KICKs the broker accepted */
	int remaining;       /* connections of the principal still seen by the last scan */
	bool verified_gone;  /* scan complete and nothing remaining */
	bool scan_complete;  /* every CONNZ page of the last scan was read */
	char note[SWEEP_NOTE_MAX]; /* "" or why it is not verified */
};

/*
 * Evict every connection of each principal ("<o>.<a>", already validated
 * by the caller), n <= SWEEP_PRINCIPALS_MAX, with one shared sweep: scan,
 * KICK each match, re-scan and KICK again up to SWEEP_ROUNDS times until
 * none is left. Results in request order (a principal named twice gets the
 * same result twice). Fills out[0..n-1]; never fails as a whole: what went
 * wrong is in each result's note and scan_complete.
 */
void sweep_evict(struct sweeper *s, const char *const *principals, int n,
		 struct eviction_result *out);

/* principalLiveness: "live" (a connection of it is seen), "gone" (a
 * complete scan sees none) or "unknown" (the scan was incomplete). */
enum principal_state { PRINCIPAL_LIVE, PRINCIPAL_GONE, PRINCIPAL_UNKNOWN };
const char *principal_state_name(enum principal_state s);
enum principal_state sweep_liveness(struct sweeper *s, const char *principal, bool *complete,
				    char *note, size_t notelen);

/* EvictionResult as JSON (WIRE.md §5): {principal, kicked, remaining,
 * verifiedGone, scanComplete, note?}. */
json_t *eviction_result_json(const struct eviction_result *r);

/*
 * The principal a CONNZ connection entry belongs to: its JWT tag
 * "principal:<o>.<a>", else its authorized_user "<o>-<a>" (dash-form)
 * turned into "<o>.<a>"; the owner must be a principal owner. 0 with the
 * principal in out, -1 when the entry names none. Pure: unit-tested.
 */
int connz_entry_principal(const json_t *conn, char *out, size_t outlen);
/* Does the entry name this principal (any of its principal tags, else its
 * authorized_user)? Pure. */
bool connz_entry_names(const json_t *conn, const char *principal);

/*
 * One CONNZ reply page (network input), checked for everything the sweep
 * relies on: {"server":{"id", "cluster"?}, "data":{"server_id",
 * "num_connections", "total", "offset" (= the offset asked for),
 * "connections":[{"cid", "tags"?, "authorized_user"?, "account"?}, ...]}}
 * with num_connections the array's length (at most SWEEP_PAGE), cids
 * strictly ascending, tags an array of strings. A broker error
 * {"error":{"code","description"}}, a clustered broker (a reply covers one
 * server) or a missing or mistyped field: -1 with why. Pure.
 */
struct connz_page {
	char server_id[SWEEP_SERVER_ID_MAX + 1];
	char version[32];        /* server.ver, "" when absent or not a short string */
	long long total;
	long long offset;
	size_t n;                /* entries */
	const json_t *conns;     /* data.connections, borrowed from the reply */
};
int connz_page_parse(const json_t *reply, long long offset, struct connz_page *p, char *why,
		     size_t whylen);

/* A KICK reply: 1 accepted ({"server":{...}} and no "error"), 0 refused
 * (why has the broker's code and words), -1 undecodable. Pure. */
int kick_reply_parse(const char *data, size_t len, char *why, size_t whylen);

#endif
