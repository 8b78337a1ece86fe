/*
 * Verified eviction and principal liveness (WIRE.md §5 ctl.delivery-admin,
 * the seed's "verify-evicts every holder"): one shared sweep of the broker
 * per request, through the $SYS observer (CONNZ of the space account,
 * paged) and the $SYS evictor (KICK per connection, nats-server >= 2.10),
 * re-scanned up to SWEEP_ROUNDS times. An incomplete scan never reports
 * verifiedGone.
 *
 * On a cluster each server answers CONNZ for its own connections: a scan
 * gathers every server's answer, pages each server on its own, and KICKs
 * each connection on the server that holds it (roster.h says which
 * servers a scan must hear from). The replies' checks are in connz.h.
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

#include "lib/wire/records.h"
#include "lib/wire/connz.h"
#include "worker-registry/roster.h"

#define SWEEP_PRINCIPALS_MAX 256   /* principals in one evictPrincipals request */
#define SWEEP_ROUNDS 3             /* verify rounds after the first scan */
#define SWEEP_PAGES_MAX 256        /* pages of one server in a scan: past that it is incomplete */
#define SWEEP_REQUEST_MS 3000      /* one CONNZ or KICK request */
#define SWEEP_GRACE_MS 100         /* after the expected servers, for a cluster's others */
#define SWEEP_REPLIES_MAX (4 * SWEEP_SERVERS_MAX) /* replies one CONNZ request reads */
#define SWEEP_NOTE_MAX 256
#define SWEEP_MATCHES_MAX 4096     /* connections of the named principals one scan keeps */
#define SWEEP_REPLY_MAX (64 * 1024 * 1024) /* a CONNZ reply we decode */
#define SWEEP_INBOX_MAX 128        /* REPLY_INBOX_MAX */
#define SWEEP_KICK_REPLY_MAX 4096  /* a KICK reply (or a refusal) the sweep reads */

/*
 * Ask for the KICK of connection cid of principal on server (whoever holds
 * the evictor sends it, after its own check: issue 41, finding 2). NATS_OK
 * with the broker's reply (NUL-terminated, cut to replylen) in reply;
 * NATS_NO_RESPONDERS or another status as a request would have it; and
 * NATS_NOT_PERMITTED with why in reply when the holder refused to send it.
 */
typedef natsStatus (*sweep_kick_fn)(void *arg, const char *server, long long cid,
				    const char *principal, char *reply, size_t replylen);

struct sweeper {
	natsConnection *observer;  /* $SYS observer: $SYS.REQ.ACCOUNT.<account>.CONNZ */
	sweep_kick_fn kick;        /* $SYS.REQ.SERVER.<id>.KICK through its holder; NULL: none */
	void *kick_arg;
	char account[64];          /* the space account's public key */
	/* The observer's reply-inbox prefix (its credential's own sub.allow);
	 * "" is nats.c's default "_INBOX". */
	char inbox[SWEEP_INBOX_MAX];
	int expect;                /* servers that must answer: the daemon's URLs (0: 1) */
	struct roster_seen *seen;  /* servers heard before, kept across sweeps; may be NULL */
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
	bool scan_complete;  /* every server answered the last scan, and all its pages were read */
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

#endif
