/*
 * Broker connections under a user credential.
 *
 * libnats 3.4.1 fails about one connect in 256 with an nkey signature
 * (STYLE.md: a signature whose first byte is 0), and a broker answers that
 * with an authorization violation. A refusal is therefore retried a few
 * times before it is reported as the credential's fault.
 */
#include "lib/nats/natsconn.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/creds/jwt.h"
#include "lib/creds/perms.h"
#include "lib/creds/nkeys.h"
#include "lib/servers.h"

static natsStatus
cb_jwt(char **jwt, char **errtxt, void *arg)
{
	const struct creds *c = arg;

	*jwt = strdup(c->jwt);
	if (*jwt == NULL) {
		*errtxt = strdup("out of memory");
		return NATS_NO_MEMORY;
	}
	return NATS_OK;
}

static natsStatus
cb_sign(char **errtxt, unsigned char **sig, int *siglen, const char *nonce,
	void *arg)
{
	const struct creds *c = arg;
	struct nkey k;
	char err[128];

	if (nkey_from_seed(c->seed, strlen(c->seed), &k, err, sizeof(err)) != 0) {
		*errtxt = strdup(err);
		return NATS_ERR;
	}
	*sig = malloc(NKEY_SIG_LEN);
	if (*sig == NULL || nkey_sign(&k, nonce, strlen(nonce), *sig) != 0) {
		nkey_wipe(&k);
		free(*sig);
		*sig = NULL;
		*errtxt = strdup("cannot sign the server nonce");
		return NATS_ERR;
	}
	nkey_wipe(&k);
	*siglen = NKEY_SIG_LEN;
	return NATS_OK;
}

int
conn_unique_token(char *out, size_t len)
{
	natsInbox *inbox = NULL;
	const char *dot;

	if (natsInbox_Create(&inbox) != NATS_OK)
		return -1;
	/* "_INBOX.<nuid>" */
	dot = strchr((const char *)inbox, '.');
	snprintf(out, len, "%s", dot != NULL ? dot + 1 : (const char *)inbox);
	natsInbox_Destroy(inbox);
	return 0;
}

void
conn_strerror(natsStatus s, char *buf, size_t len)
{
	natsStatus ls;
	const char *last = nats_GetLastError(&ls), *text = natsStatus_GetText(s), *close;

	/* nats.c opens its text with where it was set, "(conn.c:2088): ":
	 * a source location is no operator's business. */
	if (last != NULL && last[0] == '(' && (close = strstr(last, "): ")) != NULL &&
	    close - last < 48 && memchr(last, ':', (size_t)(close - last)) != NULL)
		last = close + 3;
	if (last != NULL && *last != '\0' && strcmp(last, text) != 0)
		snprintf(buf, len, "%s (%s)", last, text);
	else
		snprintf(buf, len, "%s", text);
}

void
conn_jserror(const char *what, natsStatus s, jsErrCode jerr, char *err, size_t errlen)
{
	char why[512];

	conn_strerror(s, why, sizeof(why));
	if (jerr != 0)
		snprintf(err, errlen, "%s: %s (JetStream error %d)", what, why, (int)jerr);
	else
		snprintf(err, errlen, "%s: %s", what, why);
}

natsStatus
conn_tls_options(natsOptions *opts, const char *tls_host, const char *ca_pem)
{
	natsStatus s = natsOptions_SetSecure(opts, true);

	if (s == NATS_OK)
		s = natsOptions_SetExpectedHostname(opts, tls_host);
	if (s == NATS_OK && ca_pem != NULL)
		s = natsOptions_SetCATrustedCertificates(opts, ca_pem);
	return s;
}

bool
conn_tls_refusal(natsStatus s, const char *url, const char *tls_host, char *buf, size_t len)
{
	char why[512];

	if (s == NATS_SECURE_CONNECTION_WANTED) {
		snprintf(buf, len, "the broker at %s does not offer TLS, and this mesh demands it; "
		    "refusing to dial in plaintext", url);
		return true;
	}
	if (s == NATS_SSL_ERROR) {
		natsStatus ls;
		const char *last = nats_GetLastError(&ls), *p;
		/* Without nats.c's "(conn.c:733): " source position. */
		if (last != NULL && last[0] == '(' && (p = strstr(last, "): ")) != NULL)
			last = p + 3;
		snprintf(why, sizeof(why), "%s", last != NULL && *last ? last : natsStatus_GetText(s));
		snprintf(buf, len, "the broker at %s did not prove itself as %s with the mesh's CA "
		    "(%s); refusing the connection", url, tls_host ? tls_host : "?", why);
		return true;
	}
	return false;
}

natsStatus
conn_servers(natsOptions *opts, const char *url)
{
	char buf[CONN_SERVERS_MAX * 256];
	const char *servers[CONN_SERVERS_MAX], *c = url, *u;
	size_t used = 0, len;
	int n = 0;
	natsStatus s;

	if (url == NULL || strlen(url) >= sizeof(buf))
		return NATS_INVALID_ARG;
	while ((len = servers_next(&c, &u)) > 0) {
		if (n == CONN_SERVERS_MAX)
			return NATS_INVALID_ARG;
		memcpy(buf + used, u, len);
		buf[used + len] = '\0';
		servers[n++] = buf + used;
		used += len + 1;
	}
	if (n == 0)
		return NATS_INVALID_ARG;
	s = natsOptions_SetServers(opts, servers, n);
	if (s == NATS_OK)
		s = natsOptions_SetNoRandomize(opts, true);
	if (s == NATS_OK)
		s = natsOptions_SetIgnoreDiscoveredServers(opts, true);
	return s;
}

static pthread_mutex_t violation_mu = PTHREAD_MUTEX_INITIALIZER;
static char violation_text[512];

void
conn_violation_note(const char *text)
{
	pthread_mutex_lock(&violation_mu);
	snprintf(violation_text, sizeof(violation_text), "%s", text ? text : "permission denied");
	pthread_mutex_unlock(&violation_mu);
}

bool
conn_violation(const char *needle, char *buf, size_t len)
{
	bool hit;

	pthread_mutex_lock(&violation_mu);
	hit = violation_text[0] != '\0' &&
	    (needle == NULL || strstr(violation_text, needle) != NULL);
	if (hit && buf != NULL)
		snprintf(buf, len, "%s", violation_text);
	pthread_mutex_unlock(&violation_mu);
	return hit;
}

uint64_t
conn_reconnects(natsConnection *nc)
{
	natsStatistics *st = NULL;
	uint64_t n = 0;

	if (natsStatistics_Create(&st) == NATS_OK && natsConnection_GetStats(nc, st) == NATS_OK)
		natsStatistics_GetCounts(st, NULL, NULL, NULL, NULL, &n);
	natsStatistics_Destroy(st);
	return n;
}

#define PUSH_MS 2000

void
conn_push(natsConnection *nc)
{
	natsConnection_FlushTimeout(nc, PUSH_MS);
}

natsStatus
conn_next_gather(natsSubscription *sub, natsMsg **m, int64_t wait_ms, int expected)
{
	int64_t start = mono_ms(), left;
	long us = (long)expected * GATHER_EACH_US;
	struct timespec nap = { 0, (us < GATHER_NAP_MAX_US ? us : GATHER_NAP_MAX_US) * 1000L };
	int queued = 0;

	*m = NULL;
	for (;;) {
		/* Closed, or something queued: NextMsg says which at once. */
		if (natsSubscription_GetPending(sub, &queued, NULL) != NATS_OK || queued > 0)
			return natsSubscription_NextMsg(m, sub, 0);
		left = wait_ms - (mono_ms() - start);
		if (left <= 0)
			return NATS_TIMEOUT;
		if (expected < GATHER_MIN || mono_ms() - start >= GATHER_POLL_MS)
			return natsSubscription_NextMsg(m, sub, left);
		nanosleep(&nap, NULL);
	}
}

int
conn_open(const struct conn_opts *o, const struct creds *c, natsConnection **out,
	  char *err, size_t errlen)
{
	char prefix[REPLY_INBOX_MAX], why[512];
	natsOptions *opts = NULL;
	natsStatus s;

	*out = NULL;
	if (jwt_reply_inbox(c->jwt, prefix, sizeof(prefix), err, errlen) != 0)
		return -1;

	s = natsOptions_Create(&opts);
	if (s == NATS_OK)
		s = conn_servers(opts, o->url);
	if (s == NATS_OK && o->name != NULL)
		s = natsOptions_SetName(opts, o->name);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(opts, o->timeout_ms > 0 ? o->timeout_ms : 5000);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(opts, o->max_reconnect);
	if (s == NATS_OK)
		s = natsOptions_SetCustomInboxPrefix(opts, prefix);
	if (s == NATS_OK && o->on_error != NULL)
		s = natsOptions_SetErrorHandler(opts, o->on_error, o->on_error_arg);
	if (s == NATS_OK && o->on_disconnected != NULL)
		s = natsOptions_SetDisconnectedCB(opts, o->on_disconnected, o->on_conn_arg);
	if (s == NATS_OK && o->on_closed != NULL)
		s = natsOptions_SetClosedCB(opts, o->on_closed, o->on_conn_arg);
	if (s == NATS_OK && o->on_reconnected != NULL)
		s = natsOptions_SetReconnectedCB(opts, o->on_reconnected, o->on_conn_arg);
	if (s == NATS_OK && o->ping_interval_ms > 0)
		s = natsOptions_SetPingInterval(opts, o->ping_interval_ms);
	if (s == NATS_OK && o->max_pings_out > 0)
		s = natsOptions_SetMaxPingsOut(opts, o->max_pings_out);
	if (s == NATS_OK && o->reconnect_wait_ms > 0)
		s = natsOptions_SetReconnectWait(opts, o->reconnect_wait_ms);
	/* nats.c takes a reconnect buffer of 0 bytes literally: every publish
	 * made while it reconnects finds the buffer full (e2e_ctlclient
	 * holds it to that). */
	if (s == NATS_OK && o->no_reconnect_buffer)
		s = natsOptions_SetReconnectBufSize(opts, 0);
	if (s == NATS_OK && o->tls_host != NULL)
		s = conn_tls_options(opts, o->tls_host, o->tls_ca_pem);
	if (s == NATS_OK)
		s = natsOptions_SetUserCredentialsCallbacks(opts, cb_jwt, (void *)c,
		    cb_sign, (void *)c);
	for (int i = 0; s == NATS_OK && i < CONNECT_TRIES; i++) {
		s = natsConnection_Connect(out, opts);
		if (s != NATS_NOT_PERMITTED && s != NATS_CONNECTION_AUTH_FAILED)
			break;
		if (i + 1 < CONNECT_TRIES)
			s = NATS_OK;
	}
	if (s != NATS_OK) {
		int rc = -1;
		if (o->tls_host != NULL && conn_tls_refusal(s, o->url, o->tls_host, err, errlen)) {
			rc = -2;
		} else {
			conn_strerror(s, why, sizeof(why));
			snprintf(err, errlen, "connect %s: %s", o->url, why);
		}
		natsOptions_Destroy(opts);
		*out = NULL;
		return rc;
	}
	natsOptions_Destroy(opts);
	return 0;
}

/* The JetStream API level of nats-server 2.12, the first to run schedules. */
#define API_LEVEL_SCHEDULES 2

int
conn_broker_schedules(natsConnection *nc, int timeout_ms, char *err, size_t errlen)
{
	natsMsg *reply = NULL;
	json_error_t jerr;
	json_t *root;
	natsStatus s;
	int level;

	s = natsConnection_RequestString(&reply, nc, "$JS.API.INFO", "", timeout_ms);
	if (s != NATS_OK) {
		conn_jserror("$JS.API.INFO", s, 0, err, errlen);
		return -1;
	}
	/* Integers as reals: nats-server 2.10.27 answers with a reserved_storage
	 * of 2^64 - 11, past what jansson's integers hold. */
	root = json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
	    JSON_DECODE_INT_AS_REAL, &jerr);
	if (!json_is_object(root)) {
		snprintf(err, errlen, "$JS.API.INFO: the answer is not a JSON object (%s): %.*s",
		    root == NULL ? jerr.text : "another JSON value",
		    natsMsg_GetDataLength(reply) > 120 ? 120 : natsMsg_GetDataLength(reply),
		    natsMsg_GetData(reply));
		natsMsg_Destroy(reply);
		json_decref(root);
		return -1;
	}
	natsMsg_Destroy(reply);
	level = (int)json_number_value(json_object_get(json_object_get(root, "api"), "level"));
	json_decref(root);
	return level >= API_LEVEL_SCHEDULES;
}

int64_t
conn_reconnect_delay(natsConnection *nc, int attempts, void *closure)
{
	int64_t base = attempts <= CONN_RECONNECT_QUICK ? CONN_RECONNECT_QUICK_MS :
	    CONN_RECONNECT_MS;

	uint64_t h = ((uint64_t)(uintptr_t)nc ^ (uint64_t)attempts * 0x9e3779b97f4a7c15ull) *
	    0xbf58476d1ce4e5b9ull;

	(void)closure;
	/* Jitter: connections that lost one broker do not come back at once.
	 * Drawn from the connection's own address (randomized per process)
	 * and the pass, not rand(): every worker starts with rand's one seed,
	 * and the same draws would bring them back together. */
	h ^= h >> 31;
	return base + (int64_t)(h % (uint64_t)(base / 10 + 1));
}

void
conn_sub_close(natsConnection *nc, natsSubscription *sub, int flush_ms)
{
	if (sub == NULL)
		return;
	if (natsSubscription_Unsubscribe(sub) == NATS_OK && nc != NULL &&
	    natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED)
		(void)natsConnection_FlushTimeout(nc, flush_ms);
	natsSubscription_Destroy(sub);
}
