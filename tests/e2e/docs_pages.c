/*
 * docs_pages: the example commands of README.md and the pages of docs/,
 * read out of the pages for e2e_docs (docs/development.md, "Tested
 * examples"; issue 43), and a shown output line matched against a run's
 * output. Fenced blocks, shell quoting and comments, continuation lines,
 * a transcript's shown output: see docs_pages.h.
 */
#include <ctype.h>
#include <glob.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "tests/e2e/docs_pages.h"

/* Scan s for shell quotes: whether one is still open at its end; *cut gets
 * the offset of an unquoted comment (a `#` after a blank), or -1. */
static bool
quote_open(const char *s, int *cut)
{
	char q = 0;

	*cut = -1;
	for (size_t i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		if (q == '\'') {
			if (c == '\'')
				q = 0;
		} else if (c == '\\' && s[i + 1] != '\0') {
			i++;
		} else if (q == '"') {
			if (c == '"')
				q = 0;
		} else if (c == '\'' || c == '"') {
			q = c;
		} else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
			*cut = (int)i;
			return false;
		}
	}
	return q != 0;
}

static void
rtrim(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

/* A command starting at line i of lines: comment cut, continued onto the
 * next lines while a quote is open or the line ends in a backslash. The
 * index of its last line. */
static int
take_command(char **lines, int n, int i, const char *first, struct docs_example *e)
{
	int cut;
	char buf[DOCS_CMD_MAX];

	snprintf(buf, sizeof(buf), "%s", first);
	for (;;) {
		bool open = quote_open(buf, &cut);
		if (cut >= 0)
			buf[cut] = '\0';
		rtrim(buf);
		size_t len = strlen(buf);
		bool backslash = len > 0 && buf[len - 1] == '\\';
		if ((!open && !backslash) || i + 1 >= n)
			break;
		i++;
		size_t room = sizeof(buf) - strlen(buf) - 1;
		strncat(buf, "\n", room);
		strncat(buf, lines[i], room > 0 ? room - 1 : 0);
	}
	snprintf(e->cmd, sizeof(e->cmd), "%s", buf);
	return i;
}

/* The examples of root/page appended to ex[*nex..max). */
static void
extract_page(const char *root, const char *page, struct docs_example *ex, int *nex, int max)
{
	char path[1024], *text = NULL, *lines[4096];
	int n = 0;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, page);
	f = fopen(path, "r");
	assert_non_null(f);
	ssize_t len = getdelim(&text, &cap, '\0', f);
	fclose(f);
	assert_true(len >= 0);
	for (char *s = text, *nl; s != NULL && *s != '\0' && n < 4096; s = nl) {
		nl = strchr(s, '\n');
		if (nl != NULL)
			*nl++ = '\0';
		lines[n++] = s;
	}
	for (int i = 0; i < n; i++) {
		const char *l = lines[i];
		while (*l == ' ')
			l++;
		if (strncmp(l, "```", 3) != 0)
			continue;
		char info[32];
		snprintf(info, sizeof(info), "%s", l + 3);
		rtrim(info);
		bool sh = strcmp(info, "sh") == 0 || strcmp(info, "console") == 0;
		int end = i + 1, open = i + 1;
		bool transcript = false;
		while (end < n && strncmp(lines[end] + strspn(lines[end], " "), "```", 3) != 0) {
			if (strncmp(lines[end], "$ ", 2) == 0)
				transcript = true;
			end++;
		}
		for (int j = open; j < end && *nex < max; j++) {
			struct docs_example *e = &ex[*nex];
			const char *first = NULL;
			if (strncmp(lines[j], "$ ", 2) == 0)
				first = lines[j] + 2;
			else if (sh && !transcript && lines[j][0] != '\0' && !isspace((unsigned char)lines[j][0]) &&
			    lines[j][0] != '#')
				first = lines[j];
			if (first == NULL)
				continue;
			memset(e, 0, sizeof(*e));
			snprintf(e->page, sizeof(e->page), "%s", page);
			e->line = j + 1;
			j = take_command(lines, end, j, first, e);
			if (transcript)
				while (j + 1 < end && strncmp(lines[j + 1], "$ ", 2) != 0) {
					j++;
					if (lines[j][0] != '\0' && e->nout < DOCS_OUT_MAX)
						snprintf(e->out[e->nout++], sizeof(e->out[0]), "%s", lines[j]);
				}
			(*nex)++;
		}
		i = end;
	}
	free(text);
}

int
docs_extract_all(const char *root, struct docs_example *ex, int max)
{
	glob_t g;
	char pat[1024];
	int nex = 0;

	extract_page(root, "README.md", ex, &nex, max);
	snprintf(pat, sizeof(pat), "%s/docs/*.md", root);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	for (size_t i = 0; i < g.gl_pathc; i++)
		extract_page(root, g.gl_pathv[i] + strlen(root) + 1, ex, &nex, max);
	globfree(&g);
	return nex;
}

/* A line the page shows (already expanded), as a pattern: numbers and `…`
 * standing for any value. */
static void
line_pattern(const char *shown, char *re, size_t len)
{
	size_t o = 0;

	re[o++] = '^';
	for (const char *s = shown; *s != '\0' && o + 8 < len; s++) {
		if (isdigit((unsigned char)*s)) {
			while (isdigit((unsigned char)s[1]))
				s++;
			memcpy(re + o, "[0-9]+", 6);
			o += 6;
		} else if (strncmp(s, "…", strlen("…")) == 0) {
			s += strlen("…") - 1;
			memcpy(re + o, ".*", 2);
			o += 2;
		} else {
			if (strchr(".[]()*+?{}|^$\\", *s) != NULL)
				re[o++] = '\\';
			re[o++] = *s;
		}
	}
	while (o > 1 && re[o - 1] == ' ')
		o--;
	re[o++] = ' ';
	re[o++] = '*';
	re[o++] = '$';
	re[o] = '\0';
}

bool
docs_shown_in_output(const char *shown, const char *out)
{
	char re[2048];
	regex_t r;
	bool found = false;
	const char *at = out;

	line_pattern(shown, re, sizeof(re));
	assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
	while (*at != '\0' && !found) {
		const char *nl = strchr(at, '\n');
		size_t l = nl ? (size_t)(nl - at) : strlen(at);
		char line[4096];
		snprintf(line, sizeof(line), "%.*s", (int)l, at);
		found = regexec(&r, line, 0, NULL, 0) == 0;
		at += l + (nl ? 1 : 0);
	}
	regfree(&r);
	return found;
}
