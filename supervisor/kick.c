/*
 * The KICK monitor (supervisor/kick.h): the one process that may disconnect
 * a broker connection. Runs in the supervisor: a thread of its own holds
 * the $SYS observer's and evictor's connections (their seeds never leave
 * this process), takes the registry's KICK_REQs one at a time, checks each
 * on its own CONNZ and sends the KICK only for a connection of the space's
 * account that names the principal being evicted; the event loop only
 * queues the requests and hands the answers back (a pipe wakes it), so a
 * slow broker never holds off the lease or the watchdog.
 *
 * What the broker answers is network input, read by lib/wire/connz.c's
 * checks, bounded (KICK_CONNZ_REPLY_MAX), and only its named fields are used.
 */
#include "supervisor/kick.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/connz.h"
#include "supervisor/supervisor.h"

#define KICK_QUEUE_MAX 8             /* the registry waits for each answer */
#define KICK_REQUEST_MS 3000         /* the CONNZ and the KICK (SWEEP_REQUEST_MS) */
#define KICK_CONNZ_REPLY_MAX (1024 * 1024) /* one connection's entry and its server's */
#define KICK_CONNZ_REPLIES_MAX 64    /* replies read for one CONNZ (servers of a cluster) */

struct kick_job {
	struct sup_worker *w;
	pid_t pid;                        /* the process that asked: it alone gets the answer */
	struct ipc_kick_req req;
	struct ipc_kick_rep rep;
};

struct kicker {
	struct sup *s;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	struct kick_job todo[KICK_QUEUE_MAX], done[KICK_QUEUE_MAX];
	size_t ntodo, ndone;
	int wake[2];                      /* the thread's byte: answers are done */
	struct event *ev;
	natsConnection *observer, *evictor; /* the thread's alone */
	struct log_limit lines;
};

/* The $SYS user's connection, opened on first use (the thread's). */
static natsConnection *
sys_conn(struct kicker *k, enum ipc_sys which, natsConnection **nc, char *why, size_t whylen)
{
	struct sup *s = k->s;
	char err[1024];

	if (*nc != NULL)
		return *nc;
	struct conn_opts o = { .url = s->url, .timeout_ms = 5000, .max_reconnect = -1,
		.name = which == IPC_SYS_OBSERVER ? "cotal-deliveryd supervisor ($SYS observer)" :
		    "cotal-deliveryd supervisor ($SYS evictor)",
		.tls_host = s->tls_host[0] != '\0' ? s->tls_host : NULL, .tls_ca_pem = s->tls_ca };
	if (conn_open(&o, &s->sys[which].c, nc, err, sizeof(err)) != 0) {
		snprintf(why, whylen, "cannot connect as the $SYS %s: %.300s",
		    which == IPC_SYS_OBSERVER ? "observer" : "evictor", err);
		*nc = NULL;
		return NULL;
	}
	return *nc;
}

/*
 * Does connection cid on server belong to the space's account and name
 * principal, by the observer's own CONNZ? 1 yes, 0 no (why says what it
 * is), -1 when it cannot be told (why).
 */
static int
verify(struct kicker *k, const struct ipc_kick_req *rq, char *why, size_t whylen)
{
	struct sup *s = k->s;
	natsConnection *nc = sys_conn(k, IPC_SYS_OBSERVER, &k->observer, why, whylen);
	natsSubscription *sub = NULL;
	char inbox[REPLY_INBOX_MAX + 40], subject[128], body[96];
	int verdict = -1;

	if (nc == NULL)
		return -1;
	snprintf(inbox, sizeof(inbox), "%s.kick%016llx", s->sys[IPC_SYS_OBSERVER].inbox,
	    (unsigned long long)rq->id);
	snprintf(subject, sizeof(subject), "$SYS.REQ.ACCOUNT.%s.CONNZ", s->creds.account);
	/* A cid names a connection of the server whatever its account (the
	 * broker looks it up before any account filter): the entry's account
	 * is checked below. */
	snprintf(body, sizeof(body), "{\"cid\":%llu,\"auth\":true}", (unsigned long long)rq->cid);
	if (natsConnection_SubscribeSync(&sub, nc, inbox) != NATS_OK ||
	    natsConnection_PublishRequestString(nc, subject, inbox, body) != NATS_OK) {
		snprintf(why, whylen, "the CONNZ request could not be sent");
		conn_sub_close(nc, sub, CONN_SUB_FLUSH_MS);
		return -1;
	}
	snprintf(why, whylen, "server %.56s did not answer CONNZ within %d ms", rq->server,
	    KICK_REQUEST_MS);
	int64_t until = mono_ms() + KICK_REQUEST_MS;
	for (int n = 0; n < KICK_CONNZ_REPLIES_MAX && verdict < 0; n++) {
		natsMsg *m = NULL;
		int64_t left = until - mono_ms();
		if (left <= 0 || natsSubscription_NextMsg(&m, sub, left) != NATS_OK)
			break;
		json_t *doc = NULL;
		struct connz_page page;
		char perr[256];
		if (natsMsg_GetDataLength(m) > KICK_CONNZ_REPLY_MAX ||
		    (doc = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0,
		    NULL)) == NULL || connz_page_parse(doc, 0, &page, perr, sizeof(perr)) != 0 ||
		    strcmp(page.server_id, rq->server) != 0) {
			/* Another server's, or unreadable: not this one's answer. */
			json_decref(doc);
			natsMsg_Destroy(m);
			continue;
		}
		verdict = 0;
		snprintf(why, whylen, "server %.56s lists no connection %llu in the space's account",
		    rq->server, (unsigned long long)rq->cid);
		for (size_t i = 0; i < page.n; i++) {
			const json_t *e = json_array_get(page.conns, i);
			const char *acct = json_string_value(json_object_get(e, "account"));
			if (json_integer_value(json_object_get(e, "cid")) != (json_int_t)rq->cid)
				continue;
			if (acct == NULL || strcmp(acct, s->creds.account) != 0) {
				snprintf(why, whylen, "connection %llu on server %.56s is of account %.56s, "
				    "not the space's", (unsigned long long)rq->cid, rq->server,
				    acct != NULL ? acct : "(none named)");
				break;
			}
			if (!connz_entry_names(e, rq->principal)) {
				snprintf(why, whylen, "connection %llu on server %.56s is not principal "
				    "%.136s's", (unsigned long long)rq->cid, rq->server, rq->principal);
				break;
			}
			verdict = 1;
		}
		json_decref(doc);
		natsMsg_Destroy(m);
	}
	conn_sub_close(nc, sub, CONN_SUB_FLUSH_MS);
	return verdict;
}

/* One request: checked, then sent or refused (the thread's). */
static void
kick_do(struct kicker *k, struct kick_job *j)
{
	struct ipc_kick_rep *rep = &j->rep;
	char why[512], subject[IPC_SERVER_ID_MAX + 32], body[64];
	int v;

	rep->id = j->req.id;
	if (!connz_principal_valid(j->req.principal)) {
		v = 0;
		snprintf(why, sizeof(why), "%.136s is not a principal", j->req.principal);
	} else
		v = verify(k, &j->req, why, sizeof(why));
	if (v != 1) {
		rep->outcome = v == 0 ? IPC_KICK_REFUSED : IPC_KICK_FAILED;
		snprintf(rep->reply, sizeof(rep->reply), "%s", why);
		if (v == 0)
			log_warnx_limited(&k->lines, "delivery: refused the registry's KICK of "
			    "connection %llu on server %.56s for %.136s: %s",
			    (unsigned long long)j->req.cid, j->req.server, j->req.principal, why);
		return;
	}
	natsConnection *ev = sys_conn(k, IPC_SYS_EVICTOR, &k->evictor, why, sizeof(why));
	natsMsg *m = NULL;
	if (ev == NULL) {
		rep->outcome = IPC_KICK_FAILED;
		snprintf(rep->reply, sizeof(rep->reply), "%s", why);
		return;
	}
	snprintf(subject, sizeof(subject), "$SYS.REQ.SERVER.%s.KICK", j->req.server);
	snprintf(body, sizeof(body), "{\"cid\":%llu}", (unsigned long long)j->req.cid);
	natsStatus st = natsConnection_RequestString(&m, ev, subject, body, KICK_REQUEST_MS);
	if (st == NATS_OK) {
		rep->outcome = IPC_KICK_SENT;
		snprintf(rep->reply, sizeof(rep->reply), "%.*s", natsMsg_GetDataLength(m),
		    natsMsg_GetData(m));
	} else {
		rep->outcome = st == NATS_NO_RESPONDERS ? IPC_KICK_NO_RESPONDERS : IPC_KICK_FAILED;
		snprintf(rep->reply, sizeof(rep->reply), "%s", st == NATS_TIMEOUT ?
		    "no answer within the request timeout" : natsStatus_GetText(st));
	}
	natsMsg_Destroy(m);
}

static void *
kick_thread(void *arg)
{
	struct kicker *k = arg;
	struct kick_job j;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (!k->stop && k->ntodo == 0)
			pthread_cond_wait(&k->cv, &k->mu);
		if (k->stop)
			break;
		j = k->todo[0];
		memmove(k->todo, k->todo + 1, (k->ntodo - 1) * sizeof(k->todo[0]));
		k->ntodo--;
		pthread_mutex_unlock(&k->mu);
		memset(&j.rep, 0, sizeof(j.rep));
		kick_do(k, &j);
		pthread_mutex_lock(&k->mu);
		if (k->ndone < KICK_QUEUE_MAX)
			k->done[k->ndone++] = j;
		if (write(k->wake[1], "", 1) < 0) {
			/* A full pipe already wakes the loop. */
		}
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/* The answers, to the processes that asked (the loop's). */
static void
on_done(evutil_socket_t fd, short what, void *arg)
{
	struct kicker *k = arg;
	struct kick_job done[KICK_QUEUE_MAX];
	char buf[64];
	size_t n;

	(void)what;
	while (read(fd, buf, sizeof(buf)) > 0)
		continue;
	pthread_mutex_lock(&k->mu);
	n = k->ndone;
	memcpy(done, k->done, n * sizeof(done[0]));
	k->ndone = 0;
	pthread_mutex_unlock(&k->mu);
	for (size_t i = 0; i < n; i++)
		if (done[i].w->pid == done[i].pid && done[i].w->ch >= 0)
			ipc_send(done[i].w->ch, IPC_KICK_REP, &done[i].rep, sizeof(done[i].rep));
}

int
kick_init(struct sup *s)
{
	struct kicker *k = calloc(1, sizeof(*k));

	if (k == NULL || pipe2(k->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(k);
		return -1;
	}
	k->s = s;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	pthread_mutex_init(&k->lines.mu, NULL);
	k->ev = event_new(s->base, k->wake[0], EV_READ | EV_PERSIST, on_done, k);
	event_add(k->ev, NULL);
	if (pthread_create(&k->th, NULL, kick_thread, k) != 0) {
		event_free(k->ev);
		close(k->wake[0]);
		close(k->wake[1]);
		free(k);
		return -1;
	}
	s->kicker = k;
	return 0;
}

void
kick_request(struct sup_worker *w, const struct ipc_msg *m)
{
	struct kicker *k = w->sup->kicker;
	struct kick_job j = { .w = w, .pid = w->pid };
	bool queued = false;

	memcpy(&j.req, m->payload, sizeof(j.req));
	if (w->sup->have_sys[IPC_SYS_EVICTOR]) {
		pthread_mutex_lock(&k->mu);
		if (k->ntodo < KICK_QUEUE_MAX) {
			k->todo[k->ntodo++] = j;
			queued = true;
			pthread_cond_signal(&k->cv);
		}
		pthread_mutex_unlock(&k->mu);
	}
	if (queued)
		return;
	/* No evictor, or more than the registry ever has waiting. */
	j.rep.id = j.req.id;
	j.rep.outcome = IPC_KICK_REFUSED;
	snprintf(j.rep.reply, sizeof(j.rep.reply), "%s", !w->sup->have_sys[IPC_SYS_EVICTOR] ?
	    "no $SYS evictor credential is held" :
	    "more KICK requests waiting than the supervisor takes");
	ipc_send(w->ch, IPC_KICK_REP, &j.rep, sizeof(j.rep));
}

void
kick_free(struct sup *s)
{
	struct kicker *k = s->kicker;

	if (k == NULL)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	/* A request in flight ends within its timeouts. */
	pthread_join(k->th, NULL);
	natsConnection_Destroy(k->observer);
	natsConnection_Destroy(k->evictor);
	event_free(k->ev);
	close(k->wake[0]);
	close(k->wake[1]);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
	s->kicker = NULL;
}
