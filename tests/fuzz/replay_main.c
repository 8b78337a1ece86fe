/*
 * Corpus replay driver: runs a libFuzzer entry point over every file in the
 * directories (or files) named on the command line, so the seed corpus is
 * exercised by plain ctest without clang or libFuzzer.
 */

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLAY_MAX_INPUT (1024 * 1024) /* libFuzzer's default -max_len is far below */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	uint8_t *buf;
	size_t got = 0;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if ((buf = malloc(REPLAY_MAX_INPUT)) == NULL) {
		close(fd);
		return -1;
	}
	while (got < REPLAY_MAX_INPUT) {
		r = read(fd, buf + got, REPLAY_MAX_INPUT - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	/* Exactly-sized copy, so ASan sees reads past the input's end. */
	{
		uint8_t *exact = malloc(got > 0 ? got : 1);

		if (exact == NULL) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, got);
		free(buf);
		LLVMFuzzerTestOneInput(exact, got);
		free(exact);
	}
	return 0;
}

static int
skip_entry(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int
main(int argc, char **argv)
{
	struct dirent **names;
	struct stat st;
	char path[4096];
	int i, n, k, total = 0, failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s corpus-dir-or-file ...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) == -1) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= replay_file(argv[i]) == -1;
			total++;
			continue;
		}
		/* Sorted, so a failure reproduces in the same order. */
		if ((n = scandir(argv[i], &names, skip_entry, alphasort)) == -1) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			return 1;
		}
		for (k = 0; k < n; k++) {
			snprintf(path, sizeof(path), "%s/%s", argv[i],
			    names[k]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				failed |= replay_file(path) == -1;
				total++;
			}
			free(names[k]);
		}
		free(names);
	}
	printf("replayed %d inputs\n", total);
	/* An empty corpus means a wrong path, not a pass. */
	return failed || total == 0;
}
