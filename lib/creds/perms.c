/*
 * A user JWT's permissions and NATS subject matching (see perms.h).
 */
#include "lib/creds/perms.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dir_name[2] = { "pub", "sub" };

/* The next token of *s (advanced past it and its dot): its start and
 * length, or NULL at the end. */
static const char *
token(const char **s, size_t *len)
{
	const char *t = *s, *dot;

	if (t == NULL)
		return NULL;
	dot = strchr(t, '.');
	*len = dot != NULL ? (size_t)(dot - t) : strlen(t);
	*s = dot != NULL ? dot + 1 : NULL;
	return t;
}

static bool
is(const char *t, size_t len, const char *what)
{
	return len == strlen(what) && memcmp(t, what, len) == 0;
}

bool
subject_covers(const char *pattern, const char *s)
{
	const char *p = pattern, *q = s, *pt, *st;
	size_t pl, sl;

	for (;;) {
		pt = token(&p, &pl);
		st = token(&q, &sl);
		if (pt == NULL || st == NULL)
			return pt == NULL && st == NULL;
		if (is(pt, pl, ">"))
			return true;
		if (is(st, sl, ">"))
			return false;
		if (is(pt, pl, "*"))
			continue;
		if (is(st, sl, "*") || pl != sl || memcmp(pt, st, pl) != 0)
			return false;
	}
}

bool
subject_overlaps(const char *a, const char *b)
{
	const char *p = a, *q = b, *at, *bt;
	size_t al, bl;

	for (;;) {
		at = token(&p, &al);
		bt = token(&q, &bl);
		if (at == NULL || bt == NULL)
			return at == NULL && bt == NULL;
		if (is(at, al, ">") || is(bt, bl, ">"))
			return true;
		if (is(at, al, "*") || is(bt, bl, "*"))
			continue;
		if (al != bl || memcmp(at, bt, al) != 0)
			return false;
	}
}

/* A grant as nats-server would take it: tokens non-empty, no spaces, a '>'
 * only last. */
static bool
subject_valid(const char *s)
{
	const char *p = s, *t;
	size_t len;

	if (*s == '\0' || strlen(s) >= PERMS_SUBJECT_MAX)
		return false;
	while ((t = token(&p, &len)) != NULL) {
		if (len == 0 || (is(t, len, ">") && p != NULL))
			return false;
		for (size_t i = 0; i < len; i++)
			if (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n')
				return false;
	}
	return true;
}

static int
read_list(const struct jwt *j, enum perms_dir d, const char *which, struct perms_list *l,
	  bool *present, char *err, size_t errlen)
{
	json_t *a = jwt_user_list(j, dir_name[d], which), *v;
	size_t i;

	l->v = NULL;
	l->n = 0;
	if (present != NULL)
		*present = a != NULL && json_array_size(a) > 0;
	if (a == NULL || json_array_size(a) == 0)
		return 0;
	if (json_array_size(a) > PERMS_LIST_MAX) {
		snprintf(err, errlen, "nats.%s.%s: %zu entries, at most %d", dir_name[d], which,
		    json_array_size(a), PERMS_LIST_MAX);
		return -1;
	}
	if ((l->v = calloc(json_array_size(a), sizeof(char *))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);
		if (s == NULL || !subject_valid(s)) {
			snprintf(err, errlen, "nats.%s.%s[%zu]: not a subject", dir_name[d], which, i);
			return -1;
		}
		if ((l->v[l->n] = strdup(s)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		l->n++;
	}
	return 0;
}

int
perms_from_jwt(const struct jwt *j, struct perms *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	if (j == NULL || j->kind != JWT_USER) {
		snprintf(err, errlen, "not a user JWT");
		return -1;
	}
	for (int d = PERMS_PUB; d <= PERMS_SUB; d++)
		if (read_list(j, d, "allow", &p->allow[d], &p->has_allow[d], err, errlen) != 0 ||
		    read_list(j, d, "deny", &p->deny[d], NULL, err, errlen) != 0) {
			perms_free(p);
			return -1;
		}
	return 0;
}

static void
list_free(struct perms_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void
perms_free(struct perms *p)
{
	for (int d = 0; d < 2; d++) {
		list_free(&p->allow[d]);
		list_free(&p->deny[d]);
	}
}

bool
perms_grant(const struct perms *p, enum perms_dir d, const char *need, const char **deny_hit)
{
	bool allowed = !p->has_allow[d];

	*deny_hit = NULL;
	for (size_t i = 0; i < p->allow[d].n && !allowed; i++)
		allowed = subject_covers(p->allow[d].v[i], need);
	if (!allowed)
		return false;
	for (size_t i = 0; i < p->deny[d].n; i++)
		if (subject_overlaps(p->deny[d].v[i], need)) {
			*deny_hit = p->deny[d].v[i];
			return false;
		}
	return true;
}

int
perms_reply_inbox(const struct perms *p, char *out, size_t outlen, char *err, size_t errlen)
{
	const struct perms_list *l = &p->allow[PERMS_SUB];
	const char *hit;

	if (!p->has_allow[PERMS_SUB]) {
		snprintf(out, outlen, "_INBOX");
		return 0;
	}
	for (size_t i = 0; i < l->n; i++) {
		const char *s = l->v[i];
		size_t n = strlen(s);
		if (strncmp(s, "_INBOX", 6) != 0 || n < 8 || strcmp(s + n - 2, ".>") != 0)
			continue;
		if (n - 2 >= outlen || strchr(s, '*') != NULL || memchr(s, '>', n - 1) != NULL)
			continue;
		memcpy(out, s, n - 2);
		out[n - 2] = '\0';
		if (!perms_grant(p, PERMS_SUB, s, &hit))
			continue;
		return 0;
	}
	/* No entry of its own, but a wider grant (">", "_INBOX.>" under a
	 * wildcard) still lets nats.c's own "_INBOX" through. */
	if (perms_grant(p, PERMS_SUB, "_INBOX.>", &hit)) {
		snprintf(out, outlen, "_INBOX");
		return 0;
	}
	snprintf(err, errlen, "the credential may subscribe to no reply inbox (its sub.allow has "
	    "no \"_INBOX….>\" entry)");
	return -1;
}

int
jwt_reply_inbox(const char *jwt, char *out, size_t outlen, char *err, size_t errlen)
{
	struct jwt j;
	struct perms p;
	char why[512];
	int rc;

	if (jwt_decode(jwt, strlen(jwt), &j, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "credential: %s", why);
		return -1;
	}
	if (perms_from_jwt(&j, &p, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "credential: %s", why);
		jwt_free(&j);
		return -1;
	}
	rc = perms_reply_inbox(&p, out, outlen, why, sizeof(why));
	if (rc != 0)
		snprintf(err, errlen, "credential: %s", why);
	perms_free(&p);
	jwt_free(&j);
	return rc;
}

/*
 * ">" itself, or any pattern whose first token is a wildcard ("*", "*.>",
 * "*.*.>"): those reach every subject tree, which no least-privilege
 * credential needs.
 */
static bool
list_has_all(json_t *list, const char **which)
{
	size_t i;
	json_t *v;

	json_array_foreach(list, i, v) {
		const char *p = json_string_value(v);
		if (p == NULL)
			continue;
		if (strcmp(p, ">") == 0 || strcmp(p, "*") == 0 || strncmp(p, "*.", 2) == 0 ||
		    strncmp(p, ">.", 2) == 0) {
			*which = p;
			return true;
		}
	}
	return false;
}

bool
jwt_allow_all(const struct jwt *j, char *why, size_t whylen)
{
	json_t *pa = jwt_user_list(j, "pub", "allow");
	json_t *sa = jwt_user_list(j, "sub", "allow");

	if (j->kind != JWT_USER) {
		snprintf(why, whylen, "not a user JWT");
		return true;
	}
	const char *which = NULL;
	if (list_has_all(pa, &which)) {
		snprintf(why, whylen, "its publish allow list contains \"%s\"", which);
		return true;
	}
	if (list_has_all(sa, &which)) {
		snprintf(why, whylen, "its subscribe allow list contains \"%s\"", which);
		return true;
	}
	/* No allow list at all: NATS then allows everything not denied. */
	if (json_array_size(pa) == 0 || json_array_size(sa) == 0) {
		snprintf(why, whylen, "it has no %s permissions (no allow list means allow-all)",
		    json_array_size(pa) == 0 ? "publish" : "subscribe");
		return true;
	}
	return false;
}

