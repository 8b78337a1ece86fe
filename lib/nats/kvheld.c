/* The rows of a bucket a worker met, held exactly (see kvheld.h). */
#include "lib/nats/kvheld.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/nats/kvcas.h"
#include "lib/nats/kvwatch.h"
#include "lib/nats/natsconn.h"
#include "lib/nats/msgget.h"
#include "lib/subject.h"

/* A row held, with the stream sequence it was written at. */
struct kvheld_obj {
	void *obj;
	uint64_t rev;
};

static void
obj_free(struct kvheld *h, struct kvheld_obj *o)
{
	if (o == NULL)
		return;
	h->free_obj(o->obj);
	free(o);
}

static void
clear(struct kvheld *h, struct strmap *m)
{
	struct strmap_node *n;

	for (size_t i = 0; i < m->nslots; i++)
		for (n = m->slots[i]; n != NULL; n = n->next)
			obj_free(h, n->value);
	strmap_clear(m, NULL);
}

void
kvheld_init(struct kvheld *h, size_t max, kvheld_decode_fn decode, kvheld_free_fn free_obj,
	    kvheld_write_fn on_write, kvheld_reset_fn on_reset, void *arg)
{
	strmap_init(&h->cur);
	strmap_init(&h->old);
	strmap_init(&h->asking);
	strmap_init(&h->loading);
#ifdef COTAL_TEST_HOOKS
	/* A test build may hold fewer (COTAL_TEST_HELD_MAX), to reach the
	 * bound with a small space. */
	const char *v = getenv("COTAL_TEST_HELD_MAX");
	if (v != NULL && atol(v) > 0 && (size_t)atol(v) < max)
		max = (size_t)atol(v);
#endif
	h->max = max < 2 ? 2 : max;
	h->decode = decode;
	h->free_obj = free_obj;
	h->on_write = on_write;
	h->on_reset = on_reset;
	h->arg = arg;
	h->reads = h->turns = h->loads = 0;
}

void
kvheld_free(struct kvheld *h)
{
	clear(h, &h->cur);
	clear(h, &h->old);
	strmap_clear(&h->asking, free);
	strmap_clear(&h->loading, free);
}

int
kvheld_start(struct kvheld *h, natsConnection *nc, const char *inbox_prefix, jsCtx *js,
	     const char *bucket, size_t max, kvheld_decode_fn decode, kvheld_free_fn free_obj,
	     kvheld_write_fn on_write, kvheld_reset_fn on_reset, void *arg, char *err,
	     size_t errlen)
{
	kvheld_init(h, max, decode, free_obj, on_write, on_reset, arg);
	return kvmirror_start_tail(&h->tail, nc, inbox_prefix, js, bucket, kvheld_apply,
	    kvheld_reset, h, err, errlen);
}

void
kvheld_close(struct kvheld *h)
{
	kvmirror_close(&h->tail);
	kvheld_free(h);
}

void
kvheld_lock(struct kvheld *h)
{
	kvmirror_lock(&h->tail);
}

void
kvheld_unlock(struct kvheld *h)
{
	kvmirror_unlock(&h->tail);
}

/* The held row of key and the generation holding it. */
static struct kvheld_obj *
held(struct kvheld *h, const char *key, struct strmap **in)
{
	struct kvheld_obj *o;

	if ((o = strmap_get(&h->cur, key)) != NULL) {
		*in = &h->cur;
		return o;
	}
	*in = &h->old;
	return strmap_get(&h->old, key);
}

void *
kvheld_get(struct kvheld *h, const char *key)
{
	struct kvheld_obj *o = strmap_get(&h->cur, key);

	if (o == NULL && (o = strmap_get(&h->old, key)) != NULL) {
		/* Used again: it moves to the newer generation (no turn here:
		 * a caller may hold rows got before, under the same lock). */
		strmap_del(&h->old, key);
		if (strmap_put(&h->cur, key, o, NULL) != 0) {
			obj_free(h, o);
			return NULL;
		}
	}
	return o != NULL ? o->obj : NULL;
}

void
kvheld_changed(struct kvheld *h, const char *key)
{
	struct kvheld_ask *a = strmap_get(&h->asking, key);

	if (a != NULL)
		a->changed = true;
}

void
kvheld_apply(void *arg, const struct kvw_entry *e)
{
	struct kvheld *h = arg;
	struct kvheld_obj *o;
	struct strmap *in;

	kvheld_changed(h, e->key);
	if (h->loading.count > 0)
		for (size_t i = 0; i < h->loading.nslots; i++)
			for (struct strmap_node *n = h->loading.slots[i]; n != NULL; n = n->next)
				if (subject_match(n->key, e->key))
					((struct kvheld_ask *)n->value)->changed = true;
	/* A held row goes at a write after the one it was read at; one the
	 * read already saw (the tail is behind the bucket) changes nothing. */
	if ((o = held(h, e->key, &in)) != NULL && e->revision > o->rev)
		obj_free(h, strmap_del(in, e->key));
	if (h->on_write != NULL)
		h->on_write(h->arg, e);
}

void
kvheld_reset(void *arg)
{
	struct kvheld *h = arg;
	struct strmap_node *n;

	/* The tail was rebuilt: writes may have passed unseen. */
	clear(h, &h->cur);
	clear(h, &h->old);
	for (size_t i = 0; i < h->asking.nslots; i++)
		for (n = h->asking.slots[i]; n != NULL; n = n->next)
			((struct kvheld_ask *)n->value)->changed = true;
	for (size_t i = 0; i < h->loading.nslots; i++)
		for (n = h->loading.slots[i]; n != NULL; n = n->next)
			((struct kvheld_ask *)n->value)->changed = true;
	if (h->on_reset != NULL)
		h->on_reset(h->arg);
}

int
kvheld_read_begin(struct kvheld *h, const char *key)
{
	struct kvheld_ask *a = strmap_get(&h->asking, key);

	if (a != NULL) {
		/* Two reads of one key at once: neither is held. */
		a->readers++;
		a->changed = true;
		return 0;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return -1;
	a->readers = 1;
	if (strmap_put(&h->asking, key, a, NULL) != 0) {
		free(a);
		return -1;
	}
	return 0;
}

bool
kvheld_read_end(struct kvheld *h, const char *key)
{
	struct kvheld_ask *a = strmap_get(&h->asking, key);
	bool clean;

	if (a == NULL)
		return false;
	clean = !a->changed && a->readers == 1;
	if (--a->readers == 0)
		free(strmap_del(&h->asking, key));
	return clean;
}

/* Hold what key's row, written at rev, decodes to (newer than what is
 * held of it); the older generation is dropped when the newer holds half
 * the bound. */
static void
hold(struct kvheld *h, const char *key, const char *value, size_t len, uint64_t rev)
{
	struct kvheld_obj *o, *prev;
	struct strmap *in;
	void *obj;

	if ((obj = h->decode(key, value, len)) == NULL)
		return;
	if ((prev = held(h, key, &in)) != NULL) {
		if (prev->rev >= rev) {
			h->free_obj(obj);
			return;
		}
		obj_free(h, strmap_del(in, key));
	}
	if (h->cur.count >= h->max / 2) {
		clear(h, &h->old);
		h->old = h->cur;
		strmap_init(&h->cur);
		h->turns++;
	}
	if ((o = malloc(sizeof(*o))) == NULL) {
		h->free_obj(obj);
		return; /* out of memory: held nothing, read again when met */
	}
	o->obj = obj;
	o->rev = rev;
	if (strmap_put(&h->cur, key, o, NULL) != 0)
		obj_free(h, o);
}

void
kvheld_read_done(struct kvheld *h, const char *key, const char *value, size_t len, uint64_t rev)
{
	if (kvheld_read_end(h, key))
		hold(h, key, value, len, rev);
}

int
kvheld_read_many(struct kvheld *h, const char *const *keys, size_t n, void **out, char *err,
		 size_t errlen)
{
	struct msgget_result *got = calloc(n ? n : 1, sizeof(*got));
	int rc = 0;

	if (got == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memset(out, 0, n * sizeof(*out));
	kvheld_lock(h);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (kvheld_read_begin(h, keys[i]) != 0) {
			for (size_t j = 0; j < i; j++)
				kvheld_read_end(h, keys[j]);
			snprintf(err, errlen, "out of memory");
			rc = -1;
		}
	kvheld_unlock(h);
	if (rc != 0) {
		free(got);
		return -1;
	}
	if (n > 0 && msgget_last_many(h->tail.nc, h->tail.inbox_prefix, h->tail.bucket, keys, n,
	    got, KVHELD_READ_MS, err, errlen) != 0)
		rc = -1;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (got[i].rc < 0 && got[i].rc != KVCAS_TOO_LARGE) {
			snprintf(err, errlen, "%s", got[i].err);
			rc = -1;
		}
	kvheld_lock(h);
	for (size_t i = 0; i < n; i++) {
		if (rc != 0) {
			kvheld_read_end(h, keys[i]);
			continue;
		}
		/* A value too large to be a row is one that does not decode: it
		 * will not next time either. */
		const char *v = got[i].rc == 1 ? got[i].value : NULL;
		out[i] = h->decode(keys[i], v, got[i].len);
		kvheld_read_done(h, keys[i], v, got[i].len, got[i].rev);
	}
	h->reads += rc == 0 ? n : 0;
	kvheld_unlock(h);
	for (size_t i = 0; i < n; i++)
		msgget_result_free(&got[i]);
	free(got);
	return rc;
}

int
kvheld_newer(struct kvmirror *tail, const char *pattern, uint64_t after, char *err,
	     size_t errlen)
{
	char api[KVMIRROR_BUCKET_MAX + 40], filter[KVMIRROR_BUCKET_MAX + KVWATCH_KEYS_MAX + 8];
	natsMsg *reply = NULL;
	json_t *req, *doc = NULL, *e;
	char *body = NULL;
	natsStatus s;
	int rc = -1;

	snprintf(api, sizeof(api), "$JS.API.STREAM.MSG.GET.%s", tail->stream);
	snprintf(filter, sizeof(filter), "$KV.%s.%s", tail->bucket, pattern);
	req = json_pack("{s:I, s:s}", "seq", (json_int_t)after + 1, "next_by_subj", filter);
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	s = natsConnection_RequestString(&reply, tail->nc, api, body, KVHELD_READ_MS);
	if (s != NATS_OK) {
		conn_strerror(s, err, errlen);
		goto out;
	}
	doc = json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), 0, NULL);
	if (json_is_object(json_object_get(doc, "message")))
		rc = 1;
	else if (json_integer_value(json_object_get(e = json_object_get(doc, "error"),
	    "err_code")) == 10037)
		rc = 0; /* no message found */
	else
		snprintf(err, errlen, "%s after %llu: %s", filter, (unsigned long long)after,
		    e != NULL && json_is_string(json_object_get(e, "description")) ?
		    json_string_value(json_object_get(e, "description")) : "no answer the broker "
		    "should give");
out:
	json_decref(req);
	json_decref(doc);
	free(body);
	natsMsg_Destroy(reply);
	return rc;
}

/* A load's rows, kept aside until the watch has given them all: held at
 * once then, or not at all when a write raced the load. */
struct loaded {
	char *key, *value;
	size_t len;
	uint64_t rev;
};

int
kvheld_load(struct kvheld *h, const char *pattern, const char *const *want, size_t n,
	    void **out, char *err, size_t errlen)
{
	struct kvheld_ask *ask;
	struct kvwatch *w = NULL;
	struct kvw_entry e;
	struct strmap at;    /* want's keys -> index + 1 */
	struct loaded *rows = NULL;
	size_t nrows = 0, cap = 0;
	uint64_t newest = 0; /* the highest sequence the watch gave */
	char why[512];
	int rc = 0;

	memset(out, 0, n * sizeof(*out));
	if (strlen(pattern) > KVWATCH_KEYS_MAX)
		return 1; /* too long a filter for a watch: read the keys wanted */
	strmap_init(&at);
	for (size_t i = 0; i < n; i++)
		if (strmap_put(&at, want[i], (void *)(i + 1), NULL) != 0) {
			strmap_clear(&at, NULL);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	kvheld_lock(h);
	if ((ask = strmap_get(&h->loading, pattern)) != NULL) {
		ask->readers++;
		ask->changed = true; /* two loads of one pattern at once: neither is held */
	} else if ((ask = calloc(1, sizeof(*ask))) == NULL ||
	    strmap_put(&h->loading, pattern, ask, NULL) != 0) {
		free(ask);
		ask = NULL;
	} else
		ask->readers = 1;
	kvheld_unlock(h);
	if (ask == NULL) {
		strmap_clear(&at, NULL);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (kvwatch_start_keys(&w, h->tail.nc, h->tail.inbox_prefix, h->tail.bucket, pattern, err,
	    errlen) != 0)
		rc = -1;
	else if (kvwatch_pending(w) > h->max / 4)
		rc = 1; /* more than it could hold: read the keys wanted instead */
	for (int64_t until = mono_ms() + KVHELD_READ_MS; rc == 0 && kvwatch_pending(w) > 0;) {
		enum kvw_event ev = kvwatch_next_by(w, until, &e, why, sizeof(why));
		if (ev == KVW_LOADED)
			break;
		if (ev != KVW_ENTRY) {
			snprintf(err, errlen, "the rows %.200s of %s: %s", pattern, h->tail.bucket, why);
			rc = -1;
			break;
		}
		if (e.revision > newest)
			newest = e.revision;
		size_t i = (size_t)strmap_get(&at, e.key);
		if (i > 0 && out[i - 1] == NULL)
			out[i - 1] = h->decode(e.key, e.value, e.len);
		if (nrows == cap) {
			cap = cap ? cap * 2 : 64;
			struct loaded *v = realloc(rows, cap * sizeof(*v));
			if (v == NULL) {
				snprintf(err, errlen, "out of memory");
				rc = -1;
				break;
			}
			rows = v;
		}
		rows[nrows].key = strdup(e.key);
		rows[nrows].value = e.value != NULL ? malloc(e.len + 1) : NULL;
		if (rows[nrows].value != NULL) {
			memcpy(rows[nrows].value, e.value, e.len); /* a value may hold a NUL */
			rows[nrows].value[e.len] = '\0';
		}
		rows[nrows].len = e.len;
		rows[nrows].rev = e.revision;
		if (rows[nrows].key == NULL || (e.value != NULL && rows[nrows].value == NULL)) {
			free(rows[nrows].key);
			free(rows[nrows].value);
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		nrows++;
	}
	kvwatch_destroy(w);
	/* The watch's consumer may sit on a replica behind the stream's leader
	 * (a clustered stream places a one-replica consumer on any of its
	 * peers): what it gave is the bucket as of that replica. The leader
	 * says whether a row matching came after the newest it gave; if one
	 * did (missed, or written meanwhile), nothing of it is used: the keys
	 * wanted are read from the leader instead (1). */
	if (rc == 0) {
		int newer = kvheld_newer(&h->tail, pattern, newest, err, errlen);
		if (newer != 0)
			rc = newer < 0 ? -1 : 1;
	}
	/* A key the watch did not give has no row. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (out[i] == NULL)
			out[i] = h->decode(want[i], NULL, 0);
	kvheld_lock(h);
	bool clean = !ask->changed && ask->readers == 1;
	if (--ask->readers == 0)
		free(strmap_del(&h->loading, pattern));
	for (size_t i = 0; i < nrows; i++) {
		if (rc == 0 && clean)
			hold(h, rows[i].key, rows[i].value, rows[i].len, rows[i].rev);
		free(rows[i].key);
		free(rows[i].value);
	}
	h->loads += rc == 0;
	kvheld_unlock(h);
	free(rows);
	strmap_clear(&at, NULL);
	if (rc != 0)
		for (size_t i = 0; i < n; i++) {
			if (out[i] != NULL)
				h->free_obj(out[i]);
			out[i] = NULL;
		}
	return rc;
}
