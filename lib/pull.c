/* Durable pull consumers (see pull.h). */
#include "lib/pull.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/natsconn.h"
#include "lib/worker.h"

static const char *
ack_name(jsAckPolicy p)
{
	return p == js_AckExplicit ? "explicit" : p == js_AckAll ? "all" : "none";
}

/* Name the first setting an existing consumer has other than ours. */
static int
config_differs(const jsConsumerConfig *have, const jsConsumerConfig *want, char *err,
	       size_t errlen)
{
	const char *hf = have->FilterSubject ? have->FilterSubject : "";

	if (strcmp(hf, want->FilterSubject) != 0) {
		snprintf(err, errlen, "filter subject is \"%s\", want \"%s\"", hf, want->FilterSubject);
		return 1;
	}
	if (have->AckPolicy != want->AckPolicy) {
		snprintf(err, errlen, "ack policy is %s, want %s", ack_name(have->AckPolicy),
		    ack_name(want->AckPolicy));
		return 1;
	}
	if (have->DeliverPolicy != want->DeliverPolicy) {
		snprintf(err, errlen, "deliver policy is %d, want %d", (int)have->DeliverPolicy,
		    (int)want->DeliverPolicy);
		return 1;
	}
	if (have->DeliverSubject != NULL && have->DeliverSubject[0] != '\0') {
		snprintf(err, errlen, "it is a push consumer (deliver subject \"%s\")",
		    have->DeliverSubject);
		return 1;
	}
	return 0;
}

/* A request that timed out because the broker refused the publish. */
static void
explain(natsStatus s, jsErrCode jerr, const char *what, char *err, size_t errlen)
{
	char why[512], viol[512];

	if (s == NATS_TIMEOUT && worker_violation(NULL, viol, sizeof(viol))) {
		snprintf(err, errlen, "%s: permission denied (%s)", what, viol);
		return;
	}
	conn_strerror(s, why, sizeof(why));
	snprintf(err, errlen, "%s: %s (error %d)", what, why, (int)jerr);
}

int
pull_bind(jsCtx *js, const char *stream, jsConsumerConfig *cfg, natsSubscription **sub,
	  char *err, size_t errlen)
{
	jsConsumerInfo *ci = NULL;
	jsSubOptions so;
	jsErrCode jerr = 0;
	char what[512], diff[512];
	natsStatus s;

	snprintf(what, sizeof(what), "consumer %s on %s", cfg->Durable, stream);
	s = js_GetConsumerInfo(&ci, js, stream, cfg->Durable, NULL, &jerr);
	if (s != NATS_OK && jerr == JSConsumerNotFoundErr) {
		jerr = 0;
		s = js_AddConsumer(&ci, js, stream, cfg, NULL, &jerr);
		if (s != NATS_OK && jerr == JSConsumerNameExistErr) {
			/* Another incarnation made it meanwhile: read it. */
			jerr = 0;
			s = js_GetConsumerInfo(&ci, js, stream, cfg->Durable, NULL, &jerr);
		}
		if (s != NATS_OK) {
			char w2[600];
			snprintf(w2, sizeof(w2), "create %s", what);
			explain(s, jerr, w2, err, errlen);
			return -1;
		}
	} else if (s != NATS_OK) {
		explain(s, jerr, what, err, errlen);
		return -1;
	}
	if (config_differs(ci->Config, cfg, diff, sizeof(diff))) {
		snprintf(err, errlen, "%s exists with other settings: %s", what, diff);
		jsConsumerInfo_Destroy(ci);
		return -1;
	}
	jsConsumerInfo_Destroy(ci);

	jsSubOptions_Init(&so);
	so.Stream = stream;
	so.Consumer = cfg->Durable;
	so.ManualAck = true;
	s = js_PullSubscribe(sub, js, cfg->FilterSubject, cfg->Durable, NULL, &so, &jerr);
	if (s != NATS_OK) {
		char w2[600];
		snprintf(w2, sizeof(w2), "bind %s", what);
		explain(s, jerr, w2, err, errlen);
		return -1;
	}
	return 0;
}

static natsStatus
fetch_once(natsSubscription *sub, int batch, bool nowait, int wait_ms, natsMsgList *list)
{
	jsFetchRequest req;

	/* A fresh request every call (STYLE.md pitfalls). */
	jsFetchRequest_Init(&req);
	req.Batch = batch;
	req.NoWait = nowait;
	req.Expires = nowait ? 0 : (int64_t)wait_ms * 1000000;
	return natsSubscription_FetchRequest(list, sub, &req);
}

/* Append what one request that does not wait brings; its count. */
static int
fetch_append(natsSubscription *sub, int want, natsMsgList *list)
{
	natsMsgList more = { 0 };
	natsMsg **all;

	if (fetch_once(sub, want, true, 0, &more) != NATS_OK || more.Count == 0) {
		natsMsgList_Destroy(&more);
		return 0;
	}
	all = realloc(list->Msgs, sizeof(natsMsg *) * (size_t)(list->Count + more.Count));
	if (all == NULL) {
		natsMsgList_Destroy(&more);
		return 0;
	}
	memcpy(all + list->Count, more.Msgs, sizeof(natsMsg *) * (size_t)more.Count);
	list->Msgs = all;
	list->Count += more.Count;
	int n = more.Count;
	free(more.Msgs); /* the messages moved */
	return n;
}

natsStatus
pull_fetch(natsSubscription *sub, int max, int wait_ms, natsMsgList *list)
{
	natsStatus s;
	int first = max < PULL_REQUEST_MAX ? max : PULL_REQUEST_MAX;

	memset(list, 0, sizeof(*list));
	if (max > PULL_BATCH_MAX)
		max = PULL_BATCH_MAX;
	s = fetch_once(sub, first, true, 0, list);
	if (s != NATS_OK && s != NATS_NOT_FOUND && s != NATS_TIMEOUT)
		return s;
	if (s != NATS_OK || list->Count == 0) {
		natsMsgList_Destroy(list);
		memset(list, 0, sizeof(*list));
		/* Nothing waiting: the first message to arrive, at once. */
		s = fetch_once(sub, 1, false, wait_ms, list);
		if (s == NATS_TIMEOUT || s == NATS_NOT_FOUND)
			return NATS_OK;
		if (s != NATS_OK)
			return s;
	}
	/* And whatever is waiting behind it, up to max. */
	while (list->Count < max) {
		int want = max - list->Count;
		if (fetch_append(sub, want < PULL_REQUEST_MAX ? want : PULL_REQUEST_MAX, list) == 0)
			break;
	}
	return NATS_OK;
}
