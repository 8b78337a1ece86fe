/*
 * Fuzz target: creds_parse. What parses must survive creds_format and a
 * second parse unchanged.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds/creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct creds c, again;
	char err[512], *text;

	if (creds_parse((const char *)data, size, &c, err, sizeof(err)) != 0)
		return 0;
	if ((text = creds_format(c.jwt, c.seed)) == NULL)
		abort();
	if (creds_parse(text, strlen(text), &again, err, sizeof(err)) != 0 ||
	    strcmp(again.jwt, c.jwt) != 0 || strcmp(again.seed, c.seed) != 0)
		abort();
	secure_wipe(text, strlen(text));
	free(text);
	creds_free(&again);
	creds_free(&c);
	return 0;
}
