/*
 * The spaces manifest of a delivery host (lib/manifest.c), issue 17: "The
 * manifest is JSON: {"spaces":[{"space":"<name>","root":"<workspace
 * root>","server":"nats://…"}, …]} (server optional per lane [...]; other
 * keys refused). It is validated before anything starts: a bad entry is
 * refused naming its index and field, and duplicate spaces are refused."
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/manifest.h"

static int
parse(const char *text, struct manifest *m, char *err, size_t errlen)
{
	return manifest_parse(text, strlen(text), m, err, errlen);
}

static void
test_a_valid_manifest_gives_one_lane_per_entry(void **state)
{
	struct manifest m;
	char err[512];

	(void)state;
	assert_int_equal(parse("{\"spaces\":[{\"space\":\"a\",\"root\":\"/srv/a\"},"
	    "{\"space\":\"b\",\"root\":\"/srv/b\",\"server\":\"nats://10.0.0.1:4222,"
	    "nats://10.0.0.2:4222\"}]}", &m, err, sizeof(err)), 0);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.lanes[0].space, "a");
	assert_string_equal(m.lanes[0].root, "/srv/a");
	assert_string_equal(m.lanes[0].server, "");
	assert_string_equal(m.lanes[1].server, "nats://10.0.0.1:4222,nats://10.0.0.2:4222");
	assert_ptr_equal(manifest_find(&m, "b"), &m.lanes[1]);
	assert_null(manifest_find(&m, "c"));
	manifest_free(&m);
	assert_int_equal(m.n, 0);
}

static void
test_each_bad_entry_is_named_by_index_and_field(void **state)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "", "not JSON" },
		{ "[]", "not a JSON object" },
		{ "{}", "spaces: missing" },
		{ "{\"spaces\":{}}", "spaces: not an array" },
		{ "{\"spaces\":[]}", "spaces: 0 entries (1 to 256)" },
		{ "{\"spaces\":[1]}", "spaces[0]: not an object" },
		{ "{\"spaces\":[{\"root\":\"/a\"}]}", "spaces[0].space: missing" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\"},{\"space\":\"b\"}]}",
		  "spaces[1].root: missing" },
		{ "{\"spaces\":[{\"space\":7,\"root\":\"/a\"}]}", "spaces[0].space: not a string" },
		{ "{\"spaces\":[{\"space\":\"\",\"root\":\"/a\"}]}", "spaces[0].space: empty" },
		{ "{\"spaces\":[{\"space\":\"a\\n\",\"root\":\"/a\"}]}",
		  "spaces[0].space: holds a NUL or control byte" },
		{ "{\"spaces\":[{\"space\":\"a\\u0000b\",\"root\":\"/a\"}]}",
		  "not JSON (line 1: \\u0000 is not allowed" },
		{ "{\"spaces\":[{\"space\":\"--spaces\",\"root\":\"/a\"}]}",
		  "spaces[0].space: \"--spaces\" begins with '-' (it would read as an option)" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"srv/a\"}]}",
		  "spaces[0].root: \"srv/a\" is not an absolute path" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\",\"server\":\"http://x\"}]}",
		  "spaces[0].server: \"http://x\" is not a nats:// or tls:// URL" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\",\"server\":\"nats://x,\"}]}",
		  "spaces[0].server:" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\",\"server\":\"nats://\"}]}",
		  "spaces[0].server:" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\",\"server\":null}]}",
		  "spaces[0].server: not a string" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\",\"user\":\"x\"}]}",
		  "spaces[0]: unknown field \"user\" (a lane has space, root and server)" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\"}],\"server\":\"nats://x\"}",
		  "unknown field \"server\" (a manifest has only \"spaces\")" },
		{ "{\"spaces\":[{\"space\":\"a\",\"root\":\"/a\"},{\"space\":\"b\",\"root\":\"/b\"},"
		  "{\"space\":\"a\",\"root\":\"/c\"}]}",
		  "spaces[2].space: \"a\" is spaces[0]'s too (one lane per space)" },
		{ "{\"spaces\":[{\"space\":\"a\",\"space\":\"b\",\"root\":\"/a\"}]}", "not JSON" },
	};
	struct manifest m;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (parse(bad[i].text, &m, err, sizeof(err)) != -1 ||
		    strstr(err, bad[i].says) == NULL)
			fail_msg("case %zu: %s: got \"%s\", want \"%s\"", i, bad[i].text, err,
			    bad[i].says);
		assert_int_equal(m.n, 0);
		assert_null(m.lanes);
	}
}

static void
test_bounds_hold(void **state)
{
	char err[512], name[SPACE_NAME_MAX + 2];
	size_t cap = 64 * (MANIFEST_LANES_MAX + 2);
	char *text = malloc(cap);
	struct manifest m;
	size_t off;

	(void)state;
	assert_non_null(text);
	/* A space name one byte over the bound. */
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(text, cap, "{\"spaces\":[{\"space\":\"%s\",\"root\":\"/a\"}]}", name);
	assert_int_equal(parse(text, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "spaces[0].space: longer than 256 bytes"));
	/* One lane more than the bound. */
	off = (size_t)snprintf(text, cap, "{\"spaces\":[");
	for (int i = 0; i <= MANIFEST_LANES_MAX; i++)
		off += (size_t)snprintf(text + off, cap - off, "%s{\"space\":\"s%d\",\"root\":\"/a\"}",
		    i ? "," : "", i);
	snprintf(text + off, cap - off, "]}");
	assert_int_equal(parse(text, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "spaces: 257 entries (1 to 256)"));
	/* Exactly the bound. */
	off = (size_t)snprintf(text, cap, "{\"spaces\":[");
	for (int i = 0; i < MANIFEST_LANES_MAX; i++)
		off += (size_t)snprintf(text + off, cap - off, "%s{\"space\":\"s%d\",\"root\":\"/a\"}",
		    i ? "," : "", i);
	snprintf(text + off, cap - off, "]}");
	assert_int_equal(parse(text, &m, err, sizeof(err)), 0);
	assert_int_equal(m.n, MANIFEST_LANES_MAX);
	manifest_free(&m);
	/* A text over the byte bound is refused before it is parsed. */
	assert_int_equal(manifest_parse(text, MANIFEST_BYTES_MAX + 1, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "larger than"));
	free(text);
}

static void
test_the_hosts_records_sit_beside_the_manifest_or_in_the_run_dir(void **state)
{
	char pid[256], st[256], err[256];

	(void)state;
	assert_int_equal(manifest_host_files("/etc/cotal/spaces.json", NULL, pid, sizeof(pid), st,
	    sizeof(st), err, sizeof(err)), 0);
	assert_string_equal(pid, "/etc/cotal/spaces.host.pid");
	assert_string_equal(st, "/etc/cotal/spaces.host.json");
	assert_int_equal(manifest_host_files("/etc/cotal/spaces.json", "/run/cotal", pid,
	    sizeof(pid), st, sizeof(st), err, sizeof(err)), 0);
	assert_string_equal(pid, "/run/cotal/spaces.host.pid");
	assert_string_equal(st, "/run/cotal/spaces.host.json");
	assert_int_equal(manifest_host_files("lanes", "", pid, sizeof(pid), st, sizeof(st), err,
	    sizeof(err)), 0);
	assert_string_equal(pid, "./lanes.host.pid");
	assert_int_equal(manifest_host_files("/x/", NULL, pid, sizeof(pid), st, sizeof(st),
	    err, sizeof(err)), -1);
	assert_int_equal(manifest_host_files("/etc/cotal/spaces.json", NULL, pid, 10, st,
	    sizeof(st), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too long"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_valid_manifest_gives_one_lane_per_entry),
		cmocka_unit_test(test_each_bad_entry_is_named_by_index_and_field),
		cmocka_unit_test(test_bounds_hold),
		cmocka_unit_test(test_the_hosts_records_sit_beside_the_manifest_or_in_the_run_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
