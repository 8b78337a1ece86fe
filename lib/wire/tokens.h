/* Tokens and names of WIRE.md §1 and §8. */
#ifndef COTAL_TOKENS_H
#define COTAL_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#define SPACE_NAME_MAX 256
#define SPACE_TOKEN_MAX SPACE_NAME_MAX      /* one char per input byte */
#define SPACE_KEY_MAX (2 * SPACE_NAME_MAX)  /* hex of the UTF-8 bytes */

/* Space/routing token: every byte outside [A-Za-z0-9_-] becomes '_'; empty
 * becomes "_". Returns false when out is too small. */
bool space_token(const char *name, char *out, size_t outlen);
/* <key>: lowercase hex of the space name's bytes. false when too small. */
bool space_key(const char *name, char *out, size_t outlen);
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
 * (lib/perms.h jwt_reply_inbox), never from this.
 */
#define INBOX_ID_LEN 56
#define INBOX_PREFIX_MAX (7 + INBOX_ID_LEN + 1)
bool inbox_prefix(const char *user_pub, char *out, size_t outlen);

#endif
