/* The read-ACL index (see aclindex.h). */
#include "lib/wire/aclindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/kvcas.h"
#include "lib/nats/kvwatch.h"
#include "lib/nats/msgget.h"
#include "lib/wire/ctlreq.h"
#include "lib/wire/tokens.h"

static void
free_row(void *v)
{
	struct aclindex_row *r = v;

	acl_row_free(&r->row);
	free(r);
}

void
aclindex_alias_free(struct aclindex_alias *a)
{
	acl_row_free(&a->row);
	memset(a, 0, sizeof(*a));
}

static void
free_alias(void *v)
{
	aclindex_alias_free(v);
	free(v);
}

static int
row_copy(const struct acl_row *from, struct acl_row *to)
{
	memset(to, 0, sizeof(*to));
	to->state = from->state;
	if (from->npatterns == 0)
		return 0;
	if ((to->patterns = calloc(from->npatterns, sizeof(char *))) == NULL)
		return -1;
	for (size_t i = 0; i < from->npatterns; i++) {
		if ((to->patterns[i] = strdup(from->patterns[i])) == NULL) {
			acl_row_free(to);
			return -1;
		}
		to->npatterns = i + 1;
	}
	return 0;
}

static int
alias_copy(const struct aclindex_alias *from, struct aclindex_alias *to)
{
	*to = *from;
	return row_copy(&from->row, &to->row);
}

/* A key's <o>.<a>: all before its last dot (false: none, or too long). */
static bool
key_alias(const char *key, char alias[PRINCIPAL_MAX + 1])
{
	const char *dot = strrchr(key, '.');

	if (dot == NULL || (size_t)(dot - key) > PRINCIPAL_MAX)
		return false;
	memcpy(alias, key, (size_t)(dot - key));
	alias[dot - key] = '\0';
	return true;
}

void
aclindex_init(struct aclindex *x)
{
	strmap_init(&x->rows);
	strmap_init(&x->old);
	strmap_init(&x->tombs);
	strmap_init(&x->aliases);
	strmap_init(&x->asking);
	x->tomb_resets = x->row_turns = x->reads = x->alias_reads = 0;
}

void
aclindex_free(struct aclindex *x)
{
	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->old, free_row);
	strmap_clear(&x->tombs, NULL);
	strmap_clear(&x->aliases, free_alias);
	strmap_clear(&x->asking, free);
}

/* A write of key came: a read of it under way is not to be kept. */
static void
asked_changed(struct aclindex *x, const char *key)
{
	struct aclindex_ask *a = strmap_get(&x->asking, key);

	if (a != NULL)
		a->changed = true;
}

/* The held row of a lifecycle and the generation holding it. */
static struct aclindex_row *
held(struct aclindex *x, const char *lc, struct strmap **in)
{
	struct aclindex_row *r;

	if ((r = strmap_get(&x->rows, lc)) != NULL) {
		*in = &x->rows;
		return r;
	}
	*in = &x->old;
	return strmap_get(&x->old, lc);
}

void
aclindex_apply(void *arg, const struct kvw_entry *e)
{
	struct aclindex *x = arg;
	struct aclindex_row *r;
	struct strmap *in;
	char alias[PRINCIPAL_MAX + 1];
	void *a;

	/* Whatever is read of the key, or of its alias, meanwhile is not
	 * kept; what is held of its alias is older than this. */
	asked_changed(x, e->key);
	if (key_alias(e->key, alias)) {
		asked_changed(x, alias);
		if ((a = strmap_del(&x->aliases, alias)) != NULL)
			free_alias(a);
	}
	strmap_del(&x->tombs, e->key);
	/* A held row goes at a write after the one it was read at; a write
	 * the read already saw (the tail is behind the bucket) changes
	 * nothing. */
	if ((r = held(x, e->key, &in)) != NULL && e->revision > r->rev)
		free_row(strmap_del(in, e->key));
}

void
aclindex_reset(void *arg)
{
	struct aclindex *x = arg;
	struct strmap_node *n;

	/* The tail was rebuilt: writes may have passed unseen. */
	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->old, free_row);
	strmap_clear(&x->tombs, NULL);
	strmap_clear(&x->aliases, free_alias);
	for (size_t i = 0; i < x->asking.nslots; i++)
		for (n = x->asking.slots[i]; n != NULL; n = n->next)
			((struct aclindex_ask *)n->value)->changed = true;
}

int
aclindex_read_begin(struct aclindex *x, const char *key)
{
	struct aclindex_ask *a = strmap_get(&x->asking, key);

	if (a != NULL) {
		/* Two reads of one key at once: neither is kept. */
		a->readers++;
		a->changed = true;
		return 0;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return -1;
	a->readers = 1;
	if (strmap_put(&x->asking, key, a, NULL) != 0) {
		free(a);
		return -1;
	}
	return 0;
}

bool
aclindex_read_end(struct aclindex *x, const char *key)
{
	struct aclindex_ask *a = strmap_get(&x->asking, key);
	bool clean;

	if (a == NULL)
		return false;
	clean = !a->changed && a->readers == 1;
	if (--a->readers == 0)
		free(strmap_del(&x->asking, key));
	return clean;
}

/* Hold a live row read at rev; the older generation is dropped when the
 * newer holds half the bound. */
static void
row_keep(struct aclindex *x, const char *lc, const struct acl_row *found, uint64_t rev)
{
	struct aclindex_row *r, *prev;
	struct strmap *in;

	if ((prev = held(x, lc, &in)) != NULL) {
		if (prev->rev >= rev)
			return;
		free_row(strmap_del(in, lc));
	}
	if (x->rows.count >= ACLINDEX_ROWS_MAX / 2) {
		strmap_clear(&x->old, free_row);
		x->old = x->rows;
		strmap_init(&x->rows);
		x->row_turns++;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL || row_copy(found, &r->row) != 0) {
		free(r);
		return; /* out of memory: held nothing, read again when met */
	}
	r->rev = rev;
	if (strmap_put(&x->rows, lc, r, NULL) != 0)
		free_row(r);
}

void
aclindex_read_done(struct aclindex *x, const char *lifecycle, const struct acl_row *found,
		   uint64_t rev)
{
	if (!aclindex_read_end(x, lifecycle) || found == NULL)
		return;
	if (found->state == ACL_LIVE) {
		row_keep(x, lifecycle, found, rev);
		return;
	}
	if (found->state != ACL_RETIRED)
		return; /* no row, or one that does not decode: read again when met */
	if (x->tombs.count >= ACLINDEX_TOMBS_MAX) {
		strmap_clear(&x->tombs, NULL);
		x->tomb_resets++;
	}
	if (strmap_put(&x->tombs, lifecycle, (void *)1, NULL) != 0)
		strmap_clear(&x->tombs, NULL); /* out of memory: hold nothing */
}

void
aclindex_alias_done(struct aclindex *x, const char *alias, const struct aclindex_alias *a)
{
	struct aclindex_alias *h;
	void *prev = NULL;

	if (!aclindex_read_end(x, alias) || a == NULL)
		return;
	if (x->aliases.count >= ACLINDEX_ALIASES_MAX)
		strmap_clear(&x->aliases, free_alias);
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return;
	if (alias_copy(a, h) != 0) {
		free(h);
		return;
	}
	if (strmap_put(&x->aliases, alias, h, &prev) != 0)
		free_alias(h);
	else if (prev != NULL)
		free_alias(prev);
}

int
aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	      const char *token, char *err, size_t errlen)
{
	if (aclindex_start(x, nc, inbox_prefix, js, token, err, errlen) != 0)
		return -1;
	return kvmirror_loaded(&x->mirror, err, errlen);
}

int
aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	       const char *token, char *err, size_t errlen)
{
	char bucket[KVMIRROR_BUCKET_MAX];

	aclindex_init(x);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", token);
	return kvmirror_start_tail(&x->mirror, nc, inbox_prefix, js, bucket, aclindex_apply,
	    aclindex_reset, x, err, errlen);
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
	struct aclindex_row *r = strmap_get(&x->rows, lifecycle);

	if (r == NULL && (r = strmap_get(&x->old, lifecycle)) != NULL) {
		/* Used again: it moves to the newer generation (no turn here:
		 * a caller may hold rows got before, under the same lock). */
		strmap_del(&x->old, lifecycle);
		if (strmap_put(&x->rows, lifecycle, r, NULL) != 0) {
			free_row(r);
			return NULL;
		}
	}
	return r != NULL ? &r->row : NULL;
}

/* What a read's answer says of a row: *out decoded (a value too large to
 * be a row is one that does not decode: it will not next time either). */
static void
row_of(const struct msgget_result *g, struct acl_row *out)
{
	memset(out, 0, sizeof(*out));
	if (g->rc == 1)
		acl_row_parse(g->value, g->len, out);
	else
		out->state = ACL_UNKNOWN;
}

int
aclindex_read_many(struct aclindex *x, const char *const *lcs, size_t n, struct acl_row *out,
		   char *err, size_t errlen)
{
	struct msgget_result *got = calloc(n ? n : 1, sizeof(*got));
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	bool *asked = calloc(n ? n : 1, sizeof(*asked));
	size_t nkeys = 0;
	int rc = 0;

	if (got == NULL || keys == NULL || asked == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto out;
	}
	memset(out, 0, n * sizeof(*out));
	kvmirror_lock(&x->mirror);
	for (size_t i = 0; i < n; i++) {
		if (strmap_get(&x->tombs, lcs[i]) != NULL) {
			out[i].state = ACL_RETIRED; /* retired is forever */
			continue;
		}
		if (aclindex_read_begin(x, lcs[i]) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		asked[i] = true;
		keys[nkeys++] = lcs[i];
	}
	kvmirror_unlock(&x->mirror);
	if (rc == 0 && nkeys > 0 && msgget_last_many(x->mirror.nc, x->mirror.inbox_prefix,
	    x->mirror.bucket, keys, nkeys, got, ACLINDEX_READ_MS, err, errlen) != 0)
		rc = -1;
	for (size_t i = 0; rc == 0 && i < nkeys; i++)
		if (got[i].rc < 0 && got[i].rc != KVCAS_TOO_LARGE) {
			snprintf(err, errlen, "%s", got[i].err);
			rc = -1;
		}
	kvmirror_lock(&x->mirror);
	for (size_t i = 0, k = 0; i < n; i++) {
		if (!asked[i])
			continue;
		if (rc == 0) {
			row_of(&got[k], &out[i]);
			aclindex_read_done(x, lcs[i], &out[i], got[k].rev);
			k++;
		} else
			aclindex_read_end(x, lcs[i]);
	}
	x->reads += rc == 0 ? nkeys : 0;
	kvmirror_unlock(&x->mirror);
	if (rc != 0)
		for (size_t i = 0; i < n; i++)
			acl_row_free(&out[i]);
out:
	for (size_t i = 0; got != NULL && i < nkeys; i++)
		msgget_result_free(&got[i]);
	free(got);
	free(keys);
	free(asked);
	return rc;
}

int
aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
	      size_t errlen)
{
	return aclindex_read_many(x, &lifecycle, 1, out, err, errlen);
}

/* The alias's rows read from the bucket (a watch of <alias>.* alone). */
static int
alias_read(struct aclindex *x, const char *alias, struct aclindex_alias *a, char *err,
	   size_t errlen)
{
	char keys[PRINCIPAL_MAX + 4], why[512];
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	int rc = 0;

	snprintf(keys, sizeof(keys), "%s.*", alias);
	if (kvwatch_start_keys(&w, x->mirror.nc, x->mirror.inbox_prefix, x->mirror.bucket, keys,
	    err, errlen) != 0)
		return -1;
	for (int64_t until = mono_ms() + ACLINDEX_READ_MS;;) {
		int64_t left = until - mono_ms();
		enum kvw_event ev = left > 0 ? kvwatch_next(w, (int)left, &e, why, sizeof(why)) :
		    KVW_TIMEOUT;
		if (ev == KVW_LOADED)
			break;
		if (ev == KVW_TIMEOUT && left > 0)
			continue; /* a heartbeat, or a failover looked at */
		if (ev == KVW_ENTRY) {
			struct acl_row r;
			const char *u = e.key + strlen(keys) - 1;
			if (e.value == NULL || !lifecycle_uid_valid(u))
				continue;
			acl_row_parse(e.value, e.len, &r);
			if (r.state == ACL_RETIRED) {
				a->retired = true;
				snprintf(a->retired_uid, sizeof(a->retired_uid), "%s", u);
			} else if (r.state == ACL_LIVE) {
				if (a->nlive < ACLINDEX_ALIAS_LIVES)
					snprintf(a->live[a->nlive], sizeof(a->live[0]), "%s", u);
				if (a->nlive == 0) {
					a->row = r;
					memset(&r, 0, sizeof(r));
				}
				a->nlive++;
			}
			acl_row_free(&r);
			continue;
		}
		snprintf(err, errlen, "the read-ACL rows of %s: %s", alias,
		    ev == KVW_TIMEOUT ? "not all in within 5 s" : why);
		rc = -1;
		break;
	}
	kvwatch_destroy(w);
	return rc;
}

int
aclindex_alias(struct aclindex *x, const char *alias, struct aclindex_alias *out, char *err,
	       size_t errlen)
{
	struct aclindex_alias *h;
	int rc;

	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];

	memset(out, 0, sizeof(*out));
	if (strlen(alias) > PRINCIPAL_MAX || principal_parse(alias, owner, sizeof(owner), actor,
	    sizeof(actor)) != 0) {
		snprintf(err, errlen, "not an alias: %.130s", alias);
		return -1;
	}
	kvmirror_lock(&x->mirror);
	if ((h = strmap_get(&x->aliases, alias)) != NULL) {
		rc = alias_copy(h, out);
		kvmirror_unlock(&x->mirror);
		if (rc != 0)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = aclindex_read_begin(x, alias);
	kvmirror_unlock(&x->mirror);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = alias_read(x, alias, out, err, errlen);
	kvmirror_lock(&x->mirror);
	x->alias_reads++;
	if (rc == 0)
		aclindex_alias_done(x, alias, out);
	else
		aclindex_read_end(x, alias);
	kvmirror_unlock(&x->mirror);
	if (rc != 0)
		aclindex_alias_free(out);
	return rc;
}

int
aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
		       size_t uidlen, char *err, size_t errlen)
{
	char alias[PRINCIPAL_MAX + 1];
	struct aclindex_alias a;

	uid[0] = '\0';
	if (!identity_token_valid(owner) || !identity_token_valid(actor) ||
	    strlen(owner) > IDENT_MAX || strlen(actor) > IDENT_MAX) {
		snprintf(err, errlen, "not an alias: %.64s.%.64s", owner, actor);
		return -1;
	}
	snprintf(alias, sizeof(alias), "%s.%s", owner, actor);
	if (aclindex_alias(x, alias, &a, err, errlen) != 0)
		return -1;
	if (a.retired)
		snprintf(uid, uidlen, "%s", a.retired_uid);
	aclindex_alias_free(&a);
	return uid[0] != '\0';
}
