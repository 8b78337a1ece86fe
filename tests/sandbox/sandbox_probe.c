/*
 * sandbox_probe: the policy test program. It confines itself exactly as a
 * worker does (role SANDBOX_TEST, dropping to nobody when run as root),
 * then attempts what its first argument names, so test_sandbox can watch
 * the outcome from outside:
 *
 *   execve             exec /bin/true                 (must die by SIGSYS)
 *   open-write         open /tmp/x for writing        (must die by SIGSYS)
 *   socket-packet      open an AF_PACKET socket       (must die by SIGSYS)
 *   landlock URL       read a resolver file, fail to read /etc/passwd and
 *                      to connect anywhere but the broker's port (exit 0)
 *   nats URL           publish, flush, request/reply, JetStream publish
 *                      against a plain nats-server at URL (exit 0)
 *   sleep SECONDS URL  connect, write "ready" to stdout, sleep (exit 0)
 *
 * URL is an IP-literal nats://ADDR:PORT; its port is the Landlock connect
 * rule. COTAL_SECCOMP=log loads the filter in log mode, as in the daemon.
 * Run by hand, give it a pipe or terminal for stdout and stderr: under
 * RLIMIT_FSIZE 0 a write to a regular file raises SIGXFSZ.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/landlock.h>

#include <nats/nats.h>

#include "sandbox/sandbox.h"

#define PROBE_USER "nobody"
#define PROBE_TIMEOUT_MS 5000
#define PROBE_SLEEP_MAX 60 /* seconds */
#define PROBE_SUBJECT "probe.ping"
#define PROBE_JS_STREAM "PROBE"
#define PROBE_JS_SUBJECT "probe.js"
#define PROBE_ERR_MAX 512
#define LANDLOCK_ABI_NET 4 /* TCP connect rules */

static int landlock_abi; /* probed before confinement, which forbids it */

/* Diagnostics after confinement: one write(2), no stdio buffering. */
static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	char line[PROBE_ERR_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

static int
usage(void)
{
	say("usage: sandbox_probe execve | open-write | socket-packet | landlock URL | "
	    "nats URL | sleep SECONDS URL");
	return 2;
}

/* The port of nats://A.B.C.D:PORT, or 0 when there is none. */
static uint16_t
url_port(const char *url)
{
	const char *colon = strrchr(url, ':');
	char *end;
	long port;

	if (colon == NULL)
		return 0;
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port <= 0 || port > 65535)
		return 0;
	return (uint16_t)port;
}

static int
confine(uint16_t port)
{
	struct sandbox_opts o = { .role = SANDBOX_TEST, .broker_ports = { port } };
	char err[PROBE_ERR_MAX];
	const char *mode = getenv("COTAL_SECCOMP");
	long abi;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	landlock_abi = abi > 0 ? (int)abi : 0;
	o.seccomp_log = mode != NULL && strcmp(mode, "log") == 0;
	if (geteuid() == 0) {
		if (sandbox_lookup_user(PROBE_USER, &o.uid, &o.gid, err, sizeof(err)) != 0) {
			say("probe: %s", err);
			return -1;
		}
		o.drop = true;
	}
	if (sandbox_confine(&o, err, sizeof(err)) != 0) {
		say("probe: confine: %s", err);
		return -1;
	}
	return 0;
}

static int
try_execve(void)
{
	char *const argv[] = { "/bin/true", NULL };
	char *const envp[] = { NULL };

	execve(argv[0], argv, envp);
	say("probe: execve returned: %s", strerror(errno));
	return 1;
}

static int
try_open_write(void)
{
	int fd = open("/tmp/x", O_WRONLY | O_CREAT, 0600);

	say("probe: open for writing returned %d (%s)", fd, fd < 0 ? strerror(errno) : "open");
	return 1;
}

static int
try_socket_packet(void)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));

	say("probe: AF_PACKET socket returned %d (%s)", fd, fd < 0 ? strerror(errno) : "open");
	return 1;
}

/* A TCP connect to 127.0.0.1:port; 0 or the errno. */
static int
tcp_connect_errno(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, rc, saved;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return errno;
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	saved = errno;
	close(fd);
	return rc == 0 ? 0 : saved;
}

/*
 * What Landlock leaves: a resolver file opens, any other file does not,
 * and only the broker's port takes a TCP connect (ABI 4 and later).
 */
static int
try_landlock(uint16_t port)
{
	int fd, e, bad = 0;

	if (landlock_abi == 0) {
		say("probe: the kernel has no Landlock; nothing to check");
		return 0;
	}
	say("probe: Landlock ABI %d", landlock_abi);

	if ((fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC)) < 0) {
		say("probe: /etc/hosts: %s (want readable)", strerror(errno));
		bad = 1;
	} else
		close(fd);
	if ((fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC)) >= 0 || errno != EACCES) {
		say("probe: /etc/passwd: %s (want EACCES)", fd >= 0 ? "opened" : strerror(errno));
		bad = 1;
	}
	if (fd >= 0)
		close(fd);
	if ((e = tcp_connect_errno(port)) != 0) {
		say("probe: connect to the broker port %u: %s", (unsigned)port, strerror(e));
		bad = 1;
	}
	if (landlock_abi < LANDLOCK_ABI_NET)
		return bad;
	if ((e = tcp_connect_errno((uint16_t)(port == 65535 ? 1 : port + 1))) != EACCES) {
		say("probe: connect to port %u: %s (want EACCES)", (unsigned)port + 1,
		    e == 0 ? "connected" : strerror(e));
		bad = 1;
	}
	return bad;
}

/* The reply side of the request/reply roundtrip, on a nats.c thread. */
static void
on_ping(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg)
{
	(void)sub, (void)arg;
	if (natsMsg_GetReply(msg) != NULL)
		natsConnection_PublishString(nc, natsMsg_GetReply(msg), "pong");
	natsMsg_Destroy(msg);
}

static int
nats_fail(const char *what, natsStatus s)
{
	say("probe: %s: %s", what, natsStatus_GetText(s));
	nats_PrintLastErrorStack(stderr);
	return 1;
}

/* A JetStream publish, when the server has JetStream. */
static int
jetstream_publish(natsConnection *nc)
{
	const char *subjects[] = { PROBE_JS_SUBJECT };
	jsAccountInfo *ai = NULL;
	jsStreamInfo *si = NULL;
	jsPubAck *pa = NULL;
	jsStreamConfig cfg;
	jsErrCode jerr = 0;
	jsCtx *js = NULL;
	natsStatus s;
	int rc = 1;

	if ((s = natsConnection_JetStream(&js, nc, NULL)) != NATS_OK)
		return nats_fail("JetStream context", s);
	s = js_GetAccountInfo(&ai, js, NULL, &jerr);
	if (s != NATS_OK && (jerr == JSNotEnabledErr || jerr == JSNotEnabledForAccountErr ||
	    s == NATS_NO_RESPONDERS)) {
		say("probe: the server has no JetStream; skipping js_Publish");
		rc = 0;
		goto out;
	}
	if (s != NATS_OK) {
		nats_fail("JetStream account info", s);
		goto out;
	}
	jsStreamConfig_Init(&cfg);
	cfg.Name = PROBE_JS_STREAM;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_MemoryStorage;
	if ((s = js_AddStream(&si, js, &cfg, NULL, &jerr)) != NATS_OK) {
		nats_fail("js_AddStream", s);
		goto out;
	}
	if ((s = js_Publish(&pa, js, PROBE_JS_SUBJECT, "hello", 5, NULL, &jerr)) != NATS_OK) {
		nats_fail("js_Publish", s);
		goto out;
	}
	say("probe: JetStream publish stored as %s #%llu", pa->Stream,
	    (unsigned long long)pa->Sequence);
	rc = 0;
out:
	jsPubAck_Destroy(pa);
	jsStreamInfo_Destroy(si);
	jsAccountInfo_Destroy(ai);
	jsCtx_Destroy(js);
	return rc;
}

static int
broker_roundtrip(natsConnection *nc)
{
	natsSubscription *sub = NULL;
	natsMsg *reply = NULL;
	natsStatus s;
	int rc = 1;

	if ((s = natsConnection_PublishString(nc, "probe.hello", "hello")) != NATS_OK)
		return nats_fail("publish", s);
	if ((s = natsConnection_FlushTimeout(nc, PROBE_TIMEOUT_MS)) != NATS_OK)
		return nats_fail("flush", s);
	if ((s = natsConnection_Subscribe(&sub, nc, PROBE_SUBJECT, on_ping, NULL)) != NATS_OK)
		return nats_fail("subscribe", s);
	if ((s = natsConnection_FlushTimeout(nc, PROBE_TIMEOUT_MS)) != NATS_OK) {
		nats_fail("flush after subscribe", s);
		goto out;
	}
	s = natsConnection_RequestString(&reply, nc, PROBE_SUBJECT, "ping", PROBE_TIMEOUT_MS);
	if (s != NATS_OK) {
		nats_fail("request", s);
		goto out;
	}
	if (strcmp(natsMsg_GetData(reply), "pong") != 0) {
		say("probe: request answered \"%s\", want \"pong\"", natsMsg_GetData(reply));
		goto out;
	}
	rc = jetstream_publish(nc);
out:
	natsMsg_Destroy(reply);
	natsSubscription_Destroy(sub);
	return rc;
}

/* Connect, then either run the roundtrip or hold still for `sleep_s`. */
static int
try_nats(const char *url, int sleep_s)
{
	natsConnection *nc = NULL;
	natsStatus s;
	int rc = 0;

	if ((s = natsConnection_ConnectTo(&nc, url)) != NATS_OK)
		rc = nats_fail("connect", s);
	else if (sleep_s == 0)
		rc = broker_roundtrip(nc);
	else {
		struct timespec ts = { .tv_sec = sleep_s };

		if (write(STDOUT_FILENO, "ready\n", 6) != 6)
			rc = 1;
		while (rc == 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	natsConnection_Destroy(nc);
	nats_Close();
	return rc;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *url = NULL;
	int sleep_s = 0;

	if (strcmp(mode, "landlock") == 0 || strcmp(mode, "nats") == 0) {
		if (argc != 3)
			return usage();
		url = argv[2];
	} else if (strcmp(mode, "sleep") == 0) {
		if (argc != 4 || (sleep_s = atoi(argv[2])) <= 0 || sleep_s > PROBE_SLEEP_MAX)
			return usage();
		url = argv[3];
	} else if (argc != 2)
		return usage();
	if (url != NULL && url_port(url) == 0)
		return usage();

	if (confine(url != NULL ? url_port(url) : 0) != 0)
		return 1;

	if (strcmp(mode, "execve") == 0)
		return try_execve();
	if (strcmp(mode, "open-write") == 0)
		return try_open_write();
	if (strcmp(mode, "socket-packet") == 0)
		return try_socket_packet();
	if (strcmp(mode, "landlock") == 0)
		return try_landlock(url_port(url));
	if (strcmp(mode, "nats") == 0)
		return try_nats(url, 0);
	if (strcmp(mode, "sleep") == 0)
		return try_nats(url, sleep_s);
	return usage();
}
