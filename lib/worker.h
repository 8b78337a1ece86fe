/*
 * The runtime every worker shares: receive the configuration over IPC,
 * confine itself (sandbox/), open its own broker connection whose JWT and
 * nonce signature come from the supervisor, and serve the main channel
 * (fence, reconnect, status, stop).
 *
 * A worker is started as `cotal-deliveryd --worker ROLE` with the main
 * channel on fd WORKER_FD_MAIN and the sign channel on WORKER_FD_SIGN.
 */
#ifndef COTAL_WORKER_H
#define COTAL_WORKER_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "lib/fence.h"
#include "lib/nkeys.h"

#define WORKER_FD_MAIN 3
#define WORKER_FD_SIGN 4
#define WORKER_SIGN_TIMEOUT_MS 5000   /* a supervisor that does not sign in time */
#define WORKER_CONFIG_TIMEOUT_MS 10000
#define WORKER_STATUS_EVERY_MS 1000
#define WORKER_DRAIN_MS 5000          /* QUIESCE: effects in flight get this long */

struct worker {
	struct ipc_config cfg;
	pthread_mutex_t mu;      /* guards jwt and the sign channel */
	char *jwt;
	natsConnection *nc;
	struct fence fence;
	_Atomic uint32_t state;  /* enum ipc_worker_state */
	_Atomic uint64_t counters[IPC_COUNTERS];
};

/* Run the worker of the given role; returns the process exit status. */
int worker_main(const char *role);

#endif
