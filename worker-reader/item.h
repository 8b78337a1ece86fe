/*
 * worker-reader: one entry of a fetched batch, as the reader decides on it:
 * its delivery metadata, its lifecycle, the entry decoded (in place when the
 * fan-out laid it out, else in full), the dedup key its frame reuses, and
 * what the reader made of it. Runs in the reader worker.
 */
#ifndef COTAL_READER_ITEM_H
#define COTAL_READER_ITEM_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/wire/records.h"
#include "worker-reader/decide.h"

struct item {
	natsMsg *m;
	uint64_t seq, delivered;
	int64_t ts_ns;           /* when INBOX stored it */
	struct lifecycle who;
	char lc[LIFECYCLE_MAX + 1];
	struct entry e;          /* e.msg NULL on the fast path */
	struct entry_view view;  /* the fast path: the message as stored */
	const char *key;         /* the entry's Nats-Msg-Id (fast path), in keybuf */
	char keybuf[DEDUP_KEY_MAX + 1];
	bool parsed;
	bool again;              /* acked before: acked again, no frame (worker/acked.h) */
	bool unheld;             /* its owner's ACL row or member row is not held: read them */
	bool has_member;         /* its member row exists (a retired owner's is removed) */
	struct member_row *member; /* unheld: its member row as held at the first look
				    * (malloc'd; &no_row's copy is none), NULL: read it */
	enum verdict v;
};

/* Made ready for the batch's next message m: only what a message fills is
 * written (an item is kept from batch to batch). */
void item_reset(struct item *it, natsMsg *m);
/* Decode the entry: the fast path when it is laid out as the fan-out writes
 * it and carries its key, else in full. 0, or -1 with why. */
int item_parse(struct item *it, char *why, size_t whylen);
/* One observation of the copy latency, now_ms less the entry's
 * POSTED_AT_HEADER; none without one, or with one that is no time. */
void observe_copy(natsMsg *m, int64_t now_ms);

#endif
