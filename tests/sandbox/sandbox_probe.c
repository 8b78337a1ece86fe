/*
 * sandbox_probe: the policy test program. It confines itself exactly as a
 * worker does (role SANDBOX_TEST, dropping to nobody when run as root),
 * then attempts what its first argument names, so test_sandbox can watch
 * the outcome from outside:
 *
 *   execve             exec /bin/true                 (must die by SIGSYS)
 *   open-write         open /tmp/x for writing        (must fail)
 *   socket-packet      open an AF_PACKET socket       (must die by SIGSYS)
 *   escape WHAT [ARG]  what a compromised worker would try (issue 27):
 *                      unix PATH (connect a listening unix socket),
 *                      abstract NAME, socketpair, udp, udp6, raw, open PATH
 *                      (read a file), tcp PORT (connect to 127.0.0.1:PORT),
 *                      listen (bind and listen on a loopback port);
 *                      exit 0 when the sandbox refused it
 *                      (or death by SIGSYS), 3 when it succeeded;
 *                      tfo PORT, tfo-msg PORT: a TCP Fast Open connect
 *                      to 127.0.0.1:PORT through sendto or sendmsg
 *                      (issue 41): exit 0 only when the filter itself
 *                      refused it (EPERM), 4 when something else did
 *                      (Landlock's EACCES), 3 when it connected
 *   landlock URL       fail to read any file, and to connect anywhere but
 *                      the broker's port where Landlock has ABI 4 (exit 0)
 *   nats URL           publish, flush, request/reply, JetStream publish
 *                      against a plain nats-server at URL (exit 0)
 *   sleep SECONDS URL  connect, write "ready" to stdout, sleep (exit 0)
 *
 * URL is an IP-literal nats://ADDR:PORT; its port is the Landlock connect
 * rule. COTAL_SECCOMP=log loads the filter in log mode, as in the daemon.
 * COTAL_PROBE_ROLE names the role whose policy it takes (fanout, reader,
 * registry, timer, metrics; default the test role). COTAL_PROBE_NODROP=1 keeps the
 * caller's user (root keeps its capabilities: only the sandbox stands in
 * the way). COTAL_PROBE_NO_LANDLOCK=1 first loads a filter that answers
 * landlock_create_ruleset with ENOSYS, as a kernel without Landlock does.
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/landlock.h>

#include <nats/nats.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>

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
	say("usage: sandbox_probe execve | open-write | socket-packet | escape WHAT [ARG] | "
	    "landlock URL | nats URL | sleep SECONDS URL");
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

/* A kernel without Landlock, as a container runtime's seccomp profile
 * makes one: landlock_create_ruleset answers ENOSYS. */
static int
hide_landlock(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc = -1;

	if (ctx == NULL)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset),
	    0) == 0 && seccomp_load(ctx) == 0)
		rc = 0;
	seccomp_release(ctx);
	return rc;
}

static bool
env_set(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && strcmp(v, "1") == 0;
}

static int
confine(uint16_t port)
{
	static const struct {
		const char *name;
		enum sandbox_role role;
	} roles[] = { { "fanout", SANDBOX_FANOUT }, { "reader", SANDBOX_READER },
		{ "registry", SANDBOX_REGISTRY }, { "timer", SANDBOX_TIMER },
		{ "metrics", SANDBOX_METRICS } };
	struct sandbox_opts o = { .role = SANDBOX_TEST, .broker_ports = { port } };
	char err[PROBE_ERR_MAX];
	const char *mode = getenv("COTAL_SECCOMP"), *role = getenv("COTAL_PROBE_ROLE");
	long abi;

	for (size_t i = 0; role != NULL && i < sizeof(roles) / sizeof(roles[0]); i++)
		if (strcmp(role, roles[i].name) == 0)
			o.role = roles[i].role;
	if (role != NULL && o.role == SANDBOX_TEST) {
		say("probe: COTAL_PROBE_ROLE=%s: no such role", role);
		return -1;
	}
	/* The metrics server dials nothing: no port, as the daemon starts it. */
	if (o.role == SANDBOX_METRICS)
		o.broker_ports[0] = 0;
	if (env_set("COTAL_PROBE_NO_LANDLOCK") && hide_landlock() != 0) {
		say("probe: cannot hide Landlock: %s", strerror(errno));
		return -1;
	}
	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	landlock_abi = abi > 0 ? (int)abi : 0;
	o.seccomp_log = mode != NULL && strcmp(mode, "log") == 0;
	if (geteuid() == 0 && !env_set("COTAL_PROBE_NODROP")) {
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
 * What the sandbox leaves: no file opens (on every kernel), the broker's
 * port takes a TCP connect, and where Landlock has ABI 4 no other port.
 */
static int
try_landlock(uint16_t port)
{
	static const char *const files[] = { "/etc/hosts", "/etc/passwd" };
	int fd, e, bad = 0;

	say("probe: Landlock ABI %d", landlock_abi);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if ((fd = open(files[i], O_RDONLY | O_CLOEXEC)) >= 0 || errno != EACCES) {
			say("probe: %s: %s (want EACCES)", files[i],
			    fd >= 0 ? "opened" : strerror(errno));
			bad = 1;
		}
		if (fd >= 0)
			close(fd);
	}
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

/* A unix socket connected to addr (len bytes): 0 when made and connected. */
static int
unix_connect(const struct sockaddr_un *addr, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)addr, len);
	close(fd);
	return rc;
}

/*
 * A TCP Fast Open connect to 127.0.0.1:port, the data sent with the SYN:
 * through sendto, or sendmsg (msg). 0 when the filter refused it (EPERM),
 * 4 when something else did, 3 when it connected.
 */
static int
try_fast_open(const char *arg, bool msg)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(arg)) };
	struct iovec iov = { .iov_base = (void *)"x", .iov_len = 1 };
	struct msghdr mh = { .msg_name = &sin, .msg_namelen = sizeof(sin), .msg_iov = &iov,
		.msg_iovlen = 1 };
	const char *how = msg ? "sendmsg" : "sendto";
	int fd, e;
	ssize_t n;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		say("probe: fast open: socket: %s", strerror(errno));
		return 4;
	}
	n = msg ? sendmsg(fd, &mh, MSG_FASTOPEN | MSG_NOSIGNAL) :
	    sendto(fd, "x", 1, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&sin, sizeof(sin));
	e = errno;
	close(fd);
	if (n >= 0) {
		say("probe: escape fast open (%s) to port %s: SUCCEEDED", how, arg);
		return 3;
	}
	if (e != EPERM) {
		say("probe: escape fast open (%s) to port %s: refused, but not by the filter "
		    "(%s, want EPERM)", how, arg, strerror(e));
		return 4;
	}
	say("probe: escape fast open (%s) to port %s: refused by the filter (%s)", how, arg,
	    strerror(e));
	return 0;
}

/*
 * One thing a compromised worker would try (issue 27): 0 when the sandbox
 * refused it, 3 when it worked. A call seccomp kills never returns.
 */
static int
try_escape(const char *what, const char *arg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = -1, sv[2], rc = -1;
	socklen_t len = sizeof(sun);

	if ((strcmp(what, "tfo") == 0 || strcmp(what, "tfo-msg") == 0) && arg != NULL)
		return try_fast_open(arg, strcmp(what, "tfo-msg") == 0);
	if (strcmp(what, "unix") == 0 && arg != NULL) {
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", arg);
		rc = unix_connect(&sun, len);
	} else if (strcmp(what, "abstract") == 0 && arg != NULL) {
		size_t n = strlen(arg) < sizeof(sun.sun_path) - 1 ? strlen(arg) :
		    sizeof(sun.sun_path) - 1;
		memcpy(sun.sun_path + 1, arg, n);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
		rc = unix_connect(&sun, len);
	} else if (strcmp(what, "socketpair") == 0) {
		if ((rc = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) == 0)
			close(sv[0]), close(sv[1]);
	} else if (strcmp(what, "udp") == 0) {
		rc = fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	} else if (strcmp(what, "udp6") == 0) {
		rc = fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	} else if (strcmp(what, "raw") == 0) {
		rc = fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	} else if (strcmp(what, "open") == 0 && arg != NULL) {
		rc = fd = open(arg, O_RDONLY | O_CLOEXEC);
	} else if (strcmp(what, "tcp") == 0 && arg != NULL) {
		/* The broker's port on loopback: the workers' one connection,
		 * which the metrics server must not make. */
		struct sockaddr_in sin = { .sin_family = AF_INET,
			.sin_port = htons((uint16_t)atoi(arg)) };
		inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
		if ((rc = fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0)
			rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	} else if (strcmp(what, "listen") == 0) {
		struct sockaddr_in sin = { .sin_family = AF_INET };
		inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
		if ((rc = fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
		    (rc = bind(fd, (struct sockaddr *)&sin, sizeof(sin))) == 0)
			rc = listen(fd, 1);
	} else
		return usage();
	if (fd >= 0)
		close(fd);
	if (rc >= 0) {
		say("probe: escape %s %s: SUCCEEDED", what, arg != NULL ? arg : "");
		return 3;
	}
	say("probe: escape %s %s: refused (%s)", what, arg != NULL ? arg : "", strerror(errno));
	return 0;
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
	} else if (strcmp(mode, "escape") == 0) {
		if (argc != 3 && argc != 4)
			return usage();
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
	if (strcmp(mode, "escape") == 0)
		return try_escape(argv[2], argc == 4 ? argv[3] : NULL);
	if (strcmp(mode, "landlock") == 0)
		return try_landlock(url_port(url));
	if (strcmp(mode, "nats") == 0)
		return try_nats(url, 0);
	if (strcmp(mode, "sleep") == 0)
		return try_nats(url, sleep_s);
	return usage();
}
