/*
 * NATS subject matching, shared by every room: a channel against a read
 * ACL's pattern (lib/wire/records.h) and a bucket's key against a watch's
 * filter (lib/nats/kvheld.h). Includes nothing of the tree.
 */
#ifndef COTAL_SUBJECT_H
#define COTAL_SUBJECT_H

#include <stdbool.h>

/* Does subject match pattern, token by token ('.'-separated; '*' one
 * token, a last '>' one or more)? */
bool subject_match(const char *pattern, const char *subject);

#endif
