/*
 * The pid record: ".cotal/delivery.<key>.pid written atomically (rename)
 * ..., removed on clean exit only if it still names this pid; readers trust
 * it only when the pid is alive and its command line names a delivery
 * daemon".
 */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/pidfile.h"

static char dir[256], path[512];

static int
setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	(void)state;
	snprintf(dir, sizeof(dir), "%s/cotal-pidfile-XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/delivery.64656d6f.pid", dir);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(path);
	rmdir(dir);
	return 0;
}

static void
put(const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void
test_write_is_the_pid_and_a_newline_0600(void **state)
{
	char err[256], buf[64];
	struct stat st;
	int fd;
	ssize_t n;

	(void)state;
	assert_int_equal(pidfile_write(path, 4242, err, sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	fd = open(path, O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "4242\n");
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 4242);
	/* Overwritten whole, no temporary left behind. */
	assert_int_equal(pidfile_write(path, 77, err, sizeof(err)), 0);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 77);
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	assert_true(access(tmp, F_OK) != 0);
	/* Never a pid kill(2) reads as a group. */
	assert_int_equal(pidfile_write(path, 0, err, sizeof(err)), -1);
	assert_int_equal(pidfile_write(path, 1, err, sizeof(err)), -1);
	assert_int_equal(pidfile_write(path, -7, err, sizeof(err)), -1);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 77);
}

static void
test_read_is_strict(void **state)
{
	char err[256];
	static const char *const bad[] = {
		"", "\n", "0\n", "1\n", "-1\n", "-1234\n", "+12\n", " 12\n", "12 \n", "12\n\n",
		"12abc\n", "0x10\n", "99999999999\n", "2147483648\n", "{\"pid\":12}\n", "12\n13\n",
	};

	(void)state;
	unlink(path);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 0); /* no record */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(bad[i]);
		err[0] = '\0';
		if (pidfile_read(path, err, sizeof(err)) != -1)
			fail_msg("record \"%s\" was accepted", bad[i]);
		assert_non_null(strstr(err, path));
	}
	put("12345");          /* no newline: accepted */
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 12345);
	put("2147483647\n");
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 2147483647);
	/* Too long to be a record. */
	char big[200];
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put(big);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), -1);
	/* A directory or a symlink is not a record. */
	unlink(path);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), -1);
	rmdir(path);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	assert_int_equal(pidfile_read(path, err, sizeof(err)), -1);
	unlink(path);
}

static void
test_remove_only_when_it_names_us(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(pidfile_write(path, 5000, err, sizeof(err)), 0);
	pidfile_remove_if_ours(path, 5001);    /* another daemon's record */
	assert_int_equal(pidfile_read(path, err, sizeof(err)), 5000);
	pidfile_remove_if_ours(path, 5000);
	assert_true(access(path, F_OK) != 0);
	pidfile_remove_if_ours(path, 5000);    /* already gone: nothing */
	put("garbage\n");
	pidfile_remove_if_ours(path, 5000);
	assert_true(access(path, F_OK) == 0);
	unlink(path);
}

/* A process whose command line is argv0 and the given arguments, each
 * its own (a shell sleeping, its arguments its positional ones), leading a
 * process group of its own: its sleep outlives a SIGKILL of the shell and
 * holds the test's output open (ctest waited out its 60 s), so the group is
 * killed. */
static pid_t
spawn(const char *argv0, const char *a1, const char *a2)
{
	char *argv[] = { (char *)argv0, (char *)"-c", (char *)"sleep 60; :", (char *)a1,
		(char *)a2, NULL };
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv("/bin/sh", argv);
		_exit(127);
	}
	return pid;
}

/* Until pid has exec'd (its command line names argv0), at most 10 s. */
static void
wait_exec(pid_t pid, const char *argv0)
{
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f != NULL)
			fclose(f);
		buf[n] = '\0';
		if (n > 0 && strcmp(buf, argv0) == 0)
			return;
		usleep(10 * 1000);
	}
	fail_msg("process %ld never ran as %s", (long)pid, argv0);
}

static void
test_verify_needs_a_delivery_daemon_of_the_space(void **state)
{
	const char *d = "/usr/sbin/cotal-deliveryd";
	pid_t s, f, o, a, ab, h;

	(void)state;
	s = spawn("sleep", "--space", "demo");
	f = spawn(d, "--space", "demo");
	o = spawn(d, "--space", "demo2");
	a = spawn(d, "--space", "a");
	ab = spawn(d, "--space", "a b");
	h = spawn("cotal-deliveryd", "--spaces", "/etc/cotal/spaces.json");
	wait_exec(s, "sleep");
	wait_exec(f, d), wait_exec(o, d), wait_exec(a, d), wait_exec(ab, d);
	wait_exec(h, "cotal-deliveryd");
	assert_int_equal(pidfile_verify(s, "demo"), 0);     /* another program */
	assert_int_equal(pidfile_verify(f, "demo"), 1);
	assert_int_equal(pidfile_verify(f, "dem"), 0);      /* another space */
	assert_int_equal(pidfile_verify(o, "demo"), 0);
	assert_int_equal(pidfile_verify(o, "demo2"), 1);
	/* Issue 27: each argument is compared whole. */
	assert_int_equal(pidfile_verify(ab, "a"), 0);
	assert_int_equal(pidfile_verify(ab, "a b"), 1);
	assert_int_equal(pidfile_verify(a, "a b"), 0);
	assert_int_equal(pidfile_verify(a, "a"), 1);
	assert_int_equal(pidfile_verify(h, "demo"), 0);
	assert_int_equal(pidfile_verify_host(h), 1);
	assert_int_equal(pidfile_verify_host(f), 0);
	assert_int_equal(pidfile_verify(0, "demo"), 0);
	assert_int_equal(pidfile_verify(1, "demo"), 0);
	/* A zombie is not a running daemon. */
	kill(f, SIGKILL);
	usleep(200 * 1000);
	assert_int_equal(pidfile_verify(f, "demo"), 0);
	waitpid(f, NULL, 0);
	kill(-f, SIGKILL);
	/* Gone. */
	assert_int_equal(pidfile_verify(f, "demo"), 0);
	pid_t rest[] = { s, o, a, ab, h };
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++) {
		kill(-rest[i], SIGKILL);
		waitpid(rest[i], NULL, 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_is_the_pid_and_a_newline_0600),
		cmocka_unit_test(test_read_is_strict),
		cmocka_unit_test(test_remove_only_when_it_names_us),
		cmocka_unit_test(test_verify_needs_a_delivery_daemon_of_the_space),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
