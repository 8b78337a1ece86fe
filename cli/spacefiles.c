/* A space's files in the workspace (spacefiles.h). */
#include "cli/spacefiles.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "lib/log.h"
#include "lib/names.h"

int
space_files(const char *root, const char *space, struct space_files *f, char *err,
	     size_t errlen)
{
	memset(f, 0, sizeof(*f));
	if (strlen(space) > SPACE_NAME_MAX || !space_key(space, f->key, sizeof(f->key))) {
		snprintf(err, errlen, "--space: longer than %d bytes", SPACE_NAME_MAX);
		return -1;
	}
	snprintf(f->space, sizeof(f->space), "%s", space);
	if (ws_locate(root, &f->ws, err, errlen) != 0)
		return -1;
	snprintf(f->pid, sizeof(f->pid), "%s/delivery.%s.pid", f->ws.cotal, f->key);
	snprintf(f->status, sizeof(f->status), "%s/delivery.%s.status.json", f->ws.cotal, f->key);
	snprintf(f->log, sizeof(f->log), "%s/delivery.%s.log", f->ws.cotal, f->key);
	snprintf(f->up, sizeof(f->up), "%s/delivery.%s.up.json", f->ws.cotal, f->key);
	snprintf(f->stop, sizeof(f->stop), "%s/delivery.%s.stop", f->ws.cotal, f->key);
	snprintf(f->creds, sizeof(f->creds), "%s/space.%s/delivery.creds", f->ws.cotal, f->key);
	snprintf(f->run, sizeof(f->run), "%s/space.%s/delivery.run.json", f->ws.cotal, f->key);
	return 0;
}

int
space_files_args(const char *verb, int argc, char **argv, struct space_files *f)
{
	const char *root = NULL, *space = NULL;
	char err[WS_FILE_MAX + 256];

	for (int k = 0; k < argc; k++) {
		if (strcmp(argv[k], "--root") == 0 && k + 1 < argc)
			root = argv[++k];
		else if (strcmp(argv[k], "--space") == 0 && k + 1 < argc)
			space = argv[++k];
		else {
			log_errx("%s: unknown or incomplete argument \"%s\"", verb, argv[k]);
			return CLI_USAGE;
		}
	}
	if (space == NULL) {
		log_errx("%s: --space is required", verb);
		return CLI_USAGE;
	}
	if (strlen(space) > SPACE_NAME_MAX) {
		log_errx("%s: --space: longer than %d bytes", verb, SPACE_NAME_MAX);
		return CLI_USAGE;
	}
	if (space_files(root, space, f, err, sizeof(err)) != 0) {
		log_errx("%s: %s", verb, err);
		return 1;
	}
	return 0;
}

