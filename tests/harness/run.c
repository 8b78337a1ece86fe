/*
 * A test program's run: its start (the broker it uses, a case filter, the
 * alarm for a hung test), the processes and directories that die with it
 * however it ends, and its exit status (h_done).
 */
#include "tests/harness/harness_int.h"

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_BROKERS 16 /* and daemons: whatever dies with the test */
#define MAX_DIRS 16

enum h_broker hi_broker;

static pid_t brokers[MAX_BROKERS];
/* When each was started (/proc/<pid>/stat field 22), so that a pid the
 * kernel gave to another process since is never killed in its place. */
static unsigned long long started[MAX_BROKERS];
static char dirs[MAX_DIRS][H_DIR_MAX];
static int ndirs;
static bool cleanup_armed;

/*
 * A test that hangs is a bug to find, and ctest's timeout kills it without
 * a word. COTAL_TEST_STUCK_S (tests/CMakeLists.txt: the test's TIMEOUT less
 * 20 s) arms an alarm; when it rings, gdb prints every thread's stack onto
 * stderr, which ctest keeps, and the test goes on to its timeout.
 */
static void
on_stuck(int sig)
{
	static const char said[] = "\n• stuck: this test ran past COTAL_TEST_STUCK_S; every "
	    "thread's stack follows (gdb)\n";
	char pid[24];
	int n = 0;
	pid_t me = getpid(), c;

	(void)sig;
	/* Only async-signal-safe work: format the pid by hand, fork, exec. */
	for (pid_t v = me; v > 0 && n < 20; v /= 10)
		n++;
	pid[n] = '\0';
	for (pid_t v = me; n > 0; v /= 10)
		pid[--n] = (char)('0' + v % 10);
	if (write(2, said, sizeof(said) - 1) < 0)
		return;
	if ((c = fork()) == 0) {
		dup2(2, 1);
		execlp("gdb", "gdb", "-p", pid, "-batch", "-nx", "-ex", "thread apply all bt",
		    (char *)NULL);
		_exit(127);
	}
	if (c > 0)
		waitpid(c, NULL, 0);
}

void
h_use_broker(enum h_broker b)
{
	const char *stuck = getenv("COTAL_TEST_STUCK_S");

	hi_broker = b;
	/* One case (or a pattern of them) by hand: COTAL_TEST_FILTER. */
	if (getenv("COTAL_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("COTAL_TEST_FILTER"));
	if (stuck != NULL && atoi(stuck) > 0) {
		signal(SIGALRM, on_stuck);
		alarm((unsigned)atoi(stuck));
	}
}

enum h_broker
h_broker_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--broker-29") == 0)
			return H_BROKER_29;
		if (strcmp(argv[i], "--broker-214") == 0)
			return H_BROKER_214;
	}
	return H_BROKER_210;
}

/*
 * The start time of pid (in clock ticks since boot), 0 when it has none
 * (gone). Async-signal-safe: open, read and close only, no stdio.
 */
static unsigned long long
start_time(pid_t pid)
{
	char path[40] = "/proc/", digits[16], buf[1024];
	unsigned long long v = 0;
	int n = 0, fd, field = 2;
	ssize_t len;
	char *p;

	if (pid <= 0)
		return 0;
	for (pid_t x = pid; x > 0 && n < (int)sizeof(digits); x /= 10)
		digits[n++] = (char)('0' + x % 10);
	p = path + 6;
	while (n > 0)
		*p++ = digits[--n];
	memcpy(p, "/stat", 6);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	/* "pid (comm) state ...": count the fields after comm's last ')'. */
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	for (p++; *p != '\0' && field < 22; p++)
		if (*p == ' ')
			field++;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned long long)(*p - '0');
	return v;
}

void
hi_track(pid_t pid, bool add)
{
	for (int i = 0; i < MAX_BROKERS; i++)
		if (add ? brokers[i] == 0 : brokers[i] == pid) {
			brokers[i] = add ? pid : 0;
			started[i] = add ? start_time(pid) : 0;
			return;
		}
}

/*
 * SIGKILL what the test started and still runs: only a pid that is still
 * the process it tracked (the same start time), never one the kernel has
 * given to another process since a test reaped it without untracking (on
 * a loaded machine with pid_max 32768 that happens within minutes, and the
 * process killed was another suite's worker). Async-signal-safe.
 */
static void
kill_tracked(bool reap)
{
	for (int i = 0; i < MAX_BROKERS; i++) {
		pid_t pid = brokers[i];
		if (pid <= 0)
			continue;
		if (started[i] != 0 && start_time(pid) == started[i]) {
			kill(pid, SIGKILL);
			if (reap)
				waitpid(pid, NULL, 0);
		}
		brokers[i] = 0;
	}
}

static void
kill_brokers(void)
{
	kill_tracked(true);
}

static int
rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static void
cleanup_at_exit(void)
{
	kill_brokers();
	if (getenv("COTAL_TEST_KEEP") != NULL) {
		for (int i = 0; i < ndirs; i++)
			fprintf(stderr, "• kept test directory %s\n", dirs[i]);
		return;
	}
	for (int i = 0; i < ndirs; i++)
		nftw(dirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	ndirs = 0;
}

int
h_done(int failed)
{
	nats_Close();
	if (failed == 0)
		return 0;
	kill_brokers();
	fprintf(stderr, "• %d test(s) failed: ending without LeakSanitizer's exit report (a failed "
	    "assertion leaves what its test held allocated)\n", failed);
	for (int i = 0; i < ndirs; i++)
		fprintf(stderr, "• kept test directory %s\n", dirs[i]);
	fflush(NULL);
	_exit(failed > 0 && failed < 126 ? failed : 125);
}

static void
cleanup_on_signal(int sig)
{
	/* Only async-signal-safe work here: kill, then die of the signal. */
	kill_tracked(false);
	signal(sig, SIG_DFL);
	raise(sig);
}

void
hi_arm_cleanup(void)
{
	static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP };

	if (cleanup_armed)
		return;
	cleanup_armed = true;
	atexit(cleanup_at_exit);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], cleanup_on_signal);
}

int
hi_keep_dir(const char *dir)
{
	if (ndirs == MAX_DIRS)
		return -1;
	snprintf(dirs[ndirs++], H_DIR_MAX, "%s", dir);
	return 0;
}

void
h_track(pid_t pid)
{
	hi_track(pid, true);
}

void
h_nap(int ms)
{
	hi_sleep_ms(ms);
}
