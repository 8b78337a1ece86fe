/* The one table of grants (see needs.h). */
#include "lib/creds/needs.h"

#include <stdio.h>
#include <string.h>

#define D NEED_DELIVERY
#define PUB PERMS_PUB
#define SUB PERMS_SUB

#define F_REPLIES "the replies to its own requests"
#define F_LEASE "the lease"
#define F_FANOUT "the fan-out writer"
#define F_READER "the trusted reader"
#define F_RAILS "the rails"
#define F_CATCHUP "join catch-up and history"
#define F_REGISTER NEED_F_REGISTER
#define F_READER_MEMORY NEED_F_READER_MEMORY
#define F_TIMER "the timer writer"
#define F_OBSERVER "eviction (the $SYS observer)"
#define F_EVICTOR "eviction (the $SYS evictor)"

/* A KV bucket read through its mirror: bind, the barrier's reads, and the
 * watch's named ordered consumer (lib/nats/kvwatch.h). */
#define KV_WATCH(f, b) \
	{ D, f, false, PUB, "$JS.API.STREAM.INFO.KV_" b "_<s>" }, \
	{ D, f, false, PUB, "$JS.API.CONSUMER.CREATE.KV_" b "_<s>.*.$KV." b "_<s>.>" }, \
	{ D, f, false, PUB, "$JS.API.CONSUMER.DELETE.KV_" b "_<s>.*" }
/* The answers to a watch's flow control requests (issue 39: a bucket
 * larger than what the broker pushes at once loads without being dropped
 * as a slow consumer's). Optional: without them the watches run as before. */
#define KV_WATCH_FC(b) { D, NEED_F_WATCH_FC, true, PUB, "$JS.FC.KV_" b "_<s>.>" }

/* A durable pull consumer the daemon creates (named form, with its
 * filter), reads, pulls from and acks. */
#define DURABLE(f, stream, name) \
	{ D, f, false, PUB, "$JS.API.CONSUMER.INFO." stream "." name }, \
	{ D, f, false, PUB, "$JS.API.CONSUMER.CREATE." stream "." name ".>" }, \
	{ D, f, false, PUB, "$JS.API.CONSUMER.MSG.NEXT." stream "." name }, \
	{ D, f, false, PUB, "$JS.ACK." stream "." name ".>" }

static const struct need table[] = {
	{ D, F_REPLIES, false, SUB, "<inbox>.>" },

	{ D, F_LEASE, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_delivery_<s>" },
	{ D, F_LEASE, false, PUB, "$KV.cotal_delivery_<s>.lease.*" },
	KV_WATCH(F_LEASE, "cotal_delivery"),

	KV_WATCH_FC("cotal_delivery"),
	KV_WATCH_FC("cotal_members"),
	KV_WATCH_FC("cotal_channels"),
	KV_WATCH_FC("cotal_presence"),
	KV_WATCH_FC("cotal_acl"),

	DURABLE(F_FANOUT, "CHAT_<s>", "fanout"),
	{ D, F_FANOUT, false, PUB, "$JS.API.STREAM.INFO.INBOX_<s>" },
	{ D, F_FANOUT, false, PUB, "$JS.API.CONSUMER.INFO.INBOX_<s>.reader" },
	{ D, F_FANOUT, false, PUB, "cotal.<s>.dinbox.*.*.*" },
	KV_WATCH(F_FANOUT, "cotal_members"),
	KV_WATCH(F_FANOUT, "cotal_channels"),
	KV_WATCH(F_FANOUT, "cotal_presence"),
	KV_WATCH(F_FANOUT, "cotal_acl"),

	DURABLE(F_READER, "INBOX_<s>", "reader"),
	{ D, F_READER, false, PUB, "cotal.<s>.dlv.*.*.*" },
	/* An entry, and a member row, of a retired lifecycle are removed. */
	{ D, F_READER, false, PUB, "$JS.API.STREAM.MSG.DELETE.INBOX_<s>" },
	{ D, F_READER, false, PUB, "$KV.cotal_members_<s>.>" },
	/* An owner whose ACL row the index does not hold: its row read
	 * exactly (the index loads nothing at start: lib/wire/aclindex.h). */
	{ D, F_READER, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_acl_<s>" },
	/* Its member rows likewise: read when met, held (lib/nats/kvheld.h). */
	{ D, F_READER, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_members_<s>" },
	KV_WATCH(F_READER, "cotal_members"),
	KV_WATCH(F_READER, "cotal_acl"),
	/* An entry handed over again after its ack is acked without a second
	 * frame while DLV still reaches the frames' sequences (worker/acked.h). */
	{ D, F_READER_MEMORY, true, PUB, "$JS.API.STREAM.INFO.DLV_<s>" },

	{ D, F_RAILS, false, SUB, "cotal.<s>.ctl.delivery.*.*" },
	{ D, F_RAILS, false, SUB, "cotal.<s>.ctl.delivery-admin.*.*" },
	{ D, F_RAILS, false, SUB, "cotal.<s>.live.delivery.*.*" },
	{ D, F_RAILS, false, PUB, "cotal.<s>.ctl.delivery.*.*.reply.>" },
	{ D, F_RAILS, false, PUB, "cotal.<s>.ctl.delivery-admin.*.*.reply.>" },
	{ D, F_RAILS, false, PUB, "cotal.<s>.live.delivery.*.*.reply.>" },
	/* Join, leave, activation and inventories: the members rows, read
	 * again and written by compare-and-set, and the ACL rows. */
	{ D, F_RAILS, false, PUB, "$KV.cotal_members_<s>.>" },
	{ D, F_RAILS, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_members_<s>" },
	{ D, F_RAILS, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_acl_<s>" },
	{ D, F_RAILS, false, PUB, "$JS.API.STREAM.INFO.CHAT_<s>" },
	{ D, F_RAILS, false, PUB, "$JS.API.STREAM.INFO.INBOX_<s>" },
	{ D, F_RAILS, false, PUB, "$JS.API.CONSUMER.INFO.CHAT_<s>.fanout" },
	{ D, F_RAILS, false, PUB, "$JS.API.CONSUMER.INFO.INBOX_<s>.reader" },
	KV_WATCH(F_RAILS, "cotal_members"),
	KV_WATCH(F_RAILS, "cotal_acl"),

	/* cu_<o>-<a>-<uid>_<gen>: permissions match whole tokens, so the
	 * name is a wildcard; the filter holds it to one channel's posts. */
	{ D, F_CATCHUP, false, PUB, "$JS.API.CONSUMER.CREATE.CHAT_<s>.*.cotal.<s>.chat.*.*.>" },
	{ D, F_CATCHUP, false, PUB, "$JS.API.CONSUMER.MSG.NEXT.CHAT_<s>.*" },
	{ D, F_CATCHUP, false, PUB, "$JS.API.CONSUMER.DELETE.CHAT_<s>.*" },
	{ D, F_CATCHUP, false, PUB, "cotal.<s>.dinbox.*.*.*" },

	{ D, F_REGISTER, true, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_channels_<s>" },
	{ D, F_REGISTER, true, PUB, "$KV.cotal_channels_<s>.>" },

	{ D, F_TIMER, false, PUB, "$JS.API.INFO" },
	DURABLE(F_TIMER, "EPT_REQ_<s>", "timerw_<s>"),
	{ D, F_TIMER, false, PUB, "$JS.API.STREAM.INFO.EPT_<s>" },
	{ D, F_TIMER, false, PUB, "$JS.API.STREAM.MSG.GET.EPT_<s>" },
	{ D, F_TIMER, false, PUB, "$JS.API.STREAM.MSG.GET.KV_cotal_records_<s>" },
	{ D, F_TIMER, false, PUB, "cotal.<s>.ept.*.*.*.*.armed" },
	{ D, F_TIMER, false, PUB, "cotal.<s>.ept.*.*.*.*.fire" },

	/* WIRE.md §7: the observer is required (the start-up admission reads
	 * CONNZ with it); a missing evictor only disables eviction. */
	{ NEED_SYS_OBSERVER, F_OBSERVER, false, SUB, "<inbox>.>" },
	{ NEED_SYS_OBSERVER, F_OBSERVER, false, PUB, "$SYS.REQ.ACCOUNT.<account>.CONNZ" },
	{ NEED_SYS_EVICTOR, F_EVICTOR, true, SUB, "<inbox>.>" },
	{ NEED_SYS_EVICTOR, F_EVICTOR, true, PUB, "$SYS.REQ.SERVER.*.KICK" },
};

/* Grants of delivery-grants.json's $SYS users that no feature uses, taken
 * as within the role: the observer's own account's connect and disconnect
 * events, which tell no more than its CONNZ answers. */
static const struct need tolerated[] = {
	{ NEED_SYS_OBSERVER, "the reference observer's grants", true, SUB,
	  "$SYS.ACCOUNT.<account>.CONNECT" },
	{ NEED_SYS_OBSERVER, "the reference observer's grants", true, SUB,
	  "$SYS.ACCOUNT.<account>.DISCONNECT" },
};

const struct need *
needs_tolerated(size_t *n)
{
	*n = sizeof(tolerated) / sizeof(tolerated[0]);
	return tolerated;
}

const struct need *
needs_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

const char *
need_cred_name(enum need_cred c)
{
	switch (c) {
	case NEED_DELIVERY:
		return "delivery";
	case NEED_SYS_OBSERVER:
		return "sys-observer";
	case NEED_SYS_EVICTOR:
		return "sys-evictor";
	}
	return "?";
}

int
subject_fill(const char *text, const char *const *names, const char *const *values, size_t n,
	     char *out, size_t outlen)
{
	size_t o = 0;

	while (*text != '\0') {
		size_t k;
		for (k = 0; k < n; k++)
			if (strncmp(text, names[k], strlen(names[k])) == 0)
				break;
		const char *from = k < n ? values[k] : text;
		size_t len = k < n ? (from != NULL ? strlen(from) : 0) : 1;
		if ((k < n && from == NULL) || o + len >= outlen)
			return -1;
		memcpy(out + o, from, len);
		o += len;
		text += k < n ? strlen(names[k]) : 1;
	}
	if (outlen == 0)
		return -1;
	out[o] = '\0';
	return 0;
}

int
need_subject(const struct need *nd, const char *token, const char *inbox, const char *account,
	     char *out, size_t outlen)
{
	static const char *const names[] = { "<s>", "<inbox>", "<account>" };
	const char *const values[] = { token, inbox, account };

	return subject_fill(nd->pattern, names, values, 3, out, outlen);
}
