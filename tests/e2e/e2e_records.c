/*
 * The daemon's records and systemd notifications against a real broker:
 *
 *   "Pid record: exists after ready with a live pid; removed on SIGTERM;
 *    pointed at an unrelated process it is reported stale."
 *   "sd_notify READY/STOPPING/STATUS and watchdog pings when NOTIFY_SOCKET /
 *    WATCHDOG_USEC are set."
 *   "cotal down never signals such a process ... A record whose pid now
 *    belongs to another program is cleared without a signal."
 *
 * A datagram socket at an abstract name stands in for systemd.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

static struct mesh mesh;
static struct daemon dmn;
static int nfd = -1;
static char rpath[H_PATH_MAX * 2], spath[H_PATH_MAX * 2];

static int
setup(void **state)
{
	char key[512];

	(void)state;
	if (h_mesh_up(&mesh, "records", true) != 0)
		return -1;
	space_key(mesh.space, key, sizeof(key));
	snprintf(rpath, sizeof(rpath), "%s/.cotal/delivery.%s.pid", mesh.dir, key);
	snprintf(spath, sizeof(spath), "%s/.cotal/delivery.%s.status.json", mesh.dir, key);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	h_daemon_kill(&dmn);
	if (nfd >= 0)
		close(nfd);
	h_mesh_down(&mesh);
	return 0;
}

/* The record's pid when it holds exactly "<pid>\n" (the format the daemon
 * writes), else 0. */
static pid_t
read_record(void)
{
	char buf[64], want[32];
	int fd = open(rpath, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	long pid = strtol(buf, NULL, 10);
	snprintf(want, sizeof(want), "%ld\n", pid);
	return pid > 1 && strcmp(buf, want) == 0 ? (pid_t)pid : 0;
}

static void
write_record(const char *text)
{
	FILE *f = fopen(rpath, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Wait up to ms for the record to name pid. */
static bool
record_names(pid_t pid, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		if (read_record() == pid)
			return true;
		usleep(50 * 1000);
	}
	return false;
}

static pid_t
spawn_sleep(void)
{
	char *argv[] = { (char *)"sleep", (char *)"60", NULL };
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		closefrom(3);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Started under a NOTIFY_SOCKET and WATCHDOG_USEC: READY=1 once it serves,
 * and by then its record names it. */
static void
test_ready_notifies_and_the_record_names_a_live_daemon(void **state)
{
	char name[128], seen[16384] = "", out[H_OUT_MAX], want[64];
	struct stat st;

	(void)state;
	nfd = h_notify_listener(name, sizeof(name));
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "1000000", 1);
	int rc = h_daemon_start(&mesh, &dmn, NULL);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	assert_int_equal(rc, 0);
	if (!h_datagram_has(nfd, "READY=1", 60000, seen, sizeof(seen)))
		fail_msg("no READY=1 on NOTIFY_SOCKET within 60 s; received: %s (log %s)", seen,
		    dmn.log);
	/* Written once the lease is held, which is before it is ready. */
	if (read_record() != dmn.pid)
		fail_msg("at READY=1 the pid record %s does not name the daemon (pid %ld)", rpath,
		    (long)dmn.pid);
	assert_int_equal(stat(rpath, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(kill(dmn.pid, 0), 0);

	/* cotal status believes it. */
	assert_int_equal(h_daemon_wait_connected(&dmn, 20000), 0);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 0);
	snprintf(want, sizeof(want), "pid %ld", (long)dmn.pid);
	if (strstr(out, want) == NULL || strstr(out, "stale") != NULL)
		fail_msg("cotal status:\n%s", out);
	assert_null(strstr(out, "no pid record"));
}

/* WATCHDOG_USEC=1 s: a WATCHDOG=1 ping every half second. */
static void
test_watchdog_pings(void **state)
{
	char seen[16384] = "";

	(void)state;
	assert_true(nfd >= 0);
	for (int i = 0; i < 3; i++)
		if (!h_datagram_has(nfd, "WATCHDOG=1", 3000, seen, sizeof(seen)))
			fail_msg("ping %d: no WATCHDOG=1 within 3 s; received: %s", i + 1, seen);
}

/* The workers never see NOTIFY_SOCKET. */
static void
test_workers_do_not_inherit_notify_socket(void **state)
{
	static const char *const roles[] = { "fanout", "reader", "registry", "timer" };

	(void)state;
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		char path[64], buf[65536];
		pid_t pid = h_daemon_worker_pid(&dmn, roles[i]);
		assert_true(pid > 0);
		snprintf(path, sizeof(path), "/proc/%ld/environ", (long)pid);
		int fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		ssize_t n = read(fd, buf, sizeof(buf));
		close(fd);
		if (n > 0 && memmem(buf, (size_t)n, "NOTIFY_SOCKET", 13) != NULL)
			fail_msg("worker %s sees NOTIFY_SOCKET", roles[i]);
	}
}

/* SIGTERM: STOPPING=1, a clean exit, and the record is gone. */
static void
test_sigterm_notifies_stopping_and_removes_the_record(void **state)
{
	char seen[16384] = "";

	(void)state;
	assert_true(dmn.pid > 0);
	assert_int_equal(kill(dmn.pid, SIGTERM), 0);
	if (!h_datagram_has(nfd, "STOPPING=1", 5000, seen, sizeof(seen)))
		fail_msg("no STOPPING=1 within 5 s of SIGTERM; received: %s", seen);
	int st = h_daemon_wait_exit(&dmn, 5000);
	assert_true(st >= 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	if (access(rpath, F_OK) == 0)
		fail_msg("the pid record %s outlived a clean exit", rpath);
	close(nfd);
	nfd = -1;
}

/* cotal down: SIGTERM to the verified daemon, which exits cleanly; both
 * records are gone. */
static void
test_cotal_down_stops_the_daemon(void **state)
{
	char out[H_OUT_MAX], want[128];

	(void)state;
	assert_int_equal(h_daemon_start(&mesh, &dmn, NULL), 0);
	if (!record_names(dmn.pid, 60000))
		fail_msg("the pid record %s never named the daemon (pid %ld; log %s)", rpath,
		    (long)dmn.pid, dmn.log);
	int rc = h_cotal(&mesh, out, sizeof(out), "down", "--space", mesh.space, NULL);
	if (rc != 0)
		fail_msg("cotal down exited %d:\n%s", rc, out);
	snprintf(want, sizeof(want), "stopped (pid %ld)", (long)dmn.pid);
	if (strstr(out, want) == NULL)
		fail_msg("cotal down:\n%s", out);
	assert_null(strstr(out, "SIGKILL"));
	int st = h_daemon_wait_exit(&dmn, 2000);
	assert_true(st >= 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	char line[256];
	snprintf(line, sizeof(line), "• delivery: received SIGTERM, exiting (space %s, shard 0)",
	    mesh.space);
	assert_true(h_log_has(dmn.log, line, 0));
	assert_true(access(rpath, F_OK) != 0);
	assert_true(access(spath, F_OK) != 0);

	/* Nothing left to stop. */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", mesh.space, NULL), 0);
	assert_non_null(strstr(out, "not running"));
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 3);
	assert_non_null(strstr(out, "not running"));
}

/* A record pointed at an unrelated live process: stale; down clears it and
 * the process lives on. */
static void
test_record_of_another_program_is_stale(void **state)
{
	char out[H_OUT_MAX], text[32];
	pid_t s = spawn_sleep();

	(void)state;
	usleep(200 * 1000);
	snprintf(text, sizeof(text), "%ld\n", (long)s);
	write_record(text);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 3);
	if (strstr(out, "stale record") == NULL)
		fail_msg("cotal status:\n%s", out);
	int rc = h_cotal(&mesh, out, sizeof(out), "down", "--space", mesh.space, NULL);
	if (rc != 0 || strstr(out, "cleared it without a signal") == NULL)
		fail_msg("cotal down exited %d:\n%s", rc, out);
	assert_true(access(rpath, F_OK) != 0);
	/* Never signalled: still running, not reaped. */
	usleep(200 * 1000);
	assert_int_equal(waitpid(s, NULL, WNOHANG), 0);
	assert_int_equal(kill(s, 0), 0);
	kill(s, SIGKILL);
	waitpid(s, NULL, 0);
}

/* A record of a process that is gone: stale, cleared. */
static void
test_record_of_a_dead_process_is_stale(void **state)
{
	char out[H_OUT_MAX], text[32];
	pid_t p = fork();

	(void)state;
	assert_true(p >= 0);
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	snprintf(text, sizeof(text), "%ld\n", (long)p);
	write_record(text);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 3);
	assert_non_null(strstr(out, "stale record"));
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", mesh.space, NULL), 0);
	assert_non_null(strstr(out, "cleared it without a signal"));
	assert_true(access(rpath, F_OK) != 0);
}

/* A record that is not a pid ("-1" would be every process to kill(2)) is
 * refused and left for an operator. */
static void
test_malformed_record_signals_nothing(void **state)
{
	char out[H_OUT_MAX];

	(void)state;
	write_record("-1\n");
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", mesh.space, NULL), 1);
	assert_non_null(strstr(out, "does not hold a pid"));
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 1);
	assert_true(access(rpath, F_OK) == 0);
	unlink(rpath);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ready_notifies_and_the_record_names_a_live_daemon),
		cmocka_unit_test(test_watchdog_pings),
		cmocka_unit_test(test_workers_do_not_inherit_notify_socket),
		cmocka_unit_test(test_sigterm_notifies_stopping_and_removes_the_record),
		cmocka_unit_test(test_cotal_down_stops_the_daemon),
		cmocka_unit_test(test_record_of_another_program_is_stale),
		cmocka_unit_test(test_record_of_a_dead_process_is_stale),
		cmocka_unit_test(test_malformed_record_signals_nothing),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
