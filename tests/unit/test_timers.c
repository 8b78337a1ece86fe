/* The checkpoint timers' pure logic: WIRE.md §1 and §6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/wire/timers.h"

#define P "cotal.demo"
#define SCHED P ".ept.wf.inst-1.7.t_1.schedule"
#define BODY(id, g, d) "{\"v\":1,\"timerId\":\"" id "\",\"generation\":" g ",\"deadline\":" d "}"

static int
parse_body(const char *body, struct timer_request *r)
{
	char why[TIMER_WHY_MAX];
	return timer_request_parse(body, strlen(body), "t_1", r, why, sizeof(why));
}

/* "timers | P.ept.<endpoint>.<instanceId>.<epoch>.<timerId>.<schedule|armed|fire> | 8 tokens" */
static void
test_subject_shape(void **state)
{
	struct timer_subject ts;
	char why[TIMER_WHY_MAX], out[TIMER_SUBJECT_MAX], long_tok[TIMER_TOKEN_MAX + 2];

	(void)state;
	assert_int_equal(timer_subject_parse(SCHED, P, TIMER_SCHEDULE, &ts, why, sizeof(why)), 0);
	assert_string_equal(ts.endpoint, "wf");
	assert_string_equal(ts.instance, "inst-1");
	assert_string_equal(ts.epoch, "7");
	assert_string_equal(ts.timer_id, "t_1");
	assert_true(timer_subject_format(P, &ts, TIMER_ARMED, out, sizeof(out)));
	assert_string_equal(out, P ".ept.wf.inst-1.7.t_1.armed");
	assert_true(timer_subject_format(P, &ts, TIMER_FIRE, out, sizeof(out)));
	assert_string_equal(out, P ".ept.wf.inst-1.7.t_1.fire");
	assert_false(timer_subject_format(P, &ts, TIMER_FIRE, out, 20));
	assert_int_equal(timer_subject_parse(P ".ept.wf.inst-1.7.t_1.armed", P, TIMER_ARMED, &ts,
	    why, sizeof(why)), 0);

	/* Not of this space, too few or too many tokens, wrong kind. */
	static const char *const bad[] = {
		"cotal.other.ept.wf.i.7.t_1.schedule", P ".ept.wf.i.7.schedule",
		P ".ept.wf.i.7.t_1.x.schedule", P ".ept.wf.i.7.t_1.armed", P ".ept.wf.i.7.t_1",
		P ".ept.wf..7.t_1.schedule", P ".ept.wf.i*.7.t_1.schedule",
		P ".ept.wf.i.7.>.schedule", P ".chat.wf.i.7.t_1.schedule", P ".ept.w f.i.7.t.schedule",
		P "x.ept.wf.i.7.t_1.schedule",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(timer_subject_parse(bad[i], P, TIMER_SCHEDULE, &ts, why,
		    sizeof(why)), -1);
	/* A token longer than TIMER_TOKEN_MAX. */
	memset(long_tok, 'a', sizeof(long_tok) - 1);
	long_tok[sizeof(long_tok) - 1] = '\0';
	char subj[TIMER_SUBJECT_MAX * 2];
	snprintf(subj, sizeof(subj), P ".ept.%s.i.7.t.schedule", long_tok);
	assert_int_equal(timer_subject_parse(subj, P, TIMER_SCHEDULE, &ts, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "endpoint"));
}

/* "Arm = publish to the sibling .armed subject"; the checkpoint status's
 * "key cp.<endpoint>.<timerId> [decision]". */
static void
test_sibling_and_record_key(void **state)
{
	struct timer_subject ts;
	char why[TIMER_WHY_MAX], out[TIMER_SUBJECT_MAX];

	(void)state;
	assert_true(timer_sibling(SCHED, TIMER_ARMED, out, sizeof(out)));
	assert_string_equal(out, P ".ept.wf.inst-1.7.t_1.armed");
	assert_true(timer_sibling(P ".ept.wf.inst-1.7.t_1.armed", TIMER_FIRE, out, sizeof(out)));
	assert_string_equal(out, P ".ept.wf.inst-1.7.t_1.fire");
	assert_false(timer_sibling("nodots", TIMER_FIRE, out, sizeof(out)));
	assert_false(timer_sibling(SCHED, TIMER_FIRE, out, 10));
	assert_int_equal(timer_subject_parse(SCHED, P, TIMER_SCHEDULE, &ts, why, sizeof(why)), 0);
	assert_true(timer_record_key(&ts, out, sizeof(out)));
	assert_string_equal(out, "cp.wf.t_1");
	assert_false(timer_record_key(&ts, out, 5));
}

/* `{"v":1,"timerId":<= subject token>,"generation":>=1,"deadline":<epoch ms ≤ year 9999>}` */
static void
test_request_body(void **state)
{
	struct timer_request r;
	char body[TIMER_BODY_MAX];
	size_t n;

	(void)state;
	assert_int_equal(parse_body(BODY("t_1", "3", "1700000000000"), &r), 0);
	assert_int_equal(r.generation, 3);
	assert_int_equal(r.deadline, INT64_C(1700000000000));
	assert_int_equal(parse_body(BODY("t_1", "1.0", "253402300799999"), &r), 0);
	assert_int_equal(r.deadline, TIMER_DEADLINE_MAX);
	/* Unknown fields are kept and ignored. */
	assert_int_equal(parse_body("{\"v\":1,\"timerId\":\"t_1\",\"generation\":1,"
	    "\"deadline\":0,\"x\":[]}", &r), 0);

	static const char *const bad[] = {
		"", "[]", "nope", "{\"v\":1}",
		"{\"v\":2,\"timerId\":\"t_1\",\"generation\":1,\"deadline\":1}",
		"{\"timerId\":\"t_1\",\"generation\":1,\"deadline\":1}",
		BODY("t_2", "1", "1"),             /* timerId != the subject's token */
		"{\"v\":1,\"timerId\":7,\"generation\":1,\"deadline\":1}",
		BODY("t_1", "0", "1"), BODY("t_1", "-1", "1"), BODY("t_1", "1.5", "1"),
		BODY("t_1", "\"1\"", "1"), BODY("t_1", "1", "253402300800000"),
		BODY("t_1", "1", "-1"), BODY("t_1", "1", "1.25"), BODY("t_1", "1", "null"),
		"{\"v\":1,\"v\":1,\"timerId\":\"t_1\",\"generation\":1,\"deadline\":1}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_body(bad[i], &r), -1);

	/* The body of .armed and .fire parses back to the same fields. */
	r.generation = 9;
	r.deadline = 1234;
	n = timer_body_format("t_1", &r, body, sizeof(body));
	assert_true(n > 0);
	assert_string_equal(body, BODY("t_1", "9", "1234"));
	assert_int_equal(parse_body(body, &r), 0);
	assert_int_equal(r.generation, 9);
	assert_int_equal(timer_body_format("t_1", &r, body, 10), 0);
}

/* "no Nats-Schedule* / Nats-Scheduler headers (such a request is refused as
 * permission-denied)" */
static void
test_scheduling_headers_refused(void **state)
{
	static const char *const ok[] = { "Nats-Msg-Id", "X-Trace", "Nats-Expected-Stream" };
	static const char *const sched[] = { "Nats-Msg-Id", "Nats-Schedule" };
	static const char *const target[] = { "nats-schedule-target" };
	static const char *const by[] = { "Nats-Scheduler" };
	char why[TIMER_WHY_MAX];

	(void)state;
	assert_int_equal(timer_headers_check(ok, 3, why, sizeof(why)), 0);
	assert_int_equal(timer_headers_check(NULL, 0, why, sizeof(why)), 0);
	assert_int_equal(timer_headers_check(sched, 2, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "permission-denied"));
	assert_non_null(strstr(why, "Nats-Schedule"));
	assert_int_equal(timer_headers_check(target, 1, why, sizeof(why)), -1);
	assert_int_equal(timer_headers_check(by, 1, why, sizeof(why)), -1);
}

/* "state must be waiting, generation and deadline must match the request;
 * no record (unknown), another state (settled) or a mismatch (stale) is
 * acked and discarded, never armed." */
static void
test_fence_verdict(void **state)
{
	struct timer_request r = { .generation = 2, .deadline = 5000 };
	const char *rec;

	(void)state;
	assert_int_equal(timer_fence_verdict(NULL, 0, &r), TIMER_UNKNOWN);
	rec = "{\"state\":\"waiting\",\"deadlineGeneration\":2,\"deadline\":5000,\"x\":1}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_ARM);
	rec = "{\"state\":\"done\",\"deadlineGeneration\":2,\"deadline\":5000}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_SETTLED);
	rec = "{\"state\":\"waiting\",\"deadlineGeneration\":3,\"deadline\":5000}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_STALE);
	rec = "{\"state\":\"waiting\",\"deadlineGeneration\":2,\"deadline\":5001}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_STALE);
	rec = "{\"state\":\"waiting\"}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_STALE);
	rec = "not json";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_STALE);
	rec = "{\"deadlineGeneration\":2,\"deadline\":5000}";
	assert_int_equal(timer_fence_verdict(rec, strlen(rec), &r), TIMER_STALE);
	assert_string_equal(timer_fence_name(TIMER_ARM), "arm");
	assert_string_equal(timer_fence_name(TIMER_UNKNOWN), "unknown");
	assert_string_equal(timer_fence_name(TIMER_SETTLED), "settled");
	assert_string_equal(timer_fence_name(TIMER_STALE), "stale");
}

/* "Nats-Schedule: @at <ISO UTC>" */
static void
test_iso_utc(void **state)
{
	char out[TIMER_ISO_MAX];

	(void)state;
	assert_true(timer_iso_utc(0, out, sizeof(out)));
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	assert_true(timer_iso_utc(INT64_C(1700000000123), out, sizeof(out)));
	assert_string_equal(out, "2023-11-14T22:13:20.123Z");
	assert_true(timer_iso_utc(TIMER_DEADLINE_MAX, out, sizeof(out)));
	assert_string_equal(out, "9999-12-31T23:59:59.999Z");
	assert_false(timer_iso_utc(-1, out, sizeof(out)));
	assert_false(timer_iso_utc(TIMER_DEADLINE_MAX + 1, out, sizeof(out)));
	assert_false(timer_iso_utc(0, out, 10));
}

/* "a re-arm of the same generation is a no-op; a newer generation replaces
 * it", fired "once per armed generation" */
static void
test_armed_set(void **state)
{
	struct timer_set s;
	enum timer_put what;
	const char *a = P ".ept.wf.i.7.a.armed", *b = P ".ept.wf.i.7.b.armed";

	(void)state;
	timer_set_init(&s);
	assert_int_equal(timer_set_next(&s), INT64_MAX);
	assert_int_equal(timer_set_due(&s, INT64_MAX), -1);
	assert_int_equal(timer_set_put(&s, a, 1, 1000, &what), 0);
	assert_int_equal(what, TIMER_PUT_ADDED);
	assert_int_equal(timer_set_put(&s, b, 4, 500, &what), 0);
	assert_int_equal(timer_set_next(&s), 500);
	assert_int_equal(timer_set_due(&s, 499), -1);
	assert_int_equal(timer_set_due(&s, 500), 1);

	/* The same generation: nothing moves. */
	assert_int_equal(timer_set_put(&s, a, 1, 9999, &what), 0);
	assert_int_equal(what, TIMER_PUT_SAME);
	assert_int_equal(s.v[0].deadline, 1000);
	/* An older one is ignored. */
	assert_int_equal(timer_set_put(&s, b, 3, 100, &what), 0);
	assert_int_equal(what, TIMER_PUT_OLDER);
	assert_int_equal(s.v[1].deadline, 500);

	/* Fired: due no more; a newer generation re-arms with its deadline. */
	s.v[1].fired = true;
	assert_int_equal(timer_set_due(&s, 600), -1);
	assert_int_equal(timer_set_next(&s), 1000);
	assert_int_equal(timer_set_put(&s, b, 5, 2000, &what), 0);
	assert_int_equal(what, TIMER_PUT_REPLACED);
	assert_false(s.v[1].fired);
	assert_int_equal(timer_set_due(&s, 1500), 0);
	s.v[0].fired = true;
	assert_int_equal(timer_set_due(&s, 1500), -1);
	assert_int_equal(timer_set_next(&s), 2000);
	assert_int_equal(timer_set_due(&s, 2000), 1);

	/* Growth past the first allocation. */
	for (int i = 0; i < 40; i++) {
		char subj[64];
		snprintf(subj, sizeof(subj), P ".ept.wf.i.7.n%d.armed", i);
		assert_int_equal(timer_set_put(&s, subj, 1, 10 + i, &what), 0);
		assert_int_equal(what, TIMER_PUT_ADDED);
	}
	assert_int_equal(s.n, 42);
	assert_int_equal(timer_set_next(&s), 10);
	timer_set_free(&s);
	assert_int_equal(s.n, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_subject_shape),
		cmocka_unit_test(test_sibling_and_record_key),
		cmocka_unit_test(test_request_body),
		cmocka_unit_test(test_scheduling_headers_refused),
		cmocka_unit_test(test_fence_verdict),
		cmocka_unit_test(test_iso_utc),
		cmocka_unit_test(test_armed_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
