/*
 * Base64 digits, shared by every room: the URL-safe alphabet of JWTs
 * (lib/creds/jwt.c) and the standard one of JetStream's stored-message
 * answers (lib/nats/msgget.c). Includes nothing of the tree.
 */
#ifndef COTAL_BASE64_H
#define COTAL_BASE64_H

#include <stdbool.h>

/* The value of c in the standard alphabet ('+', '/') or, when url, the
 * URL-safe one ('-', '_'); -1 when it is none of its digits. */
int base64_digit(unsigned char c, bool url);

#endif
