/* The trusted reader's verdict (see decide.h). */
#include "worker-reader/decide.h"

#include <stddef.h>

enum verdict
reader_after_failure(uint64_t delivered)
{
	return delivered >= READER_MAX_DELIVERIES ? V_GIVE_UP : V_RETRY;
}

enum verdict
reader_decide(const struct entry *e, const struct acl_row *acl, const struct member_row *row,
	      uint64_t delivered)
{
	switch (acl->state) {
	case ACL_UNKNOWN:
		/* "a missing row does not prove the owner is gone": retried,
		 * then given up and kept. */
		return reader_after_failure(delivered);
	case ACL_RETIRED:
		/* "An entry addressed to a retired lifecycle is dropped and
		 * removed from the store the first time the reader meets it." */
		return V_RETIRED;
	case ACL_LIVE:
		break;
	}
	if (!acl_covers(acl, e->channel))
		return V_DROP; /* narrowed (including []) or never granted */
	if (e->reason == REASON_DURABLE) {
		/* "A leave is a hard read boundary": the post's sequence must
		 * sit inside the member's current interval. */
		if (row == NULL || !membership_eligible(row, e->seq))
			return V_DROP;
	}
	return V_DELIVER;
}
