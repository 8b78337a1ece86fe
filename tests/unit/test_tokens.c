/* Tokens and names of WIRE.md §1 and §8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/wire/tokens.h"

/* "every char outside [A-Za-z0-9_-] becomes _ (empty → _)" */
static void
test_space_token_rewrites_outside_chars(void **state)
{
	char out[64];

	(void)state;
	assert_true(space_token("demo", out, sizeof(out)));
	assert_string_equal(out, "demo");
	/* Per character as the JavaScript clients count them (UTF-16 code
	 * units): "é" is one, an emoji beyond the BMP is two. */
	assert_true(space_token("my space.v2/é", out, sizeof(out)));
	assert_string_equal(out, "my_space_v2__");
	assert_true(space_token("café", out, sizeof(out)));
	assert_string_equal(out, "caf_");
	assert_true(space_token("a\xF0\x9F\x98\x80" "b", out, sizeof(out)));
	assert_string_equal(out, "a__b");
	assert_true(space_token("\xE2\x82\xAC" "1", out, sizeof(out)));
	assert_string_equal(out, "_1");
	/* An invalid byte is one character. */
	assert_true(space_token("x\xFFy\xC3", out, sizeof(out)));
	assert_string_equal(out, "x_y_");
	assert_true(space_token("a-b_C9", out, sizeof(out)));
	assert_string_equal(out, "a-b_C9");
	assert_true(space_token("", out, sizeof(out)));
	assert_string_equal(out, "_");
	assert_false(space_token("toolong", out, 4));
}

/* "<key> = lowercase hex of the space name's UTF-8 bytes" */
static void
test_space_key_is_lowercase_hex(void **state)
{
	char out[64];

	(void)state;
	assert_true(space_key("demo", out, sizeof(out)));
	assert_string_equal(out, "64656d6f");
	assert_true(space_key("é", out, sizeof(out)));
	assert_string_equal(out, "c3a9");
	assert_false(space_key("demo", out, 8));
}

/* "owner and actor match ^[A-Za-z0-9_]+$" — validated, never rewritten */
static void
test_identity_tokens_are_validated(void **state)
{
	(void)state;
	assert_true(identity_token_valid("local"));
	assert_true(identity_token_valid("UABC_9"));
	assert_false(identity_token_valid(""));
	assert_false(identity_token_valid("a-b"));
	assert_false(identity_token_valid("a.b"));
	assert_false(identity_token_valid("a*"));
	assert_false(identity_token_valid(NULL));
}

/* "Principal owner tokens: local or u_ + 26 chars of [a-z2-7]" */
static void
test_principal_owner(void **state)
{
	(void)state;
	assert_true(principal_owner_valid("local"));
	assert_true(principal_owner_valid("u_abcdefghijklmnopqrstuvwxyz"));
	assert_false(principal_owner_valid("u_abcdefghijklmnopqrstuvwxy"));
	assert_true(principal_owner_valid("u_aaaaaaaaaaaaaaaaaaaaaaaa27"));
	assert_false(principal_owner_valid("u_aaaaaaaaaaaaaaaaaaaaaaaa28"));
	assert_false(principal_owner_valid("u_AAAAAAAAAAAAAAAAAAAAAAAAAA"));
	/* a raw U… nkey parses but is NOT a principal */
	assert_false(principal_owner_valid("UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVW"));
	assert_false(principal_owner_valid("Local"));
}

/* "Lifecycle UID: ^[a-z0-9]{26,32}$" */
static void
test_lifecycle_uid(void **state)
{
	(void)state;
	assert_true(lifecycle_uid_valid("abcdefghijklmnopqrstuvwxyz"));
	assert_true(lifecycle_uid_valid("0123456789abcdefghijklmnopqrstuv"));
	assert_false(lifecycle_uid_valid("abcdefghijklmnopqrstuvwxy"));
	assert_false(lifecycle_uid_valid("0123456789abcdefghijklmnopqrstuvw"));
	assert_false(lifecycle_uid_valid("ABCDEFGHIJKLMNOPQRSTUVWXYZ"));
	assert_false(lifecycle_uid_valid("abcdefghijklmnopqrstuvwxy_"));
}

/* "Channel: dotted, each segment [A-Za-z0-9_-]+, or *, or a final >; no
 * empty segment; at most 4096 chars. ... durable memberships are concrete" */
static void
test_channels(void **state)
{
	char big[4098];

	(void)state;
	assert_true(channel_concrete_valid("general"));
	assert_true(channel_concrete_valid("team.ops-1.x_y"));
	assert_false(channel_concrete_valid("team..ops"));
	assert_false(channel_concrete_valid(".team"));
	assert_false(channel_concrete_valid("team."));
	assert_false(channel_concrete_valid("team.*"));
	assert_false(channel_concrete_valid("team.>"));
	assert_false(channel_concrete_valid(""));
	assert_true(channel_pattern_valid("team.*"));
	assert_true(channel_pattern_valid("team.>"));
	assert_true(channel_pattern_valid(">"));
	assert_true(channel_pattern_valid("*.x"));
	assert_false(channel_pattern_valid("team.>.x"));
	assert_false(channel_pattern_valid("team.a*"));
	assert_false(channel_pattern_valid("te am"));
	memset(big, 'a', 4096);
	big[4096] = '\0';
	assert_true(channel_concrete_valid(big));
	big[4096] = 'a';
	big[4097] = '\0';
	assert_false(channel_concrete_valid(big));
}

static void
test_inbox_prefix_is_the_credentials_own(void **state)
{
	char out[INBOX_PREFIX_MAX];

	(void)state;
	static const char key[] = "UDE7OIL6X67UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKL";
	assert_int_equal(strlen(key), 56);
	assert_true(inbox_prefix(key, out, sizeof(out)));
	assert_string_equal(out, "_INBOX_UDE7OIL6X67UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKL");
	assert_false(inbox_prefix("short", out, sizeof(out)));
	assert_false(inbox_prefix("UDE7OIL6X67UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJK", out,
	    sizeof(out))); /* 55 characters */
	assert_false(inbox_prefix("U.E7OIL6X67UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKL", out,
	    sizeof(out)));
	assert_false(inbox_prefix(key, out, 8));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_space_token_rewrites_outside_chars),
		cmocka_unit_test(test_space_key_is_lowercase_hex),
		cmocka_unit_test(test_identity_tokens_are_validated),
		cmocka_unit_test(test_principal_owner),
		cmocka_unit_test(test_lifecycle_uid),
		cmocka_unit_test(test_channels),
		cmocka_unit_test(test_inbox_prefix_is_the_credentials_own),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
