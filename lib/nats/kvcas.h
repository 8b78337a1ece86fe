/*
 * KV rows read and written on the stream level, for writes that must be
 * compare-and-set: a row read fresh from its stream with its revision, and
 * a write (or delete marker) that the broker accepts only when the row's
 * last revision is still the one expected. Made here rather than with
 * kvStore_Update, which hides the CAS error code (STYLE.md pitfalls): a
 * conflict must be told from any other failure.
 */
#ifndef COTAL_KVCAS_H
#define COTAL_KVCAS_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVCAS_VALUE_MAX (1024 * 1024) /* a row we read */

/*
 * The latest value of key in bucket: 1 with value (malloc'd, NUL-ended)
 * and rev; 0 when absent or deleted (rev: the delete marker's sequence, or
 * 0 when the key has no message); -1 with err; KVCAS_TOO_LARGE (also
 * negative) with err when the value passes KVCAS_VALUE_MAX (rev is set).
 */
#define KVCAS_TOO_LARGE (-2)
int kvcas_read(jsCtx *js, const char *bucket, const char *key, char **value, size_t *len,
	       uint64_t *rev, char *err, size_t errlen);

/*
 * Write key at expected revision expect (0: the key has no message yet);
 * del: a delete marker instead of a value. origin (NULL: none) names the
 * writer in the message's KVW_ORIGIN_HEADER (lib/nats/kvwatch.h), beside
 * the value, not in it. 0 with *rev, 1 on a CAS conflict, -1 with err (the
 * broker's or the library's words).
 */
int kvcas_write(jsCtx *js, const char *bucket, const char *key, const char *value, size_t len,
		uint64_t expect, bool del, const char *origin, uint64_t *rev, char *err,
		size_t errlen);

#endif
