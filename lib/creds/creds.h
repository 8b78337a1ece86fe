/*
 * NATS .creds files: a user JWT and its nkey seed between armour lines.
 * The seed is secret: struct creds keeps it in memory locked with mlock and
 * wipes it in creds_free().
 */
#ifndef COTAL_CREDS_H
#define COTAL_CREDS_H

#include <stddef.h>

#define CREDS_MAX_FILE (96 * 1024)

struct creds {
	char *jwt;   /* NUL-terminated user JWT */
	char *seed;  /* NUL-terminated seed text, in mlocked memory: secret */
	size_t seed_cap;
};

/* Parse creds text. 0 on success; -1 with err naming what is wrong. */
int creds_parse(const char *text, size_t len, struct creds *out, char *err,
		size_t errlen);
/* Read and parse a creds file (refuses files over CREDS_MAX_FILE and files
 * readable by group or others). */
int creds_load(const char *path, struct creds *out, char *err, size_t errlen);
void creds_free(struct creds *c);

/* Format creds text (malloc'd; caller wipes and frees it). */
char *creds_format(const char *jwt, const char *seed);

/* Fill n bytes with zero in a way the compiler cannot drop. */
void secure_wipe(void *p, size_t n);

#endif
