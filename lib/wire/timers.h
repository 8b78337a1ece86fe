/*
 * The checkpoint timers' pure logic (WIRE.md §1 and §6): the timer
 * subjects, a .schedule request's validation, the fencing verdict of its
 * checkpoint record, the `@at` time text, and the armed set the timer
 * writer keeps when it is the scheduler itself (brokers older than 2.12).
 */
#ifndef COTAL_TIMERS_H
#define COTAL_TIMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMER_TOKEN_MAX 128
/* cotal.<s>.ept.<e>.<i>.<epoch>.<timerId>.schedule */
#define TIMER_SUBJECT_MAX (6 + 256 + 5 + 4 * (TIMER_TOKEN_MAX + 1) + 10)
#define TIMER_KEY_MAX (3 + 2 * (TIMER_TOKEN_MAX + 1))
#define TIMER_DEADLINE_MAX INT64_C(253402300799999) /* 9999-12-31T23:59:59.999Z */
#define TIMER_ISO_MAX 32
#define TIMER_BODY_MAX (64 + TIMER_TOKEN_MAX + 2 * 20)
#define TIMER_WHY_MAX 256

enum timer_kind { TIMER_SCHEDULE, TIMER_ARMED, TIMER_FIRE };

struct timer_subject {
	char endpoint[TIMER_TOKEN_MAX + 1];
	char instance[TIMER_TOKEN_MAX + 1];
	char epoch[TIMER_TOKEN_MAX + 1];
	char timer_id[TIMER_TOKEN_MAX + 1];
};

/* The request body {"v":1,"timerId","generation","deadline"}, and the body
 * of the .armed and .fire messages made from it. */
struct timer_request {
	uint64_t generation;
	int64_t deadline; /* epoch ms */
};

/*
 * Parse `<prefix>.ept.<e>.<i>.<epoch>.<timerId>.<kind>` (8 tokens after
 * the prefix's two, each [A-Za-z0-9_-]{1,TIMER_TOKEN_MAX}). 0, or -1 with why.
 */
int timer_subject_parse(const char *subj, const char *prefix, enum timer_kind kind,
			struct timer_subject *ts, char *why, size_t whylen);
/* The subject of kind for ts under prefix; false when it does not fit. */
bool timer_subject_format(const char *prefix, const struct timer_subject *ts,
			  enum timer_kind kind, char *out, size_t outlen);
/* The sibling of a timer subject: its last token replaced by kind's. */
bool timer_sibling(const char *subj, enum timer_kind kind, char *out, size_t outlen);
/* The checkpoint record's key in cotal_records_<s>: cp.<endpoint>.<timerId>. */
bool timer_record_key(const struct timer_subject *ts, char *out, size_t outlen);

/*
 * A request (or .armed/.fire) body: v == 1, timerId == timer_id, generation
 * a whole number >= 1, deadline whole epoch ms in [0, TIMER_DEADLINE_MAX].
 * 0, or -1 with why.
 */
int timer_request_parse(const char *data, size_t len, const char *timer_id,
			struct timer_request *r, char *why, size_t whylen);
/* The canonical body for timer_id and r; its length, or 0 when it does not fit. */
size_t timer_body_format(const char *timer_id, const struct timer_request *r, char *out,
			 size_t outlen);
/*
 * A request may carry no scheduling header (Nats-Schedule*, Nats-Scheduler):
 * 0, or -1 with why (a permission denial) naming the first found.
 */
int timer_headers_check(const char *const *names, int n, char *why, size_t whylen);

/* The fencing read's verdict (WIRE.md §6). */
enum timer_fence { TIMER_ARM, TIMER_UNKNOWN, TIMER_SETTLED, TIMER_STALE };
/* record: the checkpoint row's value, NULL when there is none. */
enum timer_fence timer_fence_verdict(const char *record, size_t len,
				     const struct timer_request *r);
const char *timer_fence_name(enum timer_fence v);

/* `YYYY-MM-DDTHH:MM:SS[.mmm]Z` of epoch ms; false out of range. */
bool timer_iso_utc(int64_t ms, char *out, size_t outlen);

/* ---- the armed set: the worker as the scheduler ---- */

struct timer_armed {
	char *subject;       /* the .armed subject */
	uint64_t generation;
	int64_t deadline;
	bool fired;          /* this generation's .fire is published */
};

struct timer_set {
	struct timer_armed *v;
	size_t n, cap;
};

enum timer_put {
	TIMER_PUT_ADDED,     /* a subject not armed before */
	TIMER_PUT_SAME,      /* the same generation again: a no-op */
	TIMER_PUT_REPLACED,  /* a newer generation: its deadline replaces */
	TIMER_PUT_OLDER,     /* an older generation: ignored */
};

void timer_set_init(struct timer_set *s);
void timer_set_free(struct timer_set *s);
/* Arm subject at generation/deadline; -1 when out of memory. */
int timer_set_put(struct timer_set *s, const char *subject, uint64_t generation,
		  int64_t deadline, enum timer_put *what);
/* The index of an entry due at now (not fired, deadline <= now), or -1. */
long timer_set_due(const struct timer_set *s, int64_t now);
/* The earliest deadline not fired yet, INT64_MAX when none. */
int64_t timer_set_next(const struct timer_set *s);

#endif
