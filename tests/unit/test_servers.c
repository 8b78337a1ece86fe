/*
 * The server list (lib/servers.h): one nats:// URL or a cluster's URLs,
 * comma-separated, split and built in one place (issue 26).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/servers.h"

static void
test_next_walks_every_url_and_skips_empty_items(void **state)
{
	const char *list = ",nats://a:1,,nats://b:2,", *c = list, *u;
	size_t n;

	(void)state;
	n = servers_next(&c, &u);
	assert_int_equal(n, strlen("nats://a:1"));
	assert_memory_equal(u, "nats://a:1", n);
	n = servers_next(&c, &u);
	assert_int_equal(n, strlen("nats://b:2"));
	assert_memory_equal(u, "nats://b:2", n);
	assert_int_equal(servers_next(&c, &u), 0);
	assert_int_equal(servers_next(&c, &u), 0);
}

static void
test_count_is_the_urls_given(void **state)
{
	(void)state;
	assert_int_equal(servers_count(NULL), 0);
	assert_int_equal(servers_count(""), 0);
	assert_int_equal(servers_count(",,"), 0);
	assert_int_equal(servers_count("nats://a:1"), 1);
	assert_int_equal(servers_count("nats://a:1,nats://b:2,nats://c:3"), 3);
	assert_int_equal(servers_count("nats://a:1,,nats://b:2,"), 2);
}

static void
test_has_matches_whole_urls_only(void **state)
{
	const char *all = "nats://a:1,nats://b:22";

	(void)state;
	assert_true(servers_has(all, "nats://b:22", strlen("nats://b:22")));
	assert_true(servers_has(all, "nats://a:1,x", strlen("nats://a:1")));
	assert_false(servers_has(all, "nats://b:2", strlen("nats://b:2")));
	assert_false(servers_has(all, "nats://a:10", strlen("nats://a:10")));
	assert_false(servers_has("", "nats://a:1", strlen("nats://a:1")));
}

static void
test_append_joins_with_commas_and_refuses_what_does_not_fit(void **state)
{
	char out[24] = "";

	(void)state;
	assert_true(servers_append(out, sizeof(out), "nats://a:1"));
	assert_string_equal(out, "nats://a:1");
	assert_true(servers_append(out, sizeof(out), "nats://b:2"));
	assert_string_equal(out, "nats://a:1,nats://b:2");
	/* 21 bytes used: ",x" and its NUL fit, ",xy" and its NUL do not. */
	assert_false(servers_append(out, sizeof(out), "xyz"));
	assert_string_equal(out, "nats://a:1,nats://b:2");
	assert_true(servers_append(out, sizeof(out), "x"));
	assert_string_equal(out, "nats://a:1,nats://b:2,x");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_next_walks_every_url_and_skips_empty_items),
		cmocka_unit_test(test_count_is_the_urls_given),
		cmocka_unit_test(test_has_matches_whole_urls_only),
		cmocka_unit_test(test_append_joins_with_commas_and_refuses_what_does_not_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
