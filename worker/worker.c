/*
 * The worker runtime (see worker.h). A worker may talk to its supervisor
 * over two inherited sockets and to the broker over one connection; the
 * sandbox takes everything else away before nats.c starts its threads.
 */
#include "worker/worker.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/kvwatch.h"
#include "lib/nats/natsconn.h"
#include "sandbox/sandbox.h"

#define CONNECT_RETRY_MS 1000
/* Allocations up to this come from the heap, never a mapping of their own;
 * freed memory past this at the heap's top goes back to the kernel. */
#define WORKER_MMAP_THRESHOLD (4 * 1024 * 1024)
#define WORKER_TRIM_THRESHOLD (16 * 1024 * 1024)

struct worker W;

#define VIOLATION_LOG_MS 10000
/* Set while we destroy our own connection: its callbacks then say nothing. */
static _Atomic int closing;

/* What the main loop does after a message. */
enum { KEEP_ON, STOP_NOW, REBUILD };

static int dispatch(const struct ipc_msg *m);
static void set_jwt(const struct ipc_msg *m);

/* Wait for one message on fd within ms; fatal on a protocol error. */
static int
recv_within(int fd, uint8_t *buf, struct ipc_msg *m, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char err[256];
	int rc;

	for (;;) {
		rc = poll(&p, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -1; /* timeout */
		rc = ipc_recv(fd, buf, IPC_TO_WORKER, m, err, sizeof(err));
		if (rc < 0 && (errno == EINTR || errno == EAGAIN) && err[0] == '\0')
			continue;
		if (rc < 0)
			fatalx("%s", err[0] ? err : "ipc: receive failed");
		if (rc == 0)
			fatalx("the supervisor closed the channel; exiting");
		return 0;
	}
}

static void
send_status(void)
{
	struct ipc_status st = { .state = atomic_load(&W.state) };

	for (int i = 0; i < IPC_COUNTERS; i++)
		st.counters[i] = atomic_load(&W.counters[i]);
	for (int i = 0; i < IPC_GAUGES; i++)
		st.gauges[i] = atomic_load(&W.gauges[i]);
	for (int i = 0; i <= IPC_LATENCY_BUCKETS; i++)
		st.latency[i] = atomic_load(&W.latency[i]);
	st.latency_sum_us = atomic_load(&W.latency_sum_us);
	if (ipc_send(WORKER_FD_MAIN, IPC_STATUS, &st, sizeof(st)) != 0 && errno != EAGAIN)
		fatal("ipc: send STATUS");
}

bool
worker_serving(void)
{
	return !atomic_load(&W.role_stop);
}

void
worker_count(int i, uint64_t n)
{
	if (i >= 0 && i < IPC_COUNTERS)
		atomic_fetch_add(&W.counters[i], n);
}

void
worker_nap(int ms)
{
	for (; ms > 0 && worker_serving(); ms -= 50) {
		struct timespec ts = { 0, (ms < 50 ? ms : 50) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

bool
worker_wait_open(void)
{
	while (worker_serving() && fence_is_quiesced(&W.fence))
		worker_nap(100);
	return worker_serving();
}

static void *
role_thread(void *arg)
{
	(void)arg;
	W.role->run();
	return NULL;
}

/* Start the role's loop on the connection just opened. */
static void
role_start(void)
{
	if (W.role->run == NULL || W.role_running)
		return;
	atomic_store(&W.role_stop, false);
	if (pthread_create(&W.role_thread, NULL, role_thread, NULL) != 0)
		fatalx("cannot start the %s loop", W.role->name);
	W.role_running = true;
}

/* Ask the loop to return and wait for it: before the connection goes. */
static void
role_stop(void)
{
	/* The role closes its own connections on its way out (the
	 * registry's rail), the caller the worker's next: no loss to
	 * report until the caller says so. */
	atomic_store(&closing, 1);
	if (!W.role_running)
		return;
	atomic_store(&W.role_stop, true);
	pthread_join(W.role_thread, NULL);
	W.role_running = false;
}

static void
set_state(uint32_t s)
{
	atomic_store(&W.state, s);
}

/* nats.c asks for the JWT on every (re)connect. */
static natsStatus
cb_jwt(char **jwt, char **errtxt, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&W.mu);
	*jwt = W.jwt ? strdup(W.jwt) : NULL;
	pthread_mutex_unlock(&W.mu);
	if (*jwt == NULL) {
		*errtxt = strdup("no JWT from the supervisor");
		return NATS_ERR;
	}
	return NATS_OK;
}

/*
 * Send one request on the sign channel and receive its SIGN_REP. Runs on a
 * nats.c thread, so it reports failure instead of exiting. Requests are
 * serialized (W.mu); a reply that arrived after an earlier request timed
 * out is still queued, and is drained before the next request goes out.
 */
static int
sign_roundtrip(uint16_t type, const void *req, size_t len, uint8_t *buf, struct ipc_msg *m)
{
	struct pollfd p = { .fd = WORKER_FD_SIGN, .events = POLLIN };
	char err[256];
	int rc;

	while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
		if (ipc_recv(WORKER_FD_SIGN, buf, IPC_TO_WORKER, m, err, sizeof(err)) != 1)
			return -1;
	if (ipc_send(WORKER_FD_SIGN, type, req, len) != 0)
		return -1;
	for (;;) {
		rc = poll(&p, 1, WORKER_SIGN_TIMEOUT_MS);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -1;
		rc = ipc_recv(WORKER_FD_SIGN, buf, IPC_TO_WORKER, m, err, sizeof(err));
		if (rc < 0 && err[0] == '\0' && (errno == EINTR || errno == EAGAIN))
			continue;
		return rc == 1 && m->type == IPC_SIGN_REP ? 0 : -1;
	}
}

/* A signature from the supervisor, as nats.c wants it back. */
static natsStatus
sign_via_supervisor(uint16_t type, const void *req, size_t len, unsigned char **sig,
		    int *siglen, char **errtxt)
{
	uint8_t buf[IPC_MAX_FRAME];
	struct ipc_msg m;
	int rc;

	pthread_mutex_lock(&W.mu);
	rc = sign_roundtrip(type, req, len, buf, &m);
	pthread_mutex_unlock(&W.mu);
	if (rc != 0) {
		*errtxt = strdup("the supervisor did not sign the nonce");
		return NATS_ERR;
	}
	if (m.len != NKEY_SIG_LEN) {
		*errtxt = strdup("the supervisor refused to sign the nonce");
		return NATS_ERR;
	}
	*sig = malloc(m.len);
	if (*sig == NULL)
		return NATS_NO_MEMORY;
	memcpy(*sig, m.payload, m.len);
	*siglen = (int)m.len;
	return NATS_OK;
}

/* The nonce goes to the supervisor, which alone holds the seed. */
static natsStatus
cb_sign(char **errtxt, unsigned char **sig, int *siglen, const char *nonce, void *arg)
{
	(void)arg;
	return sign_via_supervisor(IPC_SIGN_REQ, nonce, strlen(nonce), sig, siglen, errtxt);
}

natsStatus
worker_sign_sys(enum ipc_sys which, const char *nonce, unsigned char **sig, int *siglen,
		char **errtxt)
{
	uint8_t req[IPC_SIGN_SYS_MAX];
	size_t n = strlen(nonce);

	if (n == 0 || n > IPC_SIGN_REQ_MAX) {
		*errtxt = strdup("the broker's nonce is not of the signed form");
		return NATS_ERR;
	}
	req[0] = (uint8_t)which;
	memcpy(req + 1, nonce, n);
	return sign_via_supervisor(IPC_SIGN_SYS, req, n + 1, sig, siglen, errtxt);
}

int
worker_send(uint16_t type, const void *payload, size_t len)
{
	return ipc_send(WORKER_FD_MAIN, type, payload, len);
}

static void
cb_disconnected(natsConnection *nc, void *arg)
{
	(void)nc, (void)arg;
	set_state(IPC_STATE_DISCONNECTED);
	if (!atomic_load(&closing))
		log_warnx("broker connection lost; reconnecting");
}

static void
cb_reconnected(natsConnection *nc, void *arg)
{
	(void)nc, (void)arg;
	set_state(fence_is_quiesced(&W.fence) ? IPC_STATE_QUIESCED : IPC_STATE_CONNECTED);
	log_ok("broker connection back");
}

/* An extra connection of the worker's (the registry's agents' rail): its
 * loss is said with its name (the broker cuts one that falls behind as a
 * slow consumer), its return too. */
static void
cb_aux_disconnected(natsConnection *nc, void *arg)
{
	(void)nc;
	if (!atomic_load(&closing))
		log_warnx("broker connection \"%s\" lost; reconnecting", (const char *)arg);
}

static void
cb_aux_reconnected(natsConnection *nc, void *arg)
{
	(void)nc;
	log_ok("broker connection \"%s\" back", (const char *)arg);
}

static void
cb_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg)
{
	const char *text = NULL;

	(void)sub, (void)arg;
	natsConnection_GetLastError(nc, &text);
	if (err == NATS_NOT_PERMITTED) {
		/* Counted for `cotal status`, and logged with its subject (the
		 * broker's words) at most once per VIOLATION_LOG_MS. */
		static int64_t last_log;
		static uint64_t quiet;
		bool say;
		worker_count(IPC_COUNTER_VIOLATIONS, 1);
		conn_violation_note(text);
		pthread_mutex_lock(&W.mu);
		say = last_log == 0 || mono_ms() - last_log >= VIOLATION_LOG_MS;
		if (say)
			last_log = mono_ms();
		uint64_t more = say ? quiet : 0;
		quiet = say ? 0 : quiet + 1;
		pthread_mutex_unlock(&W.mu);
		if (say)
			log_warnx("the broker refused this worker: %s (and %llu more since the last "
			    "line); the credential lacks a grant (cotal creds audit)",
			    text ? text : "permission denied", (unsigned long long)more);
		return;
	}
	log_warnx("broker error: %s (%s)", text ? text : "", natsStatus_GetText(err));
}

void
worker_bound(void)
{
	static atomic_bool sent;

	if (atomic_exchange(&sent, true))
		return;
	/* The mirrors' first loads freed what the watches queued (up to the
	 * broker's 32 MiB window each) and what a load's parsing used: give
	 * it back rather than keep it as the worker's resident size. */
	malloc_trim(0);
	if (worker_send(IPC_READY, NULL, 0) != 0)
		fatal("ipc: send READY");
}

natsStatus
worker_tls_options(natsOptions *opts)
{
	if (W.cfg.tls_host[0] == '\0')
		return NATS_OK;
	return conn_tls_options(opts, W.cfg.tls_host, W.tls_ca);
}

/* what: NULL for the main connection, else the extra one's name (a
 * string that outlives the connection). */
static natsStatus
build_options(natsOptions **opts, const char *name, const char *what)
{
	bool main_conn = what == NULL;
	natsStatus s = natsOptions_Create(opts);

	if (s == NATS_OK)
		s = conn_servers(*opts, W.cfg.url);
	if (s == NATS_OK)
		s = natsOptions_SetName(*opts, name);
	if (s == NATS_OK)
		s = natsOptions_SetCustomInboxPrefix(*opts, W.cfg.inbox_prefix);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(*opts, -1);
	if (s == NATS_OK)
		s = natsOptions_SetCustomReconnectDelay(*opts, conn_reconnect_delay, NULL);
	/* A node cut off without a word is left within seconds. */
	if (s == NATS_OK)
		s = natsOptions_SetPingInterval(*opts, CONN_PING_MS);
	if (s == NATS_OK)
		s = natsOptions_SetMaxPingsOut(*opts, CONN_PINGS_OUT);
	if (s == NATS_OK)
		s = natsOptions_SetUserCredentialsCallbacks(*opts, cb_jwt, NULL, cb_sign, NULL);
	if (s == NATS_OK && main_conn)
		s = natsOptions_SetDisconnectedCB(*opts, cb_disconnected, NULL);
	if (s == NATS_OK && main_conn)
		s = natsOptions_SetReconnectedCB(*opts, cb_reconnected, NULL);
	if (s == NATS_OK && !main_conn)
		s = natsOptions_SetDisconnectedCB(*opts, cb_aux_disconnected, (void *)what);
	if (s == NATS_OK && !main_conn)
		s = natsOptions_SetReconnectedCB(*opts, cb_aux_reconnected, (void *)what);
	if (s == NATS_OK)
		s = natsOptions_SetErrorHandler(*opts, cb_error, NULL);
	if (s == NATS_OK)
		s = worker_tls_options(*opts);
	return s;
}

int
worker_connect_aux(const char *what, natsConnection **nc, char *err, size_t errlen)
{
	char name[96], why[256];
	natsOptions *opts = NULL;
	natsStatus s;

	*nc = NULL;
	snprintf(name, sizeof(name), "cotal-deliveryd %s %s", W.cfg.role, what);
	s = build_options(&opts, name, what);
	if (s == NATS_OK)
		s = natsConnection_Connect(nc, opts);
	natsOptions_Destroy(opts);
	if (s != NATS_OK) {
		*nc = NULL;
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "cannot open the %s connection to %s: %s", what, W.cfg.url,
		    why);
		return -1;
	}
	return 0;
}

/*
 * Open the broker connection, retrying while the main channel stays quiet.
 * Returns 0 when connected, 1 when STOP arrived meanwhile.
 */
static int
connect_broker(void)
{
	char name[64], why[512];
	natsOptions *opts = NULL;
	natsStatus s;
	int64_t last_log = 0;

	snprintf(name, sizeof(name), "cotal-deliveryd %s", W.cfg.role);
	if (build_options(&opts, name, NULL) != NATS_OK)
		fatalx("cannot build the connection options");
	for (;;) {
		s = natsConnection_Connect(&W.nc, opts);
		if (s == NATS_OK)
			break;
		W.nc = NULL;
		/* The supervisor counts a worker that reaches no listed server
		 * as the broker gone (its watchdog, the lease). */
		set_state(IPC_STATE_DISCONNECTED);
		send_status();
		if (mono_ms() - last_log > 10000) {
			if (W.cfg.tls_host[0] != '\0' &&
			    conn_tls_refusal(s, W.cfg.url, W.cfg.tls_host, why, sizeof(why))) {
				log_warnx("%s; retrying", why);
			} else {
				conn_strerror(s, why, sizeof(why));
				log_warnx("cannot connect to %s: %s; retrying", W.cfg.url, why);
			}
			last_log = mono_ms();
		}
		/* Keep answering the supervisor while we wait. */
		struct pollfd p = { .fd = WORKER_FD_MAIN, .events = POLLIN };
		if (poll(&p, 1, CONNECT_RETRY_MS) > 0) {
			uint8_t buf[IPC_MAX_FRAME];
			struct ipc_msg m;
			if (recv_within(WORKER_FD_MAIN, buf, &m, 0) == 0 &&
			    dispatch(&m) == STOP_NOW) {
				natsOptions_Destroy(opts);
				return 1;
			}
		}
	}
	natsOptions_Destroy(opts);
	set_state(fence_is_quiesced(&W.fence) ? IPC_STATE_QUIESCED : IPC_STATE_CONNECTED);
	return 0;
}

static void
set_jwt(const struct ipc_msg *m)
{
	char *j = malloc(m->len + 1);

	if (j == NULL)
		fatalx("out of memory");
	memcpy(j, m->payload, m->len);
	j[m->len] = '\0';
	pthread_mutex_lock(&W.mu);
	free(W.jwt);
	W.jwt = j;
	pthread_mutex_unlock(&W.mu);
}

/* One message of the main channel: a switch on the type, as imsg does. */
static int
dispatch(const struct ipc_msg *m)
{
	switch (m->type) {
	case IPC_QUIESCE:
		fence_quiesce(&W.fence);
		set_state(IPC_STATE_QUIESCED);
		if (!fence_wait_drained(&W.fence, WORKER_DRAIN_MS))
			fatalx("effects still in flight %d ms after QUIESCE", WORKER_DRAIN_MS);
		/* QUIESCED says the effects are at the broker: an ack left in
		 * the connection's buffer would land after it. Not waited for
		 * over a connection that is down. */
		if (W.nc != NULL && natsConnection_Status(W.nc) == NATS_CONN_STATUS_CONNECTED)
			(void)natsConnection_FlushTimeout(W.nc, WORKER_QUIESCE_FLUSH_MS);
		if (ipc_send(WORKER_FD_MAIN, IPC_QUIESCED, NULL, 0) != 0)
			fatal("ipc: send QUIESCED");
		return KEEP_ON;
	case IPC_RESUME:
		fence_resume(&W.fence);
		set_state(W.nc != NULL && natsConnection_Status(W.nc) == NATS_CONN_STATUS_CONNECTED ?
		    IPC_STATE_CONNECTED : IPC_STATE_DISCONNECTED);
		return KEEP_ON;
	case IPC_JWT:
		set_jwt(m);
		return KEEP_ON;
	case IPC_RECONNECT:
		return REBUILD;
	case IPC_STOP:
		return STOP_NOW;
	default:
		if (W.role->on_msg != NULL && W.role->on_msg(m))
			return KEEP_ON;
		/* CONFIG arrives once; anything else here is a broken peer. */
		fatalx("ipc: unexpected %s on the main channel", ipc_type_info(m->type)->name);
	}
}

static int
serve(void)
{
	uint8_t buf[IPC_MAX_FRAME];
	struct ipc_msg m;
	int64_t next_status = 0;

	for (;;) {
		int64_t now = mono_ms();
		if (now >= next_status) {
			send_status();
			next_status = now + WORKER_STATUS_EVERY_MS;
		}
		/* A connection the library closed for good (repeated auth
		 * failures) is rebuilt, not mourned (STYLE.md). */
		if (W.nc != NULL && natsConnection_IsClosed(W.nc)) {
			log_warnx("broker connection closed; rebuilding it");
			role_stop();
			natsConnection_Destroy(W.nc);
			atomic_store(&closing, 0);
			W.nc = NULL;
			set_state(IPC_STATE_DISCONNECTED);
			if (connect_broker() != 0)
				return 0;
			role_start();
		}
		if (recv_within(WORKER_FD_MAIN, buf, &m, (int)(next_status - now)) != 0)
			continue;
		switch (dispatch(&m)) {
		case STOP_NOW:
			return 0;
		case REBUILD:
			/* No natsConnection_Reconnect in nats.c: a new credential
			 * means a new connection. */
			role_stop();
			natsConnection_Destroy(W.nc);
			atomic_store(&closing, 0);
			W.nc = NULL;
			set_state(IPC_STATE_DISCONNECTED);
			if (connect_broker() != 0)
				return 0;
			log_ok("reconnected with the renewed credential");
			role_start();
			break;
		}
	}
}

#ifdef COTAL_TEST_HOOKS
/*
 * Test hook (COTAL_TEST_SIGN_FLOOD=N, the fan-out only): a compromised
 * worker asking the supervisor to sign N well-formed nonces before it
 * connects, then dying so that it is respawned. It says how many it got.
 */
static void
sign_flood(void)
{
	const char *v = getenv("COTAL_TEST_SIGN_FLOOD");
	unsigned char *sig = NULL;
	char *why = NULL;
	int n = v != NULL ? atoi(v) : 0, got = 0, siglen;

	if (n <= 0 || strcmp(W.role->name, "fanout") != 0)
		return;
	for (int i = 0; i < n; i++) {
		if (sign_via_supervisor(IPC_SIGN_REQ, "ABCDEFGHIJKLMNO", 15, &sig, &siglen,
		    &why) == NATS_OK)
			got++;
		free(sig);
		free(why);
		sig = NULL, why = NULL;
	}
	fatalx("test: %d of %d nonce signatures granted", got, n);
}

/*
 * Test hook (COTAL_TEST_LOG_FLOOD=N, the fan-out only): a worker that
 * writes N lines at once, then, one log window later, one more.
 */
static void
log_flood(void)
{
	const char *v = getenv("COTAL_TEST_LOG_FLOOD");
	int n = v != NULL ? atoi(v) : 0;

	if (n <= 0 || strcmp(W.role->name, "fanout") != 0)
		return;
	for (int i = 0; i < n; i++)
		log_info("test: log flood line %d", i);
	worker_nap((int)log_limit_window_ms() + 200);
	log_info("test: log flood over");
}
#endif

int
worker_main(const char *role, const struct worker_role *const *roles)
{
	uint8_t buf[IPC_MAX_FRAME];
	struct ipc_msg m;
	struct sandbox_opts so = { 0 };
	char err[512], proc[64];
	enum sandbox_role sr;

	snprintf(proc, sizeof(proc), "delivery %s", role);
	log_init(proc, stderr);
	/*
	 * A message is up to the broker's max_payload (1 MiB by default), and
	 * the library copies each one it reads. Memory a freed message held is
	 * kept for the next instead of going back to the kernel every time: a
	 * fresh page costs a fault on first touch, which made reading a flood
	 * of large requests twice as dear, slow enough for the broker to cut
	 * the connection as a slow consumer. What stays kept is bounded.
	 */
	mallopt(M_MMAP_THRESHOLD, WORKER_MMAP_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, WORKER_TRIM_THRESHOLD);
	/* Stopped by the supervisor over IPC, never by a stray signal. */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, role);

	for (; *roles != NULL; roles++)
		if (strcmp((*roles)->name, role) == 0)
			W.role = *roles;
	if (W.role == NULL)
		fatalx("unknown worker role \"%s\"", role);
	sr = W.role->sandbox;

	pthread_mutex_init(&W.mu, NULL);
	fence_init(&W.fence);
	set_state(IPC_STATE_STARTING);

	if (recv_within(WORKER_FD_MAIN, buf, &m, WORKER_CONFIG_TIMEOUT_MS) != 0 ||
	    m.type != IPC_CONFIG)
		fatalx("ipc: no CONFIG from the supervisor");
	memcpy(&W.cfg, m.payload, sizeof(W.cfg));
	/* Without $JS.FC grants the KV watches run without flow control. */
	kvwatch_flow_control(!(W.cfg.features_off & IPC_OFF_WATCH_FC));
	if (strcmp(W.cfg.role, role) != 0)
		fatalx("ipc: CONFIG for role %s sent to the %s worker", W.cfg.role, role);
	if (recv_within(WORKER_FD_MAIN, buf, &m, WORKER_CONFIG_TIMEOUT_MS) != 0 ||
	    m.type != IPC_JWT)
		fatalx("ipc: no JWT from the supervisor");
	set_jwt(&m);
	/* The CA file cannot be opened once confined: its text comes over IPC. */
	if (W.cfg.tls_host[0] != '\0') {
		if (recv_within(WORKER_FD_MAIN, buf, &m, WORKER_CONFIG_TIMEOUT_MS) != 0 ||
		    m.type != IPC_TLS_CA)
			fatalx("ipc: no TLS_CA from the supervisor (the mesh demands TLS)");
		if ((W.tls_ca = malloc(m.len + 1)) == NULL)
			fatalx("out of memory");
		memcpy(W.tls_ca, m.payload, m.len);
		W.tls_ca[m.len] = '\0';
	}

	/* jansson reads /dev/urandom on first use: before Landlock. */
	json_object_seed(0);
	/* Who our supervisor is, before the drop clears the death signal:
	 * the supervisor may be pid 1 itself (a container's entrypoint). */
	pid_t supervisor = getppid();
	so.role = sr;
	so.uid = W.cfg.uid;
	so.gid = W.cfg.gid;
	so.drop = W.cfg.drop_privs != 0;
	for (int i = 0; i < IPC_SERVERS_MAX && i < SANDBOX_PORTS_MAX; i++)
		so.broker_ports[i] = (uint16_t)W.cfg.broker_ports[i];
	so.seccomp_log = W.cfg.seccomp_log != 0;
	if (sandbox_confine(&so, err, sizeof(err)) != 0)
		fatalx("cannot confine the worker: %s", err);
	/* A credential change clears the parent-death signal: set it again,
	 * and make sure the parent did not die in between. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != supervisor)
		fatalx("the supervisor is gone");

#ifdef COTAL_TEST_HOOKS
	sign_flood();
	log_flood();
#endif
	if (connect_broker() != 0)
		goto out;
	/* READY waits for the role: worker_bound() once its consumers and
	 * watches are bound (issue 14: never "up" while unable to deliver). */
	send_status();
	/* What arrived while we connected (a QUIESCE sent with the
	 * configuration, to a worker started while the lease is re-checked)
	 * is applied before the loop can make an effect. */
	for (struct pollfd p = { .fd = WORKER_FD_MAIN, .events = POLLIN };
	    poll(&p, 1, 0) > 0 && (p.revents & POLLIN);) {
		uint8_t fb[IPC_MAX_FRAME];
		struct ipc_msg fm;
		if (recv_within(WORKER_FD_MAIN, fb, &fm, 0) == 0 && dispatch(&fm) == STOP_NOW)
			goto out;
	}
	role_start();
	serve();
	role_stop();
out:
	atomic_store(&closing, 1);
	natsConnection_Destroy(W.nc);
	W.nc = NULL;
	nats_Close();
	pthread_mutex_lock(&W.mu);
	free(W.jwt);
	W.jwt = NULL;
	pthread_mutex_unlock(&W.mu);
	free(W.tls_ca);
	W.tls_ca = NULL;
	fence_destroy(&W.fence);
	return 0;
}
