/*
 * IPC framing (ipc/ipc.h): "One datagram carries exactly one frame ...
 * Decoding is strict: a short frame, a length that disagrees with the
 * datagram, an oversized datagram, an unknown type, a type that may not
 * travel in that direction, a payload outside the type's bounds or a
 * malformed fixed payload is a protocol error." Every test runs over a
 * real SOCK_SEQPACKET socketpair, as the supervisor and a worker do.
 */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/ipc.h"

#define ERR_MAX 256
#define NONCE "k5e8YxV9aCvnQ2Wq" /* the shape of a broker nonce */
#define INTERLEAVED_ROUNDS 16

/* Both ends of one channel and a receive buffer of exactly IPC_MAX_FRAME
 * bytes on the heap, so ASan sees a write past it. */
struct chan {
	int sup; /* the supervisor's end */
	int wrk; /* the worker's end */
	uint8_t *buf;
	char err[ERR_MAX];
};

static int
chan_setup(void **state)
{
	struct chan *c = calloc(1, sizeof(*c));
	int sv[2];

	if (c == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	c->sup = sv[0];
	c->wrk = sv[1];
	if ((c->buf = malloc(IPC_MAX_FRAME)) == NULL)
		return -1;
	*state = c;
	return 0;
}

static int
chan_teardown(void **state)
{
	struct chan *c = *state;

	if (c->sup >= 0)
		close(c->sup);
	if (c->wrk >= 0)
		close(c->wrk);
	free(c->buf);
	free(c);
	return 0;
}

static void
valid_config(struct ipc_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->role, sizeof(cfg->role), "reader");
	snprintf(cfg->space, sizeof(cfg->space), "demo");
	snprintf(cfg->url, sizeof(cfg->url), "nats://127.0.0.1:4222");
	snprintf(cfg->inbox_prefix, sizeof(cfg->inbox_prefix), "_INBOX_UABC");
	cfg->broker_ports[0] = 4222;
	cfg->uid = 1000;
	cfg->gid = 1000;
	cfg->drop_privs = 1;
	cfg->max_memberships = 1000;
	cfg->max_channels = 100;
}

static void
valid_status(struct ipc_status *st)
{
	memset(st, 0, sizeof(*st));
	st->state = IPC_STATE_CONNECTED;
	for (unsigned i = 0; i < IPC_COUNTERS; i++)
		st->counters[i] = 1000 + i;
}

/* A frame sent as is, bypassing ipc_send, to play a broken peer. */
static void
send_raw(int fd, const void *frame, size_t n)
{
	assert_int_equal(send(fd, frame, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void
send_hdr(int fd, uint16_t type, uint16_t flags, uint32_t len, const void *payload,
    size_t n)
{
	uint8_t frame[IPC_HDR_LEN + 1024];

	assert_true(n <= sizeof(frame) - IPC_HDR_LEN);
	memcpy(frame, &type, 2);
	memcpy(frame + 2, &flags, 2);
	memcpy(frame + 4, &len, 4);
	if (n > 0)
		memcpy(frame + IPC_HDR_LEN, payload, n);
	send_raw(fd, frame, IPC_HDR_LEN + n);
}

/* The next datagram at fd must be refused with err containing want. */
static void
expect_refused(struct chan *c, int fd, enum ipc_dir dir, const char *want)
{
	struct ipc_msg m;

	assert_int_equal(ipc_recv(fd, c->buf, dir, &m, c->err, sizeof(c->err)), -1);
	assert_int_equal(errno, EPROTO);
	if (strstr(c->err, want) == NULL)
		fail_msg("err \"%s\" does not say \"%s\"", c->err, want);
}

static void
expect_message(struct chan *c, int fd, enum ipc_dir dir, uint16_t type, const void *payload,
    size_t len)
{
	struct ipc_msg m;

	if (ipc_recv(fd, c->buf, dir, &m, c->err, sizeof(c->err)) != 1)
		fail_msg("%s refused: %s", ipc_type_name(type), c->err);
	assert_string_equal(c->err, "");
	assert_int_equal(m.type, type);
	assert_int_equal(m.len, len);
	if (len > 0)
		assert_memory_equal(m.payload, payload, len);
}

/* Two certificate blocks, CRLF and LF, as TLS_CA carries them. */
#define TLS_CA_TWO "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n+/9w==\n" \
	"-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\r\nMIIB\r\n" \
	"-----END CERTIFICATE-----"

/* A valid payload of each type, its length and the end it arrives at. */
static size_t
valid_payload(uint16_t type, uint8_t *p, size_t cap)
{
	struct ipc_config cfg;
	struct ipc_status st;

	switch (type) {
	case IPC_CONFIG:
		valid_config(&cfg);
		assert_true(cap >= sizeof(cfg));
		memcpy(p, &cfg, sizeof(cfg));
		return sizeof(cfg);
	case IPC_JWT:
		snprintf((char *)p, cap, "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.c2ln");
		return strlen((char *)p);
	case IPC_SIGN_REQ:
		snprintf((char *)p, cap, "%s", NONCE);
		return strlen(NONCE);
	case IPC_SIGN_REP:
		assert_true(cap >= IPC_SIGN_REP_LEN);
		for (size_t i = 0; i < IPC_SIGN_REP_LEN; i++)
			p[i] = (uint8_t)(i * 7 + 1);
		return IPC_SIGN_REP_LEN;
	case IPC_STATUS:
		valid_status(&st);
		assert_true(cap >= sizeof(st));
		memcpy(p, &st, sizeof(st));
		return sizeof(st);
	case IPC_SYS_CREDS: {
		struct ipc_sys_creds h = { .which = IPC_SYS_EVICTOR };
		snprintf(h.inbox_prefix, sizeof(h.inbox_prefix), "_INBOX_UABCDEFGHIJKLMNOP");
		snprintf(h.user, sizeof(h.user), "UABCDEFGH");
		snprintf(h.account, sizeof(h.account), "AABCDEFGH");
		assert_true(cap >= sizeof(h) + 4);
		memcpy(p, &h, sizeof(h));
		memcpy(p + sizeof(h), "eyJ0", 4);
		return sizeof(h) + 4;
	}
	case IPC_SIGN_SYS:
		p[0] = IPC_SYS_OBSERVER;
		memcpy(p + 1, NONCE, strlen(NONCE));
		return 1 + strlen(NONCE);
	case IPC_LEASE: {
		struct ipc_lease l = { .state = IPC_LEASE_SERVING };
		snprintf(l.instance, sizeof(l.instance), "0123abcd");
		memcpy(p, &l, sizeof(l));
		return sizeof(l);
	}
	case IPC_RELOAD_REQ: {
		struct ipc_reload_req r = { .id = 7 };
		memset(r.expected, 'a', IPC_SHA256_HEX - 1);
		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	case IPC_RELOAD_REP: {
		struct ipc_reload_rep r = { .id = 7, .ok = 0 };
		snprintf(r.error, sizeof(r.error), "not finished starting");
		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	case IPC_TLS_CA:
		snprintf((char *)p, cap, "%s", TLS_CA_TWO);
		return strlen(TLS_CA_TWO);
	case IPC_METRICS_BEGIN: {
		struct ipc_metrics_begin b = { .health = 503, .text_len = 10, .openmetrics_len = 16 };
		snprintf(b.reason, sizeof(b.reason), "not serving: the space demo (rechecking)");
		memcpy(p, &b, sizeof(b));
		return sizeof(b);
	}
	case IPC_METRICS_PART:
		memcpy(p, "# EOF\n", 6);
		return 6;
	case IPC_REFUSALS: {
		struct ipc_refusals r = { .n = 2 };
		snprintf(r.top[0].principal, sizeof(r.top[0].principal), "local.flooder");
		r.top[0].count = 1234;
		snprintf(r.top[1].principal, sizeof(r.top[1].principal), "other");
		r.top[1].count = 5;
		assert_true(cap >= sizeof(r));
		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	case IPC_KICK_REQ: {
		struct ipc_kick_req r = { .id = 9, .cid = 42 };
		snprintf(r.server, sizeof(r.server), "NDQ2ZKG3A7_server-1");
		snprintf(r.principal, sizeof(r.principal), "local.alice");
		assert_true(cap >= sizeof(r));
		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	case IPC_KICK_REP: {
		struct ipc_kick_rep r = { .id = 9, .outcome = IPC_KICK_REFUSED };
		snprintf(r.reply, sizeof(r.reply), "not principal local.alice's");
		assert_true(cap >= sizeof(r));
		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	default:
		return 0;
	}
}

/* The receiving end for a type: the worker's when it travels to workers. */
static int
receiver(struct chan *c, uint16_t type, enum ipc_dir *dir, int *from)
{
	const struct ipc_type_info *t = ipc_type_info(type);

	assert_non_null(t);
	*dir = (t->dir & IPC_TO_WORKER) ? IPC_TO_WORKER : IPC_TO_SUPERVISOR;
	*from = *dir == IPC_TO_WORKER ? c->sup : c->wrk;
	return *dir == IPC_TO_WORKER ? c->wrk : c->sup;
}

static void
test_every_type_round_trips(void **state)
{
	struct chan *c = *state;
	uint8_t p[8192];
	enum ipc_dir dir;
	int from, to;

	for (uint16_t type = IPC_CONFIG; type < IPC_TYPE_END; type++) {
		size_t len = valid_payload(type, p, sizeof(p));

		assert_string_equal(ipc_type_name(type), ipc_type_info(type)->name);
		to = receiver(c, type, &dir, &from);
		assert_int_equal(ipc_send(from, type, len ? p : NULL, len), 0);
		expect_message(c, to, dir, type, p, len);
	}
}

static void
test_catalogue_bounds(void **state)
{
	(void)state;
	assert_int_equal(ipc_type_info(IPC_CONFIG)->min_len, sizeof(struct ipc_config));
	assert_int_equal(ipc_type_info(IPC_CONFIG)->max_len, sizeof(struct ipc_config));
	assert_int_equal(ipc_type_info(IPC_JWT)->min_len, 1);
	assert_int_equal(ipc_type_info(IPC_JWT)->max_len, IPC_MAX_PAYLOAD);
	assert_int_equal(ipc_type_info(IPC_SIGN_REQ)->max_len, IPC_SIGN_REQ_MAX);
	assert_int_equal(ipc_type_info(IPC_SIGN_REQ)->dir, IPC_TO_SUPERVISOR);
	assert_int_equal(ipc_type_info(IPC_SIGN_REP)->dir, IPC_TO_WORKER);
	assert_int_equal(ipc_type_info(IPC_STATUS)->min_len, sizeof(struct ipc_status));
	assert_int_equal(ipc_type_info(IPC_STOP)->max_len, 0);
	assert_null(ipc_type_info(0));
	assert_null(ipc_type_info(IPC_TYPE_END));
	assert_string_equal(ipc_type_name(999), "unknown");
}

static void
test_largest_jwt_round_trips(void **state)
{
	struct chan *c = *state;
	char *jwt = malloc(IPC_MAX_PAYLOAD);

	assert_non_null(jwt);
	memset(jwt, 'j', IPC_MAX_PAYLOAD);
	assert_int_equal(ipc_send(c->sup, IPC_JWT, jwt, IPC_MAX_PAYLOAD), 0);
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_JWT, jwt, IPC_MAX_PAYLOAD);
	free(jwt);
}

static void
test_short_frame_refused(void **state)
{
	struct chan *c = *state;
	uint8_t frame[IPC_HDR_LEN] = { IPC_READY, 0 };
	char want[64];
	struct ipc_msg m;

	for (size_t n = 0; n < IPC_HDR_LEN; n++) {
		snprintf(want, sizeof(want), "short frame (%zu bytes)", n);
		assert_int_equal(ipc_decode(frame, n, IPC_TO_SUPERVISOR, &m, c->err,
		    sizeof(c->err)), -1);
		assert_non_null(strstr(c->err, want));
		/* Over the socket too: an empty datagram is not the end. */
		send_raw(c->wrk, frame, n);
		expect_refused(c, c->sup, IPC_TO_SUPERVISOR, want);
	}
}

static void
test_length_disagreeing_with_datagram_refused(void **state)
{
	struct chan *c = *state;

	/* Header says more than came. */
	send_hdr(c->sup, IPC_JWT, 0, 4, "abc", 3);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "header length 4 disagrees");
	/* Header says less than came. */
	send_hdr(c->sup, IPC_JWT, 0, 2, "abc", 3);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "header length 2 disagrees");
	/* A length that would reach past any frame. */
	send_hdr(c->sup, IPC_JWT, 0, UINT32_MAX, "abc", 3);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "disagrees with the datagram's 3 payload bytes");
}

static void
test_oversized_datagram_refused(void **state)
{
	struct chan *c = *state;
	size_t n = IPC_MAX_FRAME + 1;
	uint8_t *frame = malloc(n);
	char want[64];

	assert_non_null(frame);
	/* A header consistent with the datagram: only its size is wrong. */
	assert_int_equal(ipc_encode(frame, n, IPC_JWT, NULL, 0), IPC_HDR_LEN);
	uint32_t len = IPC_MAX_PAYLOAD + 1;
	memcpy(frame + 4, &len, sizeof(len));
	memset(frame + IPC_HDR_LEN, 'j', n - IPC_HDR_LEN);
	send_raw(c->sup, frame, n);
	snprintf(want, sizeof(want), "oversized datagram (%zu bytes", n);
	expect_refused(c, c->wrk, IPC_TO_WORKER, want);
	free(frame);
}

static void
test_unknown_type_refused(void **state)
{
	struct chan *c = *state;
	const uint16_t unknown[] = { 0, IPC_TYPE_END, 999, UINT16_MAX };
	char want[64];

	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		snprintf(want, sizeof(want), "unknown message type %u", unknown[i]);
		send_hdr(c->sup, unknown[i], 0, 0, NULL, 0);
		expect_refused(c, c->wrk, IPC_TO_WORKER, want);
		send_hdr(c->wrk, unknown[i], 0, 0, NULL, 0);
		expect_refused(c, c->sup, IPC_TO_SUPERVISOR, want);
	}
}

static void
test_wrong_direction_refused(void **state)
{
	struct chan *c = *state;
	struct ipc_config cfg;

	/* A worker never signs: SIGN_REQ arriving at one is a broken parent. */
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REQ, NONCE, strlen(NONCE)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "SIGN_REQ in the wrong direction (to a worker)");
	/* Nor does a worker configure the supervisor. */
	valid_config(&cfg);
	assert_int_equal(ipc_send(c->wrk, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR,
	    "CONFIG in the wrong direction (to the supervisor)");
	assert_int_equal(ipc_send(c->sup, IPC_STATUS, NULL, 0), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "STATUS in the wrong direction");
}

static void
test_sign_rep_is_a_signature_or_empty(void **state)
{
	struct chan *c = *state;
	uint8_t sig[IPC_SIGN_REP_LEN + 1];

	memset(sig, 0xa5, sizeof(sig));
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REP, sig, IPC_SIGN_REP_LEN - 1), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "SIGN_REP payload of 63 bytes, expected 0 or 64");
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REP, sig, 1), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "SIGN_REP payload of 1 bytes");
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REP, sig, IPC_SIGN_REP_LEN + 1), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "SIGN_REP payload of 65 bytes");
	/* The refusal and the signature. */
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REP, NULL, 0), 0);
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_SIGN_REP, NULL, 0);
	assert_int_equal(ipc_send(c->sup, IPC_SIGN_REP, sig, IPC_SIGN_REP_LEN), 0);
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_SIGN_REP, sig, IPC_SIGN_REP_LEN);
}

static void
test_payload_outside_type_bounds_refused(void **state)
{
	struct chan *c = *state;
	uint8_t big[IPC_SIGN_REQ_MAX + 1];
	struct ipc_config cfg;
	char want[64];

	memset(big, 'n', sizeof(big));
	assert_int_equal(ipc_send(c->sup, IPC_JWT, NULL, 0), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "JWT payload of 0 bytes, expected 1..65536");
	assert_int_equal(ipc_send(c->wrk, IPC_SIGN_REQ, big, sizeof(big)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR,
	    "SIGN_REQ payload of 129 bytes, expected 1..128");
	assert_int_equal(ipc_send(c->wrk, IPC_SIGN_REQ, big, IPC_SIGN_REQ_MAX), 0);
	expect_message(c, c->sup, IPC_TO_SUPERVISOR, IPC_SIGN_REQ, big, IPC_SIGN_REQ_MAX);
	assert_int_equal(ipc_send(c->wrk, IPC_STATUS, big, 12), 0);
	snprintf(want, sizeof(want), "STATUS payload of 12 bytes, expected %zu",
	    sizeof(struct ipc_status));
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, want);
	valid_config(&cfg);
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg) - 1), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "CONFIG payload of");
	/* The empty messages are empty. */
	assert_int_equal(ipc_send(c->wrk, IPC_READY, "x", 1), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "READY payload of 1 bytes, expected 0");
	assert_int_equal(ipc_send(c->sup, IPC_STOP, "x", 1), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "STOP payload of 1 bytes, expected 0");
}

static void
test_text_with_nul_refused(void **state)
{
	struct chan *c = *state;

	assert_int_equal(ipc_send(c->sup, IPC_JWT, "eyJ\0x", 5), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "JWT payload has a NUL byte at offset 3");
	assert_int_equal(ipc_send(c->wrk, IPC_SIGN_REQ, "nonce", 6), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "SIGN_REQ payload has a NUL byte at offset 5");
}

static void
test_config_unterminated_field_refused(void **state)
{
	struct chan *c = *state;
	struct ipc_config cfg;
	const struct {
		const char *name;
		char *field;
		size_t size;
	} fields[] = {
		{ "role", cfg.role, sizeof(cfg.role) },
		{ "space", cfg.space, sizeof(cfg.space) },
		{ "url", cfg.url, sizeof(cfg.url) },
		{ "tls_host", cfg.tls_host, sizeof(cfg.tls_host) },
		{ "inbox_prefix", cfg.inbox_prefix, sizeof(cfg.inbox_prefix) },
	};
	char want[64];

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		valid_config(&cfg);
		memset(fields[i].field, 'x', fields[i].size);
		snprintf(want, sizeof(want), "CONFIG field %s is not NUL-terminated",
		    fields[i].name);
		assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
		expect_refused(c, c->wrk, IPC_TO_WORKER, want);
	}
	/* Full to the last byte but terminated there is fine. */
	valid_config(&cfg);
	memset(cfg.space, 's', sizeof(cfg.space) - 1);
	cfg.space[sizeof(cfg.space) - 1] = '\0';
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_CONFIG, &cfg, sizeof(cfg));
}

static void
test_config_malformed_values_refused(void **state)
{
	struct chan *c = *state;
	struct ipc_config cfg;

	valid_config(&cfg);
	snprintf(cfg.role, sizeof(cfg.role), "supervisor");
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "role \"supervisor\" is not a worker role");

	valid_config(&cfg);
	cfg.role[0] = '\0';
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "role \"\" is not a worker role");

	for (unsigned i = 0; i < sizeof(cfg.reserved) / sizeof(cfg.reserved[0]); i++) {
		char want[64];

		valid_config(&cfg);
		cfg.reserved[i] = 1;
		snprintf(want, sizeof(want), "CONFIG reserved word %u is not zero", i);
		assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
		expect_refused(c, c->wrk, IPC_TO_WORKER, want);
	}

	valid_config(&cfg);
	cfg.seccomp_log = 2;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "seccomp_log is 2");

	valid_config(&cfg);
	cfg.max_memberships = 0;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "max_memberships is 0, expected 1 to 1000000");

	valid_config(&cfg);
	cfg.max_memberships = IPC_MEMBERSHIPS_MAX + 1;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "max_memberships is 1000001");

	valid_config(&cfg);
	cfg.max_channels = 0;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "max_channels is 0, expected 1 to 100000");

	valid_config(&cfg);
	cfg.max_channels = IPC_CHANNELS_MAX + 1;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "max_channels is 100001");

	valid_config(&cfg);
	cfg.drop_privs = 7;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "drop_privs is 7");

	valid_config(&cfg);
	cfg.broker_ports[0] = 65536;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "broker_ports[0] 65536 is not a TCP port");

	valid_config(&cfg);
	cfg.broker_ports[IPC_SERVERS_MAX - 1] = 70000;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "broker_ports[7] 70000 is not a TCP port");

	valid_config(&cfg);
	cfg.uid = UINT32_MAX;
	assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "uid/gid -1");

	/* Each worker role is one. */
	const char *roles[] = { "fanout", "reader", "registry", "timer" };
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		valid_config(&cfg);
		snprintf(cfg.role, sizeof(cfg.role), "%s", roles[i]);
		assert_int_equal(ipc_send(c->sup, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
		expect_message(c, c->wrk, IPC_TO_WORKER, IPC_CONFIG, &cfg, sizeof(cfg));
	}
}

static void
test_status_malformed_refused(void **state)
{
	struct chan *c = *state;
	struct ipc_status st;

	valid_status(&st);
	st.state = IPC_STATE_QUIESCED + 1;
	assert_int_equal(ipc_send(c->wrk, IPC_STATUS, &st, sizeof(st)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "STATUS state 4 is unknown");
	valid_status(&st);
	st.reserved = 1;
	assert_int_equal(ipc_send(c->wrk, IPC_STATUS, &st, sizeof(st)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "STATUS reserved word is not zero");
	valid_status(&st);
	st.state = IPC_STATE_QUIESCED;
	assert_int_equal(ipc_send(c->wrk, IPC_STATUS, &st, sizeof(st)), 0);
	expect_message(c, c->sup, IPC_TO_SUPERVISOR, IPC_STATUS, &st, sizeof(st));
}

/* The registry's messages: each field outside its bounds is refused,
 * naming it. */
static void
test_registry_messages_malformed_refused(void **state)
{
	struct chan *c = *state;
	uint8_t p[8192];
	size_t n;

	n = valid_payload(IPC_SYS_CREDS, p, sizeof(p));
	((struct ipc_sys_creds *)(void *)p)->which = 3;
	assert_int_equal(ipc_send(c->sup, IPC_SYS_CREDS, p, n), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "SYS_CREDS which 3 is unknown");
	n = valid_payload(IPC_SYS_CREDS, p, sizeof(p));
	memset(((struct ipc_sys_creds *)(void *)p)->user, 'U', IPC_KEY_MAX);
	assert_int_equal(ipc_send(c->sup, IPC_SYS_CREDS, p, n), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "not NUL-terminated");

	n = valid_payload(IPC_SIGN_SYS, p, sizeof(p));
	p[0] = 0;
	assert_int_equal(ipc_send(c->wrk, IPC_SIGN_SYS, p, n), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "SIGN_SYS names no $SYS user");

	struct ipc_lease l = { .state = IPC_LEASE_RECHECKING + 1 };
	assert_int_equal(ipc_send(c->sup, IPC_LEASE, &l, sizeof(l)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "LEASE state 3 is unknown");
	memset(&l, 'x', sizeof(l));
	l.state = IPC_LEASE_NONE;
	l.reserved = 0;
	assert_int_equal(ipc_send(c->sup, IPC_LEASE, &l, sizeof(l)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "LEASE instance is not NUL-terminated");

	struct ipc_reload_req rq = { .id = 1 };
	snprintf(rq.expected, sizeof(rq.expected), "ABC");
	assert_int_equal(ipc_send(c->wrk, IPC_RELOAD_REQ, &rq, sizeof(rq)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "RELOAD_REQ expected is 3 chars");
	memset(rq.expected, 'A', IPC_SHA256_HEX - 1);
	assert_int_equal(ipc_send(c->wrk, IPC_RELOAD_REQ, &rq, sizeof(rq)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "not lowercase hex");

	struct ipc_reload_rep rp = { .id = 1, .ok = 2 };
	assert_int_equal(ipc_send(c->sup, IPC_RELOAD_REP, &rp, sizeof(rp)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "RELOAD_REP ok/broker_accepted not 0 or 1");
}

/* TLS_CA is certificate blocks and line breaks only: anything else (text
 * around them, a private key, a NUL, an unclosed block) is refused. */
static void
test_tls_ca_malformed_refused(void **state)
{
	struct chan *c = *state;
	static const struct {
		const char *payload;
		size_t len;
		const char *why;
	} bad[] = {
		{ "# my CA\n" TLS_CA_TWO, 0, "expected -----BEGIN CERTIFICATE----- at offset 0" },
		{ TLS_CA_TWO "\n# trailer", 0, "expected -----BEGIN CERTIFICATE----- at offset 143" },
		{ "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\n", 0,
		    "expected -----BEGIN CERTIFICATE-----" },
		{ "-----BEGIN CERTIFICATE-----\nMIIB\n", 0,
		    "certificate 1 is not closed by -----END CERTIFICATE-----" },
		{ "-----BEGIN CERTIFICATE-----\nMI IB\n-----END CERTIFICATE-----\n", 0,
		    "certificate 1 is not closed" },
		{ "-----BEGIN CERTIFICATE-----\nMI\0IB\n-----END CERTIFICATE-----\n", 60,
		    "certificate 1 is not closed" },
		{ TLS_CA_TWO "-----BEGIN CERTIFICATE-----\n", 0,
		    "certificate 3 is not closed" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = bad[i].len ? bad[i].len : strlen(bad[i].payload);
		assert_int_equal(ipc_send(c->sup, IPC_TLS_CA, bad[i].payload, len), 0);
		expect_refused(c, c->wrk, IPC_TO_WORKER, bad[i].why);
	}
	/* It travels to workers only. */
	assert_int_equal(ipc_send(c->wrk, IPC_TLS_CA, TLS_CA_TWO, strlen(TLS_CA_TWO)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "TLS_CA in the wrong direction");
	assert_int_equal(ipc_send(c->sup, IPC_TLS_CA, TLS_CA_TWO, strlen(TLS_CA_TWO)), 0);
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_TLS_CA, TLS_CA_TWO, strlen(TLS_CA_TWO));
}

static void
test_flags_refused(void **state)
{
	struct chan *c = *state;

	send_hdr(c->sup, IPC_STOP, 1, 0, NULL, 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "flags 0x0001 set, expected 0");
	send_hdr(c->wrk, IPC_READY, 0x8000, 0, NULL, 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "flags 0x8000 set");
}

/* "One datagram carries exactly one frame": back to back, they neither
 * merge nor split nor reorder. */
static void
test_interleaved_frames_arrive_one_per_recv(void **state)
{
	struct chan *c = *state;
	const uint16_t order[] = { IPC_CONFIG, IPC_JWT, IPC_QUIESCE, IPC_SIGN_REP, IPC_RESUME,
		IPC_JWT, IPC_RECONNECT, IPC_STOP };
	const size_t n = sizeof(order) / sizeof(order[0]);
	uint8_t p[8192];
	size_t len;

	/* A non-blocking receiver: a frame too many would show as EAGAIN. */
	assert_int_equal(fcntl(c->wrk, F_SETFL, O_NONBLOCK), 0);
	for (int round = 0; round < INTERLEAVED_ROUNDS; round++) {
		for (size_t i = 0; i < n; i++) {
			len = valid_payload(order[i], p, sizeof(p));
			if (order[i] == IPC_JWT)
				len -= i % 3; /* vary the lengths of one type */
			assert_int_equal(ipc_send(c->sup, order[i], p, len), 0);
		}
		for (size_t i = 0; i < n; i++) {
			len = valid_payload(order[i], p, sizeof(p));
			if (order[i] == IPC_JWT)
				len -= i % 3;
			expect_message(c, c->wrk, IPC_TO_WORKER, order[i], p, len);
		}
	}
	/* And the other way, status and sign request in turn. */
	for (int round = 0; round < INTERLEAVED_ROUNDS; round++) {
		for (uint16_t t = IPC_SIGN_REQ; t < IPC_TYPE_END; t++) {
			if ((ipc_type_info(t)->dir & IPC_TO_SUPERVISOR) == 0)
				continue;
			len = valid_payload(t, p, sizeof(p));
			assert_int_equal(ipc_send(c->wrk, t, p, len), 0);
		}
		for (uint16_t t = IPC_SIGN_REQ; t < IPC_TYPE_END; t++) {
			if ((ipc_type_info(t)->dir & IPC_TO_SUPERVISOR) == 0)
				continue;
			len = valid_payload(t, p, sizeof(p));
			expect_message(c, c->sup, IPC_TO_SUPERVISOR, t, p, len);
		}
	}
	struct ipc_msg m;
	assert_int_equal(ipc_recv(c->wrk, c->buf, IPC_TO_WORKER, &m, c->err, sizeof(c->err)), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	assert_string_equal(c->err, "");
}

static void
test_peer_close_returns_0(void **state)
{
	struct chan *c = *state;
	struct ipc_msg m;

	/* What was sent before the close still arrives first. */
	assert_int_equal(ipc_send(c->sup, IPC_STOP, NULL, 0), 0);
	close(c->sup);
	c->sup = -1;
	expect_message(c, c->wrk, IPC_TO_WORKER, IPC_STOP, NULL, 0);
	assert_int_equal(ipc_recv(c->wrk, c->buf, IPC_TO_WORKER, &m, c->err, sizeof(c->err)), 0);
	/* Sending into a closed channel fails with EPIPE, not SIGPIPE. */
	assert_int_equal(ipc_send(c->wrk, IPC_READY, NULL, 0), -1);
	assert_int_equal(errno, EPIPE);
}

static void
test_peer_shutdown_returns_0(void **state)
{
	struct chan *c = *state;
	struct ipc_msg m;

	assert_int_equal(shutdown(c->wrk, SHUT_WR), 0);
	assert_int_equal(ipc_recv(c->sup, c->buf, IPC_TO_SUPERVISOR, &m, c->err,
	    sizeof(c->err)), 0);
}

static void
test_oversized_payload_not_sent(void **state)
{
	struct chan *c = *state;
	uint8_t frame[IPC_HDR_LEN + 4], *big = calloc(1, IPC_MAX_FRAME + 1);

	assert_non_null(big);
	assert_int_equal(ipc_send(c->sup, IPC_JWT, big, IPC_MAX_PAYLOAD + 1), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(ipc_encode(big, IPC_MAX_FRAME + 1, IPC_JWT, big + IPC_HDR_LEN,
	    IPC_MAX_PAYLOAD + 1), 0);
	free(big);
	/* A buffer too small for the frame is refused, not overrun. */
	assert_int_equal(ipc_encode(frame, sizeof(frame), IPC_JWT, "abcde", 5), 0);
	assert_int_equal(ipc_encode(frame, sizeof(frame), IPC_JWT, "abcd", 4), sizeof(frame));
}

static void
test_counter_names_per_role(void **state)
{
	(void)state;
	assert_string_equal(ipc_counter_name("fanout", 0), "posts");
	assert_string_equal(ipc_counter_name("fanout", 3), "dropped");
	assert_string_equal(ipc_counter_name("reader", 1), "delivered");
	assert_string_equal(ipc_counter_name("reader", 3), "gaveup");
	assert_string_equal(ipc_counter_name("fanout", 5), "batches");
	assert_string_equal(ipc_counter_name("reader", 6), "batches");
	assert_string_equal(ipc_counter_name("reader", 7), "replayed");
	assert_string_equal(ipc_counter_name("reader", 8), "");
	assert_string_equal(ipc_counter_name("fanout", 6), "replayed");
	assert_string_equal(ipc_counter_name("fanout", 7), "");
	assert_string_equal(ipc_counter_name("registry", 2), "leaves");
	assert_string_equal(ipc_counter_name("timer", 2), "fired");
	assert_string_equal(ipc_counter_name("timer", 4), "");
	assert_string_equal(ipc_counter_name("timer", IPC_COUNTERS), "");
	assert_string_equal(ipc_counter_name("supervisor", 0), "");
	assert_string_equal(ipc_counter_name(NULL, 0), "");
}

/* Issue 29's measures: gauges and a latency histogram named per role. */
static void
test_gauge_and_latency_names_per_role(void **state)
{
	(void)state;
	assert_string_equal(ipc_gauge_name("fanout", 0), "pending");
	assert_string_equal(ipc_gauge_name("reader", 1), "oldest_at");
	assert_string_equal(ipc_gauge_name("registry", 2), "waiting_inventory");
	assert_string_equal(ipc_gauge_name("registry", 3), "");
	assert_string_equal(ipc_gauge_name("timer", 0), "");
	assert_string_equal(ipc_gauge_name("fanout", IPC_GAUGES), "");
	assert_string_equal(ipc_latency_name("fanout"), "fanout");
	assert_string_equal(ipc_latency_name("reader"), "copy");
	assert_string_equal(ipc_latency_name("registry"), "");
	assert_string_equal(ipc_latency_name(NULL), "");
	for (int b = 1; b < IPC_LATENCY_BUCKETS; b++)
		assert_true(ipc_latency_bounds_ms[b] > ipc_latency_bounds_ms[b - 1]);
}

/* REFUSALS: what a registry gone wrong could send is refused, naming it. */
static void
test_refusals_are_checked(void **state)
{
	struct chan *c = *state;
	struct ipc_refusals r;

	memset(&r, 0, sizeof(r));
	r.n = IPC_REFUSALS_TOP + 1;
	assert_int_equal(ipc_send(c->wrk, IPC_REFUSALS, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "REFUSALS of 11 callers, at most 10");
	memset(&r, 0, sizeof(r));
	r.n = 1;
	snprintf(r.top[0].principal, sizeof(r.top[0].principal), "local.a b");
	assert_int_equal(ipc_send(c->wrk, IPC_REFUSALS, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "REFUSALS caller 0 has a byte 0x20");
	memset(&r, 0, sizeof(r));
	r.n = 1;
	snprintf(r.top[0].principal, sizeof(r.top[0].principal), "local.a");
	r.top[3].count = 1;
	assert_int_equal(ipc_send(c->wrk, IPC_REFUSALS, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "REFUSALS entry 3 past n is not zero");
	memset(&r, 0, sizeof(r));
	r.n = 1;
	assert_int_equal(ipc_send(c->wrk, IPC_REFUSALS, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "REFUSALS caller 0 is empty");
	/* To a worker it is no message at all. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(ipc_send(c->sup, IPC_REFUSALS, &r, sizeof(r)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "REFUSALS");
}

/* KICK_REQ: what a registry gone wrong could ask is refused, naming the
 * field; a KICK_REP out of range likewise. */
static void
test_kick_requests_are_checked(void **state)
{
	struct chan *c = *state;
	struct ipc_kick_req r;
	struct ipc_kick_rep rep;

	memset(&r, 0, sizeof(r));
	snprintf(r.server, sizeof(r.server), "NSERVER");
	snprintf(r.principal, sizeof(r.principal), "local.a");
	assert_int_equal(ipc_send(c->wrk, IPC_KICK_REQ, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "KICK_REQ cid is 0");
	r.cid = 5;
	snprintf(r.server, sizeof(r.server), "N.>");
	assert_int_equal(ipc_send(c->wrk, IPC_KICK_REQ, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "KICK_REQ server has a byte 0x2e");
	snprintf(r.server, sizeof(r.server), "NSERVER");
	snprintf(r.principal, sizeof(r.principal), "local.a b");
	assert_int_equal(ipc_send(c->wrk, IPC_KICK_REQ, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "KICK_REQ principal has a byte 0x20");
	memset(r.principal, 'x', sizeof(r.principal));
	assert_int_equal(ipc_send(c->wrk, IPC_KICK_REQ, &r, sizeof(r)), 0);
	expect_refused(c, c->sup, IPC_TO_SUPERVISOR, "KICK_REQ principal is empty or not");
	memset(&rep, 0, sizeof(rep));
	rep.outcome = IPC_KICK_REFUSED + 1;
	assert_int_equal(ipc_send(c->sup, IPC_KICK_REP, &rep, sizeof(rep)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "KICK_REP outcome 4");
	/* From the supervisor to a worker, a request is no message at all. */
	r.cid = 5;
	snprintf(r.principal, sizeof(r.principal), "local.a");
	assert_int_equal(ipc_send(c->sup, IPC_KICK_REQ, &r, sizeof(r)), 0);
	expect_refused(c, c->wrk, IPC_TO_WORKER, "KICK_REQ");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_type_round_trips, chan_setup,
		    chan_teardown),
		cmocka_unit_test(test_catalogue_bounds),
		cmocka_unit_test_setup_teardown(test_largest_jwt_round_trips, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_short_frame_refused, chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_length_disagreeing_with_datagram_refused,
		    chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_oversized_datagram_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_unknown_type_refused, chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_direction_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_sign_rep_is_a_signature_or_empty, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_payload_outside_type_bounds_refused,
		    chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_text_with_nul_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_config_unterminated_field_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_config_malformed_values_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_status_malformed_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_registry_messages_malformed_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_tls_ca_malformed_refused, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_flags_refused, chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_interleaved_frames_arrive_one_per_recv,
		    chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_peer_close_returns_0, chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_peer_shutdown_returns_0, chan_setup,
		    chan_teardown),
		cmocka_unit_test_setup_teardown(test_oversized_payload_not_sent, chan_setup,
		    chan_teardown),
		cmocka_unit_test(test_counter_names_per_role),
		cmocka_unit_test(test_gauge_and_latency_names_per_role),
		cmocka_unit_test_setup_teardown(test_refusals_are_checked, chan_setup, chan_teardown),
		cmocka_unit_test_setup_teardown(test_kick_requests_are_checked, chan_setup,
		    chan_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
