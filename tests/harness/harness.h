/*
 * The end-to-end test harness: a real nats-server in operator (JWT) mode on
 * a free loopback port in a temporary directory, set up with the `cotal`
 * CLI exactly as an operator would, and helpers to act as its principals.
 *
 * Every broker the harness starts dies with the test: it is killed at exit,
 * on a fatal signal, and by the kernel (PR_SET_PDEATHSIG) if the test is
 * killed outright. The temporary directory is removed at exit unless
 * COTAL_TEST_KEEP is set.
 *
 * One header for the test programs; the code is in a file per topic, named
 * at each section below (run.c, brokers.c, spawn.c, mesh.c, cluster.c,
 * agents.c, rows.c, daemon.c).
 */
#ifndef COTAL_HARNESS_H
#define COTAL_HARNESS_H

#include <jansson.h>
#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "lib/creds/creds.h"
#include "lib/nats/pull.h"

#define H_PATH_MAX 1024
#define H_DIR_MAX 512 /* the temporary root: room left for paths under it */
#define H_OUT_MAX (64 * 1024)
#define H_VIOLATIONS_MAX 32
#define H_SUBJECT_MAX 512

#define H_NODES_MAX 5

/* One broker of a cluster mesh (h_cluster_up). */
struct node {
	char conf[H_PATH_MAX];
	char url[64];
	int port, route_port;
	pid_t pid;
	int64_t started_ms; /* mono_ms() when its broker last came up */
	/* On a test network (h_cluster_net_up): the node's own network
	 * namespace and address; "" for a node on loopback. */
	char netns[32];
	char addr[32];
};

struct mesh {
	char dir[H_DIR_MAX];    /* temporary root, holds .cotal/ */
	char home[H_PATH_MAX];  /* COTAL_HOME for the mesh registry */
	char space[128];
	char token[128];        /* space token */
	char conf[H_PATH_MAX];
	char url[H_NODES_MAX * 64]; /* a cluster's: every node's URL, comma-separated */
	char nats_bin[H_PATH_MAX];
	int port;
	pid_t broker;
	/* A cluster (h_cluster_up): its nodes; conf, port and broker above are
	 * unused then. */
	int nnodes;
	struct node nodes[H_NODES_MAX];
	/* The network namespace h_daemon_start runs the daemon in ("": the
	 * test's own), a host of the test network (h_net_up). */
	char daemon_netns[32];
};

/* Where a connection's asynchronous errors land. Sinks live in a static
 * pool: nats.c may deliver a queued error after the connection is
 * destroyed, and a closed sink then just drops it. */
struct sink {
	pthread_mutex_t mu;
	bool live;
	char violations[H_VIOLATIONS_MAX][512];
	int nviolations;
};

/* A principal's connection, recording the permission violations the broker
 * reports asynchronously. */
struct conn {
	natsConnection *nc;
	jsCtx *js;
	struct creds creds;
	struct sink *sink;
};

struct agent {
	char name[64];
	char principal[128];
	char owner[32];
	char actor[64];
	char uid[40];
	char creds[H_PATH_MAX];
};

/* An agent and its own connection (h_member_add). */
struct member {
	struct agent a;
	struct conn c;
};

/* An agent with its own connection and rail client (h_peer_up). */
struct ctl_client;
struct h_peer {
	struct agent a;
	struct conn c;
	struct ctl_client *cl;
};

/* The daemon under test. */
struct daemon {
	pid_t pid;
	char log[H_PATH_MAX * 2];
	char status[H_PATH_MAX * 2];
};

/* What a test program's group setup brought up, for its group teardown
 * (h_teardown); a NULL member is skipped. */
struct ctl_client;
struct h_fixture {
	struct mesh *mesh;
	struct daemon *daemon;
	struct ctl_client **client; /* a rail client (h_connect_manager's) */
	struct conn *conns[4];      /* closed in this order, up to the first NULL */
};

/* TLS material made with the openssl command in <dir>/tls-<name>/ (h_tls_make). */
struct tls_files {
	char dir[H_PATH_MAX];
	char ca[H_PATH_MAX + 16];
	char cert[H_PATH_MAX + 16];
	char key[H_PATH_MAX + 16];
};

/* ---- a test program's run (run.c) ---- */

/* The brokers the e2e suites run on. */
enum h_broker {
	H_BROKER_210 = 0,  /* the default: Debian 13's 2.10.27 */
	H_BROKER_29,       /* Debian 12's own 2.9.10 */
	H_BROKER_214,      /* the npm registry's 2.14 */
};
/* Which broker: COTAL_TEST_NATS_SERVER (_29, _214 for the others), else the
 * one `make deps` unpacked, else nats-server on PATH. */
void h_use_broker(enum h_broker b);
/* The broker a test program's arguments name: --broker-29, --broker-214,
 * or none (2.10). */
enum h_broker h_broker_arg(int argc, char **argv);

/*
 * A test program's exit status from its cmocka run: `return h_done(failed);`
 * at the end of main. It lets go of nats.c. After a failed test it ends the
 * process at once (_exit, brokers killed, test directories kept and named):
 * cmocka left that test by a long jump, so what the test held is still
 * allocated, and LeakSanitizer's exit report would list the test's own
 * handles instead of a leak of the code under test. A run that passes ends
 * normally, leak report and all.
 */
int h_done(int failed);

/* Sleep ms milliseconds, on through signals. */
void h_nap(int ms);

/* A process the test did not start itself (a daemon `cotal up` launched, a
 * broker it started): SIGKILLed when the test program ends, however. */
void h_track(pid_t pid);

/* ---- one broker (brokers.c) ---- */

/* The version of the broker in use, as major * 100 + minor (2.10: 210), from
 * its --version; 0 when it cannot be read. */
int h_broker_version(void);
/* A loopback TCP port nobody listens on now, or -1. */
int h_free_port(void);
int h_broker_start(struct mesh *m);
int h_broker_stop(struct mesh *m);   /* SIGTERM, wait */
int h_broker_kill(struct mesh *m);   /* SIGKILL, wait */
int h_broker_restart(struct mesh *m);

/* In t, a CA (ca.pem) and a server certificate it signs (server.pem,
 * server.key) for sans ("DNS:localhost,IP:127.0.0.1"). 0, or -1. */
int h_tls_make(struct mesh *m, const char *name, const char *sans, struct tls_files *t);
/* Restart the broker with the config `cotal mesh init` wrote plus, unless
 * t is NULL, a tls {} block serving t's certificate (TLS required) and the
 * lines extra (when not NULL). */
int h_broker_tls(struct mesh *m, const struct tls_files *t, const char *extra);

/* ---- meshes and their spaces (mesh.c) ---- */

/* Make a dev mesh for one space, start its broker and provision the space
 * (provision=false leaves that to the test). 0 on success. The broker
 * config is the one `cotal mesh init` writes for the broker in use
 * (COTAL_TEST_SYNC_INTERVAL=default: without sync_interval: always). With
 * COTAL_TEST_GRANTS=FILE the daemon's delivery and $SYS credentials are
 * minted with the grants FILE lists (`cotal creds mint --grants`). */
int h_mesh_up(struct mesh *m, const char *space, bool provision);
/* A broker config's `key: value` (quotes dropped) into out; false when the
 * file has no such line. */
bool h_conf_value(const char *conf, const char *key, char *out, size_t outlen);
void h_mesh_down(struct mesh *m);
/* The mesh m seen as another of its spaces (same broker and root). */
void h_space_view(const struct mesh *m, const char *space, struct mesh *out);
/* Set field of the space's mesh registry record to value (taken), or
 * remove it (value NULL). 0 or -1. */
int h_registry_set(struct mesh *m, const char *field, json_t *value);
/* `cotal creds mint --profile P` into <dir>/<file>; path returned in out. */
int h_mint(struct mesh *m, const char *profile, const char *file, const char *extra1,
	   const char *extra2, char *out, size_t outlen);
/* A user of m's space account with hand-picked grants (pub_allow,
 * sub_allow: JSON arrays, NULL for none; own_inbox: its own reply inbox
 * added to sub_allow), signed by the space's dev signing key (the CLI's dev
 * signer) and written as a private creds file <dir>/<file>; path returned.
 * 0, or -1 having said why on stderr. */
int h_mint_raw(struct mesh *m, const char *file, json_t *pub_allow, json_t *sub_allow,
	       bool own_inbox, char *path, size_t len);
/* A group teardown (cmocka's): *state is the struct h_fixture the group
 * setup set; its daemon killed, its rail client freed, its connections
 * closed, its mesh down. */
int h_teardown(void **state);

/* ---- clusters (cluster.c) ---- */

/* A dev mesh on a cluster of n nodes (`cotal mesh init --cluster n`), every
 * node started, and the space provisioned with `replicas` replicas (0: not
 * provisioned). m->url lists every node. 0 on success. */
int h_cluster_up(struct mesh *m, const char *space, int n, int replicas);
/* Free an environment built for a child: each string, then the array. */
void h_env_free(char **env);
/* Read fd to its end; the first outlen - 1 bytes into out (NUL-ended; out
 * may be NULL), the rest read and dropped. The bytes kept. */
size_t h_read_to_end(int fd, char *out, size_t outlen);
int h_node_start(struct mesh *m, int i);  /* node i (0-based) */
int h_node_kill(struct mesh *m, int i);   /* SIGKILL, wait */
int h_node_stop(struct mesh *m, int i);   /* SIGTERM, wait */
/* The node that leads the JetStream meta group, as the nodes' logs last
 * said ("Self is new JetStream cluster metadata leader" on the leader, "new
 * metadata leader: <name>/..." on the others, by their timestamps); -1
 * when no log names one. */
int h_meta_leader(struct mesh *m);
/* Wait up to ms for every replica of stream to be current again (a node back
 * from a kill) and heard by its leader since its broker started, read on c;
 * a node whose broker has run 10 s unheard is restarted, at most 4 times
 * (nats-server 2.10's mute broker, as in h_cluster_up; a line on stdout
 * says so, with what that broker logged). 0, or -1 with what was last seen
 * in err. */
int h_stream_current(struct conn *c, struct mesh *m, const char *stream, int ms, char *err,
		     size_t errlen);

/* ---- a test network of network namespaces (netns.c, issue 32) ---- */

#define H_NET_HOSTS_MAX 8
/* One host: a network namespace, joined to the bridge by a veth pair
 * (veth: the end on the bridge; eth0 inside), with its own address. */
struct h_host {
	char netns[32];
	char veth[16];
	char addr[32];
};
/* A bridge in the test's namespace (its address: gateway, where the test's
 * own connections come from) and hosts on it, subnet.<10 + i>. */
struct h_net {
	char bridge[16];
	char subnet[16];
	char gateway[32];
	int nhosts;
	struct h_host host[H_NET_HOSTS_MAX];
	bool up;
};
/* Whether a test network can be made here (root, ip, nft); why not. */
bool h_net_possible(char *why, size_t whylen);
/* The bridge and hosts hosts (each answering a ping); torn down at exit.
 * 0, or -1 having said why on stderr. */
int h_net_up(struct h_net *n, int hosts);
void h_net_down(struct h_net *n);
/* In host's namespace, drop every packet to or from peer (an address): one
 * side of a cut; cut both hosts for a symmetric partition. */
int h_net_cut(struct h_net *n, int host, const char *peer);
/* In host's namespace, drop percent % of its packets, both ways. */
int h_net_loss(struct h_net *n, int host, int percent);
/* host's link delayed about delay_ms (netem; where the kernel has no netem,
 * a token bucket whose queue is delay_ms long); how: what was applied. */
int h_net_slow(struct h_net *n, int host, int delay_ms, char *how, size_t howlen);
/* Whether this kernel has tc's netem. */
bool h_net_has_netem(void);
/* Every cut, loss and shaping of host undone. */
int h_net_heal(struct h_net *n, int host);
/* A dev mesh on a cluster of n nodes, node i on test host i, the daemon's
 * namespace (m->daemon_netns) host n: as h_cluster_up, with every address
 * of the configs and the mesh record the nodes' own. net needs n + 1
 * hosts. */
int h_cluster_net_up(struct mesh *m, struct h_net *net, const char *space, int n, int replicas);

/* ---- the cotal CLI (spawn.c) ---- */

/* Run the cotal CLI (root, COTAL_HOME set); stdout+stderr into out.
 * Returns its exit status, or -1 if it could not run. argv ends with NULL. */
int h_cotal(struct mesh *m, char *out, size_t outlen, ...) __attribute__((sentinel));
/* The same with the arguments in a NULL-ended array (up to 120). */
int h_cotal_argv(struct mesh *m, char *out, size_t outlen, char *const args[]);
/* The same in the background (a foreground `cotal up`), stdout and stderr
 * appended to outpath; killed with the test. Its pid. */
pid_t h_cotal_spawn(struct mesh *m, const char *outpath, ...) __attribute__((sentinel));

/* ---- agents, their connections and their dlv_ durables (agents.c) ---- */

/* `cotal agent add NAME --allow CSV`, parsed. */
int h_agent_add(struct mesh *m, const char *name, const char *allow, struct agent *a);

/* Connect with a creds file. 0 on success; on refusal err has the words. */
int h_connect(struct mesh *m, const char *creds_path, struct conn *c, char *err,
	      size_t errlen);
/* The same on url (NULL: m->url), reconnecting and failing over across the
 * listed servers for as long as it lives (cluster tests). */
int h_connect_url(struct mesh *m, const char *url, const char *creds_path, struct conn *c,
		  char *err, size_t errlen);
/* A space's standing credential (delivery, provisioner, supervisor, ...). */
int h_connect_profile(struct mesh *m, const char *profile, struct conn *c, char *err,
		      size_t errlen);
void h_close(struct conn *c);
/* Wait up to ms for a permission violation whose text contains needle. */
bool h_violation(struct conn *c, const char *needle, int ms);
/* Wait up to ms for c to be closed (a kicked connection: the harness's do
 * not reconnect); whether it is. */
bool h_wait_closed(struct conn *c, int ms);
/* `cotal agent add NAME --allow CSV` and its connection: on url
 * (reconnecting across its servers, h_connect_url) or, url NULL, on m's
 * (h_connect). 0, or -1 with the words in err. */
int h_member_add(struct mesh *m, const char *name, const char *allow, const char *url,
		 struct member *mb, char *err, size_t errlen);
/* h_member_add allowed channel, and (join) a member of it from now on,
 * the provisioner prov writing its row; a failure fails the test. */
void h_member_up(struct mesh *m, struct conn *prov, struct member *mb, const char *name,
		 const char *channel, bool join);
/* Debian's prometheus (bin) scraping 127.0.0.1:target every second (and
 * evaluating the rule file rules every second, unless NULL), its config
 * dir/prometheus.yml, its data under dir, its output appended to
 * dir/prometheus.log, listening on a free loopback port (into *port),
 * tracked for the test's end; 0 once /-/ready answers (30 s), else -1
 * having said so. */
int h_prometheus_start(const char *bin, const char *dir, int target, const char *rules,
		       int *port);
/* Connect as the space's manager: the supervisor credential, and in *cl a
 * rail client calling as its principal local.<user key>, "manager". 0, or
 * -1 with the words in err. */
int h_connect_manager(struct mesh *m, struct conn *c, struct ctl_client **cl, char *err,
		      size_t errlen);

/* Add agent name (read ACL allow, as h_agent_add), connect it and give it
 * a rail client calling as itself. 0, or -1 with the words in err. */
int h_peer_up(struct mesh *m, const char *name, const char *allow, struct h_peer *p, char *err,
	      size_t errlen);
void h_peer_down(struct h_peer *p);

/* ---- one hostile agent (flood.c) ---- */

/* A flood of listMemberships requests on the agent's own ctl.delivery
 * subject, publish-only, as fast as its client allows, from a thread
 * (issue 28); the answers it gets are counted. */
struct h_flood {
	struct h_peer *p;
	size_t pad;                /* bytes of padding in each body */
	char subject[H_SUBJECT_MAX];
	natsSubscription *replies;
	pthread_t th;
	bool running;
	_Atomic bool stop;
	_Atomic long sent, failed, refused, answered;
	char first_refusal[256];   /* the first "retry" refusal it was answered */
	pthread_mutex_t mu;
};
int h_flood_start(struct mesh *m, struct h_peer *p, size_t pad, struct h_flood *fl, char *err,
		  size_t errlen);
/* Stop it and wait for its last publishes to be flushed. */
void h_flood_stop(struct h_flood *fl);

/* Post a CotalMessage as agent a on channel (JetStream publish; CHAT seq
 * returned). id may be "" (no dedup key). */
int h_post(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	   const char *id, const char *text, uint64_t *seq);
/* The same with the post's id as its Nats-Msg-Id: published again after a
 * lost acknowledgement, CHAT keeps it once (cluster tests). */
int h_post_dedup(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
		 const char *id, const char *text, uint64_t *seq);
/* Fetch up to one message from the agent's dlv_ durable (bind only) within
 * ms; *msg is NULL on timeout. Acks it when ack. */
int h_dlv_fetch(struct conn *c, struct mesh *m, const struct agent *a, int ms, bool ack,
		natsMsg **msg, char *err, size_t errlen);
/* Fetch every frame waiting on the agent's dlv_ durable: wait up to ms for
 * the first, then until quiet_ms pass with nothing new. Frames are acked
 * and returned as parsed JSON bodies in an array (caller decrefs); the
 * header check result in *headers_ok. */
json_t *h_dlv_drain(struct conn *c, struct mesh *m, const struct agent *a, int ms, int quiet_ms,
		    bool *headers_ok, char *err, size_t errlen);
/* The same, waiting up to ms for want frames before the quiet_ms of
 * nothing new end it: for a test that knows how many are due (the daemon
 * may pause between two, e.g. a pull request a 2.9 broker let expire
 * without a word). */
json_t *h_dlv_drain_n(struct conn *c, struct mesh *m, const struct agent *a, size_t want, int ms,
		      int quiet_ms, bool *headers_ok, char *err, size_t errlen);
/* Bind pl to the agent's dlv_ durable on DLV_<s> through nc, whose
 * credential is jwt (its reply inbox). 0, or -1 with err. */
int h_dlv_attach(natsConnection *nc, const char *jwt, struct mesh *m, const struct agent *a,
		 struct puller *pl, char *err, size_t errlen);
/* Surface a bound dlv_ durable until *stop, as a live agent does: every
 * frame handed to on_frame, then acked; a failed fetch counted in *errors
 * and tried again 100 ms later. Through lib/nats/pull.c, not libnats's
 * fetch: after a broker restart libnats 3.4.1's _fetch overran the array
 * it sized (ASan, STYLE.md pitfalls). */
void h_dlv_surface(struct puller *pl, atomic_bool *stop, void (*on_frame)(void *arg, natsMsg *m),
		   void *arg, atomic_int *errors);
/* A frame's text (its message's first part), or NULL. */
const char *h_frame_text(json_t *frame);
/* The texts of frames, in order, as one string "a,b,c" ("?" for a frame
 * without one). */
void h_frame_texts(json_t *frames, char *out, size_t len);
/* h_dlv_drain, the frames' texts into out (h_frame_texts); -1 with err when
 * the drain failed or a frame came without the delivery header. */
int h_dlv_texts(struct conn *c, struct mesh *m, const struct agent *a, int ms, int quiet_ms,
		char *out, size_t len, char *err, size_t errlen);
/* The same, waiting for want frames first (h_dlv_drain_n). */
int h_dlv_texts_n(struct conn *c, struct mesh *m, const struct agent *a, size_t want, int ms,
		  int quiet_ms, char *out, size_t len, char *err, size_t errlen);
/* How many texts "a,b,c" names (0 for ""). */
size_t h_texts_count(const char *texts);

/* ---- the data path's rows and streams (rows.c, issue 4) ---- */

#define H_SPACE_CHANNEL_MEMBERS 1000
/*
 * A space at scale (issue 39), written without waiting for each row's
 * acknowledgement: live lifecycles local.a<i>.<i in 26 digits>, each a
 * read-ACL row allowing channel ch<i / H_SPACE_CHANNEL_MEMBERS> and that
 * channel's membership row (the first big of them also of channel "big"),
 * and tombs retired lifecycles local.t<i>.<i in 26 digits> from tombs_from
 * on (read-ACL tombstones). 0, or -1 with err (a row refused: a bucket
 * full?).
 */
int h_space_rows(struct conn *c, struct mesh *m, int live, int tombs, int tombs_from, int big,
		 char *err, size_t errlen);

/* CHAT_<s>'s last sequence (the joinCursor of a join made now). */
int h_chat_last_seq(struct conn *c, struct mesh *m, uint64_t *seq);
/* The same of stream <kind>_<s> ("INBOX", "DLV"). */
int h_stream_last_seq(struct conn *c, struct mesh *m, const char *kind, uint64_t *seq);
/* Write the membership row <channel>/<o>.<a>.<uid> of agent a as the
 * registry would: leave 0 = no leaveCursor. */
int h_member_put(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
		 uint64_t join, uint64_t leave, uint64_t generation, char *err, size_t errlen);
/* Agent a a member of channel from now on: its row with CHAT_<s>'s last
 * sequence as joinCursor, no leaveCursor. */
int h_member_join(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
		  uint64_t generation, char *err, size_t errlen);
/* Set agent a's read-ACL row (allow: JSON array text, e.g. "[\"general\"]";
 * retired: the tombstone). */
int h_acl_put(struct conn *c, struct mesh *m, const struct agent *a, const char *allow,
	      bool retired, char *err, size_t errlen);
/* Messages held by a stream now (state.msgs), or -1. */
int64_t h_stream_msgs(struct conn *c, const char *stream);
/* The messages stream holds on one subject, or -1 when it cannot be read. */
int64_t h_stream_subject_msgs(struct conn *c, const char *stream, const char *subject);
/* The daemon's `reader` consumer on INBOX_<s> as the broker has it now
 * (the caller destroys it), or NULL. */
jsConsumerInfo *h_reader_info(struct conn *c, struct mesh *m);

/* KV helpers on bucket "cotal_<name>_<s>". */
int h_kv_put(struct conn *c, struct mesh *m, const char *name, const char *key,
	     const char *value, char *err, size_t errlen);
/* A delete marker on key (the manager's delete of a row). */
int h_kv_del(struct conn *c, struct mesh *m, const char *name, const char *key, char *err,
	     size_t errlen);
/* Get the value (malloc'd) or NULL with err ("not found" when absent). */
char *h_kv_get(struct conn *c, struct mesh *m, const char *name, const char *key,
	       char *err, size_t errlen);

/* ---- the daemon under test (daemon.c) ---- */

/* The binary h_daemon_start runs: this build's, unless a benchmark set an
 * earlier build's (bench/fanout --before). */
extern const char *h_daemon_bin;
/* Start cotal-deliveryd --space <space> --root <dir> [extra...] (NULL-ended),
 * stdout/stderr into <dir>/daemon.out. */
int h_daemon_start(struct mesh *m, struct daemon *d, ...) __attribute__((sentinel));
/* Run cotal-deliveryd with exactly these arguments (NULL-ended; a delivery
 * host's --spaces ...) in the background, stdout and stderr appended to
 * outpath; killed with the test. Its pid. */
pid_t h_daemon_spawn(struct mesh *m, const char *outpath, ...) __attribute__((sentinel));
/* Wait until the status file shows every worker connected; 0 or -1. */
int h_daemon_wait_connected(struct daemon *d, int ms);
/* Wait up to ms for every worker connected and then for each line of the
 * NULL-ended list in the log: 0, or -1 having said on stderr what is
 * missing and where the log is. */
int h_daemon_ready(struct daemon *d, int ms, ...) __attribute__((sentinel));
/* A dev mesh up for space (h_mesh_up) and prov connected as its
 * provisioner. 0, or -1 having said why. */
int h_mesh_prov_up(struct mesh *m, const char *space, struct conn *prov);
/* h_daemon_start with --metrics on a free loopback port (into *port) and,
 * unless creds is NULL, --creds creds. */
int h_metrics_daemon_start(struct mesh *m, struct daemon *d, const char *creds, int *port);
/* A suite's group setup on a serving daemon: a mesh for space (its space
 * provisioned), the provisioner connected as prov, the daemon started
 * (no arguments beyond --space and --root) and ready (h_daemon_ready, its
 * lines NULL-ended). 0, or -1 having said why on stderr. */
int h_daemon_up(struct mesh *m, const char *space, struct conn *prov, struct daemon *d, int ms,
		...) __attribute__((sentinel));
/* The status file, parsed (NULL when absent). */
json_t *h_daemon_status(struct daemon *d);
/* The pid of a worker role from the status file (0 when down). */
pid_t h_daemon_worker_pid(struct daemon *d, const char *role);
/* A "<field>: N kB" line of /proc/<pid>/<file> (status: VmRSS;
 * smaps_rollup: Pss), 0 when it cannot be read. */
/* Sleep ms, whatever signals come meanwhile. */
void h_sleep_ms(int ms);
/* A process's CPU time so far, utime + stime in clock ticks (0: gone). */
uint64_t h_proc_ticks(pid_t pid);
long h_proc_kb(pid_t pid, const char *file, const char *field);
/* The daemon's memory: the supervisor's and every worker's resident set, kB. */
long h_daemon_rss_kb(struct daemon *d);
/* Restarts of all its workers so far, from the status file. */
long long h_daemon_restarts(struct daemon *d);
/* A worker role's counter from the status file (0 when absent). */
uint64_t h_daemon_counter(struct daemon *d, const char *role, const char *name);
/* Wait up to ms for that counter to reach want (a worker's counters reach
 * the status file once a second): the last value read, -1 while the status
 * file lists no such worker. */
int64_t h_daemon_counter_reaches(struct daemon *d, const char *role, const char *name,
				 int64_t want, int ms);
/* Every worker of the status file (pid, state, restarts, last exit,
 * counters) on stderr, for a test's report. */
void h_daemon_print(struct daemon *d);
/* Wait up to ms for the daemon to exit; its wait status, or -1. */
int h_daemon_wait_exit(struct daemon *d, int ms);
void h_daemon_kill(struct daemon *d);
/* A clean stop: SIGTERM, up to ms for the exit (the lease handed back),
 * SIGKILL after that. Nothing when it is not running. */
void h_daemon_stop(struct daemon *d, int ms);
/* Does the log contain needle (within ms)? */
bool h_log_has(const char *path, const char *needle, int ms);
/* The file at path from byte from on (at most H_OUT_MAX - 1 bytes),
 * NUL-ended, to free; NULL when it cannot be read. */
char *h_file_text(const char *path, long from);
/* Lines of the file at path holding needle (0 when there is no file). */
int h_log_count(const char *path, const char *needle);
/* The last n lines of a log on stderr (each cut at 511 bytes): what a
 * failing assertion shows of the daemon's side. */
void h_log_print_tail(const char *path, int n);
/* The lines of path after its first from bytes that hold needle. */
int h_log_count_after(const char *path, long from, const char *needle);
/*
 * Issue 31: `cotal creds audit creds --profile P --space S` (the observer
 * with the space's account) agrees with what the daemon said of the same
 * credential: the reason of every `✗ delivery: …; not binding` line of
 * said about it (its kind's words or its file) is in the audit's output,
 * which then exits 1 (2: the file itself refused); every `! delivery: …
 * is off` line about it is a `!` line of the audit, which exits 0 when
 * said refused nothing. 0, or -1 with why.
 */
int h_audit_agrees(struct mesh *m, const char *creds, const char *profile, const char *said,
		   char *why, size_t whylen);
/* m's space account key, from its dev-mesh.json ("" when unknown). */
void h_space_account(struct mesh *m, char *out, size_t len);
/* A `cotal admin evict --ledger` file: the batches it records as sent
 * (-1 when it cannot be read) and, into *verified, how many principals
 * they verified gone. */
int h_evict_ledger(const char *path, size_t *verified);
/* ---- systemd's side of sd_notify (notify.c) ---- */

/* A receiving datagram socket at an abstract name, for NOTIFY_SOCKET; name
 * gets "@…". The fd. */
int h_notify_listener(char *name, size_t len);
/* Wait up to ms for a datagram holding the line `line` (exactly, as one of
 * its newline-separated lines). Everything received is appended to seen. */
bool h_datagram_has(int fd, const char *line, int ms, char *seen, size_t seenlen);

/* Run cotal-deliveryd to completion (for refusals): exit status, output. */
int h_daemon_run(struct mesh *m, const char *cwd, char *out, size_t outlen, ...)
    __attribute__((sentinel));

/* ---- HTTP by hand (http.c) ---- */

#define H_HTTP_BODY_MAX (1024 * 1024)
/* A TCP connection to 127.0.0.1:port (reads time out after 10 s), or -1. */
int h_http_dial(int port);
/* Send req as it is, read the answer until the peer closes: its status (0:
 * none), its body in body, its head (status line and headers) in head
 * (NULL: not wanted). */
int h_http_exchange(int port, const char *req, size_t reqlen, char *body, size_t bodylen,
		    char *head, size_t headlen);
/* GET path (with an Accept header when accept is not NULL). */
int h_http_get(int port, const char *path, const char *accept, char *body, size_t bodylen,
	       char *head, size_t headlen);

#endif
