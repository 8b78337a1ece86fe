/*
 * The one table of cotal's interface (issue 43): every command, its
 * arguments, its flags with their one-line help, and the exit statuses.
 * `--help`, the usage line after a usage error, the man page's synopsis
 * lines and EXIT STATUS, and the bash completion are all printed from it
 * (the man page's prose stays hand-written; cmake/man-synopsis.sh and
 * tests/man/check_man.py hold the page and the completion to it).
 */
#ifndef COTAL_COTAL_COMMANDS_H
#define COTAL_COTAL_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#define CLI_FLAGS_MAX 16

struct cli_flag {
	const char *name;     /* "--space" */
	const char *arg;      /* "S"; NULL for a switch */
	bool required;
	const char *help;
};

struct cli_command {
	const char *group, *verb;     /* verb NULL: a one-word command */
	int (*fn)(int argc, char **argv);
	const char *args;             /* the positional arguments as shown, or NULL */
	const struct cli_flag *flags[CLI_FLAGS_MAX]; /* NULL-ended, in synopsis order */
	const char *tail;             /* shown after the flags ("[args ...]"), or NULL */
	const char *summary;          /* one line */
};

struct cli_exit {
	int code;
	const char *commands;         /* NULL: every command; else which */
	const char *when;
};

extern const struct cli_command cli_commands[];
extern const size_t cli_ncommands;
extern const struct cli_exit cli_exits[];
extern const size_t cli_nexits;

/* "agent join NAME CHANNEL --space S [--root DIR] ..." into buf. */
void cli_synopsis(const struct cli_command *c, char *buf, size_t len);
/* `cotal --help` (group NULL) or `cotal GROUP --help`: one line per command. */
void cli_list(FILE *f, const char *group);
/* `cotal COMMAND --help`: its synopses, what it does, each flag's help,
 * the exit statuses. */
void cli_help(FILE *f, const char *group, const char *verb);
/* After a usage error (a command returned CLI_USAGE): the usage line of
 * each form of the command on stderr. */
void cli_usage(const char *group, const char *verb);
/* `cotal --interface mdoc|mdoc-exit|bash`: the man page's synopsis lines,
 * its EXIT STATUS list, the bash completion. 0, or 2 for another word. */
int cli_interface(const char *what);

#endif
