/* The spaces manifest of a delivery host: see manifest.h. */
#include "lib/manifest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Printable, no control bytes: these names reach log lines and argv. */
static bool
clean(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* Every comma-separated URL of s is nats:// or tls:// with something after. */
static bool
server_list_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (const char *p = s; *p != '\0';) {
		size_t n = strcspn(p, ",");
		size_t scheme = strncmp(p, "nats://", 7) == 0 ? 7 : strncmp(p, "tls://", 6) == 0 ?
		    6 : 0;
		if (scheme == 0 || n <= scheme || memchr(p, ' ', n) != NULL)
			return false;
		p += n;
		if (*p == ',' && *++p == '\0')
			return false;
	}
	return true;
}

/* One entry's string field into out; 0, or -1 with err. */
static int
field(json_t *entry, size_t i, const char *name, bool required, char *out, size_t outlen,
      char *err, size_t errlen)
{
	json_t *v = json_object_get(entry, name);
	const char *s;

	out[0] = '\0';
	if (v == NULL) {
		if (required)
			snprintf(err, errlen, "spaces[%zu].%s: missing", i, name);
		return required ? -1 : 0;
	}
	if (!json_is_string(v)) {
		snprintf(err, errlen, "spaces[%zu].%s: not a string", i, name);
		return -1;
	}
	s = json_string_value(v);
	if (json_string_length(v) != strlen(s) || !clean(s)) {
		snprintf(err, errlen, "spaces[%zu].%s: holds a NUL or control byte", i, name);
		return -1;
	}
	if (*s == '\0') {
		snprintf(err, errlen, "spaces[%zu].%s: empty", i, name);
		return -1;
	}
	if (strlen(s) >= outlen) {
		snprintf(err, errlen, "spaces[%zu].%s: longer than %zu bytes", i, name, outlen - 1);
		return -1;
	}
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static int
lane_parse(json_t *entry, size_t i, struct manifest_lane *l, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	if (!json_is_object(entry)) {
		snprintf(err, errlen, "spaces[%zu]: not an object", i);
		return -1;
	}
	json_object_foreach(entry, key, v) {
		if (strcmp(key, "space") != 0 && strcmp(key, "root") != 0 &&
		    strcmp(key, "server") != 0) {
			snprintf(err, errlen, "spaces[%zu]: unknown field \"%.64s\" (a lane has space, "
			    "root and server)", i, clean(key) ? key : "?");
			return -1;
		}
	}
	if (field(entry, i, "space", true, l->space, sizeof(l->space), err, errlen) != 0 ||
	    field(entry, i, "root", true, l->root, sizeof(l->root), err, errlen) != 0 ||
	    field(entry, i, "server", false, l->server, sizeof(l->server), err, errlen) != 0)
		return -1;
	if (l->space[0] == '-') {
		snprintf(err, errlen, "spaces[%zu].space: \"%.256s\" begins with '-' (it would read "
		    "as an option)", i, l->space);
		return -1;
	}
	if (l->root[0] != '/') {
		snprintf(err, errlen, "spaces[%zu].root: \"%.256s\" is not an absolute path", i,
		    l->root);
		return -1;
	}
	if (l->server[0] != '\0' && !server_list_ok(l->server)) {
		snprintf(err, errlen, "spaces[%zu].server: \"%.256s\" is not a nats:// or tls:// URL "
		    "(or a comma-separated list of them)", i, l->server);
		return -1;
	}
	return 0;
}

int
manifest_parse(const char *text, size_t len, struct manifest *m, char *err, size_t errlen)
{
	json_error_t je;
	json_t *doc, *spaces, *v;
	const char *key;

	memset(m, 0, sizeof(*m));
	if (len > MANIFEST_BYTES_MAX) {
		snprintf(err, errlen, "larger than %d bytes", MANIFEST_BYTES_MAX);
		return -1;
	}
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (doc == NULL) {
		snprintf(err, errlen, "not JSON (line %d: %s)", je.line, je.text);
		return -1;
	}
	if (!json_is_object(doc)) {
		snprintf(err, errlen, "not a JSON object");
		goto fail;
	}
	json_object_foreach(doc, key, v) {
		if (strcmp(key, "spaces") != 0) {
			snprintf(err, errlen, "unknown field \"%.64s\" (a manifest has only \"spaces\")",
			    clean(key) ? key : "?");
			goto fail;
		}
	}
	spaces = json_object_get(doc, "spaces");
	if (!json_is_array(spaces)) {
		snprintf(err, errlen, "spaces: %s", spaces == NULL ? "missing" : "not an array");
		goto fail;
	}
	if (json_array_size(spaces) == 0 || json_array_size(spaces) > MANIFEST_LANES_MAX) {
		snprintf(err, errlen, "spaces: %zu entries (1 to %d)", json_array_size(spaces),
		    MANIFEST_LANES_MAX);
		goto fail;
	}
	m->lanes = calloc(json_array_size(spaces), sizeof(*m->lanes));
	if (m->lanes == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < json_array_size(spaces); i++) {
		struct manifest_lane *l = &m->lanes[i];
		if (lane_parse(json_array_get(spaces, i), i, l, err, errlen) != 0)
			goto fail;
		for (size_t j = 0; j < i; j++)
			if (strcmp(m->lanes[j].space, l->space) == 0) {
				snprintf(err, errlen, "spaces[%zu].space: \"%.256s\" is spaces[%zu]'s too "
				    "(one lane per space)", i, l->space, j);
				goto fail;
			}
		m->n = i + 1;
	}
	json_decref(doc);
	return 0;
fail:
	json_decref(doc);
	manifest_free(m);
	return -1;
}

int
manifest_load(const char *path, struct manifest *m, char *err, size_t errlen)
{
	char why[512];
	size_t len;
	char *text = ws_read_file(path, MANIFEST_BYTES_MAX, &len, why, sizeof(why));
	int rc;

	memset(m, 0, sizeof(*m));
	if (text == NULL) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	rc = manifest_parse(text, len, m, why, sizeof(why));
	free(text);
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

const struct manifest_lane *
manifest_find(const struct manifest *m, const char *space)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->lanes[i].space, space) == 0)
			return &m->lanes[i];
	return NULL;
}

void
manifest_free(struct manifest *m)
{
	free(m->lanes);
	m->lanes = NULL;
	m->n = 0;
}

int
manifest_host_files(const char *path, const char *run_dir, char *pid, size_t pidlen,
		    char *status, size_t statuslen, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/'), *name = slash != NULL ? slash + 1 : path;
	size_t dlen = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
	size_t blen = strlen(name);
	int a, b;

	if (blen > 5 && strcmp(name + blen - 5, ".json") == 0)
		blen -= 5;
	if (blen == 0) {
		snprintf(err, errlen, "%s: no file name", path);
		return -1;
	}
	if (run_dir != NULL && *run_dir != '\0') {
		a = snprintf(pid, pidlen, "%s/%.*s.host.pid", run_dir, (int)blen, name);
		b = snprintf(status, statuslen, "%s/%.*s.host.json", run_dir, (int)blen, name);
	} else {
		const char *d = slash == NULL ? "." : path;
		a = snprintf(pid, pidlen, "%.*s/%.*s.host.pid", (int)dlen, d, (int)blen, name);
		b = snprintf(status, statuslen, "%.*s/%.*s.host.json", (int)dlen, d, (int)blen,
		    name);
	}
	if (a < 0 || (size_t)a >= pidlen || b < 0 || (size_t)b >= statuslen) {
		snprintf(err, errlen, "%s: the host's record paths are too long", path);
		return -1;
	}
	return 0;
}
