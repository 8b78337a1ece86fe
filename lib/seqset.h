/*
 * A set of stream sequences, as a worker remembers the messages it
 * acknowledged on its consumer: a floor (every sequence at or below it is
 * in the set) and, above the floor, up to SEQSET_MAX sequences one by one.
 * A sequence next to the floor joins it, so a consumer acknowledged in
 * order costs nothing but the floor.
 *
 * Bounded: a set that is full forgets its lowest half. What a caller
 * forgets it does again; the set never claims a sequence that was not put
 * in. Pure, no locking.
 */
#ifndef COTAL_SEQSET_H
#define COTAL_SEQSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEQSET_MAX 65536

struct seqset {
	uint64_t floor;  /* every sequence <= floor is in */
	uint64_t *v;     /* ascending, each > floor + 1 */
	size_t n, cap;
};

void seqset_init(struct seqset *s);
void seqset_free(struct seqset *s);
/* Empty again (floor 0). */
void seqset_clear(struct seqset *s);
/* Put seq in. 0, or -1 when out of memory (the set is unchanged). */
int seqset_add(struct seqset *s, uint64_t seq);
/* Every sequence <= floor is in (a lower floor changes nothing). */
void seqset_raise(struct seqset *s, uint64_t floor);
bool seqset_has(const struct seqset *s, uint64_t seq);

#endif
