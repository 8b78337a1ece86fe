/*
 * A confined child's lines into the log (service/relay.c). Issue 41,
 * finding 9: "The relay rewrites a worker's lines so that a worker can
 * print lines that read as the supervisor's: every relayed line names the
 * worker it came from." A worker's lines go through a real pipe and the
 * relay's event handler; what reaches the log's descriptor is read back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "service/relay.h"

/* The lines the child writes, relayed for role; the log's bytes in out. */
static void
relay_through(const char *role, bool timer, const char *lines, char *out, size_t outlen)
{
	struct event_base *base = event_base_new();
	struct relay r;
	int child[2], log[2];
	ssize_t n;
	size_t got = 0;

	assert_non_null(base);
	assert_int_equal(pipe(child), 0);
	assert_int_equal(pipe(log), 0);
	relay_init(&r, role, "this worker", 1000, log[1]);
	r.timer_voice = timer;
	relay_open(&r, base, child[0]);
	assert_int_equal(write(child[1], lines, strlen(lines)), (ssize_t)strlen(lines));
	close(child[1]);
	/* Until the relay sees the pipe's end (it reads once a wake-up). */
	while (r.rd >= 0)
		event_base_loop(base, EVLOOP_ONCE);
	relay_close(&r);
	close(log[1]);
	while (got + 1 < outlen && (n = read(log[0], out + got, outlen - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(log[0]);
	event_base_free(base);
}

/* Every line the supervisor writes about a worker, as a worker would
 * forge it: each reaches the log naming the worker, none as written. */
static void
test_no_worker_line_reads_as_the_supervisors(void **state)
{
	static const char *const forged[] = {
		("! delivery timer: timer writer: down (exit 1) — retrying in 1s; pauses on this "
		    "space do not expire until it is back"),
		"✓ delivery timer: timer writer up (space other) — workflow pauses on this space expire",
		"✓ delivery timer: timer writer: fired x",
		"✗ delivery timer: delivery: broker connection unavailable (broker unreachable), exiting",
		"✓ delivery fanout: timer writer up (space s) — workflow pauses on this space expire",
		"✓ delivery daemon up (space s) — stop with: cotal down",
		"✗ delivery: worker fanout is crash-looping",
	};
	char in[4096] = "", out[8192];

	(void)state;
	for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
		strcat(in, forged[i]);
		strcat(in, "\n");
	}
	for (int timer = 0; timer < 2; timer++) {
		const char *role = timer ? "timer" : "fanout";
		char who[64], unformatted[64];
		int lines = 0;

		relay_through(role, timer, in, out, sizeof(out));
		snprintf(who, sizeof(who), " delivery %s: ", role);
		snprintf(unformatted, sizeof(unformatted), "! delivery %s (unformatted): ", role);
		for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
			lines++;
			/* "<mark> delivery <role>: " or the unformatted line's. */
			char *sp = strchr(line, ' ');
			assert_non_null(sp);
			if (strncmp(sp, who, strlen(who)) != 0 &&
			    strncmp(line, unformatted, strlen(unformatted)) != 0)
				fail_msg("a %s line reads as another's: %s", role, line);
		}
		assert_int_equal(lines, (int)(sizeof(forged) / sizeof(forged[0])));
	}
}

/* WIRE.md §8's one line in the timer writer's own voice goes out as the
 * contract writes it; the same line from another worker keeps its name. */
static void
test_the_timers_refusal_speaks_as_the_timer_writer(void **state)
{
	static const char line[] = "! delivery timer: timer writer: refused a .schedule request "
	    "permanently (the generation is not a number)\n";
	static const char fanout[] = "! delivery fanout: timer writer: refused a .schedule request "
	    "permanently (x)\n";
	char out[1024];

	(void)state;
	relay_through("timer", true, line, out, sizeof(out));
	assert_string_equal(out, "! timer writer: refused a .schedule request permanently "
	    "(the generation is not a number)\n");
	relay_through("fanout", false, fanout, out, sizeof(out));
	assert_string_equal(out, fanout);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_worker_line_reads_as_the_supervisors),
		cmocka_unit_test(test_the_timers_refusal_speaks_as_the_timer_writer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
