/* The KV mirror (see kvmirror.h). */
#include "lib/nats/kvmirror.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <stdlib.h>

#include "lib/clock.h"
#include "lib/nats/kvwatch.h"
#include "lib/strmap.h"
#include "lib/nats/natsconn.h"

#define WATCH_POLL_MS 250
#define WATCH_RETRY_MS 250

static void
nap(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* An entry of a replay, kept aside until the whole replay is in. */
struct kvmirror_staged {
	char *key;
	char *value; /* NULL: deleted or purged */
	size_t len;
	uint64_t revision;
	int64_t created_ms;
	char *origin;
};

static void
stage_clear(struct kvmirror *m)
{
	for (size_t i = 0; i < m->nstaged; i++) {
		free(m->staged[i].key);
		free(m->staged[i].value);
		free(m->staged[i].origin);
	}
	free(m->staged);
	m->staged = NULL;
	m->nstaged = m->capstaged = m->staged_bytes = 0;
}

/* The bytes a replay may hold aside; a test build may set fewer
 * (COTAL_TEST_STAGE_MAX) to reach the bound with a small space. */
static size_t
stage_max(void)
{
#ifdef COTAL_TEST_HOOKS
	const char *v = getenv("COTAL_TEST_STAGE_MAX");
	if (v != NULL && atol(v) > 0)
		return (size_t)atol(v);
#endif
	return KVMIRROR_STAGE_MAX;
}

/* 0, or -1 with why when the replay would pass KVMIRROR_STAGE_MAX or
 * memory runs out. */
static int
stage_add(struct kvmirror *m, const struct kvw_entry *e, char *why, size_t whylen)
{
	size_t klen = strlen(e->key), need = klen + 1 + (e->value ? e->len + 1 : 0) +
	    (e->origin ? strlen(e->origin) + 1 : 0) + sizeof(*m->staged);
	struct kvmirror_staged *st;

	if (m->staged_bytes + need > stage_max()) {
		snprintf(why, whylen, "the replay of %.180s passes %zu bytes", m->bucket,
		    stage_max());
		return -1;
	}
	if (m->nstaged == m->capstaged) {
		size_t cap = m->capstaged ? m->capstaged * 2 : 256;
		if ((st = realloc(m->staged, cap * sizeof(*st))) == NULL)
			goto oom;
		m->staged = st;
		m->capstaged = cap;
	}
	st = &m->staged[m->nstaged];
	memset(st, 0, sizeof(*st));
	if ((st->key = malloc(klen + 1)) == NULL)
		goto oom;
	memcpy(st->key, e->key, klen + 1);
	if (e->value != NULL) {
		if ((st->value = malloc(e->len + 1)) == NULL) {
			free(st->key);
			goto oom;
		}
		memcpy(st->value, e->value, e->len);
		st->value[e->len] = '\0';
	}
	if (e->origin != NULL && (st->origin = strdup(e->origin)) == NULL) {
		free(st->key);
		free(st->value);
		goto oom;
	}
	st->len = e->len;
	st->revision = e->revision;
	st->created_ms = e->created_ms;
	m->nstaged++;
	m->staged_bytes += need;
	return 0;
oom:
	snprintf(why, whylen, "out of memory holding the replay of %.180s", m->bucket);
	return -1;
}

static int last_seq(struct kvmirror *m, uint64_t *out, char *err, size_t errlen);

static natsConnection *
natsConn_of(struct kvmirror *m)
{
	return m->nc;
}

/* (Re)start the watch; the whole bucket is delivered again, into the
 * stage: the owner's state stays as it is until the replay is complete. */
static int
start_watch(struct kvmirror *m)
{
	struct kvwatch *w = NULL;
	char why[sizeof(m->error)];
	int rc;

	uint64_t from = 0;

	stage_clear(m);
	pthread_mutex_lock(&m->mu);
	m->loaded = false;
	pthread_mutex_unlock(&m->mu);
	if (m->tail) {
		/* A tail starts after the bucket's last sequence: the first
		 * one at the sequence its start read, a rebuilt one at the one
		 * read now (the owner forgets what it held: it may have missed
		 * writes meanwhile). */
		uint64_t last = m->start_last;
		if (m->ever_loaded && last_seq(m, &last, why, sizeof(why)) != 0) {
			pthread_mutex_lock(&m->mu);
			snprintf(m->error, sizeof(m->error), "%s", why);
			pthread_mutex_unlock(&m->mu);
			return -1;
		}
		from = last + 1;
		pthread_mutex_lock(&m->mu);
		if (m->rebuild_floor < last)
			m->rebuild_floor = last;
		pthread_mutex_unlock(&m->mu);
	}
	rc = kvwatch_start_at(&w, m->nc, m->inbox_prefix, m->bucket, ">", from, why, sizeof(why));
	pthread_mutex_lock(&m->mu);
	if (rc != 0) {
		snprintf(m->error, sizeof(m->error), "%s", why);
		pthread_mutex_unlock(&m->mu);
		return -1;
	}
	m->watcher = w;
	m->want_rebuild = false;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static void
drop_watch(struct kvmirror *m)
{
	struct kvwatch *w;

	pthread_mutex_lock(&m->mu);
	w = m->watcher;
	m->watcher = NULL;
	pthread_mutex_unlock(&m->mu);
	kvwatch_destroy(w);
}

static void *
watch_thread(void *arg)
{
	struct kvmirror *m = arg;
	struct kvw_entry e;
	char why[sizeof(m->error)];
	bool replaying = false; /* the current watch's initial state, staged */

	for (;;) {
		pthread_mutex_lock(&m->mu);
		bool stop = m->stop, rebuild = m->want_rebuild || m->watcher == NULL;
		struct kvwatch *w = m->watcher;
		pthread_mutex_unlock(&m->mu);
		if (stop)
			break;
		if (rebuild) {
			drop_watch(m);
			replaying = start_watch(m) == 0;
			if (!replaying) {
				nap(WATCH_RETRY_MS);
				continue;
			}
			/* The first load goes straight to the owner (see kvmirror.h),
			 * from a reset as every load: the owner may hold the state
			 * of a mirror it closed before (a retried bind) or of a
			 * load cut short. */
			pthread_mutex_lock(&m->mu);
			if (!m->ever_loaded || m->tail) {
				replaying = false;
				m->reset(m->arg);
			}
			pthread_mutex_unlock(&m->mu);
			continue;
		}
		enum kvw_event ev = kvwatch_next(w, WATCH_POLL_MS, &e, why, sizeof(why));
		if (ev == KVW_TIMEOUT)
			continue;
		if (ev == KVW_ENTRY)
			atomic_store(&m->progress_ms, mono_ms());
		if (ev == KVW_ENTRY && replaying) {
			if (stage_add(m, &e, why, sizeof(why)) == 0)
				continue;
			ev = KVW_LOST; /* watched again after a pause */
		}
		if (ev == KVW_LOST) {
			replaying = false;
			stage_clear(m);
		}
		pthread_mutex_lock(&m->mu);
		if (ev == KVW_LOST) {
			/* Stopped (a rebuild or close asked for it), out of
			 * order, silent, or the connection is gone: watch
			 * again once we can. */
			if (!m->stop) {
				snprintf(m->error, sizeof(m->error), "%s", why);
				m->want_rebuild = true;
			}
			pthread_mutex_unlock(&m->mu);
			nap(WATCH_POLL_MS / 5);
			continue;
		}
		if (ev == KVW_LOADED) {
			/* The initial state is in: it replaces the old one at
			 * once, and the mirror is current as of the watch's
			 * creation, hence as of the rebuild's floor. */
			if (replaying)
				m->reset(m->arg);
			for (size_t i = 0; i < m->nstaged; i++) {
				const struct kvmirror_staged *st = &m->staged[i];
				struct kvw_entry se = { .key = st->key, .value = st->value,
				    .len = st->len, .revision = st->revision,
				    .created_ms = st->created_ms, .origin = st->origin };
				m->apply(m->arg, &se);
				if (st->revision > m->applied)
					m->applied = st->revision;
			}
			replaying = false;
			m->loaded = true;
			m->ever_loaded = true;
			if (m->applied < m->rebuild_floor)
				m->applied = m->rebuild_floor;
			m->rebuilds++;
			m->error[0] = '\0';
		} else {
			m->apply(m->arg, &e);
			if (e.revision > m->applied)
				m->applied = e.revision;
		}
		/* A barrier waits for a loaded watch: before that, waking it
		 * at every entry of a load would only put it back to sleep. */
		if (m->loaded)
			pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		if (ev == KVW_LOADED)
			stage_clear(m);
	}
	drop_watch(m);
	stage_clear(m);
	return NULL;
}

/* The bucket's last stream sequence. */
static int
last_seq(struct kvmirror *m, uint64_t *out, char *err, size_t errlen)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s = js_GetStreamInfo(&si, m->js, m->stream, NULL, &jerr);
	char why[512];

	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "stream info %s: %s", m->stream, why);
		return -1;
	}
	*out = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return 0;
}

static bool
current(const struct kvmirror *m, uint64_t last)
{
	return m->loaded && m->applied >= last;
}

/* A watch loading its initial state that took an entry within the last
 * KVMIRROR_BARRIER_MS: it is not silent, only large. */
static bool
loading(const struct kvmirror *m)
{
	return m->watcher != NULL && !m->loaded &&
	    mono_ms() - atomic_load(&m->progress_ms) < KVMIRROR_BARRIER_MS;
}

/* Wait (mu held) up to ms until m has applied last with at least
 * min_rebuilds loads done; past ms, as long as a load is under way and
 * moving (issue 39: a large bucket's load was cut short after 1 s and
 * started again, or failed after 10 s, so a large space started slowly or
 * never). Whether it has. */
static bool
wait_current(struct kvmirror *m, uint64_t last, uint64_t min_rebuilds, int ms)
{
	struct timespec dl = deadline_in_ms(CLOCK_REALTIME, ms);

	while (!(m->rebuilds >= min_rebuilds && current(m, last))) {
		if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) != ETIMEDOUT)
			continue;
		if (!loading(m))
			break;
		dl = deadline_in_ms(CLOCK_REALTIME, KVMIRROR_BARRIER_MS);
	}
	return m->rebuilds >= min_rebuilds && current(m, last);
}

/* Wait until m has applied last (rebuilding the watch if it does not). */
static int
barrier_wait(struct kvmirror *m, uint64_t last, char *err, size_t errlen)
{
	uint64_t target;
	int rc = 0;

	pthread_mutex_lock(&m->mu);
	if (wait_current(m, last, 0, KVMIRROR_BARRIER_MS))
		goto out;
	/* The watch did not catch up (silent after a broker restart, or the
	 * last message is no longer held): read the bucket again. */
	if (m->rebuild_floor < last)
		m->rebuild_floor = last;
	m->want_rebuild = true;
	target = m->rebuilds + 1;
	if (m->watcher != NULL)
		kvwatch_stop(m->watcher);
	if (!wait_current(m, last, target, KVMIRROR_REBUILD_MS)) {
		snprintf(err, errlen, "the watch of %s is not current (%s)", m->bucket,
		    m->error[0] ? m->error : "no answer");
		rc = -1;
	}
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int
kvmirror_barrier(struct kvmirror *m, char *err, size_t errlen)
{
	uint64_t last;

	if (last_seq(m, &last, err, errlen) != 0)
		return -1;
	return barrier_wait(m, last, err, errlen);
}

#define BARRIER_MAX 8
#define BARRIER_TIMEOUT_MS 5000
#define BARRIER_SLICE_MS 100 /* the wait looks for a failover this often */
#define BARRIER_RESEND_MS 1000 /* an unanswered STREAM.INFO is asked again this often */

/* STREAM.INFO of each mirror not yet answered (got[i] false), answered
 * to <base>.<i>: the index of the first that could not be sent, or -1. */
static int
ask_last_seqs(natsConnection *nc, struct kvmirror *const *m, int n, const bool *got,
	      const char *base)
{
	char subj[KVMIRROR_BUCKET_MAX + 32], reply[256];
	int failed = -1;

	for (int i = 0; i < n; i++) {
		if (got[i])
			continue;
		snprintf(subj, sizeof(subj), "$JS.API.STREAM.INFO.%s", m[i]->stream);
		snprintf(reply, sizeof(reply), "%s.%d", base, i);
		if (natsConnection_PublishRequest(nc, subj, reply, NULL, 0) != NATS_OK &&
		    failed < 0)
			failed = i;
	}
	natsConnection_Flush(nc);
	return failed;
}

int
kvmirror_barrier_all(struct kvmirror *const *m, int n, char *err, size_t errlen)
{
	natsConnection *nc;
	natsSubscription *sub = NULL;
	uint64_t last[BARRIER_MAX] = { 0 };
	bool got[BARRIER_MAX] = { false };
	char reply[256], why[512];
	int left = n, rc = -1;
	bool asked_again = false;

	if (n <= 0 || n > BARRIER_MAX)
		return n == 0 ? 0 : -1;
	nc = natsConn_of(m[0]);
	/* Under the credential's own reply prefix: it may subscribe nowhere
	 * else. */
	char uniq[64], base[200];
	if (conn_unique_token(uniq, sizeof(uniq)) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(base, sizeof(base), "%s.%s", m[0]->inbox_prefix, uniq);
	snprintf(reply, sizeof(reply), "%s.*", base);
	if (natsConnection_SubscribeSync(&sub, nc, reply) != NATS_OK) {
		snprintf(err, errlen, "cannot subscribe for the barrier's answers");
		goto out;
	}
	uint64_t epoch = conn_reconnects(nc);
	int64_t until = mono_ms() + BARRIER_TIMEOUT_MS, resend_at = mono_ms() + BARRIER_RESEND_MS;
	int unsent = ask_last_seqs(nc, m, n, got, base);
	if (unsent >= 0) {
		snprintf(err, errlen, "stream info %s: cannot send the request", m[unsent]->stream);
		goto out;
	}
	while (left > 0) {
		natsMsg *r = NULL;
		int64_t wait = until - mono_ms();
		natsStatus s = natsSubscription_NextMsg(&r, sub,
		    wait > BARRIER_SLICE_MS ? BARRIER_SLICE_MS : wait > 0 ? wait : 1);
		if (s == NATS_TIMEOUT && mono_ms() < until) {
			/* Unanswered: sent to a server that is gone (a failover
			 * since), or to a stream electing its leader, which does
			 * not answer until it has one. Ask again every
			 * BARRIER_RESEND_MS (an answer comes as soon as one can;
			 * a second answer is ignored), and after a failover with
			 * the whole wait again. */
			bool failed_over = conn_reconnects(nc) != epoch;
			if (failed_over || mono_ms() >= resend_at) {
				(void)ask_last_seqs(nc, m, n, got, base);
				asked_again = true;
				resend_at = mono_ms() + BARRIER_RESEND_MS;
			}
			if (failed_over) {
				epoch = conn_reconnects(nc);
				until = mono_ms() + BARRIER_TIMEOUT_MS;
			}
			continue;
		}
		if (s != NATS_OK) {
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "stream info of the mirrored buckets: %s", why);
			goto out;
		}
		const char *dot = strrchr(natsMsg_GetSubject(r), '.');
		int i = dot ? atoi(dot + 1) : -1;
		json_t *doc = json_loadb(natsMsg_GetData(r), (size_t)natsMsg_GetDataLength(r), 0, NULL);
		json_t *ls = json_object_get(json_object_get(doc, "state"), "last_seq");
		if (i >= 0 && i < n && !got[i] && json_is_integer(ls)) {
			last[i] = (uint64_t)json_integer_value(ls);
			got[i] = true;
			left--;
		} else if (i >= 0 && i < n && !got[i]) {
			const char *d = json_string_value(json_object_get(json_object_get(doc, "error"),
			    "description"));
			snprintf(err, errlen, "stream info %s: %s", m[i]->stream, d ? d : "no state");
			json_decref(doc);
			natsMsg_Destroy(r);
			goto out;
		}
		json_decref(doc);
		natsMsg_Destroy(r);
	}
	rc = 0;
	for (int i = 0; i < n && rc == 0; i++)
		rc = barrier_wait(m[i], last[i], err, errlen);
out:
	/* Each request asked once and answered: nothing more comes to this
	 * inbox, and the fan-out's batch pays no flush. Asked again, or left
	 * unanswered, a late answer may still come (natsconn.h). */
	if (left == 0 && !asked_again)
		natsSubscription_Destroy(sub);
	else
		conn_sub_close(nc, sub, CONN_SUB_FLUSH_MS);
	return rc;
}

static int start(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
		 const char *bucket, kvmirror_apply_fn apply, kvmirror_reset_fn reset,
		 bool tail, void *arg, char *err, size_t errlen);

int
kvmirror_open(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	      const char *bucket, kvmirror_apply_fn apply,
	      kvmirror_reset_fn reset, void *arg, char *err, size_t errlen)
{
	if (kvmirror_start(m, nc, inbox_prefix, js, bucket, apply, reset, arg, err, errlen) != 0)
		return -1;
	return kvmirror_loaded(m, err, errlen);
}

int
kvmirror_loaded(struct kvmirror *m, char *err, size_t errlen)
{
	return barrier_wait(m, m->start_last, err, errlen);
}

int
kvmirror_start(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	       const char *bucket, kvmirror_apply_fn apply, kvmirror_reset_fn reset,
	       void *arg, char *err, size_t errlen)
{
	return start(m, nc, inbox_prefix, js, bucket, apply, reset, false, arg, err, errlen);
}

int
kvmirror_start_tail(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix,
		    jsCtx *js, const char *bucket, kvmirror_apply_fn apply,
		    kvmirror_reset_fn reset, void *arg, char *err, size_t errlen)
{
	return start(m, nc, inbox_prefix, js, bucket, apply, reset, true, arg, err, errlen);
}

static int
start(struct kvmirror *m, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
      const char *bucket, kvmirror_apply_fn apply, kvmirror_reset_fn reset,
      bool tail, void *arg, char *err, size_t errlen)
{
	char why[512];
	natsStatus s;
	uint64_t last;

	memset(m, 0, sizeof(*m));
	m->tail = tail;
	if (strlen(bucket) >= sizeof(m->bucket)) {
		snprintf(err, errlen, "bucket name too long");
		return -1;
	}
	strcpy(m->bucket, bucket);
	snprintf(m->stream, sizeof(m->stream), "KV_%s", bucket);
	m->js = js;
	m->nc = nc;
	snprintf(m->inbox_prefix, sizeof(m->inbox_prefix), "%s", inbox_prefix);
	m->apply = apply;
	m->reset = reset;
	m->arg = arg;
	s = js_KeyValue(&m->kv, js, bucket);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "bind bucket %s: %s", bucket, why);
		return -1;
	}
	/* The bucket's last sequence, read before the watch exists: the
	 * watch's first load is current as of it even when the entries at the
	 * bucket's tail are gone (a presence row past its max age, a purge).
	 * Read after, such a tail cost every start a whole barrier's wait and
	 * a second load (1.1 s of each planned restart's fan-out bind). */
	if (last_seq(m, &last, err, errlen) != 0) {
		kvStore_Destroy(m->kv);
		m->kv = NULL;
		return -1;
	}
	m->rebuild_floor = last;
	m->start_last = last;
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	m->want_rebuild = true;
	if (pthread_create(&m->thread, NULL, watch_thread, m) != 0) {
		snprintf(err, errlen, "cannot start the watch thread of %s", bucket);
		kvStore_Destroy(m->kv);
		m->kv = NULL;
		return -1;
	}
	return 0;
}

void
kvmirror_lock(struct kvmirror *m)
{
	pthread_mutex_lock(&m->mu);
}

void
kvmirror_unlock(struct kvmirror *m)
{
	pthread_mutex_unlock(&m->mu);
}

void
kvmirror_close(struct kvmirror *m)
{
	if (m->kv == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	if (m->watcher != NULL)
		kvwatch_stop(m->watcher);
	pthread_mutex_unlock(&m->mu);
	pthread_join(m->thread, NULL);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->cv);
	kvStore_Destroy(m->kv);
	m->kv = NULL;
}
