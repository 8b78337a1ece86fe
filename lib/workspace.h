/*
 * The workspace on disk (WIRE.md §8): the root holding .cotal/, the per-space
 * credential folders, the dev mesh's signer state and the mesh registry.
 */
#ifndef COTAL_WORKSPACE_H
#define COTAL_WORKSPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "lib/names.h"

#define WS_PATH_MAX 4096
/* A file under a workspace directory: the directory, a space key, a name. */
#define WS_FILE_MAX (WS_PATH_MAX + SPACE_KEY_MAX + 128)

struct workspace {
	char root[WS_PATH_MAX];  /* the directory holding .cotal/ */
	char cotal[WS_PATH_MAX]; /* <root>/.cotal */
	char mesh[WS_PATH_MAX];  /* <root>/.cotal/mesh: dev signer and broker */
};

/* Use --root when given, else the nearest .cotal/ above the working
 * directory. Refuses naming the directory searched from. */
int ws_locate(const char *root_opt, struct workspace *ws, char *err, size_t errlen);
/* For `mesh init`: root_opt or the working directory; creates .cotal. */
int ws_create(const char *root_opt, struct workspace *ws, char *err, size_t errlen);

/* <root>/.cotal/space.<key> for the space (created 0700 when create). */
int ws_space_dir(const struct workspace *ws, const char *space, bool create,
		 char *out, size_t outlen, char *err, size_t errlen);

/* mkdir -p with mode 0700 on every created level under base. */
int ws_mkdirs(const char *path, char *err, size_t errlen);
/* Write a file atomically (tmp + rename) with the given mode, flushed to
 * the disk (fsync) before the rename: what must survive the machine's
 * crash (a credential, a seed, a configuration, a ledger). */
int ws_write_file(const char *path, const void *data, size_t len, int mode,
		  char *err, size_t errlen);
/* The same without the flush: a record of a running process (its pid, the
 * lease holder's record, a status snapshot), which the machine's crash
 * makes moot. A reader still sees the old file or the new one, whole; the
 * process never waits for the disk (a busy disk's fsync can take seconds,
 * and these are written on a start's path and on the event loop). */
int ws_replace_file(const char *path, const void *data, size_t len, int mode,
		    char *err, size_t errlen);
/* Read a whole file of at most max bytes (NUL-terminated, malloc'd). */
char *ws_read_file(const char *path, size_t max, size_t *lenp, char *err,
		   size_t errlen);
/*
 * Is the file st describes fit to hold a secret (a seed, a creds file)?
 * Owned by this user (or by root when root_ok: systemd's credentials, which
 * it makes readable to the service alone), readable by nobody else. 0, or
 * -1 with err naming path and what is wrong.
 */
int ws_secret_ok(const char *path, const struct stat *st, bool root_ok, char *err,
		 size_t errlen);
/* ws_read_file for a secret: a symbolic link is not followed, and the file
 * must pass ws_secret_ok (root_ok false). */
char *ws_read_secret(const char *path, size_t max, size_t *lenp, char *err, size_t errlen);
/* Load a JSON file of at most max bytes. */
json_t *ws_read_json(const char *path, size_t max, char *err, size_t errlen);
/* ws_write_file and ws_replace_file of doc (indented, keys sorted, a newline). */
int ws_write_json(const char *path, json_t *doc, int mode, char *err, size_t errlen);
int ws_replace_json(const char *path, json_t *doc, int mode, char *err, size_t errlen);

/* The dev mesh description at <mesh>/dev-mesh.json (NULL when absent). */
json_t *ws_dev_mesh(const struct workspace *ws, char *err, size_t errlen);

/*
 * Is the workspace's dev mesh an open one (`cotal mesh init --dev --open`,
 * "auth": "open" in dev-mesh.json: no authentication)? Open mode is
 * live-only: it has no delivery daemon.
 */
bool ws_dev_mesh_open(const struct workspace *ws);
#define WS_OPEN_MESH_NO_DAEMON "an open dev mesh has no delivery daemon: with no " \
	"authentication there is no trusted reader, so no durable backstop (run an auth " \
	"mesh, cotal mesh init --dev without --open, for durable channels)"

/*
 * The broker URL for a space: server_opt when given; else the mesh registry
 * record $COTAL_HOME/meshes/space.<key>.json (default ~/.cotal); else the dev
 * mesh of the workspace. Refuses a server_opt that differs from the registry.
 * *tls_required (when not NULL) tells whether the registry record demands
 * TLS (false without a record).
 */
int ws_server_url(const struct workspace *ws, const char *space,
		  const char *server_opt, char *out, size_t outlen, bool *tls_required,
		  char *err, size_t errlen);
/*
 * The CA file the mesh registry record of a space names for TLS ("tlsCa",
 * an absolute path) [decision: the record's field for WIRE.md §8's
 * transport]. 0 with out "" when there is no record or no such field; -1
 * with err when the field is not an absolute path.
 */
int ws_registry_tls_ca(const char *space, char *out, size_t outlen, char *err,
		       size_t errlen);
/*
 * Is pid a running process of program (the last path component of its
 * argv[0]) whose arguments hold opt followed by val (opt alone when val is
 * NULL), each argument compared whole? 1 yes, 0 no (not running, or
 * another command: a record whose pid was reused, or the daemon of another
 * space), -1 alive but its command line cannot be read (trust the record
 * then: the check only downgrades on proof).
 */
int ws_pid_runs(long pid, const char *program, const char *opt, const char *val);
/* Path of the mesh registry record for a space. */
int ws_registry_path(const char *space, char *out, size_t outlen, char *err,
		     size_t errlen);

#endif
