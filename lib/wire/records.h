/*
 * The subjects and records of the data path (WIRE.md §1, §2, §4): parsing
 * what the network hands us, bounded and validated, and building what we
 * publish. Pure functions, shared by the fan-out writer, the trusted reader
 * and the registry; unit-tested and fuzzed. lib/wire/records.c holds the
 * subjects, posts, channel configs, ACL, membership and presence rows;
 * lib/wire/entries.c the entries, the frames and their dedup key.
 *
 * Every parser takes untrusted bytes and either fills its output or fails
 * with a reason naming the field; none of them crashes or allocates without
 * a bound.
 */
#ifndef COTAL_RECORDS_H
#define COTAL_RECORDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHANNEL_MAX 4096      /* WIRE.md §1 */
#define IDENT_MAX 64          /* owner or actor token */
#define UID_MAX 32            /* lifecycle UID */
#define PRINCIPAL_MAX (2 * IDENT_MAX + 2)            /* <o>.<a> */
#define LIFECYCLE_MAX (PRINCIPAL_MAX + UID_MAX + 2)  /* <o>.<a>.<uid> */
#define MEMBER_KEY_MAX (CHANNEL_MAX + 1 + LIFECYCLE_MAX)
#define MSG_ID_MAX 1024       /* a longer id makes no dedup key: refused */
#define DEDUP_KEY_MAX (MSG_ID_MAX + LIFECYCLE_MAX + 24)
#define ACL_PATTERNS_MAX 256  /* allowSubscribe entries we honour */
#define MENTIONS_MAX 32       /* @mentions resolved per post */
#define RECORD_MAX (1024 * 1024) /* a KV value or payload we decode */
#define WHY_MAX 256

/* A lifecycle: <o>.<a>.<uid>. */
struct lifecycle {
	char owner[IDENT_MAX + 1];
	char actor[IDENT_MAX + 1];
	char uid[UID_MAX + 1];
};

/* P.chat.<o>.<a>.<channel…>, with the channel copied out. */
struct chat_subject {
	char owner[IDENT_MAX + 1];
	char actor[IDENT_MAX + 1];
	char channel[CHANNEL_MAX + 1];
};

/*
 * Parse a channel post's subject under prefix "cotal.<s>". Fails when the
 * subject is not of the chat shape, a token is not an identity token, or
 * the channel is not concrete. A non-principal owner parses (the caller
 * decides what that means).
 */
int chat_subject_parse(const char *subject, const char *prefix, struct chat_subject *out,
		       char *why, size_t whylen);
/* P.dinbox.<o>.<a>.<uid>: exactly 6 tokens and a valid uid. */
int dinbox_subject_parse(const char *subject, const char *prefix, struct lifecycle *out,
			 char *why, size_t whylen);

/* "<o>.<a>" and "<o>.<a>.<uid>" into buf; false when too small. */
bool principal_format(const char *owner, const char *actor, char *buf, size_t len);
bool lifecycle_format(const struct lifecycle *l, char *buf, size_t len);
/* "<o>.<a>.<uid>" back into its parts (identity tokens, valid uid). */
int lifecycle_parse(const char *s, struct lifecycle *out);

/*
 * A channel post (CotalMessage) decoded and checked against its subject:
 * id a string (may be ""), ts a number, space a string, from {id, name}
 * with from.id equal to the subject's sender and a principal owner, parts
 * an array. On success *msg is the normalized message (channel set from
 * the subject, to/toService stripped; unknown fields kept), owned by the
 * caller. why names the failing field.
 */
enum post_verdict {
	POST_OK = 0,
	POST_UNDECODABLE,   /* not JSON, not an object, a required field missing or mistyped */
	POST_INAUTHENTIC,   /* from.id is not the subject's sender, or not a principal */
};
enum post_verdict post_decode(const char *data, size_t len, const struct chat_subject *cs,
			      json_t **msg, char *why, size_t whylen);

/* The post's id (never NULL once decoded) and its @mentions as the post
 * spells them (compared case-insensitively), at most MENTIONS_MAX,
 * non-strings skipped. */
const char *post_id(const json_t *msg);
size_t post_mentions(const json_t *msg, const char **names, size_t max);

/* Delivery class of a channel (WIRE.md §4): the channel's row, else the
 * space defaults, else durable. A row that does not decode counts as absent. */
enum delivery_class { CLASS_DURABLE = 0, CLASS_LIVE };
enum delivery_class channel_class(const char *row, size_t rowlen, const char *defaults,
				  size_t defaultslen);

/* A read-ACL row (WIRE.md §4). */
enum acl_state {
	ACL_UNKNOWN = 0, /* absent, deleted, undecodable, no allowSubscribe array */
	ACL_LIVE,
	ACL_RETIRED,     /* tombstone: "retired": true */
};
struct acl_row {
	enum acl_state state;
	size_t npatterns;
	char **patterns; /* valid channel patterns only */
};
/* Decode a row (NULL data: absent). Never fails: what does not decode is
 * ACL_UNKNOWN. Free with acl_row_free. */
void acl_row_parse(const char *data, size_t len, struct acl_row *out);
void acl_row_free(struct acl_row *r);
/* A deep copy of from into to: 0, or -1 when out of memory (to empty). */
int acl_row_copy(const struct acl_row *from, struct acl_row *to);
/* Does a live row's allowSubscribe cover the concrete channel? */
bool acl_covers(const struct acl_row *r, const char *channel);
/* NATS subject matching of a channel against one pattern. */
bool channel_pattern_match(const char *pattern, const char *channel);

/* A membership row (WIRE.md §4), key <channel>/<o>.<a>.<uid>. */
struct member_row {
	struct lifecycle who;
	uint64_t join_cursor;
	bool has_leave;
	uint64_t leave_cursor;
	uint64_t generation;
	bool active;      /* state "durable-active" */
	bool activated;   /* the join's catch-up finished (gates the join report only) */
	/* Last: an index keeps a row in member_row_size() bytes, the channel
	 * as long as it is (issue 18: 4 KB per row before). Such a row is read
	 * through its pointer, never copied whole. */
	char channel[CHANNEL_MAX + 1];
};
/* The bytes a row needs up to its channel's end. */
size_t member_row_size(const struct member_row *r);
/* A copy of r in member_row_size(r) bytes (malloc'd), or NULL. */
struct member_row *member_row_compact(const struct member_row *r);
/* Split a member key; 0 on success. */
int member_key_parse(const char *key, char *channel, size_t chlen, struct lifecycle *who);
bool member_key_format(const char *channel, const struct lifecycle *who, char *buf, size_t len);
/* Decode a row and check it against its key (a row whose channel, owner or
 * lifecycleUid disagree with the key is refused). */
int member_row_parse(const char *key, const char *data, size_t len, struct member_row *out,
		     char *why, size_t whylen);
/* Serialize a row {channel, owner, lifecycleUid, state, joinCursor,
 * leaveCursor?, generation, activated, writerIdentity, updatedAt};
 * malloc'd, or NULL. */
/*
 * A value the members bucket's watch delivered for key (NULL: the row was
 * deleted): parsed into out, true. false for a deleted row and for one that
 * does not decode, which routes and authorizes nothing; that one is logged,
 * naming the key, unless quiet.
 */
bool member_row_watched(const char *key, const char *value, size_t len,
			struct member_row *out, bool quiet);
char *member_row_build(const struct member_row *r, const char *writer, int64_t updated_at,
		       size_t *len);
/* joinCursor < seq and (no leaveCursor or seq <= leaveCursor). */
bool membership_eligible(const struct member_row *r, uint64_t seq);

/* A presence row whose card.id matches its key: card.name (lowercased
 * into name) and the row's lifecycleUid when present. */
int presence_row_parse(const char *key, const char *data, size_t len, char *name, size_t namelen,
		       char *uid, size_t uidlen);

/* The lease of a space's shard, key lease.0 of cotal_delivery_<s> (WIRE.md
 * §4): 0 with its fields, -1 when it is no lease row. */
#define LEASE_INCARNATION_MAX 48
#define LEASE_ROW_MAX 4096
struct lease_row {
	char holder[PRINCIPAL_MAX + 1];
	char incarnation[LEASE_INCARNATION_MAX];
	int64_t since;
	bool ready;
};
int lease_row_parse(const char *data, size_t len, struct lease_row *out);

/*
 * Dedup key <msg.id>:<o>.<a>:<uid>:<generation>. Returns false (no key)
 * when the id is empty or the key does not fit: an id-less post is copied
 * without one (seed).
 */
bool dedup_key(const char *id, const struct lifecycle *to, uint64_t generation, char *buf,
	       size_t len);

/* Fan-out entry (INBOX body). */
enum entry_reason { REASON_DURABLE = 0, REASON_MENTION };
/*
 * Everything of an entry but its generation: `{"msg":…,"channel":…,"seq":N,
 * "reason":…,"generation":`; the fan-out serializes a post once and appends
 * each member's generation and the closing brace. malloc'd, or NULL.
 */
char *entry_prefix(const json_t *msg, const char *channel, uint64_t seq,
		   enum entry_reason reason, size_t *len);
/* Serialize {msg, channel, seq, reason, generation}; malloc'd, or NULL. */
char *entry_build(const json_t *msg, const char *channel, uint64_t seq, enum entry_reason reason,
		  uint64_t generation, size_t *len);
struct entry {
	json_t *msg;      /* owned */
	char channel[CHANNEL_MAX + 1];
	uint64_t seq;
	enum entry_reason reason;
	uint64_t generation;
};
int entry_parse(const char *data, size_t len, struct entry *out, char *why, size_t whylen);
void entry_free(struct entry *e);

/*
 * The reader's fast path: an entry as the fan-out writes it, {"msg":{…},
 * "channel":…,…}, whose message ends with its "channel" equal to the
 * entry's, is taken apart without decoding the message (msg points into
 * data). -1 when the entry is laid out otherwise or does not check: the
 * caller then decodes it with entry_parse.
 */
struct entry_view {
	const char *msg;
	size_t msglen;
	char channel[CHANNEL_MAX + 1];
	uint64_t seq;
	enum entry_reason reason;
	uint64_t generation;
};
int entry_view(const char *data, size_t len, struct entry_view *v);
/* The frame around an already serialized message (its channel checked). */
char *frame_build_raw(const char *msg, size_t msglen, const char *channel, size_t *len);

/* Handoff frame body {version:1, channel, msg} with msg.channel = channel;
 * malloc'd, or NULL. */
char *frame_build(json_t *msg, const char *channel, size_t *len);
#define FRAME_HEADER "Cotal-Delivery-Frame"
/* On a fan-out entry: when CHAT stored its post, Unix nanoseconds, in
 * decimal. This daemon's own (WIRE.md names none): the entry's body is
 * WIRE.md's, and only its reader reads the header, for the copy latency
 * (post to DLV). An entry without it is delivered the same. */
#define POSTED_AT_HEADER "Cotal-Posted-At"

#endif
