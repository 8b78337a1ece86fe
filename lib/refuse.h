/*
 * Saying why: the one way code that takes untrusted bytes or talks to a
 * broker fills its caller's error buffer (parsers, credentials, the IPC
 * catalogue, provisioning), and a bounded token copy for the parsers.
 * Includes nothing of the tree.
 */
#ifndef COTAL_REFUSE_H
#define COTAL_REFUSE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Say why into err (when given). */
static inline void __attribute__((format(printf, 3, 0)))
vseterr(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err != NULL && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
}

static inline void __attribute__((format(printf, 3, 4)))
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vseterr(err, errlen, fmt, ap);
	va_end(ap);
}

/* The same, for a refusal: always -1. */
static inline int __attribute__((format(printf, 3, 4)))
refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vseterr(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Copy the token [p, p+n) into out (size outlen) if it fits. */
static inline bool
take(const char *p, size_t n, char *out, size_t outlen)
{
	if (n == 0 || n >= outlen)
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

#endif
