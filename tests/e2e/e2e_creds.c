/*
 * Credentials minted by `cotal mesh init --dev` and `cotal creds mint` are
 * accepted by the real broker; an expired user JWT is refused by it; the
 * system-account observer can scan its space's account.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/workspace.h"
#include "tests/harness/harness.h"

static struct mesh mesh;
static struct h_fixture fx = { .mesh = &mesh };

static int
setup(void **state)
{
	*state = &fx;
	return h_mesh_up(&mesh, "creds", true);
}

static void
test_mesh_init_credentials_are_accepted(void **state)
{
	static const char *const profiles[] = {
		"delivery", "provisioner", "supervisor", "sys-observer", "sys-evictor",
	};
	struct conn c;
	char err[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		if (h_connect_profile(&mesh, profiles[i], &c, err, sizeof(err)) != 0)
			fail_msg("%s.creds refused: %s", profiles[i], err);
		assert_int_equal(natsConnection_Flush(c.nc), NATS_OK);
		h_close(&c);
	}
}

static void
test_minted_credentials_are_accepted(void **state)
{
	static const char *const profiles[] = {
		"delivery", "agent", "supervisor", "provisioner", "sys-observer", "sys-evictor",
	};
	char path[H_PATH_MAX], file[64], err[1024];
	struct conn c;

	(void)state;
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		snprintf(file, sizeof(file), "minted-%s.creds", profiles[i]);
		assert_int_equal(h_mint(&mesh, profiles[i], file, "--allow", "general", path,
		    sizeof(path)), 0);
		if (h_connect(&mesh, path, &c, err, sizeof(err)) != 0)
			fail_msg("minted %s refused: %s", profiles[i], err);
		h_close(&c);
	}
}

static void
test_expired_user_jwt_is_refused_by_broker(void **state)
{
	char path[H_PATH_MAX], when[32], err[1024];
	struct conn c;

	(void)state;
	snprintf(when, sizeof(when), "%lld", (long long)time(NULL) - 60);
	assert_int_equal(h_mint(&mesh, "delivery", "expired.creds", "--expires-at", when, path,
	    sizeof(path)), 0);
	assert_int_not_equal(h_connect(&mesh, path, &c, err, sizeof(err)), 0);
	/* The broker's words: an authorization refusal, not a network error. */
	if (strstr(err, "Authorization") == NULL && strstr(err, "uthentication") == NULL &&
	    strstr(err, "expired") == NULL)
		fail_msg("expected an authorization refusal, got: %s", err);

	/* The same profile, unexpired, is accepted: the refusal is the expiry. */
	assert_int_equal(h_mint(&mesh, "delivery", "fresh.creds", "--expires", "3600", path,
	    sizeof(path)), 0);
	if (h_connect(&mesh, path, &c, err, sizeof(err)) != 0)
		fail_msg("an unexpired credential was refused: %s", err);
	h_close(&c);
}

static void
test_sys_observer_scans_its_space_account(void **state)
{
	char path[H_PATH_MAX * 2], subj[256], err[1024];
	struct conn obs, dlv;
	natsMsg *reply = NULL;
	json_t *mj, *doc;

	(void)state;
	snprintf(path, sizeof(path), "%s/.cotal/mesh/dev-mesh.json", mesh.dir);
	mj = ws_read_json(path, 1 << 20, err, sizeof(err));
	assert_non_null(mj);
	const char *acct = json_string_value(json_object_get(json_object_get(
	    json_object_get(mj, "spaces"), mesh.space), "account"));
	assert_non_null(acct);
	snprintf(subj, sizeof(subj), "$SYS.REQ.ACCOUNT.%s.CONNZ", acct);
	json_decref(mj);

	if (h_connect_profile(&mesh, "delivery", &dlv, err, sizeof(err)) != 0 ||
	    h_connect_profile(&mesh, "sys-observer", &obs, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	const char *q = "{\"auth\":true,\"offset\":0,\"limit\":1024}";
	assert_int_equal(natsConnection_RequestString(&reply, obs.nc, subj, q, 5000), NATS_OK);
	doc = json_loads(natsMsg_GetData(reply), 0, NULL);
	assert_non_null(doc);
	json_t *conns = json_object_get(json_object_get(doc, "data"), "connections");
	assert_true(json_is_array(conns));
	/* The delivery connection is listed with its principal tag. */
	size_t i;
	json_t *cn;
	int seen = 0;
	json_array_foreach(conns, i, cn) {
		json_t *tags = json_object_get(cn, "tags");
		size_t k;
		json_t *t;
		json_array_foreach(tags, k, t)
			if (strncmp(json_string_value(t) ? json_string_value(t) : "",
			    "cotal-profile:delivery", 22) == 0)
				seen = 1;
	}
	assert_true(seen);
	json_decref(doc);
	natsMsg_Destroy(reply);
	/* It may not kick: that is the evictor's grant. */
	natsConnection_PublishString(obs.nc, "$SYS.REQ.SERVER.X.KICK", "{\"cid\":1}");
	assert_true(h_violation(&obs, "Permissions Violation for Publish to \"$SYS.REQ.SERVER.X.KICK\"", 3000));
	h_close(&obs);
	h_close(&dlv);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mesh_init_credentials_are_accepted),
		cmocka_unit_test(test_minted_credentials_are_accepted),
		cmocka_unit_test(test_expired_user_jwt_is_refused_by_broker),
		cmocka_unit_test(test_sys_observer_scans_its_space_account),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
