/*
 * The spaces manifest of a delivery host (`cotal-deliveryd --spaces FILE`):
 *
 *   {"spaces":[{"space":"<name>","root":"<workspace root>","server":"nats://…"}, …]}
 *
 * One lane per entry. `server` is optional (else the host's --server, else
 * the space's mesh registry record, as for one space). It is read from a
 * file an operator wrote, so it is bounded and validated whole before
 * anything starts: a bad entry is refused naming its index and field
 * ("spaces[2].root: …"), unknown keys are refused, and so is a space named
 * twice. Shared by the host (supervisor/) and `cotal status --spaces`.
 */
#ifndef COTAL_LIB_MANIFEST_H
#define COTAL_LIB_MANIFEST_H

#include <stddef.h>

#include "lib/names.h"
#include "lib/workspace.h"

#define MANIFEST_BYTES_MAX (1024 * 1024)
#define MANIFEST_LANES_MAX 256
#define MANIFEST_SERVER_MAX 1024 /* a comma-separated list of a cluster's URLs */

struct manifest_lane {
	char space[SPACE_NAME_MAX + 1];
	char root[WS_PATH_MAX];
	char server[MANIFEST_SERVER_MAX]; /* "" when the entry names none */
};

struct manifest {
	size_t n;
	struct manifest_lane *lanes;
};

/* Parse text (len bytes, need not be NUL-terminated). 0, or -1 with err
 * naming the entry and field; m is empty then. */
int manifest_parse(const char *text, size_t len, struct manifest *m, char *err, size_t errlen);

/* Read and parse the file at path (at most MANIFEST_BYTES_MAX bytes). */
int manifest_load(const char *path, struct manifest *m, char *err, size_t errlen);

/* The lane of space in m, or NULL. */
const struct manifest_lane *manifest_find(const struct manifest *m, const char *space);

void manifest_free(struct manifest *m);

/*
 * The host's own records for the manifest at path: its pid record
 * <run_dir>/<base>.host.pid and status file <run_dir>/<base>.host.json,
 * base being the manifest's file name less a ".json"; run_dir NULL or ""
 * is the manifest's own directory. 0, or -1 with err.
 */
int manifest_host_files(const char *path, const char *run_dir, char *pid, size_t pidlen,
			char *status, size_t statuslen, char *err, size_t errlen);

#endif
