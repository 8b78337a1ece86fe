/* The read-ACL index (see aclindex.h). */
#include "lib/wire/aclindex.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/log.h"
#include "lib/nats/kvwatch.h"

static void
free_row(void *v)
{
	acl_row_free(v);
	free(v);
}

static void
apply(void *arg, const struct kvw_entry *e)
{
	struct aclindex *x = arg;
	struct acl_row *r, *old;

	if ((old = strmap_del(&x->rows, e->key)) != NULL)
		free_row(old);
	if (e->value == NULL)
		return; /* deleted: unknown owner */
	if ((r = malloc(sizeof(*r))) == NULL)
		fatalx("out of memory");
	acl_row_parse(e->value, e->len, r);
	if (strmap_put(&x->rows, e->key, r, NULL) != 0)
		fatalx("out of memory");
}

static void
reset(void *arg)
{
	struct aclindex *x = arg;

	strmap_clear(&x->rows, free_row);
}

int
aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	      const char *token, char *err, size_t errlen)
{
	char bucket[KVMIRROR_BUCKET_MAX];

	strmap_init(&x->rows);
	snprintf(bucket, sizeof(bucket), "cotal_acl_%s", token);
	return kvmirror_open(&x->mirror, nc, inbox_prefix, js, bucket, apply, reset, x, err, errlen);
}

void
aclindex_close(struct aclindex *x)
{
	kvmirror_close(&x->mirror);
	strmap_clear(&x->rows, free_row);
}

const struct acl_row *
aclindex_get(struct aclindex *x, const char *lifecycle)
{
	return strmap_get(&x->rows, lifecycle);
}
