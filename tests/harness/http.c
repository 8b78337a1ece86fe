/*
 * HTTP by hand, for the tests of the metrics endpoint and Prometheus' API:
 * what a client sends (a garbage line, a head that never ends) is the
 * test's to choose, which no library client would let it.
 */
#include "tests/harness/harness.h"
#include "lib/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define H_HTTP_READ_S 10 /* an answer arrives within this */

int
h_http_dial(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { H_HTTP_READ_S, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

int
h_http_exchange(int port, const char *req, size_t reqlen, char *body, size_t bodylen,
		char *head, size_t headlen)
{
	static char buf[H_HTTP_BODY_MAX + 4096];
	size_t got = 0;
	ssize_t n;
	int fd = h_http_dial(port), status = 0;

	body[0] = '\0';
	if (head != NULL && headlen > 0)
		head[0] = '\0';
	if (fd < 0)
		return 0;
	if (write(fd, req, reqlen) != (ssize_t)reqlen) {
		close(fd);
		return 0;
	}
	while (got + 1 < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return 0;
	char *sep = strstr(buf, "\r\n\r\n");
	if (sep != NULL) {
		snprintf(body, bodylen, "%s", sep + 4);
		if (head != NULL)
			snprintf(head, headlen, "%.*s", (int)(sep - buf), buf);
	}
	return status;
}

int
h_http_get(int port, const char *path, const char *accept, char *body, size_t bodylen,
	   char *head, size_t headlen)
{
	char req[2048];
	/* The answer is read until the peer closes: it must not keep the
	 * connection open for another request (Prometheus would). */
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	    "Connection: close\r\n%s%s%s\r\n", path, accept ? "Accept: " : "",
	    accept ? accept : "", accept ? "\r\n" : "");

	if (n < 0 || (size_t)n >= sizeof(req))
		return 0;
	return h_http_exchange(port, req, (size_t)n, body, bodylen, head, headlen);
}

static int prometheus_run(const char *bin, const char *conf, const char *dir, int *port);

int
h_prometheus_start(const char *bin, const char *dir, int target, const char *rules, int *port)
{
	char conf[H_PATH_MAX * 2];
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/prometheus.yml", dir);
	if ((f = fopen(conf, "w")) == NULL)
		return -1;
	fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
	    "  evaluation_interval: 1s\n");
	if (rules != NULL)
		fprintf(f, "rule_files:\n  - %s\n", rules);
	fprintf(f, "scrape_configs:\n  - job_name: cotal-delivery\n    static_configs:\n"
	    "      - targets: ['127.0.0.1:%d']\n", target);
	if (fclose(f) != 0)
		return -1;
	return prometheus_run(bin, conf, dir, port);
}

static int
prometheus_run(const char *bin, const char *conf, const char *dir, int *port)
{
	char data[H_PATH_MAX * 2], out[H_PATH_MAX * 2], a1[H_PATH_MAX * 3], a2[H_PATH_MAX * 3];
	char listen[64], body[4096];
	pid_t prom;

	snprintf(data, sizeof(data), "%s/prometheus-data", dir);
	snprintf(out, sizeof(out), "%s/prometheus.log", dir);
	*port = h_free_port();
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", *port);
	snprintf(a1, sizeof(a1), "--config.file=%s", conf);
	snprintf(a2, sizeof(a2), "--storage.tsdb.path=%s", data);
	fflush(stdout);
	if ((prom = fork()) < 0)
		return -1;
	if (prom == 0) {
		FILE *o = freopen(out, "a", stdout);
		(void)o;
		dup2(1, 2);
		execl(bin, "prometheus", a1, a2, listen, "--log.level=warn", (char *)NULL);
		_exit(127);
	}
	h_track(prom);
	for (int64_t end = mono_ms() + 30000; mono_ms() < end; h_nap(200))
		if (h_http_get(*port, "/-/ready", NULL, body, sizeof(body), NULL, 0) == 200)
			return 0;
	fprintf(stderr, "✗ Prometheus not ready in 30 s; see %s\n", out);
	return -1;
}
