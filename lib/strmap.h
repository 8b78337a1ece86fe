/*
 * A string-keyed hash map (chained, grows at load 1), for the in-memory
 * mirrors of KV buckets. Not thread-safe: the owner locks.
 */
#ifndef COTAL_STRMAP_H
#define COTAL_STRMAP_H

#include <stddef.h>

struct strmap_node {
	struct strmap_node *next;
	size_t hash;
	void *value;
	char key[];
};

struct strmap {
	struct strmap_node **slots;
	size_t nslots;
	size_t count;
};

/* The map's hash of a key (FNV-1a), for an index of its own over keys. */
size_t strmap_hash(const char *key);
void strmap_init(struct strmap *m);
/* Free every node; free_value (may be NULL) is called on each value. */
void strmap_clear(struct strmap *m, void (*free_value)(void *));
void *strmap_get(const struct strmap *m, const char *key);
/* Insert or replace; the old value (or NULL) is returned through old.
 * -1 when out of memory. */
int strmap_put(struct strmap *m, const char *key, void *value, void **old);
/* The map's own copy of key (valid until the entry is removed), or NULL. */
const char *strmap_key(const struct strmap *m, const char *key);
/* Remove; returns the value or NULL. */
void *strmap_del(struct strmap *m, const char *key);
/* A count kept as the value of key (no allocation of its own): add delta
 * (the entry goes when it reaches 0) and return the new count, or -1 when
 * out of memory. strmap_count_of reads it (0 when absent). */
long strmap_count(struct strmap *m, const char *key, long delta);
size_t strmap_count_of(const struct strmap *m, const char *key);
/* Visit every entry; stop when fn returns non-zero (returned). */
int strmap_each(const struct strmap *m, int (*fn)(const char *key, void *value, void *arg),
		void *arg);

#endif
