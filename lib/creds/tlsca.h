/*
 * The CA a TLS-demanding mesh connection verifies its broker with.
 *
 * A confined worker can open no file, so the supervisor reads the CA file
 * once, before any worker starts, and hands each worker the certificates
 * as text (IPC_TLS_CA); nats.c then takes them from memory
 * (natsOptions_SetCATrustedCertificates).
 */
#ifndef COTAL_TLSCA_H
#define COTAL_TLSCA_H

#include <stddef.h>

#define TLS_CA_FILE_MAX (256 * 1024) /* the file read: a mesh CA, not a system bundle */
#define TLS_CA_PEM_MAX (64 * 1024)   /* its certificates re-encoded: one IPC frame */
#define TLS_CA_CERTS_MAX 16

/*
 * Read the PEM file at path: every "CERTIFICATE" block is parsed (OpenSSL)
 * and re-encoded; other text (comments of a bundle) is skipped. Refused: a
 * file over TLS_CA_FILE_MAX, one holding a private key, no certificate, a
 * block that does not parse, more than TLS_CA_CERTS_MAX certificates or
 * over TLS_CA_PEM_MAX bytes of them. 0 with *pem (malloc'd, NUL-terminated:
 * certificate blocks only, the form IPC_TLS_CA carries) and *ncerts, or -1
 * with err.
 */
int tls_ca_load(const char *path, char **pem, int *ncerts, char *err, size_t errlen);

/*
 * The host of a nats://host:port URL (brackets of an IPv6 literal
 * removed): the name the broker's certificate must carry. 0, or -1.
 */
int tls_url_host(const char *url, char *host, size_t hostlen);

#endif
