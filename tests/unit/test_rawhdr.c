/*
 * A header block read and written as bytes (lib/nats/rawhdr.c, issue 40)
 * against libnats's own: the block written for the data path's headers is
 * the one libnats encodes from natsMsgHeader_Set (so a frame or an entry is
 * published byte for byte as before), and a value read in place is the one
 * natsMsgHeader_Get returns; a block of another form is left to libnats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <nats/nats.h>

#include "lib/nats/rawhdr.h"

/* libnats 3.4.1's encoder (src/msg.h), over a buffer on our bytes
 * (src/buf.h): what it writes after HPUB. */
typedef struct natsBuffer natsBuffer;
natsStatus natsBuf_CreateWithBackend(natsBuffer **buf, char *data, int len, int capacity);
void natsBuf_Destroy(natsBuffer *buf);
int natsMsgHeader_encodedLen(natsMsg *msg);
natsStatus natsMsgHeader_encode(natsBuffer *buf, natsMsg *msg);

static size_t
libnats_block(natsMsg *m, char *out, size_t cap)
{
	natsBuffer *buf = NULL;
	int n = natsMsgHeader_encodedLen(m);

	assert_true(n > 0 && (size_t)n <= cap);
	assert_int_equal(natsBuf_CreateWithBackend(&buf, out, 0, (int)cap), NATS_OK);
	assert_int_equal(natsMsgHeader_encode(buf, m), NATS_OK);
	natsBuf_Destroy(buf);
	return (size_t)n;
}

/* The block pubbatch writes: Nats-Msg-Id and the extra header in the
 * order libnats iterates them. */
static size_t
our_block(char *out, const char *msgid, const char *hname, const char *hval)
{
	const char *names[2], *values[2];
	int n = 0;
	bool first = hname == NULL || msgid == NULL || rawhdr_first("Nats-Msg-Id", hname);

	if (msgid != NULL && first)
		names[n] = "Nats-Msg-Id", values[n++] = msgid;
	if (hname != NULL)
		names[n] = hname, values[n++] = hval;
	if (msgid != NULL && !first)
		names[n] = "Nats-Msg-Id", values[n++] = msgid;
	return rawhdr_encode(out, names, values, n);
}

static void
check_headers(const char *msgid, const char *hname, const char *hval)
{
	char want[RAWHDR_MAX], got[RAWHDR_MAX], sent[RAWHDR_MAX], buf[RAWHDR_MAX + 16];
	natsMsg *ref = NULL, *m = NULL;
	const char *v = NULL, *lib = NULL;
	size_t vl = 0;

	assert_int_equal(natsMsg_Create(&ref, "cotal.s.dlv.o.a.u", "_INBOX.pa.1.2", "{}", 2),
	    NATS_OK);
	if (msgid != NULL)
		assert_int_equal(natsMsgHeader_Set(ref, "Nats-Msg-Id", msgid), NATS_OK);
	if (hname != NULL)
		assert_int_equal(natsMsgHeader_Set(ref, hname, hval), NATS_OK);
	size_t wl = libnats_block(ref, want, sizeof(want));
	size_t gl = our_block(got, msgid, hname, hval);
	printf("• %.*s", (int)gl, got);
	assert_int_equal(gl, wl);
	assert_memory_equal(got, want, wl);

	/* The message made of it publishes the same bytes, and reads back. */
	memcpy(buf, got, gl);
	memcpy(buf + gl, "{}", 2);
	assert_int_equal(rawhdr_msg(&m, "cotal.s.dlv.o.a.u", "_INBOX.pa.1.2", buf, gl, 2), NATS_OK);
	assert_int_equal(libnats_block(m, sent, sizeof(sent)), wl);
	assert_memory_equal(sent, want, wl);
	assert_int_equal(natsMsg_GetDataLength(m), 2);
	assert_memory_equal(natsMsg_GetData(m), "{}", 2);
	if (msgid != NULL) {
		assert_int_equal(rawhdr_get(m, "Nats-Msg-Id", &v, &vl), 1);
		assert_int_equal(natsMsgHeader_Get(m, "Nats-Msg-Id", &lib), NATS_OK);
		assert_int_equal(vl, strlen(lib));
		assert_memory_equal(v, lib, vl);
	}
	natsMsg_Destroy(m);
	natsMsg_Destroy(ref);
}

static void
test_the_data_paths_headers_are_written_as_libnats_writes_them(void **state)
{
	(void)state;
	assert_true(rawhdr_usable());
	/* The reader's frame, the fan-out's entry, the registry's entry. */
	check_headers("p1:o.a:u1:3", "Cotal-Delivery-Frame", "1");
	check_headers("p1:o.a:u1:3", "Cotal-Posted-At", "1733500000123456789");
	check_headers("p1:o.a:u1:3", NULL, NULL);
	check_headers(NULL, "Cotal-Posted-At", "1733500000123456789");
	/* libnats writes a CR or LF in a value as a space. */
	check_headers("a\rb\nc", "Cotal-Delivery-Frame", "1");
}

/* A received message's block, as libnats makes it of an HMSG. */
static natsMsg *
received(const char *block)
{
	natsStatus natsMsg_create(natsMsg **, const char *, int, const char *, int, const char *,
				  int, int);
	char buf[512];
	natsMsg *m = NULL;
	size_t hl = strlen(block);

	memcpy(buf, block, hl);
	memcpy(buf + hl, "data", 4);
	assert_int_equal(natsMsg_create(&m, "cotal.s.dinbox.o.a.u", 20, "$JS.ACK.x", 9, buf,
	    (int)hl + 4, (int)hl), NATS_OK);
	return m;
}

static void
expect(const char *block, const char *name, int rc, const char *value)
{
	natsMsg *m = received(block);
	const char *v = NULL, *lib = NULL;
	size_t vl = 0;

	assert_int_equal(rawhdr_get(m, name, &v, &vl), rc);
	if (rc == 1) {
		assert_int_equal(vl, strlen(value));
		assert_memory_equal(v, value, vl);
	}
	/* What libnats reads of it, where this read it. */
	natsStatus s = natsMsgHeader_Get(m, name, &lib);
	if (rc == 1)
		assert_string_equal(lib, value);
	if (rc == 0)
		assert_int_equal(s, NATS_NOT_FOUND);
	/* Lifted, the block is libnats's: not read again here. */
	assert_int_equal(rawhdr_get(m, name, &v, &vl), -1);
	natsMsg_Destroy(m);
}

static void
test_a_value_read_in_place_is_the_one_libnats_reads(void **state)
{
	(void)state;
	expect("NATS/1.0\r\nNats-Msg-Id: k1\r\nCotal-Posted-At: 17\r\n\r\n", "Nats-Msg-Id", 1, "k1");
	expect("NATS/1.0\r\nNats-Msg-Id: k1\r\nCotal-Posted-At: 17\r\n\r\n", "Cotal-Posted-At", 1,
	    "17");
	expect("NATS/1.0\r\nNats-Msg-Id:k1  \r\n\r\n", "Nats-Msg-Id", 1, "k1");
	expect("NATS/1.0\r\nNats-Msg-Id: k1\r\nNats-Msg-Id: k2\r\n\r\n", "Nats-Msg-Id", 1, "k1");
	expect("NATS/1.0\r\nCotal-Posted-At: 17\r\n\r\n", "Nats-Msg-Id", 0, NULL);
	expect("NATS/1.0\r\nnats-msg-id: k1\r\n\r\n", "Nats-Msg-Id", 0, NULL);
	/* Other forms: a status line, a folded line, no value. */
	expect("NATS/1.0 100 Idle\r\nNats-Msg-Id: k1\r\n\r\n", "Nats-Msg-Id", -1, NULL);
	expect("NATS/1.0\r\nNats-Msg-Id: k1\r\n more\r\n\r\n", "Nats-Msg-Id", -1, NULL);
	expect("NATS/1.0\r\nNats-Msg-Id: k1\r\nCotal-Posted-At:\r\n\r\n", "Nats-Msg-Id", -1, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_the_data_paths_headers_are_written_as_libnats_writes_them),
		cmocka_unit_test(test_a_value_read_in_place_is_the_one_libnats_reads),
	};

	assert_int_equal(nats_Open(-1), NATS_OK);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
