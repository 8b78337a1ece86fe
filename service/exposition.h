/*
 * The metrics' text: status documents (supervisor/status.c's, each with the
 * processes' costs added, see below) rendered in the Prometheus text format
 * 0.0.4 or OpenMetrics 1.0. Pure: no I/O; unit-tested (test_exposition) and
 * checked by promtool in e2e_metrics. Rendered by the supervisor and by a
 * delivery host, never by the metrics server, which only serves the text.
 *
 * Every series carries the space it is about (label space): a host's one
 * endpoint holds every lane's. docs/metrics.md names and explains each.
 */
#ifndef COTAL_SERVICE_EXPOSITION_H
#define COTAL_SERVICE_EXPOSITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * Render n status documents at wall-clock time now_ms. A document may hold
 * "process": {"rssBytes", "cpuSeconds"} at its top (the supervisor) and in
 * each worker: the caller reads those from /proc (lib/procstat.h). A field
 * a document lacks leaves its series out; nothing is invented. The text,
 * malloc'd and NUL-terminated, with its length in *len.
 */
char *exposition_render(json_t *const *docs, size_t n, int64_t now_ms, bool openmetrics,
			size_t *len);

/* What /healthz says of them: 200 when every one is serving under a ready
 * lease, else 503; the one-line reason either way. */
int exposition_health(json_t *const *docs, size_t n, char *reason, size_t len);

#endif
