/*
 * What a workspace holds, by name: refusals that say what exists instead
 * of a system error on a file (issue 43).
 */
#ifndef COTAL_WSNAMES_H
#define COTAL_WSNAMES_H

#include <stddef.h>

#include "lib/workspace.h"

/* 0 when the workspace holds the space; else -1 with err "no space S in
 * ROOT (spaces: a, b)", or the commands that make one when it holds none. */
int ws_space_known(const struct workspace *ws, const char *space, char *err, size_t errlen);
/* The spaces the workspace holds: how many, joined as "a, b" into list
 * (20 shown, then "and N more"), and into only the name when there is one. */
size_t ws_space_names(const struct workspace *ws, char *list, size_t listlen, char *only,
		      size_t onlylen);
/* 0 when the space holds the agent; else -1 with err "no agent A in space S
 * (agents: a, b)", or the command that adds one (or ws_space_known's). */
int ws_agent_known(const struct workspace *ws, const char *space, const char *agent, char *err,
		   size_t errlen);

#endif
