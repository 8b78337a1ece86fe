/*
 * A KV bucket's watch as a named ordered consumer on the bucket's known
 * stream (KV_<bucket>): created with the named form
 *   $JS.API.CONSUMER.CREATE.KV_<bucket>.<name>.$KV.<bucket>.>
 * and delivered, last value per key first, to a subject under the
 * credential's own reply inbox. No stream look-up by subject
 * ($JS.API.STREAM.NAMES) and no unnamed create: the grants of every Cotal
 * toolchain cover exactly this (delivery-grants.json).
 *
 * Ordered: a gap in the consumer's sequence, a heartbeat that names a
 * later message, missing heartbeats (after the connection failed over to
 * another server, the first one missed: the consumer, one replica, may
 * have been on the lost server) or a deleted consumer end the watch with
 * KVW_LOST; the owner starts a new one (the whole bucket again).
 * Not thread-safe except kvwatch_stop(), which wakes a blocked next.
 */
#ifndef COTAL_KVWATCH_H
#define COTAL_KVWATCH_H

#include <nats/nats.h>
#include <stddef.h>
#include <stdint.h>

#define KVWATCH_HEARTBEAT_MS 2000
#define KVWATCH_SILENT_MS (3 * KVWATCH_HEARTBEAT_MS) /* then the watch is lost */
/* The writer a row names, in a header of the KV message: the value a
 * client reads is the record alone, byte for byte (kvcas_write's origin). */
#define KVW_ORIGIN_HEADER "Cotal-Created-By"

struct kvwatch;

/* Whether the watches started from now on ask for flow control (the
 * credential may answer it: $JS.FC.<stream>.>); on by default. */
void kvwatch_flow_control(bool on);

struct kvw_entry {
	const char *key;     /* valid until the next call */
	const char *value;   /* NULL: deleted or purged */
	size_t len;
	uint64_t revision;   /* the stream sequence */
	int64_t created_ms;  /* when the broker stored it */
	const char *origin;  /* KVW_ORIGIN_HEADER's value, NULL: none (valid as key) */
};

enum kvw_event {
	KVW_TIMEOUT,  /* nothing within the wait */
	KVW_ENTRY,    /* *e holds an entry */
	KVW_LOADED,   /* the bucket's state at creation is all delivered */
	KVW_LOST,     /* the watch is over: err says why */
};

/* Create the consumer and its subscription. 0, or -1 with err holding the
 * broker's words (a permission violation names the subject). */
int kvwatch_start(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
		  const char *bucket, char *err, size_t errlen);
#define KVWATCH_KEYS_MAX 256 /* a pattern of keys a watch may take */

/* The same for the keys matching a pattern of the bucket's keys ("<o>.<a>.*":
 * one alias's rows): the watch delivers only those. */
int kvwatch_start_keys(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
		       const char *bucket, const char *keys, char *err, size_t errlen);
/* A tail of the keys matching keys (">": all): every write from stream
 * sequence from on, in order, and nothing of the state before it (from 0:
 * kvwatch_start_keys). KVW_LOADED comes once the writes made before the
 * watch's creation are delivered. */
int kvwatch_start_at(struct kvwatch **out, natsConnection *nc, const char *inbox_prefix,
		     const char *bucket, const char *keys, uint64_t from, char *err,
		     size_t errlen);
/* The entries the watch had to deliver at its creation. */
uint64_t kvwatch_pending(const struct kvwatch *w);
enum kvw_event kvwatch_next(struct kvwatch *w, int timeout_ms, struct kvw_entry *e, char *err,
			    size_t errlen);
/* The next entry of a watch read to its end by until_ms (mono_ms):
 * KVW_ENTRY, KVW_LOADED once everything is in, or KVW_LOST with err (the
 * watch ended, or it was not all in by then). */
enum kvw_event kvwatch_next_by(struct kvwatch *w, int64_t until_ms, struct kvw_entry *e,
			       char *err, size_t errlen);
/* Wake and end a kvwatch_next in another thread (it returns KVW_LOST). */
void kvwatch_stop(struct kvwatch *w);
/* Delete the consumer (best effort) and free. */
void kvwatch_destroy(struct kvwatch *w);

#endif
