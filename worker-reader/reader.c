/*
 * worker-reader: the trusted reader (seed, "The three pieces").
 *
 * Pulls each pending entry from INBOX_<s> through the `reader` durable,
 * re-checks it against the member's read ACL and membership interval as
 * they are now, and hands an authorized copy to the member's own dlv_
 * durable on DLV_<s> as a handoff frame. An entry is acked only after its
 * frame got its PubAck, so a crash in between redelivers it; one handed
 * over again after its ack is acked again without a second frame
 * (worker/acked.h).
 *
 * May: read INBOX through `reader`, delete INBOX messages by sequence, read
 * the acl and members buckets, delete a retired lifecycle's member rows,
 * read DLV's stream info (an optional grant: the check of worker/acked.h),
 * publish P.dlv.*.*.*.
 */
#include "worker-reader/reader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/wire/aclindex.h"
#include "lib/clock.h"
#include "lib/nats/kvheld.h"
#include "lib/nats/kvmirror.h"
#include "lib/nats/kvwatch.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/pubbatch.h"
#include "lib/nats/pull.h"
#include "lib/nats/rawhdr.h"
#include "worker/acked.h"
#include "worker/pullloop.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"
#include "lib/wire/tokens.h"
#include "worker/worker.h"
#include "worker-reader/decide.h"
#include "worker-reader/item.h"

#define READER_ACK_WAIT_S 60
#define READER_MAX_ACK_PENDING 1000   /* WIRE.md §3 */
/* A quarter of it: two batches are in flight at once (reader_batch), and a
 * reader that dies strands both, and its next request's messages (at most
 * PULL_REQUEST_MAX, lib/nats/pull.h), until the ack wait runs out; its
 * successor keeps the rest to go on with. */
#define READER_BATCH (READER_MAX_ACK_PENDING / 4)
#define READER_MEMBERS_HELD 262144   /* member rows held at once (two generations) */
#define READER_LOAD_MIN 32           /* a batch's keys of one channel and owner read by one watch */
#define BAD_LOG_EVERY_MS 10000

/* Counters (ipc.c names them). */
enum { C_ENTRIES, C_DELIVERED, C_DENIED, C_GAVEUP, C_REMOVED, C_RETRIED, C_BATCHES, C_REPLAYED };

/* A fetched batch, from its fetch to its acks (reader_batch). */
struct batch {
	natsMsgList list;       /* its messages, kept until they are acked */
	struct item *items;     /* READER_BATCH of them, kept (item_reset) */
	struct pubbatch pub;    /* its frames and their PubAcks */
	uint64_t ticket;        /* the fence's, at its fetch */
	uint64_t acked_epoch;   /* the acked memory that marked it (acked_still) */
	bool held;              /* frames published, acks to come (batch_finish) */
};

struct reader {
	char prefix[SPACE_TOKEN_MAX + 8];   /* cotal.<s> */
	char stream[SPACE_TOKEN_MAX + 8];   /* INBOX_<s> */
	struct batch batch[2];  /* one decided while the other's frames are stored */
	int turn;               /* the next fetch's */
	jsCtx *js;              /* the first batch's context: every other JetStream call */
	struct puller pull;
	struct aclindex acl;
	struct kvheld members;  /* member key -> struct member_row, or the key's absence */
	struct acked acked;     /* entries acked or terminated, by INBOX sequence */
	char dlv[SPACE_TOKEN_MAX + 8];      /* DLV_<s> */
	char bound[SPACE_TOKEN_MAX + 32];
};

static struct reader R;

/* ---- member rows, held as met (lib/nats/kvheld.h) ---- */

/* A key with no row (never written, deleted): held too, so that an entry of
 * a lifecycle that is not a member is not read again at every batch. */
static struct member_row no_row;

static void *
member_decode(const char *key, const char *value, size_t len)
{
	struct member_row parsed;
	struct member_row *row;

	if (value == NULL)
		return &no_row;
	/* A row that does not decode authorizes nothing: read again when met. */
	if (!member_row_watched(key, value, len, &parsed, true))
		return NULL;
	if ((row = member_row_compact(&parsed)) == NULL)
		fatalx("out of memory");
	return row;
}

static void
member_free(void *obj)
{
	if (obj != &no_row)
		free(obj);
}

/* ---- effects ---- */

static void
log_bad_entry(uint64_t seq, const char *why)
{
	static int64_t last;
	static uint64_t suppressed;

	if (last != 0 && mono_ms() - last < BAD_LOG_EVERY_MS) {
		suppressed++;
		return;
	}
	log_warnx("dropped entry %" PRIu64 ", not a fan-out entry: %s (%" PRIu64
	    " more since the last line)", seq, why, suppressed);
	last = mono_ms();
	suppressed = 0;
}

/* Frames that got no answer, retried: one line per BAD_LOG_EVERY_MS. */
static void
log_unanswered(int n, const char *why)
{
	static int64_t last;
	static uint64_t since;

	since += (uint64_t)n;
	if (last != 0 && mono_ms() - last < BAD_LOG_EVERY_MS)
		return;
	log_warnx("%" PRIu64 " frames not stored yet, their entries retried in %d ms: %s", since,
	    READER_RETRY_MS, why);
	last = mono_ms();
	since = 0;
}

/* Retry later, or give up at the limit (the entry stays in the store). */
static void
retry_or_give_up(natsMsg *m, uint64_t seq, int64_t ts_ns, uint64_t delivered, const char *lc,
		 const char *why)
{
	if (reader_after_failure(delivered) == V_GIVE_UP) {
		pull_term(&R.pull, m);
		acked_put(&R.acked, seq, ts_ns);
		worker_count(C_GAVEUP, 1);
		log_warnx("gave up on entry %" PRIu64 " for %s after %" PRIu64
		    " deliveries (kept): %s", seq, lc, delivered, why);
		return;
	}
	pull_nak(&R.pull, m, READER_RETRY_MS);
	worker_count(C_RETRIED, 1);
}

/*
 * A retired lifecycle's entry: delete it from INBOX by sequence, ack only
 * once the delete succeeded (an entry the stream no longer holds counts as
 * removed), and drop the lifecycle's member row for the channel, best
 * effort. A worker that stops serving meanwhile neither acks nor gives up.
 */
static void
remove_retired(natsMsg *m, uint64_t seq, int64_t ts_ns, uint64_t delivered,
	       const struct entry *e, const struct lifecycle *who, const char *lc,
	       bool has_row, uint64_t ticket)
{
	char key[MEMBER_KEY_MAX + 1], why[512], txt[1024];
	jsErrCode jerr = 0;
	natsStatus s;

	s = js_DeleteMsg(R.js, R.stream, seq, NULL, &jerr);
	if (s != NATS_OK && jerr != JSNoMessageFoundErr) {
		conn_strerror(s, why, sizeof(why));
		snprintf(txt, sizeof(txt), "delete from %s failed: %s", R.stream, why);
		if (!fence_begin(&W.fence, ticket))
			return;
		retry_or_give_up(m, seq, ts_ns, delivered, lc, txt);
		fence_done(&W.fence);
		return;
	}
	has_row = has_row && e->reason == REASON_DURABLE &&
	    member_key_format(e->channel, who, key, sizeof(key));
	if (!fence_begin(&W.fence, ticket))
		return;
	pull_ack(&R.pull, m);
	acked_put(&R.acked, seq, ts_ns);
	worker_count(C_REMOVED, 1);
	log_warnx("removed entry %" PRIu64 " of retired lifecycle %s", seq, lc);
	if (has_row) {
		/* Left by a daemon that died between writing the row and its
		 * post-write ACL read; until it goes every post is copied here. */
		s = kvStore_Delete(R.members.tail.kv, key);
		if (s != NATS_OK) {
			conn_strerror(s, why, sizeof(why));
			log_warnx("could not remove member row %s of retired lifecycle %s: %s "
			    "(the next entry retries)", key, lc, why);
		} else
			log_info("removed member row %s of retired lifecycle %s", key, lc);
	}
	fence_done(&W.fence);
}

/* ---- one batch ---- */

/*
 * Mark the entries acked before (worker/acked.h: never while the
 * connection came back and DLV is not checked yet), and say so.
 */
static void
mark_again(struct item *items, int n)
{
	struct acked_batch b = { 0 };

	if (!acked_check(&R.acked))
		return;
	for (int i = 0; i < n; i++)
		items[i].again = acked_again(&R.acked, &b, items[i].seq, items[i].ts_ns);
	acked_say(&R.acked, "entries", &b);
}

/* The entry's member row held, with the members locked: the row, &no_row
 * for none, or NULL when it is not held (read it). */
static const struct member_row *
member_held(const struct item *it)
{
	char key[MEMBER_KEY_MAX + 1];

	if (!member_key_format(it->e.channel, &it->who, key, sizeof(key)))
		return &no_row;
	return kvheld_get(&R.members, key);
}

/* Decide an entry on its owner's ACL row and member row (&no_row: none). */
static void
decide(struct item *it, const struct acl_row *acl, const struct member_row *row)
{
	it->has_member = row != &no_row;
	it->v = reader_decide(&it->e, acl, row == &no_row ? NULL : row, it->delivered);
}

/* The index of s in v[0..*n), added when it is not there. */
static int
key_at(const char **v, int *n, const char *s)
{
	for (int j = 0; j < *n; j++)
		if (strcmp(v[j], s) == 0)
			return j;
	v[*n] = s;
	return (*n)++;
}

/*
 * The member rows of keys[0..n), read now into rows: the keys of one
 * channel and owner that are READER_LOAD_MIN or more (a post to a large
 * channel) with one watch of that channel's rows of that owner, the others
 * one by one, at once (lib/nats/kvheld.h). 0, or -1 with err.
 */
static int
member_rows(const char **keys, int n, void **rows, char *err, size_t errlen)
{
	char pattern[MEMBER_KEY_MAX + 8];
	const char **group = calloc((size_t)n + 1, sizeof(*group));
	const char **rest = calloc((size_t)n + 1, sizeof(*rest));
	int *gi = calloc((size_t)n + 1, sizeof(*gi)), *ri = calloc((size_t)n + 1, sizeof(*ri));
	bool *done = calloc((size_t)n + 1, sizeof(*done));
	bool *bykey = calloc((size_t)n + 1, sizeof(*bykey));
	void **got = calloc((size_t)n + 1, sizeof(*got));
	int rc = 0, nrest = 0;

	if (group == NULL || rest == NULL || gi == NULL || ri == NULL || done == NULL ||
	    bykey == NULL || got == NULL)
		fatalx("out of memory");
	for (int j = 0; j < n && rc == 0; j++) {
		const char *slash = strrchr(keys[j], '/'), *dot;
		int ng = 0;
		if (done[j] || bykey[j] || slash == NULL || (dot = strchr(slash, '.')) == NULL)
			continue;
		/* <channel>/<owner>.*.*: the rows of the key's channel and owner. */
		snprintf(pattern, sizeof(pattern), "%.*s.*.*", (int)(dot - keys[j]), keys[j]);
		for (int k = j; k < n; k++)
			if (!done[k] && !bykey[k] &&
			    strncmp(keys[k], keys[j], (size_t)(dot - keys[j]) + 1) == 0)
				gi[ng] = k, group[ng++] = keys[k];
		if (ng < READER_LOAD_MIN)
			continue;
		/* Rows too many to hold, or a watch behind the leader: the
		 * group's keys are read key by key (1), not grouped again. */
		if ((rc = kvheld_load(&R.members, pattern, group, (size_t)ng, got, err, errlen)) == 1) {
			rc = 0;
			for (int k = 0; k < ng; k++)
				bykey[gi[k]] = true;
			continue;
		}
		if (rc != 0)
			break;
		for (int k = 0; k < ng; k++) {
			rows[gi[k]] = got[k];
			done[gi[k]] = true;
		}
	}
	for (int j = 0; j < n && rc == 0; j++)
		if (!done[j])
			ri[nrest] = j, rest[nrest++] = keys[j];
	if (rc == 0 && nrest > 0 && (rc = kvheld_read_many(&R.members, rest, (size_t)nrest, got,
	    err, errlen)) == 0)
		for (int k = 0; k < nrest; k++)
			rows[ri[k]] = got[k];
	if (rc != 0)
		for (int j = 0; j < n; j++)
			if (done[j]) {
				member_free(rows[j]);
				rows[j] = NULL;
			}
	free(group);
	free(rest);
	free(gi);
	free(ri);
	free(done);
	free(bykey);
	free(got);
	return rc;
}

/*
 * Decide the entries whose owner's ACL row or member row is not held, each
 * on its rows read now: every row once and all at once (lib/wire/aclindex.h,
 * lib/nats/kvheld.h). A member row held at the first look was copied with
 * the entry and is not read again; an ACL row held then is looked up again
 * (aclindex_read_many reads it only when it has gone meanwhile). 0, or -1 with err when a bucket cannot be read
 * (the batch is retried).
 */
static int
check_unheld(struct item *items, int n, char *err, size_t errlen)
{
	/* The rows to read, and for each entry the index of its own in them. */
	const char **lcs = calloc((size_t)n, sizeof(*lcs));
	const char **keys = calloc((size_t)n, sizeof(*keys));
	char (*kbuf)[MEMBER_KEY_MAX + 1] = calloc((size_t)n, sizeof(*kbuf));
	struct acl_row *acls = calloc((size_t)n, sizeof(*acls));
	void **rows = calloc((size_t)n, sizeof(*rows));
	int *acl_of = calloc((size_t)n, sizeof(*acl_of)), *row_of = calloc((size_t)n,
	    sizeof(*row_of));
	int nlcs = 0, nkeys = 0, rc;

	if (lcs == NULL || keys == NULL || kbuf == NULL || acls == NULL || rows == NULL ||
	    acl_of == NULL || row_of == NULL)
		fatalx("out of memory");
	for (int i = 0; i < n; i++) {
		struct item *it = &items[i];
		if (!it->unheld)
			continue;
		acl_of[i] = key_at(lcs, &nlcs, it->lc);
		row_of[i] = -1;
		if (it->member == NULL &&
		    member_key_format(it->e.channel, &it->who, kbuf[i], sizeof(kbuf[i])))
			row_of[i] = key_at(keys, &nkeys, kbuf[i]);
	}
	rc = aclindex_read_many(&R.acl, lcs, (size_t)nlcs, acls, err, errlen);
	if (rc == 0 && (rc = member_rows(keys, nkeys, rows, err, errlen)) != 0)
		for (int j = 0; j < nlcs; j++)
			acl_row_free(&acls[j]);
	if (rc == 0) {
		for (int i = 0; i < n; i++) {
			struct item *it = &items[i];
			if (!it->unheld)
				continue;
			if (it->member != NULL)
				decide(it, &acls[acl_of[i]], it->has_member ? it->member : &no_row);
			else
				decide(it, &acls[acl_of[i]], row_of[i] < 0 || rows[row_of[i]] == NULL ?
				    &no_row : rows[row_of[i]]);
		}
		for (int j = 0; j < nlcs; j++)
			acl_row_free(&acls[j]);
		for (int j = 0; j < nkeys; j++)
			member_free(rows[j]);
	}
	free(lcs);
	free(keys);
	free(kbuf);
	free(acls);
	free(rows);
	free(acl_of);
	free(row_of);
	return rc;
}

/* A batch that cannot be re-authorized now (a barrier or a row read
 * failed): handed back whole, to be checked again after READER_RETRY_MS. */
static void
retry_batch(struct item *items, int n, uint64_t ticket, const char *err)
{
	static int64_t last_log;

	if (mono_ms() - last_log > BAD_LOG_EVERY_MS) {
		log_warnx("cannot re-authorize a batch of %d entries, retrying it: %s", n, err);
		last_log = mono_ms();
	}
	if (fence_begin(&W.fence, ticket)) {
		for (int i = 0; i < n; i++)
			pull_nak(&R.pull, items[i].m, READER_RETRY_MS);
		fence_done(&W.fence);
	}
}

/* A batch done with: its entries' decoded copies and its messages freed. */
static void
batch_release(struct batch *b)
{
	for (int i = 0; i < b->list.Count; i++) {
		entry_free(&b->items[i].e);
		free(b->items[i].member);
		b->items[i].member = NULL;
	}
	if (b->list.Msgs != NULL)
		natsMsgList_Destroy(&b->list);
	memset(&b->list, 0, sizeof(b->list));
	b->held = false;
}

/*
 * The first half of a batch: decoded, checked against the ACL and interval
 * of now, its authorized frames published. True when they are out and the
 * batch is held for its second half (batch_finish); false when it is done
 * already (handed back whole, or the fence closed: nothing to finish).
 */
static bool
batch_publish(struct batch *b)
{
	natsMsgList *list = &b->list;
	struct item *items = b->items;
	char why[WHY_MAX], err[512];

	if (list->Count > READER_BATCH)
		fatalx("a batch of %d entries, more than the %d asked for", list->Count,
		    READER_BATCH);
	worker_count(C_ENTRIES, (uint64_t)list->Count);
	worker_count(C_BATCHES, 1);
	for (int i = 0; i < list->Count; i++) {
		struct item *it = &items[i];
		const struct js_ack_meta *md = pull_meta(&R.pull, i);
		item_reset(it, list->Msgs[i]);
		if (md != NULL) {
			it->seq = md->sseq;
			it->delivered = md->delivered;
			it->ts_ns = md->ts_ns;
		}
		if (dinbox_subject_parse(natsMsg_GetSubject(it->m), R.prefix, &it->who, why,
		    sizeof(why)) != 0 || item_parse(it, why, sizeof(why)) != 0) {
			log_bad_entry(it->seq, why);
			continue;
		}
		lifecycle_format(&it->who, it->lc, sizeof(it->lc));
		it->parsed = true;
	}

	/* Entries this reader (or one before it) acked already, handed over
	 * again: their frames are stored, they are acked again without one. */
	mark_again(items, list->Count);
	b->acked_epoch = acked_epoch(&R.acked);

	/* The barrier: an ACL narrowed or a leave committed before this batch
	 * was fetched is seen by it. */
	struct kvmirror *mirrors[] = { &R.acl.rows.tail, &R.members.tail };
	if (kvmirror_barrier_all(mirrors, 2, err, sizeof(err)) != 0) {
		retry_batch(items, list->Count, b->ticket, err);
		return false;
	}

	/* Check: every entry against the ACL and interval of now. */
	int unheld = 0;
	kvheld_lock(&R.acl.rows);
	kvheld_lock(&R.members);
	for (int i = 0; i < list->Count; i++) {
		struct item *it = &items[i];
		if (!it->parsed || it->again)
			continue;
		const struct acl_row *acl = aclindex_get(&R.acl, it->lc);
		const struct member_row *row = member_held(it);
		if (acl == NULL || row == NULL) {
			/* A member row held is kept for check_unheld: not read again. */
			if (row == &no_row)
				it->has_member = false, it->member = member_row_compact(&no_row);
			else if (row != NULL)
				it->has_member = true, it->member = member_row_compact(row);
			if (row != NULL && it->member == NULL)
				fatalx("out of memory");
			it->unheld = true;
			unheld++;
			continue;
		}
		decide(it, acl, row);
	}
	kvheld_unlock(&R.members);
	kvheld_unlock(&R.acl.rows);
	/* The entries whose rows are not held (an owner met first, retired,
	 * with no row or an undecodable one): their rows read exactly, then
	 * decided the same way. */
	if (unheld > 0 && check_unheld(items, list->Count, err, sizeof(err)) != 0) {
		retry_batch(items, list->Count, b->ticket, err);
		return false;
	}

	/* Copy: the authorized frames, asynchronously. */
	if (!fence_begin(&W.fence, b->ticket))
		return false;
	if (pubbatch_begin(&b->pub, list->Count) != 0)
		fatalx("out of memory");
	acked_publishing(&R.acked);
	for (int i = 0; i < list->Count; i++) {
		struct item *it = &items[i];
		char subj[SPACE_TOKEN_MAX + LIFECYCLE_MAX + 16], dkey[DEDUP_KEY_MAX];
		size_t len;
		if (!it->parsed || it->again || it->v != V_DELIVER)
			continue;
		char *body = it->view.msg != NULL ?
		    frame_build_raw(it->view.msg, it->view.msglen, it->e.channel, &len) :
		    frame_build(it->e.msg, it->e.channel, &len);
		if (body == NULL) {
			pubbatch_fail(&b->pub, i, "cannot serialize the frame");
			continue;
		}
		/* <prefix>.dlv.<o>.<a>.<uid>: the lifecycle's key is <o>.<a>.<uid>. */
		size_t pl = strlen(R.prefix), ll = strlen(it->lc);
		memcpy(subj, R.prefix, pl);
		memcpy(subj + pl, ".dlv.", 5);
		memcpy(subj + pl + 5, it->lc, ll + 1);
		const char *key = it->key;
		if (key == NULL && dedup_key(post_id(it->e.msg), &it->who, it->e.generation, dkey,
		    sizeof(dkey)))
			key = dkey;
		pubbatch_publish(&b->pub, i, subj, body, len, key, FRAME_HEADER, "1");
		free(body);
	}
	/* Out on the wire, not waited for: the next batch is decided while
	 * the broker stores these. */
	conn_push(W.nc);
	fence_done(&W.fence);
	return true;
}

/*
 * The second half: the frames' PubAcks awaited, then each entry acked only
 * once its frame is stored (or dropped, retried, given up on, removed).
 * Takes the fence again: a batch held across a QUIESCE acks nothing (the
 * pull loop asks its entries back once the fence opens, and the frames'
 * keys keep a second copy out of DLV).
 */
static void
batch_finish(struct batch *b)
{
	natsMsgList *list = &b->list;
	struct item *items = b->items;
	int unanswered = 0;

	pubbatch_wait(&b->pub);
	acked_stored(&R.acked, b->pub.max_seq);
	int64_t handed_ms = wall_ms();

	if (!fence_begin(&W.fence, b->ticket))
		goto out;
	/* Acked again only while the memory that marked them holds. */
	bool again_ok = acked_still(&R.acked, b->acked_epoch);
	for (int i = 0; i < list->Count; i++) {
		struct item *it = &items[i];
		if (it->again && !again_ok) {
			/* The connection was lost meanwhile: handed back, to be
			 * checked again on the next one. */
			pull_nak(&R.pull, it->m, READER_RETRY_MS);
			worker_count(C_RETRIED, 1);
			continue;
		}
		if (it->again) {
			pull_ack(&R.pull, it->m);
			worker_count(C_REPLAYED, 1);
			continue;
		}
		if (!it->parsed) {
			pull_term(&R.pull, it->m);
			acked_put(&R.acked, it->seq, it->ts_ns);
			worker_count(C_DENIED, 1);
			continue;
		}
		switch (it->v) {
		case V_DELIVER:
			if (pubbatch_refused(&b->pub, i)) {
				/* The stream refuses this frame: it would forever. */
				retry_or_give_up(it->m, it->seq, it->ts_ns, it->delivered, it->lc,
				    b->pub.error);
				break;
			}
			if (pubbatch_failed(&b->pub, i)) {
				/* No answer (a leader being elected, the connection
				 * lost): retried for as long as it takes, never given
				 * up, whatever the delivery count (the recovery of
				 * issue 15 counts deliveries too). */
				pull_nak(&R.pull, it->m, READER_RETRY_MS);
				worker_count(C_RETRIED, 1);
				unanswered++;
				break;
			}
			pull_ack(&R.pull, it->m);
			acked_put(&R.acked, it->seq, it->ts_ns);
			worker_count(C_DELIVERED, 1);
			/* The copy latency: the post stored in CHAT (the fan-out's
			 * header says when) to its frame stored in DLV. */
			observe_copy(it->m, handed_ms);
			break;
		case V_DROP:
			pull_ack(&R.pull, it->m);
			acked_put(&R.acked, it->seq, it->ts_ns);
			worker_count(C_DENIED, 1);
			break;
		case V_RETRY:
			pull_nak(&R.pull, it->m, READER_RETRY_MS);
			worker_count(C_RETRIED, 1);
			break;
		case V_GIVE_UP:
			pull_term(&R.pull, it->m);
			acked_put(&R.acked, it->seq, it->ts_ns);
			worker_count(C_GAVEUP, 1);
			log_warnx("gave up on entry %" PRIu64 " for unknown owner %s after %" PRIu64
			    " deliveries (kept)", it->seq, it->lc, it->delivered);
			break;
		case V_RETIRED:
			break; /* below, one at a time */
		}
	}
	fence_done(&W.fence);
	if (unanswered > 0)
		log_unanswered(unanswered, b->pub.error);
	for (int i = 0; i < list->Count; i++)
		if (items[i].parsed && !items[i].again && items[i].v == V_RETIRED)
			remove_retired(items[i].m, items[i].seq, items[i].ts_ns, items[i].delivered,
			    &items[i].e, &items[i].who, items[i].lc, items[i].has_member, b->ticket);
out:
	batch_release(b);
}

/*
 * A fetched batch. Two overlap: this one is decided and its frames
 * published while the broker still stores the one before, whose acks
 * follow (issue 40: the reader's loop waited for every batch's PubAcks
 * before it fetched the next, and the broker idled meanwhile). Each entry
 * is still acked only after its own frame's PubAck.
 */
static void
reader_batch(natsMsgList *list)
{
	struct batch *b = &R.batch[R.turn], *before = &R.batch[R.turn ^ 1];

	/* The batch keeps its messages until its acks: the list moves. */
	b->list = *list;
	list->Msgs = NULL;
	list->Count = 0;
	b->ticket = fence_ticket(&W.fence);
	b->held = batch_publish(b);
	if (!b->held)
		batch_release(b);
	if (before->held)
		batch_finish(before);
	if (b->held)
		R.turn ^= 1;
}

/* What the last batch left in flight, finished: before a fetch that may
 * wait, a recovery, a quiesce or a stop. */
static void
reader_finish(void)
{
	for (int i = 0; i < 2; i++)
		if (R.batch[i].held)
			batch_finish(&R.batch[i]);
}

static bool
reader_holding(void)
{
	return R.batch[0].held || R.batch[1].held;
}

static bool
may_fetch(void)
{
	/* The memory's check counts every frame already stored: a held
	 * batch is finished first (its frames counted) when one is due. */
	if (reader_holding() && acked_due(&R.acked))
		reader_finish();
	acked_tick(&R.acked);
	return true;
}

/* ---- set-up and the loop ---- */

static void
teardown(void)
{
	acked_close(&R.acked);
	kvheld_close(&R.members);
	aclindex_close(&R.acl);
	pull_close(&R.pull);
	for (int i = 0; i < 2; i++) {
		batch_release(&R.batch[i]); /* none is held past the loop: nothing acked */
		pubbatch_destroy(&R.batch[i].pub);
	}
	R.js = NULL;
	R.turn = 0;
}

static int
setup(char *err, size_t errlen)
{
	char token[SPACE_TOKEN_MAX + 1], filter[SPACE_TOKEN_MAX + 16], bucket[KVMIRROR_BUCKET_MAX];
	jsConsumerConfig cc;

	space_token(W.cfg.space, token, sizeof(token));
	snprintf(R.prefix, sizeof(R.prefix), "cotal.%s", token);
	snprintf(R.stream, sizeof(R.stream), "INBOX_%s", token);
	snprintf(filter, sizeof(filter), "cotal.%s.dinbox.>", token);
	for (int i = 0; i < 2; i++)
		if (pubbatch_init(&R.batch[i].pub, W.nc, W.cfg.inbox_prefix) != 0) {
			snprintf(err, errlen, "cannot make a JetStream context or subscribe for "
			    "PubAcks");
			return -1;
		}
	R.js = R.batch[0].pub.js;
	/* WIRE.md §3: durable pull, explicit ack, ack wait 60 s, deliver all,
	 * max ack pending 1000. */
	jsConsumerConfig_Init(&cc);
	cc.Durable = "reader";
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = (int64_t)READER_ACK_WAIT_S * 1000000000;
	cc.DeliverPolicy = js_DeliverAll;
	cc.MaxAckPending = READER_MAX_ACK_PENDING;
	if (pull_bind(R.js, W.nc, W.cfg.inbox_prefix, R.stream, &cc, &R.pull, err,
	    errlen) != 0)
		return -1;
	/* Nothing loads: the read-ACL rows and the member rows are read when
	 * met and held (issue 39); their tails start at once. */
	snprintf(bucket, sizeof(bucket), "cotal_members_%s", token);
	if (aclindex_start(&R.acl, W.nc, W.cfg.inbox_prefix, R.js, token, err, errlen) != 0 ||
	    kvheld_start(&R.members, W.nc, W.cfg.inbox_prefix, R.js, bucket, READER_MEMBERS_HELD,
	    member_decode, member_free, NULL, NULL, NULL, err, errlen) != 0 ||
	    kvmirror_loaded(&R.acl.rows.tail, err, errlen) != 0 ||
	    kvmirror_loaded(&R.members.tail, err, errlen) != 0)
		return -1;
	snprintf(R.dlv, sizeof(R.dlv), "DLV_%s", token);
	/* Without DLV's stream info (an optional grant) it cannot tell that
	 * DLV still holds its frames: it remembers nothing, the preflight
	 * said so. */
	if (!(W.cfg.features_off & IPC_OFF_READER_MEMORY))
		acked_open(&R.acked, W.nc, R.js, R.stream, "reader", R.dlv);
	snprintf(R.bound, sizeof(R.bound), "%s durable reader", R.stream);
	return 0;
}

static void
reader_run(void)
{
	const struct pull_loop loop = {
		.what = "reader", .setup = setup, .teardown = teardown, .may_fetch = may_fetch,
		.batch = reader_batch, .finish = reader_finish, .holding = reader_holding,
		.pull = &R.pull, .batch_max = READER_BATCH, .bound = R.bound,
	};

	for (int i = 0; i < 2; i++)
		if ((R.batch[i].items = calloc(READER_BATCH, sizeof(*R.batch[i].items))) == NULL)
			fatalx("out of memory");
	pull_loop_run(&loop);
	for (int i = 0; i < 2; i++) {
		free(R.batch[i].items);
		R.batch[i].items = NULL;
	}
}

const struct worker_role reader_role = {
	.name = "reader",
	.sandbox = SANDBOX_READER,
	.run = reader_run,
};
