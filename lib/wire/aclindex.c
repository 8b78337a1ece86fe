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

static void
free_lives(void *v)
{
	struct aclindex_lives *l = v;

	free(l->lc);
	free(l);
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

/* The alias of a lifecycle key, when it is one (a valid <o>.<a>.<uid>). */
static bool
alias_of(const char *lc, char alias[PRINCIPAL_MAX + 1])
{
	struct lifecycle who;

	return lifecycle_parse(lc, &who) == 0 && key_alias(lc, alias);
}

/* A live row's key (the rows map's own copy) joins its alias's lives. */
static void
lives_add(struct aclindex *x, const char *lc)
{
	char alias[PRINCIPAL_MAX + 1];
	struct aclindex_lives *l;

	if (!x->by_alias || lc == NULL || !alias_of(lc, alias))
		return;
	if ((l = strmap_get(&x->lives, alias)) == NULL) {
		if ((l = calloc(1, sizeof(*l))) == NULL ||
		    strmap_put(&x->lives, alias, l, NULL) != 0)
			fatalx("out of memory");
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1;
		const char **v = realloc(l->lc, cap * sizeof(*v));
		if (v == NULL)
			fatalx("out of memory");
		l->lc = v;
		l->cap = cap;
	}
	l->lc[l->n++] = lc;
}

/* Before a live row goes: its key leaves its alias's lives. */
static void
lives_del(struct aclindex *x, const char *lc)
{
	char alias[PRINCIPAL_MAX + 1];
	struct aclindex_lives *l;

	if (!x->by_alias || !alias_of(lc, alias) ||
	    (l = strmap_get(&x->lives, alias)) == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->lc[i], lc) == 0) {
			l->lc[i] = l->lc[--l->n];
			break;
		}
	if (l->n == 0)
		free_lives(strmap_del(&x->lives, alias));
}

size_t
aclindex_alias_lives(struct aclindex *x, const char *alias, const char **lcs, size_t max)
{
	struct aclindex_lives *l = strmap_get(&x->lives, alias);

	if (l == NULL)
		return 0;
	for (size_t i = 0; i < l->n && i < max; i++)
		lcs[i] = l->lc[i];
	return l->n;
}

void
aclindex_init(struct aclindex *x, bool by_alias)
{
	x->by_alias = by_alias;
	strmap_init(&x->lives);
	strmap_init(&x->rows);
	strmap_init(&x->tombs);
	strmap_init(&x->aliases);
	strmap_init(&x->asking);
	x->tomb_resets = 0;
}

void
aclindex_free(struct aclindex *x)
{
	strmap_clear(&x->lives, free_lives);
	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->tombs, NULL);
	strmap_clear(&x->aliases, free);
	strmap_clear(&x->asking, free);
}

/* A write of key came: a read of it under way is not to be remembered. */
static void
asked_changed(struct aclindex *x, const char *key)
{
	struct aclindex_ask *a = strmap_get(&x->asking, key);

	if (a != NULL)
		a->changed = true;
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
	struct acl_row *r;
	char alias[PRINCIPAL_MAX + 1];

	if (strmap_get(&x->rows, e->key) != NULL) {
		lives_del(x, e->key); /* before its key, which lives holds, is freed */
		free_row(strmap_del(&x->rows, e->key));
	}
	/* Whatever was read of the key, or of its alias, is older than this. */
	strmap_del(&x->tombs, e->key);
	asked_changed(x, e->key);
	if (key_alias(e->key, alias)) {
		free(strmap_del(&x->aliases, alias));
		asked_changed(x, alias);
	}
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
	lives_add(x, strmap_key(&x->rows, e->key));
}

void
aclindex_reset(void *arg)
{
	struct aclindex *x = arg;
	struct strmap_node *n;

	strmap_clear(&x->lives, free_lives);
	strmap_clear(&x->rows, free_row);
	strmap_clear(&x->tombs, NULL);
	strmap_clear(&x->aliases, free);
	/* A rebuilt watch may have passed writes of the keys being read. */
	for (size_t i = 0; i < x->asking.nslots; i++)
		for (n = x->asking.slots[i]; n != NULL; n = n->next)
			((struct aclindex_ask *)n->value)->changed = true;
}

int
aclindex_read_begin(struct aclindex *x, const char *key)
{
	struct aclindex_ask *a = strmap_get(&x->asking, key);

	if (a != NULL) {
		/* Two reads of one key at once: neither is remembered. */
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

void
aclindex_read_done(struct aclindex *x, const char *lifecycle, const struct acl_row *found)
{
	if (!aclindex_read_end(x, lifecycle) || found == NULL || found->state != ACL_RETIRED)
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
	      const char *token, bool by_alias, char *err, size_t errlen)
{
	if (aclindex_start(x, nc, inbox_prefix, js, token, by_alias, err, errlen) != 0)
		return -1;
	return kvmirror_loaded(&x->mirror, err, errlen);
}

int
aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	       const char *token, bool by_alias, char *err, size_t errlen)
{
	char bucket[KVMIRROR_BUCKET_MAX];

	aclindex_init(x, by_alias);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", token);
	return kvmirror_start(&x->mirror, nc, inbox_prefix, js, bucket, aclindex_apply,
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

/* The bucket's row of a lifecycle: 1 with it in *out, 0 for none (never
 * written, deleted or purged), -1 with err. A value too large to be a row
 * is read as one that does not decode (ACL_UNKNOWN): it will not decode
 * next time either. */
static int
read_row(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
	 size_t errlen)
{
	char *value = NULL;
	size_t len = 0;
	uint64_t rev = 0;
	int rc = kvcas_read(x->mirror.js, x->mirror.bucket, lifecycle, &value, &len, &rev, err,
	    errlen);

	if (rc == KVCAS_TOO_LARGE)
		return 1;
	if (rc > 0)
		acl_row_parse(value, len, out);
	free(value);
	return rc;
}

int
aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
	      size_t errlen)
{
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
	rc = read_row(x, lifecycle, out, err, errlen);
	kvmirror_lock(&x->mirror);
	aclindex_read_done(x, lifecycle, rc < 0 ? NULL : out);
	kvmirror_unlock(&x->mirror);
	return rc < 0 ? -1 : 0;
}

int
aclindex_alias_retired(struct aclindex *x, const char *owner, const char *actor, char *uid,
		       size_t uidlen, char *err, size_t errlen)
{
	char alias[PRINCIPAL_MAX + 1], keys[PRINCIPAL_MAX + 4], why[512];
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	int found = 0;

	uid[0] = '\0';
	if (!identity_token_valid(owner) || !identity_token_valid(actor) ||
	    strlen(owner) > IDENT_MAX || strlen(actor) > IDENT_MAX) {
		snprintf(err, errlen, "not an alias: %.64s.%.64s", owner, actor);
		return -1;
	}
	snprintf(alias, sizeof(alias), "%s.%s", owner, actor);
	kvmirror_lock(&x->mirror);
	struct aclindex_alias *known = strmap_get(&x->aliases, alias);
	if (known != NULL) {
		snprintf(uid, uidlen, "%s", known->uid);
		found = known->retired;
		kvmirror_unlock(&x->mirror);
		return found;
	}
	int began = aclindex_read_begin(x, alias);
	kvmirror_unlock(&x->mirror);
	if (began != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(keys, sizeof(keys), "%s.*", alias);
	if (kvwatch_start_keys(&w, x->mirror.nc, x->mirror.inbox_prefix, x->mirror.bucket, keys,
	    err, errlen) != 0) {
		found = -1;
		goto out;
	}
	for (int64_t until = mono_ms() + ALIAS_READ_MS;;) {
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
				snprintf(uid, uidlen, "%s", u);
				found = 1;
			}
			acl_row_free(&r);
			continue;
		}
		snprintf(err, errlen, "the read-ACL rows of %s: %s", alias,
		    ev == KVW_TIMEOUT ? "not all in within 5 s" : why);
		found = -1;
		break;
	}
	kvwatch_destroy(w);
out:
	kvmirror_lock(&x->mirror);
	if (aclindex_read_end(x, alias) && found >= 0) {
		struct aclindex_alias *a = calloc(1, sizeof(*a));
		if (x->aliases.count >= ACLINDEX_ALIASES_MAX)
			strmap_clear(&x->aliases, free);
		if (a != NULL) {
			a->retired = found == 1;
			snprintf(a->uid, sizeof(a->uid), "%s", uid);
			if (strmap_put(&x->aliases, alias, a, NULL) != 0)
				free(a);
		}
	}
	kvmirror_unlock(&x->mirror);
	return found;
}
