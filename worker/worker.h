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
#include <stdbool.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "worker/fence.h"
#include "lib/creds/nkeys.h"
#include "lib/nats/pull.h"
#include "sandbox/sandbox.h"

#define WORKER_FD_MAIN 3
#define WORKER_FD_SIGN 4
#define WORKER_SIGN_TIMEOUT_MS 5000   /* a supervisor that does not sign in time */
#define WORKER_CONFIG_TIMEOUT_MS 10000
#define WORKER_STATUS_EVERY_MS 1000
#define WORKER_DRAIN_MS 5000          /* QUIESCE: effects in flight get this long */
/* Then what they sent gets this long to reach the broker; the two within
 * the supervisor's LEASE_QUIESCE_WAIT_MS. */
#define WORKER_QUIESCE_FLUSH_MS 500

/*
 * What a role adds to the runtime: its sandbox policy and, for the data
 * path, a loop run on its own thread while the connection is up. The loop
 * returns once worker_serving() turns false (a reconnect or a stop); it is
 * started again on the new connection.
 */
struct worker_role {
	const char *name;
	enum sandbox_role sandbox;
	void (*run)(void);
	/* A message of the main channel the runtime does not handle itself
	 * (SYS_CREDS, LEASE, RELOAD_REP): false when the role takes no such
	 * message, which makes it a protocol error. Runs on the main thread. */
	bool (*on_msg)(const struct ipc_msg *m);
};

struct worker {
	struct ipc_config cfg;
	const struct worker_role *role;
	pthread_t role_thread;
	bool role_running;
	_Atomic bool role_stop;
	pthread_mutex_t mu;      /* guards jwt, the sign channel and the violation log line */
	char *jwt;
	char *tls_ca;            /* IPC_TLS_CA's certificates when cfg.tls_host is set */
	natsConnection *nc;
	struct fence fence;
	_Atomic uint32_t state;  /* enum ipc_worker_state */
	_Atomic uint64_t counters[IPC_COUNTERS];
	_Atomic uint64_t gauges[IPC_GAUGES];     /* gauges.c */
	_Atomic uint64_t latency[IPC_LATENCY_BUCKETS + 1];
	_Atomic uint64_t latency_sum_us;
};

/* Run the worker of the given role (one of roles, NULL-ended); returns the
 * process exit status. */
int worker_main(const char *role, const struct worker_role *const *roles);

/* For a role's loop. */
extern struct worker W;
/* Go on? False once the loop must return (reconnect, stop). */
bool worker_serving(void);
/* Wait while the fence is closed (QUIESCE); false when the loop must
 * return instead. */
bool worker_wait_open(void);
/* The role's consumers, watches and subscriptions are bound: the
 * supervisor hears READY (once per process). A role that cannot bind says
 * why in its log and never calls this, so the daemon never reports itself
 * up. Any thread. */
void worker_bound(void);
/* Count an event of the role (ipc_counter_name(role, i)). */
void worker_count(int i, uint64_t n);

/* gauges.c: what the role measures now, sent with its counters. */
/* Set gauge i of the role (ipc_gauge_name(role, i)). */
void worker_gauge(int i, uint64_t v);
/* One observation of the role's latency (ipc_latency_name(role)), ms. */
void worker_latency_ms(int64_t ms);
/* A pull consumer's lag, the gauges the fan-out and the reader share. */
enum { WORKER_G_PENDING, WORKER_G_OLDEST_AT };
/* A batch fetched: pending becomes what the consumer still has to deliver
 * after it plus the batch (its messages' metadata say), oldest_at the
 * wall-clock ms when the batch's oldest message was stored. */
void worker_batch_begin(const struct puller *p, natsMsgList *list);
/* The batch answered: oldest_at 0 (nothing held), pending what is to come. */
void worker_batch_done(void);
/* Sleep up to ms, returning early when the loop must return. */
void worker_nap(int ms);
/* Send a message to the supervisor on the main channel (any thread). */
int worker_send(uint16_t type, const void *payload, size_t len);
/*
 * A second broker connection of this worker, named "cotal-deliveryd <role>
 * <what>", on the worker's credential (signed through the supervisor, as
 * the first), its servers and TLS, reconnecting on its own (its loss and
 * return logged with what, a string that outlives it); not watched for
 * the worker's state. For traffic that must not stand in line with the
 * role's own (the registry's agents' rail). 0, or -1 with err. Any thread.
 */
int worker_connect_aux(const char *what, natsConnection **nc, char *err, size_t errlen);
/* Demand TLS on opts when the mesh does (cfg.tls_host set): every broker
 * connection of a worker, the $SYS ones included. */
natsStatus worker_tls_options(natsOptions *opts);
/*
 * Have the supervisor sign a broker nonce as one of the $SYS users (the
 * registry's eviction connections): the nats.c signature callback's shape.
 */
natsStatus worker_sign_sys(enum ipc_sys which, const char *nonce, unsigned char **sig,
			   int *siglen, char **errtxt);

#endif
