/* UTF-8, as far as the tree reads it: one sequence's length. Includes
 * nothing of the tree. */
#ifndef COTAL_UTF8_H
#define COTAL_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Length of the UTF-8 sequence at p (at most n bytes), and whether it
 * encodes a code point above the BMP; 0 for an invalid sequence.
 */
static inline size_t
utf8_seq(const unsigned char *p, size_t n, bool *astral)
{
	size_t len;
	uint32_t cp;

	*astral = false;
	if (p[0] >= 0xC2 && p[0] <= 0xDF)
		len = 2, cp = p[0] & 0x1F;
	else if (p[0] >= 0xE0 && p[0] <= 0xEF)
		len = 3, cp = p[0] & 0x0F;
	else if (p[0] >= 0xF0 && p[0] <= 0xF4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3F);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	*astral = cp >= 0x10000;
	return len;
}

#endif
