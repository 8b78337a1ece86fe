/*
 * What a workspace holds, by name, for the refusals of a command given a
 * name it does not hold (issue 43: "no agent zed in space demo (agents:
 * alice, bob)"): the spaces of its .cotal/ (space.<hex of the name>) and
 * the agents of a space (agents/<name>.json). Shared by the CLI's commands.
 *
 * A name read back from a directory entry is the workspace's own, yet it
 * is shown only when it is printable: a control byte in a crafted entry
 * never reaches a terminal.
 */
#include "lib/wsnames.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WSNAMES_SHOWN 20 /* names listed; past them "and N more" */
#define WSNAMES_SCAN 4096 /* directory entries looked at */

struct names {
	char *v[WSNAMES_SCAN];
	size_t n;
};

static bool
printable(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* space.<lowercase hex> -> the name, or false. */
static bool
space_of_entry(const char *entry, char *out, size_t outlen)
{
	const char *hex = entry + strlen("space.");
	size_t n = strlen(hex);

	if (strncmp(entry, "space.", 6) != 0 || n == 0 || n % 2 != 0 || n / 2 >= outlen ||
	    n / 2 > SPACE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (char)(hi * 16 + lo);
	}
	out[n / 2] = '\0';
	return strlen(out) == n / 2 && printable(out, n / 2);
}

/* <name>.json -> the name, or false. */
static bool
agent_of_entry(const char *entry, char *out, size_t outlen)
{
	size_t n = strlen(entry);

	if (n <= 5 || strcmp(entry + n - 5, ".json") != 0 || n - 5 >= outlen)
		return false;
	memcpy(out, entry, n - 5);
	out[n - 5] = '\0';
	return printable(out, n - 5);
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
names_read(const char *dir, bool (*of)(const char *, char *, size_t), struct names *ns)
{
	char name[SPACE_NAME_MAX + 1];
	DIR *d = opendir(dir);
	struct dirent *e;

	ns->n = 0;
	if (d == NULL)
		return;
	while (ns->n < WSNAMES_SCAN && (e = readdir(d)) != NULL)
		if (of(e->d_name, name, sizeof(name)) && (ns->v[ns->n] = strdup(name)) != NULL)
			ns->n++;
	closedir(d);
	qsort(ns->v, ns->n, sizeof(ns->v[0]), by_name);
}

static void
names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	ns->n = 0;
}

/* "a, b, c" (and N more) into out. */
static void
names_join(const struct names *ns, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < ns->n && i < WSNAMES_SHOWN && used < outlen; i++)
		used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? ", " : "",
		    ns->v[i]);
	if (ns->n > WSNAMES_SHOWN && used < outlen)
		snprintf(out + used, outlen - used, " and %zu more", ns->n - WSNAMES_SHOWN);
}

static bool
is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

size_t
ws_space_names(const struct workspace *ws, char *list, size_t listlen, char *only,
	       size_t onlylen)
{
	struct names *ns = calloc(1, sizeof(*ns));
	size_t n;

	list[0] = only[0] = '\0';
	if (ns == NULL)
		return 0;
	names_read(ws->cotal, space_of_entry, ns);
	names_join(ns, list, listlen);
	if (ns->n == 1)
		snprintf(only, onlylen, "%s", ns->v[0]);
	n = ns->n;
	names_free(ns);
	free(ns);
	return n;
}

int
ws_space_known(const struct workspace *ws, const char *space, char *err, size_t errlen)
{
	char dir[WS_PATH_MAX], list[1024];
	struct names *ns;
	char e[256];

	if (ws_space_dir(ws, space, false, dir, sizeof(dir), e, sizeof(e)) != 0) {
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	if (is_dir(dir))
		return 0;
	if ((ns = calloc(1, sizeof(*ns))) == NULL) {
		snprintf(err, errlen, "no space %s in %s", space, ws->root);
		return -1;
	}
	names_read(ws->cotal, space_of_entry, ns);
	names_join(ns, list, sizeof(list));
	if (ns->n == 0)
		snprintf(err, errlen, "no space %s in %s (none here yet: cotal mesh init --space "
		    "NAME, or cotal space provision NAME)", space, ws->root);
	else
		snprintf(err, errlen, "no space %s in %s (spaces: %s)", space, ws->root, list);
	names_free(ns);
	free(ns);
	return -1;
}

int
ws_agent_known(const struct workspace *ws, const char *space, const char *agent, char *err,
	       size_t errlen)
{
	char dir[WS_PATH_MAX], agents[WS_FILE_MAX], path[WS_FILE_MAX + SPACE_NAME_MAX + 8];
	char list[1024];
	struct names *ns;
	struct stat st;

	if (ws_space_known(ws, space, err, errlen) != 0 ||
	    ws_space_dir(ws, space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	snprintf(agents, sizeof(agents), "%s/agents", dir);
	snprintf(path, sizeof(path), "%s/%s.json", agents, agent);
	if (strchr(agent, '/') == NULL && stat(path, &st) == 0 && S_ISREG(st.st_mode))
		return 0;
	if ((ns = calloc(1, sizeof(*ns))) == NULL) {
		snprintf(err, errlen, "no agent %s in space %s", agent, space);
		return -1;
	}
	names_read(agents, agent_of_entry, ns);
	names_join(ns, list, sizeof(list));
	if (ns->n == 0)
		snprintf(err, errlen, "no agent %s in space %s (none yet: cotal agent add NAME "
		    "--space %s --allow CHANNELS)", agent, space, space);
	else
		snprintf(err, errlen, "no agent %s in space %s (agents: %s)", agent, space, list);
	names_free(ns);
	free(ns);
	return -1;
}
