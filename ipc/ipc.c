/*
 * The message catalogue and its framing (see ipc.h). ipc_decode is the one
 * place that decides whether a peer's datagram is a message at all: what
 * it accepts, a dispatch switch may use without checking sizes again.
 */
#include "ipc/ipc.h"
#include "lib/refuse.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The wire header, host order: both ends are one binary on one host. */
struct ipc_hdr {
	uint16_t type;
	uint16_t flags;
	uint32_t len;
};

_Static_assert(sizeof(struct ipc_hdr) == IPC_HDR_LEN, "ipc_hdr is the wire header");
_Static_assert(sizeof(struct ipc_config) <= IPC_MAX_PAYLOAD, "CONFIG fits in a frame");
_Static_assert(sizeof(struct ipc_status) <= IPC_MAX_PAYLOAD, "STATUS fits in a frame");

#define IPC_PORT_MAX 65535        /* broker_port is a TCP port */
#define IPC_NO_ID ((uint32_t)-1)  /* setresuid(-1) changes nothing */

/* How the payload length of a type is bounded. */
enum ipc_len_rule {
	LEN_RANGE,  /* min_len..max_len */
	LEN_EITHER, /* exactly min_len or exactly max_len, nothing between */
};

struct ipc_rule {
	struct ipc_type_info info;
	enum ipc_len_rule len_rule;
	/* Content check of a payload whose length already fits, or NULL. */
	int (*check)(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
};

static int check_text(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_config(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_status(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_sys_creds(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_sign_sys(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_lease(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_reload_req(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_reload_rep(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_tls_ca(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_metrics_begin(const struct ipc_type_info *, const uint8_t *, size_t, char *,
    size_t);
static int check_refusals(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_kick_req(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);
static int check_kick_rep(const struct ipc_type_info *, const uint8_t *, size_t, char *, size_t);

#define IPC_EMPTY(t, d) [IPC_##t] = { { #t, d, 0, 0 }, LEN_RANGE, NULL }

/* Indexed by type; an entry without a name is an unknown type. */
static const struct ipc_rule catalogue[IPC_TYPE_END] = {
	[IPC_CONFIG] = { { "CONFIG", IPC_TO_WORKER, sizeof(struct ipc_config),
	    sizeof(struct ipc_config) }, LEN_RANGE, check_config },
	[IPC_JWT] = { { "JWT", IPC_TO_WORKER, 1, IPC_MAX_PAYLOAD }, LEN_RANGE, check_text },
	[IPC_SIGN_REQ] = { { "SIGN_REQ", IPC_TO_SUPERVISOR, 1, IPC_SIGN_REQ_MAX }, LEN_RANGE,
	    check_text },
	/* Empty is the supervisor's refusal; a part of a signature is nothing. */
	[IPC_SIGN_REP] = { { "SIGN_REP", IPC_TO_WORKER, 0, IPC_SIGN_REP_LEN }, LEN_EITHER, NULL },
	IPC_EMPTY(READY, IPC_TO_SUPERVISOR),
	IPC_EMPTY(QUIESCE, IPC_TO_WORKER),
	IPC_EMPTY(QUIESCED, IPC_TO_SUPERVISOR),
	IPC_EMPTY(RESUME, IPC_TO_WORKER),
	IPC_EMPTY(RECONNECT, IPC_TO_WORKER),
	[IPC_STATUS] = { { "STATUS", IPC_TO_SUPERVISOR, sizeof(struct ipc_status),
	    sizeof(struct ipc_status) }, LEN_RANGE, check_status },
	IPC_EMPTY(STOP, IPC_TO_WORKER),
	[IPC_SYS_CREDS] = { { "SYS_CREDS", IPC_TO_WORKER, sizeof(struct ipc_sys_creds) + 1,
	    IPC_MAX_PAYLOAD }, LEN_RANGE, check_sys_creds },
	[IPC_SIGN_SYS] = { { "SIGN_SYS", IPC_TO_SUPERVISOR, 2, IPC_SIGN_SYS_MAX }, LEN_RANGE,
	    check_sign_sys },
	[IPC_LEASE] = { { "LEASE", IPC_TO_WORKER, sizeof(struct ipc_lease),
	    sizeof(struct ipc_lease) }, LEN_RANGE, check_lease },
	[IPC_RELOAD_REQ] = { { "RELOAD_REQ", IPC_TO_SUPERVISOR, sizeof(struct ipc_reload_req),
	    sizeof(struct ipc_reload_req) }, LEN_RANGE, check_reload_req },
	[IPC_RELOAD_REP] = { { "RELOAD_REP", IPC_TO_WORKER, sizeof(struct ipc_reload_rep),
	    sizeof(struct ipc_reload_rep) }, LEN_RANGE, check_reload_rep },
	[IPC_TLS_CA] = { { "TLS_CA", IPC_TO_WORKER, 1, IPC_MAX_PAYLOAD }, LEN_RANGE,
	    check_tls_ca },
	[IPC_METRICS_BEGIN] = { { "METRICS_BEGIN", IPC_TO_WORKER, sizeof(struct ipc_metrics_begin),
	    sizeof(struct ipc_metrics_begin) }, LEN_RANGE, check_metrics_begin },
	[IPC_METRICS_PART] = { { "METRICS_PART", IPC_TO_WORKER, 1, IPC_MAX_PAYLOAD }, LEN_RANGE,
	    NULL },
	IPC_EMPTY(METRICS_END, IPC_TO_WORKER),
	[IPC_REFUSALS] = { { "REFUSALS", IPC_TO_SUPERVISOR, sizeof(struct ipc_refusals),
	    sizeof(struct ipc_refusals) }, LEN_RANGE, check_refusals },
	[IPC_KICK_REQ] = { { "KICK_REQ", IPC_TO_SUPERVISOR, sizeof(struct ipc_kick_req),
	    sizeof(struct ipc_kick_req) }, LEN_RANGE, check_kick_req },
	[IPC_KICK_REP] = { { "KICK_REP", IPC_TO_WORKER, sizeof(struct ipc_kick_rep),
	    sizeof(struct ipc_kick_rep) }, LEN_RANGE, check_kick_rep },
};

/* The worker roles and the names of their STATUS counters. */
static const struct ipc_role {
	const char *role;
	const char *counters[IPC_COUNTERS];
	const char *gauges[IPC_GAUGES];
	const char *latency;
} roles[] = {
	{ "fanout", { "posts", "copies", "acked", "dropped", "retried", "batches", "replayed",
	    [IPC_COUNTER_VIOLATIONS] = "violations" }, { "pending", "oldest_at" }, "fanout" },
	{ "reader", { "entries", "delivered", "denied", "gaveup", "removed", "retried", "batches",
	    "replayed", [IPC_COUNTER_VIOLATIONS] = "violations" }, { "pending", "oldest_at" }, "copy" },
	{ "registry", { "requests", "joins", "leaves", "refused", "inventories", "member_reads",
	    "evictions", "unanswered", "dropped_ctl", "dropped_admin", "dropped_live", "shed",
	    [IPC_COUNTER_VIOLATIONS] = "violations" },
	    { "waiting_ctl", "waiting_admin", "waiting_inventory" }, NULL },
	{ "timer", { "requests", "armed", "fired", "refused",
	    [IPC_COUNTER_VIOLATIONS] = "violations" }, { NULL }, NULL },
};

const uint32_t ipc_latency_bounds_ms[IPC_LATENCY_BUCKETS] = { 5, 10, 25, 50, 100, 250, 500,
	1000, 2500, 5000, 10000, 30000 };

#define IPC_ROLES (sizeof(roles) / sizeof(roles[0]))

#define CONFIG_STRING(f) \
	{ #f, offsetof(struct ipc_config, f), sizeof(((struct ipc_config *)0)->f) }

/* Every string field of CONFIG, so none can be forgotten by the check. */
static const struct {
	const char *name;
	size_t off, size;
} config_strings[] = {
	CONFIG_STRING(role),
	CONFIG_STRING(space),
	CONFIG_STRING(url),
	CONFIG_STRING(tls_host),
	CONFIG_STRING(inbox_prefix),
};

static const struct ipc_rule *
rule_of(uint16_t type)
{
	if (type >= IPC_TYPE_END || catalogue[type].info.name == NULL)
		return NULL;
	return &catalogue[type];
}

const struct ipc_type_info *
ipc_type_info(uint16_t type)
{
	const struct ipc_rule *r = rule_of(type);

	return r != NULL ? &r->info : NULL;
}

const char *
ipc_type_name(uint16_t type)
{
	const struct ipc_rule *r = rule_of(type);

	return r != NULL ? r->info.name : "unknown";
}

static const struct ipc_role *
role_of(const char *role)
{
	if (role == NULL)
		return NULL;
	for (size_t i = 0; i < IPC_ROLES; i++)
		if (strcmp(roles[i].role, role) == 0)
			return &roles[i];
	return NULL;
}

const char *
ipc_counter_name(const char *role, unsigned i)
{
	const struct ipc_role *r = role_of(role);

	if (r == NULL || i >= IPC_COUNTERS || r->counters[i] == NULL)
		return "";
	return r->counters[i];
}

const char *
ipc_gauge_name(const char *role, unsigned i)
{
	const struct ipc_role *r = role_of(role);

	if (r == NULL || i >= IPC_GAUGES || r->gauges[i] == NULL)
		return "";
	return r->gauges[i];
}

const char *
ipc_latency_name(const char *role)
{
	const struct ipc_role *r = role_of(role);

	return r != NULL && r->latency != NULL ? r->latency : "";
}

/* JWT and nonce are text for C strings on the other side: a NUL would
 * silently cut them. */
static int
check_text(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	const uint8_t *nul = memchr(p, '\0', len);

	if (nul != NULL)
		return refuse(err, errlen, "ipc: %s payload has a NUL byte at offset %zu",
		    t->name, (size_t)(nul - p));
	return 0;
}

static int
check_config(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_config c;
	size_t i;

	(void)t, (void)len;
	/* A copy: the payload sits at an odd offset of a byte buffer. */
	memcpy(&c, p, sizeof(c));
	for (i = 0; i < sizeof(config_strings) / sizeof(config_strings[0]); i++) {
		if (memchr((const char *)&c + config_strings[i].off, '\0',
		    config_strings[i].size) == NULL)
			return refuse(err, errlen, "ipc: CONFIG field %s is not NUL-terminated",
			    config_strings[i].name);
	}
	if (role_of(c.role) == NULL)
		return refuse(err, errlen, "ipc: CONFIG role \"%s\" is not a worker role", c.role);
	if (c.seccomp_log > 1)
		return refuse(err, errlen, "ipc: CONFIG seccomp_log is %" PRIu32 ", expected 0 or 1",
		    c.seccomp_log);
	if (c.drop_privs > 1)
		return refuse(err, errlen, "ipc: CONFIG drop_privs is %" PRIu32 ", expected 0 or 1",
		    c.drop_privs);
	for (i = 0; i < IPC_SERVERS_MAX; i++)
		if (c.broker_ports[i] > IPC_PORT_MAX)
			return refuse(err, errlen, "ipc: CONFIG broker_ports[%zu] %" PRIu32 " is not "
			    "a TCP port", i, c.broker_ports[i]);
	if ((c.features_off & ~(IPC_OFF_REGISTER | IPC_OFF_READER_MEMORY | IPC_OFF_WATCH_FC)) != 0)
		return refuse(err, errlen, "ipc: CONFIG features_off 0x%" PRIx32 " names an unknown "
		    "feature", c.features_off);
	/* Dropping to id -1 would keep root and look like success. */
	if (c.max_memberships < 1 || c.max_memberships > IPC_MEMBERSHIPS_MAX)
		return refuse(err, errlen, "ipc: CONFIG max_memberships is %" PRIu32 ", expected 1 "
		    "to %d", c.max_memberships, IPC_MEMBERSHIPS_MAX);
	if (c.max_channels < 1 || c.max_channels > IPC_CHANNELS_MAX)
		return refuse(err, errlen, "ipc: CONFIG max_channels is %" PRIu32 ", expected 1 to "
		    "%d", c.max_channels, IPC_CHANNELS_MAX);
	if (c.drop_privs && (c.uid == IPC_NO_ID || c.gid == IPC_NO_ID))
		return refuse(err, errlen, "ipc: CONFIG drops privileges to uid/gid -1");
	for (i = 0; i < sizeof(c.reserved) / sizeof(c.reserved[0]); i++) {
		if (c.reserved[i] != 0)
			return refuse(err, errlen, "ipc: CONFIG reserved word %zu is not zero", i);
	}
	return 0;
}

static int
check_status(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_status s;

	(void)t, (void)len;
	memcpy(&s, p, sizeof(s));
	if (s.state > IPC_STATE_QUIESCED)
		return refuse(err, errlen, "ipc: STATUS state %" PRIu32 " is unknown", s.state);
	if (s.reserved != 0)
		return refuse(err, errlen, "ipc: STATUS reserved word is not zero");
	return 0;
}

/* A fixed string field of a payload copy must end within the field. */
#define FIELD_TERMINATED(s, f) (memchr((s).f, '\0', sizeof((s).f)) != NULL)

static int
check_sys_creds(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_sys_creds c;

	memcpy(&c, p, sizeof(c));
	if (c.which != IPC_SYS_OBSERVER && c.which != IPC_SYS_EVICTOR)
		return refuse(err, errlen, "ipc: SYS_CREDS which %" PRIu32 " is unknown", c.which);
	if (c.reserved != 0)
		return refuse(err, errlen, "ipc: SYS_CREDS reserved word is not zero");
	if (!FIELD_TERMINATED(c, inbox_prefix) || !FIELD_TERMINATED(c, user) ||
	    !FIELD_TERMINATED(c, account))
		return refuse(err, errlen, "ipc: SYS_CREDS has a field that is not NUL-terminated");
	return check_text(t, p + sizeof(c), len - sizeof(c), err, errlen);
}

static int
check_sign_sys(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	if (p[0] != IPC_SYS_OBSERVER && p[0] != IPC_SYS_EVICTOR)
		return refuse(err, errlen, "ipc: SIGN_SYS names no $SYS user (%u)", p[0]);
	return check_text(t, p + 1, len - 1, err, errlen);
}

static int
check_lease(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_lease l;

	(void)t, (void)len;
	memcpy(&l, p, sizeof(l));
	if (l.state > IPC_LEASE_RECHECKING)
		return refuse(err, errlen, "ipc: LEASE state %" PRIu32 " is unknown", l.state);
	if (l.reserved != 0)
		return refuse(err, errlen, "ipc: LEASE reserved word is not zero");
	if (!FIELD_TERMINATED(l, instance))
		return refuse(err, errlen, "ipc: LEASE instance is not NUL-terminated");
	return 0;
}

static int
check_metrics_begin(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_metrics_begin b;

	(void)t, (void)len;
	memcpy(&b, p, sizeof(b));
	if (b.health != 200 && b.health != 503)
		return refuse(err, errlen, "ipc: METRICS_BEGIN health %" PRIu32 " is not 200 or 503",
		    b.health);
	if (b.reserved != 0)
		return refuse(err, errlen, "ipc: METRICS_BEGIN reserved word is not zero");
	if (b.text_len > IPC_METRICS_SNAPSHOT_MAX || b.openmetrics_len > IPC_METRICS_SNAPSHOT_MAX ||
	    b.text_len + b.openmetrics_len > IPC_METRICS_SNAPSHOT_MAX)
		return refuse(err, errlen, "ipc: METRICS_BEGIN snapshot of %" PRIu64 " + %" PRIu64
		    " bytes is over %u", b.text_len, b.openmetrics_len, IPC_METRICS_SNAPSHOT_MAX);
	if (!FIELD_TERMINATED(b, reason))
		return refuse(err, errlen, "ipc: METRICS_BEGIN reason is not NUL-terminated");
	for (const char *c = b.reason; *c != '\0'; c++)
		if (*c < ' ' || *c > '~')
			return refuse(err, errlen, "ipc: METRICS_BEGIN reason has a byte 0x%02x that "
			    "is not printable ASCII", (unsigned)(unsigned char)*c);
	return 0;
}

static int
check_refusals(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_refusals r;

	(void)t, (void)len;
	memcpy(&r, p, sizeof(r));
	if (r.n > IPC_REFUSALS_TOP)
		return refuse(err, errlen, "ipc: REFUSALS of %" PRIu32 " callers, at most %d", r.n,
		    IPC_REFUSALS_TOP);
	if (r.reserved != 0)
		return refuse(err, errlen, "ipc: REFUSALS reserved word is not zero");
	for (uint32_t i = 0; i < IPC_REFUSALS_TOP; i++) {
		const char *pr = r.top[i].principal;
		if (!FIELD_TERMINATED(r.top[i], principal))
			return refuse(err, errlen, "ipc: REFUSALS caller %" PRIu32 " is not "
			    "NUL-terminated", i);
		if (i >= r.n) {
			if (pr[0] != '\0' || r.top[i].count != 0)
				return refuse(err, errlen, "ipc: REFUSALS entry %" PRIu32 " past n is not "
				    "zero", i);
			continue;
		}
		if (pr[0] == '\0')
			return refuse(err, errlen, "ipc: REFUSALS caller %" PRIu32 " is empty", i);
		for (const char *c = pr; *c != '\0'; c++)
			if (*c <= ' ' || *c > '~' || *c == '"' || *c == '\\')
				return refuse(err, errlen, "ipc: REFUSALS caller %" PRIu32 " has a byte "
				    "0x%02x", i, (unsigned)(unsigned char)*c);
	}
	return 0;
}

static int
check_kick_req(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_kick_req r;

	(void)t, (void)len;
	memcpy(&r, p, sizeof(r));
	if (r.cid == 0)
		return refuse(err, errlen, "ipc: KICK_REQ cid is 0");
	if (!FIELD_TERMINATED(r, server) || r.server[0] == '\0')
		return refuse(err, errlen, "ipc: KICK_REQ server is empty or not NUL-terminated");
	for (const char *c = r.server; *c != '\0'; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		    (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
			return refuse(err, errlen, "ipc: KICK_REQ server has a byte 0x%02x",
			    (unsigned)(unsigned char)*c);
	if (!FIELD_TERMINATED(r, principal) || r.principal[0] == '\0')
		return refuse(err, errlen, "ipc: KICK_REQ principal is empty or not NUL-terminated");
	for (const char *c = r.principal; *c != '\0'; c++)
		if (*c <= ' ' || *c > '~')
			return refuse(err, errlen, "ipc: KICK_REQ principal has a byte 0x%02x",
			    (unsigned)(unsigned char)*c);
	return 0;
}

static int
check_kick_rep(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_kick_rep r;

	(void)t, (void)len;
	memcpy(&r, p, sizeof(r));
	if (r.outcome > IPC_KICK_REFUSED || r.reserved != 0)
		return refuse(err, errlen, "ipc: KICK_REP outcome %" PRIu32 " or reserved word",
		    r.outcome);
	if (!FIELD_TERMINATED(r, reply))
		return refuse(err, errlen, "ipc: KICK_REP reply is not NUL-terminated");
	return 0;
}

static int
check_reload_req(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_reload_req r;
	size_t n;

	(void)t, (void)len;
	memcpy(&r, p, sizeof(r));
	if (!FIELD_TERMINATED(r, expected))
		return refuse(err, errlen, "ipc: RELOAD_REQ expected is not NUL-terminated");
	n = strlen(r.expected);
	if (n != 0 && n != IPC_SHA256_HEX - 1)
		return refuse(err, errlen, "ipc: RELOAD_REQ expected is %zu chars, not a SHA-256", n);
	for (size_t i = 0; i < n; i++)
		if (!((r.expected[i] >= '0' && r.expected[i] <= '9') ||
		    (r.expected[i] >= 'a' && r.expected[i] <= 'f')))
			return refuse(err, errlen, "ipc: RELOAD_REQ expected is not lowercase hex");
	for (size_t i = 0; i < sizeof(r.reserved); i++)
		if (r.reserved[i] != 0)
			return refuse(err, errlen, "ipc: RELOAD_REQ reserved byte %zu is not zero", i);
	return 0;
}

static int
check_reload_rep(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	struct ipc_reload_rep r;

	(void)t, (void)len;
	memcpy(&r, p, sizeof(r));
	if (r.ok > 1 || r.broker_accepted > 1)
		return refuse(err, errlen, "ipc: RELOAD_REP ok/broker_accepted not 0 or 1");
	if (!FIELD_TERMINATED(r, error))
		return refuse(err, errlen, "ipc: RELOAD_REP error is not NUL-terminated");
	return 0;
}

static bool
pem_base64(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '+' || c == '/' || c == '=';
}

/* Certificate blocks and line breaks, nothing else (see ipc.h). */
static int
check_tls_ca(const struct ipc_type_info *t, const uint8_t *p, size_t len, char *err,
    size_t errlen)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----";
	static const char end[] = "-----END CERTIFICATE-----";
	size_t i = 0, n = 0;

	(void)t;
	while (i < len) {
		if (len - i < sizeof(begin) - 1 || memcmp(p + i, begin, sizeof(begin) - 1) != 0)
			return refuse(err, errlen, "ipc: TLS_CA payload: expected %s at offset %zu",
			    begin, i);
		i += sizeof(begin) - 1;
		while (i < len && (pem_base64(p[i]) || p[i] == '\n' || p[i] == '\r'))
			i++;
		if (len - i < sizeof(end) - 1 || memcmp(p + i, end, sizeof(end) - 1) != 0)
			return refuse(err, errlen, "ipc: TLS_CA payload: certificate %zu is not "
			    "closed by %s (offset %zu)", n + 1, end, i);
		i += sizeof(end) - 1;
		while (i < len && (p[i] == '\n' || p[i] == '\r'))
			i++;
		n++;
	}
	return 0;
}

static int
check_len(const struct ipc_rule *r, size_t len, char *err, size_t errlen)
{
	const struct ipc_type_info *t = &r->info;

	if (r->len_rule == LEN_EITHER) {
		if (len == t->min_len || len == t->max_len)
			return 0;
		return refuse(err, errlen, "ipc: %s payload of %zu bytes, expected %" PRIu32
		    " or %" PRIu32, t->name, len, t->min_len, t->max_len);
	}
	if (len >= t->min_len && len <= t->max_len)
		return 0;
	if (t->min_len == t->max_len)
		return refuse(err, errlen, "ipc: %s payload of %zu bytes, expected %" PRIu32,
		    t->name, len, t->min_len);
	return refuse(err, errlen, "ipc: %s payload of %zu bytes, expected %" PRIu32 "..%" PRIu32,
	    t->name, len, t->min_len, t->max_len);
}

int
ipc_decode(const void *frame, size_t n, enum ipc_dir dir, struct ipc_msg *out, char *err,
    size_t errlen)
{
	const uint8_t *p = frame;
	const struct ipc_rule *r;
	struct ipc_hdr h;
	size_t len;

	memset(out, 0, sizeof(*out));
	if (dir != IPC_TO_WORKER && dir != IPC_TO_SUPERVISOR)
		return refuse(err, errlen, "ipc: no receiver direction %d", (int)dir);
	if (n < IPC_HDR_LEN)
		return refuse(err, errlen, "ipc: short frame (%zu bytes)", n);
	/* Before the header is trusted: n may exceed what the buffer holds. */
	if (n > IPC_MAX_FRAME)
		return refuse(err, errlen, "ipc: oversized datagram (%zu bytes, at most %d)", n,
		    IPC_MAX_FRAME);
	memcpy(&h, p, sizeof(h));
	len = n - IPC_HDR_LEN;
	if (h.len != len)
		return refuse(err, errlen, "ipc: header length %" PRIu32
		    " disagrees with the datagram's %zu payload bytes", h.len, len);
	if (h.flags != 0)
		return refuse(err, errlen, "ipc: flags 0x%04x set, expected 0", h.flags);
	if ((r = rule_of(h.type)) == NULL)
		return refuse(err, errlen, "ipc: unknown message type %u", h.type);
	if ((r->info.dir & dir) == 0)
		return refuse(err, errlen, "ipc: %s in the wrong direction (to %s)", r->info.name,
		    dir == IPC_TO_WORKER ? "a worker" : "the supervisor");
	if (check_len(r, len, err, errlen) != 0)
		return -1;
	if (r->check != NULL && r->check(&r->info, p + IPC_HDR_LEN, len, err, errlen) != 0)
		return -1;

	out->type = h.type;
	out->len = (uint32_t)len;
	out->payload = p + IPC_HDR_LEN;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	return 0;
}

size_t
ipc_encode(void *buf, size_t buflen, uint16_t type, const void *payload, size_t len)
{
	struct ipc_hdr h = { .type = type, .flags = 0, .len = (uint32_t)len };

	if (len > IPC_MAX_PAYLOAD || buflen < IPC_HDR_LEN + len)
		return 0;
	memcpy(buf, &h, sizeof(h));
	if (len > 0)
		memcpy((uint8_t *)buf + IPC_HDR_LEN, payload, len);
	return IPC_HDR_LEN + len;
}

int
ipc_send(int fd, uint16_t type, const void *payload, size_t len)
{
	struct ipc_hdr h = { .type = type, .flags = 0, .len = (uint32_t)len };
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1 };
	ssize_t r;

	if (len > IPC_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	/* A SEQPACKET send is all or nothing, so after EINTR nothing went. */
	do
		r = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (r == -1 && errno == EINTR);
	if (r == -1)
		return -1;
	if ((size_t)r != sizeof(h) + len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

/* recv returns 0 both at the end of a SEQPACKET channel and for an empty
 * datagram; only the former leaves the socket hung up. */
static bool
peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	/* Unable to tell: a channel that cannot be polled is done with. */
	if (poll(&p, 1, 0) == -1)
		return true;
	return (p.revents & (POLLHUP | POLLRDHUP)) != 0;
}

int
ipc_recv(int fd, uint8_t *buf, enum ipc_dir dir, struct ipc_msg *out, char *err,
    size_t errlen)
{
	ssize_t n;
	int saved;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	/* MSG_TRUNC: the datagram's real length, so an oversized one shows. */
	n = recv(fd, buf, IPC_MAX_FRAME, MSG_TRUNC);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return -1;
		saved = errno;
		refuse(err, errlen, "ipc: recv: %s", strerror(saved));
		errno = saved;
		return -1;
	}
	if (n == 0 && peer_closed(fd))
		return 0;
	if (ipc_decode(buf, (size_t)n, dir, out, err, errlen) != 0) {
		errno = EPROTO;
		return -1;
	}
	return 1;
}
