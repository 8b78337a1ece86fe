/*
 * A space's names (WIRE.md §1 and §8): the routing token its subjects
 * carry and the key its files and buckets are named by. Shared by every
 * room (the workspace, the manifest, the wire contract): includes nothing
 * of the tree.
 */
#ifndef COTAL_NAMES_H
#define COTAL_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define SPACE_NAME_MAX 256
#define SPACE_TOKEN_MAX SPACE_NAME_MAX      /* one char per input byte */
#define SPACE_KEY_MAX (2 * SPACE_NAME_MAX)  /* hex of the UTF-8 bytes */

/* Space/routing token: every byte outside [A-Za-z0-9_-] becomes '_'; empty
 * becomes "_". Returns false when out is too small. */
bool space_token(const char *name, char *out, size_t outlen);
/* <key>: lowercase hex of the space name's bytes. false when too small. */
bool space_key(const char *name, char *out, size_t outlen);

/* A byte a token may carry as it is: [A-Za-z0-9_-]. */
static inline bool
name_token_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

#endif
