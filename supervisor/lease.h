/*
 * The single-flight lease of a space's shard (seed: "One daemon serves a
 * space (a single-flight lease guards against a second binding the same
 * durables)"; WIRE.md §4): key lease.0 of cotal_delivery_<s>, a bucket
 * whose rows live 30 s unless renewed,
 *   {holder:"<o>.<a>", incarnation:"<random per process>", since:<ms>, ready:bool}
 * ours iff holder and incarnation both match.
 *
 * The record helpers are pure (unit-tested); the broker operations run on
 * the supervisor's resident connection.
 */
#ifndef COTAL_LEASE_H
#define COTAL_LEASE_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/wire/records.h"
#include "lib/wire/tokens.h"

#define LEASE_KEY "lease.0"
#define LEASE_RENEW_MS 15000        /* renewed by CAS this often (TTL 30 s) */
#define LEASE_RECHECK_RETRY_MS 1000 /* an unknown reading is tried again */
#define STANDBY_POLL_MS 1000        /* a standby tries the claim this often */
#define LEASE_TTL_MS 30000          /* the lease bucket's TTL (WIRE.md) */
/* Under a service manager, a start refused by a live lease waits this long
 * as a standby before it exits: long enough for a row nothing renews to
 * age out, so the unit restarts it twice a minute at most (docs/service.md:
 * the start limit counts crashes, not a lease held elsewhere). */
#define SERVICE_LEASE_WAIT_MS (LEASE_TTL_MS + 2000)
#define LEASE_QUIESCE_WAIT_MS 6000  /* workers report QUIESCED within this */
#define LEASE_BUCKET_MAX (SPACE_TOKEN_MAX + 24)

struct lease {
	char bucket[LEASE_BUCKET_MAX];            /* cotal_delivery_<s> */
	char subject[LEASE_BUCKET_MAX + 16];      /* $KV.<bucket>.lease.0 */
	char holder[PRINCIPAL_MAX + 1];           /* the credential's <o>.<a> */
	char incarnation[LEASE_INCARNATION_MAX];
	int64_t since;                            /* wall ms of the first claim */
	bool ready;
	bool held;                                /* we wrote it and have not let go */
	uint64_t rev;                             /* the revision of our last write */
	/* Does another row's holder provably no longer run (holder.h)? NULL:
	 * never. A claim that finds a live row takes it over (by CAS on its
	 * revision) only when this says so, why in took_over. */
	bool (*dead)(const struct lease_row *row, void *arg, char *why, size_t whylen);
	void *dead_arg;
	char took_over[768];                      /* "" or whose row, and why it was dead */
};

/* Ours: the same holder and the same incarnation. */
bool lease_row_ours(const struct lease *l, const struct lease_row *r);
/* Serialize our row; malloc'd. */
char *lease_row_build(const struct lease *l, size_t *len);

/* What a reading of the key says. */
enum lease_reading {
	LEASE_OURS,      /* our row (its revision adopted) */
	LEASE_GONE,      /* no row: expired or deleted */
	LEASE_TAKEN,     /* another holder's or incarnation's row */
	LEASE_UNKNOWN,   /* the broker did not answer: cannot tell */
};

/* The outcome of a claim. */
enum lease_claim {
	LEASE_CLAIMED,
	LEASE_LIVE_ELSEWHERE, /* a live lease exists: another daemon holds it */
	LEASE_DENIED,         /* the credential may not write the key */
	LEASE_REFUSED,        /* any other refusal, quoted in why */
};

/*
 * The operations, on js of the resident connection. denied(subject) asks
 * whether the broker reported a permissions violation for subject since
 * the call began (publishes it refuses are not answered otherwise).
 */
struct lease_io {
	jsCtx *js;
	bool (*denied)(const char *subject, char *text, size_t len);
};

/* Claim the key (create, or over a delete marker) with l->ready. why: the
 * line to log (the exact WIRE.md §8 texts, "re-acquire" when again). */
enum lease_claim lease_claim(struct lease *l, const struct lease_io *io, bool again, char *why,
			     size_t whylen);
/* Renew by CAS at l->rev (ready as it is): 0, or -1 when in doubt. */
int lease_renew(struct lease *l, const struct lease_io *io, char *why, size_t whylen);
/* Read the key again; on LEASE_OURS l->rev is the broker's. */
enum lease_reading lease_reread(struct lease *l, const struct lease_io *io, struct lease_row *row,
				char *why, size_t whylen);
/*
 * Who holds the live row a claim was refused by, for the refusal's second
 * line: the holder, its incarnation, when the row was written and when it
 * expires unless renewed (the bucket's max age), so an operator can tell a
 * running holder from a crashed one. 0 with out, -1 with why.
 */
int lease_describe_holder(const struct lease *l, const struct lease_io *io, char *out,
			  size_t outlen, char *why, size_t whylen);
/* On exit: re-read, and delete by CAS at the current revision only if
 * ours. 0 when released or not ours, -1 with why. */
int lease_release(struct lease *l, const struct lease_io *io, char *why, size_t whylen);

#endif
