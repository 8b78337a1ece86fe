/*
 * The sd_notify protocol without libsystemd: "sd_notify READY/STOPPING/
 * STATUS and watchdog pings when NOTIFY_SOCKET / WATCHDOG_USEC are set".
 * A datagram socket stands in for systemd, at a path and at an abstract
 * name; the exact datagrams are checked.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "service/notify.h"

static char dir[256];

static int
setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	(void)state;
	/* Short: a socket path must fit sun_path (108 bytes). */
	snprintf(dir, sizeof(dir), "%s/cotal-notify-XXXXXX",
	    tmp != NULL && strlen(tmp) < 60 ? tmp : "/tmp");
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	rmdir(dir);
	return 0;
}

static void
clear_env(void)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

/* A receiving socket bound at name ("@x": abstract). */
static int
listener(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t len;
	struct timeval tmo = { 2, 0 };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (name[0] == '@') {
		memcpy(a.sun_path + 1, name + 1, strlen(name) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	} else {
		unlink(name);
		memcpy(a.sun_path, name, strlen(name));
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name) + 1);
	}
	assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
	return fd;
}

/* The next datagram, exactly (NUL-terminated in buf). */
static void
expect(int fd, const char *want)
{
	char buf[8192];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

	if (n < 0)
		fail_msg("no datagram (wanted \"%s\"): %s", want, strerror(errno));
	buf[n] = '\0';
	assert_int_equal((size_t)n, strlen(want));
	assert_string_equal(buf, want);
}

static void
expect_nothing(int fd)
{
	char buf[64];

	assert_true(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static void
test_path_socket_gets_the_exact_datagrams(void **state)
{
	char path[512];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/notify.sock", dir);
	fd = listener(path);
	clear_env();
	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	/* Gone from the environment: no child ever sees it. */
	assert_null(getenv("NOTIFY_SOCKET"));

	int before = count_fds();
	assert_int_equal(notify_send("READY=1\nSTATUS=serving space demo"), 0);
	expect(fd, "READY=1\nSTATUS=serving space demo");
	assert_int_equal(notify_sendf("STATUS=serving space %s", "demo"), 0);
	expect(fd, "STATUS=serving space demo");
	assert_int_equal(notify_send("WATCHDOG=1"), 0);
	expect(fd, "WATCHDOG=1");
	assert_int_equal(notify_send("STOPPING=1"), 0);
	expect(fd, "STOPPING=1");
	/* One socket per send, closed after it. */
	assert_int_equal(count_fds(), before);
	/* Without WATCHDOG_USEC the watchdog is off. */
	assert_int_equal(notify_watchdog_interval_ms(), 0);
	close(fd);
	unlink(path);
}

static void
test_abstract_socket_gets_the_exact_datagrams(void **state)
{
	char name[128];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@cotal-notify-test-%ld-%ld", (long)getpid(),
	    (long)time(NULL));
	fd = listener(name);
	clear_env();
	setenv("NOTIFY_SOCKET", name, 1);
	notify_init();
	assert_null(getenv("NOTIFY_SOCKET"));
	assert_int_equal(notify_send("READY=1\nSTATUS=serving space demo"), 0);
	expect(fd, "READY=1\nSTATUS=serving space demo");
	assert_int_equal(notify_send("STOPPING=1"), 0);
	expect(fd, "STOPPING=1");
	expect_nothing(fd);
	close(fd);
}

/* Refused values: no crash, no datagram, nothing left in the environment. */
static void
test_bad_notify_socket_is_refused(void **state)
{
	char longpath[300], longabs[300];
	static const char *const bad_fixed[] = {
		"relative/notify.sock", "notify.sock", "@", "vsock:2:1234", "~/x",
	};

	(void)state;
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	memset(longabs, 'b', sizeof(longabs) - 1);
	longabs[0] = '@';
	longabs[sizeof(longabs) - 1] = '\0';

	const char *bad[sizeof(bad_fixed) / sizeof(bad_fixed[0]) + 2];
	size_t n = 0;
	for (size_t i = 0; i < sizeof(bad_fixed) / sizeof(bad_fixed[0]); i++)
		bad[n++] = bad_fixed[i];
	bad[n++] = longpath;
	bad[n++] = longabs;
	for (size_t i = 0; i < n; i++) {
		clear_env();
		setenv("NOTIFY_SOCKET", bad[i], 1);
		setenv("WATCHDOG_USEC", "4000000", 1);
		notify_init();
		assert_null(getenv("NOTIFY_SOCKET"));
		assert_null(getenv("WATCHDOG_USEC"));
		assert_int_equal(notify_send("READY=1"), 1);
		assert_int_equal(notify_watchdog_interval_ms(), 0);
	}
	/* Empty and unset: not under systemd. */
	clear_env();
	setenv("NOTIFY_SOCKET", "", 1);
	notify_init();
	assert_int_equal(notify_send("READY=1"), 1);
	clear_env();
	notify_init();
	assert_int_equal(notify_send("READY=1"), 1);
	assert_int_equal(notify_sendf("STATUS=%s", "x"), 1);
}

/* The longest path that fits is accepted; one byte more is refused. */
static void
test_path_length_bound(void **state)
{
	struct sockaddr_un a;
	char path[sizeof(dir) + sizeof(a.sun_path) + 2];
	size_t max = sizeof(a.sun_path) - 1, base = strlen(dir) + 1;
	int fd;

	(void)state;
	if (base + 1 > max)
		skip();
	memcpy(path, dir, base - 1);
	path[base - 1] = '/';
	memset(path + base, 'p', max - base);
	path[max] = '\0';
	fd = listener(path);
	clear_env();
	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	assert_int_equal(notify_send("READY=1"), 0);
	expect(fd, "READY=1");
	close(fd);
	unlink(path);

	path[max] = 'p';
	path[max + 1] = '\0';
	clear_env();
	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	assert_int_equal(notify_send("READY=1"), 1);
}

static void
test_watchdog_interval(void **state)
{
	char name[128], pid[32];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@cotal-notify-wd-%ld", (long)getpid());
	fd = listener(name);

	/* Half of WATCHDOG_USEC, in milliseconds. */
	clear_env();
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "4000000", 1);
	notify_init();
	assert_null(getenv("WATCHDOG_USEC"));
	assert_int_equal(notify_watchdog_interval_ms(), 2000);

	/* WATCHDOG_PID naming this process: honoured, and unset. */
	clear_env();
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "30000000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	notify_init();
	assert_null(getenv("WATCHDOG_PID"));
	assert_int_equal(notify_watchdog_interval_ms(), 15000);

	/* WATCHDOG_PID of another process: the watchdog is not ours. */
	static const char *const others[] = { "1", "0", "-5", "abc", "99999999999999999999" };
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		clear_env();
		setenv("NOTIFY_SOCKET", name, 1);
		setenv("WATCHDOG_USEC", "4000000", 1);
		setenv("WATCHDOG_PID", others[i], 1);
		notify_init();
		assert_null(getenv("WATCHDOG_PID"));
		assert_int_equal(notify_watchdog_interval_ms(), 0);
		/* Notifications themselves still go out. */
		assert_int_equal(notify_send("WATCHDOG=1"), 0);
		expect(fd, "WATCHDOG=1");
	}

	/* Invalid or zero WATCHDOG_USEC: off. A tiny one: at least 1 ms. */
	static const char *const badusec[] = { "0", "abc", "-1", "12x", " 5", "" };
	for (size_t i = 0; i < sizeof(badusec) / sizeof(badusec[0]); i++) {
		clear_env();
		setenv("NOTIFY_SOCKET", name, 1);
		setenv("WATCHDOG_USEC", badusec[i], 1);
		notify_init();
		assert_int_equal(notify_watchdog_interval_ms(), 0);
	}
	clear_env();
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "1", 1);
	notify_init();
	assert_int_equal(notify_watchdog_interval_ms(), 1);

	/* A watchdog with nowhere to ping is off. */
	clear_env();
	setenv("WATCHDOG_USEC", "4000000", 1);
	notify_init();
	assert_int_equal(notify_watchdog_interval_ms(), 0);
	close(fd);
}

/* Over-long or empty states are not sent; a missing receiver is an error,
 * not a crash, and a later send succeeds again. */
static void
test_bounds_and_failures(void **state)
{
	char name[128], *big;
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@cotal-notify-bounds-%ld", (long)getpid());
	fd = listener(name);
	clear_env();
	setenv("NOTIFY_SOCKET", name, 1);
	notify_init();

	big = malloc(NOTIFY_STATE_MAX + 2);
	assert_non_null(big);
	memcpy(big, "STATUS=", 7);
	memset(big + 7, 'x', NOTIFY_STATE_MAX - 7);
	big[NOTIFY_STATE_MAX] = '\0';
	assert_int_equal(notify_send(big), 0); /* exactly the limit */
	expect(fd, big);
	big[NOTIFY_STATE_MAX] = 'x';
	big[NOTIFY_STATE_MAX + 1] = '\0';
	assert_int_equal(notify_send(big), -1);
	assert_int_equal(notify_sendf("%s", big), -1);
	expect_nothing(fd);
	free(big);
	assert_int_equal(notify_send(""), -1);
	assert_int_equal(notify_send(NULL), -1);
	expect_nothing(fd);

	/* The receiver goes away: refused, then back. */
	close(fd);
	assert_int_equal(notify_send("WATCHDOG=1"), -1);
	assert_int_equal(notify_send("WATCHDOG=1"), -1);
	fd = listener(name);
	assert_int_equal(notify_send("WATCHDOG=1"), 0);
	expect(fd, "WATCHDOG=1");
	close(fd);
	clear_env();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_socket_gets_the_exact_datagrams),
		cmocka_unit_test(test_abstract_socket_gets_the_exact_datagrams),
		cmocka_unit_test(test_bad_notify_socket_is_refused),
		cmocka_unit_test(test_path_length_bound),
		cmocka_unit_test(test_watchdog_interval),
		cmocka_unit_test(test_bounds_and_failures),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
