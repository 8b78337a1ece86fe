/*
 * The buckets as the registry reads and writes them. Reads that decide a
 * write are fresh: a KV row straight from its stream (lib/kvcas), or a
 * mirror after a barrier. Writes are compare-and-set on the row's last
 * revision, through the fence.
 */
#include "worker-registry/registry_int.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/kvcas.h"
#include "lib/nats/kvwatch.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "worker/worker.h"

int
kv_read(const char *bucket, const char *key, char **value, size_t *len, uint64_t *rev,
	char *err, size_t errlen)
{
	return kvcas_read(G.js, bucket, key, value, len, rev, err, errlen);
}

/* A membership or channel write is an effect: none after a QUIESCE. */
int
kv_write(struct request *r, const char *bucket, const char *key, const char *value, size_t len,
	 uint64_t expect, bool del, const char *origin, uint64_t *rev, char *err, size_t errlen)
{
	int rc;

	if (!effect_begin(r)) {
		snprintf(err, errlen, "%s %s/%.150s: the daemon stopped serving the shard",
		    del ? "delete" : "write", bucket, key);
		return -1;
	}
	rc = kvcas_write(G.js, bucket, key, value, len, expect, del, origin, rev, err, errlen);
	effect_done();
	return rc;
}

int
stream_last_seq(const char *stream, uint64_t *last, int64_t *max_per_subject, char *err,
		size_t errlen)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s = js_GetStreamInfo(&si, G.js, stream, NULL, &jerr);
	char what[REG_PREFIX_MAX + 32];

	if (s != NATS_OK) {
		snprintf(what, sizeof(what), "stream info %s", stream);
		conn_jserror(what, s, jerr, err, errlen);
		return -1;
	}
	*last = si->State.LastSeq;
	if (max_per_subject != NULL)
		*max_per_subject = si->Config != NULL ? si->Config->MaxMsgsPerSubject : -1;
	jsStreamInfo_Destroy(si);
	return 0;
}

int
fanout_delivered(uint64_t *seq, char *err, size_t errlen)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	natsStatus s = js_GetConsumerInfo(&ci, G.js, G.chat, "fanout", NULL, &jerr);

	*seq = 0;
	/* No fan-out bound yet: it starts at new posts, nothing behind it. */
	if (s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr)
		return 0;
	if (s != NATS_OK) {
		conn_jserror("consumer info fanout", s, jerr, err, errlen);
		return -1;
	}
	*seq = ci->Delivered.Stream;
	jsConsumerInfo_Destroy(ci);
	return 0;
}

/* ---- the members mirror ---- */

/* One more (delta 1) or one fewer (-1) row of row's lifecycle. */
static void
lc_count(const struct member_row *row, int delta)
{
	char lc[LIFECYCLE_MAX + 1];

	if (lifecycle_format(&row->who, lc, sizeof(lc)) && strmap_count(&G.lc_rows, lc, delta) < 0)
		fatalx("out of memory");
}

bool
kv_row_known(const char *key)
{
	bool known;

	kvmirror_lock(&G.members);
	known = strmap_get(&G.rows, key) != NULL;
	kvmirror_unlock(&G.members);
	return known;
}

size_t
kv_lifecycle_rows(const char *lc)
{
	size_t n;

	kvmirror_lock(&G.members);
	n = strmap_count_of(&G.lc_rows, lc);
	kvmirror_unlock(&G.members);
	return n;
}

static void
members_apply(void *arg, const struct kvw_entry *e)
{
	static struct member_row parsed; /* the watch thread's, one at a time */
	struct mrow *old, *m;

	(void)arg;
	if ((old = strmap_del(&G.rows, e->key)) != NULL) {
		lc_count(&old->row, -1);
		free(old);
	}
	if (!member_row_watched(e->key, e->value, e->len, &parsed, false))
		return;
	lc_count(&parsed, 1);
	size_t sz = offsetof(struct mrow, row) + member_row_size(&parsed);
	if ((m = malloc(sz)) == NULL)
		fatalx("out of memory");
	m->rev = e->revision;
	memcpy(&m->row, &parsed, sz - offsetof(struct mrow, row));
	if (strmap_put(&G.rows, e->key, m, NULL) != 0)
		fatalx("out of memory");
}

static void
members_reset(void *arg)
{
	(void)arg;
	strmap_clear(&G.rows, free);
	strmap_clear(&G.lc_rows, NULL);
}

/* ---- the channels mirror: who created which row ---- */

/* A row counts against the lifecycle its origin header names while that
 * message is the row's latest: the manager's rewrite or delete frees it. */
static void
channels_apply(void *arg, const struct kvw_entry *e)
{
	char *old, *lc;

	(void)arg;
	if ((old = strmap_del(&G.ch_origin, e->key)) != NULL) {
		if (strmap_count(&G.lc_channels, old, -1) < 0)
			fatalx("out of memory");
		free(old);
	}
	if (e->value == NULL || e->origin == NULL || strlen(e->origin) > LIFECYCLE_MAX)
		return;
	if ((lc = strdup(e->origin)) == NULL || strmap_put(&G.ch_origin, e->key, lc, NULL) != 0)
		fatalx("out of memory");
	if (strmap_count(&G.lc_channels, lc, 1) < 0)
		fatalx("out of memory");
}

static void
channels_reset(void *arg)
{
	(void)arg;
	strmap_clear(&G.ch_origin, free);
	strmap_clear(&G.lc_channels, NULL);
}

int
kv_lifecycle_channels(const char *lc, size_t *n, char *err, size_t errlen)
{
	if (kvmirror_barrier(&G.channels, err, errlen) != 0)
		return -1;
	kvmirror_lock(&G.channels);
	*n = strmap_count_of(&G.lc_channels, lc);
	kvmirror_unlock(&G.channels);
	return 0;
}

int
kv_open(char *err, size_t errlen)
{
	strmap_init(&G.rows);
	strmap_init(&G.lc_rows);
	strmap_init(&G.ch_origin);
	strmap_init(&G.lc_channels);
	/* The mirrors load at once: the bind takes the longest load. */
	if (kvmirror_start(&G.members, W.nc, W.cfg.inbox_prefix, G.js, G.members_bucket,
	    members_apply, members_reset, NULL, err, errlen) != 0)
		return -1;
	if (!(W.cfg.features_off & IPC_OFF_REGISTER)) {
		if (kvmirror_start(&G.channels, W.nc, W.cfg.inbox_prefix, G.js, G.channels_bucket,
		    channels_apply, channels_reset, NULL, err, errlen) != 0)
			return -1;
		G.channels_open = true;
	}
	if (aclindex_start(&G.acl, W.nc, W.cfg.inbox_prefix, G.js, G.token, err,
	    errlen) != 0 || kvmirror_loaded(&G.members, err, errlen) != 0 ||
	    (G.channels_open && kvmirror_loaded(&G.channels, err, errlen) != 0))
		return -1;
	return kvmirror_loaded(&G.acl.rows.tail, err, errlen);
}

void
kv_close(void)
{
	aclindex_close(&G.acl);
	if (G.channels_open)
		kvmirror_close(&G.channels);
	G.channels_open = false;
	channels_reset(NULL);
	kvmirror_close(&G.members);
	members_reset(NULL);
}

/* ---- read ACLs ---- */

/*
 * The caller's single live read-ACL row (WIRE.md §4: an alias resolves to
 * its single live row), after a barrier so the reading is fresh. 0 with the
 * uid and a copy of the row (acl_row_free it); -1 with the refusal in why.
 */
static int
acl_resolve(const char *op, const char *owner, const char *actor, char *uid, size_t uidlen,
	    struct acl_row *row, char *why, size_t whylen)
{
	char alias[PRINCIPAL_MAX + 1], err[512];
	struct aclindex_alias a;
	int rc = -1;

	if (!principal_format(owner, actor, alias, sizeof(alias))) {
		snprintf(why, whylen, "%s: not an alias: %s.%s", op, owner, actor);
		return -1;
	}
	/* What the alias's rows say: held since a read of them (and current
	 * once the barrier passed), or read now (lib/wire/aclindex.h). */
	if (kvmirror_barrier(&G.acl.rows.tail, err, sizeof(err)) != 0 ||
	    aclindex_alias(&G.acl, alias, &a, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "%s: cannot read the read ACLs now (%s); retry", op, err);
		return -1;
	}
	if (a.nlive == 1) {
		snprintf(uid, uidlen, "%s", a.live[0]);
		rc = acl_row_copy(&a.row, row);
		if (rc != 0)
			snprintf(why, whylen, "%s: out of memory", op);
	} else if (a.nlive > 1) {
		snprintf(why, whylen, "%s: %s has %zu live read-ACL rows (%s and %s); refusing to "
		    "guess the lifecycle", op, alias, a.nlive, a.live[0], a.live[1]);
		log_warnx("%s refused: %s has %zu live read-ACL rows (%s, %s)", op, alias, a.nlive,
		    a.live[0], a.live[1]);
	} else if (a.retired)
		snprintf(why, whylen, "%s: lifecycle %s.%s.%s is retired and never comes back", op,
		    owner, actor, a.retired_uid);
	else
		snprintf(why, whylen, "%s: no read ACL on record for %s.%s (not provisioned for "
		    "durable delivery)", op, owner, actor);
	aclindex_alias_free(&a);
	return rc;
}

int
acl_caller_reads(const char *op, const struct rail_caller *c, const char *channel, char *uid,
		 size_t uidlen, char *why, size_t whylen)
{
	struct acl_row acl;
	bool covered;

	if (acl_resolve(op, c->owner, c->actor, uid, uidlen, &acl, why, whylen) != 0)
		return -1;
	covered = acl_covers(&acl, channel);
	if (!covered)
		acl_refusal(&acl, channel, why, whylen);
	acl_row_free(&acl);
	return covered ? 0 : -1;
}

int
acl_fresh(const char *lc, struct acl_row *row, char *err, size_t errlen)
{
	const struct acl_row *r;
	int rc;

	memset(row, 0, sizeof(*row));
	if (kvmirror_barrier(&G.acl.rows.tail, err, errlen) != 0)
		return -1;
	kvmirror_lock(&G.acl.rows.tail);
	r = aclindex_get(&G.acl, lc);
	rc = r != NULL ? acl_row_copy(r, row) : 0;
	kvmirror_unlock(&G.acl.rows.tail);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Not held: read from the bucket (a live row is held from then on). */
	return r != NULL ? 0 : aclindex_read(&G.acl, lc, row, err, errlen);
}

void
acl_refusal(const struct acl_row *row, const char *channel, char *why, size_t whylen)
{
	size_t off = (size_t)snprintf(why, whylen, "channel \"%s\" is not within your read ACL [",
	    channel);

	for (size_t i = 0; i < row->npatterns && off < whylen; i++)
		off += (size_t)snprintf(why + off, whylen - off, "%s%s", i ? ", " : "",
		    row->patterns[i]);
	if (off < whylen)
		snprintf(why + off, whylen - off, "]");
}
