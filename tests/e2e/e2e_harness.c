/*
 * The harness's own promises: post a CotalMessage as an agent, survive a
 * broker stop/kill/restart on its store, clean up its processes.
 */
#include <setjmp.h>
#include <unistd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/harness/harness.h"

static struct mesh mesh;
static struct h_fixture fx = { .mesh = &mesh };
static struct agent alice;

static int
setup(void **state)
{
	*state = &fx;
	if (h_mesh_up(&mesh, "harness", true) != 0 ||
	    h_agent_add(&mesh, "alice", "general", &alice) != 0)
		return -1;
	return 0;
}

static json_t *
chat_message(struct conn *c, uint64_t seq)
{
	char stream[128];
	natsMsg *m = NULL;
	jsErrCode jerr = 0;

	snprintf(stream, sizeof(stream), "CHAT_%s", mesh.token);
	if (js_GetMsg(&m, c->js, stream, seq, NULL, &jerr) != NATS_OK)
		return NULL;
	json_t *doc = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	natsMsg_Destroy(m);
	return doc;
}

/* A post lands in CHAT_<s> on the sender's subject, shaped as WIRE.md §2. */
static void
test_post_as_agent(void **state)
{
	struct conn ag, prov;
	uint64_t seq = 0;
	char err[1024];

	(void)state;
	if (h_connect(&mesh, alice.creds, &ag, err, sizeof(err)) != 0 ||
	    h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(h_post(&ag, &mesh, &alice, "general", "m-1", "hello", &seq), 0);
	assert_true(seq > 0);
	json_t *doc = chat_message(&prov, seq);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "id")), "m-1");
	assert_string_equal(json_string_value(json_object_get(doc, "channel")), "general");
	assert_string_equal(json_string_value(json_object_get(doc, "space")), mesh.space);
	char from[256];
	snprintf(from, sizeof(from), "%s.%s", alice.owner, alice.actor);
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "from"), "id")),
	    from);
	assert_true(json_is_array(json_object_get(doc, "parts")));
	assert_true(json_is_integer(json_object_get(doc, "ts")));
	json_decref(doc);
	h_close(&ag);
	h_close(&prov);
}

/* Stop, kill and restart the broker: the JetStream store survives. */
static void
test_broker_restart_keeps_the_store(void **state)
{
	struct conn ag, prov;
	uint64_t seq = 0;
	char err[1024];

	(void)state;
	if (h_connect(&mesh, alice.creds, &ag, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(h_post(&ag, &mesh, &alice, "general", "m-2", "before restart", &seq), 0);
	h_close(&ag);

	assert_int_equal(h_broker_restart(&mesh), 0);
	assert_int_equal(h_broker_kill(&mesh), 0);
	assert_int_equal(h_broker_start(&mesh), 0);

	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0)
		fail_msg("after restart: %s", err);
	json_t *doc = NULL;
	/* JetStream may take a moment to recover its streams after a kill. */
	for (int i = 0; i < 100 && doc == NULL; i++) {
		doc = chat_message(&prov, seq);
		if (doc == NULL)
			usleep(100 * 1000);
	}
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "id")), "m-2");
	json_decref(doc);
	h_close(&prov);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_as_agent),
		cmocka_unit_test(test_broker_restart_keeps_the_store),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
