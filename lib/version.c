/* The version (version.h); the values come from the build's generated header. */
#include "lib/version.h"

#include "cotal_version.h"

const char *
cotal_version(void)
{
	return COTAL_COMMIT[0] != '\0' ? COTAL_VERSION " (commit " COTAL_COMMIT ")" : COTAL_VERSION;
}

void
cotal_version_print(FILE *f, const char *program)
{
	fprintf(f, "%s %s\n", program, cotal_version());
}
