/* The server list (servers.h). */
#include "lib/servers.h"

#include <string.h>

size_t
servers_next(const char **cursor, const char **url)
{
	const char *p = *cursor;
	size_t n;

	if (p == NULL)
		return 0;
	while (*p == ',')
		p++;
	n = strcspn(p, ",");
	*url = p;
	*cursor = p + n;
	return n;
}

int
servers_count(const char *list)
{
	const char *c = list, *u;
	int n = 0;

	while (servers_next(&c, &u) > 0)
		n++;
	return n;
}

bool
servers_has(const char *list, const char *url, size_t n)
{
	const char *c = list, *u;
	size_t m;

	while ((m = servers_next(&c, &u)) > 0)
		if (m == n && strncmp(u, url, n) == 0)
			return true;
	return false;
}

bool
servers_append(char *out, size_t outlen, const char *url)
{
	size_t used = strlen(out), n = strlen(url), comma = used > 0;

	if (used + comma + n + 1 > outlen)
		return false;
	if (comma)
		out[used++] = ',';
	memcpy(out + used, url, n + 1);
	return true;
}
