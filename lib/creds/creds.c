/*
 * NATS .creds files: parse, load and format.
 *
 * The format nsc and the Go jwt library write is a user JWT and a user
 * nkey seed, each between armour lines, with a warning in between. Like
 * nats.c and nats-server we accept armour lines with three or more dashes
 * and ignore surrounding whitespace and text outside the two blocks.
 *
 * The seed is the credential. Its text only ever lives in page-sized
 * mappings that are mlock()ed (so it is not written to swap; failure to
 * lock is tolerated because RLIMIT_MEMLOCK may be zero), excluded from
 * core dumps, and wiped before they are unmapped. That includes the buffer
 * creds_load() reads the whole file into.
 */

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/creds/creds.h"
#include "lib/refuse.h"
#include "lib/workspace.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"

#define ARMOUR_DASHES_MIN 3
#define JWT_LABEL "NATS USER JWT"
#define SEED_LABEL "USER NKEY SEED"
#define FALLBACK_PAGE 4096

struct span {
	const char *p;
	size_t n;
};

void
secure_wipe(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

/* A zeroed, locked, undumpable mapping of at least n bytes. */
static void *
secure_alloc(size_t n, size_t *cap)
{
	long pg;
	size_t c;
	void *p;

	if ((pg = sysconf(_SC_PAGESIZE)) <= 0)
		pg = FALLBACK_PAGE;
	if (n == 0 || n > SIZE_MAX - (size_t)pg)
		return NULL;
	c = (n + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	p = mmap(NULL, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	(void)mlock(p, c);
	(void)madvise(p, c, MADV_DONTDUMP);
	*cap = c;
	return p;
}

static void
secure_free(void *p, size_t cap)
{
	if (p == NULL)
		return;
	secure_wipe(p, cap);
	(void)munlock(p, cap);
	(void)munmap(p, cap);
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
	    c == '\f';
}

static struct span
trim(struct span s)
{
	while (s.n > 0 && is_space(s.p[0])) {
		s.p++;
		s.n--;
	}
	while (s.n > 0 && is_space(s.p[s.n - 1]))
		s.n--;
	return s;
}

/* Next line of text from *pos, without its newline, trimmed. */
static bool
next_line(const char *text, size_t len, size_t *pos, struct span *line)
{
	const char *nl;

	if (*pos >= len)
		return false;
	line->p = text + *pos;
	nl = memchr(line->p, '\n', len - *pos);
	line->n = nl != NULL ? (size_t)(nl - line->p) : len - *pos;
	*pos += line->n + (nl != NULL);
	*line = trim(*line);
	return true;
}

static bool
starts_with(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n >= n && memcmp(s.p, lit, n) == 0;
}

/* Is line "---...<word> <label>---..." with at least three dashes a side? */
static bool
armour_is(struct span line, const char *word, const char *label)
{
	size_t i = 0, dashes, wl = strlen(word), ll = strlen(label);

	while (i < line.n && line.p[i] == '-')
		i++;
	if (i < ARMOUR_DASHES_MIN)
		return false;
	if (line.n - i < wl + 1 + ll || memcmp(line.p + i, word, wl) != 0 ||
	    line.p[i + wl] != ' ' || memcmp(line.p + i + wl + 1, label, ll) != 0)
		return false;
	i += wl + 1 + ll;
	for (dashes = 0; i < line.n && line.p[i] == '-'; i++)
		dashes++;
	return dashes >= ARMOUR_DASHES_MIN && i == line.n;
}

/*
 * The single non-empty line between the first BEGIN <label> armour and
 * its END armour.
 */
static int
find_block(const char *text, size_t len, const char *label, const char *pfx,
    struct span *content, char *err, size_t errlen)
{
	struct span line;
	size_t pos = 0;

	while (next_line(text, len, &pos, &line)) {
		if (!armour_is(line, "BEGIN", label))
			continue;
		content->p = NULL;
		content->n = 0;
		while (next_line(text, len, &pos, &line)) {
			if (starts_with(line, "---")) {
				if (!armour_is(line, "END", label)) {
					seterr(err, errlen, "%s: %s block ends "
					    "with a foreign armour line", pfx,
					    label);
					return -1;
				}
				if (content->n == 0) {
					seterr(err, errlen, "%s: %s block is "
					    "empty", pfx, label);
					return -1;
				}
				return 0;
			}
			if (line.n == 0)
				continue;
			if (content->n != 0) {
				seterr(err, errlen, "%s: %s block has more "
				    "than one line", pfx, label);
				return -1;
			}
			*content = line;
		}
		seterr(err, errlen, "%s: %s block has no ------END %s------ "
		    "line", pfx, label, label);
		return -1;
	}
	seterr(err, errlen, "%s: no -----BEGIN %s----- block", pfx, label);
	return -1;
}

static bool
jwt_chars_ok(struct span s)
{
	size_t i;
	char c;

	for (i = 0; i < s.n; i++) {
		c = s.p[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

static int
parse(const char *text, size_t len, struct creds *out, const char *pfx,
    char *err, size_t errlen)
{
	struct span jwt, seed;
	struct nkey k;
	char kerr[128];
	int type;

	memset(out, 0, sizeof(*out));
	if (text == NULL) {
		seterr(err, errlen, "%s: no text", pfx);
		return -1;
	}
	if (len > CREDS_MAX_FILE) {
		seterr(err, errlen, "%s: %zu bytes, more than the %d-byte limit",
		    pfx, len, CREDS_MAX_FILE);
		return -1;
	}
	if (find_block(text, len, JWT_LABEL, pfx, &jwt, err, errlen) == -1 ||
	    find_block(text, len, SEED_LABEL, pfx, &seed, err, errlen) == -1)
		return -1;
	if (jwt.n > JWT_MAX_LEN) {
		seterr(err, errlen, "%s: JWT is longer than %d bytes", pfx,
		    JWT_MAX_LEN);
		return -1;
	}
	if (!jwt_chars_ok(jwt)) {
		seterr(err, errlen, "%s: JWT block holds a character that "
		    "cannot appear in a JWT", pfx);
		return -1;
	}
	/* Decode the seed now so a damaged file is refused at load time,
	 * not at the first connection attempt. */
	if (nkey_from_seed(seed.p, seed.n, &k, kerr, sizeof(kerr)) == -1) {
		seterr(err, errlen, "%s: %s", pfx, kerr);
		return -1;
	}
	type = k.type;
	nkey_wipe(&k);
	if (type != NKEY_USER) {
		seterr(err, errlen, "%s: seed is not a user seed (it is an "
		    "nkey of type %s)", pfx, nkey_type_name(type));
		return -1;
	}

	if ((out->jwt = malloc(jwt.n + 1)) == NULL ||
	    (out->seed = secure_alloc(seed.n + 1, &out->seed_cap)) == NULL) {
		free(out->jwt);
		memset(out, 0, sizeof(*out));
		seterr(err, errlen, "%s: out of memory", pfx);
		return -1;
	}
	memcpy(out->jwt, jwt.p, jwt.n);
	out->jwt[jwt.n] = '\0';
	memcpy(out->seed, seed.p, seed.n);
	out->seed[seed.n] = '\0';
	return 0;
}

int
creds_parse(const char *text, size_t len, struct creds *out, char *err,
    size_t errlen)
{
	return parse(text, len, out, "creds", err, errlen);
}

int
creds_load(const char *path, struct creds *out, char *err, size_t errlen)
{
	char pfx[512];
	struct stat st;
	size_t cap = 0, got = 0;
	char *buf = NULL;
	ssize_t r;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	/*
	 * O_NOFOLLOW: a symlink planted in place of the file must not
	 * redirect us; the checks below are then about this very inode.
	 * O_NONBLOCK: a FIFO put there must not hang us in open(); it is
	 * refused as not a regular file. Regular files ignore the flag.
	 */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
	    O_NONBLOCK)) == -1) {
		if (errno == ELOOP)
			seterr(err, errlen, "creds: %s is a symbolic link; "
			    "refusing to follow it", path);
		else
			seterr(err, errlen, "creds: %s: %s", path,
			    strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		seterr(err, errlen, "creds: %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		seterr(err, errlen, "creds: %s is not a regular file", path);
		goto out;
	}
	/* Ours, or root's (systemd's LoadCredential= copies), and nobody
	 * else's to read. */
	if (ws_secret_ok(path, &st, true, pfx, sizeof(pfx)) != 0) {
		seterr(err, errlen, "creds: %s", pfx);
		goto out;
	}
	if (st.st_size > CREDS_MAX_FILE) {
		seterr(err, errlen, "creds: %s is %lld bytes, more than the "
		    "%d-byte limit", path, (long long)st.st_size,
		    CREDS_MAX_FILE);
		goto out;
	}
	/* One byte of slack tells a file that grew past the limit since
	 * fstat() from one that is exactly at it. */
	if ((buf = secure_alloc(CREDS_MAX_FILE + 1, &cap)) == NULL) {
		seterr(err, errlen, "creds: %s: out of memory", path);
		goto out;
	}
	while (got < CREDS_MAX_FILE + 1) {
		r = read(fd, buf + got, CREDS_MAX_FILE + 1 - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			seterr(err, errlen, "creds: %s: %s", path,
			    strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got > CREDS_MAX_FILE) {
		seterr(err, errlen, "creds: %s is more than %d bytes", path,
		    CREDS_MAX_FILE);
		goto out;
	}
	snprintf(pfx, sizeof(pfx), "creds: %s", path);
	rc = parse(buf, got, out, pfx, err, errlen);
out:
	secure_free(buf, cap);
	close(fd);
	return rc;
}

void
creds_free(struct creds *c)
{
	if (c == NULL)
		return;
	if (c->jwt != NULL) {
		/* A user JWT is a bearer credential for some setups. */
		secure_wipe(c->jwt, strlen(c->jwt));
		free(c->jwt);
	}
	secure_free(c->seed, c->seed_cap);
	memset(c, 0, sizeof(*c));
}

/* Only printable, non-space ASCII may go between armour lines. */
static bool
token_ok(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return false;
	return true;
}

#define CREDS_TEMPLATE \
    "-----BEGIN " JWT_LABEL "-----\n" \
    "%s\n" \
    "------END " JWT_LABEL "------\n" \
    "\n" \
    "************************* IMPORTANT *************************\n" \
    "NKEY Seed printed below can be used to sign and prove identity.\n" \
    "NKEYs are sensitive and should be treated as secrets.\n" \
    "\n" \
    "-----BEGIN " SEED_LABEL "-----\n" \
    "%s\n" \
    "------END " SEED_LABEL "------\n" \
    "\n" \
    "*************************************************************\n"

char *
creds_format(const char *jwt, const char *seed)
{
	size_t n;
	char *out;

	if (!token_ok(jwt) || !token_ok(seed))
		return NULL;
	n = sizeof(CREDS_TEMPLATE) + strlen(jwt) + strlen(seed);
	if ((out = malloc(n)) == NULL)
		return NULL;
	snprintf(out, n, CREDS_TEMPLATE, jwt, seed);
	return out;
}
