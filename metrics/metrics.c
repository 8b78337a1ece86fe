/*
 * The metrics server's process (metrics/metrics.h says what it may do):
 * one thread and one poll over its channel, its listening socket and its
 * connections.
 */
#include "metrics/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "metrics/http.h"
#include "sandbox/sandbox.h"

#define TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define OPENMETRICS_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* A snapshot: both renderings, back to back, and what /healthz says. */
struct snapshot {
	char *data;
	size_t text_len, om_len, filled;
	int health;
	char reason[IPC_METRICS_REASON_MAX];
	bool have;
};

struct conn {
	int fd;                  /* -1: free */
	int64_t moved, deadline; /* moved: accepted, or the last byte read or written */
	bool writing;
	size_t in;
	char head[HTTP_HEAD_MAX + 1];
	char *out;
	size_t outlen, outoff;
};

static struct snapshot cur, pend;
static struct conn conns[METRICS_CONNS_MAX];

static void
conn_close(struct conn *c)
{
	if (c->fd >= 0) {
		shutdown(c->fd, SHUT_RDWR);
		close(c->fd);
	}
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* The answer: head and body in one buffer, written as the socket takes it. */
static void
answer(struct conn *c, int status, const char *type, const char *body, size_t blen, bool head)
{
	char hdr[256];
	int hl = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
	    status, http_reason(status), type, blen);
	size_t total = (size_t)hl + (head ? 0 : blen);

	if ((c->out = malloc(total)) == NULL) {
		conn_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)hl);
	if (!head)
		memcpy(c->out + hl, body, blen);
	c->outlen = total;
	c->outoff = 0;
	c->writing = true;
	c->deadline = mono_ms() + METRICS_WRITE_MS;
}

static void
answer_text(struct conn *c, int status, const char *line, bool head)
{
	char body[IPC_METRICS_REASON_MAX + 64];
	int n = snprintf(body, sizeof(body), "%s\n", line);

	answer(c, status, "text/plain; charset=utf-8", body, (size_t)n, head);
}

static void
serve(struct conn *c, const struct http_request *req)
{
	switch (req->path) {
	case HTTP_PATH_METRICS:
		if (!cur.have) {
			answer_text(c, 503, "no metrics yet: the daemon has sent no snapshot", req->head);
		} else if (req->openmetrics) {
			answer(c, 200, OPENMETRICS_TYPE, cur.data + cur.text_len, cur.om_len, req->head);
		} else {
			answer(c, 200, TEXT_TYPE, cur.data, cur.text_len, req->head);
		}
		break;
	case HTTP_PATH_HEALTHZ:
		if (!cur.have)
			answer_text(c, 503, "starting: the daemon has sent no state yet", req->head);
		else
			answer_text(c, cur.health, cur.reason, req->head);
		break;
	case HTTP_PATH_OTHER:
		answer_text(c, 404, "not found: this server answers /metrics and /healthz",
		    req->head);
		break;
	}
}

static void
on_readable(struct conn *c)
{
	struct http_request req;
	char why[128];
	ssize_t n = read(c->fd, c->head + c->in, sizeof(c->head) - c->in);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->in += (size_t)n;
	c->moved = mono_ms();
	switch (http_parse(c->head, c->in, &req, why, sizeof(why))) {
	case HTTP_MORE:
		break;
	case HTTP_OK:
		serve(c, &req);
		break;
	case HTTP_BAD:
		answer_text(c, req.status, why, false);
		break;
	}
}

static void
on_writable(struct conn *c)
{
	ssize_t n = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->outoff += (size_t)n;
	c->moved = mono_ms();
	if (c->outoff == c->outlen)
		conn_close(c);
}

/* A free slot, else the slot of the connection that has gone longest
 * without a byte in or out, closed: a client that never finishes its
 * request and one that never reads its answer alike (issue 41, finding 5).
 * A new connection always gets a slot, so clients that hold every slot
 * still cannot keep a scrape out; one that reads keeps its slot against
 * those that do not. */
static struct conn *
slot(void)
{
	struct conn *stalest = NULL;

	for (int i = 0; i < METRICS_CONNS_MAX; i++) {
		if (conns[i].fd < 0)
			return &conns[i];
		if (stalest == NULL || conns[i].moved < stalest->moved)
			stalest = &conns[i];
	}
	conn_close(stalest);
	return stalest;
}

static void
on_accept(int lfd)
{
	for (int k = 0; k < METRICS_CONNS_MAX; k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN: none waiting; another error: the next poll */
		struct conn *c = slot();
		c->fd = fd;
		c->moved = mono_ms();
		c->deadline = c->moved + METRICS_READ_MS;
	}
}

/* 0, 1 when the parent closed the channel; a protocol error is fatal. */
static int
on_channel(int ch)
{
	static uint8_t buf[IPC_MAX_FRAME];
	struct ipc_msg m;
	struct ipc_metrics_begin b;
	char err[256];
	int r = ipc_recv(ch, buf, IPC_TO_WORKER, &m, err, sizeof(err));

	if (r == 0)
		return 1;
	if (r < 0) {
		if (err[0] == '\0' && (errno == EAGAIN || errno == EINTR))
			return 0;
		fatalx("%s", err[0] != '\0' ? err : "ipc: the channel failed");
	}
	switch (m.type) {
	case IPC_METRICS_BEGIN:
		memcpy(&b, m.payload, sizeof(b));
		free(pend.data);
		memset(&pend, 0, sizeof(pend));
		if ((pend.data = malloc(b.text_len + b.openmetrics_len + 1)) == NULL)
			fatalx("out of memory");
		pend.text_len = b.text_len;
		pend.om_len = b.openmetrics_len;
		pend.health = (int)b.health;
		memcpy(pend.reason, b.reason, sizeof(pend.reason));
		pend.have = true;
		break;
	case IPC_METRICS_PART:
		if (!pend.have || m.len > pend.text_len + pend.om_len - pend.filled)
			fatalx("ipc: METRICS_PART of %u bytes past the snapshot BEGIN announced",
			    (unsigned)m.len);
		memcpy(pend.data + pend.filled, m.payload, m.len);
		pend.filled += m.len;
		break;
	case IPC_METRICS_END:
		if (!pend.have || pend.filled != pend.text_len + pend.om_len)
			fatalx("ipc: METRICS_END after %zu bytes of a snapshot of %zu", pend.filled,
			    pend.text_len + pend.om_len);
		free(cur.data);
		cur = pend;
		memset(&pend, 0, sizeof(pend));
		break;
	default:
		fatalx("ipc: %s is no message for the metrics server", ipc_type_name(m.type));
	}
	return 0;
}

static void
confine(int argc, char **argv)
{
	struct sandbox_opts so = { .role = SANDBOX_METRICS };
	char err[512];

	if (argc != 6)
		fatalx("usage: cotal-deliveryd --metrics-process UID GID DROP SECCOMP_LOG");
	so.uid = (uid_t)strtoul(argv[2], NULL, 10);
	so.gid = (gid_t)strtoul(argv[3], NULL, 10);
	so.drop = strcmp(argv[4], "1") == 0;
	so.seccomp_log = strcmp(argv[5], "1") == 0;
	pid_t parent = getppid();
	if (sandbox_confine(&so, err, sizeof(err)) != 0)
		fatalx("cannot confine the metrics server: %s", err);
	/* A credential change clears the parent-death signal. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		fatalx("the daemon is gone");
}

int
metrics_main(int argc, char **argv)
{
	struct pollfd pfd[2 + METRICS_CONNS_MAX];
	int idx[2 + METRICS_CONNS_MAX];

	log_init("delivery metrics", stderr);
	log_stamp(log_stream_wants_stamp(2), false);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	prctl(PR_SET_NAME, "metrics");
	for (int i = 0; i < METRICS_CONNS_MAX; i++)
		conns[i].fd = -1;
	int fl = fcntl(METRICS_FD_LISTEN, F_GETFL);
	if (fl < 0 || fcntl(METRICS_FD_LISTEN, F_SETFL, fl | O_NONBLOCK) < 0)
		fatal("the listening socket (fd %d)", METRICS_FD_LISTEN);
	confine(argc, argv);

	for (;;) {
		int64_t now = mono_ms(), wait = -1;
		nfds_t n = 0;

		for (int i = 0; i < METRICS_CONNS_MAX; i++) {
			if (conns[i].fd >= 0 && conns[i].deadline <= now)
				conn_close(&conns[i]);
			if (conns[i].fd < 0)
				continue;
			if (wait < 0 || conns[i].deadline - now < wait)
				wait = conns[i].deadline - now;
			pfd[n] = (struct pollfd){ .fd = conns[i].fd,
				.events = conns[i].writing ? POLLOUT : POLLIN };
			idx[n++] = i;
		}
		pfd[n] = (struct pollfd){ .fd = METRICS_FD_CHANNEL, .events = POLLIN };
		idx[n++] = -1;
		pfd[n] = (struct pollfd){ .fd = METRICS_FD_LISTEN, .events = POLLIN };
		idx[n++] = -2;
		if (poll(pfd, n, (int)(wait < 0 ? -1 : wait + 1)) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		for (nfds_t k = 0; k < n; k++) {
			if (pfd[k].revents == 0)
				continue;
			if (idx[k] == -1) {
				if (on_channel(METRICS_FD_CHANNEL) != 0)
					goto out;
			} else if (idx[k] == -2) {
				on_accept(METRICS_FD_LISTEN);
			} else if (conns[idx[k]].fd == pfd[k].fd) {
				struct conn *c = &conns[idx[k]];
				if (pfd[k].revents & (POLLERR | POLLNVAL))
					conn_close(c);
				else if (c->writing)
					on_writable(c);
				else
					on_readable(c);
			}
		}
	}
out:
	for (int i = 0; i < METRICS_CONNS_MAX; i++)
		conn_close(&conns[i]);
	free(cur.data);
	free(pend.data);
	return 0;
}
