/*
 * What a worker's confinement holds, said once: every worker's start line,
 * `cotal status` (the supervisor's status file) and docs/security.md's
 * table (`cotal-deliveryd --confinement`, compared by ctest
 * unit_confinement_table) all come from the table below, so the claims and
 * the code cannot drift apart. It describes seccomp.c's and landlock.c's
 * policies; it applies nothing.
 */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/seccomp.h>

#include "lib/refuse.h"

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#if !defined(SYS_landlock_create_ruleset) && defined(__x86_64__)
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SECCOMP_GET_ACTION_AVAIL
#define SECCOMP_GET_ACTION_AVAIL 2
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif

#define LL_ABI_NET 4   /* TCP connect and bind rules */
#define LL_ABI_SCOPE 6 /* abstract unix sockets and signals scoped */

#define SECCOMP_RIGHTS "default-kill allow-list"
#define SOCKET_RIGHTS "TCP stream (IPv4, IPv6) only: no unix, abstract, UDP, raw or socketpair; no connect by sending (TCP Fast Open answers EPERM)"
#define FILE_RIGHTS "none (openat answers EACCES)"
#define PROCESS_RIGHTS "no exec, fork or ptrace; signals to itself only"
#define TCP_OPEN "TCP to any address: the unit's IPAddressAllow= is the operator's control"
#define METRICS_SOCKETS "none made: it accepts on the one listening socket its parent bound " \
	"(--metrics); no socket, connect or bind, so no broker connection"
#define METRICS_PROCESSES "one thread: no exec, fork, thread or ptrace; signals to itself only"

/* What every role may do, whatever the kernel (seccomp.c). */
static const struct {
	enum sandbox_role role;
	const char *work;     /* what it does */
	const char *sockets;
	const char *processes;
} roles[] = {
	{ SANDBOX_FANOUT, "copies CHAT posts into members' INBOX", SOCKET_RIGHTS,
	    PROCESS_RIGHTS },
	{ SANDBOX_READER, "re-authorizes INBOX entries into DLV", SOCKET_RIGHTS, PROCESS_RIGHTS },
	{ SANDBOX_REGISTRY, "membership registry and control rails; $SYS sweeps", SOCKET_RIGHTS,
	    PROCESS_RIGHTS },
	{ SANDBOX_TIMER, "checkpoint timers", SOCKET_RIGHTS, PROCESS_RIGHTS },
	{ SANDBOX_METRICS, "serves /metrics and /healthz from the supervisor's snapshots",
	    METRICS_SOCKETS, METRICS_PROCESSES },
};

/* The row of a role; the test role is a worker's. */
static size_t
row_of(enum sandbox_role role)
{
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (roles[i].role == role)
			return i;
	return 0;
}

int
sandbox_can_confine(char *err, size_t errlen)
{
	uint32_t kill_process = SECCOMP_RET_KILL_PROCESS;

	/* The workers' filters kill the whole process on a call off their
	 * list; a kernel without seccomp filters (or a runtime that hides
	 * them) cannot hold the credential's secrecy: no daemon then. */
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &kill_process) != 0)
		return refuse(err, errlen, "the kernel cannot confine the workers: seccomp "
		    "(SECCOMP_GET_ACTION_AVAIL for SECCOMP_RET_KILL_PROCESS): %s; refusing to run "
		    "workers that could open the credential files (docs/security.md)",
		    strerror(errno));
	return 0;
}

int
sandbox_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v > 0 ? (int)v : 0;
}

/* What Landlock adds at ABI abi, for the table (ports NULL) or a line. */
static void
landlock_says(int abi, const uint16_t *ports, char *out, size_t outlen)
{
	size_t used;

	if (abi < LL_ABI_NET) {
		snprintf(out, outlen, "%s (%s)", TCP_OPEN, abi == 0 ? "no Landlock" :
		    "Landlock below ABI 4 has no network rules");
		return;
	}
	used = (size_t)snprintf(out, outlen, "TCP connect to ");
	if (ports == NULL)
		used += (size_t)snprintf(out + used, outlen - used, "the brokers' ports");
	else {
		used += (size_t)snprintf(out + used, outlen - used, "port");
		for (int i = 0, n = 0; i < SANDBOX_PORTS_MAX && used < outlen; i++)
			if (ports[i] != 0)
				used += (size_t)snprintf(out + used, outlen - used, "%s%u",
				    n++ == 0 ? " " : ",", (unsigned)ports[i]);
	}
	if (used < outlen)
		snprintf(out + used, outlen - used, " only, no bind%s",
		    abi >= LL_ABI_SCOPE ? "; abstract unix sockets and signals scoped" : "");
}

void
sandbox_describe(enum sandbox_role role, int abi, bool seccomp_log,
		 const uint16_t ports[SANDBOX_PORTS_MAX], char *out, size_t outlen)
{
	char ll[256];
	size_t r = row_of(role);

	/* The metrics server makes no socket: Landlock adds no port. */
	if (role == SANDBOX_METRICS)
		snprintf(ll, sizeof(ll), "%s", abi >= LL_ABI_NET ? "no TCP connect or bind" :
		    "no network rules (none needed: seccomp lets it make no socket)");
	else
		landlock_says(abi, ports, ll, sizeof(ll));
	snprintf(out, outlen, "sandbox %s: seccomp %s%s; sockets: %s; files: %s; processes: %s; "
	    "Landlock ABI %d: %s", sandbox_role_name(role), SECCOMP_RIGHTS,
	    seccomp_log ? " in LOG mode (COTAL_SECCOMP=log: violations logged, not killed)" : "",
	    roles[r].sockets, FILE_RIGHTS, roles[r].processes, abi, ll);
}

void
sandbox_table(FILE *out)
{
	static const struct {
		const char *name;
		int abi;
	} kernels[] = { { "no Landlock", 0 }, { "ABI 1-3", 1 }, { "ABI 4-5", 4 },
		{ "ABI 6+", 6 } };
	char ll[256];

	fprintf(out, "| role | does | seccomp | sockets | files | processes |\n");
	fprintf(out, "|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", sandbox_role_name(roles[i].role),
		    roles[i].work, SECCOMP_RIGHTS, roles[i].sockets, FILE_RIGHTS,
		    roles[i].processes);
	fprintf(out, "\n| kernel | the workers' network, beyond the above | the metrics "
	    "server's |\n|---|---|---|\n");
	for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
		landlock_says(kernels[k].abi, NULL, ll, sizeof(ll));
		fprintf(out, "| %s | %s | %s |\n", kernels[k].name, ll,
		    kernels[k].abi >= LL_ABI_NET ? "no TCP connect or bind" : "no socket made "
		    "(seccomp)");
	}
}
