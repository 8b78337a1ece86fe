/*
 * worker-fanout: the fan-out writer (seed, "The three pieces").
 *
 * Pulls channel posts from CHAT_<s> through the `fanout` durable and copies
 * each into the private store (INBOX_<s>) of every eligible member: one
 * entry per membership row of a durable channel, and for an @mention on a
 * live channel one per mentioned peer whose read ACL covers the channel.
 * A post is acked only after every one of its entries got its PubAck; one
 * handed over again after that is acked again without a copy (worker/
 * acked.h). It stays at most a bound ahead of the reader (lead.c).
 *
 * May: read CHAT through `fanout`, read the members, channels, presence and
 * acl buckets and the state of INBOX and its `reader`, publish
 * P.dinbox.*.*.*. Routing only: authorization stays
 * with the trusted reader and the broker.
 */
#include "worker-fanout/fanout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lib/wire/aclindex.h"
#include "lib/clock.h"
#include "lib/nats/kvmirror.h"
#include "lib/nats/kvwatch.h"
#include "lib/log.h"
#include "lib/nats/pubbatch.h"
#include "lib/nats/pull.h"
#include "worker/acked.h"
#include "worker/pullloop.h"
#include "worker-fanout/lead.h"
#include "lib/wire/records.h"
#include "lib/wire/ctlreq.h"
#include "lib/strmap.h"
#include "lib/wire/tokens.h"
#include "worker/worker.h"

#define FANOUT_ACK_WAIT_S 60
#define PRESENCE_TTL_MS 6000      /* WIRE.md §3: the roster's bucket TTL */
#define DROP_LOG_EVERY_MS 10000   /* one line per cause per this long */
#define RETRY_NAK_MS 1000         /* a post whose routing or publish failed */
#define CHANNEL_DEFAULTS "=defaults"
#define FANOUT_BATCH 256          /* posts per batch (issue 4: up to 256) */

/* Counters (ipc.c names them). */
enum { C_POSTS, C_COPIES, C_ACKED, C_DROPPED, C_RETRIED, C_BATCHES, C_REPLAYED };

/* The membership rows of one channel. */
struct roster {
	struct member_row **rows;
	size_t n, cap;
};

struct presence {
	char name[128];
	int64_t created_ms;
};

struct post;

struct fanout {
	char prefix[SPACE_TOKEN_MAX + 8];   /* cotal.<s> */
	char stream[SPACE_TOKEN_MAX + 8];   /* CHAT_<s> */
	struct pubbatch pub;
	struct puller pull;

	struct kvmirror members, channels, presence;
	struct aclindex acl;
	struct strmap rows;        /* member key -> struct member_row (members) */
	struct strmap rosters;     /* channel -> struct roster (members) */
	struct strmap configs;     /* channel -> char * value (channels) */
	struct strmap roster_live; /* <o>.<a> -> struct presence (presence) */

	char inbox[SPACE_TOKEN_MAX + 8];
	struct acked acked;        /* posts acked, by CHAT sequence */
	struct post *posts;        /* a batch's, FANOUT_BATCH of them, kept (post_reset) */
	char bound[SPACE_TOKEN_MAX + 32];
};

static struct fanout F;

/* Rate-limited drop lines, one per cause. */
enum drop_cause { DROP_SUBJECT, DROP_UNDECODABLE, DROP_INAUTHENTIC, DROP_TOO_LARGE, DROP_CAUSES };
static const char *const drop_names[DROP_CAUSES] = {
	"a subject of no chat shape", "an undecodable post", "an inauthentic post",
	"a post too large to copy",
};
/* Room a copy needs beyond its body: the dedup key header and framing. */
#define COPY_HEADROOM (DEDUP_KEY_MAX + 256)
static struct {
	int64_t last_ms;
	uint64_t suppressed;
} drop_log[DROP_CAUSES];

static void
log_drop(enum drop_cause c, uint64_t seq, const char *why)
{
	int64_t now = mono_ms();

	if (drop_log[c].last_ms != 0 && now - drop_log[c].last_ms < DROP_LOG_EVERY_MS) {
		drop_log[c].suppressed++;
		return;
	}
	if (drop_log[c].suppressed > 0)
		log_warnx("dropped %s at CHAT seq %" PRIu64 ": %s (and %" PRIu64
		    " more of this cause since the last line)", drop_names[c], seq, why,
		    drop_log[c].suppressed);
	else
		log_warnx("dropped %s at CHAT seq %" PRIu64 ": %s", drop_names[c], seq, why);
	drop_log[c].last_ms = now;
	drop_log[c].suppressed = 0;
}

/* ---- the membership index (members bucket) ---- */

static void
roster_remove(struct member_row *r)
{
	struct roster *ro = strmap_get(&F.rosters, r->channel);

	if (ro == NULL)
		return;
	for (size_t i = 0; i < ro->n; i++)
		if (ro->rows[i] == r) {
			ro->rows[i] = ro->rows[--ro->n];
			break;
		}
	if (ro->n == 0) {
		strmap_del(&F.rosters, r->channel);
		free(ro->rows);
		free(ro);
	}
}

static int
roster_add(struct member_row *r)
{
	struct roster *ro = strmap_get(&F.rosters, r->channel);

	if (ro == NULL) {
		if ((ro = calloc(1, sizeof(*ro))) == NULL ||
		    strmap_put(&F.rosters, r->channel, ro, NULL) != 0) {
			free(ro);
			return -1;
		}
	}
	if (ro->n == ro->cap) {
		size_t cap = ro->cap ? ro->cap * 2 : 4;
		struct member_row **rows = realloc(ro->rows, cap * sizeof(*rows));
		if (rows == NULL)
			return -1;
		ro->rows = rows;
		ro->cap = cap;
	}
	ro->rows[ro->n++] = r;
	return 0;
}

static void
members_apply(void *arg, const struct kvw_entry *e)
{
	static struct member_row parsed; /* the watch thread's, one at a time */
	struct member_row *old, *row;

	(void)arg;
	if ((old = strmap_del(&F.rows, e->key)) != NULL) {
		roster_remove(old);
		free(old);
	}
	if (!member_row_watched(e->key, e->value, e->len, &parsed, false))
		return;
	if ((row = member_row_compact(&parsed)) == NULL)
		fatalx("out of memory");
	if (strmap_put(&F.rows, e->key, row, NULL) != 0 || roster_add(row) != 0)
		fatalx("out of memory");
}

static void
free_roster(void *v)
{
	struct roster *ro = v;

	free(ro->rows);
	free(ro);
}

static void
members_reset(void *arg)
{
	(void)arg;
	strmap_clear(&F.rosters, free_roster);
	strmap_clear(&F.rows, free);
}

/* ---- channel configs, presence, read ACLs ---- */

static void
configs_apply(void *arg, const struct kvw_entry *e)
{
	char *copy = NULL, *old;

	(void)arg;
	if (e->value != NULL) {
		if ((copy = malloc(e->len + 1)) == NULL)
			fatalx("out of memory");
		memcpy(copy, e->value, e->len);
		copy[e->len] = '\0';
	}
	old = strmap_del(&F.configs, e->key);
	free(old);
	if (copy != NULL && strmap_put(&F.configs, e->key, copy, NULL) != 0)
		fatalx("out of memory");
}

static void
configs_reset(void *arg)
{
	(void)arg;
	strmap_clear(&F.configs, free);
}

static void
presence_apply(void *arg, const struct kvw_entry *e)
{
	struct presence *p;
	char uid[UID_MAX + 1];

	(void)arg;
	free(strmap_del(&F.roster_live, e->key));
	if (e->value == NULL)
		return;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatalx("out of memory");
	if (presence_row_parse(e->key, e->value, e->len, p->name, sizeof(p->name), uid,
	    sizeof(uid)) != 0) {
		free(p);
		return;
	}
	p->created_ms = e->created_ms;
	if (strmap_put(&F.roster_live, e->key, p, NULL) != 0)
		fatalx("out of memory");
}

static void
presence_reset(void *arg)
{
	(void)arg;
	strmap_clear(&F.roster_live, free);
}

/* ---- routing ---- */

/* One copy to make. */
struct target {
	struct lifecycle who;
	uint64_t generation;
	enum entry_reason reason;
};

struct targets {
	struct target *v;
	size_t n, cap;
};

static void
targets_add(struct targets *t, const struct lifecycle *who, uint64_t gen, enum entry_reason why)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct target *v = realloc(t->v, cap * sizeof(*v));
		if (v == NULL)
			fatalx("out of memory");
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n].who = *who;
	t->v[t->n].generation = gen;
	t->v[t->n].reason = why;
	t->n++;
}

/* Effective class (WIRE.md §4): the channel's row, then =defaults, else
 * durable. Called with the channels mirror locked. */
static enum delivery_class
class_of(const char *channel)
{
	const char *row = strmap_get(&F.configs, channel);
	const char *def = strmap_get(&F.configs, CHANNEL_DEFAULTS);

	return channel_class(row, row ? strlen(row) : 0, def, def ? strlen(def) : 0);
}

/* Durable channel: every eligible row, to its recorded lifecycle, but the
 * sender's own principal. Members mirror locked. */
static void
route_durable(const struct chat_subject *cs, uint64_t seq, struct targets *t)
{
	struct roster *ro = strmap_get(&F.rosters, cs->channel);

	if (ro == NULL)
		return;
	for (size_t i = 0; i < ro->n; i++) {
		const struct member_row *r = ro->rows[i];
		if (!membership_eligible(r, seq))
			continue;
		if (strcmp(r->who.owner, cs->owner) == 0 && strcmp(r->who.actor, cs->actor) == 0)
			continue;
		targets_add(t, &r->who, r->generation, REASON_DURABLE);
	}
}

struct name_match {
	const char *name;
	const char *key;
	int count;
	int64_t now;
};

static int
match_name(const char *key, void *value, void *arg)
{
	const struct presence *p = value;
	struct name_match *m = arg;

	/* Expired by the bucket's TTL: the broker removed it, the watch
	 * cannot tell us. */
	if (m->now - p->created_ms > PRESENCE_TTL_MS)
		return 0;
	if (strcasecmp(p->name, m->name) == 0) {
		m->key = key;
		m->count++;
	}
	return 0;
}

/*
 * Live channel: each @mention resolved against the presence roster (exactly
 * one live match), skipping the sender, to that alias's single live ACL
 * row, copied only if the row covers the channel. The aliases are matched
 * with presence locked; their rows are held by the read-ACL index or read
 * now (lib/wire/aclindex.h), after the batch's barrier. The lifecycles
 * mentioned go to *out (malloc'd, *nout of them). 0, or -1 with err when
 * the read ACLs cannot be read (the batch is retried).
 */
static int
resolve_mentions(const struct chat_subject *cs, const json_t *msg, struct lifecycle **out,
		 size_t *nout, char *err, size_t errlen)
{
	const char *names[MENTIONS_MAX];
	size_t n = post_mentions(msg, names, MENTIONS_MAX), nalias = 0;
	char sender[PRINCIPAL_MAX + 1], aliases[MENTIONS_MAX][PRINCIPAL_MAX + 1];
	struct lifecycle who;

	*out = NULL;
	*nout = 0;
	principal_format(cs->owner, cs->actor, sender, sizeof(sender));
	kvmirror_lock(&F.presence);
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < i; j++)
			seen |= strcasecmp(names[i], names[j]) == 0;
		if (seen)
			continue;
		struct name_match nm = { .name = names[i], .now = wall_ms() };
		strmap_each(&F.roster_live, match_name, &nm);
		if (nm.count != 1 || strcmp(nm.key, sender) == 0)
			continue;
		snprintf(aliases[nalias++], sizeof(aliases[0]), "%s", nm.key);
	}
	kvmirror_unlock(&F.presence);
	for (size_t i = 0; i < nalias; i++) {
		struct aclindex_alias a;
		if (aclindex_alias(&F.acl, aliases[i], &a, err, errlen) != 0) {
			free(*out);
			*out = NULL;
			*nout = 0;
			return -1;
		}
		bool covered = a.nlive == 1 && acl_covers(&a.row, cs->channel) &&
		    principal_parse(aliases[i], who.owner, sizeof(who.owner), who.actor,
		    sizeof(who.actor)) == 0 && lifecycle_uid_valid(a.live[0]);
		if (covered)
			snprintf(who.uid, sizeof(who.uid), "%s", a.live[0]);
		aclindex_alias_free(&a);
		if (!covered)
			continue;
		if (*out == NULL && (*out = calloc(MENTIONS_MAX, sizeof(**out))) == NULL)
			fatalx("out of memory");
		(*out)[(*nout)++] = who;
	}
	return 0;
}

/* ---- one batch ---- */

struct post {
	natsMsg *m;
	uint64_t seq;
	int64_t ts_ns;         /* when CHAT stored it */
	size_t copies;         /* entries published for it */
	struct chat_subject cs;
	json_t *msg;           /* NULL: dropped */
	enum delivery_class class;
	bool again;            /* acked before: acked again, not copied (worker/acked.h) */
	struct lifecycle *mentioned; /* a live channel's @mentions resolved (malloc'd) */
	size_t nmentioned;
};

/* A post made ready for the batch's next message: the array is allocated
 * once (a post holds a CHANNEL_MAX buffer; reader.c's item_reset says why
 * a batch's worth allocated anew costs), and only what a message fills is
 * written. */
static void
post_reset(struct post *p, natsMsg *m)
{
	p->m = m;
	p->seq = 0;
	p->ts_ns = 0;
	p->copies = 0;
	p->cs.owner[0] = p->cs.actor[0] = p->cs.channel[0] = '\0';
	p->msg = NULL;
	p->class = CLASS_DURABLE; /* as calloc left it: set once the barrier passed */
	p->again = false;
	p->mentioned = NULL;
	p->nmentioned = 0;
}

/* Publish every entry of post i; false when the post cannot be copied at
 * all (dropped, not retried: it would fail the same way forever). */
static bool
publish_post(int i, struct post *p, const struct targets *t)
{
	char posted[24] = "";
	char subj[SPACE_TOKEN_MAX + LIFECYCLE_MAX + 16], key[DEDUP_KEY_MAX];
	size_t plen;
	char *prefix = t->n == 0 ? NULL : entry_prefix(p->msg, p->cs.channel, p->seq,
	    t->v[0].reason, &plen);
	char *body = NULL;
	size_t cap = 0;
	enum entry_reason reason = t->n ? t->v[0].reason : REASON_DURABLE;

	if (t->n == 0) {
		free(prefix);
		return true;
	}
	if (prefix == NULL) {
		pubbatch_fail(&F.pub, i, "cannot serialize the entry");
		return true;
	}
	int64_t maxp = natsConnection_GetMaxPayload(W.nc);
	if (maxp > 0 && (int64_t)(plen + COPY_HEADROOM) > maxp) {
		char why[WHY_MAX];
		snprintf(why, sizeof(why), "its entry of %zu bytes exceeds the broker's max_payload "
		    "of %" PRId64 " bytes", plen, maxp);
		log_drop(DROP_TOO_LARGE, p->seq, why);
		free(prefix);
		return false;
	}
	/* When CHAT stored the post, for the reader's copy latency. */
	if (p->ts_ns > 0)
		snprintf(posted, sizeof(posted), "%" PRId64, p->ts_ns);
	for (size_t k = 0; k < t->n; k++) {
		const struct target *g = &t->v[k];
		if (g->reason != reason) {
			free(prefix);
			reason = g->reason;
			if ((prefix = entry_prefix(p->msg, p->cs.channel, p->seq, reason, &plen)) == NULL) {
				pubbatch_fail(&F.pub, i, "cannot serialize the entry");
				break;
			}
		}
		if (cap < plen + 32) {
			cap = plen + 32;
			if ((body = realloc(body, cap)) == NULL)
				fatalx("out of memory");
		}
		int bl = snprintf(body, cap, "%s%" PRIu64 "}", prefix, g->generation);
		snprintf(subj, sizeof(subj), "%s.dinbox.%s.%s.%s", F.prefix, g->who.owner,
		    g->who.actor, g->who.uid);
		bool has_key = dedup_key(post_id(p->msg), &g->who, g->generation, key, sizeof(key));
		pubbatch_publish(&F.pub, i, subj, body, (size_t)bl, has_key ? key : NULL,
		    posted[0] != '\0' ? POSTED_AT_HEADER : NULL, posted);
		worker_count(C_COPIES, 1);
	}
	free(body);
	free(prefix);
	return true;
}

/* Whether a post of the batch @mentions anyone: asked before the barrier,
 * when no post's class is known yet (a durable channel's mentions are not
 * resolved, but the barrier cannot tell). */
static bool
batch_has_mentions(const struct post *posts, int n)
{
	for (int i = 0; i < n; i++)
		if (posts[i].msg != NULL &&
		    json_array_size(json_object_get(posts[i].msg, "mentions")) > 0)
			return true;
	return false;
}

/*
 * Mark the posts acked before (worker/acked.h: never while the connection
 * came back and INBOX is not checked yet), and say so: a few after a lost
 * ack, a whole stream after a broker that forgot the consumer's state.
 */
static void
mark_again(struct post *posts, int n)
{
	struct acked_batch b = { 0 };

	if (!acked_check(&F.acked))
		return;
	for (int i = 0; i < n; i++)
		posts[i].again = acked_again(&F.acked, &b, posts[i].seq, posts[i].ts_ns);
	acked_say(&F.acked, "posts", &b);
}

static void
nak_all(natsMsgList *list, uint64_t ticket)
{
	if (!fence_begin(&W.fence, ticket))
		return;
	for (int i = 0; i < list->Count; i++)
		pull_nak(&F.pull, list->Msgs[i], RETRY_NAK_MS);
	fence_done(&W.fence);
	worker_count(C_RETRIED, (uint64_t)list->Count);
}

static void
fanout_batch(natsMsgList *list)
{
	uint64_t ticket = fence_ticket(&W.fence);
	struct post *posts = F.posts;
	struct targets t = { 0 };
	char why[WHY_MAX], err[512];
	static int64_t last_barrier_log;

	if (list->Count > FANOUT_BATCH)
		fatalx("a batch of %d posts, more than the %d asked for", list->Count,
		    FANOUT_BATCH);
	worker_count(C_POSTS, (uint64_t)list->Count);
	worker_count(C_BATCHES, 1);

	/* Fetch, check: decode every post before routing any. */
	for (int i = 0; i < list->Count; i++) {
		struct post *p = &posts[i];
		const struct js_ack_meta *md = pull_meta(&F.pull, i);
		post_reset(p, list->Msgs[i]);
		if (md != NULL) {
			p->seq = md->sseq;
			p->ts_ns = md->ts_ns;
		}
		if (chat_subject_parse(natsMsg_GetSubject(p->m), F.prefix, &p->cs, why,
		    sizeof(why)) != 0) {
			log_drop(DROP_SUBJECT, p->seq, why);
			continue;
		}
		switch (post_decode(natsMsg_GetData(p->m), (size_t)natsMsg_GetDataLength(p->m),
		    &p->cs, &p->msg, why, sizeof(why))) {
		case POST_OK:
			break;
		case POST_UNDECODABLE:
			log_drop(DROP_UNDECODABLE, p->seq, why);
			break;
		case POST_INAUTHENTIC:
			log_drop(DROP_INAUTHENTIC, p->seq, why);
			break;
		}
	}

	/* Posts this fan-out (or one before it) acked already, handed over
	 * again: their copies are stored, they are acked again without one. */
	mark_again(posts, list->Count);

	/* The barrier: a join or a class flip committed before this batch was
	 * fetched is seen by it. */
	struct kvmirror *mirrors[] = { &F.members, &F.channels, &F.presence, &F.acl.rows.tail };
	if (kvmirror_barrier_all(mirrors, batch_has_mentions(posts, list->Count) ? 4 : 2, err,
	    sizeof(err)) != 0) {
		if (mono_ms() - last_barrier_log > DROP_LOG_EVERY_MS) {
			log_warnx("cannot route a batch of %d posts, retrying it: %s", list->Count, err);
			last_barrier_log = mono_ms();
		}
		nak_all(list, ticket);
		goto out;
	}
	kvmirror_lock(&F.channels);
	for (int i = 0; i < list->Count; i++)
		if (posts[i].msg != NULL)
			posts[i].class = class_of(posts[i].cs.channel);
	kvmirror_unlock(&F.channels);
	for (int i = 0; i < list->Count; i++) {
		struct post *p = &posts[i];
		if (p->msg == NULL || p->again || p->class != CLASS_LIVE ||
		    json_array_size(json_object_get(p->msg, "mentions")) == 0)
			continue;
		if (resolve_mentions(&p->cs, p->msg, &p->mentioned, &p->nmentioned, err,
		    sizeof(err)) != 0) {
			if (mono_ms() - last_barrier_log > DROP_LOG_EVERY_MS) {
				log_warnx("cannot resolve the mentions of a batch of %d posts, retrying "
				    "it: %s", list->Count, err);
				last_barrier_log = mono_ms();
			}
			nak_all(list, ticket);
			goto out;
		}
	}

	/* Copy. */
	if (!fence_begin(&W.fence, ticket))
		goto out;
	if (pubbatch_begin(&F.pub, list->Count) != 0)
		fatalx("out of memory");
	for (int i = 0; i < list->Count; i++) {
		struct post *p = &posts[i];
		if (p->msg == NULL || p->again)
			continue;
		t.n = 0;
		if (p->class == CLASS_DURABLE) {
			kvmirror_lock(&F.members);
			route_durable(&p->cs, p->seq, &t);
			kvmirror_unlock(&F.members);
		} else {
			for (size_t k = 0; k < p->nmentioned; k++)
				targets_add(&t, &p->mentioned[k], 0, REASON_MENTION);
		}
		if (!publish_post(i, p, &t)) {
			json_decref(p->msg);
			p->msg = NULL; /* acked below as dropped */
		}
		p->copies = t.n;
	}
	pubbatch_wait(&F.pub);
	int64_t copied_ms = wall_ms();

	/* Ack: a post only once every entry is stored; a failed one is
	 * redelivered, never acked. */
	for (int i = 0; i < list->Count; i++) {
		if (posts[i].again && !acked_unchanged(&F.acked)) {
			/* The connection was lost meanwhile: handed back, to be
			 * checked again on the next one. */
			pull_nak(&F.pull, posts[i].m, RETRY_NAK_MS);
			worker_count(C_RETRIED, 1);
			continue;
		}
		if (posts[i].again) {
			pull_ack(&F.pull, posts[i].m);
			worker_count(C_REPLAYED, 1);
			continue;
		}
		if (posts[i].msg != NULL && pubbatch_failed(&F.pub, i)) {
			pull_nak(&F.pull, posts[i].m, RETRY_NAK_MS);
			worker_count(C_RETRIED, 1);
			continue;
		}
		pull_ack(&F.pull, posts[i].m);
		acked_put(&F.acked, posts[i].seq, posts[i].ts_ns);
		worker_count(posts[i].msg != NULL ? C_ACKED : C_DROPPED, 1);
		/* The fan-out's latency: the post stored in CHAT to its last
		 * copy stored in INBOX. */
		if (posts[i].msg != NULL && posts[i].copies > 0 && posts[i].ts_ns > 0)
			worker_latency_ms(copied_ms - posts[i].ts_ns / 1000000);
	}
	if (F.pub.error[0] != '\0')
		log_warnx("a publish failed, its posts will be redelivered: %s", F.pub.error);
	fence_done(&W.fence);
	acked_stored(&F.acked, F.pub.max_seq);
	lead_copied(F.pub.max_seq, list->Count);
out:
	for (int i = 0; i < list->Count; i++) {
		json_decref(posts[i].msg);
		free(posts[i].mentioned);
	}
	free(t.v);
}

/* ---- set-up and the loop ---- */

static void
teardown(void)
{
	aclindex_close(&F.acl);
	kvmirror_close(&F.presence);
	kvmirror_close(&F.channels);
	kvmirror_close(&F.members);
	members_reset(NULL);
	configs_reset(NULL);
	presence_reset(NULL);
	pull_close(&F.pull);
	acked_close(&F.acked);
	lead_close();
	pubbatch_destroy(&F.pub);
}

static int
setup(char *err, size_t errlen)
{
	char token[SPACE_TOKEN_MAX + 1], filter[SPACE_TOKEN_MAX + 16], bucket[KVMIRROR_BUCKET_MAX];
	jsConsumerConfig cc;

	space_token(W.cfg.space, token, sizeof(token));
	snprintf(F.prefix, sizeof(F.prefix), "cotal.%s", token);
	snprintf(F.stream, sizeof(F.stream), "CHAT_%s", token);
	snprintf(F.inbox, sizeof(F.inbox), "INBOX_%s", token);
	snprintf(filter, sizeof(filter), "cotal.%s.chat.>", token);
	if (pubbatch_init(&F.pub, W.nc, W.cfg.inbox_prefix) != 0) {
		snprintf(err, errlen, "cannot make a JetStream context or subscribe for PubAcks");
		return -1;
	}
	/* WIRE.md §3: durable pull, explicit ack, ack wait 60 s, deliver new. */
	jsConsumerConfig_Init(&cc);
	cc.Durable = "fanout";
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = (int64_t)FANOUT_ACK_WAIT_S * 1000000000;
	cc.DeliverPolicy = js_DeliverNew;
	if (pull_bind(F.pub.js, W.nc, W.cfg.inbox_prefix, F.stream, &cc, &F.pull, err,
	    errlen) != 0)
		return -1;
	snprintf(bucket, sizeof(bucket), "cotal_members_%s", token);
	/* The four mirrors load at once: the bind takes the longest load. */
	if (kvmirror_start(&F.members, W.nc, W.cfg.inbox_prefix, F.pub.js, bucket, members_apply,
	    members_reset, NULL, err, errlen) != 0)
		return -1;
	snprintf(bucket, sizeof(bucket), "cotal_channels_%s", token);
	if (kvmirror_start(&F.channels, W.nc, W.cfg.inbox_prefix, F.pub.js, bucket, configs_apply,
	    configs_reset, NULL, err, errlen) != 0)
		return -1;
	snprintf(bucket, sizeof(bucket), "cotal_presence_%s", token);
	if (kvmirror_start(&F.presence, W.nc, W.cfg.inbox_prefix, F.pub.js, bucket, presence_apply,
	    presence_reset, NULL, err, errlen) != 0)
		return -1;
	if (aclindex_start(&F.acl, W.nc, W.cfg.inbox_prefix, F.pub.js, token, err,
	    errlen) != 0)
		return -1;
	if (kvmirror_loaded(&F.members, err, errlen) != 0 ||
	    kvmirror_loaded(&F.channels, err, errlen) != 0 ||
	    kvmirror_loaded(&F.presence, err, errlen) != 0 ||
	    kvmirror_loaded(&F.acl.rows.tail, err, errlen) != 0)
		return -1;
	snprintf(F.bound, sizeof(F.bound), "%s durable fanout", F.stream);
	lead_open(F.pub.js, F.inbox);
	acked_open(&F.acked, W.nc, F.pub.js, F.stream, "fanout", F.inbox);
	return 0;
}

static bool
may_fetch(void)
{
	acked_tick(&F.acked);
	return lead_wait();
}

static void
fanout_run(void)
{
	const struct pull_loop loop = {
		.what = "fan-out", .setup = setup, .teardown = teardown, .may_fetch = may_fetch,
		.batch = fanout_batch, .pull = &F.pull, .batch_max = FANOUT_BATCH, .bound = F.bound,
	};

	strmap_init(&F.rows);
	strmap_init(&F.rosters);
	strmap_init(&F.configs);
	strmap_init(&F.roster_live);
	if ((F.posts = calloc(FANOUT_BATCH, sizeof(*F.posts))) == NULL)
		fatalx("out of memory");
	pull_loop_run(&loop);
	free(F.posts);
	F.posts = NULL;
}

const struct worker_role fanout_role = {
	.name = "fanout",
	.sandbox = SANDBOX_FANOUT,
	.run = fanout_run,
};
