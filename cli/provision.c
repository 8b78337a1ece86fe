/*
 * Space provisioning: creates the streams, KV buckets and per-lifecycle DLV
 * durables of WIRE.md §3 through the JetStream API, idempotently, and refuses
 * (never rewrites) an existing asset whose config differs from the contract.
 */
#include "cli/provision.h"
#include "lib/refuse.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MIN (60 * NS_PER_SEC)
#define NS_PER_HOUR (60 * NS_PER_MIN)

/* Server default duplicate window; the contract's "2 min". */
#define DUP_WINDOW_DEFAULT (2 * NS_PER_MIN)
/* INBOX and DLV entries carry the dedup key of WIRE §2: a post copied again
 * within 2 h (a fan-out redelivery) is dropped by the broker. */
#define DUP_WINDOW_LONG (2 * NS_PER_HOUR)
#define PER_SUBJECT_MAX 1000
#define PER_SUBJECT_UNLIMITED (-1)
#define KV_HISTORY 1
#define PRESENCE_TTL (6 * NS_PER_SEC)
#define DELIVERY_TTL (30 * NS_PER_SEC)
#define DLV_ACK_WAIT (60 * NS_PER_SEC)
/* The broker's limit on stream and consumer names (JSMaxNameLen). */
#define JS_NAME_MAX 255
/* Wait for each JetStream API answer (nats.c default). */
#define JS_API_WAIT_MS 5000
/* One "field have (want want)" item; subjects may be long lists. */
#define API_SUBJECT_MAX (PROV_NAME_MAX * 2 + 64)
#define STREAM_ERR_MAX 2048
/* nats.c keeps its error texts (per thread, per connection) in 256 bytes. */
#define ERR_TEXT_MAX 256

/*
 * The table of WIRE.md §3. A KV row names its bucket prefix; its stream is
 * "KV_<bucket>" on "$KV.<bucket>.>" with the settings nats.c and the Go client
 * give a bucket of history 1, so that js_KeyValue() binds it.
 */
struct stream_row {
	const char *prefix;			       /* stream name prefix, or KV bucket prefix */
	bool kv;
	const char *subjects[PROV_STREAM_SUBJECTS_MAX]; /* after "cotal.<s>." */
	int64_t per_subject;
	int64_t duplicates; /* non-KV only; KV derives it from the TTL */
	int64_t max_age;
	bool allow_direct;
	int share; /* of the space's storage budget, per mille (max_bytes) */
};

/*
 * max_bytes (issue 28; WIRE.md leaves it open): each stream and bucket takes
 * a fixed share of the space's storage budget (PROV_STORAGE_DEFAULT, or
 * `cotal space provision --storage`). Posts and their copies take most: the
 * copies a member has yet to take (DLV) 45 %, the channels' history (CHAT)
 * 30 %, the fan-out's entries (INBOX) 10 %, the timer streams 6 %, the
 * buckets the rest. A bucket (discard new) refuses a write once full; a
 * stream (discard old, WIRE.md §3) drops its oldest messages.
 *
 * But the read-ACL bucket (share SHARE_UNLIMITED, issue 39): it keeps one
 * row per lifecycle the space ever had (a retirement's tombstone is
 * forever), written by the manager alone, never by an agent; any cap is
 * reached by the space's own history, and then the manager can neither
 * admit an agent nor retire one. It has no max_bytes: the broker's (or the
 * account's) storage is its only bound.
 */
#define SHARE_UNLIMITED (-1)
static const struct stream_row stream_table[PROV_STREAM_KINDS] = {
	[PROV_CHAT] = {"CHAT_", false, {"chat.>", NULL}, PER_SUBJECT_MAX, DUP_WINDOW_DEFAULT, 0, true,
		       300},
	[PROV_INBOX] = {"INBOX_", false, {"dinbox.>", NULL}, PER_SUBJECT_MAX, DUP_WINDOW_LONG, 0,
			false, 100},
	[PROV_DLV] = {"DLV_", false, {"dlv.>", NULL}, PER_SUBJECT_MAX, DUP_WINDOW_LONG, 0, false,
		      450},
	[PROV_EPT_REQ] = {"EPT_REQ_", false, {"ept.*.*.*.*.schedule", NULL}, PER_SUBJECT_UNLIMITED,
			  DUP_WINDOW_DEFAULT, 0, false, 20},
	[PROV_EPT] = {"EPT_", false, {"ept.*.*.*.*.armed", "ept.*.*.*.*.fire"}, PER_SUBJECT_UNLIMITED,
		      DUP_WINDOW_DEFAULT, 0, false, 40},
	[PROV_KV_CHANNELS] = {"cotal_channels_", true, {NULL, NULL}, KV_HISTORY, 0, 0, true, 10},
	[PROV_KV_ACL] = {"cotal_acl_", true, {NULL, NULL}, KV_HISTORY, 0, 0, true,
			 SHARE_UNLIMITED},
	[PROV_KV_MEMBERS] = {"cotal_members_", true, {NULL, NULL}, KV_HISTORY, 0, 0, true, 30},
	[PROV_KV_PRESENCE] = {"cotal_presence_", true, {NULL, NULL}, KV_HISTORY, 0, PRESENCE_TTL,
			      true, 10},
	[PROV_KV_DELIVERY] = {"cotal_delivery_", true, {NULL, NULL}, KV_HISTORY, 0, DELIVERY_TTL,
			      true, 1},
	[PROV_KV_RECORDS] = {"cotal_records_", true, {NULL, NULL}, KV_HISTORY, 0, 0, true, 29},
};

int64_t
provision_max_bytes(enum prov_stream_kind kind, int64_t storage)
{
	int64_t b;

	if ((unsigned)kind >= PROV_STREAM_KINDS)
		return 0;
	if (stream_table[kind].share == SHARE_UNLIMITED)
		return -1;
	if (storage <= 0)
		storage = PROV_STORAGE_DEFAULT;
	b = storage / 1000 * stream_table[kind].share;
	if (stream_table[kind].kv && b > PROV_KV_BYTES_MAX)
		b = PROV_KV_BYTES_MAX;
	return b;
}

/* ^[A-Za-z0-9_]+$, bounded by PROV_IDENTITY_MAX. */
static bool
prov_identity_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > PROV_IDENTITY_MAX)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

/* ^[a-z0-9]{26,32}$ */
static bool
prov_uid_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n < 26 || n > PROV_UID_MAX)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

static int
space_token_checked(const char *space_name, char *tok, size_t toklen, char *err, size_t errlen)
{
	if (space_name == NULL) {
		seterr(err, errlen, "space: name missing");
		return -1;
	}
	if (strlen(space_name) > SPACE_NAME_MAX) {
		seterr(err, errlen, "space: name longer than %d bytes", SPACE_NAME_MAX);
		return -1;
	}
	if (!space_token(space_name, tok, toklen)) {
		seterr(err, errlen, "space: name does not fit the token buffer");
		return -1;
	}
	return 0;
}

int
provision_stream_expected(enum prov_stream_kind kind, const char *space_name, int64_t storage,
			  struct prov_stream *out, char *err, size_t errlen)
{
	char tok[SPACE_TOKEN_MAX + 1];
	const struct stream_row *row;
	jsStreamConfig *c;
	int i, n = 0;

	if ((unsigned)kind >= PROV_STREAM_KINDS || out == NULL) {
		seterr(err, errlen, "provision: no such stream kind");
		return -1;
	}
	if (space_token_checked(space_name, tok, sizeof(tok), err, errlen) != 0)
		return -1;
	row = &stream_table[kind];
	memset(out, 0, sizeof(*out));
	c = &out->cfg;
	jsStreamConfig_Init(c);

	/* Sizes are fixed by PROV_NAME_MAX/PROV_SUBJECT_MAX over a bounded token,
	 * so these never truncate. */
	if (row->kv) {
		snprintf(out->bucket, sizeof(out->bucket), "%s%s", row->prefix, tok);
		snprintf(out->name, sizeof(out->name), "KV_%s%s", row->prefix, tok);
		snprintf(out->subjects[n++], sizeof(out->subjects[0]), "$KV.%s.>", out->bucket);
	} else {
		snprintf(out->name, sizeof(out->name), "%s%s", row->prefix, tok);
		for (i = 0; i < PROV_STREAM_SUBJECTS_MAX && row->subjects[i] != NULL; i++)
			snprintf(out->subjects[n++], sizeof(out->subjects[0]), "cotal.%s.%s", tok,
				 row->subjects[i]);
	}
	for (i = 0; i < n; i++)
		out->subjv[i] = out->subjects[i];

	c->Name = out->name;
	c->Subjects = out->subjv;
	c->SubjectsLen = n;
	c->Retention = js_LimitsPolicy;
	c->Storage = js_FileStorage;
	c->Replicas = 1;
	c->MaxMsgsPerSubject = row->per_subject;
	c->MaxAge = row->max_age;
	c->MaxBytes = provision_max_bytes(kind, storage);
	c->AllowDirect = row->allow_direct;
	if (row->kv) {
		/* What js_CreateKeyValue() would send for history 1. The duplicate
		 * window is set explicitly (as the Go client does) because the
		 * server refuses one longer than the max age. */
		c->Discard = js_DiscardNew;
		c->AllowRollup = true;
		c->DenyDelete = true;
		c->DenyPurge = false;
		c->Duplicates = (row->max_age > 0 && row->max_age < DUP_WINDOW_DEFAULT)
					? row->max_age
					: DUP_WINDOW_DEFAULT;
	} else {
		c->Discard = js_DiscardOld;
		c->Duplicates = row->duplicates;
	}
	return 0;
}

int
provision_member_durable_expected(const char *space_name, const char *owner, const char *actor,
				  const char *uid, struct prov_consumer *out, char *err,
				  size_t errlen)
{
	char tok[SPACE_TOKEN_MAX + 1];
	jsConsumerConfig *c;

	if (out == NULL) {
		seterr(err, errlen, "provision: no output");
		return -1;
	}
	if (space_token_checked(space_name, tok, sizeof(tok), err, errlen) != 0)
		return -1;
	if (owner == NULL || !prov_identity_valid(owner)) {
		seterr(err, errlen, "owner: must match ^[A-Za-z0-9_]+$ (at most %d bytes)",
		       PROV_IDENTITY_MAX);
		return -1;
	}
	if (actor == NULL || !prov_identity_valid(actor)) {
		seterr(err, errlen, "actor: must match ^[A-Za-z0-9_]+$ (at most %d bytes)",
		       PROV_IDENTITY_MAX);
		return -1;
	}
	if (uid == NULL || !prov_uid_valid(uid)) {
		seterr(err, errlen, "uid: must match ^[a-z0-9]{26,32}$");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->stream, sizeof(out->stream), "DLV_%s", tok);
	snprintf(out->durable, sizeof(out->durable), "dlv_%s-%s-%s", owner, actor, uid);
	snprintf(out->filter, sizeof(out->filter), "cotal.%s.dlv.%s.%s.%s", tok, owner, actor, uid);
	c = &out->cfg;
	jsConsumerConfig_Init(c);
	c->Durable = out->durable;
	c->DeliverPolicy = js_DeliverAll;
	c->AckPolicy = js_AckExplicit;
	c->AckWait = DLV_ACK_WAIT;
	c->FilterSubject = out->filter;
	return 0;
}

/* The connection's last asynchronous error, copied so a later comparison can
 * tell whether a request caused a new one. */
struct async_err {
	natsStatus s;
	char text[ERR_TEXT_MAX];
};

static void
async_err_snapshot(natsConnection *nc, struct async_err *ae)
{
	const char *txt = NULL;

	ae->s = natsConnection_GetLastError(nc, &txt);
	snprintf(ae->text, sizeof(ae->text), "%s", txt != NULL ? txt : "");
}

/* nats.c prefixes its error texts with the source location, "(jsm.c:1033): ";
 * the broker's words are what follows. */
static const char *
strip_location(const char *txt)
{
	const char *p = txt;

	if (*p != '(')
		return txt;
	while (*p != '\0' && *p != ')' && *p != ':')
		p++;
	if (*p != ':')
		return txt;
	p++;
	if (*p < '0' || *p > '9')
		return txt;
	while (*p >= '0' && *p <= '9')
		p++;
	if (strncmp(p, "): ", 3) != 0)
		return txt;
	return p + 3;
}

/*
 * Words for a failed JetStream API request. A broker refusal carries its own
 * description and err_code. A publish the credential may not make gets no
 * answer at all: the broker only sends an asynchronous permissions
 * violation, which nats.c records as the connection's last error.
 */
static void
api_failure(char *err, size_t errlen, natsConnection *nc, const char *op, const char *api_subject,
	    natsStatus s, jsErrCode jerr, const struct async_err *before)
{
	/* nats.c turns "no responders" into a made-up JSNotEnabledErr: that is
	 * not an answer from the broker. */
	bool no_answer = (s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS);
	char last[ERR_TEXT_MAX];
	struct async_err now;
	const char *txt = nats_GetLastError(NULL);

	/* Copied first: the text lives in nats.c's per-thread error slot, which
	 * the next library call may overwrite. */
	snprintf(last, sizeof(last), "%s", txt != NULL ? strip_location(txt) : "");
	if (jerr != 0 && !no_answer) {
		seterr(err, errlen, "%s: %s (err_code %d)", op,
		       last[0] != '\0' ? last : natsStatus_GetText(s), (int)jerr);
		return;
	}
	async_err_snapshot(nc, &now);
	if (now.s == NATS_NOT_PERMITTED &&
	    (strstr(now.text, api_subject) != NULL || before->s != NATS_NOT_PERMITTED ||
	     strcmp(before->text, now.text) != 0)) {
		seterr(err, errlen, "%s: permission denied by the broker: %s", op, now.text);
		return;
	}
	if (no_answer) {
		seterr(err, errlen,
		       "%s: no answer from JetStream (is JetStream enabled for this account, and "
		       "may this credential publish to %s?)",
		       op, api_subject);
		return;
	}
	if (last[0] != '\0' && strcmp(last, natsStatus_GetText(s)) != 0)
		seterr(err, errlen, "%s: %s (%s)", op, natsStatus_GetText(s), last);
	else
		seterr(err, errlen, "%s: %s", op, natsStatus_GetText(s));
}

static int
js_context(natsConnection *nc, jsCtx **js, char *err, size_t errlen)
{
	jsOptions jo;
	natsStatus s;

	if (nc == NULL) {
		seterr(err, errlen, "provision: no broker connection");
		return -1;
	}
	jsOptions_Init(&jo);
	jo.Wait = JS_API_WAIT_MS;
	s = natsConnection_JetStream(js, nc, &jo);
	if (s != NATS_OK) {
		seterr(err, errlen, "provision: JetStream context: %s", natsStatus_GetText(s));
		return -1;
	}
	return 0;
}

static void
report_line(FILE *report, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
report_line(FILE *report, const char *fmt, ...)
{
	va_list ap;

	if (report == NULL)
		return;
	va_start(ap, fmt);
	vfprintf(report, fmt, ap);
	va_end(ap);
	fputc('\n', report);
	fflush(report);
}

static void
report_exists(FILE *report, const struct prov_stream *w)
{
	if (w->bucket[0] != '\0')
		report_line(report, "• exists KV bucket %s (stream %s)", w->bucket, w->name);
	else
		report_line(report, "• exists stream %s", w->name);
}

static void
report_created(FILE *report, const struct prov_stream *w)
{
	if (w->bucket[0] != '\0')
		report_line(report, "✓ created KV bucket %s (stream %s)", w->bucket, w->name);
	else
		report_line(report, "✓ created stream %s", w->name);
}

/* STREAM_NEEDS_SCHEDULES: matches but for the schedules a broker upgraded to
 * run them wants (and the roll-ups they bring); turned on once every other
 * stream checked out. */
enum stream_state {
	STREAM_MATCHES, STREAM_MISSING, STREAM_CONFLICTS, STREAM_ERROR, STREAM_NEEDS_SCHEDULES
};

/* Look one stream up and compare; a conflict or an error fills msg, and so
 * does a match whose max_bytes differs (a note: the stream is left as it
 * is). */
static enum stream_state
stream_check(natsConnection *nc, jsCtx *js, const struct prov_stream *w, char *msg, size_t msglen)
{
	char subj[API_SUBJECT_MAX], op[PROV_NAME_MAX + 32];
	char diff[STREAM_ERR_MAX];
	struct async_err before;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s;
	enum stream_state st;

	if (msg != NULL && msglen > 0)
		msg[0] = '\0';
	async_err_snapshot(nc, &before);
	s = js_GetStreamInfo(&si, js, w->name, NULL, &jerr);
	if (s == NATS_NOT_FOUND)
		return STREAM_MISSING;
	if (s != NATS_OK) {
		snprintf(subj, sizeof(subj), "$JS.API.STREAM.INFO.%s", w->name);
		snprintf(op, sizeof(op), "stream info %s", w->name);
		api_failure(msg, msglen, nc, op, subj, s, jerr, &before);
		return STREAM_ERROR;
	}
	if (si == NULL || si->Config == NULL) {
		jsStreamInfo_Destroy(si);
		seterr(msg, msglen, "stream info %s: answer without a config", w->name);
		return STREAM_ERROR;
	}
	st = STREAM_CONFLICTS;
	if (provision_stream_diff(si->Config, &w->cfg, diff, sizeof(diff)) == 0) {
		st = STREAM_MATCHES;
	} else if (w->schedules && w->cfg.AllowRollup && !si->Config->AllowRollup) {
		jsStreamConfig before = w->cfg;
		before.AllowRollup = false;
		if (provision_stream_diff(si->Config, &before, NULL, 0) == 0)
			st = STREAM_NEEDS_SCHEDULES;
	}
	if (st != STREAM_CONFLICTS) {
		if (provision_stream_notes(si->Config, &w->cfg, diff, sizeof(diff)) > 0)
			seterr(msg, msglen, "stream %s: %s; left as it is (not a conflict)", w->name,
			    diff);
		jsStreamInfo_Destroy(si);
		return st;
	}
	jsStreamInfo_Destroy(si);
	seterr(msg, msglen, "stream %s exists with a conflicting config: %s", w->name, diff);
	return STREAM_CONFLICTS;
}

/* A replicated stream just made: wait until it has a leader and every
 * replica is current, so the space is usable when provision returns. */
static int
stream_placed(jsCtx *js, const struct prov_stream *w, FILE *report, char *err, size_t errlen)
{
	char why[256] = "no answer";
	struct timespec nap = { 0, 100 * 1000 * 1000 };

	for (int waited = 0; waited < PROV_PLACE_WAIT_MS; waited += 100) {
		jsStreamInfo *si = NULL;
		jsErrCode jerr = 0;
		natsStatus s = js_GetStreamInfo(&si, js, w->name, NULL, &jerr);
		if (s == NATS_OK && si->Cluster != NULL && si->Cluster->Leader != NULL) {
			int current = 1; /* the leader */
			for (int i = 0; i < si->Cluster->ReplicasLen; i++)
				current += si->Cluster->Replicas[i]->Current ? 1 : 0;
			snprintf(why, sizeof(why), "%d of %" PRId64 " replicas current, leader %s",
			    current, w->cfg.Replicas, si->Cluster->Leader);
			if (current >= w->cfg.Replicas) {
				report_line(report, "  placed on %d servers (leader %s)", current,
				    si->Cluster->Leader);
				jsStreamInfo_Destroy(si);
				return 0;
			}
		} else if (s == NATS_OK) {
			snprintf(why, sizeof(why), "no leader elected yet");
		} else {
			snprintf(why, sizeof(why), "%s", natsStatus_GetText(s));
		}
		jsStreamInfo_Destroy(si);
		nanosleep(&nap, NULL);
	}
	seterr(err, errlen, "stream %s was created but not placed within %d ms (%s)", w->name,
	    PROV_PLACE_WAIT_MS, why);
	report_line(report, "✗ %s", err);
	return -1;
}

/* Create one missing stream. A create that lost a race to another
 * provisioner is re-checked, so an identical stream still counts as made. */
static int
stream_create(natsConnection *nc, jsCtx *js, struct prov_stream *w, FILE *report, char *err,
	      size_t errlen)
{
	char subj[API_SUBJECT_MAX], op[PROV_NAME_MAX + 32];
	char recheck[STREAM_ERR_MAX];
	struct async_err before;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	async_err_snapshot(nc, &before);
	s = js_AddStream(&si, js, &w->cfg, NULL, &jerr);
	jsStreamInfo_Destroy(si);
	if (s == NATS_OK) {
		report_created(report, w);
		return w->cfg.Replicas > 1 ? stream_placed(js, w, report, err, errlen) : 0;
	}
	/* Worded at once: the error texts nats.c keeps are overwritten by the
	 * next request. */
	snprintf(subj, sizeof(subj), "$JS.API.STREAM.CREATE.%s", w->name);
	snprintf(op, sizeof(op), "create stream %s", w->name);
	api_failure(err, errlen, nc, op, subj, s, jerr, &before);
	if (jerr == JSStorageResourcesExceededErr || jerr == JSInsufficientResourcesErr ||
	    jerr == JSAccountResourcesExceededErr) {
		char have[STREAM_ERR_MAX];
		snprintf(have, sizeof(have), "%s", err != NULL ? err : "");
		seterr(err, errlen, "%s: the broker cannot reserve its max_bytes of %" PRId64 " bytes "
		    "(on each of %" PRId64 " servers): its max_file_store (or the account's "
		    "storage limit), less what other streams reserve, is smaller; provision with "
		    "a smaller --storage or give the broker more", have, w->cfg.MaxBytes,
		    w->cfg.Replicas);
	}
	if (jerr == JSStreamNameExistErr) {
		switch (stream_check(nc, js, w, recheck, sizeof(recheck))) {
		case STREAM_MATCHES:
			if (err != NULL && errlen > 0)
				err[0] = '\0';
			report_exists(report, w);
			return 0;
		case STREAM_CONFLICTS:
			seterr(err, errlen, "%s", recheck);
			break;
		default:
			break;
		}
	}
	report_line(report, "✗ %s", err != NULL && errlen > 0 ? err : op);
	return -1;
}

/* Refuse up front a space whose longest stream name the broker would refuse,
 * rather than leave it half-provisioned when the first long name fails. */
static int
names_fit(const struct prov_stream *want, const char *space_name, char *err, size_t errlen)
{
	size_t longest = 0, len, fixed;
	int k, worst = 0;

	for (k = 0; k < PROV_STREAM_KINDS; k++) {
		len = strlen(want[k].name);
		if (len > longest) {
			longest = len;
			worst = k;
		}
	}
	if (longest <= JS_NAME_MAX)
		return 0;
	fixed = longest - strlen(space_name);
	seterr(err, errlen,
	       "space: name of %zu bytes is too long to provision: stream %s%s<s> would be %zu "
	       "bytes, the broker allows %d (space names up to %zu bytes fit)",
	       strlen(space_name), stream_table[worst].kv ? "KV_" : "", stream_table[worst].prefix,
	       longest, JS_NAME_MAX, (size_t)JS_NAME_MAX - fixed);
	return -1;
}

int
space_provision(natsConnection *nc, const char *space_name, FILE *report, char *err,
		size_t errlen)
{
	return space_provision_replicas(nc, space_name, 1, report, err, errlen);
}

int
space_provision_replicas(natsConnection *nc, const char *space_name, int replicas,
			 FILE *report, char *err, size_t errlen)
{
	return space_provision_storage(nc, space_name, replicas, 0, report, err, errlen);
}

int
space_provision_storage(natsConnection *nc, const char *space_name, int replicas,
			int64_t storage, FILE *report, char *err, size_t errlen)
{
	enum stream_state state[PROV_STREAM_KINDS];
	struct prov_stream *want = NULL;
	char *msg = NULL;
	jsCtx *js = NULL;
	int conflicts = 0, first_conflict = -1, rc = -1, sched = 0, k;
	char sched_err[512];

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	/* Validate before touching the broker. */
	want = calloc(PROV_STREAM_KINDS, sizeof(*want));
	msg = malloc(STREAM_ERR_MAX);
	if (want == NULL || msg == NULL) {
		seterr(err, errlen, "provision: out of memory");
		goto out;
	}
	if (storage != 0 && (storage < PROV_STORAGE_MIN || storage > PROV_STORAGE_MAX)) {
		seterr(err, errlen, "provision: --storage %" PRId64 " bytes: expected %" PRId64
		    " (256 MiB) to %" PRId64 " (64 TiB)", storage, PROV_STORAGE_MIN,
		    PROV_STORAGE_MAX);
		goto out;
	}
	if (replicas < 1 || replicas > PROV_REPLICAS_MAX) {
		seterr(err, errlen, "provision: --replicas %d: expected 1 to %d", replicas,
		    PROV_REPLICAS_MAX);
		goto out;
	}
	for (k = 0; k < PROV_STREAM_KINDS; k++) {
		if (provision_stream_expected((enum prov_stream_kind)k, space_name, storage,
		    &want[k], err, errlen) != 0)
			goto out;
		want[k].cfg.Replicas = replicas;
	}
	if (names_fit(want, space_name, err, errlen) != 0)
		goto out;
	if (js_context(nc, &js, err, errlen) != 0)
		goto out;
	/* A broker that fires the timer writer's schedules needs EPT to allow
	 * them; the broker turns roll-ups on with them. A JetStream that does
	 * not answer is reported by the look-ups below, in their words. */
	sched = provision_broker_schedules(nc, sched_err, sizeof(sched_err));
	want[PROV_EPT].schedules = sched == 1;
	want[PROV_EPT].cfg.AllowRollup = sched == 1;

	/* Look everything up first, so a conflict anywhere leaves the space as it
	 * was instead of half-provisioned around a stream nobody may change. */
	for (k = 0; k < PROV_STREAM_KINDS; k++) {
		state[k] = stream_check(nc, js, &want[k], msg, STREAM_ERR_MAX);
		switch (state[k]) {
		case STREAM_MATCHES:
		case STREAM_NEEDS_SCHEDULES:
			report_exists(report, &want[k]);
			/* A capped read-ACL bucket is not left as it is: it is
			 * lifted below. */
			if (msg[0] != '\0' && k != PROV_KV_ACL)
				report_line(report, "  ! %s", msg);
			break;
		case STREAM_MISSING:
			break;
		case STREAM_CONFLICTS:
			report_line(report, "✗ %s", msg);
			if (conflicts++ == 0) {
				first_conflict = k;
				seterr(err, errlen, "%s", msg);
			}
			break;
		case STREAM_ERROR:
			/* Every later request would hit the same wall (no JetStream,
			 * no permission, no connection). */
			report_line(report, "✗ %s", msg);
			seterr(err, errlen, "%s", msg);
			goto out;
		}
	}
	if (conflicts > 0) {
		/* err details the first; the others are at least named. */
		if (conflicts > 1 && err != NULL && errlen > 0) {
			size_t used = strlen(err);
			snprintf(err + used, errlen - used, " (and %d more conflicting:",
			    conflicts - 1);
			for (k = first_conflict + 1; k < PROV_STREAM_KINDS; k++)
				if (state[k] == STREAM_CONFLICTS) {
					used = strlen(err);
					snprintf(err + used, errlen - used, " %s", want[k].name);
				}
			used = strlen(err);
			snprintf(err + used, errlen - used, ")");
		}
		goto out;
	}
	if (sched < 0) {
		seterr(err, errlen, "%s", sched_err);
		report_line(report, "✗ %s", sched_err);
		goto out;
	}
	for (k = 0; k < PROV_STREAM_KINDS; k++)
		if (state[k] == STREAM_MISSING && stream_create(nc, js, &want[k], report, err, errlen) != 0)
			goto out;
	if (state[PROV_KV_ACL] != STREAM_MISSING) {
		int64_t was = 0;
		int r = provision_lift_cap(nc, want[PROV_KV_ACL].name, &was, err, errlen);
		if (r < 0) {
			report_line(report, "✗ %s", err);
			goto out;
		}
		if (r == 1)
			report_line(report, "✓ bucket %s no longer capped at %" PRId64 " bytes: it "
			    "keeps a row for every lifecycle the space ever had", want[PROV_KV_ACL].name
			    + strlen("KV_"), was);
	}
	if (want[PROV_EPT].schedules) {
		int r = provision_allow_schedules(nc, want[PROV_EPT].name, err, errlen);
		if (r < 0) {
			report_line(report, "✗ %s", err);
			goto out;
		}
		if (r == 1)
			report_line(report, "✓ stream %s allows message schedules (the broker fires "
			    "armed timers)", want[PROV_EPT].name);
	}
	rc = 0;
out:
	jsCtx_Destroy(js);
	free(msg);
	free(want);
	return rc;
}

int
provision_member_durable(natsConnection *nc, const char *space_name, const char *owner,
			 const char *actor, const char *uid, char *err, size_t errlen)
{
	char subj[API_SUBJECT_MAX], op[PROV_NAME_MAX * 2 + 32];
	char diff[STREAM_ERR_MAX];
	struct prov_consumer want;
	struct async_err before;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	jsCtx *js = NULL;
	natsStatus s;
	int rc = -1;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (provision_member_durable_expected(space_name, owner, actor, uid, &want, err, errlen) != 0)
		return -1;
	if (js_context(nc, &js, err, errlen) != 0)
		return -1;

	async_err_snapshot(nc, &before);
	s = js_GetConsumerInfo(&ci, js, want.stream, want.durable, NULL, &jerr);
	if (s == NATS_OK) {
		if (ci == NULL || ci->Config == NULL) {
			seterr(err, errlen, "consumer info %s on %s: answer without a config",
			       want.durable, want.stream);
		} else if (provision_consumer_diff(ci->Config, &want.cfg, diff, sizeof(diff)) != 0) {
			seterr(err, errlen, "consumer %s on %s exists with a conflicting config: %s",
			       want.durable, want.stream, diff);
		} else {
			rc = 0;
		}
		goto out;
	}
	if (s == NATS_NOT_FOUND && jerr == JSStreamNotFoundErr) {
		seterr(err, errlen,
		       "consumer info %s on %s: stream not found (err_code %d); provision the space "
		       "first",
		       want.durable, want.stream, (int)jerr);
		goto out;
	}
	if (s != NATS_NOT_FOUND) {
		snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.INFO.%s.%s", want.stream, want.durable);
		snprintf(op, sizeof(op), "consumer info %s on %s", want.durable, want.stream);
		api_failure(err, errlen, nc, op, subj, s, jerr, &before);
		goto out;
	}

	/* Only a missing consumer is created: the server (2.9 and 2.10) applies
	 * a create over an existing durable as a silent update. */
	jerr = 0;
	async_err_snapshot(nc, &before);
	s = js_AddConsumer(&ci, js, want.stream, &want.cfg, NULL, &jerr);
	if (s == NATS_OK) {
		rc = 0;
		goto out;
	}
	snprintf(subj, sizeof(subj), "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s", want.stream,
		 want.durable);
	snprintf(op, sizeof(op), "create consumer %s on %s", want.durable, want.stream);
	api_failure(err, errlen, nc, op, subj, s, jerr, &before);
out:
	jsConsumerInfo_Destroy(ci);
	jsCtx_Destroy(js);
	return rc;
}
