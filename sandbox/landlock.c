/*
 * Landlock for a worker: it handles every access right the running kernel
 * knows and grants back only, from ABI 4 on, TCP connect to the brokers'
 * ports. The filesystem (reading, writing, executing, creating, ioctl on
 * devices), binding a TCP port, signalling a process and connecting to an
 * abstract unix socket outside the worker (ABI 6) are refused by the
 * kernel. seccomp (seccomp.c) already denies opening any file and making
 * any socket but a TCP stream on every kernel; Landlock adds the brokers'
 * ports, which seccomp cannot see.
 *
 * Raw syscalls, as glibc 2.36 has no wrappers. The rights come from
 * <linux/landlock.h> when it has them; Debian 12's header stops at ABI 2,
 * so the later ones are spelled out below with the kernel's values (a
 * stable ABI), and the running kernel's version decides what is used.
 */
#include "sandbox/sandbox.h"
#include "lib/refuse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>

#if !defined(SYS_landlock_create_ruleset) && defined(__x86_64__)
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif


#define LL_ABI_REFER 2
#define LL_ABI_TRUNCATE 3
#define LL_ABI_NET 4
#define LL_ABI_IOCTL_DEV 5
#define LL_ABI_SCOPE 6

/* The rule types, an enum in the header: not testable with #ifdef. */
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

/* The kernel's structures at their ABI 6 size; a kernel that knows fewer
 * fields accepts them as long as the unknown ones are zero. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

/* ABI 1: the rights every Landlock kernel knows. */
#define LL_FS_ABI1                                                             \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |          \
	    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |       \
	    LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |   \
	    LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |       \
	    LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |       \
	    LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |     \
	    LANDLOCK_ACCESS_FS_MAKE_SYM)

static int
ll_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	if (v < 0)
		return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -1;
	return (int)v;
}

static uint64_t
ll_fs_rights(int abi)
{
	uint64_t fs = LL_FS_ABI1;

	if (abi >= LL_ABI_REFER)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= LL_ABI_TRUNCATE)
		fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= LL_ABI_IOCTL_DEV)
		fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return fs;
}

#if defined(SANDBOX_ASAN)
/* Grant `access` beneath path; a path that does not exist is skipped. */
static int
ll_allow_path(int ruleset, const char *path, uint64_t access, char *err, size_t errlen)
{
	struct ll_path_beneath_attr pb = { .allowed_access = access };
	int saved;

	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0) {
		if (errno == ENOENT)
			return 0;
		return refuse(err, errlen, "landlock: open %s: %s", path, strerror(errno));
	}
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) != 0) {
		saved = errno;
		close(pb.parent_fd);
		return refuse(err, errlen, "landlock: rule for %s: %s", path, strerror(saved));
	}
	close(pb.parent_fd);
	return 0;
}
#endif

static int
ll_rules(int ruleset, int abi, const uint16_t *ports, char *err, size_t errlen)
{
#if defined(SANDBOX_ASAN)
	/*
	 * Sanitizer builds only: LeakSanitizer lists this process's threads
	 * in /proc/<pid>/task and reads /proc/<pid>/maps at exit. A release
	 * build never reads /proc after confinement.
	 */
	if (ll_allow_path(ruleset, "/proc/self",
	    LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, err, errlen) != 0)
		return -1;
#endif

	for (int i = 0; abi >= LL_ABI_NET && i < SANDBOX_PORTS_MAX; i++) {
		struct ll_net_port_attr np = {
			.allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
			.port = ports[i],
		};

		if (ports[i] == 0)
			continue;
		if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &np, 0) != 0)
			return refuse(err, errlen, "landlock: connect rule for port %u: %s",
			    (unsigned)ports[i], strerror(errno));
	}
	return 0;
}

int
sandbox_landlock(const uint16_t ports[SANDBOX_PORTS_MAX], int *abi, char *err, size_t errlen)
{
	struct ll_ruleset_attr attr = { 0 };
	int ruleset;

	if ((*abi = ll_abi()) < 0)
		return refuse(err, errlen, "landlock: ABI probe: %s", strerror(errno));
	if (*abi == 0)
		return 0; /* no Landlock in this kernel: the caller logs it */

	attr.handled_access_fs = ll_fs_rights(*abi);
	if (*abi >= LL_ABI_NET)
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP |
		    LANDLOCK_ACCESS_NET_CONNECT_TCP;
	if (*abi >= LL_ABI_SCOPE)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;

	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return refuse(err, errlen, "landlock: create ruleset (ABI %d): %s", *abi,
		    strerror(errno));
	if (ll_rules(ruleset, *abi, ports, err, errlen) != 0) {
		close(ruleset);
		return -1;
	}
	/* landlock_restrict_self needs no_new_privs; sandbox_confine set it. */
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
		int saved = errno;

		close(ruleset);
		return refuse(err, errlen, "landlock: restrict self: %s", strerror(saved));
	}
	close(ruleset);
	return 0;
}
