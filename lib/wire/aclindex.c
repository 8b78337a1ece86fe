/* The read-ACL index (see aclindex.h). */
#include "lib/wire/aclindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/kvcas.h"
#include "lib/nats/kvwatch.h"
#include "lib/wire/tokens.h"

#define ALIAS_READ_MS 5000 /* an alias's rows are all in within this */

static void
free_row(void *v)
{
	acl_row_free(v);
	free(v);
}

void
aclindex_init(struct aclindex *x)
{
	strmap_init(&x->rows);
	strmap_init(&x->tombs);
	strmap_init(&x->asking);
	x->tomb_resets = 0;
}

void
aclindex_free(struct aclindex *x)
{
	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->tombs, NULL);
	strmap_clear(&x->asking, NULL);
}

/* A live row is kept; a tombstone or a row that does not decode is not.
 * Only a value naming "retired" is decoded here (a live row is decoded
 * once, when applied); any other the apply decodes and drops if need be. */
bool
aclindex_keep(void *arg, const struct kvw_entry *e)
{
	struct acl_row r;
	bool live;

	(void)arg;
	if (e->value == NULL)
		return false;
	if (memmem(e->value, e->len, "retired", strlen("retired")) == NULL)
		return true;
	acl_row_parse(e->value, e->len, &r);
	live = r.state == ACL_LIVE;
	acl_row_free(&r);
	return live;
}

void
aclindex_apply(void *arg, const struct kvw_entry *e)
{
	struct aclindex *x = arg;
	struct acl_row *r, *old;

	if ((old = strmap_del(&x->rows, e->key)) != NULL)
		free_row(old);
	/* Whatever was read of the key before is older than this. */
	strmap_del(&x->tombs, e->key);
	if (strmap_get(&x->asking, e->key) != NULL &&
	    strmap_put(&x->asking, e->key, ACLINDEX_ASK_CHANGED, NULL) != 0)
		fatalx("out of memory");
	if (e->value == NULL)
		return; /* deleted: no row */
	if ((r = malloc(sizeof(*r))) == NULL)
		fatalx("out of memory");
	acl_row_parse(e->value, e->len, r);
	if (r->state != ACL_LIVE) {
		free_row(r); /* retired or undecodable: read when met */
		return;
	}
	if (strmap_put(&x->rows, e->key, r, NULL) != 0)
		fatalx("out of memory");
}

void
aclindex_reset(void *arg)
{
	struct aclindex *x = arg;
	struct strmap_node *n;

	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->tombs, NULL);
	/* A rebuilt watch may have passed writes of the keys being read. */
	for (size_t i = 0; i < x->asking.nslots; i++)
		for (n = x->asking.slots[i]; n != NULL; n = n->next)
			n->value = ACLINDEX_ASK_CHANGED;
}

int
aclindex_read_begin(struct aclindex *x, const char *lifecycle)
{
	/* Two reads of one key at once: neither is remembered. */
	void *was = strmap_get(&x->asking, lifecycle);

	return strmap_put(&x->asking, lifecycle,
	    was != NULL ? ACLINDEX_ASK_CHANGED : ACLINDEX_ASK_CLEAN, NULL);
}

void
aclindex_read_done(struct aclindex *x, const char *lifecycle, const struct acl_row *found)
{
	void *how = strmap_del(&x->asking, lifecycle);

	if (how != ACLINDEX_ASK_CLEAN || found == NULL || found->state != ACL_RETIRED)
		return;
	if (x->tombs.count >= ACLINDEX_TOMBS_MAX) {
		strmap_clear(&x->tombs, NULL);
		x->tomb_resets++;
	}
	if (strmap_put(&x->tombs, lifecycle, (void *)1, NULL) != 0)
		strmap_clear(&x->tombs, NULL); /* out of memory: remember nothing */
}

int
aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	      const char *token, char *err, size_t errlen)
{
	char bucket[KVMIRROR_BUCKET_MAX];

	aclindex_init(x);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", token);
	return kvmirror_open_kept(&x->mirror, nc, inbox_prefix, js, bucket, aclindex_apply,
	    aclindex_reset, aclindex_keep, x, err, errlen);
}

void
aclindex_close(struct aclindex *x)
{
	kvmirror_close(&x->mirror);
	aclindex_free(x);
}

const struct acl_row *
aclindex_get(struct aclindex *x, const char *lifecycle)
{
	return strmap_get(&x->rows, lifecycle);
}

int
aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
	      size_t errlen)
{
	char *value = NULL;
	size_t len = 0;
	uint64_t rev = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	kvmirror_lock(&x->mirror);
	if (strmap_get(&x->tombs, lifecycle) != NULL) {
		kvmirror_unlock(&x->mirror);
		out->state = ACL_RETIRED;
		return 0;
	}
	rc = aclindex_read_begin(x, lifecycle);
	kvmirror_unlock(&x->mirror);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = kvcas_read(x->mirror.js, x->mirror.bucket, lifecycle, &value, &len, &rev, err,
	    errlen);
	if (rc > 0)
		acl_row_parse(value, len, out);
	free(value);
	kvmirror_lock(&x->mirror);
	aclindex_read_done(x, lifecycle, rc < 0 ? NULL : out);
	kvmirror_unlock(&x->mirror);
	return rc < 0 ? -1 : 0;
}

int
aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
		       size_t uidlen, char *err, size_t errlen)
{
	char keys[PRINCIPAL_MAX + 4], why[512];
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	int found = 0;

	uid[0] = '\0';
	if (!identity_token_valid(owner) || !identity_token_valid(actor)) {
		snprintf(err, errlen, "not an alias: %.64s.%.64s", owner, actor);
		return -1;
	}
	snprintf(keys, sizeof(keys), "%s.%s.*", owner, actor);
	if (kvwatch_start_keys(&w, x->mirror.nc, x->mirror.inbox_prefix, x->mirror.bucket, keys,
	    err, errlen) != 0)
		return -1;
	for (int64_t until = mono_ms() + ALIAS_READ_MS;;) {
		int64_t left = until - mono_ms();
		enum kvw_event ev = left > 0 ? kvwatch_next(w, (int)left, &e, why, sizeof(why)) :
		    KVW_TIMEOUT;
		if (ev == KVW_LOADED)
			break;
		if (ev == KVW_ENTRY) {
			struct acl_row r;
			const char *u = e.key + strlen(keys) - 1;
			if (e.value == NULL || !lifecycle_uid_valid(u))
				continue;
			acl_row_parse(e.value, e.len, &r);
			if (r.state == ACL_RETIRED) {
				snprintf(uid, uidlen, "%s", u);
				found = 1;
			}
			acl_row_free(&r);
			continue;
		}
		snprintf(err, errlen, "the read-ACL rows of %s.%s: %s", owner, actor,
		    ev == KVW_TIMEOUT ? "not all in within 5 s" : why);
		kvwatch_destroy(w);
		return -1;
	}
	kvwatch_destroy(w);
	return found;
}
