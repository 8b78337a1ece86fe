/*
 * Credentials another Cotal toolchain mints (issue 14). The daemon's
 * features on exactly delivery-grants.json's grants run in the *_foreign
 * variants of the data-path, registry, lease and timer suites; this suite
 * takes the file apart: for every grant of it that a feature needs, a
 * credential without that grant. The daemon refuses at start naming a
 * missing subject the grant covered, or, for an optional feature (the
 * evictor), turns the feature off with its `!` line and serves; never a
 * daemon that says it is up and cannot deliver. `cotal creds audit` reads
 * the same credentials the same way.
 */
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/needs.h"
#include "lib/perms.h"
#include "lib/tokens.h"
#include "tests/harness/harness.h"

#define GRANTS COTAL_TEST_DATA "/delivery-grants.json"

static struct mesh mesh;

static int
setup(void **state)
{
	(void)state;
	return h_mesh_up(&mesh, "foreign", true);
}

static int
teardown(void **state)
{
	(void)state;
	h_mesh_down(&mesh);
	return 0;
}

/* The file with section.dir.allow[skip] left out, written into the mesh. */
static void
write_without(json_t *doc, const char *section, const char *dir, size_t skip, char *path,
	      size_t len)
{
	json_t *copy = json_deep_copy(doc);
	json_t *allow = json_object_get(json_object_get(json_object_get(copy, section), dir),
	    "allow");

	assert_int_equal(json_array_remove(allow, skip), 0);
	snprintf(path, len, "%s/grants-without.json", mesh.dir);
	assert_int_equal(json_dump_file(copy, path, JSON_INDENT(1)), 0);
	json_decref(copy);
}

/* The file's grant, filled for this mesh's space and a placeholder user. */
static void
fill(const char *g, char *out, size_t len)
{
	char buf[1024], *p;

	snprintf(buf, sizeof(buf), "%s", g);
	while ((p = strstr(buf, "<s>")) != NULL) {
		char rest[1024];
		snprintf(rest, sizeof(rest), "%s", p + 3);
		snprintf(p, sizeof(buf) - (size_t)(p - buf), "%s%s", mesh.token, rest);
	}
	snprintf(out, len, "%s", buf);
}

/*
 * Does some need of credential kind c, in direction d, rest on grant g of
 * the file (covered by g, and by no other grant of the file)? *optional
 * when every such need is optional.
 */
static bool
needed(enum need_cred c, enum perms_dir d, json_t *list, size_t gi, bool *optional)
{
	const struct need *t;
	size_t n, i;
	char g[1024], subj[1024], other[1024];
	bool hit = false;
	json_t *v;

	*optional = true;
	fill(json_string_value(json_array_get(list, gi)), g, sizeof(g));
	t = needs_table(&n);
	for (size_t k = 0; k < n; k++) {
		/* Any user and account fill the placeholders alike. */
		if (t[k].cred != c || t[k].dir != d ||
		    need_subject(&t[k], mesh.token, "_INBOX_USER", "ACCOUNT", subj, sizeof(subj)) != 0)
			continue;
		if (strncmp(g, "_INBOX", 6) == 0 && strncmp(subj, "_INBOX", 6) == 0) {
			hit = true; /* the reply inbox: the credential's own */
			*optional = *optional && t[k].optional;
			continue;
		}
		if (!subject_covers(g, subj))
			continue;
		bool elsewhere = false;
		json_array_foreach(list, i, v) {
			if (i == gi)
				continue;
			fill(json_string_value(v), other, sizeof(other));
			elsewhere = elsewhere || subject_covers(other, subj);
		}
		if (!elsewhere) {
			hit = true;
			*optional = *optional && t[k].optional;
		}
	}
	return hit;
}

/* `cotal creds mint --profile P --grants FILE --force`: the standing one. */
static int
mint(const char *profile, const char *file, char *out)
{
	return h_cotal(&mesh, out, H_OUT_MAX, "creds", "mint", "--space", mesh.space, "--profile",
	    profile, "--grants", file, "--force", NULL);
}

static void
test_every_needed_grant_is_checked_at_start(void **state)
{
	static const struct {
		const char *section, *profile;
		enum need_cred cred;
	} secs[] = {
		{ "delivery", "delivery", NEED_DELIVERY },
		{ "sys-observer", "sys-observer", NEED_SYS_OBSERVER },
		{ "sys-evictor", "sys-evictor", NEED_SYS_EVICTOR },
	};
	static const char *const dirs[2] = { "pub", "sub" };
	json_error_t je;
	json_t *doc = json_load_file(GRANTS, 0, &je);
	char *out = malloc(H_OUT_MAX), path[H_PATH_MAX];
	int refused = 0, off = 0, unneeded = 0;

	(void)state;
	assert_non_null(doc);
	assert_non_null(out);
	for (size_t si = 0; si < sizeof(secs) / sizeof(secs[0]); si++)
		for (int d = 0; d < 2; d++) {
			json_t *list = json_object_get(json_object_get(json_object_get(doc,
			    secs[si].section), dirs[d]), "allow");
			for (size_t gi = 0; gi < json_array_size(list); gi++) {
				bool optional;
				char g[1024];
				if (!needed(secs[si].cred, (enum perms_dir)d, list, gi, &optional)) {
					unneeded++;
					continue;
				}
				fill(json_string_value(json_array_get(list, gi)), g, sizeof(g));
				write_without(doc, secs[si].section, dirs[d], gi, path, sizeof(path));
				/* Every standing credential from the file, this one without g. */
				for (size_t k = 0; k < sizeof(secs) / sizeof(secs[0]); k++)
					if (mint(secs[k].profile, k == si ? path : GRANTS, out) != 0)
						fail_msg("cotal creds mint: %s", out);
				if (!optional) {
					int rc = h_daemon_run(&mesh, NULL, out, H_OUT_MAX, "--space", mesh.space,
					    "--root", mesh.dir, NULL);
					if (rc != 1 || strstr(out, "; not binding") == NULL ||
					    strstr(out, d == 0 ? "may not publish \"" : "may not subscribe to \"")
					    == NULL)
						fail_msg("%s without %s grant \"%s\": exit %d, expected a refusal "
						    "naming it:\n%s", secs[si].section, dirs[d], g, rc, out);
					assert_null(strstr(out, "delivery daemon up"));
					refused++;
					continue;
				}
				/* Optional: the feature off, the daemon serving. */
				struct daemon dm;
				assert_int_equal(h_daemon_start(&mesh, &dm, NULL), 0);
				bool said = h_log_has(dm.log, "is off", 20000);
				bool up = h_log_has(dm.log, "✓ delivery daemon up", 20000);
				kill(dm.pid, SIGTERM);
				if (h_daemon_wait_exit(&dm, 10000) < 0)
					h_daemon_kill(&dm);
				if (!said || !up)
					fail_msg("%s without %s grant \"%s\" (optional): %s", secs[si].section,
					    dirs[d], g, !said ? "no `!` line turning it off" :
					    "the daemon did not come up");
				off++;
			}
		}
	fprintf(stderr, "• %d grants refused at start, %d turned a feature off, %d needed by no "
	    "feature\n", refused, off, unneeded);
	assert_true(refused >= 40);
	assert_true(off >= 1);
	json_decref(doc);
	free(out);
}

/* cotal creds audit on the file's shapes: nothing required missing, the
 * grants no feature needs marked, registerChannel's absent grant listed. */
static void
test_audit_reads_the_files_shapes(void **state)
{
	char *out = malloc(H_OUT_MAX), creds[H_PATH_MAX], key[SPACE_KEY_MAX + 1], want[512];

	(void)state;
	assert_non_null(out);
	assert_int_equal(mint("delivery", GRANTS, out), 0);
	assert_true(space_key(mesh.space, key, sizeof(key)));
	snprintf(creds, sizeof(creds), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	int rc = h_cotal(&mesh, out, H_OUT_MAX, "creds", "audit", creds, NULL);
	if (rc != 0)
		fail_msg("audit exit %d:\n%s", rc, out);
	snprintf(want, sizeof(want), "! publish \"$KV.cotal_channels_%s.>\" — registerChannel "
	    "(optional: off without it)", mesh.token);
	if (strstr(out, want) == NULL)
		fail_msg("expected \"%s\" in:\n%s", want, out);
	assert_non_null(strstr(out, "✓ nothing required is missing"));
	assert_non_null(strstr(out, "  + $JS.FC.>  — beyond the profile"));
	free(out);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_needed_grant_is_checked_at_start),
		cmocka_unit_test(test_audit_reads_the_files_shapes),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
