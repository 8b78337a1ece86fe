/*
 * The durable data path against a real broker and the real daemon: posts
 * on CHAT_<s> reach members' dlv_ durables through the fan-out writer and
 * the trusted reader, re-authorized against the read ACL and membership
 * interval of the moment (seed, "The three pieces", "Why a trusted reader").
 * Agents bind their own dlv_ consumers with their own credentials.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/harness.h"

static struct mesh mesh;
static struct daemon dmn;
static struct conn prov; /* the provisioner: writes rows as the registry would */

#define WAIT_MS 8000   /* for a frame that should come */
#define QUIET_MS 1500  /* after the last one, nothing more */

static int
setup(void **state)
{
	char err[1024];

	(void)state;
	if (h_mesh_up(&mesh, "datapath", true) != 0)
		return -1;
	if (h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)) != 0) {
		fprintf(stderr, "✗ provisioner: %s\n", err);
		return -1;
	}
	if (h_daemon_start(&mesh, &dmn, NULL) != 0 || h_daemon_wait_connected(&dmn, 20000) != 0 ||
	    !h_log_has(dmn.log, "fan-out bound", 20000) || !h_log_has(dmn.log, "reader bound", 20000)) {
		fprintf(stderr, "✗ the daemon did not bind its durables; see %s\n", dmn.log);
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	h_daemon_kill(&dmn);
	h_close(&prov);
	h_mesh_down(&mesh);
	return 0;
}

/* An agent, its connection, and a membership of channel from now on. */
struct member {
	struct agent a;
	struct conn c;
};

static void
member_add(struct member *mb, const char *name, const char *allow)
{
	char err[1024];

	assert_int_equal(h_agent_add(&mesh, name, allow, &mb->a), 0);
	if (h_connect(&mesh, mb->a.creds, &mb->c, err, sizeof(err)) != 0)
		fail_msg("connect %s: %s", name, err);
}

static void
member_join(struct member *mb, const char *channel, uint64_t generation)
{
	char err[1024];
	uint64_t last = 0;

	assert_int_equal(h_chat_last_seq(&prov, &mesh, &last), 0);
	if (h_member_put(&prov, &mesh, &mb->a, channel, last, 0, generation, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static json_t *
drain(struct member *mb, int ms)
{
	char err[1024];
	bool hdr = false;
	json_t *frames = h_dlv_drain(&mb->c, &mesh, &mb->a, ms, QUIET_MS, &hdr, err, sizeof(err));

	if (frames == NULL)
		fail_msg("%s", err);
	assert_true(hdr);
	return frames;
}

static const char *
frame_text(json_t *frame)
{
	json_t *parts = json_object_get(json_object_get(frame, "msg"), "parts");

	return json_string_value(json_object_get(json_array_get(parts, 0), "text"));
}

/*
 * "On each post to a durable channel it copies the message into every
 * eligible member's private durable store": 3 members, 1 post, one frame
 * each, with the header, the channel from the subject; none for the sender.
 */
static void
test_each_member_receives_one_frame(void **state)
{
	struct member m[3];
	const char *names[3] = { "ann", "ben", "cat" };

	(void)state;
	for (int i = 0; i < 3; i++) {
		member_add(&m[i], names[i], "room1");
		member_join(&m[i], "room1", 1);
	}
	assert_int_equal(h_post(&m[0].c, &mesh, &m[0].a, "room1", "p-1", "hello", NULL), 0);
	for (int i = 1; i < 3; i++) {
		json_t *f = drain(&m[i], WAIT_MS);
		assert_int_equal(json_array_size(f), 1);
		json_t *fr = json_array_get(f, 0);
		assert_int_equal(json_integer_value(json_object_get(fr, "version")), 1);
		assert_string_equal(json_string_value(json_object_get(fr, "channel")), "room1");
		assert_string_equal(json_string_value(json_object_get(json_object_get(fr, "msg"),
		    "channel")), "room1");
		assert_string_equal(frame_text(fr), "hello");
		json_decref(f);
	}
	json_t *own = drain(&m[0], QUIET_MS);
	assert_int_equal(json_array_size(own), 0); /* skipping the sender */
	json_decref(own);
	for (int i = 0; i < 3; i++)
		h_close(&m[i].c);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_member_receives_one_frame),
	};
	h_use_broker_29(argc > 1 && strcmp(argv[1], "--broker-29") == 0);
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	nats_Close();
	return rc;
}
