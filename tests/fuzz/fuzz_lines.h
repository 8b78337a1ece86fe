/*
 * The fuzz targets' input, split as the rails' targets read it: a line
 * (to a newline or the end) at a time, then the rest as exact bytes.
 */
#ifndef COTAL_FUZZ_LINES_H
#define COTAL_FUZZ_LINES_H

#include <stdlib.h>
#include <string.h>

/* The next line of [*p, end) as a C string (malloc'd); advances past it. */
static inline char *
fuzz_line(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl != NULL ? (size_t)(nl - *p) : (size_t)(end - *p);
	char *s = malloc(n + 1);

	if (s == NULL)
		abort();
	memcpy(s, *p, n);
	s[n] = '\0';
	*p = nl != NULL ? nl + 1 : end;
	return s;
}

#endif
