/*
 * The trusted reader's verdict on one entry (seed, "Trusted reader" and
 * "Why a trusted reader"): pure, so every branch is unit-tested.
 */
#ifndef COTAL_READER_DECIDE_H
#define COTAL_READER_DECIDE_H

#include <stdint.h>

#include "lib/wire/records.h"

#define READER_MAX_DELIVERIES 10  /* "given up after ten redeliveries" */
#define READER_RETRY_MS 2000      /* nak delay of a retried entry */

enum verdict {
	V_DELIVER,   /* authorized: hand the frame to the member's dlv_ durable */
	V_DROP,      /* not authorized now: ack, surface nothing */
	V_RETRY,     /* unknown owner: nak, look again later */
	V_GIVE_UP,   /* unknown owner, out of deliveries: terminate, keep it */
	V_RETIRED,   /* retired lifecycle: delete from the store, then ack */
};

/*
 * e: the entry; acl: the lifecycle's read-ACL row as of now; row: its
 * membership row for e->channel (NULL when there is none); delivered: how
 * often the entry has been delivered, this time included.
 */
enum verdict reader_decide(const struct entry *e, const struct acl_row *acl,
			   const struct member_row *row, uint64_t delivered);

/* After a failed effect (publish, delete): retry, or give up at the limit. */
enum verdict reader_after_failure(uint64_t delivered);

#endif
