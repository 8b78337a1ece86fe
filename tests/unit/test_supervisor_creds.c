/*
 * The supervisor's credential rules: "refuses an allow-all credential (a
 * user JWT whose publish or subscribe allow list contains `>` or has no
 * permissions at all)"; "The supervisor signs only nonces of the broker's
 * format and length, and rate-limits per worker."
 */
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/dev_signer.h"
#include "lib/creds/perms.h"
#include "supervisor/creds.h"

static void
user_jwt(json_t *pub, json_t *sub, struct jwt *out)
{
	struct nkey acct, user;
	char upub[NKEY_PUBLIC_LEN + 1], err[256];

	assert_int_equal(nkey_generate(NKEY_ACCOUNT, &acct), 0);
	assert_int_equal(nkey_generate(NKEY_USER, &user), 0);
	nkey_public(&user, upub);
	struct dev_user_spec spec = { .name = "t", .sub_pub = upub, .pub_allow = pub,
		.sub_allow = sub };
	json_t *claims = dev_user_claims(&spec);
	char *tok = dev_jwt_sign(claims, &acct, err, sizeof(err));
	assert_non_null(tok);
	assert_int_equal(jwt_decode(tok, strlen(tok), out, err, sizeof(err)), 0);
	free(tok);
	json_decref(claims);
	nkey_wipe(&acct);
	nkey_wipe(&user);
}

static void
test_allow_all_is_refused(void **state)
{
	struct jwt j;
	char why[256];
	json_t *ok = json_pack("[s]", "cotal.x.dlv.*.*.*"), *inbox = json_pack("[s]", "_INBOX_A.>");
	json_t *all = json_pack("[s, s]", "cotal.x.dlv.*.*.*", ">");

	(void)state;
	user_jwt(ok, inbox, &j);
	assert_false(jwt_allow_all(&j, why, sizeof(why)));
	jwt_free(&j);

	user_jwt(all, inbox, &j);
	assert_true(jwt_allow_all(&j, why, sizeof(why)));
	assert_non_null(strstr(why, "publish allow list contains \">\""));
	jwt_free(&j);

	user_jwt(ok, all, &j);
	assert_true(jwt_allow_all(&j, why, sizeof(why)));
	assert_non_null(strstr(why, "subscribe allow list contains \">\""));
	jwt_free(&j);

	json_t *star = json_pack("[s]", "*.>");
	user_jwt(star, inbox, &j);
	assert_true(jwt_allow_all(&j, why, sizeof(why)));
	assert_non_null(strstr(why, "publish allow list contains \"*.>\""));
	jwt_free(&j);
	json_decref(star);

	user_jwt(NULL, NULL, &j);
	assert_true(jwt_allow_all(&j, why, sizeof(why)));
	assert_non_null(strstr(why, "no publish permissions"));
	jwt_free(&j);

	user_jwt(ok, NULL, &j);
	assert_true(jwt_allow_all(&j, why, sizeof(why)));
	assert_non_null(strstr(why, "no subscribe permissions"));
	jwt_free(&j);
	json_decref(ok);
	json_decref(inbox);
	json_decref(all);
}

static void
test_only_broker_nonces_are_signed(void **state)
{
	(void)state;
	assert_true(nonce_well_formed((const uint8_t *)"aB3-_xYz09QwErT", 15));
	assert_false(nonce_well_formed((const uint8_t *)"aB3-_xYz09QwEr", 14));
	assert_false(nonce_well_formed((const uint8_t *)"aB3-_xYz09QwErTy", 16));
	assert_false(nonce_well_formed((const uint8_t *)"aB3-_xYz09QwE+T", 15));
	assert_false(nonce_well_formed((const uint8_t *)"aB3-_xYz09QwE T", 15));
	/* A JWT-looking or challenge-looking payload is not a nonce. */
	assert_false(nonce_well_formed((const uint8_t *)"eyJ0eXAiOiJKV1QiLCJhbGc", 23));
}

static void
test_signatures_are_rate_limited(void **state)
{
	struct budget b;
	int64_t now = 1000;

	(void)state;
	budget_init(&b, now, SIGN_BURST, SIGN_REFILL_MS);
	for (int i = 0; i < SIGN_BURST; i++)
		assert_true(budget_take(&b, now));
	assert_false(budget_take(&b, now));
	assert_false(budget_take(&b, now + SIGN_REFILL_MS - 1));
	assert_true(budget_take(&b, now + SIGN_REFILL_MS));
	assert_false(budget_take(&b, now + SIGN_REFILL_MS));
	/* A long quiet spell refills only up to the burst. */
	now += 3600 * 1000;
	for (int i = 0; i < SIGN_BURST; i++)
		assert_true(budget_take(&b, now));
	assert_false(budget_take(&b, now));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allow_all_is_refused),
		cmocka_unit_test(test_only_broker_nonces_are_signed),
		cmocka_unit_test(test_signatures_are_rate_limited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
