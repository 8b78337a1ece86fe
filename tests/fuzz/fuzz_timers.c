/*
 * Fuzz target: the timer parsers of lib/wire/timers.c.
 *
 * The input is split at its first newline: the line is a subject (parsed
 * as each of .schedule, .armed and .fire under cotal.demo) and a header
 * name; the rest is a request body (against the subject's timerId, or
 * "t_1") and a checkpoint record. What parses is checked to format back to
 * itself: a subject to the same text, a body to one that parses to the same
 * fields.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/timers.h"

#define PREFIX "cotal.demo"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t sl = nl ? (size_t)(nl - data) : size;
	const char *body = nl ? (const char *)nl + 1 : "";
	size_t bl = nl ? size - sl - 1 : 0;
	char *subj = malloc(sl + 1), why[TIMER_WHY_MAX], out[TIMER_SUBJECT_MAX];
	char text[TIMER_BODY_MAX], iso[TIMER_ISO_MAX];
	char timer_id[TIMER_TOKEN_MAX + 1] = "t_1";
	struct timer_subject ts;
	struct timer_request r, back;

	if (subj == NULL)
		return 0;
	memcpy(subj, data, sl);
	subj[sl] = '\0';
	for (int k = TIMER_SCHEDULE; k <= TIMER_FIRE; k++) {
		if (timer_subject_parse(subj, PREFIX, (enum timer_kind)k, &ts, why, sizeof(why)) != 0)
			continue;
		if (!timer_subject_format(PREFIX, &ts, (enum timer_kind)k, out, sizeof(out)) ||
		    strcmp(out, subj) != 0)
			abort();
		if (!timer_record_key(&ts, out, sizeof(out)) || !timer_sibling(subj, TIMER_FIRE, out,
		    sizeof(out)))
			abort();
		strcpy(timer_id, ts.timer_id);
	}
	const char *names[] = { subj };
	(void)timer_headers_check(names, 1, why, sizeof(why));

	if (timer_request_parse(body, bl, timer_id, &r, why, sizeof(why)) == 0) {
		size_t n = timer_body_format(timer_id, &r, text, sizeof(text));
		if (n == 0 || timer_request_parse(text, n, timer_id, &back, why, sizeof(why)) != 0 ||
		    back.generation != r.generation || back.deadline != r.deadline)
			abort();
		if (!timer_iso_utc(r.deadline, iso, sizeof(iso)))
			abort();
	} else {
		r.generation = 1;
		r.deadline = 0;
	}
	(void)timer_fence_name(timer_fence_verdict(body, bl, &r));
	free(subj);
	return 0;
}
