/*
 * The operator commands by hand, as the README shows them: mesh init/start/
 * stop, space provision (idempotent, conflicts named), agent add, an agent
 * binding its durable with no daemon serving.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

static void
assert_mode(const char *path, mode_t want)
{
	struct stat st;

	if (stat(path, &st) != 0)
		fail_msg("%s is missing", path);
	if ((st.st_mode & 0777) != want)
		fail_msg("%s has mode %o, want %o", path, st.st_mode & 0777, want);
}

static void
test_mesh_init_writes_private_layout(void **state)
{
	static const char *const creds[] = {
		"delivery", "sys-observer", "sys-evictor", "provisioner", "supervisor",
	};
	struct mesh m;
	char path[H_PATH_MAX * 2], key[512];

	(void)state;
	assert_int_equal(h_mesh_up(&m, "layout", false), 0);
	space_key(m.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal", m.dir);
	assert_mode(path, 0700);
	snprintf(path, sizeof(path), "%s/.cotal/space.%s", m.dir, key);
	assert_mode(path, 0700);
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
		snprintf(path, sizeof(path), "%s/.cotal/space.%s/%s.creds", m.dir, key, creds[i]);
		assert_mode(path, 0600);
	}
	snprintf(path, sizeof(path), "%s/.cotal/mesh/nats-server.conf", m.dir);
	assert_mode(path, 0600);
	snprintf(path, sizeof(path), "%s/meshes/space.%s.json", m.home, key);
	assert_mode(path, 0600);
	h_mesh_down(&m);
}

static void
test_provision_is_idempotent(void **state)
{
	struct mesh m;
	char out[H_OUT_MAX];

	(void)state;
	assert_int_equal(h_mesh_up(&m, "idem", false), 0);
	assert_int_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "idem", NULL), 0);
	assert_non_null(strstr(out, "created"));
	assert_int_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "idem", NULL), 0);
	assert_null(strstr(out, "created"));
	assert_non_null(strstr(out, "exists"));
	assert_non_null(strstr(out, "INBOX_idem"));
	/* --storage (issue 28): a size from 256M to 64T, else refused naming it,
	 * before anything is read; 512M is taken (the streams exist: the new
	 * budget is reported as a difference, never a conflict). */
	static const char *const bad[] = { "100M", "65T", "12Q", "-1G", "", "4GX" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "idem",
		    "--storage", bad[i], NULL), 1);
		if (strstr(out, "--storage ") == NULL ||
		    strstr(out, "expected a size from 256M to 64T") == NULL)
			fail_msg("--storage \"%s\": expected the option named in:\n%s", bad[i], out);
	}
	assert_int_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "idem", "--storage",
	    "512M", NULL), 0);
	if (strstr(out, "! stream CHAT_idem: max bytes 1.20 GiB (want 153.60 MiB); left as it "
	    "is (not a conflict)") == NULL)
		fail_msg("expected the difference reported in:\n%s", out);
	h_mesh_down(&m);
}

static void
test_provision_names_a_conflicting_stream(void **state)
{
	struct mesh m;
	struct conn c;
	jsStreamConfig sc;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	char out[H_OUT_MAX], err[1024];
	const char *subj = "cotal.clash.dinbox.>";

	(void)state;
	assert_int_equal(h_mesh_up(&m, "clash", false), 0);
	if (h_connect_profile(&m, "provisioner", &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	/* Someone made INBOX_clash by hand, with the default 2 min window. */
	jsStreamConfig_Init(&sc);
	sc.Name = "INBOX_clash";
	sc.Subjects = &subj;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	assert_int_equal(js_AddStream(&si, c.js, &sc, NULL, &jerr), NATS_OK);
	jsStreamInfo_Destroy(si);

	assert_int_not_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "clash", NULL), 0);
	assert_non_null(strstr(out, "INBOX_clash"));
	assert_non_null(strstr(out, "duplicate window"));
	/* Left untouched. */
	assert_int_equal(js_GetStreamInfo(&si, c.js, "INBOX_clash", NULL, &jerr), NATS_OK);
	assert_int_equal(si->Config->Duplicates, (int64_t)120 * 1000000000);
	jsStreamInfo_Destroy(si);
	h_close(&c);
	h_mesh_down(&m);
}

static void
test_agent_add_writes_acl_row_and_durable(void **state)
{
	struct mesh m;
	struct agent a;
	struct conn c;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	regex_t re;
	char key[256], name[256], stream[128], err[1024], *row;

	(void)state;
	assert_int_equal(h_mesh_up(&m, "agents", true), 0);
	assert_int_equal(h_agent_add(&m, "carol", "general,ops", &a), 0);
	assert_string_equal(a.owner, "local");
	assert_int_equal(regcomp(&re, "^U[A-Z2-7]{55}$", REG_EXTENDED | REG_NOSUB), 0);
	assert_int_equal(regexec(&re, a.actor, 0, NULL, 0), 0);
	regfree(&re);
	assert_true(lifecycle_uid_valid(a.uid));

	if (h_connect_profile(&m, "supervisor", &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(key, sizeof(key), "%s.%s", a.principal, a.uid);
	row = h_kv_get(&c, &m, "acl", key, err, sizeof(err));
	if (row == NULL)
		fail_msg("ACL row %s: %s", key, err);
	json_t *doc = json_loads(row, 0, NULL);
	json_t *allow = json_object_get(doc, "allowSubscribe");
	assert_int_equal(json_array_size(allow), 2);
	assert_string_equal(json_string_value(json_array_get(allow, 0)), "general");
	assert_string_equal(json_string_value(json_array_get(allow, 1)), "ops");
	json_decref(doc);
	free(row);
	h_close(&c);

	if (h_connect_profile(&m, "provisioner", &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(stream, sizeof(stream), "DLV_%s", m.token);
	snprintf(name, sizeof(name), "dlv_%s-%s-%s", a.owner, a.actor, a.uid);
	assert_int_equal(js_GetConsumerInfo(&ci, c.js, stream, name, NULL, &jerr), NATS_OK);
	assert_int_equal(ci->Config->AckPolicy, js_AckExplicit);
	assert_int_equal(ci->Config->DeliverPolicy, js_DeliverAll);
	assert_int_equal(ci->Config->AckWait, (int64_t)60 * 1000000000);
	snprintf(key, sizeof(key), "cotal.%s.dlv.%s.%s.%s", m.token, a.owner, a.actor, a.uid);
	assert_string_equal(ci->Config->FilterSubject, key);
	jsConsumerInfo_Destroy(ci);
	h_close(&c);

	/* A second agent of the same name is refused. */
	char out[H_OUT_MAX];
	assert_int_not_equal(h_cotal(&m, out, sizeof(out), "agent", "add", "carol", "--space",
	    "agents", "--allow", "general", NULL), 0);
	assert_non_null(strstr(out, "already exists"));
	h_mesh_down(&m);
}

/*
 * Issue 43: "A wrong name gives a system error [...] The message should
 * say which spaces or agents exist", and "Errors that name what exists
 * ('no agent zed in space demo (agents: alice, bob)'), leave nothing
 * behind on refusal". The agents and the space are the test's own, so the
 * lists are compared whole.
 */
static void
test_a_wrong_name_is_refused_naming_what_exists(void **state)
{
	struct mesh m;
	struct agent a, b;
	char out[H_OUT_MAX], want[1024], key[256], dir[H_PATH_MAX * 2];
	struct stat st;

	(void)state;
	assert_int_equal(h_mesh_up(&m, "names", true), 0);
	assert_int_equal(h_agent_add(&m, "bob", "general", &b), 0);
	assert_int_equal(h_agent_add(&m, "alice", "general", &a), 0);

	/* An agent the space does not hold: the agents it holds, sorted. */
	assert_int_equal(h_cotal(&m, out, sizeof(out), "agent", "recv", "zed", "--space", "names",
	    "--wait", "100", NULL), 1);
	if (strstr(out, "no agent zed in space names (agents: alice, bob)") == NULL)
		fail_msg("agent recv zed:\n%s", out);
	assert_null(strstr(out, "No such file"));

	/* A space the workspace does not hold: the spaces it holds. */
	snprintf(want, sizeof(want), "no space namez in %s (spaces: names)", m.dir);
	assert_int_equal(h_cotal(&m, out, sizeof(out), "agent", "recv", "alice", "--space",
	    "namez", "--wait", "100", NULL), 1);
	if (strstr(out, want) == NULL)
		fail_msg("agent recv --space namez: want \"%s\" in:\n%s", want, out);
	assert_int_equal(h_cotal(&m, out, sizeof(out), "admin", "liveness", "--space", "namez",
	    NULL), 1);
	if (strstr(out, want) == NULL)
		fail_msg("admin liveness --space namez: want \"%s\" in:\n%s", want, out);
	assert_null(strstr(out, "No such file"));

	/* agent add in a space that is not there: refused, nothing made. */
	assert_int_equal(h_cotal(&m, out, sizeof(out), "agent", "add", "carol", "--space",
	    "namez", "--allow", "general", NULL), 1);
	if (strstr(out, want) == NULL)
		fail_msg("agent add --space namez: want \"%s\" in:\n%s", want, out);
	assert_true(space_key("namez", key, sizeof(key)));
	snprintf(dir, sizeof(dir), "%s/.cotal/space.%s", m.dir, key);
	if (stat(dir, &st) == 0)
		fail_msg("a refused agent add left %s behind", dir);
	h_mesh_down(&m);
}

static struct mesh startstop;

/* A broker `cotal mesh start` detached is not the harness's child: stop it
 * through the CLI whatever the test's outcome. */
static int
stop_detached_broker(void **state)
{
	(void)state;
	h_cotal(&startstop, NULL, 0, "mesh", "stop", NULL);
	return 0;
}

static void
test_mesh_start_and_stop(void **state)
{
	struct mesh *mp = &startstop;
#define m (*mp)
	struct conn c;
	char out[H_OUT_MAX], err[1024];

	(void)state;
	assert_int_equal(h_mesh_up(&m, "startstop", false), 0);
	/* Hand the broker over to `cotal mesh start`. */
	assert_int_equal(h_broker_stop(&m), 0);
	assert_int_equal(h_cotal(&m, out, sizeof(out), "mesh", "start", NULL), 0);
	assert_non_null(strstr(out, "broker up"));
	if (h_connect_profile(&m, "delivery", &c, err, sizeof(err)) != 0)
		fail_msg("after mesh start: %s", err);
	h_close(&c);
	assert_int_equal(h_cotal(&m, out, sizeof(out), "mesh", "start", NULL), 0);
	assert_non_null(strstr(out, "already running"));
	assert_int_equal(h_cotal(&m, out, sizeof(out), "mesh", "stop", NULL), 0);
	assert_non_null(strstr(out, "broker stopped"));
	assert_int_not_equal(h_connect_profile(&m, "delivery", &c, err, sizeof(err)), 0);
#undef m
}

/* Does m's broker config (as `cotal mesh init` wrote it) hold needle? */
static bool
conf_has(const struct mesh *m, const char *needle)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(m->conf, "r");

	while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, needle) != NULL;
	if (f != NULL)
		fclose(f);
	return found;
}

#define EXPECT_OUT(rc_want, needle)                                                       \
	do {                                                                               \
		if ((rc != 0) != ((rc_want) != 0) || strstr(out, (needle)) == NULL)        \
			fail_msg("exit %d (want %s), output lacks \"%s\":\n%s", rc,         \
			    (rc_want) ? "non-zero" : "0", (needle), out);                    \
	} while (0)

/*
 * "At least once, losing nothing" across a broker crash: `cotal mesh init`
 * makes JetStream sync every write (sync_interval: always) on a broker that
 * takes it (2.10 and later), says what a 2.9 broker cannot promise, and
 * keeps an operator's opt-out (--sync-interval default), saying what it
 * costs. The harness's broker runs on the config init wrote for it.
 */
static void
test_mesh_init_syncs_the_store_where_the_broker_takes_it(void **state)
{
	struct mesh m;
	char out[H_OUT_MAX];
	int rc;

	(void)state;
	assert_int_equal(h_mesh_up(&m, "durable", false), 0);
	bool takes_it = h_broker_version() >= 210;
	assert_true(conf_has(&m, "sync_interval: always") == takes_it);

	rc = h_cotal(&m, out, sizeof(out), "mesh", "init", "--dev", "--space", "durable",
	    "--nats-server", m.nats_bin, NULL);
	if (takes_it)
		EXPECT_OUT(0, "sync_interval: always (nats-server 2.");
	else
		EXPECT_OUT(0, "does not accept sync_interval");

	rc = h_cotal(&m, out, sizeof(out), "mesh", "init", "--dev", "--space", "durable",
	    "--nats-server", m.nats_bin, "--sync-interval", "default", NULL);
	EXPECT_OUT(0, "can lose writes it already acknowledged");
	assert_false(conf_has(&m, "sync_interval"));
	/* The choice is kept by a later init that names none. */
	rc = h_cotal(&m, out, sizeof(out), "mesh", "init", "--dev", "--space", "durable",
	    "--nats-server", m.nats_bin, NULL);
	EXPECT_OUT(0, "--sync-interval default");
	assert_false(conf_has(&m, "sync_interval"));
	assert_int_equal(h_broker_restart(&m), 0);

	rc = h_cotal(&m, out, sizeof(out), "mesh", "init", "--dev", "--space", "durable",
	    "--sync-interval", "sometimes", NULL);
	EXPECT_OUT(1, "--sync-interval sometimes: must be always");

	if (!takes_it) {
		/* A broker init could not ask is given the setting all the same,
		 * and a 2.9 broker's refusal of it is quoted by mesh start. */
		assert_int_equal(h_broker_stop(&m), 0);
		rc = h_cotal(&m, out, sizeof(out), "mesh", "init", "--dev", "--space", "durable",
		    "--nats-server", "/nonexistent/nats-server", "--sync-interval", "always", NULL);
		EXPECT_OUT(0, "cannot run /nonexistent/nats-server");
		assert_true(conf_has(&m, "sync_interval: always"));
		rc = h_cotal(&m, out, sizeof(out), "mesh", "start", NULL);
		EXPECT_OUT(1, "unknown field \"sync_interval\"");
	}
	h_mesh_down(&m);
}

static void
test_no_workspace_is_refused_naming_the_directory(void **state)
{
	struct mesh m;
	char out[H_OUT_MAX], dir[H_PATH_MAX + 16];

	(void)state;
	assert_int_equal(h_mesh_up(&m, "nows", false), 0);
	snprintf(dir, sizeof(dir), "%s/elsewhere", m.dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	/* --root naming a directory with no .cotal/. */
	snprintf(m.dir, sizeof(m.dir), "%s", dir);
	assert_int_not_equal(h_cotal(&m, out, sizeof(out), "space", "provision", "nows", NULL), 0);
	assert_non_null(strstr(out, dir));
	assert_non_null(strstr(out, ".cotal"));
	h_mesh_down(&m);
}

/* `cotal agent recv NAME --wait 0` on m: its exit status, its output. */
static int
recv_now(struct mesh *m, const char *name, char *out, size_t len)
{
	return h_cotal(m, out, len, "agent", "recv", name, "--space", m->space, "--wait", "0",
	    NULL);
}

/* Does out hold the bind warning for durable on m's space, with cond? */
static void
assert_bind_warning(const struct mesh *m, const char *out, const char *durable, const char *cond)
{
	char want[1024];

	snprintf(want, sizeof(want), "! agent recv: bound %s on space %s without a ready delivery "
	    "lease (%s): a delivery daemon that starts on this plane delivers through it; if "
	    "another plane serves space %s, reconnect there (that re-binds %s)", durable, m->space,
	    cond, m->space, durable);
	if (strstr(out, want) == NULL)
		fail_msg("expected\n  %s\nin:\n%s", want, out);
}

/*
 * Issue 31, the seed: "An agent binds its per-member delivery durable even
 * when the plane reached by its connection has no ready delivery lease, so
 * a daemon that starts later can deliver through it. A missing or not-ready
 * lease emits a warning that names the durable, space, and condition. It
 * tells the agent to reconnect against another plane if that plane serves
 * the space, which re-binds the durable there."
 */
static void
test_agent_binds_its_durable_without_a_ready_lease(void **state)
{
	struct mesh m;
	struct agent alice, bob;
	struct conn prov;
	struct daemon d;
	char out[H_OUT_MAX], err[1024], durable[256], outp[H_PATH_MAX], row[256];
	int st;

	(void)state;
	assert_int_equal(h_mesh_up(&m, "bindwarn", true), 0);
	assert_int_equal(h_agent_add(&m, "alice", "general", &alice), 0);
	assert_int_equal(h_agent_add(&m, "bob", "general", &bob), 0);
	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", alice.owner, alice.actor, alice.uid);

	/* No daemon ever ran: no lease row. Bound, warned, nothing to say. */
	assert_int_equal(recv_now(&m, "alice", out, sizeof(out)), 0);
	assert_bind_warning(&m, out, durable, "no lease row");
	assert_non_null(strstr(out, "0 messages for alice"));

	/* A daemon still claiming its lease: the row is there, not ready. */
	if (h_connect_profile(&m, "provisioner", &prov, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(row, sizeof(row), "{\"holder\":\"%s\",\"incarnation\":\"i-test\",\"since\":1,"
	    "\"ready\":false}", alice.principal);
	if (h_kv_put(&prov, &m, "delivery", "lease.0", row, err, sizeof(err)) != 0)
		fail_msg("lease.0: %s", err);
	assert_int_equal(recv_now(&m, "alice", out, sizeof(out)), 0);
	assert_bind_warning(&m, out, durable, "lease not ready");
	/* Released (deleted) by its holder: no lease row again. */
	if (h_kv_del(&prov, &m, "delivery", "lease.0", err, sizeof(err)) != 0)
		fail_msg("lease.0: %s", err);
	h_close(&prov);

	/* An agent bound before the daemon starts surfaces what the daemon
	 * copies once it serves, through the same durable. */
	snprintf(outp, sizeof(outp), "%s/recv-before.out", m.dir);
	pid_t r = h_cotal_spawn(&m, outp, "agent", "recv", "alice", "--space", m.space, "--wait",
	    "60000", NULL);
	assert_true(r > 0);
	assert_true(h_log_has(outp, "(no lease row)", 20000));
	assert_int_equal(h_daemon_start(&m, &d, NULL), 0);
	assert_int_equal(h_daemon_wait_connected(&d, 20000), 0);
	if (h_cotal(&m, out, sizeof(out), "agent", "join", "alice", "general", "--space", m.space,
	    NULL) != 0)
		fail_msg("join: %s", out);
	if (h_cotal(&m, out, sizeof(out), "agent", "post", "bob", "general", "after-the-start",
	    "--space", m.space, NULL) != 0)
		fail_msg("post: %s", out);
	if (!h_log_has(outp, "after-the-start", 60000))
		fail_msg("the agent bound before the daemon started surfaced nothing");
	assert_int_equal(waitpid(r, &st, 0), r);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_true(h_log_has(outp, "1 message for alice", 0));
	/* With the daemon serving, no warning. */
	assert_int_equal(recv_now(&m, "alice", out, sizeof(out)), 0);
	assert_null(strstr(out, "without a ready delivery lease"));
	/* Issue 41, finding 6: another agent's text reaches the terminal
	 * escaped as the log escapes it, so it can set no title and erase no
	 * line. */
	if (h_cotal(&m, out, sizeof(out), "agent", "post", "bob", "general",
	    "\x1b]0;pwned\x07\x1b[2K\xc2\x9b" "clean", "--space", m.space, NULL) != 0)
		fail_msg("post: %s", out);
	for (int64_t until = mono_ms() + 60000; mono_ms() < until;) {
		assert_int_equal(h_cotal(&m, out, sizeof(out), "agent", "recv", "alice", "--space",
		    m.space, "--wait", "2000", NULL), 0);
		if (strstr(out, "1 message for alice") != NULL)
			break;
	}
	if (strstr(out, "general bob: \\x1b]0;pwned\\x07\\x1b[2K\\xc2\\x9bclean\n") == NULL ||
	    strchr(out, '\x1b') != NULL || strchr(out, '\x07') != NULL)
		fail_msg("expected the text escaped, and no control byte, in:\n%s", out);
	h_daemon_stop(&d, 10000);
	h_mesh_down(&m);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mesh_init_writes_private_layout),
		cmocka_unit_test(test_provision_is_idempotent),
		cmocka_unit_test(test_provision_names_a_conflicting_stream),
		cmocka_unit_test(test_agent_add_writes_acl_row_and_durable),
		cmocka_unit_test(test_a_wrong_name_is_refused_naming_what_exists),
		cmocka_unit_test(test_agent_binds_its_durable_without_a_ready_lease),
		cmocka_unit_test_teardown(test_mesh_start_and_stop, stop_detached_broker),
		cmocka_unit_test(test_no_workspace_is_refused_naming_the_directory),
		cmocka_unit_test(test_mesh_init_syncs_the_store_where_the_broker_takes_it),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, NULL, NULL));
}
