/*
 * The supervisor: the parent process of cotal-deliveryd and the only one
 * that holds secrets. It reads the delivery credential, spawns the four
 * confined workers (fork + exec of this binary), signs their nonces,
 * restarts them with backoff, publishes their status and stops them.
 */
#ifndef COTAL_SUPERVISOR_H
#define COTAL_SUPERVISOR_H

#include <event2/event.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "lib/log.h"
#include "lib/workspace.h"
#include "supervisor/creds.h"
#include "supervisor/lease.h"
#include "service/metrics.h"
#include "service/relay.h"
#include "service/restart.h"
#include "supervisor/watchdog.h"
#include "lib/nats/kvmirror.h"

#define SUP_WORKERS 4
#define SUP_STOP_GRACE_MS 1500   /* STOP, then SIGKILL: the daemon exits within 2 s */
#define SUP_READY_TIMEOUT_MS 30000
/* A worker's relayed lines a log window (lib/log.h: 60 s), past which they
 * are counted and not written (issue 28: a relayed worker's volume is
 * capped; what one worker says never fills the state directory). */
#define SUP_RELAY_LINES 600
/* Membership rows one lifecycle may hold, unless --max-memberships says
 * (issue 28: an agent whose read ACL has a wildcard cannot grow the members
 * bucket without end). */
#define SUP_MAX_MEMBERSHIPS 1000
/* Channel config rows one lifecycle may create with registerChannel,
 * unless --max-channels says (issue 28). */
#define SUP_MAX_CHANNELS 100

enum worker_phase {
	WP_DOWN,       /* not running, restart scheduled */
	WP_STARTING,   /* spawned, not READY yet */
	WP_RUNNING,    /* READY received */
	WP_STOPPING,
};

struct sup;
struct reload_proof;
struct kicker;

struct sup_worker {
	struct sup *sup;
	const char *role;
	const struct restart_policy *policy;
	struct restart_state restart;
	enum worker_phase phase;
	pid_t pid;
	int ch, sign;                 /* our ends of the two socketpairs */
	struct event *ev_ch, *ev_sign, *ev_restart;
	struct budget budget;         /* its signatures, kept across respawns: a crash loop does
	                               * not refill it */
	uint64_t signs_refused;       /* over the daemon's life: the status's signaturesRefused */
	unsigned signs_refused_life;  /* in this process's life: past SIGN_REFUSED_MAX it is ended */
	struct log_limit sign_lines;  /* the refusals' lines, across respawns */
	struct ipc_status status;
	bool have_status;
	struct ipc_refusals refusals;  /* the registry's most refused callers (REFUSALS) */
	bool have_refusals;
	bool quiesced;                /* QUIESCED answered the last QUIESCE */
	char last_exit[96];
	/* Workers may not write files (RLIMIT_FSIZE 0, Landlock): each one's
	 * stderr is a pipe the supervisor relays into the log. */
	struct relay relay;
	uint8_t buf[IPC_MAX_FRAME];
};

struct sup {
	struct event_base *base;
	struct workspace ws;
	char space[IPC_SPACE_MAX];
	char token[IPC_SPACE_MAX];
	char key[2 * IPC_SPACE_MAX];
	char url[IPC_URL_MAX];        /* IP-literal URL(s) every connection dials */
	uint16_t ports[IPC_SERVERS_MAX]; /* theirs: the workers' Landlock rules */
	/* TLS demanded (--tls, --tls-ca, the registry's tlsRequired): the name
	 * the broker's certificate must carry ("" = plaintext) and the CA's
	 * certificates, which workers get over IPC (IPC_TLS_CA). */
	char tls_host[IPC_HOST_MAX];
	char *tls_ca;
	char self_exe[4096];
	char log_path[WS_FILE_MAX];
	char status_path[WS_FILE_MAX];
	int log_fd;
	FILE *log_file;               /* the logger's stream: a dup of log_fd */

	uid_t uid;
	gid_t gid;
	bool drop;
	bool seccomp_log;
	int landlock_abi;             /* the kernel's, for the confinement lines */
	bool stopping;
	int exit_code;
	struct sup_creds creds;
	/* The $SYS observer and evictor (indexed by enum ipc_sys): loaded when
	 * provisioned; without them eviction is unavailable. */
	struct sup_creds sys[3];
	bool have_sys[3];
	bool register_off;            /* preflight: no grant for channel config rows */
	bool reader_memory_off;       /* preflight: no grant for DLV's stream info (worker/acked.h) */
	bool watch_fc_off;            /* preflight: no grant to answer a watch's flow control */
	uint32_t max_memberships;     /* --max-memberships: rows one lifecycle may hold */
	uint32_t max_channels;        /* --max-channels: channel rows one lifecycle may create */
	char instance[IPC_INSTANCE_MAX]; /* this process's incarnation */

	/* The resident connection (resident.c): reachability, the lease, and
	 * the broker watchdog's only source of events. nats.c's callbacks
	 * reach the event loop through a pipe. */
	natsConnection *nc;
	jsCtx *js;
	int evpipe[2];
	struct event *ev_resident, *ev_tick;
	struct watchdog wd;
	pthread_mutex_t vmu;          /* guards violation */
	char violation[512];          /* the broker's last permissions violation */

	/* Serving the shard (shard.c). */
	struct lease lease;
	enum shard_state { SHARD_CLAIMING, SHARD_STARTING, SHARD_SERVING, SHARD_RECHECKING,
		SHARD_STANDBY } shard;
	int64_t shard_since_ms;       /* wall clock: in this state since */
	bool standby;                 /* --standby: wait for a held lease */
	int64_t standby_until;        /* monotonic; 0: a standby for good (--standby) */
	bool lane;                    /* --lane: a host's lane (host/): no pid record */
	struct event *ev_standby;
	void (*on_claimed)(struct sup *s); /* the standby claimed: start serving */
	bool startup_done;            /* the lease watch is bound */
	bool release_on_exit;         /* false: another daemon took the shard */
	struct kvmirror lease_watch;
	bool watching;
	pthread_mutex_t wmu;          /* guards the watch's last reading */
	bool watch_changed;
	struct event *ev_renew, *ev_recheck;
	int64_t quiesce_deadline;
	char pid_path[WS_FILE_MAX];
	char holder_path[WS_FILE_MAX]; /* the lease holder's record (holder.h); "" for a lane */

	/* The credential's lifetime and its reload (reload.c). */
	bool cred_expired;            /* awaiting a proved renewal */
	struct event *ev_expiry, *ev_reread, *ev_swap;
	struct reload_proof *reload;  /* the proof in flight, the requests' budget (reload.c) */
	struct kicker *kicker;        /* the KICK monitor (kick.c) */
	struct sup_worker workers[SUP_WORKERS];
	struct event *ev_sig[4], *ev_status, *ev_kill;
	bool status_dirty;

	/* --metrics: the metrics server and its snapshots (metrics.c). */
	struct metrics_srv metrics;

	/* What the status file and the metrics report besides the workers'
	 * own counters (status.c), counted where each happens. */
	struct sup_stats {
		uint64_t renewals, renewal_failures; /* lease writes of shard 0 */
		int64_t last_renewal_ms;             /* wall clock; 0 = none yet */
		bool connected;                      /* the resident connection */
		uint64_t reconnects;
		uint64_t reloads_adopted, reloads_refused;
	} stats;
};

int64_t sup_now_ms(void);

/* dial.c: where the supervisor dials. */
/*
 * The server list: one nats:// URL, or every node of a cluster
 * comma-separated, each resolved. out gets the IP-literal list the
 * connections dial, ports[] each one's port. 0, or -1 with err.
 */
int resolve_servers(const char *list, char *out, size_t outlen, uint16_t *ports, char *err,
		    size_t errlen);
/* TLS demanded (why: --tls, --tls-ca, the registry's tlsRequired; NULL:
 * nothing demands it): s->tls_host and s->tls_ca set. 0, or -1 with err. */
int transport(struct sup *s, const char *why, const char *ca_opt, const char *url, char *err,
	      size_t errlen);

/* resident.c */
/* 0; -1 with err; -2 when the demanded TLS was refused (err is the line). */
int resident_open(struct sup *s, char *err, size_t errlen);
void resident_close(struct sup *s);
/* Replace the resident connection by one under the credential held now. */
int resident_swap(struct sup *s, char *err, size_t errlen);
/* A worker's STATUS arrived: a worker cut off from every listed server
 * is the watchdog's second source (WATCHDOG_WORKERS). */
void resident_workers_reach(struct sup *s);
/* Did the broker report a permissions violation naming subject? */
bool resident_denied(const char *subject, char *text, size_t len);

/* reload.c: reloadCreds and the credential's lifetime. */
void reload_init(struct sup *s);
void reload_free(struct sup *s);
/* A RELOAD_REQ from the registry: prove, adopt, answer, swap. */
void reload_request(struct sup_worker *w, const struct ipc_msg *m);
/* The credential expired (the resident connection's 'X', or its exp). */
void reload_expired(struct sup *s);
/* Has it (by the broker's word or by its exp)? */
bool reload_is_expired(const struct sup *s);

/* preflight.c: check the credentials' grants against lib/creds/needs.h before
 * binding; log every missing one. 0 (optional features turned off), or -1:
 * a required grant is missing, do not bind. */
int preflight(struct sup *s);

/* shard.c: the lease through the daemon's life. */
/* Claim the lease (ready:false) at start: 0 claimed; 1 another daemon
 * holds it; -1 when the daemon must not bind. Every line but 1's is logged. */
int shard_claim(struct sup *s);
/* The "live lease elsewhere" line shard_claim leaves to its caller. */
void shard_claim_refused(struct sup *s);

/* Under a service manager, a broker that does not answer the first dial is
 * dialled again for this long before the start fails (resident_open). */
#define SERVICE_BROKER_WAIT_MS 10000

/* --standby: a daemon refused by a live lease keeps running, watches the
 * row and claims it once deleted or expired; then s->on_claimed starts
 * serving. With s->standby_until set (a start under a service manager,
 * without --standby), it gives up then: the refusal's lines, exit 1. */
void standby_begin(struct sup *s);
void standby_event(struct sup *s);
void standby_free(struct sup *s);
/* Every worker reported READY for the first time: ready:true, the watch. */
void shard_workers_bound(struct sup *s);
/* A worker answered QUIESCED (or died while quiescing). */
void shard_worker_quiesced(struct sup *s);
/* The resident connection's events and the lease watch, on the loop. */
void shard_on_event(struct sup *s, char ev);
/* The lease watch, on the resident connection of the moment. */
void shard_watch(struct sup *s);
void shard_unwatch(struct sup *s);
/* At exit, after the workers are down. */
void shard_release(struct sup *s);
void shard_free(struct sup *s);

/* workers.c */
void workers_init(struct sup *s);
void workers_start_all(struct sup *s);
void workers_stop_all(struct sup *s);
void workers_reap(struct sup *s);
bool workers_all_down(struct sup *s);
bool workers_all_running(struct sup *s);
void workers_kill_all(struct sup *s);
void workers_free(struct sup *s);
/* QUIESCE / RESUME every running worker; all quiesced? */
void workers_quiesce(struct sup *s);
void workers_resume(struct sup *s);
bool workers_all_quiesced(struct sup *s);
/* Tell the registry what the lease says (liveness, re-checking refusals). */
void workers_send_lease(struct sup *s);

/* main.c: begin an orderly stop (STOP to every worker, SIGKILL after
 * SUP_STOP_GRACE_MS). */
void sup_stop(struct sup *s, int exit_code);

/* status.c: the status file `cotal status` reads. */
/* The document it holds (docs/status.schema.json's "daemon"): new. */
json_t *status_doc(struct sup *s);
void status_write(struct sup *s);
void status_remove(struct sup *s);

#endif
