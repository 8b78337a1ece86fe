/* String-keyed hash map (see strmap.h). FNV-1a, chained buckets. */
#include "lib/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STRMAP_MIN_SLOTS 64

size_t
strmap_hash(const char *k)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *k != '\0'; k++) {
		h ^= (unsigned char)*k;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

void
strmap_init(struct strmap *m)
{
	memset(m, 0, sizeof(*m));
}

void
strmap_clear(struct strmap *m, void (*free_value)(void *))
{
	for (size_t i = 0; i < m->nslots; i++) {
		struct strmap_node *n = m->slots[i], *next;
		for (; n != NULL; n = next) {
			next = n->next;
			if (free_value != NULL)
				free_value(n->value);
			free(n);
		}
	}
	free(m->slots);
	strmap_init(m);
}

static struct strmap_node **
find(const struct strmap *m, const char *key, size_t h)
{
	struct strmap_node **p;

	if (m->nslots == 0)
		return NULL;
	for (p = &m->slots[h % m->nslots]; *p != NULL; p = &(*p)->next)
		if ((*p)->hash == h && strcmp((*p)->key, key) == 0)
			return p;
	return NULL;
}

void *
strmap_get(const struct strmap *m, const char *key)
{
	struct strmap_node **p = find(m, key, strmap_hash(key));

	return p != NULL ? (*p)->value : NULL;
}

const char *
strmap_key(const struct strmap *m, const char *key)
{
	struct strmap_node **p = find(m, key, strmap_hash(key));

	return p != NULL ? (*p)->key : NULL;
}

static int
grow(struct strmap *m)
{
	size_t n = m->nslots ? m->nslots * 2 : STRMAP_MIN_SLOTS;
	struct strmap_node **slots = calloc(n, sizeof(*slots));

	if (slots == NULL)
		return -1;
	for (size_t i = 0; i < m->nslots; i++) {
		struct strmap_node *e = m->slots[i], *next;
		for (; e != NULL; e = next) {
			next = e->next;
			e->next = slots[e->hash % n];
			slots[e->hash % n] = e;
		}
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
	return 0;
}

int
strmap_put(struct strmap *m, const char *key, void *value, void **old)
{
	size_t h = strmap_hash(key), kl = strlen(key);
	struct strmap_node **p = find(m, key, h), *n;

	if (old != NULL)
		*old = NULL;
	if (p != NULL) {
		if (old != NULL)
			*old = (*p)->value;
		(*p)->value = value;
		return 0;
	}
	if (m->count >= m->nslots && grow(m) != 0)
		return -1;
	if ((n = malloc(sizeof(*n) + kl + 1)) == NULL)
		return -1;
	memcpy(n->key, key, kl + 1);
	n->hash = h;
	n->value = value;
	n->next = m->slots[h % m->nslots];
	m->slots[h % m->nslots] = n;
	m->count++;
	return 0;
}

void *
strmap_del(struct strmap *m, const char *key)
{
	struct strmap_node **p = find(m, key, strmap_hash(key)), *n;
	void *v;

	if (p == NULL)
		return NULL;
	n = *p;
	*p = n->next;
	v = n->value;
	free(n);
	m->count--;
	return v;
}

int
strmap_each(const struct strmap *m, int (*fn)(const char *key, void *value, void *arg), void *arg)
{
	for (size_t i = 0; i < m->nslots; i++)
		for (struct strmap_node *n = m->slots[i]; n != NULL; n = n->next) {
			int rc = fn(n->key, n->value, arg);
			if (rc != 0)
				return rc;
		}
	return 0;
}

long
strmap_count(struct strmap *m, const char *key, long delta)
{
	uintptr_t n = (uintptr_t)strmap_get(m, key) + (uintptr_t)delta;

	if (n == 0) {
		strmap_del(m, key);
		return 0;
	}
	return strmap_put(m, key, (void *)n, NULL) != 0 ? -1 : (long)n;
}

size_t
strmap_count_of(const struct strmap *m, const char *key)
{
	return (size_t)(uintptr_t)strmap_get(m, key);
}
