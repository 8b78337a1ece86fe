/*
 * The pid record (see pidfile.h): "<pid>\n", 0600, written atomically.
 */
#include "lib/pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/workspace.h"

int
pidfile_write(const char *path, pid_t pid, char *err, size_t errlen)
{
	char text[32];
	int n;

	if (pid <= 1) {
		snprintf(err, errlen, "%s: refusing to record pid %ld", path, (long)pid);
		return -1;
	}
	n = snprintf(text, sizeof(text), "%ld\n", (long)pid);
	return ws_replace_file(path, text, (size_t)n, 0600, err, errlen);
}

/* Parse exactly "<digits>" or "<digits>\n". */
static pid_t
parse(const char *text, size_t len)
{
	long v = 0;
	size_t i = 0;

	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (len == 0 || len > 10)
		return -1;
	for (; i < len; i++) {
		if (text[i] < '0' || text[i] > '9')
			return -1;
		v = v * 10 + (text[i] - '0');
	}
	if (v <= 1 || v > INT_MAX)
		return -1;
	return (pid_t)v;
}

/* Read the record through an open descriptor (so the caller can compare
 * what it read with what is at the path afterwards). */
static pid_t
read_fd(int fd, const char *path, char *err, size_t errlen)
{
	char text[PIDFILE_MAX + 1];
	struct stat st;
	size_t got = 0;
	pid_t pid;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		return -1;
	}
	while (got < sizeof(text) - 1) {
		ssize_t r = read(fd, text + got, sizeof(text) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "read %s: %s", path, strerror(errno));
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	text[got] = '\0';
	if (got >= PIDFILE_MAX || (pid = parse(text, got)) < 0) {
		snprintf(err, errlen, "%s does not hold a pid (want one decimal number and a "
		    "newline)", path);
		return -1;
	}
	return pid;
}

pid_t
pidfile_read(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	pid_t pid;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	pid = read_fd(fd, path, err, errlen);
	close(fd);
	return pid;
}

void
pidfile_remove_if_ours(const char *path, pid_t pid)
{
	char err[256];
	struct stat a, b;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return;
	/* Unlink the file that was read, not one renamed over it since: the
	 * remaining window is the unlink itself. */
	if (read_fd(fd, path, err, sizeof(err)) == pid && fstat(fd, &a) == 0 &&
	    lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
	close(fd);
}

/* A zombie (exited, not reaped yet) is no longer a running daemon. */
static bool
exited(pid_t pid)
{
	char path[64], buf[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold ')' itself, the state follows the
	 * last one. */
	char *p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int
pidfile_verify(pid_t pid, const char *space)
{
	if (pid <= 1)
		return 0;
	int r = ws_pid_runs(pid, "cotal-deliveryd", "--space", space);
	if (r != 0 && exited(pid))
		return 0;
	return r;
}

int
pidfile_verify_host(pid_t pid)
{
	if (pid <= 1)
		return 0;
	int r = ws_pid_runs(pid, "cotal-deliveryd", "--spaces", NULL);
	if (r != 0 && exited(pid))
		return 0;
	return r;
}
