/*
 * worker-timer: the space's checkpoint timer writer (seed, "The daemon also
 * hosts the space's checkpoint timer writer"; WIRE.md §6).
 *
 * Pulls each .schedule request from EPT_REQ_<s> through the `timerw_<s>`
 * durable, validates it, reads the checkpoint record it fences against
 * (cp.<endpoint>.<timerId> in cotal_records_<s>) and arms it: a publish to
 * the sibling .armed subject, compare-and-set on that subject's last
 * sequence. On a broker that schedules (nats-server >= 2.12) the .armed
 * message carries the schedule and the broker fires; on an older one this
 * worker is the scheduler and publishes each .fire itself.
 *
 * "Once per armed generation" across restarts [decision]: a .fire is
 * published only when the last .fire of its subject is of an older
 * generation, compare-and-set on that last sequence, so two writers (or a
 * writer that died after its publish) never fire a generation twice.
 *
 * May: read EPT_REQ through `timerw_<s>`, read cotal_records_<s>, read
 * stream info and stored messages of EPT_<s>, publish P.ept.*.*.*.*.armed
 * and P.ept.*.*.*.*.fire.
 */
#include "worker-timer/timer.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/nats/kvcas.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/pull.h"
#include "lib/wire/timers.h"
#include "lib/wire/tokens.h"
#include "worker/worker.h"

#define TIMER_BATCH 64
#define TIMER_WAIT_MS 200        /* a fetch's wait: a stop or a deadline never waits longer */
#define TIMER_CAS_TRIES 3        /* WIRE.md §6 */
#define TIMER_RETRY_NAK_MS 2000  /* a request whose read or arm failed */
#define TIMER_FIRE_RETRY_MS 1000 /* a fire that failed */
#define TIMER_API_ANSWER_MS 5000

/* Counters (ipc.c names them). */
enum { C_REQUESTS, C_ARMED, C_FIRED, C_REFUSED };

struct timerw {
	char prefix[SPACE_TOKEN_MAX + 8];        /* cotal.<s> */
	char stream[SPACE_TOKEN_MAX + 8];        /* EPT_<s> */
	char bucket[SPACE_TOKEN_MAX + 16];       /* cotal_records_<s> */
	jsCtx *js;
	struct puller pull;
	bool broker_fires;                       /* nats-server >= 2.12 */
	struct timer_set armed;                  /* when we are the scheduler */
	int64_t fire_retry_at;                   /* mono ms */
};

static struct timerw T;

/* Does the broker run schedules itself (nats-server >= 2.12)? */
static int
probe_broker(char *err, size_t errlen)
{
	int r = conn_broker_schedules(W.nc, TIMER_API_ANSWER_MS, err, errlen);

	if (r < 0)
		return -1;
	T.broker_fires = r == 1;
	return 0;
}

/*
 * The last message of subj in EPT_<s>: 1 with its sequence and fields (a
 * body that does not decode reads as generation 0, which anything
 * replaces), 0 when the subject has none, -1 with err.
 */
static int
last_on(const char *subj, const char *timer_id, uint64_t *seq, struct timer_request *r,
	char *err, size_t errlen)
{
	char why[TIMER_WHY_MAX], what[TIMER_SUBJECT_MAX + 32];
	natsMsg *m = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	*seq = 0;
	memset(r, 0, sizeof(*r));
	s = js_GetLastMsg(&m, T.js, T.stream, subj, NULL, &jerr);
	if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
		return 0;
	if (s != NATS_OK) {
		snprintf(what, sizeof(what), "read the last %s", subj);
		conn_jserror(what, s, jerr, err, errlen);
		return -1;
	}
	*seq = natsMsg_GetSequence(m);
	if (timer_request_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), timer_id, r,
	    why, sizeof(why)) != 0)
		memset(r, 0, sizeof(*r));
	natsMsg_Destroy(m);
	return 1;
}

/*
 * Publish body to subj if its last sequence is still seq, with the header
 * pairs of hdr (NULL-ended): 0, 1 on a lost compare-and-set, -1 with err.
 */
static int
publish_cas(const char *subj, const char *body, size_t len, uint64_t seq,
	    const char *const *hdr, char *err, size_t errlen)
{
	char seqtxt[24];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	natsStatus s;
	int rc = -1;

	snprintf(seqtxt, sizeof(seqtxt), "%" PRIu64, seq);
	s = natsMsg_Create(&m, subj, NULL, body, (int)len);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, "Nats-Expected-Last-Subject-Sequence", seqtxt);
	for (; s == NATS_OK && hdr != NULL && hdr[0] != NULL; hdr += 2)
		s = natsMsgHeader_Set(m, hdr[0], hdr[1]);
	if (s == NATS_OK)
		s = js_PublishMsg(&pa, T.js, m, NULL, &jerr);
	if (s == NATS_OK)
		rc = 0;
	else if (jerr == JSStreamWrongLastSequenceErr)
		rc = 1;
	else
		conn_jserror(subj, s, jerr, err, errlen);
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return rc;
}

/* ---- arming ---- */

static void
keep_armed(const char *armed, const struct timer_request *r)
{
	enum timer_put what;

	if (!T.broker_fires && timer_set_put(&T.armed, armed, r->generation, r->deadline,
	    &what) != 0)
		fatalx("out of memory");
}

/*
 * Arm r on the sibling .armed of ts, compare-and-set, unless that subject
 * holds this generation or a newer one already. 0 (armed or already), -1
 * with err; -2 when the fence closed meanwhile (drop the request).
 */
static int
arm(const struct timer_subject *ts, const struct timer_request *r, uint64_t ticket, char *err,
    size_t errlen)
{
	char armed[TIMER_SUBJECT_MAX], fire[TIMER_SUBJECT_MAX], body[TIMER_BODY_MAX];
	char iso[TIMER_ISO_MAX], at[TIMER_ISO_MAX + 8];
	const char *sched[] = { "Nats-Schedule", at, "Nats-Schedule-Target", fire, NULL };
	size_t len = timer_body_format(ts->timer_id, r, body, sizeof(body));

	if (!timer_subject_format(T.prefix, ts, TIMER_ARMED, armed, sizeof(armed)) ||
	    !timer_subject_format(T.prefix, ts, TIMER_FIRE, fire, sizeof(fire)) || len == 0 ||
	    !timer_iso_utc(r->deadline, iso, sizeof(iso))) {
		snprintf(err, errlen, "the timer's subjects do not fit");
		return -1;
	}
	snprintf(at, sizeof(at), "@at %s", iso);
	for (int i = 0; i < TIMER_CAS_TRIES; i++) {
		struct timer_request last;
		uint64_t seq;
		int rc;
		if (last_on(armed, ts->timer_id, &seq, &last, err, errlen) < 0)
			return -1;
		if (last.generation >= r->generation) {
			/* A re-arm of the same generation is a no-op; an older
			 * request than what is armed changes nothing. */
			if (last.generation == r->generation)
				keep_armed(armed, r);
			return 0;
		}
		/* A broker's fire of a one-shot schedule purges its .armed:
		 * the .fire is what tells that this generation was armed and
		 * fired already, never to be armed (and fired) again. */
		if (T.broker_fires) {
			struct timer_request fired;
			uint64_t fseq;
			if (last_on(fire, ts->timer_id, &fseq, &fired, err, errlen) < 0)
				return -1;
			if (fired.generation >= r->generation)
				return 0;
		}
		if (!fence_begin(&W.fence, ticket))
			return -2;
		rc = publish_cas(armed, body, len, seq, T.broker_fires ? sched : NULL, err, errlen);
		fence_done(&W.fence);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			worker_count(C_ARMED, 1);
			keep_armed(armed, r);
			return 0;
		}
	}
	snprintf(err, errlen, "lost the compare-and-set on %s %d times", armed, TIMER_CAS_TRIES);
	return -1;
}

static void
refuse(natsMsg *m, uint64_t ticket, const char *why)
{
	/* Any workflow host may send bad requests: their lines are bounded. */
	static struct log_limit refusals = LOG_LIMIT_INIT;

	if (!fence_begin(&W.fence, ticket))
		return;
	pull_term(&T.pull, m);
	fence_done(&W.fence);
	worker_count(C_REFUSED, 1);
	log_warnx_limited(&refusals, "timer writer: refused a .schedule request permanently (%s)",
	    why);
}

static void
retry(natsMsg *m, uint64_t ticket, const char *why)
{
	static int64_t last_log;

	if (!fence_begin(&W.fence, ticket))
		return;
	pull_nak(&T.pull, m, TIMER_RETRY_NAK_MS);
	fence_done(&W.fence);
	if (mono_ms() - last_log >= 10000) {
		log_warnx("timer writer: cannot arm %s yet, retrying: %s", natsMsg_GetSubject(m), why);
		last_log = mono_ms();
	}
}

static int
check_headers(natsMsg *m, char *why, size_t whylen)
{
	const char **keys = NULL;
	int n = 0, rc;

	if (natsMsgHeader_Keys(m, &keys, &n) != NATS_OK)
		return 0;
	rc = timer_headers_check(keys, n, why, whylen);
	free(keys);
	return rc;
}

static void
handle(natsMsg *m, uint64_t ticket)
{
	char why[TIMER_WHY_MAX], err[1024], key[TIMER_KEY_MAX];
	struct timer_subject ts;
	struct timer_request r;
	enum timer_fence v;
	char *rec = NULL;
	size_t len = 0;
	uint64_t rev;
	int rc;

	worker_count(C_REQUESTS, 1);
	if (timer_subject_parse(natsMsg_GetSubject(m), T.prefix, TIMER_SCHEDULE, &ts, why,
	    sizeof(why)) != 0 || check_headers(m, why, sizeof(why)) != 0 ||
	    timer_request_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), ts.timer_id,
	    &r, why, sizeof(why)) != 0 || !timer_record_key(&ts, key, sizeof(key))) {
		refuse(m, ticket, why);
		return;
	}
	/* The fencing read: only a checkpoint still waiting on exactly this
	 * generation and deadline is armed. */
	if ((rc = kvcas_read(T.js, T.bucket, key, &rec, &len, &rev, err, sizeof(err))) < 0) {
		retry(m, ticket, err);
		return;
	}
	v = timer_fence_verdict(rc == 1 ? rec : NULL, len, &r);
	free(rec);
	if (v == TIMER_ARM && (rc = arm(&ts, &r, ticket, err, sizeof(err))) != 0) {
		if (rc == -1)
			retry(m, ticket, err);
		return;
	}
	if (!fence_begin(&W.fence, ticket))
		return;
	pull_ack(&T.pull, m);
	fence_done(&W.fence);
	if (v != TIMER_ARM)
		log_info("timer writer: discarded %s (%s)", natsMsg_GetSubject(m), timer_fence_name(v));
}

/* ---- the worker as the scheduler ---- */

/* Fire a due entry once: 0 (fired now or before), -1 (try again later). */
static int
fire(struct timer_armed *a)
{
	char subj[TIMER_SUBJECT_MAX], body[TIMER_BODY_MAX], err[1024];
	const char *by[] = { "Nats-Scheduler", a->subject, NULL };
	struct timer_request r = { .generation = a->generation, .deadline = a->deadline };
	uint64_t ticket = fence_ticket(&W.fence);
	struct timer_subject ts;
	size_t len;

	if (timer_subject_parse(a->subject, T.prefix, TIMER_ARMED, &ts, err, sizeof(err)) != 0 ||
	    !timer_sibling(a->subject, TIMER_FIRE, subj, sizeof(subj)) ||
	    (len = timer_body_format(ts.timer_id, &r, body, sizeof(body))) == 0) {
		a->fired = true; /* only parsed .armed subjects enter the set */
		return 0;
	}
	for (int i = 0; i < TIMER_CAS_TRIES; i++) {
		struct timer_request last;
		uint64_t seq;
		int rc;
		if (last_on(subj, ts.timer_id, &seq, &last, err, sizeof(err)) < 0)
			break;
		if (last.generation >= a->generation) {
			a->fired = true;
			return 0;
		}
		if (!fence_begin(&W.fence, ticket))
			return -1;
		rc = publish_cas(subj, body, len, seq, by, err, sizeof(err));
		fence_done(&W.fence);
		if (rc < 0)
			break;
		if (rc == 0) {
			a->fired = true;
			worker_count(C_FIRED, 1);
			log_info("timer writer: fired %s (generation %" PRIu64 ")", subj,
			    a->generation);
			return 0;
		}
		snprintf(err, sizeof(err), "lost the compare-and-set %d times", TIMER_CAS_TRIES);
	}
	log_warnx("timer writer: cannot fire %s yet, retrying: %s", subj, err);
	return -1;
}

static void
fire_due(void)
{
	long i;

	if (T.broker_fires || mono_ms() < T.fire_retry_at)
		return;
	while (worker_serving() && (i = timer_set_due(&T.armed, wall_ms())) >= 0)
		if (fire(&T.armed.v[i]) != 0) {
			T.fire_retry_at = mono_ms() + TIMER_FIRE_RETRY_MS;
			return;
		}
}

/* The armed set from the latest .armed message of each subject. */
static int
rebuild(char *err, size_t errlen)
{
	char filter[SPACE_TOKEN_MAX + 32];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	jsOptions o;
	natsStatus s;
	int rc = 0;

	snprintf(filter, sizeof(filter), "%s.ept.*.*.*.*.armed", T.prefix);
	jsOptions_Init(&o);
	o.Stream.Info.SubjectsFilter = filter;
	if ((s = js_GetStreamInfo(&si, T.js, T.stream, &o, &jerr)) != NATS_OK) {
		conn_jserror("stream info", s, jerr, err, errlen);
		return -1;
	}
	for (int i = 0; si->State.Subjects != NULL && i < si->State.Subjects->Count; i++) {
		const char *subj = si->State.Subjects->List[i].Subject;
		struct timer_subject ts;
		struct timer_request r;
		char why[TIMER_WHY_MAX];
		uint64_t seq;
		if (timer_subject_parse(subj, T.prefix, TIMER_ARMED, &ts, why, sizeof(why)) != 0)
			continue;
		if ((rc = last_on(subj, ts.timer_id, &seq, &r, err, errlen)) < 0)
			break;
		if (rc == 1 && r.generation > 0)
			keep_armed(subj, &r);
		rc = 0;
	}
	jsStreamInfo_Destroy(si);
	return rc;
}

/* ---- set-up and the loop ---- */

static void
teardown(void)
{
	pull_close(&T.pull);
	jsCtx_Destroy(T.js);
	T.js = NULL;
	timer_set_free(&T.armed);
}

static int
setup(char *err, size_t errlen)
{
	char token[SPACE_TOKEN_MAX + 1], filter[SPACE_TOKEN_MAX + 32], req[SPACE_TOKEN_MAX + 16];
	char durable[SPACE_TOKEN_MAX + 8];
	jsConsumerConfig cc;

	space_token(W.cfg.space, token, sizeof(token));
	snprintf(T.prefix, sizeof(T.prefix), "cotal.%s", token);
	snprintf(T.stream, sizeof(T.stream), "EPT_%s", token);
	snprintf(T.bucket, sizeof(T.bucket), "cotal_records_%s", token);
	snprintf(req, sizeof(req), "EPT_REQ_%s", token);
	snprintf(durable, sizeof(durable), "timerw_%s", token);
	snprintf(filter, sizeof(filter), "%s.ept.*.*.*.*.schedule", T.prefix);
	if (natsConnection_JetStream(&T.js, W.nc, NULL) != NATS_OK) {
		snprintf(err, errlen, "cannot make a JetStream context");
		return -1;
	}
	if (probe_broker(err, errlen) != 0)
		return -1;
	/* WIRE.md §3: durable pull, explicit ack; deliver all, so requests
	 * published before the writer first ran are armed too. */
	jsConsumerConfig_Init(&cc);
	cc.Durable = durable;
	cc.FilterSubject = filter;
	cc.AckPolicy = js_AckExplicit;
	cc.DeliverPolicy = js_DeliverAll;
	if (pull_bind(T.js, W.nc, W.cfg.inbox_prefix, req, &cc, &T.pull, err, errlen) != 0)
		return -1;
	return T.broker_fires ? 0 : rebuild(err, errlen);
}

static void
timer_run(void)
{
	char err[1024];
	natsMsgList list;

	while (worker_serving()) {
		if (setup(err, sizeof(err)) == 0)
			break;
		teardown();
		if (strstr(err, "permission denied") != NULL || strstr(err, "other settings") != NULL)
			fatalx("timer writer: cannot bind timerw on EPT_REQ: %s", err);
		log_warnx("timer writer: cannot bind yet: %s; retrying", err);
		worker_nap(PULL_SETUP_RETRY_MS);
	}
	if (!worker_serving()) {
		teardown();
		return;
	}
	/* The supervisor writes WIRE.md §8's "timer writer up" on READY. */
	log_ok("timer writer: bound on EPT_REQ (space %s)", W.cfg.space);
	worker_bound();
	while (worker_wait_open()) {
		fire_due();
		/* Until the next deadline; what is still due failed to fire
		 * and waits for its retry. */
		int64_t wait = timer_set_next(&T.armed) - wall_ms();
		wait = wait < 1 || wait > TIMER_WAIT_MS ? TIMER_WAIT_MS : wait;
		if (pull_fetch(&T.pull, TIMER_BATCH, (int)wait, &list) != NATS_OK) {
			natsMsgList_Destroy(&list);
			worker_nap(PULL_ERROR_NAP_MS);
			continue;
		}
		uint64_t ticket = fence_ticket(&W.fence);
		for (int i = 0; i < list.Count && worker_serving(); i++)
			handle(list.Msgs[i], ticket);
		natsMsgList_Destroy(&list);
	}
	teardown();
}

const struct worker_role timer_role = {
	.name = "timer",
	.sandbox = SANDBOX_TIMER,
	.run = timer_run,
};
