/*
 * Where the supervisor dials, decided before any worker starts: the server
 * list resolved to IP literals (a worker cannot resolve a name once
 * confined), and the transport the mesh demands (TLS with its CA, or
 * plaintext). Runs in the supervisor.
 */
#include "supervisor/supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds/tlsca.h"
#include "lib/log.h"
#include "lib/servers.h"

/*
 * Workers dial an IP literal (a hostname would pull NSS files and dlopen
 * into the sandbox): resolve here. Accepts nats://host:port.
 */
static int
resolve_url(const char *url, char *out, size_t outlen, uint16_t *port, char *err,
	    size_t errlen)
{
	char host[256], addr[INET6_ADDRSTRLEN];
	const char *p = url, *colon;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	long pn;

	if (strncmp(p, "nats://", 7) != 0) {
		snprintf(err, errlen, "server URL %s: only nats:// URLs are supported", url);
		return -1;
	}
	p += 7;
	if (*p == '[') {
		const char *end = strchr(p, ']');
		if (end == NULL || end[1] != ':' || (size_t)(end - p - 1) >= sizeof(host))
			goto bad;
		memcpy(host, p + 1, (size_t)(end - p - 1));
		host[end - p - 1] = '\0';
		colon = end + 1;
	} else {
		colon = strrchr(p, ':');
		if (colon == NULL || (size_t)(colon - p) >= sizeof(host))
			goto bad;
		memcpy(host, p, (size_t)(colon - p));
		host[colon - p] = '\0';
	}
	char *end;
	pn = strtol(colon + 1, &end, 10);
	if (pn < 1 || pn > 65535 || (*end != '\0' && *end != '/'))
		goto bad;
	int gai = getaddrinfo(host, NULL, &hints, &res);
	if (gai != 0) {
		snprintf(err, errlen, "server %s: cannot resolve %s: %s", url, host, gai_strerror(gai));
		return -1;
	}
	if (res->ai_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, addr, sizeof(addr));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, addr, sizeof(addr));
	snprintf(out, outlen, res->ai_family == AF_INET6 ? "nats://[%s]:%ld" : "nats://%s:%ld",
	    addr, pn);
	freeaddrinfo(res);
	*port = (uint16_t)pn;
	return 0;
bad:
	snprintf(err, errlen, "server URL %s: expected nats://host:port", url);
	return -1;
}

/*
 * The server list: one nats:// URL, or every node of a cluster
 * comma-separated, each resolved here. out gets the IP-literal list the
 * connections dial, ports[] each one's port (for the workers' Landlock
 * rules). 0, or -1 with err naming the URL that is wrong.
 */
int
resolve_servers(const char *list, char *out, size_t outlen, uint16_t *ports, char *err,
		size_t errlen)
{
	char one[IPC_URL_MAX], ip[IPC_URL_MAX / 4];
	const char *cursor = list, *u;
	size_t len;
	int n = 0;

	if (strlen(list) >= IPC_URL_MAX) {
		snprintf(err, errlen, "server list %.64s…: longer than %d bytes", list,
		    IPC_URL_MAX - 1);
		return -1;
	}
	out[0] = '\0';
	while ((len = servers_next(&cursor, &u)) > 0) {
		if (n == IPC_SERVERS_MAX) {
			snprintf(err, errlen, "server list %s: more than %d servers", list,
			    IPC_SERVERS_MAX);
			return -1;
		}
		snprintf(one, sizeof(one), "%.*s", (int)len, u);
		if (resolve_url(one, ip, sizeof(ip), &ports[n], err, errlen) != 0)
			return -1;
		if (servers_has(out, ip, strlen(ip))) {
			snprintf(err, errlen, "server list %s: %s is listed twice", list, one);
			return -1;
		}
		if (!servers_append(out, outlen, ip)) {
			snprintf(err, errlen, "server list %.64s…: the resolved list is longer than "
			    "%zu bytes", list, outlen - 1);
			return -1;
		}
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "server list \"%s\": no server URL", list);
		return -1;
	}
	return 0;
}

_Static_assert(TLS_CA_PEM_MAX <= IPC_MAX_PAYLOAD, "the CA travels in one IPC_TLS_CA frame");

/*
 * The mesh's transport, decided once per launch (seed: "A TLS-required mesh
 * always starts it with TLS demanded, so it refuses a plaintext listener
 * rather than upgrading on the server's unauthenticated greeting"). `why`
 * names what demands TLS (--tls, --tls-ca, the registry's tlsRequired), NULL
 * when nothing does. [decision] The CA is --tls-ca, else the registry
 * record's "tlsCa" (an absolute path), and one is required: confined
 * workers cannot read the system's trust store. It is read here, before any
 * worker starts, and reaches each worker over IPC (IPC_TLS_CA).
 * 0 with S.tls_host and S.tls_ca set when TLS is demanded; -1 with err.
 */
int
transport(struct sup *s, const char *why, const char *ca_opt, const char *url, char *err, size_t errlen)
{
	char reg_ca[WS_PATH_MAX];
	const char *ca = ca_opt;
	int ncerts;

	if (ws_registry_tls_ca(s->space, reg_ca, sizeof(reg_ca), err, errlen) != 0)
		return -1;
	if (why == NULL)
		return 0;
	if (ca == NULL && reg_ca[0] != '\0')
		ca = reg_ca;
	if (ca == NULL) {
		snprintf(err, errlen, "the mesh of space %s demands TLS (%s), and no CA to verify "
		    "the broker with is given (--tls-ca FILE, or \"tlsCa\" in the mesh registry "
		    "record); refusing to dial in plaintext", s->space, why);
		return -1;
	}
	/* [decision] One name for every node: the first listed URL's host
	 * (a cluster's certificates carry it, e.g. as a shared SAN). */
	char first[IPC_URL_MAX];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(url, ","), url);
	if (tls_url_host(first, s->tls_host, sizeof(s->tls_host)) != 0) {
		snprintf(err, errlen, "server URL %s: no host name to verify the broker as", first);
		return -1;
	}
	if (tls_ca_load(ca, &s->tls_ca, &ncerts, err, errlen) != 0)
		return -1;
	log_info("delivery: TLS demanded (%s): the broker must prove itself as %s with the CA "
	    "%s (%d certificate%s); a plaintext listener is refused", why, s->tls_host, ca, ncerts,
	    ncerts == 1 ? "" : "s");
	return 0;
}

