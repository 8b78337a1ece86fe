/*
 * The supervisor as the KICK monitor (issue 41, finding 2). The $SYS
 * evictor may disconnect any connection of any account on a server, so no
 * confined process signs for it: the registry's eviction sweep asks the
 * supervisor (KICK_REQ) for each connection it found, and the supervisor
 * KICKs only a connection that its own CONNZ, as the observer, shows on
 * that server in the space's account and naming the principal being
 * evicted. Any other request is refused and logged (at most 10 lines a
 * minute), and answered KICK_REP refused.
 */
#ifndef COTAL_SUPERVISOR_KICK_H
#define COTAL_SUPERVISOR_KICK_H

#include "ipc/ipc.h"

struct sup;
struct sup_worker;

/* The monitor's thread and its wake-up on s->base: 0, or -1. */
int kick_init(struct sup *s);
/* The registry's KICK_REQ (checked by ipc.c): queued, or refused at once. */
void kick_request(struct sup_worker *w, const struct ipc_msg *m);
/* Stop the thread (a request in flight ends within its timeouts). */
void kick_free(struct sup *s);

#endif
