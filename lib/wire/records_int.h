/*
 * What lib/wire/records.c and lib/wire/entries.c share: the bounded JSON decode and
 * encode of a record and the cursor check. Not for other callers.
 */
#ifndef COTAL_RECORDS_INT_H
#define COTAL_RECORDS_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Decode a bounded JSON object (at most RECORD_MAX bytes, no duplicate
 * keys); NULL when it is not one. */
json_t *decode_object(const char *data, size_t len);
/* A cursor: a non-negative integer into *out; 0, or -1. */
int get_cursor(json_t *v, uint64_t *out);
/* Compact, key order kept; malloc'd, *len its length. */
char *dump(json_t *v, size_t *len);

#endif
