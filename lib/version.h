/*
 * The version both binaries print (--version): the project's, from
 * CMakeLists.txt, and the commit when built from a checkout.
 */
#ifndef COTAL_VERSION_H
#define COTAL_VERSION_H

#include <stdio.h>

/* "0.1.0", or "0.1.0 (commit 2005bb8c1d2e)". */
const char *cotal_version(void);
/* "<program> <version>\n" on f. */
void cotal_version_print(FILE *f, const char *program);

#endif
