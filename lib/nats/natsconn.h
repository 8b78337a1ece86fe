/*
 * Opening a broker connection under a user credential: the JWT and the
 * nonce signature come from callbacks, so the seed is only ever handled by
 * our own nkeys code (in the daemon, by the supervisor over IPC).
 */
#ifndef COTAL_NATSCONN_H
#define COTAL_NATSCONN_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/creds/creds.h"

#define CONNECT_TRIES 3 /* an auth refusal is retried: see natsconn.c */

struct conn_opts {
	const char *url;
	const char *name;     /* connection name shown in CONNZ */
	int timeout_ms;       /* connect timeout, default 5000 */
	int max_reconnect;    /* -1 forever, 0 none (default) */
	natsErrHandler on_error; /* asynchronous errors (permission violations) */
	void *on_error_arg;
	/* The connection dropped / closed for good (NULL: not watched). */
	natsConnectionHandler on_disconnected;
	natsConnectionHandler on_closed;
	natsConnectionHandler on_reconnected;
	void *on_conn_arg;
	/* Client pings (0: the library's default): a broker that stops
	 * answering without closing the socket is noticed after about
	 * ping_interval_ms * max_pings_out. */
	int ping_interval_ms;
	int max_pings_out;
	int reconnect_wait_ms; /* 0: the library's default (2 s) */
	/* Refuse a publish while the connection reconnects, instead of
	 * queueing it to be sent once the broker is back (nats.c's reconnect
	 * buffer, 8 MB by default): for a caller that must never have a
	 * message sent after it stopped waiting for it. A refused publish
	 * fails with NATS_INSUFFICIENT_BUFFER. */
	bool no_reconnect_buffer;
	/* TLS demanded (conn_tls_options): the name the broker's certificate
	 * must carry (url may be an IP literal) and the CA certificates, PEM
	 * text. NULL tls_host: plaintext. */
	const char *tls_host;
	const char *tls_ca_pem;
};

/*
 * Client pings of the daemon's own connections (the supervisor's resident
 * one and every worker's): a broker that stops answering without closing
 * the socket (a partition, a host gone) counts as disconnected after about
 * 4-6 s, and the connection fails over to another listed server. nats.c's
 * default (2 minutes, 2 out) left a worker on a cut-off node for minutes
 * (issue 32's chaos run: a copy stall as long as the partition).
 */
#define CONN_PING_MS 2000
#define CONN_PINGS_OUT 2

/*
 * How long a connection that lost its broker waits before each pass over
 * its servers (nats.c's custom reconnect delay; attempts counts the
 * passes): CONN_RECONNECT_QUICK passes CONN_RECONNECT_QUICK_MS apart (the
 * first 5 s), then CONN_RECONNECT_MS, each with up to a tenth more of
 * jitter. A broker back within 5 s is met within a quarter of a second
 * (issue 42, "the broker back means copying back"); a longer outage is
 * tried once a second, the pace the supervisor's signing budget was made
 * for (a nonce is signed only when a server answers: a broker that answers
 * and refuses for 5 s costs at most 20 signatures, the budget's burst and
 * what those seconds earn, and a few refused).
 */
#define CONN_RECONNECT_QUICK 20
#define CONN_RECONNECT_QUICK_MS 250
#define CONN_RECONNECT_MS 1000
int64_t conn_reconnect_delay(natsConnection *nc, int attempts, void *closure);

/*
 * Connect with the credential c (kept alive by the caller for as long as the
 * connection lives: the callbacks read it on every reconnect). The inbox
 * prefix is the credential's own (lib/wire/tokens.h inbox_prefix).
 * 0 on success, -1 with err holding the broker's or library's words, -2
 * when TLS was demanded and refused (conn_tls_refusal's words in err): a
 * broker that does not offer TLS, or one whose certificate does not verify.
 */
int conn_open(const struct conn_opts *o, const struct creds *c,
	      natsConnection **out, char *err, size_t errlen);

/*
 * The brokers a connection may use: url is one nats:// URL or a
 * comma-separated list of them (every node of a cluster). The connection
 * tries them in the listed order and fails over across them, and only them:
 * the servers a cluster advertises are ignored, so a confined worker never
 * dials a port its Landlock rules do not allow. At most CONN_SERVERS_MAX.
 */
#define CONN_SERVERS_MAX 8
natsStatus conn_servers(natsOptions *opts, const char *url);

/* How many times nc reconnected (nats.c's statistics): a change means the
 * connection failed over, and what a lost server held for it (a watch's
 * consumer, deliveries in flight) may be gone. 0 when unknown. */
uint64_t conn_reconnects(natsConnection *nc);
/*
 * Send what is buffered now, before waiting on its answer. libnats 3.4.1's
 * flusher thread holds every buffered write back for a millisecond to
 * gather more (conn.c _flusher), so a request left to it waits that long
 * before it leaves (issue 18: up to 1 ms per hop). A PING goes out with the
 * buffer and its PONG is awaited, which the caller's own wait hides.
 */
void conn_push(natsConnection *nc);

/*
 * The next message of sub within wait_ms (NextMsg's answers), for a caller
 * that expects `expected` more on their way (the PubAcks of a batch, a
 * pull request's deliveries). libnats wakes a thread waiting on a
 * subscription for each message that finds its queue empty: a futex wake
 * and two switches per message when the worker keeps up with the broker.
 * With GATHER_MIN or more expected and none queued, it naps instead, about
 * as long as GATHER_EACH_US × expected (at most GATHER_NAP_MAX_US), and
 * takes what arrived meanwhile one after the other; after GATHER_POLL_MS of
 * naps, or with fewer expected, it waits as NextMsg does.
 */
#define GATHER_MIN 32
#define GATHER_EACH_US 4
#define GATHER_NAP_MAX_US 1000
#define GATHER_POLL_MS 20
natsStatus conn_next_gather(natsSubscription *sub, natsMsg **m, int64_t wait_ms, int expected);

/* A fresh unique subject token of [A-Za-z0-9] (nats.c's inbox NUID), for
 * reply subjects and consumer names under the credential's own prefix.
 * 0, or -1 out of memory. */
int conn_unique_token(char *out, size_t len);

/*
 * The broker's last permissions violation on this process's connections,
 * in its words (it names the subject). The owner's asynchronous error
 * handler notes it; a caller whose request went unanswered asks for it,
 * since a publish the broker refused is answered by nobody. Process-wide:
 * a worker has one delivery connection. Any thread.
 */
void conn_violation_note(const char *text);
/* Was one noted whose text contains needle (any when NULL)? Its text into
 * buf (when given). */
bool conn_violation(const char *needle, char *buf, size_t len);

/*
 * Destroy a subscription that may still be receiving (an inbox several
 * servers answer, a pull or a watch the broker feeds). nats.c 3.4.1
 * (Debian 12's) hands a message to a subscription it looked up after
 * letting the lookup's lock go, and its read loop crashes on one destroyed
 * meanwhile (nats.c issue 637, fixed after 3.5.0): unsubscribed first, then
 * a flush of nc (up to flush_ms: the read loop has handled everything the
 * broker sent before its PONG, the UNSUB's last message among it), then
 * destroyed. NULL: nothing.
 */
void conn_sub_close(natsConnection *nc, natsSubscription *sub, int flush_ms);
#define CONN_SUB_FLUSH_MS 2000

/* The text of a nats.c failure: status text plus nats_GetLastError. */
void conn_strerror(natsStatus s, char *buf, size_t len);
/* "<what>: <conn_strerror> (JetStream error <jerr>)" into err. */
void conn_jserror(const char *what, natsStatus s, jsErrCode jerr, char *err, size_t errlen);

/*
 * Does the broker behind nc run message schedules (nats-server 2.12 and
 * later)? nats.c 3.4.1 keeps the server INFO's version to itself, so the
 * JetStream API level stands for it [decision]: $JS.API.INFO answers with
 * api.level 2 from 2.12 on, 1 on 2.11, and none before. 1 yes, 0 no, -1
 * with err when JetStream did not answer.
 */
int conn_broker_schedules(natsConnection *nc, int timeout_ms, char *err, size_t errlen);

/*
 * Demand TLS on opts: secure, the certificate must name tls_host and chain
 * to ca_pem (from memory: a confined worker opens no file). nats.c then
 * refuses a broker whose greeting (INFO) offers no TLS before it sends
 * anything (NATS_SECURE_CONNECTION_WANTED): never a plaintext fallback.
 */
natsStatus conn_tls_options(natsOptions *opts, const char *tls_host, const char *ca_pem);
/* Is s a refusal of demanded TLS? Then true, its words into buf. */
bool conn_tls_refusal(natsStatus s, const char *url, const char *tls_host, char *buf,
		      size_t len);

#endif
