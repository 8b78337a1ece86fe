/*
 * A daemon's status document as `cotal status` prints it (status_doc.h):
 * its workers' lines and the JSON form, for one space (status.c) and for
 * each lane of a host (status_host.c).
 */
#include "cli/status_doc.h"

#include <stdio.h>

#include "lib/log.h"

void
status_print_workers(json_t *doc, const char *indent)
{
	json_t *workers, *w;
	size_t i;

	workers = json_object_get(doc, "workers");
	json_array_foreach(workers, i, w) {
		const char *name;
		json_t *v;
		char counters[512] = "";
		size_t off = 0;
		json_object_foreach(json_object_get(w, "counters"), name, v) {
			int n = snprintf(counters + off, sizeof(counters) - off, " %s=%lld", name,
			    (long long)json_integer_value(v));
			if (n < 0 || (size_t)n >= sizeof(counters) - off)
				break;
			off += (size_t)n;
		}
		const char *last = json_string_value(json_object_get(w, "lastExit"));
		printf("%s%-8s %-12s pid %-7lld restarts %lld%s%s%s\n",
		    indent, json_string_value(json_object_get(w, "role")),
		    json_string_value(json_object_get(w, "state")),
		    (long long)json_integer_value(json_object_get(w, "pid")),
		    (long long)json_integer_value(json_object_get(w, "restarts")), counters,
		    last && *last ? "  last exit: " : "", last && *last ? last : "");
		const char *conf = json_string_value(json_object_get(w, "confinement"));
		if (conf != NULL)
			printf("%s  %s\n", indent, conf);
	}
}

int
status_json_print(json_t *doc)
{
	/* CPU seconds are clock ticks (1/100 s): 15 digits print them as
	 * counted, without a binary fraction's tail. */
	if (doc == NULL || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) != 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		log_errx("status: cannot write the JSON document to stdout");
		return 1;
	}
	return 0;
}
