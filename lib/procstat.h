/*
 * What a process costs, read from /proc: its resident memory and the CPU
 * time it has used. For `cotal status --json` and the metrics (the
 * supervisor and the host read their children's; confined processes do not
 * call this).
 */
#ifndef COTAL_PROCSTAT_H
#define COTAL_PROCSTAT_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct procstat {
	uint64_t rss_bytes;   /* resident set size */
	double cpu_seconds;   /* user + system time, since the process started */
	unsigned long long start_ticks; /* when it started, clock ticks after boot */
	char state;           /* 'R', 'S', ... 'Z' a zombie, 'X' dead */
};

/* 0, or -1 when pid runs no more (or its /proc files cannot be read). */
int procstat_read(pid_t pid, struct procstat *ps);

/* What pid costs, as the status documents say it (`cotal status --json`,
 * the metrics): {"rssBytes", "cpuSeconds"}, or null when it runs no more
 * or is no pid. New reference. */
json_t *procstat_json(long long pid);
/* Each worker of a status document gets its "process", procstat_json of
 * its "pid". */
void procstat_annotate_workers(json_t *doc);

/* The fields of a /proc/<pid>/stat text (bounded by len, need not end in
 * NUL): 0, or -1 when it does not have their shape. Pure, for the tests. */
int procstat_parse(const char *text, size_t len, long page_size, long ticks,
		   struct procstat *ps);

#endif
