/*
 * What a process costs, from /proc/<pid>/stat (lib/procstat.h).
 */
#include "lib/procstat.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
procstat_parse(const char *text, size_t len, long page_size, long ticks, struct procstat *ps)
{
	char buf[1024], *p, *end;
	unsigned long long v[22];

	if (len >= sizeof(buf) || page_size <= 0 || ticks <= 0)
		return -1;
	memcpy(buf, text, len);
	buf[len] = '\0';
	/* "pid (comm) S ppid ...": comm may hold spaces and ')' itself, the
	 * fields follow the last ')'. */
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ' || p[2] == '\0')
		return -1;
	p += 2; /* the state, field 3 */
	if (*p == '\0' || p[1] != ' ')
		return -1;
	ps->state = *p;
	p += 2;
	/* Fields 4 to 24: utime is 14, stime 15, rss (pages) 24. */
	for (int i = 0; i < 21; i++) {
		if (*p == '\0')
			return -1;
		v[i] = strtoull(p, &end, 10);
		if (end == p || (*end != ' ' && *end != '\n' && *end != '\0'))
			return -1;
		p = *end == '\0' ? end : end + 1;
	}
	ps->cpu_seconds = (double)(v[14 - 4] + v[15 - 4]) / (double)ticks;
	ps->start_ticks = v[22 - 4];
	ps->rss_bytes = (uint64_t)v[24 - 4] * (uint64_t)page_size;
	return 0;
}

int
procstat_read(pid_t pid, struct procstat *ps)
{
	char path[64], text[1024];
	ssize_t n;
	int fd;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	return procstat_parse(text, (size_t)n, sysconf(_SC_PAGESIZE), sysconf(_SC_CLK_TCK), ps);
}

json_t *
procstat_json(long long pid)
{
	struct procstat ps;

	if (pid <= 1 || pid > INT_MAX || procstat_read((pid_t)pid, &ps) != 0)
		return json_null();
	return json_pack("{s:I, s:f}", "rssBytes", (json_int_t)ps.rss_bytes, "cpuSeconds",
	    ps.cpu_seconds);
}

void
procstat_annotate_workers(json_t *doc)
{
	json_t *w;
	size_t i;

	json_array_foreach(json_object_get(doc, "workers"), i, w)
		json_object_set_new(w, "process",
		    procstat_json(json_integer_value(json_object_get(w, "pid"))));
}
