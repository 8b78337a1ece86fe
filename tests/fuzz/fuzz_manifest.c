/*
 * Fuzz target: the spaces manifest of a delivery host (lib/manifest.c).
 *
 * Whatever parses holds only what the host may start a lane with: at least
 * one lane and at most MANIFEST_LANES_MAX, every space and root non-empty
 * and without control bytes, every root absolute, no space twice, and each
 * lane found again by its space.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_clean(const char *s)
{
	if (*s == '\0')
		abort();
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest m;
	char err[1024];

	if (manifest_parse((const char *)data, size, &m, err, sizeof(err)) != 0) {
		if (m.n != 0 || m.lanes != NULL || err[0] == '\0')
			abort();
		return 0;
	}
	if (m.n == 0 || m.n > MANIFEST_LANES_MAX)
		abort();
	for (size_t i = 0; i < m.n; i++) {
		check_clean(m.lanes[i].space);
		check_clean(m.lanes[i].root);
		if (m.lanes[i].root[0] != '/')
			abort();
		if (m.lanes[i].server[0] != '\0')
			check_clean(m.lanes[i].server);
		if (manifest_find(&m, m.lanes[i].space) != &m.lanes[i])
			abort();
	}
	manifest_free(&m);
	return 0;
}
