/* NATS subject matching (see subject.h). */
#include "lib/subject.h"

#include <string.h>

bool
subject_match(const char *pattern, const char *subject)
{
	const char *p = pattern, *c = subject;

	for (;;) {
		size_t pl = strcspn(p, "."), cl = strcspn(c, ".");

		if (pl == 1 && p[0] == '>' && p[1] == '\0')
			return cl > 0; /* '>' needs at least one token */
		if (!(pl == 1 && p[0] == '*') && (pl != cl || strncmp(p, c, pl) != 0))
			return false;
		if (cl == 0)
			return false;
		p += pl, c += cl;
		if (*p == '\0' || *c == '\0')
			return *p == '\0' && *c == '\0';
		p++, c++;
	}
}
