/*
 * The lease holder's record, .cotal/delivery.<key>.holder.json (issue 42:
 * "A restarted supervisor takes over its own dead predecessor's lease at
 * once"). Runs in the supervisor.
 *
 * Once it holds the lease, a daemon writes (tmp + rename, 0600) which
 * incarnation and holder its lease row names, and which process that is:
 * the machine's id (/etc/machine-id), its boot (/proc/sys/kernel/random/
 * boot_id, "" where the unit's ProcSubset=pid hides it), the pid and the
 * pid's start time (/proc/<pid>/stat field 22, so that a pid the kernel
 * gave to another process since is no proof of life). It is not flushed to
 * the disk (ws_replace_json): a start does not wait behind a busy disk's
 * journal, and a machine that crashed may leave the record before the last
 * write, which names another incarnation: a doubt, so the row ages out as
 * without a record. An exit that
 * released the row removes it; one that could not (the broker gone) keeps
 * it, for its successor here.
 *
 * A daemon that finds the lease row live reads the record and takes the
 * row over (by compare-and-set on the row's revision: lease.c) only when
 * the record proves the row's holder is its own dead predecessor on this
 * machine: the record is a regular file of this user's, readable by no one
 * else, no link, within its size; it names the row's incarnation and
 * holder and this machine; and that process is gone (the machine booted
 * since, or no process has that pid and start time). Any doubt keeps the
 * refusal. The workers of a dead supervisor die with it (their parent-death
 * signal), so nothing of the predecessor acts on the shard any more.
 */
#ifndef COTAL_SUPERVISOR_HOLDER_H
#define COTAL_SUPERVISOR_HOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/wire/records.h"

#define HOLDER_RECORD_MAX 4096
#define HOLDER_ID_MAX 64      /* a machine id or boot id (32 hex, 36 with dashes) */

struct holder_rec {
	char holder[PRINCIPAL_MAX + 1];
	char incarnation[LEASE_INCARNATION_MAX];
	char machine[HOLDER_ID_MAX];
	char boot[HOLDER_ID_MAX];
	long long pid;
	unsigned long long start;  /* the pid's start time, clock ticks since boot */
};

/* This machine and boot: 0, or -1 with err. A test build may name another
 * machine: COTAL_TEST_MACHINE_ID. */
int holder_here(char machine[HOLDER_ID_MAX], char boot[HOLDER_ID_MAX], char *err,
		size_t errlen);
/* pid's start time (ticks since boot): 0 with *start, -1 when it runs no more
 * (or is a zombie). */
int holder_pid_start(pid_t pid, unsigned long long *start);

/* Write this process's record for the lease row's holder and incarnation. */
int holder_record_write(const char *path, const char *holder, const char *incarnation,
			char *err, size_t errlen);
/* Remove it at a clean exit, when it still names incarnation. */
void holder_record_remove_if_ours(const char *path, const char *incarnation);

/* Parse a record's text: 0, or -1 with err naming the field. Pure. */
int holder_record_parse(const char *text, size_t len, struct holder_rec *r, char *err,
			size_t errlen);

/*
 * The decision, pure: is the row's holder this record's process, dead? The
 * record for the row (incarnation and holder), on machine (here_machine),
 * and either another boot (both boot ids known and different) or pid_state
 * -1 (gone) or a start time other than the record's. true with why ("pid 4242 is gone", "the
 * machine booted since"); false with why it is not proved.
 */
bool holder_proves_dead(const struct holder_rec *r, const struct lease_row *row,
			const char *here_machine, const char *here_boot, int pid_state,
			unsigned long long pid_start, char *why, size_t whylen);

/* The whole check against path (read with no link followed, fit to be
 * trusted), this machine and /proc. */
bool holder_record_proves_dead(const char *path, const struct lease_row *row, char *why,
			       size_t whylen);

#endif
