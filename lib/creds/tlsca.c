/*
 * Reading the mesh's CA (see tlsca.h).
 */
#include "lib/creds/tlsca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "lib/workspace.h"

static const char pem_begin[] = "-----BEGIN CERTIFICATE-----";
static const char pem_end[] = "-----END CERTIFICATE-----";

/* OpenSSL's words for the last failure, or a fallback. */
static const char *
ssl_why(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		snprintf(buf, len, "not a certificate");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

int
tls_ca_load(const char *path, char **pem, int *ncerts, char *err, size_t errlen)
{
	char *text, *p, why[256];
	BIO *out = NULL;
	size_t len;
	int n = 0, rc = -1;

	*pem = NULL;
	*ncerts = 0;
	if ((text = ws_read_file(path, TLS_CA_FILE_MAX, &len, err, errlen)) == NULL)
		return -1;
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s is not a PEM text file (it holds a NUL byte)", path);
		goto out;
	}
	/* A key where the CA belongs is a mistake worth stopping at: it would
	 * otherwise travel to every worker. */
	if (strstr(text, "PRIVATE KEY-----") != NULL) {
		snprintf(err, errlen, "%s holds a private key; a CA file holds certificates only",
		    path);
		goto out;
	}
	if ((out = BIO_new(BIO_s_mem())) == NULL) {
		snprintf(err, errlen, "out of memory reading %s", path);
		goto out;
	}
	for (p = strstr(text, pem_begin); p != NULL; p = strstr(p, pem_begin)) {
		char *e = strstr(p, pem_end);
		if (e == NULL) {
			snprintf(err, errlen, "%s: certificate %d has no %s line", path, n + 1, pem_end);
			goto out;
		}
		e += sizeof(pem_end) - 1;
		if (++n > TLS_CA_CERTS_MAX) {
			snprintf(err, errlen, "%s holds more than %d certificates (name the mesh's CA, "
			    "not a system bundle)", path, TLS_CA_CERTS_MAX);
			goto out;
		}
		BIO *in = BIO_new_mem_buf(p, (int)(e - p));
		X509 *x = in != NULL ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
		BIO_free(in);
		if (x == NULL) {
			snprintf(err, errlen, "%s: certificate %d does not parse: %s", path, n,
			    ssl_why(why, sizeof(why)));
			goto out;
		}
		int ok = PEM_write_bio_X509(out, x);
		X509_free(x);
		if (!ok) {
			snprintf(err, errlen, "%s: certificate %d: %s", path, n,
			    ssl_why(why, sizeof(why)));
			goto out;
		}
		p = e;
	}
	if (n == 0) {
		snprintf(err, errlen, "%s holds no PEM certificate (%s)", path, pem_begin);
		goto out;
	}
	char *data;
	long dl = BIO_get_mem_data(out, &data);
	if (dl <= 0 || (size_t)dl > TLS_CA_PEM_MAX) {
		snprintf(err, errlen, "%s: %ld bytes of certificates, over the %d-byte limit (name "
		    "the mesh's CA, not a system bundle)", path, dl, TLS_CA_PEM_MAX);
		goto out;
	}
	if ((*pem = malloc((size_t)dl + 1)) == NULL) {
		snprintf(err, errlen, "out of memory reading %s", path);
		goto out;
	}
	memcpy(*pem, data, (size_t)dl);
	(*pem)[dl] = '\0';
	*ncerts = n;
	rc = 0;
out:
	BIO_free(out);
	free(text);
	return rc;
}

int
tls_url_host(const char *url, char *host, size_t hostlen)
{
	const char *p, *end;

	if ((p = strstr(url, "://")) == NULL)
		return -1;
	p += 3;
	if (*p == '[') {
		p++;
		end = strchr(p, ']');
	} else {
		end = strrchr(p, ':');
	}
	if (end == NULL || end == p || (size_t)(end - p) >= hostlen)
		return -1;
	memcpy(host, p, (size_t)(end - p));
	host[end - p] = '\0';
	return 0;
}
