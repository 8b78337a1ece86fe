/* Many keys' last messages, pipelined (see msgget.h). */
#include "lib/nats/msgget.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/nats/natsconn.h"

#define SLICE_MS 100 /* the wait looks for a failover and for requests to ask again this often */
#define NO_MESSAGE_ERR 10037 /* JSNoMessageFoundErr: the key has no message */
#define HDR_LINE "NATS/1.0"
#define HDR_LINE_LEN 8

/* ---- one answer ---- */

static void __attribute__((format(printf, 4, 5)))
fail(struct msgget_result *out, const char *bucket, const char *key, const char *fmt, ...)
{
	va_list ap;
	int at;

	free(out->value);
	out->value = NULL;
	out->len = 0;
	out->rc = -1;
	/* At most 168 bytes: the reason has the rest. */
	at = snprintf(out->err, sizeof(out->err), "read %.64s/%.96s: ", bucket, key);
	va_start(ap, fmt);
	vsnprintf(out->err + at, sizeof(out->err) - (size_t)at, fmt, ap);
	va_end(ap);
}
/* The value of c in the standard base64 alphabet, or -1. */
static int
digit(char c)
{
	return base64_digit((unsigned char)c, false);
}

/* The length n bytes of padded standard base64 decode to (Go's
 * encoding/json writes []byte so), or -1 when n is not a whole number of
 * quartets. The characters are checked by b64_decode. */
static long
b64_len(const char *s, size_t n)
{
	size_t pad = 0;

	if (n % 4 != 0 || n / 4 * 3 > (size_t)MSGGET_REPLY_MAX)
		return -1;
	if (n > 0 && s[n - 1] == '=')
		pad++;
	if (n > 1 && s[n - 2] == '=')
		pad++;
	return (long)(n / 4 * 3 - pad);
}

/* Decode the n bytes of s (b64_len said how many come out) into out.
 * false on a character out of the alphabet or padding anywhere but at the
 * end. */
static bool
b64_decode(const char *s, size_t n, unsigned char *out)
{
	size_t j = 0;

	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int a = digit(s[i]), b = digit(s[i + 1]);
		int c = s[i + 2] == '=' && last && s[i + 3] == '=' ? -2 : digit(s[i + 2]);
		int d = s[i + 3] == '=' && last ? -2 : digit(s[i + 3]);
		if (a < 0 || b < 0 || c == -1 || d == -1)
			return false;
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)(c < 0 ? 0 : c) << 6 |
		    (uint32_t)(d < 0 ? 0 : d);
		out[j++] = (unsigned char)(v >> 16);
		if (c >= 0)
			out[j++] = (unsigned char)(v >> 8);
		if (d >= 0)
			out[j++] = (unsigned char)v;
	}
	return true;
}

/* Is the header value v (vl bytes, trimmed) the word w? */
static bool
word_is(const char *v, size_t vl, const char *w)
{
	return vl == strlen(w) && memcmp(v, w, vl) == 0;
}

/*
 * Whether a stored message's header block (decoded, n bytes) marks its key
 * deleted, as nats.c's KV reads it (src/kv.c): KV-Operation DEL or PURGE,
 * or, without a KV-Operation, a marker the server wrote itself
 * (Nats-Marker-Reason MaxAge, Purge or Remove: nats-server 2.11's subject
 * delete markers). Names are matched exactly, as nats.c and the server
 * match them; the first of a name counts. 1 a marker, 0 not, -1 when the
 * block is not a NATS header block at all.
 */
static int
marks_delete(const char *h, size_t n)
{
	const char *p, *end = h + n, *op = NULL, *reason = NULL;
	size_t opl = 0, reasonl = 0;

	if (n < HDR_LINE_LEN || memcmp(h, HDR_LINE, HDR_LINE_LEN) != 0)
		return -1;
	p = memchr(h, '\n', n);
	p = p != NULL ? p + 1 : end;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *next = eol != NULL ? eol + 1 : end, *e = eol != NULL ? eol : end;
		if (e > p && e[-1] == '\r')
			e--;
		if (e == p)
			break; /* the blank line: the block's end */
		const char *colon = memchr(p, ':', (size_t)(e - p));
		/* A folded line (a space first) continues its name's value;
		 * neither that nor a line without a name changes what a
		 * marker's name says. */
		if (colon != NULL && *p != ' ' && *p != '\t') {
			const char *a = colon + 1, *b = e;
			while (a < b && (*a == ' ' || *a == '\t'))
				a++;
			while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
				b--;
			size_t nl = (size_t)(colon - p);
			if (op == NULL && word_is(p, nl, "KV-Operation")) {
				op = a;
				opl = (size_t)(b - a);
			} else if (reason == NULL && word_is(p, nl, "Nats-Marker-Reason")) {
				reason = a;
				reasonl = (size_t)(b - a);
			}
		}
		p = next;
	}
	if (op != NULL)
		return word_is(op, opl, "DEL") || word_is(op, opl, "PURGE");
	return reason != NULL && (word_is(reason, reasonl, "MaxAge") ||
	    word_is(reason, reasonl, "Purge") || word_is(reason, reasonl, "Remove"));
}

/* The broker's error answer: the key has no message (rc 0), or its
 * words. */
static void
answer_error(const char *bucket, const char *key, json_t *e, struct msgget_result *out)
{
	json_t *code = json_object_get(e, "code"), *jerr = json_object_get(e, "err_code");
	const char *d = json_string_value(json_object_get(e, "description"));

	if (!json_is_object(e)) {
		fail(out, bucket, key, "the answer's \"error\" is not an object");
		return;
	}
	/* As nats.c tells it (src/jsm.c _unmarshalGetMsgResp): by the
	 * JetStream code, not the 404, which a missing stream answers too. */
	if (json_is_integer(jerr) && json_integer_value(jerr) == NO_MESSAGE_ERR) {
		out->rc = 0;
		return;
	}
	if (json_is_integer(jerr))
		fail(out, bucket, key, "%.120s (JetStream error %" JSON_INTEGER_FORMAT ")",
		    d ? d : "an error without a description", json_integer_value(jerr));
	else
		fail(out, bucket, key, "%.120s (code %" JSON_INTEGER_FORMAT ")",
		    d ? d : "an error without a description",
		    json_is_integer(code) ? json_integer_value(code) : 0);
}

/* A stored message: its sequence, whether it is a marker, its value. */
static void
answer_message(const char *bucket, const char *key, json_t *m, struct msgget_result *out)
{
	json_t *subj = json_object_get(m, "subject"), *seq = json_object_get(m, "seq");
	json_t *hdrs = json_object_get(m, "hdrs"), *data = json_object_get(m, "data");
	char want[MSGGET_BUCKET_MAX + MSGGET_KEY_MAX + 8];
	long n;

	if (!json_is_object(m)) {
		fail(out, bucket, key, "the answer's \"message\" is not an object");
		return;
	}
	if (!json_is_string(subj)) {
		fail(out, bucket, key, "message.subject is missing or not a string");
		return;
	}
	/* The key's own subject: an answer to another request (an index
	 * mixed up) is never taken for this key's. */
	snprintf(want, sizeof(want), "$KV.%s.%s", bucket, key);
	if (strcmp(json_string_value(subj), want) != 0) {
		fail(out, bucket, key, "the answer is for subject %.120s", json_string_value(subj));
		return;
	}
	if (!json_is_integer(seq) || json_integer_value(seq) <= 0) {
		fail(out, bucket, key, "message.seq is missing or not a positive integer");
		return;
	}
	out->rev = (uint64_t)json_integer_value(seq);
	/* hdrs and data are left out when empty (nats-server's StoredMsg,
	 * omitempty). */
	if (hdrs != NULL) {
		size_t hl = json_is_string(hdrs) ? json_string_length(hdrs) : 0;
		const char *hs = json_string_value(hdrs);
		unsigned char *block;
		int marker;

		if (!json_is_string(hdrs)) {
			fail(out, bucket, key, "message.hdrs is not a string");
			return;
		}
		if ((n = b64_len(hs, hl)) < 0) {
			fail(out, bucket, key, "message.hdrs is not base64 (%zu characters)", hl);
			return;
		}
		if ((block = malloc((size_t)n + 1)) == NULL) {
			fail(out, bucket, key, "out of memory");
			return;
		}
		if (!b64_decode(hs, hl, block)) {
			free(block);
			fail(out, bucket, key, "message.hdrs is not base64");
			return;
		}
		marker = marks_delete((const char *)block, (size_t)n);
		free(block);
		if (marker < 0) {
			fail(out, bucket, key, "message.hdrs is not a NATS header block");
			return;
		}
		if (marker == 1) {
			out->rc = 0;
			return;
		}
	}
	if (data != NULL && !json_is_string(data)) {
		fail(out, bucket, key, "message.data is not a string");
		return;
	}
	const char *ds = data != NULL ? json_string_value(data) : "";
	size_t dl = data != NULL ? json_string_length(data) : 0;
	if ((n = b64_len(ds, dl)) < 0) {
		fail(out, bucket, key, "message.data is not base64 (%zu characters)", dl);
		return;
	}
	if ((size_t)n > KVCAS_VALUE_MAX) {
		/* As kvcas_read says it: the revision is known, the value is
		 * not taken. */
		snprintf(out->err, sizeof(out->err), "read %.64s/%.96s: a value of %ld bytes (over %d)",
		    bucket, key, n, KVCAS_VALUE_MAX);
		out->rc = KVCAS_TOO_LARGE;
		return;
	}
	if ((out->value = malloc((size_t)n + 1)) == NULL) {
		fail(out, bucket, key, "out of memory");
		return;
	}
	if (!b64_decode(ds, dl, (unsigned char *)out->value)) {
		fail(out, bucket, key, "message.data is not base64");
		return;
	}
	out->value[n] = '\0';
	out->len = (size_t)n;
	out->rc = 1;
}

void
msgget_parse(const char *bucket, const char *key, const char *data, size_t len,
	     struct msgget_result *out)
{
	json_error_t jerr;
	json_t *doc, *e;

	memset(out, 0, sizeof(*out));
	if (len > MSGGET_REPLY_MAX) {
		fail(out, bucket, key, "an answer of %zu bytes (over %d)", len, MSGGET_REPLY_MAX);
		return;
	}
	if ((doc = json_loadb(data, len, 0, &jerr)) == NULL) {
		fail(out, bucket, key, "the answer is not JSON (%.100s)", jerr.text);
		return;
	}
	if (!json_is_object(doc))
		fail(out, bucket, key, "the answer is not a JSON object");
	else if ((e = json_object_get(doc, "error")) != NULL)
		answer_error(bucket, key, e, out);
	else if (json_object_get(doc, "message") != NULL)
		answer_message(bucket, key, json_object_get(doc, "message"), out);
	else
		fail(out, bucket, key, "the answer has neither \"message\" nor \"error\"");
	json_decref(doc);
}

void
msgget_result_free(struct msgget_result *r)
{
	free(r->value);
	memset(r, 0, sizeof(*r));
}

/* ---- many requests ---- */

/* An ASCII letter or digit (no locale's). */
static bool
alnum(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* nats.c's names (src/kv.c validBucketRe, validKeyRe), and a key that
 * makes a valid subject: no empty token. */
static bool
bucket_valid(const char *b)
{
	size_t n = strlen(b);

	if (n == 0 || n > MSGGET_BUCKET_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(b[i]) && b[i] != '_' && b[i] != '-')
			return false;
	return true;
}

static bool
key_valid(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > MSGGET_KEY_MAX || k[0] == '.' || k[n - 1] == '.' || strstr(k, "..") != NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(k[i]) && strchr("-/_=.", k[i]) == NULL)
			return false;
	return true;
}

enum { UNASKED, ASKED, DONE };

/* One call's requests. */
struct batch {
	natsConnection *nc;
	const char *bucket;
	const char *const *keys;
	size_t n;
	struct msgget_result *out;
	unsigned char *state;  /* per key: UNASKED, ASKED or DONE */
	int64_t *asked_ms;     /* per key: when it was last asked */
	size_t next;           /* the first key not asked yet */
	size_t lo;             /* no key before it is still asked */
	size_t inflight;       /* asked, not answered */
	size_t left;           /* not answered */
	bool asked_again;      /* some request went twice: a second answer may come */
	uint64_t no_responders;
	char api[MSGGET_BUCKET_MAX + 40]; /* $JS.API.STREAM.MSG.GET.KV_<bucket> */
	char base[200];                   /* <inbox prefix>.<unique token> */
};

/* Ask for key i's last message. */
static natsStatus
ask(struct batch *b, size_t i)
{
	char reply[sizeof(b->base) + 24], body[MSGGET_BUCKET_MAX + MSGGET_KEY_MAX + 40];
	int bl;

	snprintf(reply, sizeof(reply), "%s.%zu", b->base, i);
	/* No escaping needed: bucket and key are checked to hold none of
	 * JSON's special characters. */
	bl = snprintf(body, sizeof(body), "{\"last_by_subj\":\"$KV.%s.%s\"}", b->bucket, b->keys[i]);
	b->asked_ms[i] = mono_ms();
	return natsConnection_PublishRequest(b->nc, b->api, reply, body, bl);
}

/* Send what is buffered now, not after libnats's 1 ms flusher delay
 * (natsconn.h conn_push), but only as long as the call may still wait:
 * a flush on a connection being re-established waits for its PONG. */
static void
push(struct batch *b, int64_t until)
{
	int64_t left = until - mono_ms();

	if (left > 0 && natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED)
		(void)natsConnection_FlushTimeout(b->nc, left < 2000 ? left : 2000);
}

/*
 * Ask for the next keys until MSGGET_INFLIGHT are outstanding, once at
 * most half are (each refill costs a flush's round trip, not each
 * answer). A key that is not a valid KV key is answered here, -1. 0, or
 * the index of a key whose request could not be sent, with s.
 */
static int
refill(struct batch *b, int64_t until, natsStatus *s, size_t *failed)
{
	bool sent = false;

	if (b->inflight > MSGGET_INFLIGHT / 2)
		return 0;
	while (b->next < b->n && b->inflight < MSGGET_INFLIGHT) {
		size_t i = b->next++;
		if (!key_valid(b->keys[i])) {
			fail(&b->out[i], b->bucket, b->keys[i], "not a valid key (1 to %d of "
			    "A-Z a-z 0-9 - / _ = and inner dots)", MSGGET_KEY_MAX);
			b->state[i] = DONE;
			b->left--;
			continue;
		}
		b->state[i] = ASKED;
		b->inflight++;
		sent = true;
		/* A connection being re-established refuses a publish when it
		 * keeps no reconnect buffer: the request goes with the others
		 * asked again once it is back. */
		if ((*s = ask(b, i)) != NATS_OK &&
		    natsConnection_Status(b->nc) != NATS_CONN_STATUS_RECONNECTING) {
			*failed = i;
			return -1;
		}
	}
	if (sent)
		push(b, until);
	return 0;
}

/* Ask again for every key still unanswered that was asked before since
 * (all of them: since = INT64_MAX). A request that cannot be sent now is
 * asked again at the next turn. */
static void
ask_again(struct batch *b, int64_t since, int64_t until)
{
	bool sent = false;

	while (b->lo < b->next && b->state[b->lo] == DONE)
		b->lo++;
	for (size_t i = b->lo; i < b->next; i++) {
		if (b->state[i] != ASKED || b->asked_ms[i] > since)
			continue;
		(void)ask(b, i);
		sent = true;
	}
	if (sent) {
		b->asked_again = true;
		push(b, until);
	}
}

/* An answer: the key its reply subject's last token indexes, the first
 * answer only. */
static void
take(struct batch *b, natsMsg *r)
{
	const char *subj = natsMsg_GetSubject(r), *t;
	size_t bl = strlen(b->base), i = 0;

	if (strncmp(subj, b->base, bl) != 0 || subj[bl] != '.' || subj[bl + 1] == '\0')
		return;
	for (t = subj + bl + 1; *t != '\0'; t++) {
		if (*t < '0' || *t > '9' || i > b->n)
			return;
		i = i * 10 + (size_t)(*t - '0');
	}
	if (i >= b->next || b->state[i] != ASKED)
		return; /* a second answer to a request asked again */
	msgget_parse(b->bucket, b->keys[i], natsMsg_GetData(r), (size_t)natsMsg_GetDataLength(r),
	    &b->out[i]);
	b->state[i] = DONE;
	b->inflight--;
	b->left--;
}

/* What the unanswered requests of a call that ran out of time met. */
static void
explain_timeout(struct batch *b, int timeout_ms, char *err, size_t errlen)
{
	const char *first = "?";
	char viol[200] = "", more[300] = "";

	for (size_t i = 0; i < b->n; i++)
		if (b->state[i] != DONE) {
			first = b->keys[i];
			break;
		}
	/* A request the broker refused is answered by nobody (natsconn.h). */
	if (conn_violation(b->api, viol, sizeof(viol)))
		snprintf(more, sizeof(more), "; permission denied (%s)", viol);
	else if (b->no_responders > 0)
		snprintf(more, sizeof(more), "; %" PRIu64 " requests found no JetStream to answer "
		    "them", b->no_responders);
	snprintf(err, errlen, "read %s: %zu of %zu keys unanswered within %d ms (the first: "
	    "%.96s)%s", b->bucket, b->left, b->n, timeout_ms, first, more);
}

int
msgget_last_many(natsConnection *nc, const char *inbox_prefix, const char *bucket,
		 const char *const *keys, size_t n, struct msgget_result *out, int timeout_ms,
		 char *err, size_t errlen)
{
	struct batch b = { .nc = nc, .bucket = bucket, .keys = keys, .n = n, .out = out,
	    .left = n };
	natsSubscription *sub = NULL;
	char uniq[64], filter[sizeof(b.base) + 4], why[512];
	natsStatus s = NATS_OK;
	size_t unsent = 0;
	int rc = -1;

	for (size_t i = 0; i < n; i++)
		memset(&out[i], 0, sizeof(out[i]));
	if (n == 0)
		return 0;
	if (!bucket_valid(bucket)) {
		snprintf(err, errlen, "read %.64s: not a valid bucket name", bucket);
		return -1;
	}
	b.state = calloc(n, sizeof(*b.state));
	b.asked_ms = calloc(n, sizeof(*b.asked_ms));
	if (b.state == NULL || b.asked_ms == NULL || conn_unique_token(uniq, sizeof(uniq)) != 0) {
		snprintf(err, errlen, "read %s: out of memory", bucket);
		goto out;
	}
	snprintf(b.api, sizeof(b.api), "$JS.API.STREAM.MSG.GET.KV_%s", bucket);
	/* Under the credential's own reply prefix: it may subscribe nowhere
	 * else. */
	if ((size_t)snprintf(b.base, sizeof(b.base), "%s.%s", inbox_prefix, uniq) >= sizeof(b.base)) {
		snprintf(err, errlen, "read %s: the reply prefix %.64s is too long", bucket,
		    inbox_prefix);
		goto out;
	}
	snprintf(filter, sizeof(filter), "%s.*", b.base);
	/* No limit on what waits: the window bounds it (MSGGET_INFLIGHT
	 * answers, and the second answers of requests asked again), and an
	 * answer dropped as a slow consumer's would cost a second's wait. */
	if ((s = natsConnection_SubscribeSync(&sub, nc, filter)) != NATS_OK ||
	    (s = natsSubscription_SetPendingLimits(sub, -1, -1)) != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "read %s: cannot subscribe for the answers (%s)", bucket, why);
		goto out;
	}
	uint64_t epoch = conn_reconnects(nc);
	int64_t until = mono_ms() + timeout_ms, resend_at = mono_ms() + SLICE_MS;
	for (;;) {
		if (refill(&b, until, &s, &unsent) != 0) {
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "read %s/%.96s: cannot send the request (%s)", bucket,
			    keys[unsent], why);
			goto out;
		}
		if (b.left == 0)
			break;
		int64_t now = mono_ms(), wait = until - now;
		if (wait <= 0) {
			explain_timeout(&b, timeout_ms, err, errlen);
			goto out;
		}
		/* Unanswered: sent to a server that is gone (a failover
		 * since), or to a stream electing its leader, which does not
		 * answer until it has one. Ask again every MSGGET_RESEND_MS
		 * (an answer comes as soon as one can; a second answer is
		 * ignored), and at once after a failover. */
		if (conn_reconnects(nc) != epoch) {
			epoch = conn_reconnects(nc);
			ask_again(&b, INT64_MAX, until);
		} else if (now >= resend_at) {
			ask_again(&b, now - MSGGET_RESEND_MS, until);
			resend_at = now + SLICE_MS;
		}
		natsMsg *r = NULL;
		/* Answers are on their way (inflight): gathered, not woken for
		 * one by one. */
		s = conn_next_gather(sub, &r, wait < SLICE_MS ? wait : SLICE_MS, (int)b.inflight);
		if (s == NATS_TIMEOUT)
			continue;
		if (s == NATS_NO_RESPONDERS) {
			/* libnats keeps which request it answered: it stays
			 * unanswered and is asked again. */
			b.no_responders++;
			continue;
		}
		if (s != NATS_OK) {
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "read %s: the answers' subscription: %s", bucket, why);
			goto out;
		}
		take(&b, r);
		natsMsg_Destroy(r);
	}
	rc = 0;
out:
	if (rc != 0)
		for (size_t i = 0; i < n; i++)
			msgget_result_free(&out[i]);
	/* Each request asked once and answered: nothing more comes to this
	 * inbox. Asked again, or left unanswered, a late answer may still
	 * come (natsconn.h). */
	if (sub != NULL && b.left == 0 && !b.asked_again && b.no_responders == 0)
		natsSubscription_Destroy(sub);
	else
		conn_sub_close(nc, sub, CONN_SUB_FLUSH_MS);
	free(b.state);
	free(b.asked_ms);
	return rc;
}
