/*
 * IPC between the supervisor and its workers (think OpenBSD imsg).
 *
 * Each worker has two SOCK_SEQPACKET socketpairs with the supervisor: the
 * main channel (asynchronous: configuration, fence, status, stop) and the
 * sign channel (synchronous: the nonce signature its broker connection
 * needs while it connects). One datagram carries exactly one frame:
 *
 *   struct ipc_hdr { uint16 type; uint16 flags (0); uint32 len; }  host order
 *   payload[len]                                                   len <= IPC_MAX_PAYLOAD
 *
 * Decoding is strict: a short frame, a length that disagrees with the
 * datagram, an oversized datagram, an unknown type, a type that may not
 * travel in that direction, a payload outside the type's bounds or a
 * malformed fixed payload is a protocol error. The receiving side treats a
 * peer that speaks garbage as broken: the supervisor stops and restarts the
 * worker; a worker exits.
 */
#ifndef COTAL_IPC_H
#define COTAL_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPC_HDR_LEN 8
#define IPC_MAX_PAYLOAD (64 * 1024)
#define IPC_MAX_FRAME (IPC_HDR_LEN + IPC_MAX_PAYLOAD)

/* Who may send a message. */
enum ipc_dir {
	IPC_TO_WORKER = 1,     /* supervisor -> worker */
	IPC_TO_SUPERVISOR = 2, /* worker -> supervisor */
};

/* The message catalogue. Numbers are stable: never reuse one. */
enum ipc_type {
	IPC_CONFIG = 1,   /* -> worker: struct ipc_config */
	IPC_JWT = 2,      /* -> worker: the user JWT text (no NUL), 1..IPC_MAX_PAYLOAD */
	IPC_SIGN_REQ = 3, /* -> supervisor (sign channel): the broker's nonce text */
	IPC_SIGN_REP = 4, /* -> worker (sign channel): 64-byte Ed25519 signature, or 0 bytes = refused */
	IPC_READY = 5,    /* -> supervisor: confined and connected; empty */
	IPC_QUIESCE = 6,  /* -> worker: stop acting (fence); empty */
	IPC_QUIESCED = 7, /* -> supervisor: no effect in flight any more; empty */
	IPC_RESUME = 8,   /* -> worker: may act again; empty */
	IPC_RECONNECT = 9, /* -> worker: new credential adopted, rebuild the connection; empty */
	IPC_STATUS = 10,  /* -> supervisor: struct ipc_status */
	IPC_STOP = 11,    /* -> worker: finish and exit 0; empty */
	IPC_SYS_CREDS = 12, /* -> worker (registry): struct ipc_sys_creds, then the JWT text */
	IPC_SIGN_SYS = 13,  /* -> supervisor (sign channel): 1 byte enum ipc_sys, then the nonce */
	IPC_LEASE = 14,     /* -> worker: struct ipc_lease, what the liveness rail reports */
	IPC_RELOAD_REQ = 15, /* -> supervisor: struct ipc_reload_req (reloadCreds) */
	IPC_RELOAD_REP = 16, /* -> worker: struct ipc_reload_rep */
	IPC_TLS_CA = 17,    /* -> worker: the mesh's CA certificates, PEM text (see below) */
	/* To the metrics server (metrics/), one way: a snapshot is BEGIN, its
	 * bytes in PARTs, END. */
	IPC_METRICS_BEGIN = 18, /* -> metrics: struct ipc_metrics_begin */
	IPC_METRICS_PART = 19,  /* -> metrics: the snapshot's next bytes, 1..IPC_MAX_PAYLOAD */
	IPC_METRICS_END = 20,   /* -> metrics: the snapshot is whole; empty */
	IPC_REFUSALS = 21,      /* -> supervisor (registry): struct ipc_refusals */
	IPC_KICK_REQ = 22,      /* -> supervisor (registry): struct ipc_kick_req */
	IPC_KICK_REP = 23,      /* -> worker (registry): struct ipc_kick_rep */
	IPC_TYPE_END
};

struct ipc_type_info {
	const char *name;  /* "CONFIG", ... */
	uint8_t dir;       /* enum ipc_dir bits */
	uint32_t min_len;
	uint32_t max_len;
};

/* The catalogue entry of a type, or NULL for an unknown type. */
const struct ipc_type_info *ipc_type_info(uint16_t type);
/* The name of a type for log lines: "CONFIG", ..., "unknown". */
const char *ipc_type_name(uint16_t type);

#define IPC_SIGN_REQ_MAX 128 /* a broker nonce is far shorter */
#define IPC_SIGN_REP_LEN 64  /* an Ed25519 signature */

#define IPC_ROLE_MAX 16
#define IPC_SPACE_MAX 257       /* 256 bytes + NUL */
#define IPC_SERVERS_MAX 8 /* CONN_SERVERS_MAX: every node of a cluster */
#define IPC_URL_MAX 1024 /* a comma-separated list of IPC_SERVERS_MAX URLs */
#define IPC_HOST_MAX 256
#define IPC_INBOX_MAX 128 /* REPLY_INBOX_MAX */

/* CONFIG payload: fixed size, every string NUL-terminated within its field
 * (the decoder checks). */
struct ipc_config {
	char role[IPC_ROLE_MAX];          /* "fanout" "reader" "registry" "timer" */
	char space[IPC_SPACE_MAX];        /* space name */
	char url[IPC_URL_MAX];            /* broker URL(s), IP literal hosts, comma-separated */
	char tls_host[IPC_HOST_MAX];      /* expected TLS hostname, "" = no TLS */
	char inbox_prefix[IPC_INBOX_MAX]; /* from the credential's own sub.allow */
	uint32_t seccomp_log;             /* 1: COTAL_SECCOMP=log (diagnosis only) */
	uint32_t broker_ports[IPC_SERVERS_MAX]; /* the Landlock TCP connect rules; 0: unused */
	uint32_t uid, gid;                /* the unprivileged user to drop to */
	uint32_t drop_privs;              /* 1: drop to uid/gid (started as root) */
	uint32_t features_off;            /* IPC_OFF_*: what the credential's grants leave out */
	uint32_t max_memberships;         /* rows one lifecycle may hold (registry), 1..IPC_MEMBERSHIPS_MAX */
	uint32_t max_channels;            /* channel rows one lifecycle may create, 1..IPC_CHANNELS_MAX */
	uint32_t reserved[1];             /* zero */
};
#define IPC_MEMBERSHIPS_MAX 1000000
#define IPC_CHANNELS_MAX 100000
/* registerChannel: the credential may not write channel config rows. */
#define IPC_OFF_REGISTER 1u
#define IPC_OFF_READER_MEMORY 2u   /* no DLV stream info: the reader forgets what it acked */
#define IPC_OFF_WATCH_FC 4u        /* no $JS.FC grants: the KV watches run without flow control */

/* STATUS payload: a worker's state and counters. */
#define IPC_COUNTERS 13
/* Every role's last counter: permission violations the broker reported on
 * the worker's connection. */
#define IPC_COUNTER_VIOLATIONS 12
enum ipc_worker_state {
	IPC_STATE_STARTING = 0,
	IPC_STATE_CONNECTED = 1,
	IPC_STATE_DISCONNECTED = 2,
	IPC_STATE_QUIESCED = 3,
};
/*
 * Beside the counters, what a worker measures now (issue 29's metrics):
 * gauges named per role (ipc_gauge_name: the fan-out's and the reader's
 * consumer lag, the registry's waiting requests), and one latency
 * histogram per role that has one (ipc_latency_name: the fan-out's post to
 * its copies in INBOX, the reader's post to its frame in DLV, the copy
 * latency): a count per bucket, not cumulative,
 * the bucket i holding observations up to ipc_latency_bounds_ms[i] and
 * above the one before, the last one everything above them all.
 */
#define IPC_GAUGES 4
#define IPC_LATENCY_BUCKETS 12
extern const uint32_t ipc_latency_bounds_ms[IPC_LATENCY_BUCKETS];
struct ipc_status {
	uint32_t state;                 /* enum ipc_worker_state */
	uint32_t reserved;
	uint64_t counters[IPC_COUNTERS]; /* per role, named by ipc_counter_name() */
	uint64_t gauges[IPC_GAUGES];     /* per role, named by ipc_gauge_name() */
	uint64_t latency[IPC_LATENCY_BUCKETS + 1];
	uint64_t latency_sum_us;         /* of every observation */
};
/* Name of counter i of a role ("" when unused). */
const char *ipc_counter_name(const char *role, unsigned i);
/* Name of gauge i of a role ("" when unused). */
const char *ipc_gauge_name(const char *role, unsigned i);
/* What a role's latency histogram measures ("" when it has none). */
const char *ipc_latency_name(const char *role);

/*
 * The $SYS users of eviction (WIRE.md §7): the observer reads CONNZ of the
 * space account, the evictor KICKs. Their JWTs reach the registry worker
 * only; their seeds stay in the supervisor, which signs their nonces on the
 * sign channel (IPC_SIGN_SYS).
 */
enum ipc_sys {
	IPC_SYS_OBSERVER = 1,
	IPC_SYS_EVICTOR = 2,
};
#define IPC_KEY_MAX 64 /* a public nkey (56) + NUL, rounded */
struct ipc_sys_creds {
	uint32_t which;                   /* enum ipc_sys */
	uint32_t reserved;                /* zero */
	char inbox_prefix[IPC_INBOX_MAX]; /* from that user's own sub.allow */
	char user[IPC_KEY_MAX];           /* its public key, for log lines */
	char account[IPC_KEY_MAX];        /* the space account whose connections are swept */
};
#define IPC_SIGN_SYS_MAX (1 + IPC_SIGN_REQ_MAX)

/*
 * What the daemon's lease says about serving the shard (WIRE.md §4, §5):
 * the registry answers the liveness rail from it, and refuses rail requests
 * while the supervisor re-checks ownership.
 */
enum ipc_lease_state {
	IPC_LEASE_NONE = 0,        /* not (yet) serving: liveness "stale" */
	IPC_LEASE_SERVING = 1,     /* liveness "bound" */
	IPC_LEASE_RECHECKING = 2,  /* requests refused: "re-checking ownership" */
};
#define IPC_INSTANCE_MAX 48
struct ipc_lease {
	uint32_t state;                   /* enum ipc_lease_state */
	uint32_t reserved;                /* zero */
	char instance[IPC_INSTANCE_MAX];  /* the daemon's incarnation, opaque */
};

/* reloadCreds, forwarded by the registry to the supervisor. */
#define IPC_SHA256_HEX 65
#define IPC_RELOAD_ERR_MAX 512
struct ipc_reload_req {
	uint64_t id;                      /* echoed in the reply */
	char expected[IPC_SHA256_HEX];    /* "" or the expected JWT's SHA-256, hex */
	char reserved[7];                 /* zero */
};
struct ipc_reload_rep {
	uint64_t id;
	uint32_t ok;                      /* 1: adopted */
	uint32_t broker_accepted;         /* 1: the candidate was proved on the broker */
	char error[IPC_RELOAD_ERR_MAX];   /* the refusal when ok is 0 */
};

/*
 * KICK_REQ: the registry asks the supervisor, which alone signs for the
 * $SYS evictor, to KICK connection cid on server for principal (an
 * eviction sweep's match). The supervisor sends the KICK only after its own
 * CONNZ, as the observer, shows that connection on that server in the
 * space's account and naming that principal; else it refuses (issue 41,
 * finding 2). server: one token of [A-Za-z0-9_-]; principal: printable
 * ASCII without space; cid > 0.
 */
#define IPC_SERVER_ID_MAX 72
#define IPC_PRINCIPAL_MAX 136 /* two identity tokens, a dot, NUL, rounded */
struct ipc_kick_req {
	uint64_t id;                      /* echoed in the reply */
	uint64_t cid;
	char server[IPC_SERVER_ID_MAX];
	char principal[IPC_PRINCIPAL_MAX];
};
/* KICK_REP: what came of it; reply holds the broker's answer (SENT) or
 * why (the others), NUL-terminated. */
enum ipc_kick_outcome {
	IPC_KICK_SENT = 0,          /* the broker answered: its reply */
	IPC_KICK_NO_RESPONDERS = 1, /* no server answered the KICK */
	IPC_KICK_FAILED = 2,        /* no answer in time, or the request failed: why */
	IPC_KICK_REFUSED = 3,       /* the supervisor would not send it: why */
};
#define IPC_KICK_REPLY_MAX 4096
struct ipc_kick_rep {
	uint64_t id;
	uint32_t outcome;                 /* enum ipc_kick_outcome */
	uint32_t reserved;                /* zero */
	char reply[IPC_KICK_REPLY_MAX];
};

/*
 * TLS_CA: sent once at spawn, after JWT, when CONFIG's tls_host is set (the
 * mesh demands TLS); the worker cannot open the CA file once confined. The
 * payload is one or more PEM certificate blocks and nothing else: each
 * "-----BEGIN CERTIFICATE-----", base64 and line breaks, "-----END
 * CERTIFICATE-----", line breaks. No NUL, no other byte. 1..IPC_MAX_PAYLOAD.
 */

/*
 * METRICS_BEGIN: what the metrics server answers from the next snapshot:
 * /healthz's status and one-line reason, and the lengths of the two
 * renderings that follow in PARTs, the Prometheus text format (0.0.4) then
 * OpenMetrics 1.0. A new BEGIN drops a snapshot not yet ended.
 */
#define IPC_METRICS_REASON_MAX 256
#define IPC_METRICS_SNAPSHOT_MAX (16u * 1024 * 1024) /* both renderings */
struct ipc_metrics_begin {
	uint32_t health;                       /* 200 serving, 503 not */
	uint32_t reserved;                     /* zero */
	uint64_t text_len, openmetrics_len;    /* their sum within the bound */
	char reason[IPC_METRICS_REASON_MAX];   /* printable ASCII, NUL-terminated */
};

/*
 * REFUSALS: the callers the registry refused most on the agents' rail past
 * their share (answered or shed), since it started, most first: at most
 * IPC_REFUSALS_TOP, each "<owner>.<actor>" (identity tokens: printable
 * ASCII, no space, no dot but the one) with its count; a caller beyond the
 * registry's bound on those it tracks is counted as "other". Entries from
 * n on are all zero.
 */
#define IPC_REFUSALS_TOP 10
struct ipc_refusals {
	uint32_t n;
	uint32_t reserved;                /* zero */
	struct {
		char principal[IPC_PRINCIPAL_MAX];
		uint64_t count;
	} top[IPC_REFUSALS_TOP];
};

/* A decoded message; payload points into the caller's buffer. */
struct ipc_msg {
	uint16_t type;
	uint32_t len;
	const uint8_t *payload;
};

/*
 * Decode one datagram of n bytes that arrived at a receiver of direction
 * dir (IPC_TO_WORKER at a worker, IPC_TO_SUPERVISOR at the supervisor).
 * 0 on success; -1 with err naming what is wrong ("ipc: short frame (5
 * bytes)", "ipc: unknown message type 99", "ipc: STATUS payload of 12
 * bytes, expected 72", "ipc: CONFIG field role is not NUL-terminated" ...).
 */
int ipc_decode(const void *frame, size_t n, enum ipc_dir dir, struct ipc_msg *out,
	       char *err, size_t errlen);

/* Encode a frame into buf (at least IPC_HDR_LEN + len bytes). Returns the
 * frame length, or 0 when len is over IPC_MAX_PAYLOAD (or buflen is too
 * small for the frame). */
size_t ipc_encode(void *buf, size_t buflen, uint16_t type, const void *payload, size_t len);

/* Send one frame as one datagram (MSG_NOSIGNAL). 0, or -1 with errno. */
int ipc_send(int fd, uint16_t type, const void *payload, size_t len);

/*
 * Receive one datagram into buf (IPC_MAX_FRAME bytes) and decode it.
 * Returns 1 on a message, 0 when the peer closed the channel, -1 on a
 * protocol error (err set; an oversized datagram is detected with
 * MSG_TRUNC) or a system error (errno set, err says which). EAGAIN/EINTR
 * come back as -1 with errno set and err "".
 */
int ipc_recv(int fd, uint8_t *buf, enum ipc_dir dir, struct ipc_msg *out, char *err,
	     size_t errlen);

#endif
