/*
 * The e2e harness: systemd's side of sd_notify(3) for the daemon under test.
 * A test listens on an abstract datagram socket, starts the daemon with
 * NOTIFY_SOCKET naming it, and waits for the lines the daemon sends.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/harness.h"

static int serial; /* two listeners of one test process differ */

int
h_notify_listener(char *name, size_t len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(name, len, "@cotal-e2e-notify-%ld-%ld-%d", (long)getpid(), (long)time(NULL),
	    serial++);
	assert_true(fd >= 0);
	memcpy(a.sun_path + 1, name + 1, strlen(name) - 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&a,
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))), 0);
	return fd;
}

/*
 * Wait up to ms for a datagram holding the line `line` (exactly, as one of
 * its newline-separated lines). Everything received is appended to seen.
 */
bool
h_datagram_has(int fd, const char *line, int ms, char *seen, size_t seenlen)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char buf[4097];
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return false;
		struct timeval tmo = { left / 1000, (left % 1000) * 1000 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		buf[n] = '\0';
		size_t used = strlen(seen);
		snprintf(seen + used, seenlen - used, "[%s] ", buf);
		for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l != NULL;
		    l = strtok_r(NULL, "\n", &save))
			if (strcmp(l, line) == 0)
				return true;
	}
}

