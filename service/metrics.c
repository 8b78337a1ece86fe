/*
 * The supervisor's side of --metrics (service/metrics.h). Runs in the
 * supervisor's (or the host's) event loop; parses no HTTP.
 */
#include "service/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "lib/clock.h"
#include "metrics/metrics.h"
#include "service/childenv.h"
#include "service/exposition.h"

void
metrics_init(struct metrics_srv *m)
{
	memset(m, 0, sizeof(*m));
	m->listen_fd = m->ch = m->log_fd = -1;
	m->relay.rd = -1;
	pthread_mutex_init(&m->too_big.mu, NULL);
}

int
metrics_listen(struct metrics_srv *m, const char *arg, char *err, size_t errlen)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	char host[64] = METRICS_DEFAULT_ADDR;
	const char *colon = strrchr(arg, ':'), *port_s = colon != NULL ? colon + 1 : arg;
	char *end;
	int one = 1, fd;

	errno = 0;
	unsigned long port = strtoul(port_s, &end, 10);
	if (*port_s == '\0' || *end != '\0' || errno != 0 || port == 0 || port > 65535) {
		snprintf(err, errlen, "--metrics %s: the port is not a number from 1 to 65535 "
		    "(want ADDR:PORT, PORT or :PORT)", arg);
		return -1;
	}
	if (colon != NULL && colon > arg) {
		size_t hl = (size_t)(colon - arg);
		const char *h = arg;
		if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
			h++, hl -= 2;
		if (hl >= sizeof(host)) {
			snprintf(err, errlen, "--metrics %s: the address is too long", arg);
			return -1;
		}
		memcpy(host, h, hl);
		host[hl] = '\0';
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		sl = sizeof(*v4);
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		sl = sizeof(*v6);
	} else {
		snprintf(err, errlen, "--metrics %s: \"%s\" is not an IP address (a name is not "
		    "resolved: say which address to listen on)", arg, host);
		return -1;
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 64) != 0) {
		snprintf(err, errlen, "--metrics %s: cannot listen on it: %s", arg, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
#ifdef COTAL_TEST_HOOKS
	/* A test build's answers may be made larger than the socket's buffer
	 * (COTAL_TEST_METRICS_SNDBUF: its bytes, inherited by every accepted
	 * connection), as a host's many lanes make them on a real network:
	 * a client that does not read then stalls the server's write. */
	const char *sndbuf = getenv("COTAL_TEST_METRICS_SNDBUF");
	int sb = sndbuf != NULL ? atoi(sndbuf) : 0;
	if (sb > 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
#endif
	m->listen_fd = fd;
	snprintf(m->addr, sizeof(m->addr), "%s%s%s:%lu", ss.ss_family == AF_INET6 ? "[" : "",
	    host, ss.ss_family == AF_INET6 ? "]" : "", port);
	return 0;
}

/* ---- the server's life ---- */

static void on_writable(evutil_socket_t fd, short what, void *arg);

static void
drop_channel(struct metrics_srv *m)
{
	if (m->ev_write != NULL)
		event_free(m->ev_write);
	m->ev_write = NULL;
	if (m->ch >= 0)
		close(m->ch);
	m->ch = -1;
	free(m->out);
	m->out = NULL;
}

static void
spawn(struct metrics_srv *m)
{
	char uid[24], gid[24];
	char *argv[] = { (char *)"cotal-deliveryd", (char *)"--metrics-process", uid, gid,
		(char *)(m->drop ? "1" : "0"), (char *)(m->seccomp_log ? "1" : "0"), NULL };
	int chp[2], logp[2];
	pid_t pid;

	snprintf(uid, sizeof(uid), "%lu", (unsigned long)m->uid);
	snprintf(gid, sizeof(gid), "%lu", (unsigned long)m->gid);
	char *const *env = child_env();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chp) != 0 ||
	    pipe2(logp, O_CLOEXEC) != 0)
		fatal("delivery: socketpair for the metrics server");
	if ((pid = fork()) < 0)
		fatal("delivery: fork the metrics server");
	if (pid == 0) {
		/* Async-signal-safe calls only until exec. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int hch = fcntl(chp[1], F_DUPFD_CLOEXEC, 16);
		int hl = fcntl(m->listen_fd, F_DUPFD_CLOEXEC, 16);
		int hlog = fcntl(logp[1], F_DUPFD_CLOEXEC, 16);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (hch < 0 || hl < 0 || hlog < 0 || nul < 0 || dup2(nul, 0) < 0 ||
		    dup2(nul, 1) < 0 || dup2(hlog, 2) < 0 || dup2(hch, METRICS_FD_CHANNEL) < 0 ||
		    dup2(hl, METRICS_FD_LISTEN) < 0)
			_exit(126);
		/* Nothing else crosses exec: not the broker socket, not a secret. */
		closefrom(METRICS_FD_LISTEN + 1);
		execve(m->self_exe, argv, env);
		_exit(127);
	}
	close(chp[1]);
	close(logp[1]);
	m->pid = pid;
	m->ch = chp[0];
	evutil_make_socket_nonblocking(m->ch);
	relay_open(&m->relay, m->base, logp[0]);
	m->ev_write = event_new(m->base, m->ch, EV_WRITE, on_writable, m);
	restart_started(&m->restart, mono_ms());
	log_info("delivery: metrics server (pid %ld) on http://%s/metrics and /healthz",
	    (long)pid, m->addr);
}

static void
on_restart(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	spawn(arg);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_srv *m = arg;

	(void)fd, (void)what;
	if (m->ch >= 0 && m->tick != NULL)
		m->tick(m, m->arg);
}

void
metrics_begin(struct metrics_srv *m, struct event_base *base)
{
	struct timeval every = { METRICS_TICK_MS / 1000, (METRICS_TICK_MS % 1000) * 1000 };

	if (m->listen_fd < 0)
		return;
	m->base = base;
	relay_init(&m->relay, "metrics", "the metrics server", METRICS_RELAY_LINES, m->log_fd);
	restart_init(&m->restart, &restart_metrics);
	m->ev_restart = evtimer_new(base, on_restart, m);
	m->ev_tick = event_new(base, -1, EV_PERSIST, on_tick, m);
	event_add(m->ev_tick, &every);
	spawn(m);
}

bool
metrics_reaped(struct metrics_srv *m, pid_t pid, int wstatus, bool stopping)
{
	char cause[96];
	bool loop;

	if (m->pid <= 0 || pid != m->pid)
		return false;
	m->pid = 0;
	drop_channel(m);
	if (stopping)
		return true;
	restart_cause(wstatus, cause, sizeof(cause));
	int64_t delay = restart_after_death(&m->restart, &restart_metrics, mono_ms(), &loop);
	log_warnx("delivery: the metrics server (pid %ld) %s — restarting it in %lld ms; "
	    "delivery goes on", (long)pid, cause, (long long)delay);
	struct timeval tv = { (time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000 };
	evtimer_add(m->ev_restart, &tv);
	return true;
}

/* What /healthz says, as the channel carries it: printable ASCII. */
static void
printable(char *s)
{
	for (; *s != '\0'; s++)
		if (*s < ' ' || *s > '~')
			*s = '?';
}

/* The snapshot on its way: BEGIN, the PARTs from out_off, END; what the
 * channel does not take now waits for it to be writable. */
static void
pump(struct metrics_srv *m)
{
	while (m->out != NULL) {
		int rc;
		if (!m->out_begun) {
			rc = ipc_send(m->ch, IPC_METRICS_BEGIN, &m->out_begin, sizeof(m->out_begin));
			if (rc == 0)
				m->out_begun = true;
		} else if (m->out_off < m->out_len) {
			size_t k = m->out_len - m->out_off;
			if (k > IPC_MAX_PAYLOAD)
				k = IPC_MAX_PAYLOAD;
			rc = ipc_send(m->ch, IPC_METRICS_PART, m->out + m->out_off, k);
			if (rc == 0)
				m->out_off += k;
		} else {
			rc = ipc_send(m->ch, IPC_METRICS_END, NULL, 0);
			if (rc == 0) {
				free(m->out);
				m->out = NULL;
			}
		}
		if (rc != 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
				event_add(m->ev_write, NULL);
			else {
				/* The server is gone: its reaping restarts it. */
				free(m->out);
				m->out = NULL;
			}
			return;
		}
	}
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	pump(arg);
}

void
metrics_send(struct metrics_srv *m, json_t *const *docs, size_t n)
{
	size_t tl, ol;
	int64_t now = wall_ms();

	/* The last one still on its way (a server slow to read): this one is
	 * skipped, not queued behind it. */
	if (m->ch < 0 || m->out != NULL)
		return;
	char *text = exposition_render(docs, n, now, false, &tl);
	char *om = exposition_render(docs, n, now, true, &ol);
	if ((uint64_t)tl + ol <= IPC_METRICS_SNAPSHOT_MAX &&
	    (m->out = malloc(tl + ol)) != NULL) {
		memset(&m->out_begin, 0, sizeof(m->out_begin));
		m->out_begin.health = (uint32_t)exposition_health(docs, n, m->out_begin.reason,
		    sizeof(m->out_begin.reason));
		printable(m->out_begin.reason);
		m->out_begin.text_len = tl;
		m->out_begin.openmetrics_len = ol;
		memcpy(m->out, text, tl);
		memcpy(m->out + tl, om, ol);
		m->out_len = tl + ol;
		m->out_off = 0;
		m->out_begun = false;
	} else {
		log_warnx_limited(&m->too_big, "delivery: the metrics snapshot (%zu bytes) is over "
		    "%u; not sent", tl + ol, IPC_METRICS_SNAPSHOT_MAX);
	}
	free(text);
	free(om);
	pump(m);
}

void
metrics_end(struct metrics_srv *m)
{
	if (m->pid > 0) {
		kill(m->pid, SIGKILL);
		m->pid = 0;
	}
	drop_channel(m);
	relay_close(&m->relay);
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	m->listen_fd = -1;
	if (m->ev_tick != NULL)
		event_free(m->ev_tick);
	if (m->ev_restart != NULL)
		event_free(m->ev_restart);
	m->ev_tick = m->ev_restart = NULL;
}
