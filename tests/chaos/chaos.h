/*
 * cotal-chaos (issue 32): the daemon under random faults, the way a Jepsen
 * run reports on a database. A real broker (one node, or a 3-node cluster
 * whose nodes and daemon each live in their own network namespace) and the
 * real daemon; a steady load of durable posts to members that surface and
 * ack all along; a nemesis that injects faults on a schedule drawn from a
 * seed; and a checker that reads every acknowledged post and every frame
 * surfaced and says what was lost, duplicated or surfaced without
 * authorization, and which faults came before it.
 *
 * The files: chaos.c (the run), load.c (posters, members, the churn of
 * memberships and read ACLs), nemesis.c (the faults), check.c (the verdict
 * and the report).
 */
#ifndef COTAL_CHAOS_H
#define COTAL_CHAOS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/creds/creds.h"
#include "lib/nats/pull.h"
#include "tests/harness/harness.h"

#define POSTS_MAX 100000
#define MEMBERS_MAX 32
#define POSTERS 4          /* CHAT keeps 1000 posts per sender and channel */
#define CHURNERS 2         /* the last members: their rows and ACLs change */
#define EVENTS_MAX 4096
#define FAULTS_MAX 8192
/*
 * A frame is judged by the membership rows and read ACLs its member had
 * from its post's acknowledgement to its storing in DLV: the reader decided
 * somewhere in between (its barrier makes a change committed before a
 * batch's fetch count for that batch), and a cluster without quorum may
 * commit its publish long after. A change counts AUTH_GRACE_MS after its
 * write was acknowledged (time stamps of two clocks' reading, to the ms).
 * A frame stored more than LATE_MS after a change that denies it is
 * reported as a late commit.
 */
#define AUTH_GRACE_MS 1000
#define LATE_MS 5000

enum mode { MODE_SINGLE, MODE_CLUSTER };


struct post {
	int64_t sent_ms;     /* first publish */
	int64_t acked_ms;    /* its PubAck (0: never) */
	uint64_t seq;        /* CHAT's sequence */
};

/* What one member surfaced of one post. */
struct seen {
	uint16_t frames;      /* frames surfaced */
	uint16_t copies;      /* distinct DLV sequences among them */
	uint64_t dlv_seq;     /* the first frame's */
	int64_t surfaced_ms;  /* when the first surfaced */
	int64_t stored_ms;    /* when the first was stored in DLV */
	uint64_t dlv_seq2;    /* a second copy's (0: none) */
	int64_t stored2_ms;
};

struct mbr {
	int idx;
	bool churn;
	struct agent a;
	struct conn c;        /* reconnecting forever (h_connect_url) */
	struct puller pl;
	pthread_t th;
	struct seen *seen;            /* per post */
	atomic_long frames, foreign, bad_header;
	atomic_int fetch_errors;
	/* Its membership row now (churners): generation, join, leave. */
	uint64_t gen, join, leave;
	bool narrowed;
	int64_t changed_ms;            /* its last change acknowledged (0: none) */
};

/* A change of a churner's row or ACL: in force from somewhere between
 * first_ms (its write began) and done_ms (its write was acknowledged). */
enum ev_kind { EV_LEAVE, EV_JOIN, EV_NARROW, EV_RESTORE };
struct event {
	int member;
	enum ev_kind kind;
	uint64_t seq;         /* leave: leaveCursor; join: joinCursor */
	int64_t first_ms, done_ms;
};

struct fault {
	char kind[32];
	char detail[160];
	int64_t start_ms, end_ms; /* end: healed, restarted, back */
};

struct chaos {
	/* the run's settings */
	enum mode mode;
	uint64_t seed;
	int seconds;       /* of faults under load */
	int members;
	int rate;          /* posts a second */
	int drain_s;       /* after the faults: how long owed frames may take */
	const char *out;   /* the report's JSON */
	/* the mesh */
	struct mesh mesh;
	struct h_net net;
	struct daemon d;
	char channel[64];
	char daemon_extra[4][64];
	int ndaemon_extra;
	struct conn prov;
	struct agent posters[POSTERS];
	struct conn poster_conns[POSTERS];
	struct mbr m[MEMBERS_MAX];
	/* the load */
	uint64_t first_join;    /* every member's joinCursor at the start */
	struct post *posts;
	atomic_int nposts;      /* posts begun */
	atomic_bool stop_posting, stop_members, stop_churn;
	pthread_t poster_th, churn_th;
	atomic_long pub_retries;
	int64_t t0_ms, load_end_ms;
	/* the churn's record (its thread's own until churn_stop joins it) */
	struct event ev[EVENTS_MAX];
	int nev;
	/* the nemesis's record */
	struct fault f[FAULTS_MAX];
	int nf;
	int daemon_restarts, daemon_exits;
	char last_exit[256];
};

extern struct chaos C;

int64_t now_ms(void);
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* load.c */
int load_setup(char *err, size_t errlen);
void load_start(void);
void load_stop_posting(void);
/* The churners back to joined and allowed, their last changes done. */
void churn_stop(void);
void load_stop(void);
void load_free(void);
/* Owed frames not yet surfaced by the steady members (all of them once
 * every post is in). */
long load_missing(void);

/* nemesis.c */
int nemesis_run(int seconds);
/* Every fault healed, the daemon running. */
void nemesis_heal_all(void);
/* A supervisor that exited on its own is started again, as
 * Restart=on-failure would. */
void daemon_keep_alive(void);
int daemon_start(void);

/* check.c: whether member i is owed post n: an acknowledged post, and for
 * a churner one its final membership and ACL owe it (after its last
 * join and its last restored ACL). */
bool owed(int i, int n);
/* check.c: the verdict, printed and written to C.out; 0 when nothing was
 * lost and nothing unauthorized surfaced. */
int check_report(void);

#endif
