/*
 * The checks on what the broker answers the eviction sweep (connz.h): a
 * CONNZ page and its connection entries, a KICK reply. Pure: no broker,
 * no state; every field is type-checked before it is used, and every loop
 * is bounded (entries per page, tags per entry).
 */
#include "lib/wire/connz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/tokens.h"

#define PRINCIPAL_TAG "principal:"

/* ---- notes ------------------------------------------------------------- */

void
note_say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

void
note_add(char *note, size_t len, const char *fmt, ...)
{
	size_t used = strlen(note);
	va_list ap;

	if (used + 1 >= len)
		return;
	if (used > 0) {
		snprintf(note + used, len - used, "; ");
		used = strlen(note);
		if (used + 1 >= len)
			return;
	}
	va_start(ap, fmt);
	vsnprintf(note + used, len - used, fmt, ap);
	va_end(ap);
}

/* "<o><sep><a>" with a principal owner and an identity-token actor, n bytes
 * of s, written as "<o>.<a>" into out. */
static bool
principal_from(const char *s, size_t n, char sep, char *out, size_t outlen)
{
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	const char *mid = memchr(s, sep, n);
	size_t olen, alen;

	if (mid == NULL || memchr(s, '\0', n) != NULL)
		return false;
	olen = (size_t)(mid - s);
	alen = n - olen - 1;
	if (olen == 0 || olen > IDENT_MAX || alen == 0 || alen > IDENT_MAX)
		return false;
	memcpy(owner, s, olen);
	owner[olen] = '\0';
	memcpy(actor, mid + 1, alen);
	actor[alen] = '\0';
	if (!principal_owner_valid(owner) || !identity_token_valid(actor))
		return false;
	return principal_format(owner, actor, out, outlen);
}

/*
 * Each principal an entry names, handed to fn (which returns true to
 * stop): every valid "principal:<o>.<a>" tag (tags that name none are
 * ignored), else, when no tag names one, its authorized_user "<o>-<a>".
 * An entry that is not an object, and fields of another type, name
 * nothing. Returns how many were handed over.
 */
size_t
connz_entry_each(const json_t *conn, bool (*fn)(const char *principal, void *arg), void *arg)
{
	char p[PRINCIPAL_MAX + 1];
	const json_t *tags, *t, *user;
	size_t n = 0, i, tl = strlen(PRINCIPAL_TAG);

	if (!json_is_object(conn))
		return 0;
	tags = json_object_get(conn, "tags");
	if (json_is_array(tags)) {
		json_array_foreach(tags, i, t) {
			const char *v = json_string_value(t);
			if (i >= SWEEP_PAGE)
				break;
			if (v == NULL || strncmp(v, PRINCIPAL_TAG, tl) != 0 ||
			    !principal_from(v + tl, json_string_length(t) - tl, '.', p, sizeof(p)))
				continue;
			n++;
			if (fn(p, arg))
				return n;
		}
	}
	if (n > 0)
		return n;
	user = json_object_get(conn, "authorized_user");
	if (json_is_string(user) &&
	    principal_from(json_string_value(user), json_string_length(user), '-', p, sizeof(p))) {
		fn(p, arg);
		return 1;
	}
	return 0;
}

struct first_arg {
	char *out;
	size_t outlen;
	bool ok;
};

static bool
take_first(const char *p, void *arg)
{
	struct first_arg *a = arg;

	if (strlen(p) < a->outlen) {
		strcpy(a->out, p);
		a->ok = true;
	}
	return true;
}

int
connz_entry_principal(const json_t *conn, char *out, size_t outlen)
{
	struct first_arg a = { out, outlen, false };

	connz_entry_each(conn, take_first, &a);
	return a.ok ? 0 : -1;
}

struct names_arg {
	const char *principal;
	bool found;
};

static bool
is_it(const char *p, void *arg)
{
	struct names_arg *a = arg;

	a->found = strcmp(p, a->principal) == 0;
	return a->found;
}

bool
connz_entry_names(const json_t *conn, const char *principal)
{
	struct names_arg a = { principal, false };

	if (principal == NULL)
		return false;
	connz_entry_each(conn, is_it, &a);
	return a.found;
}

bool
connz_server_id_valid(const char *s, size_t n)
{
	if (n == 0 || n > SWEEP_SERVER_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* An integer field >= 0 (JSON integers only; a real is refused). */
static bool
get_count(const json_t *obj, const char *key, long long *out)
{
	const json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (long long)json_integer_value(v);
	return true;
}

/* {"error":{"code","description"}} as "<code> <description>" (bounded). */
static void
broker_error(const json_t *err, char *why, size_t whylen)
{
	const json_t *code = json_object_get(err, "code");
	const json_t *desc = json_object_get(err, "description");

	note_say(why, whylen, "%lld %.160s", json_is_integer(code) ? (long long)json_integer_value(code) : 0LL,
	    json_is_string(desc) ? json_string_value(desc) : "(no description)");
}

/* One entry: an object with an integer cid, and tags (an array of strings),
 * authorized_user and account (strings) when present. */
static bool
entry_valid(const json_t *e, char *why, size_t whylen, size_t idx)
{
	const json_t *tags, *t, *v;
	size_t i;

	if (!json_is_object(e)) {
		note_say(why, whylen, "connections[%zu] is not an object", idx);
		return false;
	}
	v = json_object_get(e, "cid");
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		note_say(why, whylen, "connections[%zu].cid is missing or not a non-negative integer", idx);
		return false;
	}
	tags = json_object_get(e, "tags");
	if (tags != NULL) {
		if (!json_is_array(tags) || json_array_size(tags) > SWEEP_PAGE) {
			note_say(why, whylen, "connections[%zu].tags is not an array of at most %d strings",
			    idx, SWEEP_PAGE);
			return false;
		}
		json_array_foreach(tags, i, t)
			if (!json_is_string(t)) {
				note_say(why, whylen, "connections[%zu].tags[%zu] is not a string", idx, i);
				return false;
			}
	}
	v = json_object_get(e, "authorized_user");
	if (v != NULL && !json_is_string(v)) {
		note_say(why, whylen, "connections[%zu].authorized_user is not a string", idx);
		return false;
	}
	v = json_object_get(e, "account");
	if (v != NULL && !json_is_string(v)) {
		note_say(why, whylen, "connections[%zu].account is not a string", idx);
		return false;
	}
	return true;
}

/* A server name we may quote and page by: 1..SWEEP_SERVER_NAME_MAX bytes,
 * no control characters. */
static bool
server_name_valid(const char *s, size_t n)
{
	if (n == 0 || n > SWEEP_SERVER_NAME_MAX || memchr(s, '\0', n) != NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* The reply's "server": {"id", "name"?, "cluster"?, "ver"?} into p. */
static bool
server_envelope(const json_t *server, struct connz_page *p, char *why, size_t whylen)
{
	const json_t *v = json_object_get(server, "id");

	if (!json_is_string(v) || !connz_server_id_valid(json_string_value(v), json_string_length(v))) {
		note_say(why, whylen, "server.id is missing or not a server id");
		return false;
	}
	memcpy(p->server_id, json_string_value(v), json_string_length(v) + 1);
	v = json_object_get(server, "name");
	if (v != NULL) {
		if (!json_is_string(v) ||
		    !server_name_valid(json_string_value(v), json_string_length(v))) {
			note_say(why, whylen, "server.name is not a name of at most %d printable "
			    "characters", SWEEP_SERVER_NAME_MAX);
			return false;
		}
		memcpy(p->server_name, json_string_value(v), json_string_length(v) + 1);
	}
	v = json_object_get(server, "cluster");
	if (v != NULL && !json_is_string(v)) {
		note_say(why, whylen, "server.cluster is not a string");
		return false;
	}
	p->clustered = v != NULL && json_string_length(v) > 0;
	v = json_object_get(server, "ver");
	if (json_is_string(v) && json_string_length(v) < sizeof(p->version))
		memcpy(p->version, json_string_value(v), json_string_length(v) + 1);
	return true;
}

int
connz_page_parse(const json_t *reply, long long offset, struct connz_page *p, char *why,
		 size_t whylen)
{
	const json_t *server, *data, *v, *conns, *e;
	long long num, prev = -1;
	bool server_ok;
	size_t i;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(reply)) {
		note_say(why, whylen, "the reply is not a JSON object");
		return -1;
	}
	/* Which server answered, even when it refused: the sweep names it. */
	server = json_object_get(reply, "server");
	server_ok = json_is_object(server) && server_envelope(server, p, why, whylen);
	v = json_object_get(reply, "error");
	if (v != NULL) {
		char text[200];
		if (!json_is_object(v)) {
			note_say(why, whylen, "the reply's error is not an object");
			return -1;
		}
		broker_error(v, text, sizeof(text));
		note_say(why, whylen, "the broker refused CONNZ: %s", text);
		return -1;
	}
	if (!json_is_object(server)) {
		note_say(why, whylen, "server is missing or not an object");
		return -1;
	}
	if (!server_ok)
		return -1;
	data = json_object_get(reply, "data");
	if (!json_is_object(data)) {
		note_say(why, whylen, "data is missing or not an object");
		return -1;
	}
	if (!get_count(data, "total", &p->total) || !get_count(data, "offset", &p->offset) ||
	    !get_count(data, "num_connections", &num)) {
		note_say(why, whylen, "data.total, data.offset or data.num_connections is missing or "
		    "not a non-negative integer");
		return -1;
	}
	/* Each server lists its own connections: the page is the answering
	 * server's, and a server that does not know the account sends an empty
	 * one without an id. */
	v = json_object_get(data, "server_id");
	if (v == NULL && p->total == 0 && num == 0) {
		/* the envelope's id stands */
	} else if (!json_is_string(v) ||
	    !connz_server_id_valid(json_string_value(v), json_string_length(v))) {
		note_say(why, whylen, "data.server_id is missing or not a server id");
		return -1;
	} else if (strcmp(json_string_value(v), p->server_id) != 0) {
		note_say(why, whylen, "data.server_id %.64s is not the answering server's (%.64s)",
		    json_string_value(v), p->server_id);
		return -1;
	}
	if (p->offset != offset) {
		note_say(why, whylen, "data.offset is %lld, %lld was asked for", p->offset, offset);
		return -1;
	}
	conns = json_object_get(data, "connections");
	if (!json_is_array(conns)) {
		/* The broker omits an empty list. */
		if (conns != NULL || num != 0) {
			note_say(why, whylen, "data.connections is missing or not an array");
			return -1;
		}
	} else if ((long long)json_array_size(conns) != num) {
		note_say(why, whylen, "data.num_connections is %lld but %zu connections are listed", num,
		    json_array_size(conns));
		return -1;
	}
	if (num > SWEEP_PAGE) {
		note_say(why, whylen, "%lld connections in one page, at most %d were asked for", num,
		    SWEEP_PAGE);
		return -1;
	}
	json_array_foreach(conns, i, e) {
		if (!entry_valid(e, why, whylen, i))
			return -1;
		long long cid = (long long)json_integer_value(json_object_get(e, "cid"));
		if (cid <= prev) {
			note_say(why, whylen, "connections are not sorted by cid (%lld after %lld)", cid,
			    prev);
			return -1;
		}
		prev = cid;
	}
	p->n = (size_t)num;
	p->conns = conns;
	return 0;
}

int
kick_reply_parse(const char *data, size_t len, char *why, size_t whylen)
{
	json_t *r, *err;
	int rc;

	note_say(why, whylen, "%s", "");
	if (data == NULL || len > 64 * 1024 ||
	    (r = json_loadb(data, len, 0, NULL)) == NULL) {
		note_say(why, whylen, "the KICK reply is not JSON");
		return -1;
	}
	err = json_object_get(r, "error");
	if (!json_is_object(r)) {
		note_say(why, whylen, "the KICK reply is not a JSON object");
		rc = -1;
	} else if (err != NULL) {
		if (json_is_object(err)) {
			broker_error(err, why, whylen);
			rc = 0;
		} else {
			note_say(why, whylen, "the KICK reply's error is not an object");
			rc = -1;
		}
	} else if (!json_is_object(json_object_get(r, "server"))) {
		note_say(why, whylen, "the KICK reply names no server");
		rc = -1;
	} else {
		rc = 1;
	}
	json_decref(r);
	return rc;
}

bool
connz_principal_valid(const char *p)
{
	char out[PRINCIPAL_MAX + 1];
	size_t n;

	return p != NULL && (n = strlen(p)) <= PRINCIPAL_MAX &&
	    principal_from(p, n, '.', out, sizeof(out)) && strcmp(out, p) == 0;
}

bool
connz_version_has_kick(const char *ver)
{
	int major, minor;

	if (ver == NULL || sscanf(ver, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 2 || (major == 2 && minor >= 10);
}
