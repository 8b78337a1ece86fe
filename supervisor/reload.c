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
 */
#include "supervisor/supervisor.h"

#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"

#define RELOAD_PROVE_MS 5000       /* the throw-away connection's connect */
#define RELOAD_SWAP_MS 250         /* after the reply (seed) */
#define REREAD_PCT 75              /* of the credential's lifetime */
#define REREAD_MIN_MS 1000

static const char ERR_NOT_STARTED[] =
	"delivery: the daemon has not finished starting; nothing adopted";

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
 * Read the credential file again and prove it: 0 with the candidate
 * (sup_creds_free it), 1 when it is the credential held now, -1 with why.
 */
static int
candidate(struct sup *s, const char *expected, struct sup_creds *c, bool *accepted, char *why,
	  size_t whylen)
{
	char err[2048], have[IPC_SHA256_HEX], now[IPC_SHA256_HEX];
	struct conn_opts o = { .url = s->url, .name = "cotal-deliveryd reload proof",
		.timeout_ms = RELOAD_PROVE_MS,
		/* The mesh's transport: never a plaintext proof on a TLS mesh. */
		.tls_host = s->tls_host[0] != '\0' ? s->tls_host : NULL, .tls_ca_pem = s->tls_ca };
	natsConnection *nc = NULL;

	*accepted = false;
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
		*accepted = true;
		return 1;
	}
	/* Proved against the broker, on a connection of its own. */
	if (conn_open(&o, &c->c, &nc, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "reloadCreds: the broker refused the credential in %.150s: %.250s; "
		    "nothing adopted", c->path, err);
		goto refuse;
	}
	natsConnection_Destroy(nc);
	*accepted = true;
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

void
reload_request(struct sup_worker *w, const struct ipc_msg *m)
{
	struct sup *s = w->sup;
	struct ipc_reload_req req;
	struct ipc_reload_rep rep = { 0 };
	struct sup_creds c;
	bool accepted;
	int rc;

	memcpy(&req, m->payload, sizeof(req));
	rep.id = req.id;
	/* The seed: "The daemon refuses a reloadCreds adoption until it has
	 * finished starting, which is after its lease watch is bound." */
	if (!s->startup_done) {
		snprintf(rep.error, sizeof(rep.error), "%s", ERR_NOT_STARTED);
		log_info("delivery: reloadCreds refused: start-up has not finished");
	} else if ((rc = candidate(s, req.expected, &c, &accepted, rep.error,
	    sizeof(rep.error))) < 0) {
		s->stats.reloads_refused++;
		s->status_dirty = true;
		log_warnx("delivery: %s", rep.error);
	} else {
		rep.ok = 1;
		rep.broker_accepted = accepted;
		if (rc == 0) {
			adopt(s, &c);
		} else {
			sup_creds_free(&c);
			log_info("delivery: reloadCreds: the credential file holds the credential in "
			    "use; nothing to adopt");
		}
	}
	if (ipc_send(w->ch, IPC_RELOAD_REP, &rep, sizeof(rep)) != 0)
		log_warnx("delivery: cannot answer the registry's RELOAD_REQ");
}

/* The daemon's own re-read at 75 % of the credential's lifetime. */
static void
on_reread(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	struct sup_creds c;
	bool accepted;
	char why[IPC_RELOAD_ERR_MAX];
	int rc;

	(void)fd, (void)what;
	rc = candidate(s, NULL, &c, &accepted, why, sizeof(why));
	if (rc == 0) {
		adopt(s, &c);
		return;
	}
	if (rc == 1)
		sup_creds_free(&c);
	if (rc == 1)
		log_warnx("delivery: the credential in %s expires at %lld and has not been renewed "
		    "there yet; renew it (cotal creds mint --renew) and reload it before then",
		    s->creds.path, (long long)s->creds.exp);
	else {
		s->stats.reloads_refused++;
		s->status_dirty = true;
		log_warnx("delivery: re-reading the credential: %s", why);
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
	s->ev_expiry = evtimer_new(s->base, on_expiry, s);
	s->ev_reread = evtimer_new(s->base, on_reread, s);
	s->ev_swap = evtimer_new(s->base, on_swap, s);
	arm_reread(s);
}

void
reload_free(struct sup *s)
{
	if (s->ev_expiry)
		event_free(s->ev_expiry);
	if (s->ev_reread)
		event_free(s->ev_reread);
	if (s->ev_swap)
		event_free(s->ev_swap);
	s->ev_expiry = s->ev_reread = s->ev_swap = NULL;
}
