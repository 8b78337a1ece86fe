/*
 * The seccomp policies, one per worker role. x86_64 only: the lists name
 * x86_64 system calls and sandbox_seccomp() refuses to load them on any
 * other architecture; a call made through another ABI (i386, x32) kills
 * the process.
 *
 * A worker may manage its memory without ever making it executable, run
 * nats.c's threads, keep time, read from and write to the descriptors it
 * holds (the two supervisor channels, the log, the broker socket), and
 * open TCP stream sockets and connect them (Landlock narrows them to the
 * brokers' ports where the kernel can), but never connect one by sending
 * (TCP Fast Open, EPERM). It opens no file: openat answers
 * EACCES. Anything else kills the process with SIGSYS, or is logged when
 * the daemon runs with COTAL_SECCOMP=log.
 *
 * Every role starts from worker_base(), the calls the shared runtime
 * (worker/worker.c, nats.c, OpenSSL, glibc 2.36) makes; a role adds what its
 * own main loop needs in its policy function below. Today the four
 * workers run the same connection code and their lists are the base.
 */
#include "sandbox/sandbox.h"
#include "lib/refuse.h"

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
#include <netinet/in.h>
#include <unistd.h>

#include <linux/futex.h>

#include <seccomp.h>


/* The one clone(2) a worker makes: glibc 2.36's pthread_create, after
 * clone3 answered ENOSYS. Any other flag set (fork, namespaces) is refused. */
#define THREAD_CLONE_FLAGS                                                   \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SYSVSEM | CLONE_SIGHAND |  \
	    CLONE_THREAD | CLONE_SETTLS | CLONE_PARENT_SETTID |               \
	    CLONE_CHILD_CLEARTID)

/* open(2) flags that write or create: the sanitizer builds' LeakSanitizer
 * opens /proc read-only with the legacy open(2). */
#define OPEN_WRITE_FLAGS (O_ACCMODE | O_CREAT | O_TRUNC)

/* socket(2)'s type without the flags glibc may add. */
#define SOCK_TYPE_MASK (0xffffffffULL & ~(uint64_t)(SOCK_NONBLOCK | SOCK_CLOEXEC))

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

/* Argument conditions, spelled out in full (libseccomp's SCMP_A*
 * macros leave datum_b to the compiler's zero fill). */
static struct scmp_arg_cmp
arg_eq(unsigned arg, uint64_t value)
{
	return (struct scmp_arg_cmp){ .arg = arg, .op = SCMP_CMP_EQ, .datum_a = value,
		.datum_b = 0 };
}

static struct scmp_arg_cmp
arg_masked_eq(unsigned arg, uint64_t mask, uint64_t value)
{
	return (struct scmp_arg_cmp){ .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask,
		.datum_b = value };
}

/* One argument condition; several calls with one each are an OR. */
static void
allow_if(struct policy *p, int nr, const char *name, struct scmp_arg_cmp cmp)
{
	allow(p, nr, name, 1, &cmp);
}

/* A refusal the caller copes with, under one argument condition. */
static void
soft_fail_if(struct policy *p, int nr, const char *name, int err, struct scmp_arg_cmp cmp)
{
	rule(p, SCMP_ACT_ERRNO((uint32_t)err), nr, name, 1, &cmp);
}

/* Memory: malloc arenas, buffers, (a worker's) thread stacks and their
 * guard pages. Never executable: nothing is loaded after confinement. */
static void
memory(struct policy *p)
{
	ALLOW(p, brk);
	ALLOW_IF(p, mmap, arg_masked_eq(2, PROT_EXEC, 0));
	ALLOW_IF(p, mprotect, arg_masked_eq(2, PROT_EXEC, 0));
	ALLOW(p, munmap);
	ALLOW(p, mremap);
	ALLOW(p, madvise);
}

/*
 * What every worker needs: worker/worker.c's IPC and log, nats.c's broker
 * connection and threads, OpenSSL and glibc underneath.
 */
static void
worker_base(struct policy *p)
{
	memory(p);

	/* Threads: nats.c runs its reader, flusher, timers and message
	 * delivery on threads of its own. glibc tries clone3 first; ENOSYS
	 * sends it to clone(2), whose flags a filter can check. A new thread
	 * registers its robust list and rseq area, and leaves by exit(2). */
	SOFT_FAIL(p, clone3, ENOSYS);
	ALLOW_IF(p, clone, arg_eq(0, THREAD_CLONE_FLAGS));
	ALLOW(p, set_robust_list);
	ALLOW(p, rseq);
	ALLOW(p, exit);

	/* Locks, condition variables, joins: the three futex operations
	 * glibc 2.36 makes for them; no priority-inheritance or requeue ones.
	 * nats.c yields while it spins. */
	ALLOW_IF(p, futex, arg_masked_eq(1, FUTEX_OP_MASK, FUTEX_WAIT));
	ALLOW_IF(p, futex, arg_masked_eq(1, FUTEX_OP_MASK, FUTEX_WAKE));
	ALLOW_IF(p, futex, arg_masked_eq(1, FUTEX_OP_MASK, FUTEX_WAIT_BITSET));
	ALLOW(p, sched_yield);
	/* glibc's malloc caps its arenas by the CPUs this process may use,
	 * read the first time a new thread allocates. */
	ALLOW(p, sched_getaffinity);

	/* Signals: dispositions (nats.c ignores SIGPIPE, glibc installs its
	 * setxid handler with the first thread), masks around thread
	 * creation, and abort(3) raising SIGABRT in this process only. */
	ALLOW(p, rt_sigaction);
	ALLOW(p, rt_sigprocmask);
	ALLOW(p, rt_sigreturn);
	ALLOW_IF(p, tgkill, arg_eq(0, (uint32_t)getpid()));

	/* Time: deadlines, reconnect waits, ping intervals. The vDSO answers
	 * clock reads unless the host's clocksource has no vDSO support, and
	 * then falls back to these calls. nats_Sleep and timed waits sleep
	 * with clock_nanosleep; a sleep stopped and continued restarts. */
	ALLOW(p, clock_gettime);
	ALLOW(p, gettimeofday);
	ALLOW(p, clock_nanosleep);
	ALLOW(p, restart_syscall);

	/* Randomness: nats.c's NUID and inboxes, OpenSSL's DRBG. */
	ALLOW(p, getrandom);

	/* A tls:// URL makes nats.c start libssl, which sorts its cipher
	 * table with qsort; glibc's qsort sizes its buffer by the physical
	 * memory. */
	ALLOW(p, sysinfo);

	/* Descriptors held: the supervisor channels (SEQPACKET: recv and
	 * sendmsg), the log (write), the broker socket (recv, send, poll,
	 * O_NONBLOCK through F_GETFL/F_SETFL). */
	ALLOW(p, read);
	ALLOW(p, write);
	/* glibc writes its last words (heap corruption, a failed assertion)
	 * to stderr with writev before it aborts: on fd 2 only, so the reason
	 * reaches the log instead of a bare SIGSYS. */
	ALLOW_IF(p, writev, arg_eq(0, 2));
	ALLOW(p, recvfrom);
	/* Sending, but never a send that connects: MSG_FASTOPEN makes
	 * sendto and sendmsg open a TCP connection inside the send path,
	 * which the Landlock port rule of some kernels does not check (issue
	 * 41). Refused here on every kernel, with EPERM (Landlock's refusal
	 * is EACCES); no other send flag connects. sendmmsg kills. */
	ALLOW_IF(p, sendto, arg_masked_eq(3, MSG_FASTOPEN, 0));
	soft_fail_if(p, SCMP_SYS(sendto), "sendto", EPERM,
	    arg_masked_eq(3, MSG_FASTOPEN, MSG_FASTOPEN));
	ALLOW_IF(p, sendmsg, arg_masked_eq(2, MSG_FASTOPEN, 0));
	soft_fail_if(p, SCMP_SYS(sendmsg), "sendmsg", EPERM,
	    arg_masked_eq(2, MSG_FASTOPEN, MSG_FASTOPEN));
	ALLOW(p, poll);
	ALLOW(p, close);
	ALLOW_IF(p, fcntl, arg_eq(1, F_GETFL));
	ALLOW_IF(p, fcntl, arg_eq(1, F_SETFL));

	/* The broker connection, and no other socket: a TCP stream over
	 * IPv4 or IPv6 (nats.c asks for SOCK_STREAM and protocol 0; glibc
	 * may add SOCK_CLOEXEC or SOCK_NONBLOCK to the type). No unix socket
	 * (a user's D-Bus or systemd manager, Docker's socket), no UDP, no
	 * raw one, on any kernel: the IPC socketpairs are inherited, never
	 * made. Landlock (ABI 4 and later) narrows connect to the brokers'
	 * ports and binds none. nats.c sets TCP_NODELAY, SO_REUSEADDR,
	 * SO_LINGER, reads SO_ERROR after a non-blocking connect, and shuts
	 * the socket down on close. */
	static const int families[] = { AF_INET, AF_INET6 }, protocols[] = { 0, IPPROTO_TCP };
	for (size_t f = 0; f < 2; f++)
		for (size_t k = 0; k < 2; k++) {
			struct scmp_arg_cmp tcp[] = { arg_eq(0, (uint64_t)families[f]),
				arg_masked_eq(1, SOCK_TYPE_MASK, SOCK_STREAM),
				arg_eq(2, (uint64_t)protocols[k]) };
			allow(p, SCMP_SYS(socket), "socket", 3, tcp);
		}
	ALLOW(p, connect);
	ALLOW(p, setsockopt);
	ALLOW(p, getsockopt);
	ALLOW(p, shutdown);

	/* Files: none is opened after confinement, on any kernel, with
	 * Landlock or without: what a worker reads comes over IPC. A library
	 * that probes one (OpenSSL's openssl.cnf, glibc's /etc/localtime) is
	 * answered EACCES. fstat of a descriptor held (glibc's is newfstatat
	 * with AT_EMPTY_PATH) stays; it may also read a path's metadata,
	 * never its content. */
	SOFT_FAIL(p, openat, EACCES);
	ALLOW(p, newfstatat);
	ALLOW(p, lseek);

	/* Identity: OpenSSL checks its pid for forks; the worker notices a
	 * dead supervisor by its parent's pid and sets the parent-death
	 * signal again after the privdrop cleared it. */
	ALLOW(p, getpid);
	ALLOW(p, getppid);
	ALLOW_IF(p, prctl, arg_eq(0, PR_SET_PDEATHSIG));

	/* Leaving. */
	ALLOW(p, exit_group);
}

/*
 * Sanitizer builds only, never a release build (the code is not compiled
 * without -fsanitize=address). Measured with gcc 12's libasan:
 *   AddressSanitizer gives each thread an alternate signal stack and asks
 *   its tid when nats.c starts a thread;
 *   LeakSanitizer, at exit, makes the process dumpable again, starts a
 *   tracer task (clone without CLONE_THREAD, sharing memory) and waits for
 *   it; the tracer lists /proc/<pid>/task through the legacy open(2) and
 *   getdents(2) and attaches to every thread with ptrace. Landlock lets it
 *   read /proc/<pid> in these builds only (landlock.c);
 *   a report first asks whether stderr is a terminal (TCGETS), which is
 *   answered "no" so that the report, not SIGSYS, ends the process.
 */
#if defined(SANDBOX_ASAN)
#define LSAN_TRACER_CLONE_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED)

static void
sanitizer_extra(struct policy *p)
{
	ALLOW(p, sigaltstack);
	ALLOW(p, gettid);
	ALLOW_IF(p, prctl, arg_eq(0, PR_GET_DUMPABLE));
	ALLOW_IF(p, prctl, arg_eq(0, PR_SET_DUMPABLE));
	ALLOW_IF(p, prctl, arg_eq(0, PR_SET_PTRACER));
	ALLOW_IF(p, clone, arg_eq(0, LSAN_TRACER_CLONE_FLAGS));
	ALLOW(p, wait4);
	ALLOW_IF(p, open, arg_masked_eq(1, OPEN_WRITE_FLAGS, O_RDONLY));
	ALLOW(p, getdents);
	ALLOW(p, ptrace);
	soft_fail_if(p, SCMP_SYS(ioctl), "ioctl", ENOTTY,
	    arg_eq(1, TCGETS));
}
#else
static void
sanitizer_extra(struct policy *p)
{
	(void)p;
}
#endif

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

/*
 * metrics: the metrics server (metrics/metrics.c), one thread, no broker
 * connection, no library threads. It reads snapshots from its parent's
 * channel, accepts on the listening socket its parent bound and passed down,
 * reads a request and writes the answer. It makes no socket, so it cannot
 * connect or bind one; it opens no file.
 */
static void
policy_metrics(struct policy *p)
{
	/* Memory: snapshots and answers. */
	memory(p);

	/* Serving: the channel (recv), the listening socket (accept4), each
	 * connection (read, write, shutdown, close), one poll over them all,
	 * and O_NONBLOCK on what it accepts. */
	ALLOW(p, recvfrom);
	ALLOW(p, accept4);
	ALLOW(p, read);
	ALLOW(p, write);
	ALLOW_IF(p, writev, arg_eq(0, 2));
	ALLOW(p, poll);
	ALLOW(p, shutdown);
	ALLOW(p, close);
	ALLOW_IF(p, fcntl, arg_eq(1, F_GETFL));
	ALLOW_IF(p, fcntl, arg_eq(1, F_SETFL));

	/* Time: request deadlines (the vDSO, or these). */
	ALLOW(p, clock_gettime);
	ALLOW(p, gettimeofday);

	/* Files: none. glibc's stdio may ask what stderr is. */
	SOFT_FAIL(p, openat, EACCES);
	ALLOW(p, newfstatat);

	/* Signals: SIGPIPE ignored; abort(3) raises SIGABRT in this process. */
	ALLOW(p, rt_sigaction);
	ALLOW(p, rt_sigprocmask);
	ALLOW(p, rt_sigreturn);
	ALLOW(p, getpid);
	ALLOW(p, getppid);
	ALLOW_IF(p, tgkill, arg_eq(0, (uint32_t)getpid()));
	ALLOW_IF(p, prctl, arg_eq(0, PR_SET_PDEATHSIG));
	ALLOW(p, exit_group);
}

static void (*const policies[])(struct policy *) = {
	[SANDBOX_FANOUT] = policy_fanout,
	[SANDBOX_READER] = policy_reader,
	[SANDBOX_REGISTRY] = policy_registry,
	[SANDBOX_TIMER] = policy_timer,
	[SANDBOX_TEST] = policy_test,
	[SANDBOX_METRICS] = policy_metrics,
};


int
sandbox_seccomp(enum sandbox_role role, bool log_only, char *err, size_t errlen)
{
	struct policy p = { 0 };
	const char *name = sandbox_role_name(role);
	int rc;

	if ((unsigned)role >= sizeof(policies) / sizeof(policies[0]) || policies[role] == NULL)
		return refuse(err, errlen, "seccomp: no policy for role %d", (int)role);
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return refuse(err, errlen, "seccomp: the %s policy is written for x86_64 only",
		    name);
	/* Whatever a caller passes: a build without test hooks kills. */
	if (!SANDBOX_TEST_BUILD)
		log_only = false;
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
}
