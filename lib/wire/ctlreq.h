/*
 * The control rails' messages (WIRE.md §5): the subjects a request arrives
 * on, the bound reply subject, the request body {op, args?, from}, the
 * arguments each op takes, and the replies {ok, data?, error?}. Pure
 * functions shared by the registry worker (which answers) and the client
 * library (which asks); unit-tested and fuzzed.
 *
 * Every parser takes untrusted bytes and either fills its output or fails
 * with a refusal text that names the field; none crashes or allocates
 * without a bound.
 */
#ifndef COTAL_CTLREQ_H
#define COTAL_CTLREQ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/wire/records.h"

#define CTL_REQUEST_MAX (256 * 1024) /* bytes of a request body we decode */
#define CTL_OP_MAX 64                /* an op name */
#define CTL_REPLY_SUFFIX_MAX 256     /* what may follow "<subject>.reply." */
#define CTL_WHY_MAX (2 * CHANNEL_MAX + 1024) /* a refusal that quotes a channel and a segment */

/* The refusal texts of WIRE.md §5, verbatim. */
#define CTL_ERR_SENDER "sender mismatch - request rejected"
#define CTL_ERR_RECHECKING \
	"delivery: this daemon is not serving this shard (it is re-checking ownership); retry"
#define CTL_ERR_NOT_STARTED "delivery: the daemon has not finished starting; nothing adopted"

/* The three rails. */
enum rail {
	RAIL_CTL = 0,   /* P.ctl.delivery.<o>.<a>        queue "delivery" */
	RAIL_ADMIN,     /* P.ctl.delivery-admin.<o>.<a>  queue "delivery-admin" */
	RAIL_LIVE,      /* P.live.delivery.<o>.<a>       queue "live.delivery" */
	RAIL_COUNT
};
/* "ctl.delivery", "ctl.delivery-admin", "live.delivery": the subject's
 * middle and the queue group's name is rail_queue(). */
const char *rail_kind(enum rail r);
const char *rail_queue(enum rail r);
/* "the delivery control service" / "the delivery admin service" (the
 * unknown-op refusal); NULL for the liveness rail. */
const char *rail_service(enum rail r);

/* The caller a request subject names. */
struct rail_caller {
	enum rail rail;
	char owner[IDENT_MAX + 1];
	char actor[IDENT_MAX + 1];
};

/*
 * Parse a request subject under prefix "cotal.<s>": exactly
 * <prefix>.ctl.delivery.<o>.<a>, <prefix>.ctl.delivery-admin.<o>.<a> or
 * <prefix>.live.delivery.<o>.<a> with identity tokens. A non-principal
 * owner parses (the sender check refuses it). 0, or -1 with why.
 */
int rail_subject_parse(const char *subject, const char *prefix, struct rail_caller *out,
		       char *why, size_t whylen);
/* Build the request subject of a rail for a caller into buf; false when it
 * does not fit. */
bool rail_subject_format(enum rail r, const char *prefix, const char *owner, const char *actor,
			 char *buf, size_t len);

/*
 * Is reply bound to subject: "<subject>.reply.<suffix>" with a suffix of
 * 1..CTL_REPLY_SUFFIX_MAX chars of tokens (no empty token, no wildcard, no
 * white space)? A missing reply (NULL) is not.
 */
bool rail_reply_bound(const char *subject, const char *reply);

/* A decoded request. */
struct ctl_request {
	char op[CTL_OP_MAX + 1];
	json_t *root;          /* the whole body, owned */
	json_t *args;          /* borrowed from root; an empty object when absent or null */
};

enum ctl_verdict {
	CTL_OK = 0,
	CTL_MALFORMED,         /* why names the field: answer {ok:false,error:why} */
	CTL_SENDER_MISMATCH,   /* answer CTL_ERR_SENDER */
};

/*
 * Decode a request body for the caller its subject names. Checks, in this
 * order: a JSON object of at most CTL_REQUEST_MAX bytes with no duplicate
 * keys (else "request: …"); from an object whose id is a string equal to
 * "<o>.<a>" of the subject, with a principal owner (else
 * CTL_SENDER_MISMATCH); op a string of 1..CTL_OP_MAX chars (else "op: …");
 * args absent, null or an object (else "args: must be an object").
 * On CTL_OK free out with ctl_request_free.
 */
enum ctl_verdict ctl_request_parse(const char *data, size_t len, const struct rail_caller *caller,
				   struct ctl_request *out, char *why, size_t whylen);
void ctl_request_free(struct ctl_request *r);

/* "op \"<op>\" not supported on <rail_service(r)>" into buf. */
void ctl_unknown_op(enum rail r, const char *op, char *buf, size_t len);

/*
 * The channel argument of op (args.channel), with WIRE.md §5's refusals:
 *   "<op>: channel must be a non-blank string"  (absent, not a string, blank)
 *   "<op>: \"<ch>\" must be a concrete channel (durable membership is
 *    per-concrete-channel, not wildcard)"       (a '*' or '>' segment)
 *   "<op>: channel \"<ch>\" has an empty segment <n>" /
 *   "<op>: channel \"<ch>\" segment <n> \"<seg>\" is not [A-Za-z0-9_-]+" /
 *   "<op>: channel is longer than 4096 characters"   (the grammar)
 * Segments are numbered from 1. 0 with the channel in out, or -1 with why.
 */
int ctl_arg_channel(const struct ctl_request *r, char *out, size_t outlen, char *why,
		    size_t whylen);

/*
 * A whole-number argument args.<name>: absent (or null) gives def when not
 * required; otherwise a JSON integer, or a real with no fraction, within
 * [min, max]. Refusal: "<op>: <name> must be a whole number from <min> to
 * <max>" (or "<op>: <name> is required" when required and absent).
 */
int ctl_arg_uint(const struct ctl_request *r, const char *name, bool required, uint64_t def,
		 uint64_t min, uint64_t max, uint64_t *out, char *why, size_t whylen);

/*
 * A string argument args.<name> of at most max bytes (no NUL): absent gives
 * *out = NULL when not required. Refusals: "<op>: <name> is required",
 * "<op>: <name> must be a string", "<op>: <name> is longer than <max> bytes".
 * *out points into the request.
 */
int ctl_arg_string(const struct ctl_request *r, const char *name, bool required, size_t max,
		   const char **out, char *why, size_t whylen);

/* args.lifecycleUid: "<op>: lifecycleUid must match ^[a-z0-9]{26,32}$"
 * when it is not a lifecycle UID (or "<op>: lifecycleUid is required"). */
int ctl_arg_uid(const struct ctl_request *r, char *out, size_t outlen, char *why, size_t whylen);

/* "<o>.<a>" with a principal owner into its tokens; 0, or -1. */
int principal_parse(const char *s, char *owner, size_t ownerlen, char *actor, size_t actorlen);

/* Replies, serialized compactly; malloc'd (NULL only when out of memory). */
/* {"ok":true,"data":data}; steals data (NULL: no data member). */
char *ctl_reply_ok(json_t *data, size_t *len);
/* {"ok":false,"error":text}. */
char *ctl_reply_error(const char *text, size_t *len);
/*
 * A reply on either rail must fit the broker's max_payload (seed): when
 * *len exceeds max_payload, reply is freed and replaced by
 * {"ok":false,"error":"reply of <N> bytes exceeds the broker max_payload of
 * <M> bytes"}. Returns the reply to send.
 */
char *ctl_reply_fit(char *reply, size_t *len, int64_t max_payload);

/*
 * A reply as the client reads it: {ok: bool, data?, error?: string,
 * details?}. 0 with *ok, *data (borrowed from *root, may be NULL) and
 * *error (borrowed, may be NULL); -1 with why when it is no reply.
 */
int ctl_reply_parse(const char *data, size_t len, json_t **root, bool *ok, json_t **out_data,
		    const char **error, char *why, size_t whylen);

#endif
