/*
 * The server list: one nats:// URL, or every node of a cluster,
 * comma-separated (ARCHITECTURE.md "Scale"). The one place that splits and
 * builds it: the supervisor's resolution, the connections' options, the
 * workspace's --server check, the eviction sweep's count and the CLI's
 * mesh. Empty items (",,", a trailing ",") are not servers and are skipped.
 * Includes nothing of the tree.
 */
#ifndef COTAL_SERVERS_H
#define COTAL_SERVERS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The next URL of a list: *cursor starts at the list and moves past each
 * URL taken. Its start into *url and its length returned; 0 at the end.
 *
 *	for (const char *c = list, *u; (n = servers_next(&c, &u)) > 0;)
 */
size_t servers_next(const char **cursor, const char **url);
/* How many URLs list holds (0 for NULL). */
int servers_count(const char *list);
/* Is the URL [url, url + n) one of list's? */
bool servers_has(const char *list, const char *url, size_t n);
/* Append url to the list in out (outlen bytes, NUL-terminated), with a
 * comma when out holds one already: false, out unchanged, when it does not
 * fit. */
bool servers_append(char *out, size_t outlen, const char *url);

#endif
