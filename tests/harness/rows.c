/*
 * The data path's state as a test sets and reads it (issue 4): membership
 * and read-ACL rows written as the registry would, KV values, and what the
 * streams hold.
 */
#include "tests/harness/harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/nats/natsconn.h"

int
h_stream_last_seq(struct conn *c, struct mesh *m, const char *kind, uint64_t *seq)
{
	char stream[256];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "%s_%s", kind, m->token);
	if (js_GetStreamInfo(&si, c->js, stream, NULL, &jerr) != NATS_OK)
		return -1;
	*seq = si->State.LastSeq;
	jsStreamInfo_Destroy(si);
	return 0;
}

int
h_chat_last_seq(struct conn *c, struct mesh *m, uint64_t *seq)
{
	return h_stream_last_seq(c, m, "CHAT", seq);
}

int64_t
h_stream_msgs(struct conn *c, const char *stream)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	int64_t n;

	if (js_GetStreamInfo(&si, c->js, stream, NULL, &jerr) != NATS_OK)
		return -1;
	n = (int64_t)si->State.Msgs;
	jsStreamInfo_Destroy(si);
	return n;
}

jsConsumerInfo *
h_reader_info(struct conn *c, struct mesh *m)
{
	char stream[256];
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "INBOX_%s", m->token);
	if (js_GetConsumerInfo(&ci, c->js, stream, "reader", NULL, &jerr) != NATS_OK)
		return NULL;
	return ci;
}

int
h_member_put(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	     uint64_t join, uint64_t leave, uint64_t generation, char *err, size_t errlen)
{
	char key[1024], owner[256];
	json_t *row;
	char *body;
	int rc;

	snprintf(key, sizeof(key), "%s/%s.%s.%s", channel, a->owner, a->actor, a->uid);
	snprintf(owner, sizeof(owner), "%s.%s", a->owner, a->actor);
	row = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:s, s:I}", "channel", channel,
	    "owner", owner, "lifecycleUid", a->uid,
	    "state", leave ? "live-confirmed" : "durable-active", "joinCursor", (json_int_t)join,
	    "generation", (json_int_t)generation, "activated", 1, "writerIdentity", "test",
	    "updatedAt", (json_int_t)wall_ms());
	if (leave)
		json_object_set_new(row, "leaveCursor", json_integer((json_int_t)leave));
	body = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	rc = h_kv_put(c, m, "members", key, body, err, errlen);
	free(body);
	return rc;
}

int
h_member_join(struct conn *c, struct mesh *m, const struct agent *a, const char *channel,
	      uint64_t generation, char *err, size_t errlen)
{
	uint64_t last = 0;

	if (h_chat_last_seq(c, m, &last) != 0) {
		snprintf(err, errlen, "CHAT_%s: no stream info", m->token);
		return -1;
	}
	return h_member_put(c, m, a, channel, last, 0, generation, err, errlen);
}

int
h_acl_put(struct conn *c, struct mesh *m, const struct agent *a, const char *allow, bool retired,
	  char *err, size_t errlen)
{
	char key[512], body[4096];

	snprintf(key, sizeof(key), "%s.%s.%s", a->owner, a->actor, a->uid);
	if (retired)
		snprintf(body, sizeof(body),
		    "{\"allowSubscribe\":[],\"revision\":9,\"updatedAt\":%lld,\"retired\":true,"
		    "\"retiredAt\":%lld}", (long long)wall_ms(), (long long)wall_ms());
	else
		snprintf(body, sizeof(body), "{\"allowSubscribe\":%s,\"revision\":2,\"updatedAt\":%lld}",
		    allow, (long long)wall_ms());
	return h_kv_put(c, m, "acl", key, body, err, errlen);
}

/* A put of value, or a delete marker when value is NULL. */
static int
kv_change(struct conn *c, struct mesh *m, const char *name, const char *key, const char *value,
	  char *err, size_t errlen)
{
	char bucket[256], why[512];
	kvStore *kv = NULL;
	uint64_t rev;
	natsStatus s;

	snprintf(bucket, sizeof(bucket), "cotal_%s_%s", name, m->token);
	s = js_KeyValue(&kv, c->js, bucket);
	if (s == NATS_OK)
		s = value != NULL ? kvStore_PutString(&rev, kv, key, value) : kvStore_Delete(kv, key);
	kvStore_Destroy(kv);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "%s %s/%s: %s", value != NULL ? "put" : "delete", bucket, key,
		    why);
		return -1;
	}
	return 0;
}

int
h_kv_put(struct conn *c, struct mesh *m, const char *name, const char *key,
	 const char *value, char *err, size_t errlen)
{
	return kv_change(c, m, name, key, value, err, errlen);
}

int
h_kv_del(struct conn *c, struct mesh *m, const char *name, const char *key, char *err,
	 size_t errlen)
{
	return kv_change(c, m, name, key, NULL, err, errlen);
}

char *
h_kv_get(struct conn *c, struct mesh *m, const char *name, const char *key, char *err,
	 size_t errlen)
{
	char bucket[256], why[512];
	kvStore *kv = NULL;
	kvEntry *e = NULL;
	char *val = NULL;
	natsStatus s;

	snprintf(bucket, sizeof(bucket), "cotal_%s_%s", name, m->token);
	s = js_KeyValue(&kv, c->js, bucket);
	if (s == NATS_OK)
		s = kvStore_Get(&e, kv, key);
	if (s == NATS_OK)
		val = strndup(kvEntry_ValueString(e), (size_t)kvEntry_ValueLen(e));
	else if (s == NATS_NOT_FOUND)
		snprintf(err, errlen, "not found");
	else {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, errlen, "get %s/%s: %s", bucket, key, why);
	}
	kvEntry_Destroy(e);
	kvStore_Destroy(kv);
	return val;
}

int
h_space_rows(struct conn *c, struct mesh *m, int live, int tombs, int tombs_from, int big,
	     char *err, size_t errlen)
{
	char subj[512], body[1024], ch[64];
	int64_t now = wall_ms();
	natsMsgList failed = { 0 };
	jsPubOptions po;
	int n;

	for (int i = 0; i < live; i++) {
		snprintf(ch, sizeof(ch), "ch%d", i / H_SPACE_CHANNEL_MEMBERS);
		snprintf(subj, sizeof(subj), "$KV.cotal_acl_%s.local.a%d.%026d", m->token, i, i);
		n = snprintf(body, sizeof(body), "{\"allowSubscribe\":[\"%s\"%s],\"revision\":1,"
		    "\"updatedAt\":%" PRId64 "}", ch, i < big ? ",\"big\"" : "", now);
		if (js_PublishAsync(c->js, subj, body, n, NULL) != NATS_OK)
			goto refused;
		for (int k = 0; k < (i < big ? 2 : 1); k++) {
			const char *chan = k == 0 ? ch : "big";
			snprintf(subj, sizeof(subj), "$KV.cotal_members_%s.%s/local.a%d.%026d",
			    m->token, chan, i, i);
			n = snprintf(body, sizeof(body), "{\"channel\":\"%s\",\"owner\":"
			    "\"local.a%d\",\"lifecycleUid\":\"%026d\",\"state\":\"durable-active\","
			    "\"joinCursor\":0,\"generation\":1,\"activated\":true,\"writerIdentity\":"
			    "\"test\",\"updatedAt\":%" PRId64 "}", chan, i, i, now);
			if (js_PublishAsync(c->js, subj, body, n, NULL) != NATS_OK)
				goto refused;
		}
	}
	for (int i = tombs_from; i < tombs_from + tombs; i++) {
		snprintf(subj, sizeof(subj), "$KV.cotal_acl_%s.local.t%d.%026d", m->token, i, i);
		n = snprintf(body, sizeof(body), "{\"allowSubscribe\":[],\"revision\":9,"
		    "\"updatedAt\":%" PRId64 ",\"retired\":true,\"retiredAt\":%" PRId64 "}", now,
		    now);
		if (js_PublishAsync(c->js, subj, body, n, NULL) != NATS_OK)
			goto refused;
	}
	jsPubOptions_Init(&po);
	po.MaxWait = 600000;
	if (js_PublishAsyncComplete(c->js, &po) != NATS_OK) {
		snprintf(err, errlen, "the rows' acknowledgements are missing");
		return -1;
	}
	if (js_PublishAsyncGetPendingList(&failed, c->js) == NATS_OK && failed.Count > 0) {
		snprintf(err, errlen, "the broker refused %d rows (a bucket full?)", failed.Count);
		natsMsgList_Destroy(&failed);
		return -1;
	}
	return 0;
refused:
	snprintf(err, errlen, "cannot publish %s", subj);
	return -1;
}

int64_t
h_stream_subject_msgs(struct conn *c, const char *stream, const char *subject)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	jsOptions o;
	int64_t n = 0;

	jsOptions_Init(&o);
	o.Stream.Info.SubjectsFilter = subject;
	if (js_GetStreamInfo(&si, c->js, stream, &o, &jerr) != NATS_OK)
		return -1;
	for (int i = 0; si->State.Subjects != NULL && i < si->State.Subjects->Count; i++)
		if (strcmp(si->State.Subjects->List[i].Subject, subject) == 0)
			n = (int64_t)si->State.Subjects->List[i].Msgs;
	jsStreamInfo_Destroy(si);
	return n;
}
