/*
 * A daemon's status document as `cotal status` prints it, beneath both of
 * its forms: one space (status.c, `--space S`) and a host's lanes
 * (status_host.c, `--spaces MANIFEST`), which status.c hands over to.
 * Neither calls back: what both print of a document is here.
 */
#ifndef COTAL_CLI_STATUS_DOC_H
#define COTAL_CLI_STATUS_DOC_H

#include <jansson.h>

/* A daemon status file's workers, one line each, after indent. */
void status_print_workers(json_t *doc, const char *indent);
/* `cotal status --json` (docs/status-json.md): the schema the document
 * names, and the document on stdout (0, or 1 having said why). What each
 * process costs comes from lib/procstat.h. */
#define STATUS_SCHEMA "cotal-delivery-status/1"
int status_json_print(json_t *doc);

#endif
