/*
 * Space provisioning (WIRE.md §3): the eleven streams and KV buckets of a
 * space, and each member's per-lifecycle DLV durable. Both calls are
 * idempotent; an existing asset whose config differs is never changed, the
 * call fails naming every differing field instead.
 *
 * The expected configs are exposed so tests and `cotal creds audit` compare
 * against the same table provisioning creates from.
 */
#ifndef COTAL_PROVISION_H
#define COTAL_PROVISION_H

#include <nats/nats.h>
#include <stddef.h>
#include <stdio.h>

#include "lib/wire/tokens.h"

/* Owner and actor tokens are bounded so that dlv_<o>-<a>-<uid> stays within
 * the broker's 255-byte consumer name limit. */
#define PROV_IDENTITY_MAX 100
#define PROV_UID_MAX 32
/* Longest fixed part of a name is "KV_cotal_presence_" (18 bytes). */
#define PROV_NAME_MAX (SPACE_TOKEN_MAX + 32)
/* Longest subject: "cotal.<s>.dlv.<o>.<a>.<uid>" or "$KV.cotal_…_<s>.>". */
#define PROV_SUBJECT_MAX (SPACE_TOKEN_MAX + 2 * PROV_IDENTITY_MAX + PROV_UID_MAX + 64)
#define PROV_STREAM_SUBJECTS_MAX 2

/* The streams of WIRE.md §3, in the order provisioning handles them. */
enum prov_stream_kind {
	PROV_CHAT,
	PROV_INBOX,
	PROV_DLV,
	PROV_EPT_REQ,
	PROV_EPT,
	PROV_KV_CHANNELS,
	PROV_KV_ACL,
	PROV_KV_MEMBERS,
	PROV_KV_PRESENCE,
	PROV_KV_DELIVERY,
	PROV_KV_RECORDS,
	PROV_STREAM_KINDS
};

/* An expected stream config. cfg points into the buffers of the same struct:
 * fill it in place and never copy it by value. */
struct prov_stream {
	jsStreamConfig cfg;
	const char *subjv[PROV_STREAM_SUBJECTS_MAX];
	char name[PROV_NAME_MAX];
	char bucket[PROV_NAME_MAX]; /* KV bucket name, "" for a plain stream */
	char subjects[PROV_STREAM_SUBJECTS_MAX][PROV_SUBJECT_MAX];
	/* allow_msg_schedules wanted too (EPT on a broker that runs them):
	 * outside cfg, which nats.c 3.4.1 cannot express it in. */
	bool schedules;
};

/* An expected consumer config; same in-place rule as struct prov_stream. */
struct prov_consumer {
	jsConsumerConfig cfg;
	char stream[PROV_NAME_MAX];
	char durable[PROV_NAME_MAX];
	char filter[PROV_SUBJECT_MAX];
};

/*
 * Create every stream and KV bucket of WIRE.md §3 for the space (token s =
 * space token, prefix P = "cotal.<s>"). All eleven are looked up first; if
 * any exists with a conflicting config nothing is created and err names the
 * stream and every differing field with have/want values, e.g.
 *   stream INBOX_demo exists with a conflicting config: duplicate window 2m0s
 *   (want 2h0m0s); max messages per subject -1 (want 1000)
 * Otherwise the missing ones are created. A space name within the 256-byte
 * bound whose longest stream name (KV_cotal_channels_<s>) would pass the
 * broker's 255-byte name limit is refused before anything is created.
 * Report lines ("✓ created …", "• exists …", "✗ …") go to report, which may
 * be NULL.
 * Returns 0 on success, -1 on failure with err set.
 */
int space_provision(natsConnection *nc, const char *space_name, FILE *report, char *err,
		    size_t errlen);
/* The same with every stream and bucket on `replicas` servers of a cluster
 * (1 to PROV_REPLICAS_MAX; space_provision: 1). A stream made here is waited
 * for until it has a leader and every replica is current (the placement),
 * at most PROV_PLACE_WAIT_MS. */
#define PROV_REPLICAS_MAX 5
#define PROV_PLACE_WAIT_MS 30000
int space_provision_replicas(natsConnection *nc, const char *space_name, int replicas,
			     FILE *report, char *err, size_t errlen);
/*
 * The space's storage budget (issue 28): every stream and bucket gets its
 * share as max_bytes (provision_max_bytes; docs/launching.md "Provisioning" has the
 * table), on each server that holds a replica. The broker reserves it
 * against its max_file_store when the stream is made, and refuses a stream
 * that does not fit (the error says so and names --storage). A stream that
 * exists with another max_bytes is not refused: the difference is reported
 * and the stream left as it is.
 */
#define PROV_STORAGE_DEFAULT (INT64_C(4) << 30) /* 4 GiB */
#define PROV_STORAGE_MIN (INT64_C(256) << 20)   /* 256 MiB */
#define PROV_STORAGE_MAX (INT64_C(64) << 40)    /* 64 TiB */
/* A bucket's cap whatever the budget: the workers mirror the members,
 * channels and presence buckets in memory and replay them whole
 * (lib/nats/kvmirror.h's KVMIRROR_STAGE_MAX is twice this); the read-ACL
 * bucket has none (its tombstones are not held: lib/wire/aclindex.h). */
#define PROV_KV_BYTES_MAX (INT64_C(128) << 20)
int space_provision_storage(natsConnection *nc, const char *space_name, int replicas,
			    int64_t storage, FILE *report, char *err, size_t errlen);
/* The max_bytes of one stream of a space with that budget (<= 0: the
 * default); -1: none (the read-ACL bucket); 0 for no such stream. */
int64_t provision_max_bytes(enum prov_stream_kind kind, int64_t storage);

/*
 * Create the member's per-lifecycle DLV durable dlv_<o>-<a>-<uid> (durable
 * pull, explicit ack, ack wait 60 s, deliver all, filter P.dlv.<o>.<a>.<uid>).
 * Idempotent; an existing consumer with another config is left untouched and
 * refused naming the difference. Returns 0 on success, -1 with err set.
 */
int provision_member_durable(natsConnection *nc, const char *space_name, const char *owner,
			     const char *actor, const char *uid, char *err, size_t errlen);

/* Fill out with the expected config of one stream of the space, its
 * max_bytes from storage (<= 0: PROV_STORAGE_DEFAULT).
 * Returns 0, or -1 with err set for a bad space name. */
int provision_stream_expected(enum prov_stream_kind kind, const char *space_name,
			      int64_t storage, struct prov_stream *out, char *err, size_t errlen);

/* Fill out with the expected config of a member's DLV durable.
 * Returns 0, or -1 with err naming the bad field. */
int provision_member_durable_expected(const char *space_name, const char *owner,
				      const char *actor, const char *uid,
				      struct prov_consumer *out, char *err, size_t errlen);

/* Compare the fields provisioning sets (subjects as a set, retention,
 * storage, discard, duplicate window, max messages per subject, max age,
 * allow direct, allow rollup, deny delete, deny purge, replicas). Writes
 * "<field> <have> (want <want>)" items joined by "; " to out (truncated to
 * outlen) and returns the number of differing fields. max_bytes is not one:
 * see provision_stream_notes. */
int provision_stream_diff(const jsStreamConfig *have, const jsStreamConfig *want, char *out,
			  size_t outlen);
/* What differs but is no conflict (max_bytes), worded the same way: the
 * number of such fields. */
int provision_stream_notes(const jsStreamConfig *have, const jsStreamConfig *want, char *out,
			   size_t outlen);

/* Same for a consumer: pull (no deliver subject), deliver policy, ack
 * policy, ack wait, filter subject. */
int provision_consumer_diff(const jsConsumerConfig *have, const jsConsumerConfig *want,
			    char *out, size_t outlen);

/*
 * Message schedules (cli/provision_sched.c). Does the broker run them
 * (nats-server 2.12 and later)? 1 yes, 0 no, -1 with err.
 */
int provision_broker_schedules(natsConnection *nc, char *err, size_t errlen);
/* Have stream name allow message schedules (and the roll-ups the broker
 * requires with them), keeping the rest of its config: only ever turns the
 * setting on, which the broker allows on a live stream. 1 turned on, 0 on
 * already, -1 with err. */
int provision_allow_schedules(natsConnection *nc, const char *name, char *err, size_t errlen);
/* Lift an existing stream's max_bytes (the read-ACL bucket's: it keeps a row
 * per lifecycle forever). 1 lifted (*was: the cap it had), 0 it had none,
 * -1 with err. */
int provision_lift_cap(natsConnection *nc, const char *name, int64_t *was, char *err,
		       size_t errlen);

#endif
