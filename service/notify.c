/*
 * sd_notify(3) without libsystemd (see notify.h).
 */
#include "service/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/log.h"

static struct {
	bool on;
	struct sockaddr_un addr;
	socklen_t addrlen;
	int64_t watchdog_ms;
	bool failing;        /* the last send failed (and was logged) */
} N;

/* Strict decimal: digits only, no sign, no overflow. */
static bool
parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

static void
init_socket(const char *e)
{
	size_t len;

	if (e == NULL || *e == '\0')
		return;
	len = strlen(e);
	memset(&N.addr, 0, sizeof(N.addr));
	N.addr.sun_family = AF_UNIX;
	if (e[0] == '/') {
		/* A path, NUL-terminated inside sun_path. */
		if (len >= sizeof(N.addr.sun_path)) {
			log_warnx("delivery: NOTIFY_SOCKET is %zu bytes long, over the %zu a socket "
			    "path holds; not notifying systemd", len, sizeof(N.addr.sun_path) - 1);
			return;
		}
		memcpy(N.addr.sun_path, e, len);
		N.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	} else if (e[0] == '@') {
		/* Abstract: a leading NUL, then the name's bytes, no terminator. */
		if (len < 2 || len > sizeof(N.addr.sun_path)) {
			log_warnx("delivery: NOTIFY_SOCKET names an abstract socket of %zu bytes "
			    "(want 1 to %zu); not notifying systemd", len - 1,
			    sizeof(N.addr.sun_path) - 1);
			return;
		}
		memcpy(N.addr.sun_path + 1, e + 1, len - 1);
		N.addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		log_warnx("delivery: NOTIFY_SOCKET is neither an absolute path nor an \"@\" "
		    "abstract name; not notifying systemd");
		return;
	}
	N.on = true;
}

static void
init_watchdog(const char *usec, const char *wpid)
{
	uint64_t v, p;

	if (usec == NULL || *usec == '\0')
		return;
	if (!parse_u64(usec, &v) || v == 0) {
		log_warnx("delivery: WATCHDOG_USEC is not a positive number of microseconds; "
		    "no watchdog pings");
		return;
	}
	/* Meant for another process (a parent that did not unset it). */
	if (wpid != NULL && *wpid != '\0' &&
	    (!parse_u64(wpid, &p) || p != (uint64_t)getpid()))
		return;
	if (!N.on) {
		log_warnx("delivery: WATCHDOG_USEC is set without a usable NOTIFY_SOCKET; "
		    "no watchdog pings");
		return;
	}
	N.watchdog_ms = (int64_t)(v / 2000);
	if (N.watchdog_ms == 0)
		N.watchdog_ms = 1;
}

void
notify_init(void)
{
	memset(&N, 0, sizeof(N));
	init_socket(getenv("NOTIFY_SOCKET"));
	init_watchdog(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"));
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

bool
notify_active(void)
{
	return N.on;
}

int
notify_send(const char *state)
{
	struct timeval tmo = { 1, 0 };
	size_t len;
	ssize_t w;
	int fd, saved;

	if (!N.on)
		return 1;
	if (state == NULL || (len = strnlen(state, NOTIFY_STATE_MAX + 1)) == 0 ||
	    len > NOTIFY_STATE_MAX) {
		log_warnx("delivery: not sending an empty or over-long (%d-byte limit) state "
		    "to systemd", NOTIFY_STATE_MAX);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		saved = errno;
		goto fail;
	}
	/* A full receive queue blocks a datagram send: bound it. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
	do
		w = sendto(fd, state, len, MSG_NOSIGNAL, (struct sockaddr *)&N.addr, N.addrlen);
	while (w < 0 && errno == EINTR);
	saved = errno;
	close(fd);
	if (w == (ssize_t)len) {
		N.failing = false;
		return 0;
	}
	if (w >= 0)
		saved = EMSGSIZE;
fail:
	if (!N.failing)
		log_warnx("delivery: cannot notify systemd: %s", strerror(saved));
	N.failing = true;
	return -1;
}

int
notify_sendf(const char *fmt, ...)
{
	char text[NOTIFY_STATE_MAX + 2];
	va_list ap;
	int n;

	if (!N.on)
		return 1;
	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || n > NOTIFY_STATE_MAX) {
		log_warnx("delivery: not sending an over-long (%d-byte limit) state to systemd",
		    NOTIFY_STATE_MAX);
		return -1;
	}
	return notify_send(text);
}

int64_t
notify_watchdog_interval_ms(void)
{
	return N.watchdog_ms;
}
