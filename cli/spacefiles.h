/*
 * A space's files in the workspace's .cotal/, by name: the daemon's pid
 * record, status file and log, the launcher's record and stop reservation,
 * the delivery credential and the run's record of it (launcher/launcher.h
 * says what each holds). Read by cotal status and by the launcher (cotal
 * up and down), which sits above cli/ and so takes them from here.
 */
#ifndef COTAL_CLI_SPACEFILES_H
#define COTAL_CLI_SPACEFILES_H

#include <stddef.h>

#include "lib/workspace.h"

/* One space's files in the workspace. */
struct space_files {
	struct workspace ws;
	char space[SPACE_NAME_MAX + 1];
	char key[SPACE_KEY_MAX + 1];
	char pid[WS_FILE_MAX];     /* the daemon's record */
	char status[WS_FILE_MAX];
	char log[WS_FILE_MAX];
	char up[WS_FILE_MAX];      /* the launcher's record */
	char stop[WS_FILE_MAX];    /* the stop reservation */
	char creds[WS_FILE_MAX];   /* space.<key>/delivery.creds */
	char run[WS_FILE_MAX];     /* space.<key>/delivery.run.json */
};
int space_files(const char *root, const char *space, struct space_files *f, char *err,
		 size_t errlen);
/* The same from `cotal <verb> --space S [--root DIR]`: 0, or the exit
 * status after saying what is wrong (2 usage, 1 no workspace). */
int space_files_args(const char *verb, int argc, char **argv, struct space_files *f);

#endif
