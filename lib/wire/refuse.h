/*
 * Two helpers of the parsers that take untrusted bytes (records.c,
 * ctlreq.c): a refusal that names what is wrong, and a bounded token copy.
 */
#ifndef COTAL_REFUSE_H
#define COTAL_REFUSE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Say why into why (when given); always -1. */
static inline int __attribute__((format(printf, 3, 4)))
refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why != NULL && whylen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
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
