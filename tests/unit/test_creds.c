/*
 * Unit tests for lib/creds/creds.c: format, tolerant parse, load-time file checks.
 */

#include <sys/stat.h>

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/dev_signer.h"
#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"

#define ERRLEN 512

struct fixture {
	char jwt[4096];
	char seed[NKEY_SEED_LEN + 1];
	char acct_seed[NKEY_SEED_LEN + 1];
	char dir[64];
};

static int
setup(void **state)
{
	struct dev_user_spec spec = { .name = "u" };
	struct nkey acct, user;
	char pub[NKEY_PUBLIC_LEN + 1], err[256], *tok;
	struct fixture *f;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return -1;
	if (nkey_generate(NKEY_ACCOUNT, &acct) != 0 ||
	    nkey_generate(NKEY_USER, &user) != 0)
		return -1;
	nkey_public(&user, pub);
	spec.sub_pub = pub;
	json_t *claims = dev_user_claims(&spec);
	tok = dev_jwt_sign(claims, &acct, err, sizeof(err));
	json_decref(claims);
	if (tok == NULL || strlen(tok) >= sizeof(f->jwt))
		return -1;
	strcpy(f->jwt, tok);
	free(tok);
	nkey_seed_text(&user, f->seed);
	nkey_seed_text(&acct, f->acct_seed);
	nkey_wipe(&acct);
	nkey_wipe(&user);
	strcpy(f->dir, "/tmp/cotal-test-creds.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	*state = f;
	return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	if (nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) != 0)
		return -1;
	secure_wipe(f, sizeof(*f));
	free(f);
	return 0;
}

static char *
text_of(const char *fmt, const char *jwt, const char *seed)
{
	size_t n = strlen(fmt) + strlen(jwt) + strlen(seed) + 1;
	char *s = malloc(n);

	assert_non_null(s);
	snprintf(s, n, fmt, jwt, seed);
	return s;
}

static void
test_format_is_standard(void **state)
{
	static const char want[] =
	    "-----BEGIN NATS USER JWT-----\n"
	    "%s\n"
	    "------END NATS USER JWT------\n"
	    "\n"
	    "************************* IMPORTANT *************************\n"
	    "NKEY Seed printed below can be used to sign and prove identity.\n"
	    "NKEYs are sensitive and should be treated as secrets.\n"
	    "\n"
	    "-----BEGIN USER NKEY SEED-----\n"
	    "%s\n"
	    "------END USER NKEY SEED------\n"
	    "\n"
	    "*************************************************************\n";
	struct fixture *f = *state;
	char *got, *exp;

	got = creds_format(f->jwt, f->seed);
	assert_non_null(got);
	exp = text_of(want, f->jwt, f->seed);
	assert_string_equal(got, exp);
	secure_wipe(got, strlen(got));
	free(got);
	free(exp);
}

static void
test_round_trip(void **state)
{
	struct fixture *f = *state;
	char err[ERRLEN], *text;
	struct creds c;
	struct jwt j;

	text = creds_format(f->jwt, f->seed);
	assert_non_null(text);
	assert_int_equal(creds_parse(text, strlen(text), &c, err, sizeof(err)),
	    0);
	assert_string_equal(c.jwt, f->jwt);
	assert_string_equal(c.seed, f->seed);
	assert_true(c.seed_cap > strlen(f->seed));
	assert_int_equal(jwt_decode(c.jwt, strlen(c.jwt), &j, err,
	    sizeof(err)), 0);
	assert_int_equal(j.kind, JWT_USER);
	jwt_free(&j);
	creds_free(&c);
	assert_null(c.jwt);
	assert_null(c.seed);
	assert_int_equal(c.seed_cap, 0);
	secure_wipe(text, strlen(text));
	free(text);
}

static void
test_tolerant_parse(void **state)
{
	/* CRLF, three-dash armour, indentation, a leading comment, and the
	 * blocks without the warning text in between. */
	static const char fmt[] =
	    "# issued for tests\r\n"
	    "  ---BEGIN NATS USER JWT---  \r\n"
	    "\r\n"
	    "   %s   \r\n"
	    "---END NATS USER JWT---\r\n"
	    "---BEGIN USER NKEY SEED---\r\n"
	    "\t%s\r\n"
	    "--------END USER NKEY SEED---------";
	struct fixture *f = *state;
	char err[ERRLEN], *text;
	struct creds c;

	text = text_of(fmt, f->jwt, f->seed);
	if (creds_parse(text, strlen(text), &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.jwt, f->jwt);
	assert_string_equal(c.seed, f->seed);
	creds_free(&c);
	free(text);
}

static void
expect_parse_error(const char *text, const char *want)
{
	char err[ERRLEN];
	struct creds c;

	assert_int_equal(creds_parse(text, strlen(text), &c, err, sizeof(err)),
	    -1);
	assert_string_equal(err, want);
	assert_null(c.jwt);
	assert_null(c.seed);
}

static void
test_parse_errors(void **state)
{
	struct fixture *f = *state;
	char *text, bad[NKEY_SEED_LEN + 1];

	text = text_of("-----BEGIN NATS USER JWT-----\n%s\n"
	    "------END NATS USER JWT------\n%s", f->jwt, "");
	expect_parse_error(text, "creds: no -----BEGIN USER NKEY SEED----- "
	    "block");
	free(text);

	text = text_of("%s-----BEGIN USER NKEY SEED-----\n%s\n"
	    "------END USER NKEY SEED------\n", "", f->seed);
	expect_parse_error(text, "creds: no -----BEGIN NATS USER JWT----- "
	    "block");
	free(text);

	expect_parse_error("", "creds: no -----BEGIN NATS USER JWT----- block");

	text = text_of("-----BEGIN NATS USER JWT-----\n%s\n"
	    "-----BEGIN USER NKEY SEED-----\n%s\n"
	    "------END USER NKEY SEED------\n", f->jwt, f->seed);
	expect_parse_error(text, "creds: NATS USER JWT block ends with a "
	    "foreign armour line");
	free(text);

	text = text_of("-----BEGIN NATS USER JWT-----\n%s\n%s\n", f->jwt,
	    f->jwt);
	expect_parse_error(text, "creds: NATS USER JWT block has more than one "
	    "line");
	free(text);

	text = text_of("-----BEGIN NATS USER JWT-----\n%s\n%s", f->jwt, "");
	expect_parse_error(text, "creds: NATS USER JWT block has no ------END "
	    "NATS USER JWT------ line");
	free(text);

	text = text_of("-----BEGIN NATS USER JWT-----\n%s"
	    "------END NATS USER JWT------\n%s", "", "");
	expect_parse_error(text, "creds: NATS USER JWT block is empty");
	free(text);

	text = text_of("-----BEGIN NATS USER JWT-----\nab cd%s\n"
	    "------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\n"
	    "%s\n------END USER NKEY SEED------\n", "", f->seed);
	expect_parse_error(text, "creds: JWT block holds a character that "
	    "cannot appear in a JWT");
	free(text);

	memcpy(bad, f->seed, sizeof(bad));
	bad[20] = bad[20] == 'A' ? 'B' : 'A';
	text = creds_format(f->jwt, bad);
	expect_parse_error(text, "creds: seed: bad CRC16 checksum");
	free(text);

	text = creds_format(f->jwt, f->acct_seed);
	expect_parse_error(text, "creds: seed is not a user seed (it is an "
	    "nkey of type account)");
	free(text);
}

static void
test_format_refuses_bad_input(void **state)
{
	struct fixture *f = *state;

	assert_null(creds_format(NULL, f->seed));
	assert_null(creds_format(f->jwt, NULL));
	assert_null(creds_format("", f->seed));
	assert_null(creds_format("a.b\n-----BEGIN USER NKEY SEED-----",
	    f->seed));
	assert_null(creds_format(f->jwt, "SU A"));
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
	int fd;

	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void
test_load(void **state)
{
	struct fixture *f = *state;
	char path[128], link[128], want[512], err[ERRLEN], *text;
	struct creds c;

	snprintf(path, sizeof(path), "%s/user.creds", f->dir);
	text = creds_format(f->jwt, f->seed);
	write_file(path, text, 0600);
	if (creds_load(path, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.jwt, f->jwt);
	assert_string_equal(c.seed, f->seed);
	creds_free(&c);

	/* 0400 is fine too: only group and other bits matter. */
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), 0);
	creds_free(&c);

	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "creds: %s is readable or writable by group or others "
	    "(mode 0644); chmod 600 it", path);
	assert_string_equal(err, want);
	assert_null(c.seed);

	/* Issue 27: refused when another user owns it (root's, systemd's
	 * LoadCredential= copies, are taken). Run as root, as CI does. */
	assert_int_equal(chmod(path, 0600), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_int_equal(creds_load(path, &c, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "creds: %s is owned by uid 65534, not by this user "
		    "(uid 0); refusing a secret another user controls", path);
		assert_string_equal(err, want);
		assert_int_equal(chown(path, 0, 0), 0);
	} else {
		assert_int_equal(chown(path, getuid(), getgid()), 0);
	}

	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "(mode 0640)"));
	assert_int_equal(chmod(path, 0600), 0);

	snprintf(link, sizeof(link), "%s/link.creds", f->dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(creds_load(link, &c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "creds: %s is a symbolic link; refusing "
	    "to follow it", link);
	assert_string_equal(err, want);

	assert_int_equal(creds_load(f->dir, &c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "creds: %s is not a regular file",
	    f->dir);
	assert_string_equal(err, want);

	/* A FIFO must be refused, not block the loader. */
	snprintf(link, sizeof(link), "%s/fifo.creds", f->dir);
	assert_int_equal(mkfifo(link, 0600), 0);
	assert_int_equal(creds_load(link, &c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "creds: %s is not a regular file", link);
	assert_string_equal(err, want);

	snprintf(link, sizeof(link), "%s/missing.creds", f->dir);
	assert_int_equal(creds_load(link, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file or directory"));

	/* Parse errors name the file. */
	write_file(path, "-----BEGIN NATS USER JWT-----\nabc\n"
	    "------END NATS USER JWT------\n", 0600);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "creds: %s: no -----BEGIN USER NKEY "
	    "SEED----- block", path);
	assert_string_equal(err, want);

	secure_wipe(text, strlen(text));
	free(text);
}

static void
test_load_too_big(void **state)
{
	struct fixture *f = *state;
	char path[128], err[ERRLEN], *big;
	struct creds c;

	snprintf(path, sizeof(path), "%s/big.creds", f->dir);
	big = malloc(CREDS_MAX_FILE + 2);
	assert_non_null(big);
	memset(big, '\n', CREDS_MAX_FILE + 1);
	big[CREDS_MAX_FILE + 1] = '\0';
	write_file(path, big, 0600);
	free(big);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than the 98304-byte limit"));
}

static void
test_secure_wipe(void **state)
{
	char buf[32];
	size_t i;

	(void)state;
	memset(buf, 'x', sizeof(buf));
	secure_wipe(buf, sizeof(buf));
	for (i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	secure_wipe(NULL, 10);
	creds_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_is_standard),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_tolerant_parse),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_format_refuses_bad_input),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_load_too_big),
		cmocka_unit_test(test_secure_wipe),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
