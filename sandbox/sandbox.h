/*
 * Worker confinement, applied in this order before a worker's first nats.c
 * call (so every library thread inherits it), and the same steps for the
 * metrics server before it serves its first request:
 *
 *   1. sandbox_drop_privileges(): when root, setgroups(0), setgid, setuid to
 *      the unprivileged user (default "nobody"), verified irreversible;
 *   2. rlimits: no core files, RLIMIT_FSIZE 0, bounded open files;
 *   3. PR_SET_NO_NEW_PRIVS;
 *   4. Landlock: no filesystem access, and (ABI >= 4) TCP connect only to
 *      the brokers' ports; where the kernel has none or no network rules,
 *      the worker's start line says so;
 *   5. seccomp: a default-kill allow-list for the role: TCP stream sockets
 *      only, no file opened (EACCES), no exec, on every kernel.
 *
 * Then the worker logs what holds (sandbox_describe, describe.c).
 *
 * x86_64 only (the seccomp policy is written for it and refuses to load on
 * another architecture).
 */
#ifndef COTAL_SANDBOX_H
#define COTAL_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum sandbox_role {
	SANDBOX_FANOUT,
	SANDBOX_READER,
	SANDBOX_REGISTRY,
	SANDBOX_TIMER,
	SANDBOX_TEST, /* the policy test program: the same list as a worker */
	/* The metrics server (metrics/): no broker connection; it serves
	 * HTTP on the one listening socket its parent bound. */
	SANDBOX_METRICS,
};

#define SANDBOX_MAX_OPEN_FILES 256
#define SANDBOX_PORTS_MAX 8 /* every listed server of a cluster */

struct sandbox_opts {
	enum sandbox_role role;
	uid_t uid;            /* target user when started as root */
	gid_t gid;
	bool drop;            /* drop to uid/gid (only meaningful as root) */
	/* Landlock TCP connect rules, one per listed server's port; 0: unused.
	 * None at all: no TCP connect. */
	uint16_t broker_ports[SANDBOX_PORTS_MAX];
	bool seccomp_log;     /* COTAL_SECCOMP=log: log violations, do not kill */
};

/* Look up the unprivileged user by name (before confinement). 0 or -1. */
int sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid, char *err, size_t errlen);

/* Apply every step above. 0 on success, -1 with err naming the step. Any
 * failure is fatal for the worker: it must not run unconfined. */
int sandbox_confine(const struct sandbox_opts *o, char *err, size_t errlen);

/* The steps one by one (sandbox_confine calls them in order). */
int sandbox_drop_privileges(uid_t uid, gid_t gid, char *err, size_t errlen);
int sandbox_rlimits(char *err, size_t errlen);
int sandbox_landlock(const uint16_t ports[SANDBOX_PORTS_MAX], int *abi, char *err, size_t errlen);
int sandbox_seccomp(enum sandbox_role role, bool log_only, char *err, size_t errlen);

const char *sandbox_role_name(enum sandbox_role r);

/*
 * COTAL_SECCOMP=log, the filters logging a violation instead of killing
 * (diagnosis): honoured by a test build (COTAL_TEST_HOOKS) alone, so that a
 * release build keeps what its start-up refusal guarantees (issue 41).
 * value: the variable's value (NULL when unset); test_build: whether this
 * build has test hooks. True when the filters are to log; *ignored true
 * when log mode was asked for and is not honoured. sandbox_seccomp itself
 * never loads a logging filter in a build without test hooks.
 */
bool sandbox_seccomp_log_wanted(const char *value, bool test_build, bool *ignored);
/* The same for this build and its environment. */
bool sandbox_seccomp_log_requested(bool *ignored);
#ifdef COTAL_TEST_HOOKS
#define SANDBOX_TEST_BUILD true
#else
#define SANDBOX_TEST_BUILD false
#endif

/* Can this kernel load the workers' seccomp filters (SECCOMP_RET_KILL_PROCESS)?
 * 0, or -1 with err naming the kernel's answer: the daemon refuses to run. */
int sandbox_can_confine(char *err, size_t errlen);
/* The running kernel's Landlock ABI, 0 without Landlock (probed, nothing
 * applied). */
int sandbox_landlock_abi(void);
/* One line: what a worker of role holds on a kernel of Landlock ABI abi
 * with these broker ports (the worker's start line, `cotal status`). */
void sandbox_describe(enum sandbox_role role, int abi, bool seccomp_log,
		      const uint16_t ports[SANDBOX_PORTS_MAX], char *out, size_t outlen);
/* docs/security.md's table of every role and kernel, markdown. */
void sandbox_table(FILE *out);

/* AddressSanitizer builds: gcc says so with __SANITIZE_ADDRESS__, clang
 * (before 18) only through __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANDBOX_ASAN 1
#endif
#endif

#endif
