/*
 * A scrape of the daemon's /metrics read by hand, for the e2e suites that
 * check the exporter's values (e2e_metrics_values, e2e_alerts): the wall
 * clock around the scrape, and one sample's value by its exact series
 * text, name{space="…",…} as service/exposition.c writes it. Static
 * functions: each suite compiles its own copy.
 */
#ifndef COTAL_TESTS_SCRAPE_H
#define COTAL_TESTS_SCRAPE_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/harness/harness.h"

struct scrape {
	char body[H_HTTP_BODY_MAX];
	double before, after; /* the wall clock, seconds, around the GET */
};

static inline double
wall_s(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* GET /metrics on port into sc: 0, or -1 when not 200. */
static inline int
scrape_get(int port, struct scrape *sc)
{
	sc->before = wall_s();
	int status = h_http_get(port, "/metrics", NULL, sc->body, sizeof(sc->body), NULL, 0);
	sc->after = wall_s();
	return status == 200 ? 0 : -1;
}

/* The value of the sample "<series> <value>", NAN when there is none. */
static inline double
scrape_value(const struct scrape *sc, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = sc->body; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}

/* The value of the first sample whose series begins with prefix, NAN when
 * there is none (a family whose last labels the test does not know). */
static inline double
scrape_value_prefix(const struct scrape *sc, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = sc->body; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (*p != '#' && strncmp(p, prefix, n) == 0) {
			const char *sp = strchr(p, ' ');
			return sp != NULL ? strtod(sp + 1, NULL) : NAN;
		}
	return NAN;
}

/* Does any sample's series begin with prefix (a family, or a family and
 * its first labels)? */
static inline bool
scrape_has(const struct scrape *sc, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = sc->body; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (*p != '#' && strncmp(p, prefix, n) == 0)
			return true;
	return false;
}

/* A sample that must be there: its value, or the test fails naming it. */
static inline double
scrape_need(const struct scrape *sc, const char *series)
{
	double v = scrape_value(sc, series);

	if (isnan(v))
		fail_msg("no sample %s in the scrape", series);
	return v;
}

#endif
