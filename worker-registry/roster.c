/*
 * The servers one eviction scan must hear from (roster.h).
 */
#include "worker-registry/roster.h"

#include <stdio.h>
#include <string.h>

#define NAMES_MAX 200  /* the names a note lists (cut to fit) */

void
roster_init(struct roster *r, int expect)
{
	memset(r, 0, sizeof(*r));
	r->expect = expect < 1 ? 1 : expect > SWEEP_SERVERS_MAX ? SWEEP_SERVERS_MAX : expect;
}

int
roster_find(const struct roster *r, const char *id)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->s[i].id, id) == 0)
			return i;
	return -1;
}

int
roster_add(struct roster *r, const struct connz_page *p, bool *added)
{
	struct roster_server *s;
	int i = roster_find(r, p->server_id);

	*added = false;
	if (i >= 0)
		return i;
	if (r->n == SWEEP_SERVERS_MAX) {
		r->overflow++;
		return -1;
	}
	s = &r->s[r->n];
	memset(s, 0, sizeof(*s));
	memcpy(s->id, p->server_id, sizeof(s->id));
	memcpy(s->name, p->server_name, sizeof(s->name));
	memcpy(s->version, p->version, sizeof(s->version));
	s->clustered = p->clustered;
	*added = true;
	return r->n++;
}

enum roster_wait
roster_waiting(const struct roster *r)
{
	if (r->n + r->overflow < r->expect)
		return ROSTER_WAIT;
	if (r->overflow > 0)
		return ROSTER_DONE;  /* no room for more anyway */
	for (int i = 0; i < r->n; i++)
		if (r->s[i].clustered)
			return ROSTER_GRACE;
	return ROSTER_DONE;
}

bool
roster_complete(const struct roster *r)
{
	if (r->n < r->expect || r->overflow > 0)
		return false;
	for (int i = 0; i < r->n; i++)
		if (!r->s[i].complete)
			return false;
	return true;
}

static bool
answered(const struct roster *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->s[i].name, name) == 0)
			return true;
	return false;
}

void
roster_missing(const struct roster *r, const struct roster_seen *seen, char *note, size_t len)
{
	char names[NAMES_MAX] = "";
	int nmissing = 0;

	note_say(note, len, "%s", "");
	if (r->overflow > 0) {
		note_say(note, len, "more than %d servers answered CONNZ", SWEEP_SERVERS_MAX);
		return;
	}
	if (r->n >= r->expect)
		return;
	for (int i = 0; seen != NULL && i < seen->n; i++)
		if (!answered(r, seen->name[i])) {
			size_t used = strlen(names);
			snprintf(names + used, sizeof(names) - used, "%s%s", nmissing ? ", " : "",
			    seen->name[i]);
			nmissing++;
		}
	if (nmissing > 0)
		note_say(note, len, "server%s %s did not answer CONNZ (%d of the %d expected "
		    "answered)", nmissing == 1 ? "" : "s", names, r->n, r->expect);
	else
		note_say(note, len, "%d of the %d expected servers did not answer CONNZ",
		    r->expect - r->n, r->expect);
}

void
roster_remember(const struct roster *r, struct roster_seen *seen)
{
	if (seen == NULL)
		return;
	for (int i = 0; i < r->n; i++) {
		bool known = r->s[i].name[0] == '\0';
		for (int k = 0; k < seen->n && !known; k++)
			known = strcmp(seen->name[k], r->s[i].name) == 0;
		if (known)
			continue;
		if (seen->n == SWEEP_SERVERS_MAX) {
			/* Forget the oldest. */
			memmove(seen->name[0], seen->name[1], sizeof(seen->name[0]) *
			    (SWEEP_SERVERS_MAX - 1));
			seen->n--;
		}
		memcpy(seen->name[seen->n++], r->s[i].name, sizeof(seen->name[0]));
	}
}
