/*
 * Inside the registry worker: what its rooms share. registry.c takes
 * requests off the three rails and answers them; gate.c orders membership
 * writes against inventories; kv.c reads and writes the buckets; the ops
 * live in membership.c (ctl.delivery) and admin.c (ctl.delivery-admin);
 * chatscan.c reads CHAT through short-lived consumers (join catch-up,
 * history); sweep.c sweeps the broker for eviction.
 */
#ifndef COTAL_REGISTRY_INT_H
#define COTAL_REGISTRY_INT_H

#include <jansson.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "worker/worker.h" /* the IPC catalogue the runtime speaks */
#include "lib/wire/aclindex.h"
#include "lib/wire/ctlreq.h"
#include "lib/nats/kvmirror.h"
#include "lib/wire/records.h"
#include "lib/strmap.h"
#include "lib/wire/tokens.h"
#include "worker-registry/args.h"
#include "worker-registry/fairq.h"

#define REG_CTL_THREADS 4        /* ctl.delivery requests served at once */
#define REG_QUEUE_MAX 1024       /* requests waiting, per queue */
/* ctl.delivery, per caller (issue 28, "Fair rails"): what one caller may
 * have waiting, in requests and in bytes of their bodies, and the bytes
 * of all callers' waiting requests. */
#define REG_CALLER_WAITING 32
/* ... and in service at once: half the pool, so that a flood leaves the
 * other half to everyone else, and one caller's leave can still overtake
 * its own slow join (WIRE.md §5's superseded activation). */
#define REG_CALLER_SERVING (REG_CTL_THREADS / 2)
#define REG_CALLER_BYTES (1024 * 1024)
#define REG_QUEUE_BYTES (16 * 1024 * 1024)
/* Refusals answered a second to one caller past its share; the rest of a
 * flood is shed unanswered (counted: "shed"), so that answering it does not
 * crowd the connection the other callers' answers and the registry's own
 * JetStream calls share. */
#define REG_REFUSALS_PER_S 50
/* What the library may hold for a rail before our callback takes it: room
 * for every caller's share of a burst; past it the library drops and we
 * count (the dropped_* counters). */
#define REG_PENDING_MSGS (64 * REG_QUEUE_MAX)
#define REG_PENDING_BYTES (2 * REG_QUEUE_BYTES)
#define REG_INVENTORY_GATHER_MS 20 /* inventories arriving together share a read */
#define REG_RELOAD_WAIT_MS 15000 /* the supervisor's answer to reloadCreds */
#define REG_PREFIX_MAX (SPACE_TOKEN_MAX + 8)
#define REG_BUCKET_MAX (SPACE_TOKEN_MAX + 32)

/* A request taken off a rail: copied out of the library's message. */
struct request {
	struct request *next;
	struct rail_caller caller;
	struct ctl_request req;
	struct reg_args args;   /* its op's arguments, read with req (args.h) */
	char *body;             /* ctl.delivery: the body, decoded when served */
	size_t body_len;
	char *reply;            /* the bound reply subject */
	uint64_t ticket;        /* the fence ticket of its arrival */
	int64_t arrived_ms;     /* monotonic */
};

/* A membership row as the mirror holds it. */
struct mrow {
	uint64_t rev;
	struct member_row row; /* last: kept in member_row_size() bytes */
};

struct registry {
	char prefix[REG_PREFIX_MAX];   /* cotal.<s> */
	char token[SPACE_TOKEN_MAX + 1];
	char chat[REG_PREFIX_MAX];     /* CHAT_<s> */
	char members_bucket[REG_BUCKET_MAX];
	char channels_bucket[REG_BUCKET_MAX];
	jsCtx *js;

	struct kvmirror members;       /* cotal_members_<s> */
	struct strmap rows;            /* member key -> struct mrow (members' lock) */
	struct strmap lc_rows;         /* lifecycle -> its rows in `rows`, as (uintptr_t) */
	/* cotal_channels_<s>, when registerChannel is served: only who
	 * created each row (KVW_ORIGIN_HEADER), never the configs. */
	struct kvmirror channels;
	bool channels_open;
	struct strmap ch_origin;       /* channel -> the lifecycle that created it (channels' lock) */
	struct strmap lc_channels;     /* lifecycle -> rows it created, as (uintptr_t) */
	struct aclindex acl;           /* cotal_acl_<s> */
};
extern struct registry G;

/* ---- registry.c: answering ---- */
/* The broker's max_payload now (it may change with a reconnect). */
int64_t max_payload(void);
/* Answer r with a serialized reply (freed here): fitted to max_payload,
 * sent only while r's fence ticket is good. */
void reply_send(struct request *r, char *body, size_t len);
void reply_error(struct request *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* {ok:true, data}; steals data. */
void reply_data(struct request *r, json_t *data);
/* May r still make an effect (publish, KV write)? Pair with effect_done. */
bool effect_begin(struct request *r);
void effect_done(void);
/* Counters (ipc.c names them). */
enum { C_REQUESTS, C_JOINS, C_LEAVES, C_REFUSED, C_INVENTORIES, C_MEMBER_READS, C_EVICTIONS,
	C_UNANSWERED, C_DROPPED_CTL, C_DROPPED_ADMIN, C_DROPPED_LIVE, C_SHED };

/* ---- queues.c: where requests wait ---- */
enum reg_queue {
	Q_CTL,       /* ctl.delivery: callers in turn (fairq.h) */
	Q_ADMIN,     /* ctl.delivery-admin, in arrival order */
	Q_INVENTORY, /* ctl.delivery-admin's lifecycleMemberships */
	Q_COUNT
};
void queues_init(void);
/* Queue r: FAIRQ_OK (taken), or the bound that refuses it (r is still the
 * caller's). On Q_CTL, r waits in its caller's line and bytes count toward
 * the caller's share. */
enum fairq_verdict queue_push(enum reg_queue q, struct request *r, size_t bytes);
/* Would Q_CTL take bytes from caller c now? (FAIRQ_OK or the bound.) */
enum fairq_verdict queue_admits(enum reg_queue q, const struct rail_caller *c, size_t bytes);
/* May a refusal of caller c with v be answered now (fairq_refusal_due)? */
bool queue_refusal_due(const struct rail_caller *c, enum fairq_verdict v);
/* The refusal of a bound, as a serialized reply made once. */
const char *queue_refusal(enum fairq_verdict v, size_t *len);
/* The next request, waiting up to ms; NULL when none, or once stopped.
 * A Q_CTL request's caller has no other served until queue_done(r). */
struct request *queue_pop(enum reg_queue q, int ms);
void queue_done(struct request *r);

/* refused.c: who is refused most on the agents' rail, for the metrics. */
#define REFUSED_TRACKED 1000     /* callers counted by name; the rest as "other" */
#define REFUSED_REPORT_MS 5000   /* the top ten to the supervisor, when changed */
void refused_note(const struct rail_caller *c);
void refused_report(void);
void refused_free(void);
/* Serving threads run while true; false wakes every waiting pop. */
void queues_run(bool run);
bool queues_running(void);
/* Free every waiting request (at exit). */
void queues_drain(void);
void request_free(struct request *r);

/* ---- gate.c: membership writes against inventories (the seed) ---- */
/*
 * A durable join or leave of lifecycle lc enters the gate before it reads
 * the ACL row it writes by and leaves it once its writes are done. It may
 * not enter when an inventory fenced lc: false then.
 */
bool gate_enter(const char *lc, uint64_t *ticket);
void gate_leave(uint64_t ticket);
/* An inventory arrived: fence lc (when its row still allowed reads) and
 * return the mark that gate_wait waits out. */
uint64_t gate_mark(const char *lc, bool fence);
/* Wait until every write that entered before mark has left. */
void gate_wait(uint64_t mark);
bool gate_fenced(const char *lc);
void gate_reset(void);

/* ---- kv.c: the buckets ---- */
/* The latest value of key in bucket, fresh from the stream: 1 with value
 * (malloc'd) and rev; 0 when absent or deleted (rev: the delete marker's
 * sequence, or 0); -1 with err. */
int kv_read(const char *bucket, const char *key, char **value, size_t *len, uint64_t *rev,
	    char *err, size_t errlen);
/* Write key at expected revision expect (0: the key has no message yet);
 * del: a delete marker; origin (NULL: none): the lifecycle the row names as
 * its creator, beside it (kvcas_write). 0 with *rev, 1 on a CAS conflict,
 * -1 with err. */
int kv_write(struct request *r, const char *bucket, const char *key, const char *value,
	     size_t len, uint64_t expect, bool del, const char *origin, uint64_t *rev, char *err,
	     size_t errlen);
/* A stream's last sequence (and, when ms_per_subject is set, its
 * max_msgs_per_subject). */
int stream_last_seq(const char *stream, uint64_t *last, int64_t *max_per_subject, char *err,
		    size_t errlen);
/* The fanout consumer's delivered stream sequence. */
int fanout_delivered(uint64_t *seq, char *err, size_t errlen);
/* Open/close the mirrors (members, acl, and channels unless registerChannel is off). */
int kv_open(char *err, size_t errlen);
void kv_close(void);
/*
 * The caller's alias resolved to its single live read-ACL row (WIRE.md §4),
 * read fresh after a barrier, and the channel within its allowSubscribe:
 * 0 with the caller's uid, or -1 with the refusal naming op.
 */
int acl_caller_reads(const char *op, const struct rail_caller *c, const char *channel, char *uid,
		     size_t uidlen, char *why, size_t whylen);
/* Does the mirror hold a membership row by key (any state)? */
bool kv_row_known(const char *key);
/* How many membership rows lifecycle lc holds in the mirror (any state). */
size_t kv_lifecycle_rows(const char *lc);
/* How many channel config rows lifecycle lc created that still name it,
 * after a barrier of the channels mirror: 0 with *n, or -1 with err. */
int kv_lifecycle_channels(const char *lc, size_t *n, char *err, size_t errlen);
/* The row of one lifecycle now (after a barrier): what acl_row_parse says. */
int acl_fresh(const char *lc, struct acl_row *row, char *err, size_t errlen);
/* "channel \"<ch>\" is not within your read ACL [a, b]" */
void acl_refusal(const struct acl_row *row, const char *channel, char *why, size_t whylen);

/* ---- membership.c: ctl.delivery ---- */
void op_durable_join(struct request *r);
void op_durable_leave(struct request *r);
void op_list_memberships(struct request *r);
void op_register_channel(struct request *r);
void op_read_history(struct request *r);

/* ---- admin.c: ctl.delivery-admin ---- */
void admin_serve(struct request *r);            /* one at a time, in arrival order */
void admin_inventories(struct request **v, int n); /* arrived together */
void admin_sys_creds(const struct ipc_msg *m);  /* main thread */
void admin_reload_reply(const struct ipc_msg *m);
void admin_kick_reply(const struct ipc_msg *m);   /* main thread */
#ifdef COTAL_TEST_HOOKS
void admin_test_kick(void);  /* COTAL_TEST_KICK: the serving thread, once */
#endif
void admin_close(void);

/* ---- chatscan.c: CHAT through short-lived consumers ---- */
#define CHAT_SCAN_BATCH 256      /* posts per pull (issue 5: batches of 256) */
/* One batch of posts in sequence order; non-zero stops the scan. */
typedef int (*chat_batch_fn)(void *arg, natsMsg **posts, int n);
/*
 * Read channel's posts (filter P.chat.*.*.<channel>) with stream sequence
 * start..stop (stop 0: to the end) through consumer `name` (ack none,
 * memory, inactive 30 s), deleted before and after, handing them to fn in
 * batches of CHAT_SCAN_BATCH. *pending: how many of the channel's posts
 * had a sequence of at least start when the consumer was made. 0, the
 * non-zero return of fn, or -1 with err.
 */
int chat_scan(const char *name, const char *channel, uint64_t start, uint64_t stop,
	      chat_batch_fn fn, void *arg, uint64_t *pending, char *err, size_t errlen);
/* The stream sequence of a post a scan handed over (0: unknown). */
uint64_t chat_seq(natsMsg *m);
/* How many of channel's posts have a sequence of at least start (a
 * consumer made and deleted). */
int chat_count(const char *name, const char *channel, uint64_t start, uint64_t *count,
	       char *err, size_t errlen);

#endif
