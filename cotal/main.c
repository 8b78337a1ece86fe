/*
 * cotal, the operator CLI of a Cotal delivery mesh: its entry. It finds the
 * command the words name in the one table (commands.h) and hands over to
 * it (cli/ and launcher/); --help, --version, a usage error's usage line
 * and --interface are said here, from the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cotal/commands.h"
#include "lib/log.h"
#include "lib/version.h"
#include "lib/nats/natsconn.h"

static bool
wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

static bool
wants_version(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--version") == 0)
			return true;
	return false;
}

/* A command's exit status: a usage error (CLI_USAGE) prints the command's
 * usage line from the table and is 2. */
static int
ran(const struct cli_command *c, int rc)
{
	if (rc != CLI_USAGE)
		return rc;
	cli_usage(c->group, c->verb);
	return 2;
}

int
main(int argc, char **argv)
{
	log_init(NULL, stderr);
	/* jansson seeds its hash from /dev/urandom on first use. */
	json_object_seed(0);
	umask(077);
	if (argc < 2) {
		cli_list(stderr, NULL);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		cli_list(stdout, NULL);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		cotal_version_print(stdout, "cotal");
		return 0;
	}
	/* The build's: the man page's synopsis and exit statuses, the bash
	 * completion, printed from the table (cmake/man-synopsis.sh). */
	if (strcmp(argv[1], "--interface") == 0 && argc == 3)
		return cli_interface(argv[2]);
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (strcmp(argv[1], c->group) != 0)
			continue;
		int skip = c->verb == NULL ? 2 : 3;
		if (c->verb != NULL && (argc < 3 || strcmp(argv[2], c->verb) != 0))
			continue;
		if (wants_help(argc - skip, argv + skip)) {
			cli_help(stdout, c->group, c->verb);
			return 0;
		}
		if (wants_version(argc - skip, argv + skip)) {
			cotal_version_print(stdout, "cotal");
			return 0;
		}
		int rc = ran(c, c->fn(argc - skip, argv + skip));
		if (c->verb != NULL)
			nats_Close();
		return rc;
	}
	for (size_t i = 0; i < cli_ncommands; i++)
		if (strcmp(argv[1], cli_commands[i].group) == 0 && wants_help(argc - 2, argv + 2)) {
			cli_list(stdout, argv[1]);
			return 0;
		} else if (strcmp(argv[1], cli_commands[i].group) == 0 &&
		    wants_version(argc - 2, argv + 2)) {
			cotal_version_print(stdout, "cotal");
			return 0;
		}
	log_errx("unknown command \"%s%s%s\"", argv[1], argc >= 3 ? " " : "", argc >= 3 ? argv[2] : "");
	cli_list(stderr, NULL);
	return 2;
}
