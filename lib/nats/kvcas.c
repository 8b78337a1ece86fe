/* KV compare-and-set on the stream level (see kvcas.h). */
#include "lib/nats/kvcas.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/kvwatch.h"
#include "lib/nats/natsconn.h"

#define SUBJECT_MAX 8192

int
kvcas_read(jsCtx *js, const char *bucket, const char *key, char **value, size_t *len,
	   uint64_t *rev, char *err, size_t errlen)
{
	char stream[SUBJECT_MAX], subj[SUBJECT_MAX], what[256];
	const char *op = NULL;
	natsMsg *m = NULL;
	jsErrCode jerr = 0;
	natsStatus s;

	*value = NULL;
	*len = 0;
	*rev = 0;
	snprintf(stream, sizeof(stream), "KV_%s", bucket);
	snprintf(subj, sizeof(subj), "$KV.%s.%s", bucket, key);
	s = js_GetLastMsg(&m, js, stream, subj, NULL, &jerr);
	if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
		return 0;
	if (s != NATS_OK) {
		snprintf(what, sizeof(what), "read %s/%.150s", bucket, key);
		conn_jserror(what, s, jerr, err, errlen);
		return -1;
	}
	*rev = natsMsg_GetSequence(m);
	if (natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK && op != NULL &&
	    (strcmp(op, "DEL") == 0 || strcmp(op, "PURGE") == 0)) {
		natsMsg_Destroy(m);
		return 0;
	}
	*len = (size_t)natsMsg_GetDataLength(m);
	if (*len > KVCAS_VALUE_MAX) {
		snprintf(err, errlen, "read %s/%.150s: a value of %zu bytes (over %d)", bucket, key,
		    *len, KVCAS_VALUE_MAX);
		natsMsg_Destroy(m);
		*len = 0;
		return KVCAS_TOO_LARGE;
	}
	if ((*value = malloc(*len + 1)) == NULL) {
		snprintf(err, errlen, "read %s/%.150s: out of memory", bucket, key);
		natsMsg_Destroy(m);
		return -1;
	}
	memcpy(*value, natsMsg_GetData(m), *len);
	(*value)[*len] = '\0';
	natsMsg_Destroy(m);
	return 1;
}

int
kvcas_write(jsCtx *js, const char *bucket, const char *key, const char *value, size_t len,
	    uint64_t expect, bool del, const char *origin, uint64_t *rev, char *err, size_t errlen)
{
	char subj[SUBJECT_MAX], seq[24], what[256];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	natsStatus s;
	int rc = -1;

	snprintf(subj, sizeof(subj), "$KV.%s.%s", bucket, key);
	snprintf(seq, sizeof(seq), "%" PRIu64, expect);
	snprintf(what, sizeof(what), "%s %s/%.150s at revision %" PRIu64,
	    del ? "delete" : "write", bucket, key, expect);
	s = natsMsg_Create(&m, subj, NULL, del ? NULL : value, del ? 0 : (int)len);
	if (s == NATS_OK)
		s = natsMsgHeader_Set(m, "Nats-Expected-Last-Subject-Sequence", seq);
	if (s == NATS_OK && del)
		s = natsMsgHeader_Set(m, "KV-Operation", "DEL");
	if (s == NATS_OK && origin != NULL && !del)
		s = natsMsgHeader_Set(m, KVW_ORIGIN_HEADER, origin);
	if (s == NATS_OK)
		s = js_PublishMsg(&pa, js, m, NULL, &jerr);
	if (s == NATS_OK) {
		*rev = pa->Sequence;
		rc = 0;
	} else if (jerr == JSStreamWrongLastSequenceErr) {
		rc = 1;
	} else {
		conn_jserror(what, s, jerr, err, errlen);
	}
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return rc;
}
