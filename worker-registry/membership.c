/*
 * The ctl.delivery ops (WIRE.md §5): durable join and leave, the member's
 * own membership list, ACL-bounded history, and channel registration.
 *
 * The membership registry is "broker-known truth, not self-reported: an
 * agent cannot assert its own membership" (seed): every row is written
 * here, by CAS at the revision it was read at, for the caller the request
 * subject names, within the caller's current read ACL.
 */
#include "worker-registry/registry_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/pubbatch.h"
#include "worker/worker.h"

#define WRITE_TRIES 3               /* CAS conflicts before a write gives up */
#define HISTORY_BUDGET_PCT 90       /* a page fills at most this much of max_payload */
#define HISTORY_ENVELOPE 64         /* {"ok":true,"data":{"items":[],"complete":false}} */
#define CATCHUP_LEAD_MAX 512        /* entries ahead of the reader's ack floor */
#define CATCHUP_LEAD_WAIT_MS 60000
#define CATCHUP_LEAD_POLL_MS 20

static const char REASON_EVICTED[] = "activation catch-up window partially evicted by retention";
static const char REASON_SUPERSEDED[] = "activation superseded by a concurrent leave or rejoin";

static void
writer_identity(char *buf, size_t len)
{
	snprintf(buf, len, "cotal-deliveryd registry (%.16s)", W.cfg.inbox_prefix);
}

/*
 * A test build may hold a join of a channel for some milliseconds, named
 * <channel>:<ms> in COTAL_TEST_JOIN_DELAY (between its membership write
 * and its second ACL read: the e2e suite narrows the ACL meanwhile) and in
 * COTAL_TEST_ACTIVATE_DELAY (between its catch-up and its activation: the
 * suite leaves meanwhile). A release build has no such knob.
 */
static void
test_join_delay(const char *knob, const char *channel)
{
#ifdef COTAL_TEST_HOOKS
	const char *v = getenv(knob), *colon;

	if (v == NULL || (colon = strrchr(v, ':')) == NULL)
		return;
	if ((size_t)(colon - v) == strlen(channel) && strncmp(v, channel, strlen(channel)) == 0)
		worker_nap(atoi(colon + 1));
#else
	(void)knob, (void)channel;
#endif
}

/* The row of key now: 1 with row and rev, 0 absent (rev of the delete
 * marker), -1 with err (an undecodable row is an error: never overwritten
 * blindly). */
static int
row_read(const char *key, struct member_row *row, uint64_t *rev, char *err, size_t errlen)
{
	char *val = NULL, why[WHY_MAX];
	size_t len;
	int rc = kv_read(G.members_bucket, key, &val, &len, rev, err, errlen);

	if (rc == 1 && member_row_parse(key, val, len, row, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "the membership row %.200s does not decode: %s", key, why);
		rc = -1;
	}
	free(val);
	return rc;
}

static int
row_write(struct request *r, const char *key, const struct member_row *row, uint64_t expect,
	  uint64_t *rev, char *err, size_t errlen)
{
	char writer[64];
	size_t len;
	char *body;
	int rc;

	writer_identity(writer, sizeof(writer));
	if ((body = member_row_build(row, writer, wall_ms(), &len)) == NULL)
		fatalx("out of memory");
	rc = kv_write(r, G.members_bucket, key, body, len, expect, false, NULL, rev, err, errlen);
	free(body);
	return rc;
}

/* Is lc's row, read now, live and covering channel? why: the refusal. */
static bool
acl_allows_now(const char *lc, const char *channel, char *why, size_t whylen)
{
	struct acl_row acl;
	char err[512];
	bool ok;

	if (acl_fresh(lc, &acl, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "durableJoin: cannot read the read ACL of %s now (%s); retry",
		    lc, err);
		return false;
	}
	ok = acl.state == ACL_LIVE && acl_covers(&acl, channel);
	if (!ok && acl.state == ACL_RETIRED)
		snprintf(why, whylen, "durableJoin: lifecycle %s is retired and never comes back", lc);
	else if (!ok && acl.state == ACL_LIVE)
		acl_refusal(&acl, channel, why, whylen);
	else if (!ok)
		snprintf(why, whylen, "durableJoin: no read ACL on record for %s (not provisioned "
		    "for durable delivery)", lc);
	acl_row_free(&acl);
	return ok;
}

enum join_step { JOIN_FAILED = -1, JOIN_WRITTEN, JOIN_REUSED };

/*
 * The row of a join, inside the gate. The seed: "A durable join reads that
 * row again just before it writes its membership row, and once more after.
 * When the channel is no longer allowed, the join writes nothing, or
 * removes the row it just wrote, and is refused."
 */
static enum join_step
join_write(struct request *r, const char *key, const char *lc, struct member_row *row,
	   uint64_t *rev, char *why, size_t whylen)
{
	char err[1024];
	struct member_row old;
	uint64_t at, last;

	for (int t = 0; t < WRITE_TRIES; t++) {
		int have = row_read(key, &old, &at, err, sizeof(err));
		if (have < 0) {
			snprintf(why, whylen, "durableJoin: %s", err);
			return JOIN_FAILED;
		}
		if (have == 1 && !old.has_leave) {
			/* Idempotent: an open row is this membership. */
			*row = old;
			*rev = at;
			return JOIN_REUSED;
		}
		if (stream_last_seq(G.chat, &last, NULL, err, sizeof(err)) != 0) {
			snprintf(why, whylen, "durableJoin: %s", err);
			return JOIN_FAILED;
		}
		row->join_cursor = last;
		row->has_leave = false;
		row->leave_cursor = 0;
		/* Rejoin = generation+1; a lower one never overwrites a higher. */
		row->generation = (have == 1 ? old.generation : 0) + 1;
		row->active = true;
		row->activated = false;
		if (!acl_allows_now(lc, row->channel, why, whylen))
			return JOIN_FAILED;
		int w = row_write(r, key, row, at, rev, err, sizeof(err));
		if (w == 1)
			continue; /* a concurrent write: read again */
		if (w < 0) {
			snprintf(why, whylen, "durableJoin: %s", err);
			return JOIN_FAILED;
		}
		test_join_delay("COTAL_TEST_JOIN_DELAY", row->channel);
		if (acl_allows_now(lc, row->channel, why, whylen))
			return JOIN_WRITTEN;
		uint64_t gone;
		if (kv_write(r, G.members_bucket, key, NULL, 0, *rev, true, NULL, &gone, err,
		    sizeof(err)) != 0)
			log_warnx("durableJoin: could not remove the row %.200s written against a "
			    "narrowed ACL: %s (the reader removes it for a retired lifecycle)", key,
			    err);
		return JOIN_FAILED;
	}
	snprintf(why, whylen, "durableJoin: the membership row of \"%s\" changed under %d tries; "
	    "retry", row->channel, WRITE_TRIES);
	return JOIN_FAILED;
}

/* ---- catch-up ---- */

struct catchup {
	struct request *r;
	struct member_row *row;
	char inbox[REG_PREFIX_MAX + LIFECYCLE_MAX + 16]; /* P.dinbox.<o>.<a>.<uid> */
	char sender[PRINCIPAL_MAX + 1];                  /* the member: its own posts skipped */
	struct pubbatch pub;
	struct strmap per_subject;                       /* subject -> count (uintptr_t) */
	int64_t max_per_subject;
	bool evicted;
	uint64_t copied;
	char err[1024];
};

/*
 * The INBOX holds at most 1000 entries per member (WIRE.md §3): a long
 * catch-up waits for the reader's ack floor, as the fan-out does, so that
 * no entry is discarded before the reader handled it.
 */
static int
catchup_pace(struct catchup *c)
{
	char inbox_stream[REG_PREFIX_MAX];
	int64_t until = mono_ms() + CATCHUP_LEAD_WAIT_MS;
	uint64_t published = c->pub.max_seq;

	snprintf(inbox_stream, sizeof(inbox_stream), "INBOX_%s", G.token);
	while (worker_serving()) {
		jsConsumerInfo *ci = NULL;
		jsErrCode jerr = 0;
		uint64_t floor = 0;
		if (js_GetConsumerInfo(&ci, G.js, inbox_stream, "reader", NULL, &jerr) == NATS_OK) {
			floor = ci->AckFloor.Stream;
			jsConsumerInfo_Destroy(ci);
		}
		if (published <= floor + CATCHUP_LEAD_MAX)
			return 0;
		if (mono_ms() > until)
			break;
		worker_nap(CATCHUP_LEAD_POLL_MS);
	}
	snprintf(c->err, sizeof(c->err), "the reader did not catch up with the catch-up's copies "
	    "within %d s", CATCHUP_LEAD_WAIT_MS / 1000);
	return -1;
}

static int
catchup_batch(void *arg, natsMsg **posts, int n)
{
	struct catchup *c = arg;
	char why[WHY_MAX], key[DEDUP_KEY_MAX];
	int items = 0;

	if (pubbatch_begin(&c->pub, n) != 0)
		fatalx("out of memory");
	/* Copies are effects: none after a QUIESCE. */
	if (!effect_begin(c->r)) {
		snprintf(c->err, sizeof(c->err), "the daemon stopped serving the shard");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *subj = natsMsg_GetSubject(posts[i]);
		long count = strmap_count(&c->per_subject, subj, 1);
		struct chat_subject cs;
		json_t *msg = NULL;
		uint64_t seq = chat_seq(posts[i]);

		if (count < 0)
			fatalx("out of memory");
		/* A subject that filled its per-subject limit within the window may
		 * have pushed older posts of the window out (WIRE.md §3: CHAT keeps
		 * at most max_msgs_per_subject per subject). */
		if (c->max_per_subject > 0 && count >= (long)c->max_per_subject)
			c->evicted = true;
		if (chat_subject_parse(subj, G.prefix, &cs, why, sizeof(why)) != 0 ||
		    post_decode(natsMsg_GetData(posts[i]), (size_t)natsMsg_GetDataLength(posts[i]),
		    &cs, &msg, why, sizeof(why)) != POST_OK)
			continue; /* the fan-out drops it too */
		char from[PRINCIPAL_MAX + 1];
		principal_format(cs.owner, cs.actor, from, sizeof(from));
		if (strcmp(from, c->sender) == 0) {
			json_decref(msg);
			continue; /* the sender gets no copy of its own post */
		}
		size_t len;
		char *entry = entry_build(msg, c->row->channel, seq, REASON_DURABLE,
		    c->row->generation, &len);
		bool keyed = dedup_key(post_id(msg), &c->row->who, c->row->generation, key,
		    sizeof(key));
		json_decref(msg);
		if (entry == NULL)
			fatalx("out of memory");
		pubbatch_publish(&c->pub, items++, c->inbox, entry, len, keyed ? key : NULL, NULL,
		    NULL);
		free(entry);
	}
	if (items > 0)
		pubbatch_wait(&c->pub);
	effect_done();
	if (items == 0)
		return 0;
	for (int i = 0; i < items; i++)
		if (pubbatch_failed(&c->pub, i)) {
			snprintf(c->err, sizeof(c->err), "copy into %s: %s", c->inbox, c->pub.error);
			return -1;
		}
	c->copied += (uint64_t)items;
	return catchup_pace(c);
}

/*
 * Copy (joinCursor, fence] of the channel into the member's store, fence =
 * max(CHAT last seq, fanout delivered stream seq): the posts the fan-out
 * may have routed before it saw the row. The same dedup keys as the
 * fan-out's, so a post both copy is stored once.
 */
static int
catchup(struct request *r, struct member_row *row, uint64_t *fence, bool *evicted, char *why,
	size_t whylen)
{
	struct catchup c = { .r = r, .row = row };
	char name[LIFECYCLE_MAX + 32];
	uint64_t last, delivered, pending = 0;
	int rc;

	*evicted = false;
	if (stream_last_seq(G.chat, &last, &c.max_per_subject, c.err, sizeof(c.err)) != 0 ||
	    fanout_delivered(&delivered, c.err, sizeof(c.err)) != 0) {
		snprintf(why, whylen, "durableJoin: catch-up: %s", c.err);
		return -1;
	}
	*fence = last > delivered ? last : delivered;
	if (*fence <= row->join_cursor)
		return 0;
	snprintf(c.inbox, sizeof(c.inbox), "%s.dinbox.%s.%s.%s", G.prefix, row->who.owner,
	    row->who.actor, row->who.uid);
	principal_format(row->who.owner, row->who.actor, c.sender, sizeof(c.sender));
	snprintf(name, sizeof(name), "cu_%s-%s-%s_%" PRIu64, row->who.owner, row->who.actor,
	    row->who.uid, row->generation);
	strmap_init(&c.per_subject);
	if (pubbatch_init(&c.pub, W.nc, W.cfg.inbox_prefix) != 0)
		fatalx("cannot make a JetStream context or subscribe for PubAcks");
	rc = chat_scan(name, row->channel, row->join_cursor + 1, *fence, catchup_batch, &c,
	    &pending, c.err, sizeof(c.err));
	*evicted = c.evicted;
	strmap_clear(&c.per_subject, NULL);
	pubbatch_destroy(&c.pub);
	if (rc != 0) {
		snprintf(why, whylen, "durableJoin: catch-up of \"%s\" failed: %s; the membership is "
		    "kept, a retried join resumes it", row->channel, c.err);
		return -1;
	}
	if (c.copied > 0)
		log_info("durableJoin: caught %s.%s.%s up on \"%.200s\": %" PRIu64 " posts "
		    "(%" PRIu64 "..%" PRIu64 "]", row->who.owner, row->who.actor, row->who.uid,
		    row->channel, c.copied, row->join_cursor, *fence);
	return 0;
}

/*
 * After the catch-up, by CAS at the row's current revision: set activated,
 * or on eviction close the row at the fence. Refused when a leave or a
 * rejoin came in between: "A leave or an activation only updates a row
 * that still exists" (seed).
 */
static int
finish(struct request *r, const char *key, const struct member_row *joined, bool evicted,
       uint64_t fence, char *err, size_t errlen)
{
	struct member_row now;
	uint64_t at, rev;

	for (int t = 0; t < WRITE_TRIES; t++) {
		int have = row_read(key, &now, &at, err, errlen);
		if (have < 0)
			return -1;
		if (have == 0 || now.generation != joined->generation || now.has_leave)
			return 1; /* superseded */
		if (now.activated && !evicted)
			return 0;
		if (evicted) {
			now.has_leave = true;
			now.leave_cursor = fence;
			now.active = false;
			now.activated = false;
		} else {
			now.activated = true;
		}
		int w = row_write(r, key, &now, at, &rev, err, errlen);
		if (w <= 0)
			return w;
	}
	return 1;
}

/*
 * Issue 28: a lifecycle holds at most W.cfg.max_memberships rows (open or
 * left: a leave keeps its row), so that an agent whose read ACL has a
 * wildcard cannot grow the members bucket, and every worker's mirror of it,
 * without end. A join of a channel it has a row for adds none. Just below
 * the bound the mirror is brought up to date first; joins the caller has in
 * service at once (REG_CALLER_SERVING) may pass it by one less than that.
 */
static bool
rows_bound_allows(const char *key, const char *lc, char *why, size_t whylen)
{
	char err[512];
	size_t max = W.cfg.max_memberships, n = kv_lifecycle_rows(lc);

	if (n + REG_CALLER_SERVING < max)
		return true;
	/* At or past the bound already: no read of the bucket for the
	 * refusal (a flood of joins costs a lookup each); a retirement's
	 * deletes the mirror has yet to see only delay the next join. */
	if (n < max && kvmirror_barrier(&G.members, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "durableJoin: %s", err);
		return false;
	}
	if (kv_row_known(key) || kv_lifecycle_rows(lc) < max)
		return true;
	snprintf(why, whylen, "durableJoin: lifecycle %s already holds %zu membership rows, the "
	    "bound of one lifecycle (cotal-deliveryd --max-memberships %zu); a left channel keeps "
	    "its row until the lifecycle is retired", lc, kv_lifecycle_rows(lc), max);
	return false;
}

void
op_durable_join(struct request *r)
{
	struct member_row row = { 0 };
	char why[CTL_WHY_MAX], lc[LIFECYCLE_MAX + 1], key[MEMBER_KEY_MAX + 1], err[1024];
	uint64_t gate, rev, fence = 0;
	bool evicted;
	enum join_step step;

	snprintf(row.channel, sizeof(row.channel), "%s", r->args.channel);
	if (acl_caller_reads("durableJoin", &r->caller, row.channel, row.who.uid,
	    sizeof(row.who.uid), why, sizeof(why)) != 0) {
		reply_error(r, "%s", why);
		return;
	}
	snprintf(row.who.owner, sizeof(row.who.owner), "%s", r->caller.owner);
	snprintf(row.who.actor, sizeof(row.who.actor), "%s", r->caller.actor);
	lifecycle_format(&row.who, lc, sizeof(lc));
	if (!member_key_format(row.channel, &row.who, key, sizeof(key))) {
		reply_error(r, "durableJoin: the membership key of \"%s\" is too long", row.channel);
		return;
	}
	if (!rows_bound_allows(key, lc, why, sizeof(why))) {
		reply_error(r, "%s", why);
		return;
	}
	if (!gate_enter(lc, &gate)) {
		reply_error(r, "durableJoin: lifecycle %s is being retired (its membership inventory "
		    "was taken); refused", lc);
		return;
	}
	step = join_write(r, key, lc, &row, &rev, why, sizeof(why));
	gate_leave(gate);
	if (step == JOIN_FAILED) {
		reply_error(r, "%s", why);
		return;
	}
	worker_count(C_JOINS, 1);
	if (step == JOIN_REUSED && row.activated) {
		reply_data(r, json_pack("{s:b, s:I}", "durable", 1, "generation",
		    (json_int_t)row.generation));
		return;
	}
	if (catchup(r, &row, &fence, &evicted, why, sizeof(why)) != 0) {
		reply_error(r, "%s", why);
		return;
	}
	test_join_delay("COTAL_TEST_ACTIVATE_DELAY", row.channel);
	switch (finish(r, key, &row, evicted, fence, err, sizeof(err))) {
	case 0:
		if (evicted)
			reply_data(r, json_pack("{s:b, s:I, s:s}", "durable", 0, "generation",
			    (json_int_t)row.generation, "reason", REASON_EVICTED));
		else
			reply_data(r, json_pack("{s:b, s:I}", "durable", 1, "generation",
			    (json_int_t)row.generation));
		return;
	case 1:
		reply_data(r, json_pack("{s:b, s:I, s:s}", "durable", 0, "generation",
		    (json_int_t)row.generation, "reason", REASON_SUPERSEDED));
		return;
	default:
		reply_error(r, "durableJoin: activation of \"%s\": %s", row.channel, err);
	}
}

/* ---- leave ---- */

void
op_durable_leave(struct request *r)
{
	struct member_row row;
	struct lifecycle who = { 0 };
	char ch[CHANNEL_MAX + 1], why[CTL_WHY_MAX], lc[LIFECYCLE_MAX + 1], key[MEMBER_KEY_MAX + 1];
	char err[1024];
	uint64_t gen = r->args.generation, gate, at, last, rev;
	int rc = -1;

	snprintf(ch, sizeof(ch), "%s", r->args.channel);
	snprintf(who.uid, sizeof(who.uid), "%s", r->args.uid);
	snprintf(who.owner, sizeof(who.owner), "%s", r->caller.owner);
	snprintf(who.actor, sizeof(who.actor), "%s", r->caller.actor);
	lifecycle_format(&who, lc, sizeof(lc));
	if (!member_key_format(ch, &who, key, sizeof(key))) {
		reply_error(r, "durableLeave: the membership key of \"%s\" is too long", ch);
		return;
	}
	/* Leaving does not revoke the ACL and never checks it (seed). */
	if (!gate_enter(lc, &gate)) {
		reply_error(r, "durableLeave: lifecycle %s is being retired (its membership "
		    "inventory was taken); refused", lc);
		return;
	}
	for (int t = 0; t < WRITE_TRIES && rc == -1; t++) {
		int have = row_read(key, &row, &at, err, sizeof(err));
		if (have < 0) {
			snprintf(why, sizeof(why), "durableLeave: %s", err);
			rc = -2;
		} else if (have == 0 || row.has_leave) {
			rc = 1; /* only an existing open row is updated */
		} else if (row.generation != gen) {
			snprintf(why, sizeof(why), "durableLeave: generation %" PRIu64 " is not the "
			    "joined generation %" PRIu64 " of \"%s\"", gen, row.generation, ch);
			rc = -2;
		} else if (stream_last_seq(G.chat, &last, NULL, err, sizeof(err)) != 0) {
			snprintf(why, sizeof(why), "durableLeave: %s", err);
			rc = -2;
		} else {
			row.has_leave = true;
			row.leave_cursor = last;
			row.active = false;
			int w = row_write(r, key, &row, at, &rev, err, sizeof(err));
			if (w == 0)
				rc = 0;
			else if (w < 0) {
				snprintf(why, sizeof(why), "durableLeave: %s", err);
				rc = -2;
			}
		}
	}
	gate_leave(gate);
	if (rc == -1)
		snprintf(why, sizeof(why), "durableLeave: the membership row of \"%s\" changed under "
		    "%d tries; retry", ch, WRITE_TRIES);
	if (rc < 0) {
		reply_error(r, "%s", why);
		return;
	}
	worker_count(C_LEAVES, 1);
	if (rc == 1)
		reply_data(r, json_pack("{s:s, s:b}", "channel", ch, "alreadyLeft", 1));
	else
		reply_data(r, json_pack("{s:s}", "channel", ch));
}

/* ---- the member's own list ---- */

struct list_scan {
	const struct lifecycle *who;
	json_t *out;
};

static int
list_open_row(const char *key, void *value, void *arg)
{
	struct list_scan *l = arg;
	const struct mrow *m = value;

	(void)key;
	if (m->row.has_leave || strcmp(m->row.who.uid, l->who->uid) != 0 ||
	    strcmp(m->row.who.owner, l->who->owner) != 0 ||
	    strcmp(m->row.who.actor, l->who->actor) != 0)
		return 0;
	json_array_append_new(l->out, json_pack("{s:s, s:I, s:b}", "channel", m->row.channel,
	    "generation", (json_int_t)m->row.generation, "activated", m->row.activated));
	return 0;
}

void
op_list_memberships(struct request *r)
{
	struct lifecycle who = { 0 };
	struct list_scan l = { .who = &who };
	char err[512];

	snprintf(who.uid, sizeof(who.uid), "%s", r->args.uid);
	snprintf(who.owner, sizeof(who.owner), "%s", r->caller.owner);
	snprintf(who.actor, sizeof(who.actor), "%s", r->caller.actor);
	if (kvmirror_barrier(&G.members, err, sizeof(err)) != 0) {
		reply_error(r, "listMemberships: cannot read the membership registry now (%s); "
		    "retry", err);
		return;
	}
	worker_count(C_MEMBER_READS, 1);
	l.out = json_array();
	kvmirror_lock(&G.members);
	strmap_each(&G.rows, list_open_row, &l);
	kvmirror_unlock(&G.members);
	reply_data(r, json_pack("{s:o}", "memberships", l.out));
}

/* ---- registerChannel ---- */

void
op_register_channel(struct request *r)
{
	char ch[CHANNEL_MAX + 1], why[CTL_WHY_MAX], uid[UID_MAX + 1], err[1024];
	char lc[LIFECYCLE_MAX + 1];
	struct lifecycle who;
	const char *desc = NULL;
	char *old = NULL, *body;
	size_t len, made;
	uint64_t at, rev;
	int have;

	if (W.cfg.features_off & IPC_OFF_REGISTER) {
		reply_error(r, "registerChannel: this daemon's credential may not write channel "
		    "config rows ($KV.%s.>); it is off (cotal creds audit shows the grant)",
		    G.channels_bucket);
		return;
	}
	snprintf(ch, sizeof(ch), "%s", r->args.channel);
	desc = r->args.description;
	if (acl_caller_reads("registerChannel", &r->caller, ch, uid, sizeof(uid), why,
	    sizeof(why)) != 0) {
		reply_error(r, "%s", why);
		return;
	}
	/* Create only: an existing channel's configuration is not ours. */
	have = kv_read(G.channels_bucket, ch, &old, &len, &at, err, sizeof(err));
	free(old);
	if (have < 0) {
		reply_error(r, "registerChannel: %s", err);
		return;
	}
	if (have == 1) {
		reply_data(r, json_pack("{s:s, s:b}", "channel", ch, "created", 0));
		return;
	}
	snprintf(who.owner, sizeof(who.owner), "%s", r->caller.owner);
	snprintf(who.actor, sizeof(who.actor), "%s", r->caller.actor);
	snprintf(who.uid, sizeof(who.uid), "%s", uid);
	lifecycle_format(&who, lc, sizeof(lc));
	if (kv_lifecycle_channels(lc, &made, err, sizeof(err)) != 0) {
		reply_error(r, "registerChannel: cannot read the channel registry now (%s); retry",
		    err);
		return;
	}
	if (made >= W.cfg.max_channels) {
		reply_error(r, "registerChannel: lifecycle %s already created %zu channels, the bound "
		    "of one registration (cotal-deliveryd --max-channels %" PRIu32 "); a channel "
		    "counts until its config row is rewritten or deleted by the manager", lc, made,
		    W.cfg.max_channels);
		return;
	}
	json_t *cfg = desc != NULL ? json_pack("{s:s}", "description", desc) : json_object();
	body = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (body == NULL)
		fatalx("out of memory");
	/* The creator rides beside the row (kv_write's origin), so the bound holds
	 * across restarts; the row itself is the client's record, unchanged. */
	int w = kv_write(r, G.channels_bucket, ch, body, strlen(body), at, false, lc, &rev, err,
	    sizeof(err));
	free(body);
	if (w < 0)
		reply_error(r, "registerChannel: %s", err);
	else
		reply_data(r, json_pack("{s:s, s:b}", "channel", ch, "created", w == 0));
}

/* ---- readHistory ---- */

struct history {
	json_t **items;      /* ring of the newest, normalized */
	size_t *sizes;
	int cap, n, head;    /* head: the oldest */
	uint64_t seen;       /* decodable posts read */
};

static void
history_keep(struct history *h, json_t *msg, size_t size)
{
	int slot = (h->head + h->n) % h->cap;

	if (h->n == h->cap) {
		json_decref(h->items[h->head]);
		slot = h->head;
		h->head = (h->head + 1) % h->cap;
		h->n--;
	}
	h->items[slot] = msg;
	h->sizes[slot] = size;
	h->n++;
}

static int
history_batch(void *arg, natsMsg **posts, int n)
{
	struct history *h = arg;
	char why[WHY_MAX];

	for (int i = 0; i < n; i++) {
		struct chat_subject cs;
		json_t *msg = NULL;
		if (chat_subject_parse(natsMsg_GetSubject(posts[i]), G.prefix, &cs, why,
		    sizeof(why)) != 0 ||
		    post_decode(natsMsg_GetData(posts[i]), (size_t)natsMsg_GetDataLength(posts[i]),
		    &cs, &msg, why, sizeof(why)) != POST_OK)
			continue; /* never a post anybody was handed */
		char *text = json_dumps(msg, JSON_COMPACT);
		size_t size = text ? strlen(text) : 0;
		free(text);
		h->seen++;
		history_keep(h, msg, size);
	}
	return 0;
}

static void
scan_name(char *buf, size_t len, const struct rail_caller *c)
{
	static _Atomic uint64_t n;

	snprintf(buf, len, "hist_%s-%s_%ld_%" PRIu64, c->owner, c->actor, (long)getpid(),
	    atomic_fetch_add(&n, 1));
}

void
op_read_history(struct request *r)
{
	struct history h = { 0 };
	char ch[CHANNEL_MAX + 1], why[CTL_WHY_MAX], uid[UID_MAX + 1], err[1024];
	char name[PRINCIPAL_MAX + 64];
	uint64_t limit = r->args.limit, last, start = 1, count = 0, pending = 0;

	snprintf(ch, sizeof(ch), "%s", r->args.channel);
	if (acl_caller_reads("readHistory", &r->caller, ch, uid, sizeof(uid), why,
	    sizeof(why)) != 0) {
		reply_error(r, "%s", why);
		return;
	}
	scan_name(name, sizeof(name), &r->caller);
	if (stream_last_seq(G.chat, &last, NULL, err, sizeof(err)) != 0)
		goto failed;
	/* Find a start that holds more than limit posts, widening the window
	 * from the end: the stream cannot be read backwards. */
	for (uint64_t window = 4 * limit;; window *= 8) {
		start = last > window ? last - window + 1 : 1;
		if (chat_count(name, ch, start, &count, err, sizeof(err)) != 0)
			goto failed;
		if (count > limit || start == 1)
			break;
	}
	h.cap = (int)limit + 1; /* one more tells whether older history exists */
	h.items = calloc((size_t)h.cap, sizeof(*h.items));
	h.sizes = calloc((size_t)h.cap, sizeof(*h.sizes));
	if (h.items == NULL || h.sizes == NULL)
		fatalx("out of memory");
	if (chat_scan(name, ch, start, 0, history_batch, &h, &pending, err, sizeof(err)) != 0)
		goto failed;

	/* Oldest first; trimmed from the oldest to the page's byte budget. */
	int64_t mp = max_payload(), budget = mp * HISTORY_BUDGET_PCT / 100 - HISTORY_ENVELOPE;
	int take = h.n > (int)limit ? (int)limit : h.n, fit = 0;
	int64_t used = 0;
	for (int i = h.n - 1; i >= h.n - take; i--) {
		size_t sz = h.sizes[(h.head + i) % h.cap] + 1;
		if (used + (int64_t)sz > budget)
			break;
		used += (int64_t)sz;
		fit++;
	}
	if (take > 0 && fit == 0) {
		reply_error(r, "readHistory: the newest message on \"%s\" is %zu bytes, more than "
		    "the page budget of %lld bytes (%d%% of the broker max_payload of %lld)", ch,
		    h.sizes[(h.head + h.n - 1) % h.cap], (long long)budget, HISTORY_BUDGET_PCT,
		    (long long)mp);
		goto out;
	}
	json_t *items = json_array();
	for (int i = h.n - fit; i < h.n; i++)
		json_array_append(items, h.items[(h.head + i) % h.cap]);
	bool complete = start == 1 && (uint64_t)fit == h.seen;
	reply_data(r, json_pack("{s:o, s:b}", "items", items, "complete", complete));
	goto out;
failed:
	reply_error(r, "readHistory: %s", err);
out:
	for (int i = 0; i < h.n; i++)
		json_decref(h.items[(h.head + i) % h.cap]);
	free(h.items);
	free(h.sizes);
}
