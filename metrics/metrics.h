/*
 * The metrics server: a process of its own, started by the supervisor (or
 * a delivery host) when the operator asks for --metrics. It answers
 * GET /metrics and GET /healthz over HTTP from the snapshots its parent
 * sends, and can do nothing else:
 *
 *   - no broker connection, no credential, no file: what it serves comes
 *     over its channel (fd 3, IPC_METRICS_BEGIN/PART/END), already
 *     rendered; it never sees a secret;
 *   - it makes no socket: it accepts on the listening socket its parent
 *     bound and passed down (fd 4), OpenBSD style;
 *   - confined like a worker (sandbox/, role "metrics"): its own seccomp
 *     allow-list (accept, read, write, poll, close), Landlock with no
 *     file and no TCP connect or bind, no privileges;
 *   - every request bounded: a head of at most 8 KiB read within 5 s, an
 *     answer written within 10 s, at most 16 connections, the oldest
 *     still reading closed to make room (a slow client cannot hold the
 *     door).
 *
 * The supervisor never parses HTTP; this process never parses JSON.
 */
#ifndef COTAL_METRICS_H
#define COTAL_METRICS_H

#define METRICS_FD_CHANNEL 3
#define METRICS_FD_LISTEN 4
#define METRICS_CONNS_MAX 16
#define METRICS_READ_MS 5000    /* a request head arrives within this */
#define METRICS_WRITE_MS 10000  /* an answer leaves within this */

/* `cotal-deliveryd --metrics-process UID GID DROP SECCOMP_LOG`: confine,
 * then serve until the channel closes. Its exit status. */
int metrics_main(int argc, char **argv);

#endif
