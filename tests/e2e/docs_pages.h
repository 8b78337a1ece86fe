/*
 * The example commands of README.md and the pages of docs/, as e2e_docs
 * reads them (docs/development.md, "Tested examples"): a fenced block's
 * commands, with the output lines a transcript shows after each, and how a
 * shown line is matched against a run's output. Pure text; what is done
 * with an example (run, listed, its outcome) is e2e_docs.c's. A page that
 * cannot be read fails the running cmocka test.
 */
#ifndef COTAL_TESTS_DOCS_PAGES_H
#define COTAL_TESTS_DOCS_PAGES_H

#include <stdbool.h>

#define DOCS_CMD_MAX 2048 /* one command, its continuation lines included */
#define DOCS_OUT_MAX 24   /* shown output lines kept per command */

struct docs_example {
	char page[64]; /* relative to the source tree: README.md, docs/x.md */
	int line;      /* of the command's first line, from 1 */
	char cmd[DOCS_CMD_MAX];
	int nout;
	char out[DOCS_OUT_MAX][512];
};

/*
 * The examples of root's README.md, then of the .md pages of root/docs
 * (glob's order), each page's in the order it shows them, into ex[0..max);
 * the count.
 *
 * An example is a line of a ```sh or ```console block (neither indented,
 * blank nor a comment), or in any fenced block a line starting `$ `; a
 * block with a `$ ` line is a transcript, whose other lines are the output
 * the command before them shows. A command runs on to the next lines while
 * a shell quote is open or it ends in a backslash; an unquoted `#` comment
 * is cut.
 */
int docs_extract_all(const char *root, struct docs_example *ex, int max);

/*
 * Whether a line of out (lines ended by '\n') is the line shown, a line a
 * page shows with its words already as this run prints them: numbers and
 * `…` in shown stand for any value, blanks at its end for any number.
 */
bool docs_shown_in_output(const char *shown, const char *out);

#endif
