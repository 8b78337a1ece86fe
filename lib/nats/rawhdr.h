/*
 * A message's NATS header block read and written as bytes, without
 * libnats's header map (issue 40).
 *
 * libnats 3.4.1 turns a received message's headers into a string hash on the
 * first natsMsgHeader_Get (a map, a copy of every value) and builds one for
 * every natsMsgHeader_Set, encodes it at publish and frees it on its
 * collector thread: about a fifth of the reader's CPU per copy. Its message
 * keeps the header block as the bytes that came, right before the data
 * (src/msg.c natsMsg_create), and publishes a message made with a block
 * as those bytes.
 *
 * Both depend on that layout, which is no part of the library's API: they
 * are used only when the library says it is 3.4.1 and a self-test at the
 * first call reads back, through the public API, a message made this way.
 * Otherwise, and for any block not in the plain form this reads (a status
 * line, a folded line, a lifted map), the callers take the public API as
 * before.
 */
#ifndef COTAL_RAWHDR_H
#define COTAL_RAWHDR_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#define RAWHDR_MAX 1024 /* a block built here, at most */

/* Whether the layout is the one read here (checked once). */
bool rawhdr_usable(void);

/*
 * The first value of header name in a received message m, in place (not
 * NUL-terminated), trimmed as natsMsgHeader_Get trims it: 1 with *v and
 * *vl, 0 when the block holds no such header, -1 when it cannot tell (ask
 * natsMsgHeader_Get).
 */
int rawhdr_get(natsMsg *m, const char *name, const char **v, size_t *vl);

/* The first value of header name in m, in place when rawhdr_get can tell,
 * else from natsMsgHeader_Get (then NUL-terminated, in libnats's map): 1
 * with *v and *vl, 0 when m has no such header. */
int rawhdr_value(natsMsg *m, const char *name, const char **v, size_t *vl);

/*
 * The block libnats encodes for a message given its headers with
 * natsMsgHeader_Set (n of them, names[i]: values[i], in the order libnats
 * iterates them): its length, or 0 when it does not fit out[RAWHDR_MAX].
 */
size_t rawhdr_encode(char *out, const char *const *names, const char *const *values, int n);

/* Whether libnats encodes header a before header b, set in that order on
 * a fresh message (its map's iteration order; asked of libnats once per
 * pair by the caller). */
bool rawhdr_first(const char *a, const char *b);

/* A message of the hlen bytes of a block (from rawhdr_encode) and the len
 * bytes of data right after them in buf. Only when rawhdr_usable(). */
natsStatus rawhdr_msg(natsMsg **m, const char *subj, const char *reply, const char *buf,
		      size_t hlen, size_t len);

#endif
