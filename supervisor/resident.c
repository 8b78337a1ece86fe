/*
 * The supervisor's resident broker connection (seed: "After a
 * reachability check at start-up, the daemon watches the broker only
 * through its resident connection's events. It opens no other connection
 * to check the broker."). It carries the lease; its disconnects and
 * reconnects drive the broker watchdog, and client pings make a broker
 * that stops answering without closing the socket count as disconnected a
 * few seconds after it stops.
 *
 * nats.c calls back on its own threads: each callback writes one event
 * byte into a pipe the event loop reads, so every decision is made on the
 * loop.
 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "service/notify.h"

#define RESIDENT_RECONNECT_MS 500
#define RESIDENT_JS_WAIT_MS 3000 /* a lease operation's answer */
#define RESIDENT_START_RETRY_MS 500 /* under a service manager: the first dial, again */

static struct sup *R; /* the callbacks' supervisor (one per process) */

/*
 * Each resident connection's callbacks carry its own token: a connection
 * replaced by one on a renewed credential goes quiet before it is
 * destroyed, so its closing is not taken for the broker's.
 */
struct resident_token {
	_Atomic bool live;
};
static struct resident_token tokens[2];
static int current;

static void
post(void *arg, char ev)
{
	struct resident_token *t = arg;

	if (R != NULL && R->evpipe[1] >= 0 && atomic_load(&t->live))
		(void)!write(R->evpipe[1], &ev, 1);
}

static void
cb_disconnected(natsConnection *nc, void *arg)
{
	(void)nc;
	post(arg, 'D');
}

static void
cb_reconnected(natsConnection *nc, void *arg)
{
	(void)nc;
	post(arg, 'R');
}

static void
cb_closed(natsConnection *nc, void *arg)
{
	(void)nc;
	post(arg, 'C');
}

static void
cb_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg)
{
	const char *text = NULL;

	(void)sub;
	natsConnection_GetLastError(nc, &text);
	/* "An authentication-expiry error is not a broker disconnect" (seed). */
	if (text != NULL && strcasestr(text, "expired") != NULL)
		post(arg, 'X');
	if (err == NATS_NOT_PERMITTED && R != NULL) {
		pthread_mutex_lock(&R->vmu);
		snprintf(R->violation, sizeof(R->violation), "%s", text ? text : "permission denied");
		pthread_mutex_unlock(&R->vmu);
	}
	log_warnx("delivery: broker error on the resident connection: %s (%s)", text ? text : "",
	    natsStatus_GetText(err));
}

bool
resident_denied(const char *subject, char *text, size_t len)
{
	bool hit;

	if (R == NULL)
		return false;
	/* The violation arrives asynchronously, right behind the refused
	 * publish: let it land. */
	natsConnection_FlushTimeout(R->nc, 1000);
	pthread_mutex_lock(&R->vmu);
	hit = R->violation[0] != '\0' && strstr(R->violation, subject) != NULL;
	if (hit && text != NULL)
		snprintf(text, len, "%s", R->violation);
	pthread_mutex_unlock(&R->vmu);
	return hit;
}

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	char evs[64];
	ssize_t n;

	(void)what;
	while ((n = read(fd, evs, sizeof(evs))) > 0)
		for (ssize_t i = 0; i < n; i++)
			shard_on_event(s, evs[i]);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;

	(void)fd, (void)what;
	enum watchdog_verdict v = watchdog_tick(&s->wd, mono_ms(), boot_ms());
	/* An expired credential is not a broker gone: its own backstop
	 * decides (reload.c). */
	if (s->cred_expired)
		return;
	switch (v) {
	case WATCHDOG_OK:
		return;
	case WATCHDOG_GONE:
		log_errx("%s", &WATCHDOG_LINE_GONE[strlen("✗ ")]);
		break;
	case WATCHDOG_BACKSTOP:
		log_errx("%s", &WATCHDOG_LINE_BACKSTOP[strlen("✗ ")]);
		break;
	}
	/* Coupled to the broker: nothing to release on a broker that is gone. */
	s->release_on_exit = false;
	evtimer_del(s->ev_tick);
	sup_stop(s, 1);
}

void
resident_workers_reach(struct sup *s)
{
	const char *cut = NULL;

	for (int i = 0; i < SUP_WORKERS && cut == NULL; i++) {
		const struct sup_worker *w = &s->workers[i];
		if ((w->phase == WP_RUNNING || w->phase == WP_STARTING) && w->have_status &&
		    w->status.state == IPC_STATE_DISCONNECTED)
			cut = w->role;
	}
	bool was = (s->wd.sources & WATCHDOG_WORKERS) != 0;
	if (cut != NULL && !was) {
		watchdog_disconnected(&s->wd, WATCHDOG_WORKERS, mono_ms(), boot_ms());
		log_warnx("delivery: worker %s reaches none of the listed servers (%s): not serving; "
		    "the lease is not renewed (the watchdog allows %lld ms)", cut, s->url,
		    (long long)s->wd.window_ms);
	} else if (cut == NULL && was) {
		watchdog_reconnected(&s->wd, WATCHDOG_WORKERS);
		log_ok("delivery: every worker reaches the broker again");
	}
}

/* A resident connection under the credential the supervisor holds now.
 * 0, -1 with err, or -2 when a demanded TLS was refused (conn_open). */
static int
dial(struct sup *s, struct resident_token *t, natsConnection **nc, jsCtx **js, char *err,
     size_t errlen)
{
	struct conn_opts o = {
		.url = s->url, .name = "cotal-deliveryd supervisor", .timeout_ms = 5000,
		.max_reconnect = -1, .on_error = cb_error, .on_disconnected = cb_disconnected,
		.on_closed = cb_closed, .on_reconnected = cb_reconnected, .on_conn_arg = t,
		.on_error_arg = t, .ping_interval_ms = CONN_PING_MS,
		.max_pings_out = CONN_PINGS_OUT, .reconnect_wait_ms = RESIDENT_RECONNECT_MS,
		/* The mesh's transport (main.c transport()): TLS or plaintext. */
		.tls_host = s->tls_host[0] != '\0' ? s->tls_host : NULL, .tls_ca_pem = s->tls_ca,
	};
	jsOptions jo;
	int rc;

	atomic_store(&t->live, true);
	if ((rc = conn_open(&o, &s->creds.c, nc, err, errlen)) != 0) {
		atomic_store(&t->live, false);
		return rc;
	}
	jsOptions_Init(&jo);
	jo.Wait = RESIDENT_JS_WAIT_MS;
	if (natsConnection_JetStream(js, *nc, &jo) != NATS_OK) {
		snprintf(err, errlen, "cannot make a JetStream context");
		atomic_store(&t->live, false);
		natsConnection_Destroy(*nc);
		*nc = NULL;
		return -1;
	}
	return 0;
}

int
resident_swap(struct sup *s, char *err, size_t errlen)
{
	int next = 1 - current;
	natsConnection *nc = NULL, *old = s->nc;
	jsCtx *js = NULL, *oldjs = s->js;

	if (dial(s, &tokens[next], &nc, &js, err, errlen) != 0)
		return -1;
	atomic_store(&tokens[current].live, false);
	current = next;
	s->nc = nc;
	s->js = js;
	s->stats.connected = true;
	watchdog_reconnected(&s->wd, WATCHDOG_RESIDENT);
	jsCtx_Destroy(oldjs);
	natsConnection_Destroy(old);
	return 0;
}

int
resident_open(struct sup *s, char *err, size_t errlen)
{
	struct timeval tick = { 0, WATCHDOG_TICK_MS * 1000 };
	int64_t window, backstop;
	int rc;

	if (watchdog_config(getenv(WATCHDOG_ENV_WINDOW), getenv(WATCHDOG_ENV_BACKSTOP), &window,
	    &backstop, err, errlen) != 0)
		return -1;
	watchdog_init(&s->wd, window, backstop);
	pthread_mutex_init(&s->vmu, NULL);
	if (pipe2(s->evpipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	R = s;
	s->ev_resident = event_new(s->base, s->evpipe[0], EV_READ | EV_PERSIST, on_event, s);
	event_add(s->ev_resident, NULL);
	/* The reachability check: the first connect must succeed. Under a
	 * service manager a broker not up yet (started beside this unit, or
	 * itself restarting) is dialled again for SERVICE_BROKER_WAIT_MS: the
	 * unit's start limit then counts crashes, not an outage (issue 42). */
	int64_t until = notify_active() ? mono_ms() + SERVICE_BROKER_WAIT_MS : 0;
	bool said = false;
	while ((rc = dial(s, &tokens[current], &s->nc, &s->js, err, errlen)) != 0) {
		if (rc != -1 || mono_ms() >= until)
			return rc; /* -2: demanded TLS refused */
		sigset_t pending;
		if (sigpending(&pending) == 0 && (sigismember(&pending, SIGTERM) == 1 ||
		    sigismember(&pending, SIGINT) == 1)) {
			snprintf(err, errlen, "%s", sigismember(&pending, SIGTERM) == 1 ? "SIGTERM" :
			    "SIGINT");
			return -3;
		}
		if (!said) {
			log_warnx("delivery: broker %s unreachable at start: %s; under the service "
			    "manager it is dialled again every %d ms for %d s before the start fails",
			    s->url, err, RESIDENT_START_RETRY_MS, SERVICE_BROKER_WAIT_MS / 1000);
			notify_sendf("STATUS=waiting up to %d s for the broker %s",
			    SERVICE_BROKER_WAIT_MS / 1000, s->url);
			said = true;
		}
		struct timespec nap = { 0, RESIDENT_START_RETRY_MS * 1000000L };
		nanosleep(&nap, NULL);
	}
	s->stats.connected = true;
	s->ev_tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
	event_add(s->ev_tick, &tick);
	log_ok("delivery: broker %s reachable (resident connection; watchdog window %lld ms, "
	    "backstop %lld ms)", s->url, (long long)window, (long long)backstop);
	return 0;
}

void
resident_close(struct sup *s)
{
	if (s->ev_tick != NULL) {
		event_free(s->ev_tick);
		s->ev_tick = NULL;
	}
	atomic_store(&tokens[current].live, false);
	jsCtx_Destroy(s->js);
	s->js = NULL;
	natsConnection_Destroy(s->nc);
	s->nc = NULL;
	if (s->ev_resident != NULL) {
		event_free(s->ev_resident);
		s->ev_resident = NULL;
	}
	R = NULL;
	for (int i = 0; i < 2; i++)
		if (s->evpipe[i] >= 0) {
			close(s->evpipe[i]);
			s->evpipe[i] = -1;
		}
}
