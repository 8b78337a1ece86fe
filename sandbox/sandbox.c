/*
 * Worker confinement, the order of the steps (see sandbox.h). This file
 * gives up identity and resources: it drops root for the unprivileged user,
 * proves the drop cannot be undone, lowers the rlimits and sets
 * no_new_privs, then hands over to landlock.c and seccomp.c. It runs once
 * per worker, single-threaded, before the worker's first nats.c call.
 */
#include "sandbox/sandbox.h"
#include "lib/refuse.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"

#define PASSWD_BUF_MAX 4096 /* getpwnam_r scratch space for one entry */
#define STATUS_LINE_MAX 256 /* one line of /proc/self/status */

const char *
sandbox_role_name(enum sandbox_role r)
{
	switch (r) {
	case SANDBOX_FANOUT:
		return "fanout";
	case SANDBOX_READER:
		return "reader";
	case SANDBOX_REGISTRY:
		return "registry";
	case SANDBOX_TIMER:
		return "timer";
	case SANDBOX_TEST:
		return "test";
	case SANDBOX_METRICS:
		return "metrics";
	}
	return "unknown";
}

int
sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	char buf[PASSWD_BUF_MAX];
	struct passwd pw, *res = NULL;
	int rc;

	rc = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
	if (rc != 0)
		return refuse(err, errlen, "getpwnam %s: %s", name, strerror(rc));
	if (res == NULL)
		return refuse(err, errlen, "no such user \"%s\"", name);
	if (pw.pw_uid == 0 || pw.pw_gid == 0)
		return refuse(err, errlen, "user \"%s\" is root (uid %u, gid %u): not a drop",
		    name, (unsigned)pw.pw_uid, (unsigned)pw.pw_gid);
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	return 0;
}

/*
 * Groups first (setgroups and setresgid need root), the uid last. Then
 * prove the drop: every id is the target, no supplementary group is left,
 * and neither root uid nor root gid can be taken back.
 */
int
sandbox_drop_privileges(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (uid == 0 || gid == 0)
		return refuse(err, errlen, "privdrop: target uid %u gid %u is root",
		    (unsigned)uid, (unsigned)gid);
	if (setgroups(0, NULL) != 0)
		return refuse(err, errlen, "privdrop: setgroups: %s", strerror(errno));
	if (setresgid(gid, gid, gid) != 0)
		return refuse(err, errlen, "privdrop: setresgid %u: %s", (unsigned)gid,
		    strerror(errno));
	if (setresuid(uid, uid, uid) != 0)
		return refuse(err, errlen, "privdrop: setresuid %u: %s", (unsigned)uid,
		    strerror(errno));

	if (getresuid(&ru, &eu, &su) != 0 || ru != uid || eu != uid || su != uid)
		return refuse(err, errlen, "privdrop: uid is not %u after setresuid",
		    (unsigned)uid);
	if (getresgid(&rg, &eg, &sg) != 0 || rg != gid || eg != gid || sg != gid)
		return refuse(err, errlen, "privdrop: gid is not %u after setresgid",
		    (unsigned)gid);
	if (getgroups(0, NULL) != 0)
		return refuse(err, errlen, "privdrop: supplementary groups remain");
	if (setuid(0) != -1 || seteuid(0) != -1)
		return refuse(err, errlen, "privdrop: root uid could be regained");
	if (setgid(0) != -1 || setegid(0) != -1)
		return refuse(err, errlen, "privdrop: root gid could be regained");
	return 0;
}

/*
 * No core files (a worker's memory holds a JWT), no file growth (a worker
 * writes no file), a bounded descriptor table. Soft and hard limits both,
 * so the worker cannot raise them again. With RLIMIT_FSIZE 0 a write to a
 * regular file fails with EFBIG and raises SIGXFSZ: a worker's log must be
 * a pipe or socket, never an inherited log file.
 */
int
sandbox_rlimits(char *err, size_t errlen)
{
	static const struct {
		int resource;
		const char *name;
		rlim_t limit;
	} limits[] = {
		{ RLIMIT_CORE, "RLIMIT_CORE", 0 },
		{ RLIMIT_FSIZE, "RLIMIT_FSIZE", 0 },
		{ RLIMIT_NOFILE, "RLIMIT_NOFILE", SANDBOX_MAX_OPEN_FILES },
	};

	struct stat st;

	/* Said before the limit makes it fatal, while it can still be said. */
	if (fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode))
		return refuse(err, errlen, "rlimits: its log (standard error) is a regular file, "
		    "and with RLIMIT_FSIZE 0 the first line written to it would kill the worker "
		    "(SIGXFSZ): a worker logs to its supervisor's pipe");
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		struct rlimit rl = { limits[i].limit, limits[i].limit };

		if (setrlimit(limits[i].resource, &rl) != 0)
			return refuse(err, errlen, "rlimits: %s %llu: %s", limits[i].name,
			    (unsigned long long)limits[i].limit, strerror(errno));
	}
	return 0;
}

/*
 * Landlock confines only the calling thread and seccomp is loaded before
 * any library thread exists: a second thread here means a caller broke the
 * "before the first nats.c call" rule, and that thread would run free.
 */
static int
single_threaded(char *err, size_t errlen)
{
	char line[STATUS_LINE_MAX];
	long threads = -1;
	FILE *f;

	if ((f = fopen("/proc/self/status", "re")) == NULL)
		return refuse(err, errlen, "threads: /proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Threads: %ld", &threads) == 1)
			break;
	fclose(f);
	if (threads != 1)
		return refuse(err, errlen, "threads: %ld threads before confinement, want 1",
		    threads);
	return 0;
}

int
sandbox_confine(const struct sandbox_opts *o, char *err, size_t errlen)
{
	char line[1024];
	int abi = 0;

	if (single_threaded(err, errlen) != 0)
		return -1;
	if (o->drop && geteuid() == 0 &&
	    sandbox_drop_privileges(o->uid, o->gid, err, errlen) != 0)
		return -1;
	if (sandbox_rlimits(err, errlen) != 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return refuse(err, errlen, "no_new_privs: %s", strerror(errno));
	if (sandbox_landlock(o->broker_ports, &abi, err, errlen) != 0)
		return -1;
	if (sandbox_seccomp(o->role, o->seccomp_log, err, errlen) != 0)
		return -1;
	/* What holds, in one line; a lesser kernel's lines are warnings. */
	sandbox_describe(o->role, abi, o->seccomp_log, o->broker_ports, line, sizeof(line));
	if (abi < 4 || o->seccomp_log)
		log_warnx("%s", line);
	else
		log_info("%s", line);
	return 0;
}

bool
sandbox_seccomp_log_wanted(const char *value, bool test_build, bool *ignored)
{
	bool asked = value != NULL && strcmp(value, "log") == 0;

	*ignored = asked && !test_build;
	return asked && test_build;
}

bool
sandbox_seccomp_log_requested(bool *ignored)
{
	return sandbox_seccomp_log_wanted(getenv("COTAL_SECCOMP"), SANDBOX_TEST_BUILD, ignored);
}
