/*
 * The read-ACL rows of a space (cotal_acl_<s>), mirrored in memory and
 * decoded once per write: lifecycle key <o>.<a>.<uid> -> struct acl_row.
 * Shared by the fan-out (mentions) and the reader (every entry).
 */
#ifndef COTAL_ACLINDEX_H
#define COTAL_ACLINDEX_H

#include "lib/nats/kvmirror.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"

struct aclindex {
	struct kvmirror mirror;
	struct strmap rows;
};

/* Open the mirror of cotal_acl_<token>; 0, or -1 with err (close it then). */
int aclindex_open(struct aclindex *x, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		  const char *token, char *err, size_t errlen);
void aclindex_close(struct aclindex *x);
/* The row of a lifecycle, or NULL: with the mirror locked. */
const struct acl_row *aclindex_get(struct aclindex *x, const char *lifecycle);

#endif
