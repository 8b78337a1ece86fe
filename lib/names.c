/*
 * A space's names (WIRE.md §1 and §8): its routing token and its key, as
 * every Cotal client derives them. Pure functions, no allocation.
 */
#include "lib/names.h"
#include "lib/utf8.h"

#include <stdint.h>
#include <string.h>

/*
 * The reference clients rewrite a JavaScript string, one UTF-16 code unit
 * at a time: a character of the Basic Multilingual Plane becomes one "_",
 * one beyond it (a surrogate pair) two. An invalid byte counts as one
 * character. Interoperability depends on matching that exactly.
 */
bool
space_token(const char *name, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)name;
	size_t n = strlen(name), o = 0;

	if (n == 0) {
		if (outlen < 2)
			return false;
		strcpy(out, "_");
		return true;
	}
	for (size_t i = 0; i < n; ) {
		size_t units = 1, step = 1;
		char c = '_';
		if (name_token_char(p[i]))
			c = (char)p[i];
		else if (p[i] >= 0x80) {
			bool astral;
			size_t len = utf8_seq(p + i, n - i, &astral);
			if (len > 0) {
				step = len;
				units = astral ? 2 : 1;
			}
		}
		if (o + units + 1 > outlen)
			return false;
		for (size_t u = 0; u < units; u++)
			out[o++] = c;
		i += step;
	}
	out[o] = '\0';
	return true;
}

bool
space_key(const char *name, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(name);

	if (2 * n + 1 > outlen)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		out[2 * i] = hex[c >> 4];
		out[2 * i + 1] = hex[c & 15];
	}
	out[2 * n] = '\0';
	return true;
}
