/*
 * The seccomp policies, one per worker role. x86_64 only: the lists name
 * x86_64 system calls and sandbox_seccomp() refuses to load them on any
 * other architecture; a call made through another ABI (i386, x32) kills
 * the process.
 *
 * A worker may manage its memory without ever making it executable, run
 * nats.c's threads, keep time, read from and write to the descriptors it
 * holds (the two supervisor channels, the log, the broker socket), open
 * TCP sockets and connect them (Landlock narrows the port), and open files
 * read-only (Landlock narrows them to the resolver's). Anything else kills
 * the process with SIGSYS, or is logged when the daemon runs with
 * COTAL_SECCOMP=log.
 *
 * Every role starts from worker_base(), the calls the shared runtime
 * (lib/worker.c, nats.c, OpenSSL, glibc 2.36) makes; a role adds what its
 * own main loop needs in its policy function below. Today the four
 * workers run the same connection code and their lists are the base.
 */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/futex.h>

#include <seccomp.h>

/* The one clone(2) a worker makes: glibc 2.36's pthread_create, after
 * clone3 answered ENOSYS. Any other flag set (fork, namespaces) is refused. */
#define THREAD_CLONE_FLAGS                                                   \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SYSVSEM | CLONE_SIGHAND |  \
	    CLONE_THREAD | CLONE_SETTLS | CLONE_PARENT_SETTID |               \
	    CLONE_CHILD_CLEARTID)

/* open(2) flags that write or create; a worker's openat carries none. */
#define OPEN_WRITE_FLAGS (O_ACCMODE | O_CREAT | O_TRUNC)

/* The futex operation without its PRIVATE/CLOCK_REALTIME modifiers. */
#define FUTEX_OP_MASK ((uint32_t)FUTEX_CMD_MASK)

struct policy {
	scmp_filter_ctx ctx;
	int rc;          /* first libseccomp error, 0 while none */
	const char *bad; /* the call whose rule failed */
};

#define ALLOW(p, call) allow((p), SCMP_SYS(call), #call, 0, NULL)
#define ALLOW_IF(p, call, cmp) allow_if((p), SCMP_SYS(call), #call, (cmp))
#define SOFT_FAIL(p, call, err) rule((p), SCMP_ACT_ERRNO(err), SCMP_SYS(call), #call, 0, NULL)

static void
rule(struct policy *p, uint32_t action, int nr, const char *name, unsigned n,
    const struct scmp_arg_cmp *cmp)
{
	int rc;

	if (p->rc != 0)
		return;
	if ((rc = seccomp_rule_add_array(p->ctx, action, nr, n, cmp)) < 0) {
		p->rc = rc;
		p->bad = name;
	}
}

static void
allow(struct policy *p, int nr, const char *name, unsigned n, const struct scmp_arg_cmp *cmp)
{
	rule(p, SCMP_ACT_ALLOW, nr, name, n, cmp);
}

/* One argument condition; several calls with one each are an OR. */
static void
allow_if(struct policy *p, int nr, const char *name, struct scmp_arg_cmp cmp)
{
	allow(p, nr, name, 1, &cmp);
}

/*
 * What every worker needs: lib/worker.c's IPC and log, nats.c's broker
 * connection and threads, OpenSSL and glibc underneath.
 */
static void
worker_base(struct policy *p)
{
	/* Memory: malloc arenas, nats.c buffers, thread stacks. Never
	 * executable: no code is loaded after confinement. */
	ALLOW(p, brk);
	ALLOW_IF(p, mmap, SCMP_A2_32(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	ALLOW_IF(p, mprotect, SCMP_A2_32(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	ALLOW(p, munmap);
	ALLOW(p, mremap);
	ALLOW(p, madvise);

	/* Threads: nats.c runs its reader, flusher, timers and message
	 * delivery on threads of its own. glibc tries clone3 first; ENOSYS
	 * sends it to clone(2), whose flags a filter can check. */
	SOFT_FAIL(p, clone3, ENOSYS);
	ALLOW_IF(p, clone, SCMP_A0_64(SCMP_CMP_EQ, THREAD_CLONE_FLAGS));
	ALLOW(p, set_robust_list);
	ALLOW(p, rseq);
	ALLOW(p, exit);

	/* Locks and condition variables (pthread mutex, cond, join, once):
	 * the plain futex operations, no priority-inheritance ones. */
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_WAIT));
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_WAKE));
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_WAIT_BITSET));
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_WAKE_BITSET));
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_CMP_REQUEUE));
	ALLOW_IF(p, futex, SCMP_A1_32(SCMP_CMP_MASKED_EQ, FUTEX_OP_MASK, FUTEX_WAKE_OP));
	ALLOW(p, sched_yield);

	/* Signals: handlers and masks (glibc blocks signals around thread
	 * creation), and abort(3) raising SIGABRT in this process only. */
	ALLOW(p, rt_sigaction);
	ALLOW(p, rt_sigprocmask);
	ALLOW(p, rt_sigreturn);
	ALLOW_IF(p, tgkill, SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)getpid()));

	/* Time: timeouts, reconnect waits, ping intervals. The vDSO answers
	 * most clock reads; these are its fallbacks and the sleeps. */
	ALLOW(p, clock_gettime);
	ALLOW(p, gettimeofday);
	ALLOW(p, clock_nanosleep);
	ALLOW(p, nanosleep);
	ALLOW(p, restart_syscall);

	/* Randomness: nats.c's NUID and inboxes, OpenSSL's DRBG. */
	ALLOW(p, getrandom);

	/* Descriptors held: supervisor channels (SEQPACKET), the log, the
	 * broker socket. */
	ALLOW(p, read);
	ALLOW(p, write);
	ALLOW(p, readv);
	ALLOW(p, writev);
	ALLOW(p, recvfrom);
	ALLOW(p, sendto);
	ALLOW(p, recvmsg);
	ALLOW(p, sendmsg);
	ALLOW(p, poll);
	ALLOW(p, ppoll);
	ALLOW(p, close);
	ALLOW(p, fcntl);
	ALLOW_IF(p, ioctl, SCMP_A1_64(SCMP_CMP_EQ, FIONREAD));
	ALLOW_IF(p, ioctl, SCMP_A1_64(SCMP_CMP_EQ, FIONBIO));

	/* The broker connection: IP sockets only (and unix ones for the
	 * resolver's local services); Landlock allows only the broker's
	 * port for connect and no port for bind. */
	ALLOW_IF(p, socket, SCMP_A0_32(SCMP_CMP_EQ, AF_INET));
	ALLOW_IF(p, socket, SCMP_A0_32(SCMP_CMP_EQ, AF_INET6));
	ALLOW_IF(p, socket, SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
	ALLOW(p, connect);
	ALLOW(p, shutdown);
	ALLOW(p, getsockopt);
	ALLOW(p, setsockopt);
	ALLOW(p, getsockname);
	ALLOW(p, getpeername);

	/* Files: read-only opens (Landlock leaves the resolver's files), and
	 * metadata of descriptors held. */
	ALLOW_IF(p, openat, SCMP_A2_32(SCMP_CMP_MASKED_EQ, OPEN_WRITE_FLAGS, O_RDONLY));
	ALLOW(p, newfstatat);
	ALLOW(p, fstat);
	ALLOW(p, lseek);

	/* Identity: the worker notices a dead supervisor by its parent's
	 * pid and sets the parent-death signal again after the privdrop. */
	ALLOW(p, getpid);
	ALLOW(p, gettid);
	ALLOW(p, getppid);
	ALLOW(p, getuid);
	ALLOW(p, geteuid);
	ALLOW(p, getgid);
	ALLOW(p, getegid);
	ALLOW_IF(p, prctl, SCMP_A0_32(SCMP_CMP_EQ, PR_SET_PDEATHSIG));

	/* Leaving. */
	ALLOW(p, exit_group);
}

/*
 * Sanitizer builds only (never a release build): AddressSanitizer gives
 * every thread an alternate signal stack, and LeakSanitizer, at exit,
 * starts a tracer task (a clone without CLONE_THREAD) that makes the
 * process dumpable again, lists /proc/<pid>/task, attaches to each thread
 * with ptrace and waits for it.
 */
static void
sanitizer_extra(struct policy *p)
{
#if defined(__SANITIZE_ADDRESS__)
	ALLOW(p, sigaltstack);
	ALLOW(p, clone);
	ALLOW(p, ptrace);
	ALLOW(p, wait4);
	ALLOW(p, getdents64);
	ALLOW(p, sched_getaffinity);
	ALLOW_IF(p, prctl, SCMP_A0_32(SCMP_CMP_EQ, PR_GET_DUMPABLE));
	ALLOW_IF(p, prctl, SCMP_A0_32(SCMP_CMP_EQ, PR_SET_DUMPABLE));
	ALLOW_IF(p, prctl, SCMP_A0_32(SCMP_CMP_EQ, PR_SET_PTRACER));
#else
	(void)p;
#endif
}

/* fanout: fetch, check, copy, ack over the shared connection. */
static void
policy_fanout(struct policy *p)
{
	worker_base(p);
}

/* reader: reads its members' streams over the shared connection. */
static void
policy_reader(struct policy *p)
{
	worker_base(p);
}

/* registry: KV reads and CAS updates over the shared connection. */
static void
policy_registry(struct policy *p)
{
	worker_base(p);
}

/* timer: scheduled publishes over the shared connection. */
static void
policy_timer(struct policy *p)
{
	worker_base(p);
}

/* test: tests/sandbox/sandbox_probe, exactly a worker's list. */
static void
policy_test(struct policy *p)
{
	worker_base(p);
}

static void (*const policies[])(struct policy *) = {
	[SANDBOX_FANOUT] = policy_fanout,
	[SANDBOX_READER] = policy_reader,
	[SANDBOX_REGISTRY] = policy_registry,
	[SANDBOX_TIMER] = policy_timer,
	[SANDBOX_TEST] = policy_test,
};

static int
refuse(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int
sandbox_seccomp(enum sandbox_role role, bool log_only, char *err, size_t errlen)
{
	struct policy p = { 0 };
	const char *name = sandbox_role_name(role);
	int rc;

#if !defined(__x86_64__)
	(void)p, (void)log_only;
	return refuse(err, errlen, "seccomp: the %s policy is written for x86_64 only", name);
#else
	if ((unsigned)role >= sizeof(policies) / sizeof(policies[0]) || policies[role] == NULL)
		return refuse(err, errlen, "seccomp: no policy for role %d", (int)role);
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return refuse(err, errlen, "seccomp: the %s policy is written for x86_64 only",
		    name);
	p.ctx = seccomp_init(log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (p.ctx == NULL)
		return refuse(err, errlen, "seccomp: cannot create the %s filter", name);
	/* Another ABI's call numbers mean other calls: kill, never log. */
	rc = seccomp_attr_set(p.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* Every thread, should one exist despite sandbox_confine's check. */
	if (rc == 0)
		rc = seccomp_attr_set(p.ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc < 0) {
		seccomp_release(p.ctx);
		return refuse(err, errlen, "seccomp: filter attributes: %s", strerror(-rc));
	}

	policies[role](&p);
	sanitizer_extra(&p);
	if (p.rc != 0) {
		seccomp_release(p.ctx);
		return refuse(err, errlen, "seccomp: %s policy, rule for %s: %s", name, p.bad,
		    strerror(-p.rc));
	}
	if ((rc = seccomp_load(p.ctx)) < 0) {
		seccomp_release(p.ctx);
		return refuse(err, errlen, "seccomp: load the %s policy: %s", name, strerror(-rc));
	}
	seccomp_release(p.ctx);
	return 0;
#endif
}
