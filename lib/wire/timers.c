/* The checkpoint timers' pure logic (see timers.h). */
#include "lib/wire/timers.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const kind_token[] = {
	[TIMER_SCHEDULE] = "schedule", [TIMER_ARMED] = "armed", [TIMER_FIRE] = "fire",
};

static bool
token_valid(const char *s, size_t n)
{
	if (n == 0 || n > TIMER_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

int
timer_subject_parse(const char *subj, const char *prefix, enum timer_kind kind,
		    struct timer_subject *ts, char *why, size_t whylen)
{
	static const char *const names[] = { "endpoint", "instanceId", "epoch", "timerId" };
	char *slots[] = { ts->endpoint, ts->instance, ts->epoch, ts->timer_id };
	size_t pl = strlen(prefix);
	const char *p;

	memset(ts, 0, sizeof(*ts));
	if (strncmp(subj, prefix, pl) != 0 || strncmp(subj + pl, ".ept.", 5) != 0) {
		snprintf(why, whylen, "not a timer subject of this space");
		return -1;
	}
	p = subj + pl + 5;
	for (int i = 0; i < 4; i++) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (dot == NULL || !token_valid(p, n)) {
			snprintf(why, whylen, "the subject's %s token is not [A-Za-z0-9_-]{1,%d}",
			    names[i], TIMER_TOKEN_MAX);
			return -1;
		}
		memcpy(slots[i], p, n);
		p = dot + 1;
	}
	if (strcmp(p, kind_token[kind]) != 0) {
		snprintf(why, whylen, "the subject does not end in .%s (8 tokens)", kind_token[kind]);
		return -1;
	}
	return 0;
}

bool
timer_subject_format(const char *prefix, const struct timer_subject *ts, enum timer_kind kind,
		     char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "%s.ept.%s.%s.%s.%s.%s", prefix, ts->endpoint, ts->instance,
	    ts->epoch, ts->timer_id, kind_token[kind]);
	return n > 0 && (size_t)n < outlen;
}

bool
timer_sibling(const char *subj, enum timer_kind kind, char *out, size_t outlen)
{
	const char *dot = strrchr(subj, '.');
	int n;

	if (dot == NULL)
		return false;
	n = snprintf(out, outlen, "%.*s.%s", (int)(dot - subj), subj, kind_token[kind]);
	return n > 0 && (size_t)n < outlen;
}

bool
timer_record_key(const struct timer_subject *ts, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "cp.%s.%s", ts->endpoint, ts->timer_id);
	return n > 0 && (size_t)n < outlen;
}

/* A JSON whole number in [min, max]. */
static bool
whole(const json_t *j, int64_t min, int64_t max, int64_t *out)
{
	if (json_is_integer(j))
		*out = json_integer_value(j);
	else if (json_is_real(j) && json_real_value(j) > -9007199254740992.0 &&
	    json_real_value(j) < 9007199254740992.0 &&
	    (double)(int64_t)json_real_value(j) == json_real_value(j))
		*out = (int64_t)json_real_value(j);
	else
		return false;
	return *out >= min && *out <= max;
}

int
timer_request_parse(const char *data, size_t len, const char *timer_id,
		    struct timer_request *r, char *why, size_t whylen)
{
	json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
	const json_t *id;
	int64_t v, g, d;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(root))
		snprintf(why, whylen, "the body is not a JSON object");
	else if (!whole(json_object_get(root, "v"), 1, 1, &v))
		snprintf(why, whylen, "v is not 1");
	else if (!json_is_string(id = json_object_get(root, "timerId")) ||
	    strcmp(json_string_value(id), timer_id) != 0)
		snprintf(why, whylen, "timerId does not equal the subject's token %s", timer_id);
	else if (!whole(json_object_get(root, "generation"), 1, INT64_MAX, &g))
		snprintf(why, whylen, "generation is not a whole number >= 1");
	else if (!whole(json_object_get(root, "deadline"), 0, TIMER_DEADLINE_MAX, &d))
		snprintf(why, whylen, "deadline is not whole epoch ms up to year 9999");
	else {
		r->generation = (uint64_t)g;
		r->deadline = d;
		rc = 0;
	}
	json_decref(root);
	return rc;
}

size_t
timer_body_format(const char *timer_id, const struct timer_request *r, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "{\"v\":1,\"timerId\":\"%s\",\"generation\":%" PRIu64
	    ",\"deadline\":%" PRId64 "}", timer_id, r->generation, r->deadline);
	return n > 0 && (size_t)n < outlen ? (size_t)n : 0;
}

int
timer_headers_check(const char *const *names, int n, char *why, size_t whylen)
{
	for (int i = 0; i < n; i++)
		if (strncasecmp(names[i], "Nats-Schedule", 13) == 0) {
			snprintf(why, whylen, "permission-denied: a request may not carry %.64s",
			    names[i]);
			return -1;
		}
	return 0;
}

enum timer_fence
timer_fence_verdict(const char *record, size_t len, const struct timer_request *r)
{
	json_t *root;
	const json_t *state;
	int64_t g, d;
	enum timer_fence v = TIMER_STALE;

	if (record == NULL)
		return TIMER_UNKNOWN;
	root = json_loadb(record, len, 0, NULL);
	state = json_object_get(root, "state");
	if (json_is_string(state) && strcmp(json_string_value(state), "waiting") != 0)
		v = TIMER_SETTLED;
	else if (json_is_string(state) &&
	    whole(json_object_get(root, "deadlineGeneration"), 1, INT64_MAX, &g) &&
	    whole(json_object_get(root, "deadline"), 0, TIMER_DEADLINE_MAX, &d) &&
	    (uint64_t)g == r->generation && d == r->deadline)
		v = TIMER_ARM;
	json_decref(root);
	return v;
}

const char *
timer_fence_name(enum timer_fence v)
{
	static const char *const names[] = { "arm", "unknown", "settled", "stale" };
	return names[v];
}

bool
timer_iso_utc(int64_t ms, char *out, size_t outlen)
{
	time_t t = (time_t)(ms / 1000);
	char date[32];
	struct tm tm;
	int n;

	if (ms < 0 || ms > TIMER_DEADLINE_MAX || gmtime_r(&t, &tm) == NULL ||
	    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		return false;
	n = ms % 1000 != 0 ? snprintf(out, outlen, "%s.%03dZ", date, (int)(ms % 1000)) :
	    snprintf(out, outlen, "%sZ", date);
	return n > 0 && (size_t)n < outlen;
}

/* ---- the armed set ---- */

void
timer_set_init(struct timer_set *s)
{
	memset(s, 0, sizeof(*s));
}

void
timer_set_free(struct timer_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].subject);
	free(s->v);
	timer_set_init(s);
}

int
timer_set_put(struct timer_set *s, const char *subject, uint64_t generation, int64_t deadline,
	      enum timer_put *what)
{
	struct timer_armed *a;

	for (size_t i = 0; i < s->n; i++) {
		a = &s->v[i];
		if (strcmp(a->subject, subject) != 0)
			continue;
		if (generation == a->generation)
			*what = TIMER_PUT_SAME;
		else if (generation < a->generation)
			*what = TIMER_PUT_OLDER;
		else {
			*what = TIMER_PUT_REPLACED;
			a->generation = generation;
			a->deadline = deadline;
			a->fired = false;
		}
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct timer_armed *v = realloc(s->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	a = &s->v[s->n];
	if ((a->subject = strdup(subject)) == NULL)
		return -1;
	a->generation = generation;
	a->deadline = deadline;
	a->fired = false;
	s->n++;
	*what = TIMER_PUT_ADDED;
	return 0;
}

long
timer_set_due(const struct timer_set *s, int64_t now)
{
	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i].fired && s->v[i].deadline <= now)
			return (long)i;
	return -1;
}

int64_t
timer_set_next(const struct timer_set *s)
{
	int64_t next = INT64_MAX;

	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i].fired && s->v[i].deadline < next)
			next = s->v[i].deadline;
	return next;
}
