/*
 * The last message of many keys of a KV bucket at once, each read from the
 * stream's leader with $JS.API.STREAM.MSG.GET (the stored-message read of
 * kvcas_read, not a direct get a stale replica may answer), the requests
 * pipelined on one connection: n keys cost about one round trip per
 * MSGGET_INFLIGHT of them, not n.
 *
 * The answers come under the credential's own reply prefix (STYLE.md
 * pitfalls: it may subscribe nowhere else), one subscription for the call,
 * each reply subject ending in its key's index. A request left unanswered
 * (sent to a server that is gone, or to a stream electing its leader) is
 * asked again every MSGGET_RESEND_MS and at once after a failover; a
 * second answer to it is ignored.
 */
#ifndef COTAL_MSGGET_H
#define COTAL_MSGGET_H

#include <nats/nats.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/nats/kvcas.h"

#define MSGGET_INFLIGHT 256               /* requests outstanding at once */
#define MSGGET_RESEND_MS 1000             /* an unanswered request is asked again this often */
#define MSGGET_REPLY_MAX (2 * 1024 * 1024) /* an answer read, at most (a value of
					    * KVCAS_VALUE_MAX in base64 fits) */
#define MSGGET_BUCKET_MAX 256             /* a bucket's name, in bytes */
#define MSGGET_KEY_MAX 8192               /* a key, in bytes (a membership row's: a channel
					    * of up to 4096 bytes and a lifecycle) */

struct msgget_result {
	/*
	 * 1: the key's value is in value/len; 0: no value (never written, or
	 * its last message is a delete or purge marker); KVCAS_TOO_LARGE
	 * (kvcas.h) when the value is over KVCAS_VALUE_MAX; -1: this key's
	 * read failed, err says why (naming bucket and key, and the broker's
	 * words when it gave some).
	 */
	int rc;
	char *value;  /* malloc'd, NUL-terminated copy (msgget_result_free) */
	size_t len;
	uint64_t rev; /* the message's stream sequence (a marker's too); 0: no message */
	char err[256];
};

/*
 * The last message of each of the n keys of bucket (stream KV_<bucket>,
 * subject $KV.<bucket>.<key>), asked with body {"last_by_subj": subject},
 * replies to <inbox_prefix>.<unique token>.<i>, at most MSGGET_INFLIGHT
 * outstanding. The whole call takes at most timeout_ms, and then, when a
 * request went twice or went unanswered, one flush of nc to close the
 * subscription a late answer may still reach (natsconn.h conn_sub_close).
 * 0 when every key got an answer (each out[i].rc says what it was; a key
 * that is not a valid KV key is -1 without being asked); -1 with err when
 * the requests cannot be sent or the time runs out, every out[i] then
 * freed and zeroed. Runs on the caller's thread; calls on one connection
 * may overlap (each has its own reply subjects).
 */
int msgget_last_many(natsConnection *nc, const char *inbox_prefix, const char *bucket,
		     const char *const *keys, size_t n, struct msgget_result *out,
		     int timeout_ms, char *err, size_t errlen);

/*
 * One STREAM.MSG.GET answer of len bytes for bucket/key, decoded into *out
 * (overwritten, not freed first): a stored message
 *   {"message":{"subject":..,"seq":N,"hdrs":"<base64>","data":"<base64>",..}}
 * (hdrs and data are left out when empty), or an error
 *   {"error":{"code":404,"err_code":10037,"description":"no message found"}}
 * which is rc 0; any other error is -1 with its description. An answer
 * over MSGGET_REPLY_MAX, or one that is not that JSON, or base64 that is
 * not the standard padded form, is -1 with err naming the field.
 */
void msgget_parse(const char *bucket, const char *key, const char *data, size_t len,
		  struct msgget_result *out);

/* Free r's value and zero it. */
void msgget_result_free(struct msgget_result *r);

#endif
