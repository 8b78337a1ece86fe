/*
 * The daemon's pid record, .cotal/delivery.<key>.pid (WIRE.md §8).
 *
 * Format: the supervisor's pid in decimal and one newline ("12345\n"),
 * nothing else, mode 0600. That is what systemd's PIDFile=, start-stop-daemon
 * and `kill $(cat …)` read; the space, server and start time are in the
 * status file beside it (.cotal/delivery.<key>.status.json).
 *
 * The daemon writes it (atomically: tmp + rename; not flushed to the disk,
 * as the process it names does not outlive the machine) once it holds the
 * single-flight lease, and removes it at a clean exit only while it still
 * names this process: a daemon that lost the lease must not remove or
 * overwrite the live holder's record. Readers (`cotal status`, `cotal down`)
 * believe a recorded pid only when that process is alive and its command
 * line names a delivery daemon for the space (pidfile_verify).
 *
 * Shared by the daemon and the CLI: depends on the lib rooms only.
 */
#ifndef COTAL_PIDFILE_H
#define COTAL_PIDFILE_H

#include <stddef.h>
#include <sys/types.h>

/* The longest record read back: a pid and a newline, with room to spare. */
#define PIDFILE_MAX 64

/* Write "<pid>\n" to path atomically with mode 0600. 0, or -1 with err. */
int pidfile_write(const char *path, pid_t pid, char *err, size_t errlen);

/*
 * Read a record: the pid (> 1), 0 when there is no record, -1 with err when
 * it cannot be read or is not exactly a decimal pid (never a value kill(2)
 * would treat as a process group: 0, 1 and negatives are refused).
 */
pid_t pidfile_read(const char *path, char *err, size_t errlen);

/* Unlink path only when it still names pid (re-read first; a record another
 * process put there since is left alone). */
void pidfile_remove_if_ours(const char *path, pid_t pid);

/*
 * Is pid the delivery daemon of space? 1 yes (alive, its command line names
 * cotal-deliveryd and "--space <space>"), 0 no (gone, a zombie, or another
 * program now holds the number), -1 alive but its command line cannot be
 * read: callers trust the record then (the check only downgrades on proof).
 */
int pidfile_verify(pid_t pid, const char *space);

/* The same for a delivery host's record: alive, not a zombie, its command
 * line names cotal-deliveryd and holds the argument "--spaces". */
int pidfile_verify_host(pid_t pid);

#endif
