/* The identity, lifecycle and channel tokens of WIRE.md §1 and the reply
 * inbox of §7. A space's own names are lib/names.h's. */
#ifndef COTAL_TOKENS_H
#define COTAL_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/names.h"

/* Identity token (owner, actor): ^[A-Za-z0-9_]+$ */
bool identity_token_valid(const char *s);
/* Principal owner: "local" or "u_" + 26 of [a-z2-7]. */
bool principal_owner_valid(const char *s);
/* Lifecycle UID: ^[a-z0-9]{26,32}$ */
bool lifecycle_uid_valid(const char *s);
/* Concrete channel: dotted segments of [A-Za-z0-9_-]+, at most 4096 chars. */
bool channel_concrete_valid(const char *s);
/* Channel pattern: like a channel, but a segment may be '*' and the last may
 * be '>'. */
bool channel_pattern_valid(const char *s);

/*
 * The reply inbox `cotal creds mint` grants a credential, as every Cotal
 * toolchain does: _INBOX_<its whole user public key>. nats.c appends
 * ".<nuid>" per connection, so several connections of one credential never
 * collide. A connection takes its prefix from its credential's own grants
 * (lib/creds/perms.h jwt_reply_inbox), never from this.
 */
#define INBOX_ID_LEN 56
#define INBOX_PREFIX_MAX (7 + INBOX_ID_LEN + 1)
bool inbox_prefix(const char *user_pub, char *out, size_t outlen);

#endif
