/*
 * One hostile agent (issue 28): it floods its own ctl.delivery subject with
 * requests, publish-only, as fast as its client allows, from a thread of
 * its own, and counts the answers it gets. e2e_hostile asserts what the
 * others see meanwhile; bench/hostile measures it.
 */
#include "tests/harness/harness_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
on_flood_reply(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct h_flood *fl = closure;
	const char *data = natsMsg_GetData(msg);

	(void)nc, (void)sub;
	atomic_fetch_add(&fl->answered, 1);
	if (data != NULL && strstr(data, "\"ok\":false") != NULL && strstr(data, "retry") != NULL &&
	    atomic_fetch_add(&fl->refused, 1) == 0) {
		pthread_mutex_lock(&fl->mu);
		snprintf(fl->first_refusal, sizeof(fl->first_refusal), "%.*s",
		    natsMsg_GetDataLength(msg), data);
		pthread_mutex_unlock(&fl->mu);
	}
	natsMsg_Destroy(msg);
}

/* listMemberships of its own lifecycle with pad bytes of padding, never
 * waiting for an answer, until told to stop. */
static void *
flood_run(void *arg)
{
	struct h_flood *fl = arg;
	struct h_peer *p = fl->p;
	char reply[H_SUBJECT_MAX + 32], head[512];
	size_t hlen, len;
	char *body;
	long n = 0;

	hlen = (size_t)snprintf(head, sizeof(head), "{\"op\":\"listMemberships\",\"from\":{\"id\":"
	    "\"%s.%s\",\"name\":\"flooder\"},\"args\":{\"lifecycleUid\":\"%s\"},\"pad\":\"",
	    p->a.owner, p->a.actor, p->a.uid);
	len = hlen + fl->pad + 2;
	if ((body = malloc(len + 1)) == NULL)
		return NULL;
	memcpy(body, head, hlen);
	memset(body + hlen, 'x', fl->pad);
	memcpy(body + hlen + fl->pad, "\"}", 3);
	while (!atomic_load(&fl->stop)) {
		snprintf(reply, sizeof(reply), "%s.reply.f%ld", fl->subject, n++);
		if (natsConnection_PublishRequest(p->c.nc, fl->subject, reply, body, (int)len) ==
		    NATS_OK)
			atomic_fetch_add(&fl->sent, 1);
		else
			atomic_fetch_add(&fl->failed, 1);
	}
	natsConnection_FlushTimeout(p->c.nc, 5000);
	free(body);
	return NULL;
}

int
h_flood_start(struct mesh *m, struct h_peer *p, size_t pad, struct h_flood *fl, char *err,
	      size_t errlen)
{
	char replies[H_SUBJECT_MAX + 16];
	natsStatus s;

	memset(fl, 0, sizeof(*fl));
	pthread_mutex_init(&fl->mu, NULL);
	fl->p = p;
	fl->pad = pad;
	snprintf(fl->subject, sizeof(fl->subject), "cotal.%s.ctl.delivery.%s.%s", m->token,
	    p->a.owner, p->a.actor);
	snprintf(replies, sizeof(replies), "%s.reply.>", fl->subject);
	s = natsConnection_Subscribe(&fl->replies, p->c.nc, replies, on_flood_reply, fl);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(fl->replies, -1, -1);
	if (s != NATS_OK) {
		snprintf(err, errlen, "subscribe %s: %s", replies, natsStatus_GetText(s));
		natsSubscription_Destroy(fl->replies);
		fl->replies = NULL;
		return -1;
	}
	if (pthread_create(&fl->th, NULL, flood_run, fl) != 0) {
		snprintf(err, errlen, "the flood's thread: cannot start");
		natsSubscription_Destroy(fl->replies);
		fl->replies = NULL;
		return -1;
	}
	fl->running = true;
	return 0;
}

void
h_flood_stop(struct h_flood *fl)
{
	if (fl->running) {
		atomic_store(&fl->stop, true);
		pthread_join(fl->th, NULL);
		fl->running = false;
	}
	if (fl->replies != NULL) {
		natsSubscription_Unsubscribe(fl->replies);
		natsSubscription_Destroy(fl->replies);
		fl->replies = NULL;
	}
}
