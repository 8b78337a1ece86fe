/*
 * The workspace on disk. Every directory we create is 0700 and every file we
 * write is written to a temporary name and renamed, so a reader never sees a
 * half-written credential.
 */
#include "lib/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/names.h"
#include "lib/refuse.h"
#include "lib/servers.h"

#define DEV_MESH_MAX (1024 * 1024)
#define REGISTRY_MAX (64 * 1024)

static int
set_path(char *out, size_t outlen, char *err, size_t errlen, const char *fmt,
	 const char *a, const char *b)
{
	int n = snprintf(out, outlen, fmt, a, b);

	if (n < 0 || (size_t)n >= outlen) {
		snprintf(err, errlen, "path too long: %s%s", a, b);
		return -1;
	}
	return 0;
}

static int
ws_fill(struct workspace *ws, const char *root, char *err, size_t errlen)
{
	if (set_path(ws->root, sizeof(ws->root), err, errlen, "%s%s", root, "") ||
	    set_path(ws->cotal, sizeof(ws->cotal), err, errlen, "%s%s", root, "/.cotal") ||
	    set_path(ws->mesh, sizeof(ws->mesh), err, errlen, "%s%s", root, "/.cotal/mesh"))
		return -1;
	return 0;
}

static bool
is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * A workspace is trusted only when it is the caller's: its .cotal/ a real
 * directory (not a link) owned by this user, writable by nobody else.
 * Another user's .cotal (say /tmp/.cotal, found from a working directory
 * under /tmp) could hand us its credentials or take ours. Root may name a
 * service's workspace with --root (named: sudo cotal status --root
 * /var/lib/cotal), never adopt one found by walking up.
 */
static int
ws_trusted(const char *cotal, bool named, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(cotal, &st) != 0)
		return refuse(err, errlen, "%s: %s", cotal, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return refuse(err, errlen, "%s is not a directory (a symbolic link?); refusing "
		    "the workspace", cotal);
	if (st.st_uid != geteuid() && !(named && geteuid() == 0))
		return refuse(err, errlen, "%s is owned by uid %u, not by this user (uid %u); "
		    "refusing a workspace another user controls", cotal, (unsigned)st.st_uid,
		    (unsigned)geteuid());
	if (st.st_mode & 022)
		return refuse(err, errlen, "%s is writable by group or others (mode %04o); "
		    "refusing it: chmod 700 %s", cotal, (unsigned)(st.st_mode & 07777), cotal);
	return 0;
}

int
ws_locate(const char *root_opt, struct workspace *ws, char *err, size_t errlen)
{
	char cwd[WS_PATH_MAX], probe[WS_PATH_MAX + 16], real[PATH_MAX];

	if (root_opt != NULL) {
		if (realpath(root_opt, real) == NULL) {
			snprintf(err, errlen, "--root %s: %s", root_opt, strerror(errno));
			return -1;
		}
		snprintf(probe, sizeof(probe), "%s/.cotal", real);
		if (!is_dir(probe)) {
			snprintf(err, errlen, "--root %s has no .cotal/ directory "
			    "(run: cotal mesh init --dev --root %s --space <name>)",
			    real, root_opt);
			return -1;
		}
		if (ws_trusted(probe, true, err, errlen) != 0)
			return -1;
		return ws_fill(ws, real, err, errlen);
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		snprintf(err, errlen, "cannot read the working directory: %s", strerror(errno));
		return -1;
	}
	for (char dir[WS_PATH_MAX]; ; ) {
		snprintf(dir, sizeof(dir), "%s", cwd);
		for (;;) {
			snprintf(probe, sizeof(probe), "%s/.cotal",
			    strcmp(dir, "/") == 0 ? "" : dir);
			if (is_dir(probe))
				return ws_trusted(probe, false, err, errlen) != 0 ? -1 :
				    ws_fill(ws, dir, err, errlen);
			char *slash = strrchr(dir, '/');
			if (slash == NULL || strcmp(dir, "/") == 0)
				break;
			if (slash == dir)
				slash[1] = '\0';
			else
				*slash = '\0';
		}
		break;
	}
	snprintf(err, errlen, "no workspace: no .cotal/ directory in %s or above it "
	    "(pass --root DIR, or run: cotal mesh init --dev --space <name>)", cwd);
	return -1;
}

int
ws_create(const char *root_opt, struct workspace *ws, char *err, size_t errlen)
{
	char real[PATH_MAX];
	const char *root = root_opt ? root_opt : ".";

	if (root_opt != NULL && ws_mkdirs(root_opt, err, errlen) != 0)
		return -1;
	if (realpath(root, real) == NULL) {
		snprintf(err, errlen, "root %s: %s", root, strerror(errno));
		return -1;
	}
	if (ws_fill(ws, real, err, errlen) != 0)
		return -1;
	/* An existing .cotal must be ours before anything is written in it. */
	if (is_dir(ws->cotal) && ws_trusted(ws->cotal, root_opt != NULL, err, errlen) != 0)
		return -1;
	if (ws_mkdirs(ws->mesh, err, errlen) != 0)
		return -1;
	/* An existing .cotal keeps its mode only if it is already private. */
	if (chmod(ws->cotal, 0700) != 0 || chmod(ws->mesh, 0700) != 0) {
		snprintf(err, errlen, "chmod %s: %s", ws->cotal, strerror(errno));
		return -1;
	}
	return 0;
}

int
ws_space_dir(const struct workspace *ws, const char *space, bool create,
	     char *out, size_t outlen, char *err, size_t errlen)
{
	char key[SPACE_KEY_MAX + 1];

	if (!space_key(space, key, sizeof(key))) {
		snprintf(err, errlen, "space: name longer than %d bytes", SPACE_NAME_MAX);
		return -1;
	}
	if (set_path(out, outlen, err, errlen, "%s/space.%s", ws->cotal, key) != 0)
		return -1;
	if (create && (ws_mkdirs(out, err, errlen) != 0 || chmod(out, 0700) != 0))
		return -1;
	return 0;
}

int
ws_mkdirs(const char *path, char *err, size_t errlen)
{
	char buf[WS_PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		snprintf(err, errlen, "bad directory path (%zu bytes)", n);
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "mkdir %s: %s", buf, strerror(errno));
			return -1;
		}
		buf[i] = c;
	}
	if (!is_dir(path)) {
		snprintf(err, errlen, "%s exists and is not a directory", path);
		return -1;
	}
	return 0;
}

#ifdef COTAL_TEST_HOOKS
/* COTAL_TEST_FSYNC_STALL_MS=N: every flushed write waits N ms more, as
 * behind a busy disk's journal (e2e_lease). */
static void
test_fsync_stall(void)
{
	const char *v = getenv("COTAL_TEST_FSYNC_STALL_MS");
	int ms = v != NULL ? atoi(v) : 0;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
#else
static void
test_fsync_stall(void)
{
}
#endif

/*
 * tmp + rename, with the given mode. durable: fsync before the rename, so
 * the new contents survive the machine's crash. A small file's fsync waits
 * for the file system's journal behind every other writer's data (0.75 s
 * on a busy disk here), so only what must survive a crash pays for it.
 */
static int
write_atomic(const char *path, const void *data, size_t len, int mode, bool durable,
	     char *err, size_t errlen)
{
	char tmp[WS_PATH_MAX + 32];
	const char *p = data;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0) {
		snprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fchmod(fd, mode) != 0)
		goto fail;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		p += w;
		len -= (size_t)w;
	}
	if (durable) {
		test_fsync_stall();
		if (fsync(fd) != 0)
			goto fail;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "rename %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
fail:
	snprintf(err, errlen, "write %s: %s", path, strerror(errno));
	close(fd);
	unlink(tmp);
	return -1;
}

int
ws_write_file(const char *path, const void *data, size_t len, int mode,
	      char *err, size_t errlen)
{
	return write_atomic(path, data, len, mode, true, err, errlen);
}

int
ws_replace_file(const char *path, const void *data, size_t len, int mode,
		char *err, size_t errlen)
{
	return write_atomic(path, data, len, mode, false, err, errlen);
}

int
ws_secret_ok(const char *path, const struct stat *st, bool root_ok, char *err, size_t errlen)
{
	if (st->st_uid != geteuid() && !(root_ok && st->st_uid == 0))
		return refuse(err, errlen, "%s is owned by uid %u, not by this user (uid %u); "
		    "refusing a secret another user controls", path, (unsigned)st->st_uid,
		    (unsigned)geteuid());
	if (st->st_mode & 077)
		return refuse(err, errlen, "%s is readable or writable by group or others (mode "
		    "%04o); chmod 600 it", path, (unsigned)(st->st_mode & 07777));
	return 0;
}

static char *
read_file(const char *path, size_t max, size_t *lenp, bool secret, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	/* O_NONBLOCK: a FIFO put there is refused below, never waited on. A
	 * secret's path is never a symbolic link: the checks are about the
	 * very inode opened. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (secret ? O_NOFOLLOW : 0));

	if (fd < 0) {
		if (secret && errno == ELOOP)
			snprintf(err, errlen, "%s is a symbolic link; refusing to follow it", path);
		else
			snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		close(fd);
		return NULL;
	}
	if (secret && ws_secret_ok(path, &st, false, err, errlen) != 0) {
		close(fd);
		return NULL;
	}
	if ((size_t)st.st_size > max) {
		snprintf(err, errlen, "%s is %lld bytes, over the %zu-byte limit",
		    path, (long long)st.st_size, max);
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "out of memory reading %s", path);
		close(fd);
		return NULL;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	if (lenp != NULL)
		*lenp = got;
	return buf;
}

char *
ws_read_file(const char *path, size_t max, size_t *lenp, char *err, size_t errlen)
{
	return read_file(path, max, lenp, false, err, errlen);
}

char *
ws_read_secret(const char *path, size_t max, size_t *lenp, char *err, size_t errlen)
{
	return read_file(path, max, lenp, true, err, errlen);
}

json_t *
ws_read_json(const char *path, size_t max, char *err, size_t errlen)
{
	json_error_t jerr;
	size_t len;
	char *text = ws_read_file(path, max, &len, err, errlen);
	json_t *doc;

	if (text == NULL)
		return NULL;
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (doc == NULL)
		snprintf(err, errlen, "%s: invalid JSON at line %d: %s", path,
		    jerr.line, jerr.text);
	return doc;
}

static int
write_json(const char *path, json_t *doc, int mode, bool durable, char *err, size_t errlen)
{
	char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	int rc;

	if (text == NULL) {
		snprintf(err, errlen, "cannot serialize %s", path);
		return -1;
	}
	size_t n = strlen(text);
	char *withnl = realloc(text, n + 2);
	if (withnl == NULL) {
		free(text);
		snprintf(err, errlen, "out of memory writing %s", path);
		return -1;
	}
	withnl[n] = '\n';
	withnl[n + 1] = '\0';
	rc = write_atomic(path, withnl, n + 1, mode, durable, err, errlen);
	free(withnl);
	return rc;
}

int
ws_write_json(const char *path, json_t *doc, int mode, char *err, size_t errlen)
{
	return write_json(path, doc, mode, true, err, errlen);
}

int
ws_replace_json(const char *path, json_t *doc, int mode, char *err, size_t errlen)
{
	return write_json(path, doc, mode, false, err, errlen);
}

json_t *
ws_dev_mesh(const struct workspace *ws, char *err, size_t errlen)
{
	char path[WS_PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/dev-mesh.json", ws->mesh);
	if (access(path, F_OK) != 0) {
		snprintf(err, errlen, "no dev mesh in %s (run: cotal mesh init --dev)", ws->root);
		return NULL;
	}
	return ws_read_json(path, DEV_MESH_MAX, err, errlen);
}

bool
ws_dev_mesh_open(const struct workspace *ws)
{
	char err[256];
	json_t *mesh = ws_dev_mesh(ws, err, sizeof(err));
	const char *auth = json_string_value(json_object_get(mesh, "auth"));
	bool open = auth != NULL && strcmp(auth, "open") == 0;

	json_decref(mesh);
	return open;
}

int
ws_registry_path(const char *space, char *out, size_t outlen, char *err, size_t errlen)
{
	char key[SPACE_KEY_MAX + 1], home[WS_PATH_MAX];
	const char *env = getenv("COTAL_HOME");

	if (!space_key(space, key, sizeof(key))) {
		snprintf(err, errlen, "space: name longer than %d bytes", SPACE_NAME_MAX);
		return -1;
	}
	if (env != NULL && *env != '\0')
		snprintf(home, sizeof(home), "%s", env);
	else if (getenv("HOME") != NULL)
		snprintf(home, sizeof(home), "%s/.cotal", getenv("HOME"));
	else {
		snprintf(err, errlen, "neither COTAL_HOME nor HOME is set");
		return -1;
	}
	return set_path(out, outlen, err, errlen, "%s/meshes/space.%s.json", home, key);
}

/* Is every URL of the comma-separated list `some` one of `all`'s? */
static bool
servers_among(const char *some, const char *all)
{
	const char *c = some, *u;
	size_t n;

	while ((n = servers_next(&c, &u)) > 0)
		if (!servers_has(all, u, n))
			return false;
	return servers_count(some) > 0;
}

int
ws_server_url(const struct workspace *ws, const char *space, const char *server_opt,
	      char *out, size_t outlen, bool *tls_required, char *err, size_t errlen)
{
	char reg[WS_PATH_MAX];
	const char *url = NULL;
	json_t *doc = NULL;

	if (tls_required != NULL)
		*tls_required = false;
	/* No home directory (a system service): there is no registry. */
	if (ws_registry_path(space, reg, sizeof(reg), err, errlen) != 0)
		reg[0] = '\0';
	if (reg[0] != '\0' && access(reg, F_OK) == 0) {
		doc = ws_read_json(reg, REGISTRY_MAX, err, errlen);
		if (doc == NULL)
			return -1;
		url = json_string_value(json_object_get(doc, "server"));
		if (url == NULL) {
			snprintf(err, errlen, "%s: field \"server\" is missing or not a string", reg);
			json_decref(doc);
			return -1;
		}
		json_t *tls = json_object_get(doc, "tlsRequired");
		if (tls != NULL && !json_is_boolean(tls)) {
			snprintf(err, errlen, "%s: field \"tlsRequired\" is not a boolean", reg);
			json_decref(doc);
			return -1;
		}
		if (tls_required != NULL)
			*tls_required = json_is_true(tls);
		/* A cluster's record lists every node: --server may name some
		 * of them (a daemon kept to the nodes of its own host). */
		if (server_opt != NULL && !servers_among(server_opt, url)) {
			snprintf(err, errlen, "--server %s differs from %s recorded for space "
			    "\"%s\" in %s; refusing to dial", server_opt, url, space, reg);
			json_decref(doc);
			return -1;
		}
		if (server_opt != NULL)
			url = server_opt;
	} else if (server_opt != NULL) {
		url = server_opt;
	} else if (ws != NULL) {
		doc = ws_dev_mesh(ws, err, errlen);
		if (doc == NULL)
			return -1;
		url = json_string_value(json_object_get(doc, "server"));
		if (url == NULL) {
			snprintf(err, errlen, "dev-mesh.json: field \"server\" is missing");
			json_decref(doc);
			return -1;
		}
	} else {
		snprintf(err, errlen, "no broker known for space \"%s\" (pass --server URL)", space);
		return -1;
	}
	if (strlen(url) >= outlen) {
		snprintf(err, errlen, "server URL too long");
		json_decref(doc);
		return -1;
	}
	strcpy(out, url);
	json_decref(doc);
	return 0;
}

int
ws_registry_tls_ca(const char *space, char *out, size_t outlen, char *err, size_t errlen)
{
	char reg[WS_PATH_MAX];
	const char *ca;
	json_t *doc, *f;
	int rc = 0;

	out[0] = '\0';
	if (ws_registry_path(space, reg, sizeof(reg), err, errlen) != 0 || access(reg, F_OK) != 0)
		return 0;
	if ((doc = ws_read_json(reg, REGISTRY_MAX, err, errlen)) == NULL)
		return -1;
	if ((f = json_object_get(doc, "tlsCa")) != NULL) {
		ca = json_string_value(f);
		if (ca == NULL || ca[0] != '/') {
			snprintf(err, errlen, "%s: field \"tlsCa\" is not an absolute path", reg);
			rc = -1;
		} else if (strlen(ca) >= outlen) {
			snprintf(err, errlen, "%s: field \"tlsCa\" is too long", reg);
			rc = -1;
		} else {
			snprintf(out, outlen, "%s", ca);
		}
	}
	json_decref(doc);
	return rc;
}

/*
 * A live process's command line, NUL-separated, into cmd: its length, 0
 * when it has none (a kernel thread, a zombie: no program image), -1 when
 * it cannot be read. A process inside execve shows an empty one for a
 * moment, its new memory in place before its arguments are: read again
 * for up to half a second before deciding.
 */
static ssize_t
read_cmdline(long pid, char *cmd, size_t len)
{
	char path[64], exe_path[64], exe[PATH_MAX];

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	snprintf(exe_path, sizeof(exe_path), "/proc/%ld/exe", pid);
	for (int tries = 0; tries < 50; tries++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			return -1;
		/* /proc files report size 0: read until end of file (one read
		 * is enough for the bounded command lines we look for). */
		n = read(fd, cmd, len - 1);
		close(fd);
		if (n != 0)
			return n < 0 ? -1 : n;
		if (readlink(exe_path, exe, sizeof(exe)) < 0 && errno == ENOENT)
			return 0;
		struct timespec nap = { 0, 10 * 1000000L };
		nanosleep(&nap, NULL);
	}
	return -1;
}

int
ws_pid_runs(long pid, const char *program, const char *opt, const char *val)
{
	char cmd[8192];
	const char *arg[256], *base;
	ssize_t n;
	int nargs = 0;

	if (pid <= 1 || kill((pid_t)pid, 0) != 0)
		return 0;
	if ((n = read_cmdline(pid, cmd, sizeof(cmd))) <= 0)
		return (int)n;
	cmd[n] = '\0';
	/* The arguments, NUL-separated: each compared whole, so the daemon of
	 * space "a b" is never taken for space "a"'s. */
	for (ssize_t i = 0; i < n && nargs < (int)(sizeof(arg) / sizeof(arg[0])); i++) {
		arg[nargs++] = cmd + i;
		i += (ssize_t)strlen(cmd + i);
	}
	base = strrchr(arg[0], '/');
	if (strcmp(base != NULL ? base + 1 : arg[0], program) != 0)
		return 0;
	for (int i = 1; i < nargs; i++)
		if (strcmp(arg[i], opt) == 0 &&
		    (val == NULL || (i + 1 < nargs && strcmp(arg[i + 1], val) == 0)))
			return 1;
	return 0;
}
