/* A message's header block as bytes (see rawhdr.h). */
#include "lib/nats/rawhdr.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libnats 3.4.1's own constructor (src/msg.h): the message it makes of a
 * received HMSG, its header block the first hdrLen bytes of buf. */
natsStatus natsMsg_create(natsMsg **newMsg, const char *subject, int subjLen, const char *reply,
			  int replyLen, const char *buf, int bufLen, int hdrLen);

#define LAYOUT_VERSION 0x030401 /* the libnats whose src/msg.c this reads */
#define HDR_LINE "NATS/1.0\r\n"
#define HDR_LINE_LEN 10

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool usable;

/*
 * The block of a message made by natsMsg_create: after the subject's and
 * the reply's NUL, up to the NUL before the data. NULL when the message's
 * bytes are not laid out so (then no block of the plain form is found).
 */
static const char *
block_of(natsMsg *m, size_t *len)
{
	const char *subj = natsMsg_GetSubject(m), *reply = natsMsg_GetReply(m);
	const char *data = natsMsg_GetData(m);
	const char *hdr = reply != NULL ? reply + strlen(reply) + 1 : subj + strlen(subj) + 1;

	if (data == NULL || hdr >= data || (size_t)(data - hdr) > (size_t)INT32_MAX ||
	    (size_t)(data - hdr) < HDR_LINE_LEN + 3 || data[-1] != '\0')
		return NULL;
	*len = (size_t)(data - hdr) - 1;
	if (memcmp(hdr, HDR_LINE, HDR_LINE_LEN) != 0 || memcmp(hdr + *len - 4, "\r\n\r\n", 4) != 0)
		return NULL;
	return hdr;
}

/* Read the block as libnats 3.4.1 would (src/msg.c _processKeyValue), for
 * the lines of the plain form "Key: value\r\n"; -1 for anything else. */
static int
block_get(const char *hdr, size_t len, const char *name, const char **v, size_t *vl)
{
	const char *p = hdr + HDR_LINE_LEN, *end = hdr + len - 2; /* before the blank line */
	size_t nl = strlen(name);
	int found = 0;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL || eol == p || eol[-1] != '\r' || *p == ' ' || *p == '\t')
			return -1; /* no CRLF, or a folded line */
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		if (colon == NULL || colon == p || memchr(p, '\r', (size_t)(eol - 1 - p)) != NULL)
			return -1;
		const char *a = colon + 1, *b = eol - 1;
		while (a < b && isspace((unsigned char)*a))
			a++;
		while (b > a && isspace((unsigned char)b[-1]))
			b--;
		if (a == b)
			return -1; /* no value: libnats refuses the whole block */
		/* The first of its name (libnats chains the others behind it);
		 * the lines after it are read too: one libnats refuses fails
		 * its whole block. */
		if (!found && (size_t)(colon - p) == nl && memcmp(p, name, nl) == 0) {
			*v = a;
			*vl = (size_t)(b - a);
			found = 1;
		}
		p = eol + 1;
	}
	return found;
}

/* What this reads and writes, checked on one message through the public
 * API: the block is where it is looked for, and libnats reads it so. */
static void
self_test(void)
{
	static const char buf[] = HDR_LINE "A: 1\r\nB:  two \r\n\r\nd";
	size_t hl = sizeof(buf) - 2, len = 0, vl = 0;
	const char *hdr, *v = NULL, *a = NULL, *b = NULL;
	natsMsg *m = NULL;

	/* Opened already by the worker's connection; here for a caller
	 * without one (its messages are freed on the library's thread). */
	if (nats_GetVersionNumber() != LAYOUT_VERSION || nats_Open(-1) != NATS_OK ||
	    natsMsg_create(&m, "x", 1, "y", 1, buf, (int)sizeof(buf) - 1, (int)hl) != NATS_OK)
		return;
	usable = (hdr = block_of(m, &len)) != NULL && len == hl &&
	    block_get(hdr, len, "B", &v, &vl) == 1 && vl == 3 && memcmp(v, "two", 3) == 0 &&
	    natsMsg_GetDataLength(m) == 1 && natsMsg_GetData(m)[0] == 'd' &&
	    natsMsgHeader_Get(m, "A", &a) == NATS_OK && a != NULL && strcmp(a, "1") == 0 &&
	    natsMsgHeader_Get(m, "B", &b) == NATS_OK && b != NULL && strcmp(b, "two") == 0;
	natsMsg_Destroy(m);
}

bool
rawhdr_usable(void)
{
	pthread_once(&once, self_test);
	return usable;
}

int
rawhdr_get(natsMsg *m, const char *name, const char **v, size_t *vl)
{
	const char *hdr;
	size_t len;

	if (!rawhdr_usable() || (hdr = block_of(m, &len)) == NULL)
		return -1;
	return block_get(hdr, len, name, v, vl);
}

int
rawhdr_value(natsMsg *m, const char *name, const char **v, size_t *vl)
{
	int in_place = rawhdr_get(m, name, v, vl);

	if (in_place >= 0)
		return in_place;
	if (natsMsgHeader_Get(m, name, v) != NATS_OK || *v == NULL)
		return 0;
	*vl = strlen(*v);
	return 1;
}

/* Append s, each CR or LF written as a space (src/msg.c
 * natsMsgHeader_encode does so to values). */
static bool
put(char *out, size_t *at, const char *s, size_t n, bool value)
{
	if (*at + n > RAWHDR_MAX)
		return false;
	memcpy(out + *at, s, n);
	if (value && strpbrk(s, "\r\n") != NULL)
		for (size_t i = 0; i < n; i++)
			if (out[*at + i] == '\r' || out[*at + i] == '\n')
				out[*at + i] = ' ';
	*at += n;
	return true;
}

size_t
rawhdr_encode(char *out, const char *const *names, const char *const *values, int n)
{
	size_t at = 0;
	bool ok = put(out, &at, HDR_LINE, HDR_LINE_LEN, false);

	for (int i = 0; ok && i < n; i++)
		ok = put(out, &at, names[i], strlen(names[i]), false) && put(out, &at, ": ", 2, false) &&
		    put(out, &at, values[i], strlen(values[i]), true) && put(out, &at, "\r\n", 2, false);
	ok = ok && put(out, &at, "\r\n", 2, false);
	return ok ? at : 0;
}

bool
rawhdr_first(const char *a, const char *b)
{
	natsMsg *m = NULL;
	const char **keys = NULL;
	int n = 0;
	bool first = true;

	if (natsMsg_Create(&m, "x", NULL, NULL, 0) == NATS_OK && natsMsgHeader_Set(m, a, "1") ==
	    NATS_OK && natsMsgHeader_Set(m, b, "1") == NATS_OK &&
	    natsMsgHeader_Keys(m, &keys, &n) == NATS_OK && n == 2)
		first = strcmp(keys[0], a) == 0;
	free(keys);
	natsMsg_Destroy(m);
	return first;
}

natsStatus
rawhdr_msg(natsMsg **m, const char *subj, const char *reply, const char *buf, size_t hlen,
	   size_t len)
{
	return natsMsg_create(m, subj, (int)strlen(subj), reply, reply ? (int)strlen(reply) : 0, buf,
	    (int)(hlen + len), (int)hlen);
}
