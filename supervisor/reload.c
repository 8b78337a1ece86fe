/*
 * The delivery credential's lifetime: reloadCreds on the admin rail, the
 * daemon's own re-read at 75 % of the credential's lifetime, and an
 * expired credential (seed: "An authentication-expiry error is not a
 * broker disconnect..." and the reloadCreds paragraphs).
 *
 * A candidate is the credential file read again. It is adopted only when
 * it is for the same user (identity pin), matches the expected SHA-256
 * when one is given, has not expired, and a throw-away connection under it
 * is accepted by the broker. 250 ms after the reply every worker and the
 * resident connection move onto it; requests the registry reads meanwhile
 * are answered on its new connection.
 *
 * The broker's proof runs on a thread of its own, never in the event loop
 * (its connect may take RELOAD_PROVE_MS; the lease renewal and the
 * watchdog must not wait on it), one proof at a time, and requests are
 * taken at RELOAD_BURST at once, then one every RELOAD_REFILL_MS: a request
 * past that, or one that comes while a proof runs, is answered at once with
 * a refusal that adopts nothing. The lines requests cause are limited
 * (issue 41, findings 3 and 4).
 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"

#define RELOAD_PROVE_MS 5000       /* the throw-away connection's connect */
#define RELOAD_SWAP_MS 250         /* after the reply (seed) */
#define REREAD_PCT 75              /* of the credential's lifetime */
#define REREAD_MIN_MS 1000

#define RELOAD_BURST 4             /* reload requests taken at once */
#define RELOAD_REFILL_MS 1000      /* then one this often */

static const char ERR_NOT_STARTED[] =
	"delivery: the daemon has not finished starting; nothing adopted";

/* The proof in flight (at most one) and what bounds the requests. */
struct reload_proof {
	struct sup *s;
	bool busy;
	pthread_t th;
	int done[2];               /* the thread writes a byte when it is done */
	struct event *ev_done;
	struct sup_creds cand;
	struct conn_opts o;
	int rc;                    /* conn_open's: 0 accepted */
	char err[1024];
	int64_t delay_ms;          /* test hook: a broker slow to answer */
	/* Who waits for it: a request (its worker's process and id) or the
	 * daemon's own re-read. */
	bool for_request;
	struct sup_worker *w;
	pid_t w_pid;
	uint64_t id;
	/* The requests' budget, and their lines. */
	struct budget budget;
	struct log_limit lines;
};

static void
sha256_hex(const char *text, char out[IPC_SHA256_HEX])
{
	unsigned char d[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)text, strlen(text), d);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void
arm(struct event *ev, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

/* When to read the credential file again: at 75 % of what is left. */
static void
arm_reread(struct sup *s)
{
	int64_t left;

	evtimer_del(s->ev_reread);
	if (s->creds.exp == 0)
		return;
	left = s->creds.exp * 1000 - wall_ms();
	if (left <= 0)
		return;
	arm(s->ev_reread, left * REREAD_PCT / 100 > REREAD_MIN_MS ? left * REREAD_PCT / 100 :
	    REREAD_MIN_MS);
	evtimer_del(s->ev_expiry);
	arm(s->ev_expiry, left);
}

/*
 * Read the credential file again and check it: 0 with the candidate, to be
 * proved against the broker (sup_creds_free it), 1 when it is the
 * credential held now, -1 with why.
 */
static int
candidate(struct sup *s, const char *expected, struct sup_creds *c, char *why, size_t whylen)
{
	char err[2048], have[IPC_SHA256_HEX], now[IPC_SHA256_HEX];

	if (sup_creds_load(s->creds.path, NEED_DELIVERY, c, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "reloadCreds: %.400s; nothing adopted", err);
		return -1;
	}
	if (strcmp(c->user_pub, s->creds.user_pub) != 0) {
		snprintf(why, whylen, "reloadCreds: %.200s is for user %.12s…, not this daemon's %.12s… "
		    "(the identity is pinned); nothing adopted", c->path, c->user_pub,
		    s->creds.user_pub);
		goto refuse;
	}
	/* The workers' subscriptions live under the reply inbox they were
	 * given at start. */
	if (strcmp(c->inbox, s->creds.inbox) != 0) {
		snprintf(why, whylen, "reloadCreds: %.200s grants the reply inbox %.80s.>, not this "
		    "daemon's %.80s.>; nothing adopted (restart the daemon to change it)", c->path,
		    c->inbox, s->creds.inbox);
		goto refuse;
	}
	sha256_hex(c->c.jwt, have);
	if (expected != NULL && expected[0] != '\0' && strcmp(have, expected) != 0) {
		snprintf(why, whylen, "reloadCreds: %.150s has SHA-256 %s, not the expected %.64s; nothing "
		    "adopted", c->path, have, expected);
		goto refuse;
	}
	if (c->exp != 0 && c->exp * 1000 <= wall_ms()) {
		snprintf(why, whylen, "reloadCreds: the credential in %.200s expired at %lld; nothing "
		    "adopted", c->path, (long long)c->exp);
		goto refuse;
	}
	sha256_hex(s->creds.c.jwt, now);
	if (strcmp(have, now) == 0 && !s->cred_expired) {
		sup_creds_free(c);
		return 1;
	}
	return 0;
refuse:
	sup_creds_free(c);
	return -1;
}

/* Hold the candidate from now on; the connections follow in 250 ms. */
static void
adopt(struct sup *s, struct sup_creds *c)
{
	sup_creds_free(&s->creds);
	s->creds = *c;
	memset(c, 0, sizeof(*c));
	s->stats.reloads_adopted++;
	s->status_dirty = true;
	log_ok("delivery: adopted the renewed credential (user %.12s…, sha256 %s, expires %lld); "
	    "reconnecting in %d ms", s->creds.user_pub, s->creds.fingerprint,
	    (long long)s->creds.exp, RELOAD_SWAP_MS);
	if (s->cred_expired)
		log_ok("delivery: the expired credential is renewed and proved");
	s->cred_expired = false;
	evtimer_del(s->ev_expiry);
	arm_reread(s);
	arm(s->ev_swap, RELOAD_SWAP_MS);
}

/* Every worker and the resident connection onto the credential held now. */
static void
on_swap(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	char err[1024];

	(void)fd, (void)what;
	for (int i = 0; i < SUP_WORKERS; i++) {
		struct sup_worker *w = &s->workers[i];
		if (w->pid <= 0 || w->ch < 0)
			continue;
		if (ipc_send(w->ch, IPC_JWT, s->creds.c.jwt, strlen(s->creds.c.jwt)) != 0 ||
		    ipc_send(w->ch, IPC_RECONNECT, NULL, 0) != 0)
			kill(w->pid, SIGKILL); /* restarted, on the new credential */
	}
	shard_unwatch(s);
	if (resident_swap(s, err, sizeof(err)) != 0)
		log_warnx("delivery: the resident connection could not move onto the renewed "
		    "credential: %s; it keeps the connection it has", err);
	else
		log_ok("delivery: workers and the resident connection reconnect with the renewed "
		    "credential");
	shard_watch(s);
}

/* The proof's thread: the candidate on a throw-away connection of its own
 * (the mesh's transport: never a plaintext proof on a TLS mesh). */
static void *
prove(void *arg)
{
	struct reload_proof *p = arg;
	natsConnection *nc = NULL;

	if (p->delay_ms > 0)
		usleep((useconds_t)p->delay_ms * 1000);
	p->rc = conn_open(&p->o, &p->cand.c, &nc, p->err, sizeof(p->err));
	if (p->rc == 0)
		natsConnection_Destroy(nc);
	if (write(p->done[1], "", 1) != 1)
		abort(); /* a pipe of our own: the loop would wait forever */
	return NULL;
}

/* Start proving c (taken over); false when no thread could be started. */
static bool
prove_start(struct reload_proof *p, struct sup_creds *c)
{
	struct sup *s = p->s;

	p->cand = *c;
	memset(c, 0, sizeof(*c));
	p->o = (struct conn_opts){ .url = s->url, .name = "cotal-deliveryd reload proof",
		.timeout_ms = RELOAD_PROVE_MS,
		.tls_host = s->tls_host[0] != '\0' ? s->tls_host : NULL, .tls_ca_pem = s->tls_ca };
	p->rc = -1;
	p->err[0] = '\0';
	if (pthread_create(&p->th, NULL, prove, p) != 0) {
		sup_creds_free(&p->cand);
		return false;
	}
	p->busy = true;
	return true;
}

/* The answer to a request: adopted (or held already) and so accepted by
 * the broker, or refused with error. */
static void
answer(struct sup_worker *w, uint64_t id, bool ok, const char *error)
{
	struct ipc_reload_rep rep = { 0 };

	rep.id = id;
	rep.ok = ok ? 1 : 0;
	rep.broker_accepted = ok ? 1 : 0;
	if (error != NULL)
		snprintf(rep.error, sizeof(rep.error), "%s", error);
	if (w->ch < 0 || ipc_send(w->ch, IPC_RELOAD_REP, &rep, sizeof(rep)) != 0)
		log_warnx_limited(&w->sup->reload->lines, "delivery: cannot answer the registry's "
		    "RELOAD_REQ");
}

static void
refused(struct sup *s, const char *why)
{
	s->stats.reloads_refused++;
	s->status_dirty = true;
	log_warnx_limited(&s->reload->lines, "delivery: %s", why);
}

/* A request's information line, within the requests' limiter like their
 * refusals: every line a request causes is bounded (finding 3). */
static void
said(struct reload_proof *p, const char *text)
{
	uint64_t untold;

	if (log_limit_admit(&p->lines, sup_now_ms(), log_limit_window_ms(), &untold))
		log_info("delivery: %s", text);
}

/* The proof is done: adopt, or refuse; then answer whoever waits. */
static void
on_proved(evutil_socket_t fd, short what, void *arg)
{
	struct reload_proof *p = arg;
	struct sup *s = p->s;
	char why[IPC_RELOAD_ERR_MAX], b;

	(void)what;
	if (read(fd, &b, 1) != 1 || !p->busy)
		return;
	pthread_join(p->th, NULL);
	p->busy = false;
	bool ok = p->rc == 0;
	if (ok)
		adopt(s, &p->cand);
	else {
		snprintf(why, sizeof(why), "%s: the broker refused the credential in %.150s: %.250s; "
		    "nothing adopted", p->for_request ? "reloadCreds" : "re-reading the credential",
		    p->cand.path, p->err);
		sup_creds_free(&p->cand);
		refused(s, why);
		if (!p->for_request)
			arm_reread(s);
	}
	/* The same worker process that asked, else nobody waits. */
	if (p->for_request && p->w->pid == p->w_pid)
		answer(p->w, p->id, ok, ok ? NULL : why);
}

void
reload_request(struct sup_worker *w, const struct ipc_msg *m)
{
	struct sup *s = w->sup;
	struct reload_proof *p = s->reload;
	struct ipc_reload_req req;
	struct sup_creds c;
	char why[IPC_RELOAD_ERR_MAX];

	memcpy(&req, m->payload, sizeof(req));
	/* The seed: "The daemon refuses a reloadCreds adoption until it has
	 * finished starting, which is after its lease watch is bound." */
	if (!s->startup_done) {
		said(p, "reloadCreds refused: start-up has not finished");
		answer(w, req.id, false, ERR_NOT_STARTED);
		return;
	}
	if (!budget_take(&p->budget, sup_now_ms())) {
		snprintf(why, sizeof(why), "reloadCreds: more requests than the daemon proves (%d at "
		    "once, then one every %d ms); nothing adopted, ask again later", RELOAD_BURST,
		    RELOAD_REFILL_MS);
		refused(s, why);
		answer(w, req.id, false, why);
		return;
	}
	if (p->busy) {
		snprintf(why, sizeof(why), "reloadCreds: another credential is being proved; nothing "
		    "adopted by this request, ask again once it is answered");
		refused(s, why);
		answer(w, req.id, false, why);
		return;
	}
	switch (candidate(s, req.expected, &c, why, sizeof(why))) {
	case -1:
		refused(s, why);
		answer(w, req.id, false, why);
		return;
	case 1:
		said(p, "reloadCreds: the credential file holds the credential in use; nothing to "
		    "adopt");
		answer(w, req.id, true, NULL);
		return;
	}
	p->for_request = true;
	p->w = w;
	p->w_pid = w->pid;
	p->id = req.id;
	if (!prove_start(p, &c)) {
		snprintf(why, sizeof(why), "reloadCreds: cannot start the proof: %s; nothing adopted",
		    strerror(errno));
		refused(s, why);
		answer(w, req.id, false, why);
	}
}

/* The daemon's own re-read at 75 % of the credential's lifetime. */
static void
on_reread(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	struct sup_creds c;
	char why[IPC_RELOAD_ERR_MAX];

	(void)fd, (void)what;
	if (s->reload->busy) {
		/* A request's proof runs: read again once it is answered. */
		arm(s->ev_reread, REREAD_MIN_MS);
		return;
	}
	switch (candidate(s, NULL, &c, why, sizeof(why))) {
	case 0:
		s->reload->for_request = false;
		if (prove_start(s->reload, &c))
			return;
		snprintf(why, sizeof(why), "cannot start the proof: %s", strerror(errno));
		/* FALLTHROUGH */
	case -1:
		s->stats.reloads_refused++;
		s->status_dirty = true;
		log_warnx("delivery: re-reading the credential: %s", why);
		break;
	case 1:
		log_warnx("delivery: the credential in %s expires at %lld and has not been renewed "
		    "there yet; renew it (cotal creds mint --renew) and reload it before then",
		    s->creds.path, (long long)s->creds.exp);
		break;
	}
	arm_reread(s);
}

bool
reload_is_expired(const struct sup *s)
{
	/* The broker's clock and ours: a second of slack. */
	return s->cred_expired || (s->creds.exp != 0 && wall_ms() >= s->creds.exp * 1000 - 1000);
}

void
reload_expired(struct sup *s)
{
	if (s->cred_expired)
		return;
	s->cred_expired = true;
	log_warnx("delivery: credential expired, awaiting proved renewal");
	evtimer_del(s->ev_expiry);
	arm(s->ev_expiry, s->wd.backstop_ms);
}

/* Expiry: first the credential's own exp (the connection drops then), and
 * then, while no proved renewal came, the backstop. */
static void
on_expiry(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;

	(void)fd, (void)what;
	if (!s->cred_expired) {
		reload_expired(s);
		return;
	}
	log_errx("delivery: credential expired without renewal");
	s->release_on_exit = false;
	sup_stop(s, 1);
}

void
reload_init(struct sup *s)
{
	struct reload_proof *p = calloc(1, sizeof(*p));

	if (p == NULL || pipe2(p->done, O_CLOEXEC | O_NONBLOCK) != 0)
		fatal("delivery: the reload proof's pipe");
	p->s = s;
	budget_init(&p->budget, sup_now_ms(), RELOAD_BURST, RELOAD_REFILL_MS);
	pthread_mutex_init(&p->lines.mu, NULL);
#ifdef COTAL_TEST_HOOKS
	/* COTAL_TEST_RELOAD_PROVE_MS: every proof waits that long first. */
	if (getenv("COTAL_TEST_RELOAD_PROVE_MS") != NULL)
		p->delay_ms = atoi(getenv("COTAL_TEST_RELOAD_PROVE_MS"));
#endif
	p->ev_done = event_new(s->base, p->done[0], EV_READ | EV_PERSIST, on_proved, p);
	event_add(p->ev_done, NULL);
	s->reload = p;
	s->ev_expiry = evtimer_new(s->base, on_expiry, s);
	s->ev_reread = evtimer_new(s->base, on_reread, s);
	s->ev_swap = evtimer_new(s->base, on_swap, s);
	arm_reread(s);
}

void
reload_free(struct sup *s)
{
	struct reload_proof *p = s->reload;

	if (p != NULL) {
		/* A proof in flight ends within its connect's timeout. */
		if (p->busy) {
			pthread_join(p->th, NULL);
			sup_creds_free(&p->cand);
		}
		event_free(p->ev_done);
		close(p->done[0]);
		close(p->done[1]);
		free(p);
		s->reload = NULL;
	}
	if (s->ev_expiry)
		event_free(s->ev_expiry);
	if (s->ev_reread)
		event_free(s->ev_reread);
	if (s->ev_swap)
		event_free(s->ev_swap);
	s->ev_expiry = s->ev_reread = s->ev_swap = NULL;
}
