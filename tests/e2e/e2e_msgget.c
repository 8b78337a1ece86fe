/*
 * lib/nats/msgget.c against a real broker: the last message of many keys
 * of a bucket at once, read by the daemon's credential under its own reply
 * prefix, each key's answer exactly what was written last: the value put
 * (or updated with a header beside it) at the revision its PubAck named,
 * no value at the revision of a delete or purge marker, and no value and
 * no revision for a key never written. A key that is no valid key fails
 * alone; a bucket the credential may not read fails the whole call within
 * its time, naming the bucket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/creds/perms.h"
#include "lib/nats/kvcas.h"
#include "lib/nats/msgget.h"
#include "tests/harness/harness.h"

#define KEYS 600      /* keys written (or not) by the test */
#define ABSENT 10     /* keys of no message at all, asked too */
#define BIG 100000    /* bytes of one value: answers of many sizes in one window */
#define READ_MS 20000

static struct mesh mesh;
static struct conn prov;  /* writes the rows */
static struct conn dlv;   /* the daemon's credential: reads them */
static char bucket[256];
static char inbox[REPLY_INBOX_MAX];

static int
setup(void **state)
{
	char err[512];

	(void)state;
	if (h_mesh_up(&mesh, "msgget", true) != 0)
		return -1;
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0 ||
	    h_connect_profile(&mesh, "delivery", &dlv, err, sizeof(err)) != 0 ||
	    jwt_reply_inbox(dlv.creds.jwt, inbox, sizeof(inbox), err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ connect: %s\n", err);
		return -1;
	}
	snprintf(bucket, sizeof(bucket), "cotal_members_%s", mesh.token);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	h_close(&dlv);
	h_close(&prov);
	h_mesh_down(&mesh);
	return 0;
}

/* What a key's read must give. */
struct want {
	char key[64];
	int rc;
	uint64_t rev;
	char *value;
	size_t len;
};

static uint64_t
put(kvStore *kv, struct want *w, const char *value, size_t len)
{
	uint64_t rev = 0;

	assert_int_equal(kvStore_Put(&rev, kv, w->key, value, (int)len), NATS_OK);
	assert_true(rev > 0);
	free(w->value);
	w->value = malloc(len + 1);
	assert_non_null(w->value);
	memcpy(w->value, value, len);
	w->value[len] = '\0';
	w->len = len;
	w->rc = 1;
	w->rev = rev;
	return rev;
}

/* A purge marker as kvStore_Purge writes it, published here for its
 * revision. */
static uint64_t
purge(const char *key)
{
	char subj[512];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	uint64_t rev;

	snprintf(subj, sizeof(subj), "$KV.%s.%s", bucket, key);
	assert_int_equal(natsMsg_Create(&m, subj, NULL, NULL, 0), NATS_OK);
	assert_int_equal(natsMsgHeader_Set(m, "KV-Operation", "PURGE"), NATS_OK);
	assert_int_equal(natsMsgHeader_Set(m, "Nats-Rollup", "sub"), NATS_OK);
	assert_int_equal(js_PublishMsg(&pa, prov.js, m, NULL, &jerr), NATS_OK);
	rev = pa->Sequence;
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return rev;
}

static void
expect_read(const struct want *w, const struct msgget_result *r)
{
	if (r->rc != w->rc || r->rev != w->rev)
		fail_msg("%s: rc %d at revision %llu (%s), want rc %d at %llu", w->key, r->rc,
		    (unsigned long long)r->rev, r->err, w->rc, (unsigned long long)w->rev);
	if (w->rc != 1) {
		assert_null(r->value);
		return;
	}
	assert_non_null(r->value);
	if (r->len != w->len || memcmp(r->value, w->value, w->len) != 0)
		fail_msg("%s: a value of %zu bytes, want the %zu written", w->key, r->len, w->len);
	assert_int_equal(r->value[r->len], '\0');
}

/*
 * KEYS keys, by i % 5: never written; put once (one empty, one with a NUL
 * inside, one of BIG bytes); put, then updated by kvcas_write with its
 * origin header; put, then deleted (kvcas_write's marker); put, then
 * purged. Then ABSENT keys no one wrote. Read all at once: more than twice
 * MSGGET_INFLIGHT, so the window refills.
 */
static void
test_the_last_message_of_many_keys_is_what_was_written(void **state)
{
	static struct want w[KEYS + ABSENT];
	static struct msgget_result out[KEYS + ABSENT];
	const char *keys[KEYS + ABSENT];
	kvStore *kv = NULL;
	char val[128], err[512], *big = malloc(BIG);
	uint64_t rev;

	(void)state;
	assert_non_null(big);
	for (int i = 0; i < BIG; i++)
		big[i] = (char)('a' + i % 26);
	assert_int_equal(js_KeyValue(&kv, prov.js, bucket), NATS_OK);
	for (int i = 0; i < KEYS + ABSENT; i++) {
		if (i < KEYS)
			snprintf(w[i].key, sizeof(w[i].key), "msgget.%03d", i);
		else
			snprintf(w[i].key, sizeof(w[i].key), "msgget.absent.%d", i - KEYS);
		keys[i] = w[i].key;
		if (i >= KEYS || i % 5 == 0)
			continue; /* rc 0, revision 0: no message */
		int n = snprintf(val, sizeof(val), "{\"row\":%d,\"round\":1}", i);
		if (i == 1)
			rev = put(kv, &w[i], "", 0);
		else if (i == 6)
			rev = put(kv, &w[i], "nul\0inside", 10);
		else if (i == 11)
			rev = put(kv, &w[i], big, BIG);
		else
			rev = put(kv, &w[i], val, (size_t)n);
		switch (i % 5) {
		case 2:
			n = snprintf(val, sizeof(val), "{\"row\":%d,\"round\":2}", i);
			if (kvcas_write(prov.js, bucket, w[i].key, val, (size_t)n, rev, false,
			    "e2e-msgget", &w[i].rev, err, sizeof(err)) != 0)
				fail_msg("update %s: %s", w[i].key, err);
			free(w[i].value);
			w[i].value = strdup(val);
			w[i].len = (size_t)n;
			break;
		case 3:
			if (kvcas_write(prov.js, bucket, w[i].key, NULL, 0, rev, true, NULL, &w[i].rev,
			    err, sizeof(err)) != 0)
				fail_msg("delete %s: %s", w[i].key, err);
			w[i].rc = 0;
			break;
		case 4:
			w[i].rev = purge(w[i].key);
			w[i].rc = 0;
			break;
		}
		if (w[i].rc == 0) {
			free(w[i].value);
			w[i].value = NULL;
			w[i].len = 0;
		}
	}
	int64_t t0 = mono_ms();
	if (msgget_last_many(dlv.nc, inbox, bucket, keys, KEYS + ABSENT, out, READ_MS, err,
	    sizeof(err)) != 0)
		fail_msg("msgget_last_many: %s", err);
	printf("• the last messages of %d keys read in %lld ms\n", KEYS + ABSENT,
	    (long long)(mono_ms() - t0));
	for (int i = 0; i < KEYS + ABSENT; i++) {
		expect_read(&w[i], &out[i]);
		msgget_result_free(&out[i]);
		free(w[i].value);
	}
	free(big);
	kvStore_Destroy(kv);
}

/* A key that is not a valid key is -1 alone, never asked; the others are
 * read. */
static void
test_an_invalid_key_fails_alone(void **state)
{
	const char *keys[] = { "msgget.001", "bad key", "msgget.*", "msgget..x", "msgget.002" };
	struct msgget_result out[5];
	char err[512];

	(void)state;
	if (msgget_last_many(dlv.nc, inbox, bucket, keys, 5, out, READ_MS, err, sizeof(err)) != 0)
		fail_msg("msgget_last_many: %s", err);
	assert_int_equal(out[0].rc, 1);
	assert_string_equal(out[0].value, "");
	for (int i = 1; i < 4; i++) {
		assert_int_equal(out[i].rc, -1);
		if (strstr(out[i].err, keys[i]) == NULL || strstr(out[i].err, "not a valid key") ==
		    NULL)
			fail_msg("%s: %s", keys[i], out[i].err);
	}
	assert_int_equal(out[4].rc, 1);
	assert_non_null(strstr(out[4].value, "\"round\":2"));
	for (int i = 0; i < 5; i++)
		msgget_result_free(&out[i]);
	/* No key at all: nothing to ask. */
	assert_int_equal(msgget_last_many(dlv.nc, inbox, bucket, keys, 0, out, READ_MS, err,
	    sizeof(err)), 0);
}

/* The broker refuses the request (the credential may not read the
 * bucket): nobody answers; the call ends at its time, having asked again,
 * naming the bucket, with nothing left in out. */
static void
test_a_bucket_not_granted_fails_within_the_time(void **state)
{
	char other[300], err[512];
	const char *keys[] = { "msgget.001", "msgget.002" };
	struct msgget_result out[2];

	(void)state;
	snprintf(other, sizeof(other), "cotal_nope_%s", mesh.token);
	int64_t t0 = mono_ms();
	assert_int_equal(msgget_last_many(dlv.nc, inbox, other, keys, 2, out, 1500, err,
	    sizeof(err)), -1);
	int64_t took = mono_ms() - t0;
	printf("• refused: \"%s\" after %lld ms\n", err, (long long)took);
	assert_true(took >= 1500 && took < 1500 + 3000);
	assert_non_null(strstr(err, other));
	assert_non_null(strstr(err, "2 of 2 keys unanswered"));
	for (int i = 0; i < 2; i++) {
		assert_int_equal(out[i].rc, 0);
		assert_null(out[i].value);
	}
	assert_true(h_violation(&dlv, other, 1000));
	/* The connection is as good as before. */
	assert_int_equal(msgget_last_many(dlv.nc, inbox, bucket, keys, 2, out, READ_MS, err,
	    sizeof(err)), 0);
	assert_int_equal(out[0].rc, 1);
	msgget_result_free(&out[0]);
	msgget_result_free(&out[1]);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_the_last_message_of_many_keys_is_what_was_written),
		cmocka_unit_test(test_an_invalid_key_fails_alone),
		cmocka_unit_test(test_a_bucket_not_granted_fails_within_the_time),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
