/* A bounded set of stream sequences (seqset.h). */
#include "lib/seqset.h"

#include <stdlib.h>
#include <string.h>

void
seqset_init(struct seqset *s)
{
	memset(s, 0, sizeof(*s));
}

void
seqset_free(struct seqset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

void
seqset_clear(struct seqset *s)
{
	s->floor = 0;
	s->n = 0;
}

/* The first index whose sequence is >= seq. */
static size_t
lower_bound(const struct seqset *s, uint64_t seq)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid] < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Drop v[0..k) and let the floor take up the run that now follows it. */
static void
settle(struct seqset *s, size_t k)
{
	while (k < s->n && s->v[k] <= s->floor + 1) {
		if (s->v[k] > s->floor)
			s->floor = s->v[k];
		k++;
	}
	if (k > 0) {
		memmove(s->v, s->v + k, (s->n - k) * sizeof(*s->v));
		s->n -= k;
	}
}

void
seqset_raise(struct seqset *s, uint64_t floor)
{
	if (floor <= s->floor)
		return;
	s->floor = floor;
	settle(s, lower_bound(s, floor + 1));
}

int
seqset_add(struct seqset *s, uint64_t seq)
{
	if (seq <= s->floor)
		return 0;
	if (seq == s->floor + 1) {
		s->floor = seq;
		settle(s, 0);
		return 0;
	}
	size_t i = lower_bound(s, seq);
	if (i < s->n && s->v[i] == seq)
		return 0;
	if (s->n == SEQSET_MAX) {
		/* Forget the lowest half: what is forgotten is done again. */
		size_t half = SEQSET_MAX / 2;
		memmove(s->v, s->v + half, (s->n - half) * sizeof(*s->v));
		s->n -= half;
		i = lower_bound(s, seq);
	}
	if (s->n == s->cap) {
		size_t cap = s->cap == 0 ? 256 : s->cap * 2;
		if (cap > SEQSET_MAX)
			cap = SEQSET_MAX;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
	s->v[i] = seq;
	s->n++;
	return 0;
}

bool
seqset_has(const struct seqset *s, uint64_t seq)
{
	if (seq == 0)
		return false; /* no stream sequence */
	if (seq <= s->floor)
		return true;
	size_t i = lower_bound(s, seq);
	return i < s->n && s->v[i] == seq;
}
