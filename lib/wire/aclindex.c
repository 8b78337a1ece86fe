/* The read-ACL index (see aclindex.h). */
#include "lib/wire/aclindex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/kvwatch.h"
#include "lib/wire/ctlreq.h"
#include "lib/wire/tokens.h"

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

static void
free_row(void *v)
{
	acl_row_free(v);
	free(v);
}

/* A row held: a live one or a retirement (retired is forever); no row, or
 * one that does not decode, is read again when met. */
static void *
decode_row(const char *key, const char *value, size_t len)
{
	struct acl_row *r;

	(void)key;
	if (value == NULL)
		return NULL;
	if ((r = malloc(sizeof(*r))) == NULL)
		return NULL;
	acl_row_parse(value, len, r);
	if (r->state != ACL_LIVE && r->state != ACL_RETIRED) {
		free_row(r);
		return NULL;
	}
	return r;
}

static int
alias_copy(const struct aclindex_alias *from, struct aclindex_alias *to)
{
	*to = *from;
	return acl_row_copy(&from->row, &to->row);
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

/* A write of a lifecycle's row: what is held, or being read, of its alias
 * is older than it. */
static void
alias_written(void *arg, const struct kvw_entry *e)
{
	struct aclindex *x = arg;
	char alias[PRINCIPAL_MAX + 1];
	void *a;

	if (!key_alias(e->key, alias))
		return;
	kvheld_changed(&x->rows, alias);
	if ((a = strmap_del(&x->aliases, alias)) != NULL)
		free_alias(a);
}

static void
aliases_reset(void *arg)
{
	struct aclindex *x = arg;

	strmap_clear(&x->aliases, free_alias);
}

void
aclindex_init(struct aclindex *x)
{
	kvheld_init(&x->rows, ACLINDEX_ROWS_MAX, decode_row, free_row, alias_written,
	    aliases_reset, x);
	strmap_init(&x->aliases);
	x->alias_reads = 0;
}

void
aclindex_free(struct aclindex *x)
{
	kvheld_free(&x->rows);
	strmap_clear(&x->aliases, free_alias);
}

void
aclindex_alias_done(struct aclindex *x, const char *alias, const struct aclindex_alias *a)
{
	struct aclindex_alias *h;
	void *prev = NULL;

	if (!kvheld_read_end(&x->rows, alias) || a == NULL)
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
	return kvmirror_loaded(&x->rows.tail, err, errlen);
}

int
aclindex_start(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	       const char *token, char *err, size_t errlen)
{
	char bucket[KVMIRROR_BUCKET_MAX];

	strmap_init(&x->aliases);
	x->alias_reads = 0;
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", token);
	return kvheld_start(&x->rows, nc, inbox_prefix, js, bucket, ACLINDEX_ROWS_MAX, decode_row,
	    free_row, alias_written, aliases_reset, x, err, errlen);
}

void
aclindex_close(struct aclindex *x)
{
	kvmirror_close(&x->rows.tail);
	aclindex_free(x);
}

const struct acl_row *
aclindex_get(struct aclindex *x, const char *lifecycle)
{
	const struct acl_row *r = kvheld_get(&x->rows, lifecycle);

	return r != NULL && r->state == ACL_LIVE ? r : NULL;
}

int
aclindex_read_many(struct aclindex *x, const char *const *lcs, size_t n, struct acl_row *out,
		   char *err, size_t errlen)
{
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	size_t *at = calloc(n ? n : 1, sizeof(*at)), nkeys = 0;
	void **got = calloc(n ? n : 1, sizeof(*got));
	int rc = 0;

	if (keys == NULL || at == NULL || got == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto out;
	}
	memset(out, 0, n * sizeof(*out));
	/* A row held (a retirement is forever) needs no read. */
	kvheld_lock(&x->rows);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct acl_row *r = kvheld_get(&x->rows, lcs[i]);
		if (r == NULL) {
			at[nkeys] = i;
			keys[nkeys++] = lcs[i];
		} else if (acl_row_copy(r, &out[i]) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	}
	kvheld_unlock(&x->rows);
	if (rc == 0 && kvheld_read_many(&x->rows, keys, nkeys, got, err, errlen) != 0)
		rc = -1;
	for (size_t k = 0; rc == 0 && k < nkeys; k++) {
		struct acl_row *r = got[k];
		if (r == NULL)
			out[at[k]].state = ACL_UNKNOWN; /* no row, or one that does not decode */
		else {
			out[at[k]] = *r;
			free(r);
			got[k] = NULL;
		}
	}
	if (rc != 0)
		for (size_t i = 0; i < n; i++)
			acl_row_free(&out[i]);
out:
	free(keys);
	free(at);
	free(got);
	return rc;
}

int
aclindex_read(struct aclindex *x, const char *lifecycle, struct acl_row *out, char *err,
	      size_t errlen)
{
	return aclindex_read_many(x, &lifecycle, 1, out, err, errlen);
}

/* The alias's rows read from the bucket (a watch of <alias>.* alone): 0, 1
 * when the leader holds a newer one than the watch gave, -1 with err. */
static int
alias_read(struct aclindex *x, const char *alias, struct aclindex_alias *a, char *err,
	   size_t errlen)
{
	char keys[PRINCIPAL_MAX + 4], why[512];
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	uint64_t newest = 0;
	int rc = 0;

	memset(a, 0, sizeof(*a));
	snprintf(keys, sizeof(keys), "%s.*", alias);
	if (kvwatch_start_keys(&w, x->rows.tail.nc, x->rows.tail.inbox_prefix,
	    x->rows.tail.bucket, keys, err, errlen) != 0)
		return -1;
	for (int64_t until = mono_ms() + KVHELD_READ_MS;;) {
		enum kvw_event ev = kvwatch_next_by(w, until, &e, why, sizeof(why));
		if (ev == KVW_LOADED)
			break;
		if (ev == KVW_ENTRY) {
			struct acl_row r;
			const char *u = e.key + strlen(keys) - 1;
			if (e.revision > newest)
				newest = e.revision;
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
		snprintf(err, errlen, "the read-ACL rows of %s: %s", alias, why);
		rc = -1;
		break;
	}
	kvwatch_destroy(w);
	/* The watch's consumer may sit on a replica behind the leader
	 * (kvheld_newer): a row of the alias newer than it gave is read again. */
	if (rc == 0) {
		int newer = kvheld_newer(&x->rows.tail, keys, newest, err, errlen);
		if (newer != 0)
			rc = newer < 0 ? -1 : 1;
	}
	return rc;
}

int
aclindex_alias(struct aclindex *x, const char *alias, struct aclindex_alias *out, char *err,
	       size_t errlen)
{
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	struct aclindex_alias *h;
	int rc;

	memset(out, 0, sizeof(*out));
	if (strlen(alias) > PRINCIPAL_MAX || principal_parse(alias, owner, sizeof(owner), actor,
	    sizeof(actor)) != 0) {
		snprintf(err, errlen, "not an alias: %.130s", alias);
		return -1;
	}
	kvheld_lock(&x->rows);
	if ((h = strmap_get(&x->aliases, alias)) != NULL) {
		rc = alias_copy(h, out);
		kvheld_unlock(&x->rows);
		if (rc != 0)
			snprintf(err, errlen, "out of memory");
		return rc;
	}
	rc = kvheld_read_begin(&x->rows, alias);
	kvheld_unlock(&x->rows);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Read again while the leader holds a newer row than the watch gave (a
	 * write meanwhile, or a replica behind): three times, then "retry". */
	for (int tries = 0; (rc = alias_read(x, alias, out, err, errlen)) == 1; tries++) {
		aclindex_alias_free(out);
		if (tries == 2) {
			snprintf(err, errlen, "the read-ACL rows of %s keep changing", alias);
			rc = -1;
			break;
		}
	}
	kvheld_lock(&x->rows);
	x->alias_reads++;
	if (rc == 0)
		aclindex_alias_done(x, alias, out);
	else
		kvheld_read_end(&x->rows, alias);
	kvheld_unlock(&x->rows);
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
