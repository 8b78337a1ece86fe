/*
 * The supervisor and its confined workers against a real broker: four
 * workers with their own connections signed through the supervisor,
 * confined (seccomp, no_new_privs, no seed in memory), restarted after a
 * crash, stopped cleanly; refusals at start.
 */
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/dev_signer.h"
#include "cli/mint.h"
#include "lib/clock.h"
#include "lib/creds/creds.h"
#include "lib/creds/nkeys.h"
#include "lib/log.h"
#include "lib/wire/tokens.h"
#include "supervisor/creds.h"
#include "tests/harness/harness.h"

static const char *const roles[] = { "fanout", "reader", "registry", "timer" };
#define NROLES 4

static struct mesh mesh;
static struct daemon dmn;
static struct h_fixture fx = { .mesh = &mesh, .daemon = &dmn };

static int
setup(void **state)
{
	*state = &fx;
	if (h_mesh_up(&mesh, "daemon", true) != 0 || h_daemon_start(&mesh, &dmn, NULL) != 0)
		return -1;
	return h_daemon_ready(&dmn, 20000, NULL);
}

/* "Seccomp: 2" and "NoNewPrivs: 1" for the worker and each of its threads. */
static void
assert_confined(pid_t pid)
{
	char path[128], line[256];
	int seccomp = -1, nnp = -1, uid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f) != NULL) {
		sscanf(line, "Seccomp: %d", &seccomp);
		sscanf(line, "NoNewPrivs: %d", &nnp);
		sscanf(line, "Uid: %d", &uid);
	}
	fclose(f);
	assert_int_equal(seccomp, 2);
	assert_int_equal(nnp, 1);
	if (geteuid() == 0)
		assert_int_not_equal(uid, 0);

	/* nats.c threads inherit the filter. */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "grep -h '^Seccomp:' /proc/%ld/task/*/status | grep -vc '2$'",
	    (long)pid);
	FILE *p = popen(cmd, "r");
	int unfiltered = -1;
	assert_int_equal(fscanf(p, "%d", &unfiltered), 1);
	pclose(p);
	assert_int_equal(unfiltered, 0);
	snprintf(cmd, sizeof(cmd), "ls /proc/%ld/task | wc -l", (long)pid);
	p = popen(cmd, "r");
	int threads = 0;
	assert_int_equal(fscanf(p, "%d", &threads), 1);
	pclose(p);
	assert_true(threads > 1); /* the library's threads are there */
}

static void
test_four_workers_are_confined(void **state)
{
	(void)state;
	for (int i = 0; i < NROLES; i++) {
		pid_t pid = h_daemon_worker_pid(&dmn, roles[i]);
		assert_true(pid > 0);
		assert_confined(pid);
	}
}

/* Each worker holds its own broker connection, named for its role. */
static void
test_each_worker_has_its_own_connection(void **state)
{
	char path[H_PATH_MAX * 2], subj[256], err[1024];
	struct conn obs;
	natsMsg *reply = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/.cotal/mesh/dev-mesh.json", mesh.dir);
	json_t *mj = json_load_file(path, 0, NULL);
	const char *acct = json_string_value(json_object_get(json_object_get(
	    json_object_get(mj, "spaces"), mesh.space), "account"));
	snprintf(subj, sizeof(subj), "$SYS.REQ.ACCOUNT.%s.CONNZ", acct);
	json_decref(mj);
	if (h_connect_profile(&mesh, "sys-observer", &obs, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(natsConnection_RequestString(&reply, obs.nc, subj,
	    "{\"auth\":true,\"limit\":1024}", 5000), NATS_OK);
	json_t *doc = json_loads(natsMsg_GetData(reply), 0, NULL), *c;
	size_t i;
	int seen[NROLES] = { 0 };
	json_array_foreach(json_object_get(json_object_get(doc, "data"), "connections"), i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		for (int r = 0; r < NROLES; r++) {
			char want[64];
			snprintf(want, sizeof(want), "cotal-deliveryd %s", roles[r]);
			if (name != NULL && strcmp(name, want) == 0)
				seen[r]++;
		}
	}
	for (int r = 0; r < NROLES; r++)
		if (seen[r] != 1)
			fail_msg("worker %s has %d broker connections, want 1", roles[r], seen[r]);
	json_decref(doc);
	natsMsg_Destroy(reply);
	h_close(&obs);
}

#define SCAN_CHUNK (1UL << 20)
#define SCAN_REGION_MAX (1UL << 30)
static char chunk[SCAN_CHUNK + 64];

/* Search a process's readable memory for any of the needles (each at most
 * 64 bytes long). */
static bool
memory_holds(pid_t pid, const void *const *needles, const size_t *lens, int n)
{
	char path[64], line[512];
	bool found = false;
	FILE *maps;
	int mem;

	snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
	assert_non_null(maps = fopen(path, "r"));
	snprintf(path, sizeof(path), "/proc/%ld/mem", (long)pid);
	assert_true((mem = open(path, O_RDONLY)) >= 0);
	while (!found && fgets(line, sizeof(line), maps) != NULL) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r')
			continue;
		if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]"))
			continue;
		/* ASan's shadow regions span terabytes of untouched pages and
		 * hold poison bytes, never data: skip mappings that large. */
		if (hi - lo > SCAN_REGION_MAX)
			continue;
		/* Chunked, overlapping by the longest needle. */
		for (unsigned long at = lo; at < hi && !found; at += SCAN_CHUNK) {
			size_t want = hi - at < SCAN_CHUNK + 64 ? hi - at : SCAN_CHUNK + 64;
			ssize_t got = pread(mem, chunk, want, (off_t)at);
			for (int k = 0; got > 0 && k < n && !found; k++)
				found = memmem(chunk, (size_t)got, needles[k], lens[k]) != NULL;
		}
	}
	close(mem);
	fclose(maps);
	return found;
}

static bool
file_holds(const char *path, const char *needle)
{
	char buf[65536];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 && memmem(buf, (size_t)n, needle, strlen(needle)) != NULL;
}

/* "its memory holds no nkey seed ...; the supervisor's seed is absent from
 * every worker's environment and command line." */
static void
test_workers_hold_no_seed(void **state)
{
	char path[H_PATH_MAX * 2], key[512], err[512];
	struct creds c;
	struct nkey k;

	(void)state;
	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	assert_int_equal(creds_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(nkey_from_seed(c.seed, strlen(c.seed), &k, err, sizeof(err)), 0);
	const void *needles[] = { c.seed, k.seed };
	size_t lens[] = { strlen(c.seed), sizeof(k.seed) };

	/* The scanner finds the seed where it is: in the supervisor. */
	assert_true(memory_holds(dmn.pid, needles, lens, 2));
	for (int i = 0; i < NROLES; i++) {
		pid_t pid = h_daemon_worker_pid(&dmn, roles[i]);
		char p2[64];
		if (memory_holds(pid, needles, lens, 2))
			fail_msg("worker %s (pid %ld) holds the nkey seed in memory", roles[i], (long)pid);
		snprintf(p2, sizeof(p2), "/proc/%ld/environ", (long)pid);
		assert_false(file_holds(p2, c.seed));
		snprintf(p2, sizeof(p2), "/proc/%ld/cmdline", (long)pid);
		assert_false(file_holds(p2, c.seed));
	}
	nkey_wipe(&k);
	creds_free(&c);
}

static void
test_cotal_status_lists_each_worker(void **state)
{
	char out[H_OUT_MAX];

	(void)state;
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 0);
	for (int i = 0; i < NROLES; i++) {
		char want[64];
		snprintf(want, sizeof(want), "  %-8s connected", roles[i]);
		if (strstr(out, want) == NULL)
			fail_msg("cotal status lacks \"%s\":\n%s", want, out);
	}
}

/* kill -9 each worker in turn: restarted within its backoff, the log names
 * the signal, the others keep running. */
static void
test_kill9_each_worker_is_restarted(void **state)
{
	(void)state;
	for (int i = 0; i < NROLES; i++) {
		pid_t before[NROLES], victim = h_daemon_worker_pid(&dmn, roles[i]);
		char line[256];
		for (int k = 0; k < NROLES; k++)
			before[k] = h_daemon_worker_pid(&dmn, roles[k]);
		assert_int_equal(kill(victim, SIGKILL), 0);
		snprintf(line, sizeof(line), "! delivery: worker %s (pid %ld) killed by SIGKILL — restarting in",
		    roles[i], (long)victim);
		assert_true(h_log_has(dmn.log, line, 5000));
		/* The timer writer backs off 5 s, delivery workers 100 ms. */
		int budget = strcmp(roles[i], "timer") == 0 ? 15000 : 5000;
		pid_t after = 0;
		for (int waited = 0; waited < budget; waited += 50) {
			after = h_daemon_worker_pid(&dmn, roles[i]);
			if (after > 0 && after != victim)
				break;
			usleep(50 * 1000);
		}
		assert_true(after > 0 && after != victim);
		assert_int_equal(h_daemon_wait_connected(&dmn, 5000), 0);
		assert_confined(after);
		for (int k = 0; k < NROLES; k++)
			if (k != i)
				assert_int_equal(h_daemon_worker_pid(&dmn, roles[k]), before[k]);
	}
}

/* SIGTERM: exit 0 within 2 s, no worker survives, the log line is exact. */
static void
test_sigterm_stops_everything(void **state)
{
	pid_t workers[NROLES];
	char line[256];

	(void)state;
	for (int i = 0; i < NROLES; i++)
		workers[i] = h_daemon_worker_pid(&dmn, roles[i]);
	assert_int_equal(kill(dmn.pid, SIGTERM), 0);
	int st = h_daemon_wait_exit(&dmn, 2000);
	assert_true(st >= 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	for (int i = 0; i < NROLES; i++)
		assert_true(kill(workers[i], 0) != 0);
	snprintf(line, sizeof(line), "• delivery: received SIGTERM, exiting (space %s, shard 0)",
	    mesh.space);
	assert_true(h_log_has(dmn.log, line, 0));
	/* The seed: "writes received <signal>, exiting to that log before it
	 * releases its lease". */
	assert_true(h_log_has(dmn.log, "• delivery: lease of shard 0 released", 0));
	/* A clean stop: no worker broke the protocol on its way out. */
	assert_false(h_log_has(dmn.log, "killing it", 0));
	assert_false(h_log_has(dmn.log, "ipc:", 0));
	/* Nor does a connection it closes itself read as lost (the
	 * registry's rail was said "lost; reconnecting" on every stop). */
	assert_false(h_log_has(dmn.log, "lost; reconnecting", 0));
}

/* "workers never outlive it (PR_SET_PDEATHSIG plus the IPC channel
 * closing)": even a SIGKILL of the supervisor takes them down. */
static void
test_workers_die_with_a_killed_supervisor(void **state)
{
	pid_t workers[NROLES];

	(void)state;
	assert_int_equal(h_daemon_start(&mesh, &dmn, NULL), 0);
	assert_int_equal(h_daemon_wait_connected(&dmn, 20000), 0);
	for (int i = 0; i < NROLES; i++)
		assert_true((workers[i] = h_daemon_worker_pid(&dmn, roles[i])) > 0);
	h_daemon_kill(&dmn);
	for (int i = 0; i < NROLES; i++) {
		int waited = 0;
		while (kill(workers[i], 0) == 0 && waited < 2000) {
			usleep(20 * 1000);
			waited += 20;
		}
		if (kill(workers[i], 0) == 0)
			fail_msg("worker %s (pid %ld) outlived its supervisor", roles[i], (long)workers[i]);
	}
	/* The status file outlived it; `cotal status` believes it only while
	 * its pid is a running delivery daemon. */
	char out[H_OUT_MAX];
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL), 3);
	assert_non_null(strstr(out, "stale record"));
}

static void
test_allow_all_credential_is_refused(void **state)
{
	char path[H_PATH_MAX], out[H_OUT_MAX], why[H_OUT_MAX];
	json_t *all = json_pack("[s]", ">"), *inbox = json_pack("[s]", "_INBOX_X.>");

	(void)state;
	assert_int_equal(h_mint_raw(&mesh, "allow-all.creds", all, inbox, false, path, sizeof(path)),
	    0);
	assert_int_equal(h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space,
	    "--root", mesh.dir, "--creds", path, NULL), 1);
	assert_non_null(strstr(out, "✗ delivery: refusing an allow-all credential"));
	assert_non_null(strstr(out, "publish allow list contains \">\""));
	/* Issue 31: the audit refuses it too, in the daemon's words. */
	if (h_audit_agrees(&mesh, path, "delivery", out, why, sizeof(why)) != 0)
		fail_msg("%s", why);

	assert_int_equal(h_mint_raw(&mesh, "no-perms.creds", NULL, NULL, false, path, sizeof(path)),
	    0);
	assert_int_equal(h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space,
	    "--root", mesh.dir, "--creds", path, NULL), 1);
	assert_non_null(strstr(out, "refusing an allow-all credential"));
	assert_non_null(strstr(out, "no publish permissions"));
	if (h_audit_agrees(&mesh, path, "delivery", out, why, sizeof(why)) != 0)
		fail_msg("%s", why);
	json_decref(all);
	json_decref(inbox);
}

/*
 * An expired credential is refused at start, naming when it expired (the
 * broker would refuse it anyway, and the daemon would read that as the
 * broker gone); the audit says the same (issue 31). A credential that has
 * not expired is taken by both.
 */
static void
test_expired_credential_is_refused_at_start(void **state)
{
	char path[H_PATH_MAX], out[H_OUT_MAX], why[H_OUT_MAX], past[32];

	(void)state;
	snprintf(path, sizeof(path), "%s/expired.creds", mesh.dir);
	snprintf(past, sizeof(past), "%lld", (long long)time(NULL) - 60);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space,
	    "--profile", "delivery", "--out", path, "--force", "--expires-at", past, NULL), 0);
	assert_int_equal(h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space,
	    "--root", mesh.dir, "--creds", path, NULL), 1);
	if (strstr(out, "✗ delivery: the credential ") == NULL || strstr(out, " expired at ") ==
	    NULL || strstr(out, "renew it with: cotal creds mint --profile delivery --renew") == NULL)
		fail_msg("expected the expiry refusal in:\n%s", out);
	assert_null(strstr(out, "delivery daemon up"));
	if (h_audit_agrees(&mesh, path, "delivery", out, why, sizeof(why)) != 0)
		fail_msg("%s", why);

	/* The same credential an hour from now: both take it (this daemon
	 * then stops at the suite's daemon's lease). */
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space,
	    "--profile", "delivery", "--out", path, "--force", "--expires", "3600", NULL), 0);
	assert_int_equal(h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space,
	    "--root", mesh.dir, "--creds", path, NULL), 1);
	assert_null(strstr(out, " expired at "));
	assert_non_null(strstr(out, "a live lease already exists for shard 0"));
	if (h_audit_agrees(&mesh, path, "delivery", out, why, sizeof(why)) != 0)
		fail_msg("%s", why);
}

/*
 * Issue 27: "systemd's credential wins when $CREDENTIALS_DIRECTORY is set
 * (a workspace copy beside it is refused or ignored with a line, your call,
 * stated)". The workspace holds the space's good credential and the unit's
 * directory an allow-all one: the daemon takes the unit's (and refuses it,
 * naming it), saying it ignores the workspace's.
 */
static void
test_systemd_credential_wins_over_the_workspace(void **state)
{
	char path[H_PATH_MAX], dir[H_PATH_MAX + 16], dst[H_PATH_MAX + 64], out[H_OUT_MAX];
	char key[512], want[H_PATH_MAX * 2];
	json_t *all = json_pack("[s]", ">"), *inbox = json_pack("[s]", "_INBOX_X.>");

	(void)state;
	assert_int_equal(h_mint_raw(&mesh, "unit-allow-all.creds", all, inbox, false, path,
	    sizeof(path)), 0);
	snprintf(dir, sizeof(dir), "%s/unit-credentials", mesh.dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dst, sizeof(dst), "%s/delivery.creds", dir);
	assert_int_equal(rename(path, dst), 0);
	setenv("CREDENTIALS_DIRECTORY", dir, 1);
	int rc = h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space, "--root",
	    mesh.dir, NULL);
	unsetenv("CREDENTIALS_DIRECTORY");
	assert_int_equal(rc, 1);
	space_key(mesh.space, key, sizeof(key));
	snprintf(want, sizeof(want), "! delivery: ignoring %s/.cotal/space.%s/delivery.creds: "
	    "systemd's credential %s is the one in use", mesh.dir, key, dst);
	if (strstr(out, want) == NULL || strstr(out, "refusing an allow-all credential") == NULL)
		fail_msg("the unit's credential did not win, or not saying so:\n%s", out);
	unlink(dst);
	rmdir(dir);
	json_decref(all);
	json_decref(inbox);
}

/* A $SYS user (system account) with these publish grants and its reply
 * inbox plus these subscribe grants (NULL-ended lists), signed by the
 * system account's signing key or, when rogue, by a fresh account key. */
static char *
mint_sys_grants(const char *const *pubs, const char *const *subs, bool rogue)
{
	char kpath[H_PATH_MAX * 2], err[512], seed[NKEY_SEED_LEN + 1];
	char upub[NKEY_PUBLIC_LEN + 1], rpub[NKEY_PUBLIC_LEN + 1], inbox[INBOX_PREFIX_MAX + 4];
	struct nkey signer, user;

	if (rogue)
		assert_int_equal(nkey_generate(NKEY_ACCOUNT, &signer), 0);
	else {
		snprintf(kpath, sizeof(kpath), "%s/.cotal/mesh/keys/system-signing.nk", mesh.dir);
		assert_int_equal(devkey_load(kpath, NKEY_ACCOUNT, 0, &signer, err, sizeof(err)), 0);
	}
	nkey_public(&signer, rpub);
	assert_int_equal(nkey_generate(NKEY_USER, &user), 0);
	nkey_public(&user, upub);
	assert_true(inbox_prefix(upub, inbox, sizeof(inbox)));
	strcat(inbox, ".>");
	snprintf(kpath, sizeof(kpath), "%s/.cotal/mesh/dev-mesh.json", mesh.dir);
	json_t *mj = json_load_file(kpath, 0, NULL), *pub = json_array(),
	    *sub = json_pack("[s]", inbox);
	for (; *pubs != NULL; pubs++)
		json_array_append_new(pub, json_string(*pubs));
	for (; subs != NULL && *subs != NULL; subs++)
		json_array_append_new(sub, json_string(*subs));
	struct dev_user_spec spec = { .name = "sys", .sub_pub = upub,
		.issuer_account = rogue ? rpub : json_string_value(json_object_get(mj,
		    "systemAccount")),
		.pub_allow = pub, .sub_allow = sub };
	json_t *claims = dev_user_claims(&spec);
	char *jwt = dev_jwt_sign(claims, &signer, err, sizeof(err));
	assert_non_null(jwt);
	nkey_seed_text(&user, seed);
	char *text = creds_format(jwt, seed);
	free(jwt);
	json_decref(claims);
	json_decref(mj);
	json_decref(pub);
	json_decref(sub);
	nkey_wipe(&user);
	nkey_wipe(&signer);
	return text;
}

/* A $SYS user with one publish grant and its reply inbox. */
static char *
mint_sys(const char *grant, bool rogue)
{
	const char *const pubs[] = { grant, NULL };

	return mint_sys_grants(pubs, NULL, rogue);
}

/* Run the daemon with a space directory file replaced (or removed, text
 * NULL); with audit, `cotal creds audit` of the file as that profile must
 * say what the daemon said (issue 31); restore it; the daemon's output
 * into out, its exit status. */
static int
run_with_sys_file(const char *name, const char *text, char *out, size_t outlen,
		  const char *audit)
{
	char key[512], path[H_PATH_MAX * 2], keep[H_PATH_MAX * 2 + 8];
	int rc;

	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/%s", mesh.dir, key, name);
	snprintf(keep, sizeof(keep), "%s.keep", path);
	assert_int_equal(rename(path, keep), 0);
	if (text != NULL) {
		FILE *f = fopen(path, "w");
		fputs(text, f);
		fclose(f);
		chmod(path, 0600);
	}
	rc = h_daemon_run(&mesh, NULL, out, outlen, "--space", mesh.space, "--root", mesh.dir,
	    NULL);
	char why[H_OUT_MAX];
	if (audit != NULL && h_audit_agrees(&mesh, path, audit, out, why, sizeof(why)) != 0)
		fail_msg("%s", why);
	unlink(path);
	assert_int_equal(rename(keep, path), 0);
	return rc;
}

/*
 * The seed: "Before it constructs its endpoint or claims that lease, the
 * daemon reads the account-scoped $SYS observer [...] It refuses if the
 * observer belongs to another account, is missing, or is part of a present
 * but torn observer/evictor rotation."
 */
static void
test_sys_observer_admission(void **state)
{
	char out[H_OUT_MAX], grant[160], other[NKEY_PUBLIC_LEN + 1];
	struct nkey acct;
	char *text;

	(void)state;
	assert_int_equal(run_with_sys_file("sys-observer.creds", NULL, out, sizeof(out), NULL), 1);
	assert_non_null(strstr(out, "no $SYS observer credential"));
	assert_non_null(strstr(out, "Not binding."));

	assert_int_equal(nkey_generate(NKEY_ACCOUNT, &acct), 0);
	nkey_public(&acct, other);
	nkey_wipe(&acct);
	snprintf(grant, sizeof(grant), "$SYS.REQ.ACCOUNT.%s.CONNZ", other);
	text = mint_sys(grant, false);
	assert_int_equal(run_with_sys_file("sys-observer.creds", text, out, sizeof(out),
	    "sys-observer"), 1);
	free(text);
	assert_non_null(strstr(out, "lists the connections of account"));
	assert_non_null(strstr(out, other));
	/* Of every account ('*'): refused by the daemon and by its audit. */
	text = mint_sys("$SYS.REQ.ACCOUNT.*.CONNZ", false);
	assert_int_equal(run_with_sys_file("sys-observer.creds", text, out, sizeof(out),
	    "sys-observer"), 1);
	free(text);
	assert_non_null(strstr(out, "lists the connections of account *, not of this space's"));

	/* An evictor of another system account than the observer's. */
	text = mint_sys("$SYS.REQ.SERVER.*.KICK", true);
	assert_int_equal(run_with_sys_file("sys-evictor.creds", text, out, sizeof(out), NULL), 1);
	free(text);
	assert_non_null(strstr(out, "a torn rotation"));

	/* An expired evictor is as none: eviction off, the daemon goes on to
	 * the lease; its audit says the same and takes it. */
	char epath[H_PATH_MAX], past[32];
	snprintf(epath, sizeof(epath), "%s/expired-evictor.creds", mesh.dir);
	snprintf(past, sizeof(past), "%lld", (long long)time(NULL) - 60);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "creds", "mint", "--space", mesh.space,
	    "--profile", "sys-evictor", "--out", epath, "--force", "--expires-at", past, NULL), 0);
	text = h_file_text(epath, 0);
	assert_non_null(text);
	assert_int_equal(run_with_sys_file("sys-evictor.creds", text, out, sizeof(out),
	    "sys-evictor"), 1);
	free(text);
	assert_non_null(strstr(out, " expired at "));
	assert_non_null(strstr(out, "; eviction is off (deny-new-only posture)"));
	assert_non_null(strstr(out, "a live lease already exists for shard 0"));

	/* No evictor: the daemon starts, eviction unavailable (the suite's
	 * daemon holds the lease, so this one stops at the lease). */
	assert_int_equal(run_with_sys_file("sys-evictor.creds", NULL, out, sizeof(out), NULL), 1);
	assert_non_null(strstr(out, "eviction is unavailable until it is provisioned"));
	assert_non_null(strstr(out, "a live lease already exists for shard 0"));
}

/*
 * Issue 41, finding 7: "The observer check keeps the last
 * $SYS.REQ.ACCOUNT.<X>.CONNZ grant it sees: an observer holding
 * …ACCOUNT.*.CONNZ before the space's own grant passes. Any grant for
 * another (or every) account is a refusal wherever it stands. A $SYS
 * credential with grants beyond what its role needs is refused (its
 * signatures go to a confined worker), naming the extra grants". Each is
 * refused by the daemon before the lease and by its audit in the same
 * words (run_with_sys_file); the reference grants' own observer (its
 * account's CONNECT and DISCONNECT events besides CONNZ) is taken.
 */
/* The daemon run with a $SYS user of these grants as profile's file (its
 * audit agreeing: run_with_sys_file): it exits 1, its output into out. */
static void
run_with_sys_grants(const char *profile, const char *const *pubs, const char *const *subs,
		    char *out, size_t outlen)
{
	char file[64];
	char *text = mint_sys_grants(pubs, subs, false);

	snprintf(file, sizeof(file), "%s.creds", profile);
	assert_int_equal(run_with_sys_file(file, text, out, outlen, profile), 1);
	free(text);
}

static void
test_sys_grants_beyond_the_role_are_refused(void **state)
{
	char out[H_OUT_MAX], own[160], connect[160], disconnect[160], acct[128];

	(void)state;
	h_space_account(&mesh, acct, sizeof(acct));
	snprintf(own, sizeof(own), "$SYS.REQ.ACCOUNT.%s.CONNZ", acct);
	snprintf(connect, sizeof(connect), "$SYS.ACCOUNT.%s.CONNECT", acct);
	snprintf(disconnect, sizeof(disconnect), "$SYS.ACCOUNT.%s.DISCONNECT", acct);

	/* Every account's first, the space's own last. */
	const char *const every_first[] = { "$SYS.REQ.ACCOUNT.*.CONNZ", own, NULL };
	run_with_sys_grants("sys-observer", every_first, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "lists the connections of account *, not of this space's"));
	assert_null(strstr(out, "a live lease already exists"));

	/* A subtree of the system's requests, and a server-wide one. */
	const char *const wider[] = { own, "$SYS.REQ.ACCOUNT.>", "$SYS.REQ.SERVER.PING", NULL };
	run_with_sys_grants("sys-observer", wider, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "grants what its role does not need: publish "
	    "\"$SYS.REQ.ACCOUNT.>\", publish \"$SYS.REQ.SERVER.PING\"; a $SYS credential's"));
	assert_null(strstr(out, "a live lease already exists"));

	/* Every account's connect events. */
	const char *const events[] = { "$SYS.ACCOUNT.*.CONNECT", NULL };
	const char *const own_only[] = { own, NULL };
	run_with_sys_grants("sys-observer", own_only, events, out, sizeof(out));
	assert_non_null(strstr(out, "grants what its role does not need: subscribe "
	    "\"$SYS.ACCOUNT.*.CONNECT\""));

	/* An evictor that may also list every account's connections. */
	const char *const kick_and_list[] = { "$SYS.REQ.SERVER.*.KICK",
		"$SYS.REQ.ACCOUNT.*.CONNZ", NULL };
	run_with_sys_grants("sys-evictor", kick_and_list, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "the $SYS evictor credential"));
	assert_non_null(strstr(out, "grants what its role does not need: publish "
	    "\"$SYS.REQ.ACCOUNT.*.CONNZ\""));
	assert_null(strstr(out, "a live lease already exists"));

	/* The reference's observer: taken (the suite's daemon holds the
	 * lease, so this one stops there, past every check of its files). */
	const char *const reference_events[] = { connect, disconnect, NULL };
	run_with_sys_grants("sys-observer", own_only, reference_events, out, sizeof(out));
	assert_null(strstr(out, "does not need"));
	assert_null(strstr(out, "lists the connections"));
	assert_non_null(strstr(out, "a live lease already exists for shard 0"));
}

static long
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* The space's log file, which every daemon of this suite appends to. */
static const char *
mesh_log(void)
{
	static char path[H_PATH_MAX * 2];
	char key[SPACE_KEY_MAX + 1];

	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.log", mesh.dir, key);
	return path;
}

/* Does path hold needle after its first from bytes? */
static bool
text_after(const char *path, long from, const char *needle)
{
	return h_log_count_after(path, from, needle) > 0;
}

/*
 * WIRE.md §3: the fanout durable is made "idempotently; a permission denial
 * is an error, not 'exists'". A credential that may not touch the consumer
 * API makes the fan-out say so, naming the refused subject, and stop.
 */
static void
test_consumer_denial_is_an_error_not_exists(void **state)
{
	char path[H_PATH_MAX], want[512], get[256], put[256];
	/* The lease it may hold; no consumer anywhere. */
	snprintf(get, sizeof(get), "$JS.API.STREAM.MSG.GET.KV_cotal_delivery_%s", mesh.token);
	snprintf(put, sizeof(put), "$KV.cotal_delivery_%s.lease.*", mesh.token);
	json_t *pub = json_pack("[s, s, s]", "$JS.API.INFO", get, put), *sub = json_array();
	struct daemon d;

	char out[H_OUT_MAX];

	(void)state;
	assert_int_equal(h_mint_raw(&mesh, "no-consumers.creds", pub, sub, true, path, sizeof(path)),
	    0);
	/* The grant preflight refuses it before anything binds, naming each
	 * missing subject and who needs it (issue 14)... */
	assert_int_equal(h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space, "--root",
	    mesh.dir, "--creds", path, NULL), 1);
	snprintf(want, sizeof(want), "✗ delivery: the credential may not publish "
	    "\"$JS.API.CONSUMER.MSG.NEXT.CHAT_%s.fanout\" (the fan-out writer needs it); not binding",
	    mesh.token);
	if (strstr(out, want) == NULL)
		fail_msg("expected \"%s\" in:\n%s", want, out);
	/* ...and behind it, the fan-out still calls a broker's denial an
	 * error (a test build past the preflight). */
	setenv("COTAL_TEST_SKIP_PREFLIGHT", "1", 1);
	long from = file_size(mesh_log());
	int started = h_daemon_start(&mesh, &d, "--creds", path, NULL);
	unsetenv("COTAL_TEST_SKIP_PREFLIGHT");
	assert_int_equal(started, 0);
	snprintf(want, sizeof(want), "cannot bind the fan-out: consumer fanout on CHAT_%s: "
	    "permission denied", mesh.token);
	bool said = h_log_has(d.log, want, 30000);
	bool named = h_log_has(d.log, "$JS.API.CONSUMER.INFO.CHAT_", 0);
	/* Issue 14: the broker's refusal is logged by the worker with its
	 * subject, counted, and shown by cotal status; and a daemon whose
	 * fan-out cannot bind never says it is up. */
	bool logged = h_log_has(d.log, "the broker refused this worker: Permissions Violation for "
	    "Publish to \"$JS.API.CONSUMER.INFO.CHAT_", 10000);
	bool counted = false;
	for (int i = 0; i < 50 && !counted; i++) {
		const char *line, *v;
		counted = h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL) >= 0 &&
		    (line = strstr(out, "  fanout ")) != NULL &&
		    (v = strstr(line, "violations=")) != NULL && v < strchr(line + 1, '\n') &&
		    atoi(v + strlen("violations=")) > 0;
		if (!counted)
			usleep(200000);
	}
	bool up = text_after(d.log, from, "delivery daemon up");
	/* SIGTERM: the lease is released for the next test's daemon. */
	h_daemon_stop(&d, 5000);
	assert_true(said);
	assert_true(named);
	if (!logged)
		fail_msg("the fan-out did not log the violation with its subject");
	if (!counted)
		fail_msg("cotal status shows no violation counted for the fan-out:\n%s", out);
	assert_false(up);
	json_decref(pub);
	json_decref(sub);
}

/* The granted counts of the fan-out's lives so far in path, after from
 * (COTAL_TEST_SIGN_FLOOD's "test: G of N nonce signatures granted"). */
static int
flood_lives(const char *path, long from, int *granted, int max)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	if (f == NULL)
		return 0;
	fseek(f, from, SEEK_SET);
	while (n < max && fgets(line, sizeof(line), f) != NULL) {
		const char *t = strstr(line, "delivery fanout: test: ");
		int g, of;
		if (t != NULL && sscanf(t, "delivery fanout: test: %d of %d nonce", &g, &of) == 2)
			granted[n++] = g;
	}
	fclose(f);
	return n;
}

/*
 * Issue 28: "the log file is reopened on a signal that a logrotate rule in
 * dist/ sends". The log renamed away and SIGHUP: the supervisor's lines and
 * the lines it relays from a worker (a timer respawned after SIGKILL) go to
 * a new file by the old name; the renamed one gets nothing more.
 */
static void
test_sighup_reopens_the_log(void **state)
{
	struct daemon d;
	char rotated[sizeof(d.log) + 8];

	(void)state;
	h_daemon_stop(&dmn, 10000);
	assert_int_equal(h_daemon_start(&mesh, &d, NULL), 0);
	assert_int_equal(h_daemon_ready(&d, 20000, NULL), 0);
	snprintf(rotated, sizeof(rotated), "%s.1", d.log);
	assert_int_equal(rename(d.log, rotated), 0);
	assert_int_equal(kill(d.pid, SIGHUP), 0);
	bool reopened = h_log_has(d.log, "delivery: SIGHUP: log reopened", 5000);
	long old_size = file_size(rotated);
	pid_t timer = h_daemon_worker_pid(&d, "timer");
	bool relayed = timer > 0 && kill(timer, SIGKILL) == 0 &&
	    h_log_has(d.log, "delivery timer:", 15000);
	long old_after = file_size(rotated);
	h_daemon_stop(&d, 5000);
	unlink(rotated);
	if (!reopened)
		fail_msg("no new log after SIGHUP; see %s", rotated);
	if (!relayed)
		fail_msg("the respawned timer's lines did not reach the new log %s", d.log);
	assert_int_equal(old_after, old_size);
}

#ifndef COTAL_DIST_DIR
#error "COTAL_DIST_DIR must name the source tree's dist/"
#endif

/*
 * The same through the rule dist/ ships, run by the real logrotate: its
 * paths and its postrotate's systemctl replaced by this mesh's log and a
 * kill of this daemon (the unit's half is systemd's), and its su line's
 * service user by the user this test runs as (the one whose workspace the
 * mesh is; make check-systemd runs the rule as it is, as cotal-delivery),
 * forced. The live log is rotated to .1, and the daemon writes a new one
 * by its name.
 */
static void
test_the_logrotate_rule_rotates_a_live_log(void **state)
{
	struct daemon d;
	char conf[H_PATH_MAX * 2 + 32], st[H_PATH_MAX * 2 + 32], cmd[H_PATH_MAX * 8];
	char rotated[sizeof(d.log) + 8], line[1024];
	FILE *in, *out;

	(void)state;
	h_daemon_stop(&dmn, 10000);
	assert_int_equal(h_daemon_start(&mesh, &d, NULL), 0);
	assert_int_equal(h_daemon_ready(&d, 20000, NULL), 0);
	snprintf(conf, sizeof(conf), "%s/logrotate.conf", mesh.dir);
	snprintf(st, sizeof(st), "%s/logrotate.state", mesh.dir);
	snprintf(rotated, sizeof(rotated), "%s.1", d.log);
	assert_non_null(in = fopen(COTAL_DIST_DIR "/logrotate/cotal-deliveryd", "r"));
	assert_non_null(out = fopen(conf, "w"));
	struct passwd *pw = getpwuid(geteuid());
	struct group *gr = getgrgid(getegid());
	assert_non_null(pw);
	assert_non_null(gr);
	int paths = 0, signals = 0, sus = 0;
	while (fgets(line, sizeof(line), in) != NULL) {
		if (strncmp(line, "/var/lib/cotal/.cotal/delivery.*.log {", 38) == 0) {
			fprintf(out, "%s/.cotal/delivery.*.log {\n", mesh.dir);
			paths++;
		} else if (strcmp(line, "\tsu cotal-delivery cotal-delivery\n") == 0) {
			fprintf(out, "\tsu %s %s\n", pw->pw_name, gr->gr_name);
			sus++;
		} else if (strstr(line, "systemctl kill --signal=HUP") != NULL) {
			fprintf(out, "\t\tkill -HUP %d\n", (int)d.pid);
			signals++;
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	fclose(out);
	chmod(conf, 0644);
	snprintf(cmd, sizeof(cmd), "logrotate -f -s %s %s 2>&1", st, conf);
	int rc = system(cmd);
	bool reopened = h_log_has(d.log, "delivery: SIGHUP: log reopened", 5000);
	bool kept = text_after(rotated, 0, "serving") || text_after(rotated, 0, "delivery");
	h_daemon_stop(&d, 5000);
	assert_int_equal(paths, 1);
	assert_int_equal(sus, 1);
	assert_int_equal(signals, 1);
	assert_int_equal(rc, 0);
	if (!kept)
		fail_msg("logrotate left no %s with the daemon's lines", rotated);
	unlink(rotated);
	if (!reopened)
		fail_msg("the daemon wrote no new %s after the rotation", d.log);
}

/*
 * Issue 28: "a relayed worker's volume is capped". A fan-out that writes
 * 5,000 lines at once (test hook COTAL_TEST_LOG_FLOOD) reaches the log with
 * at most SUP_RELAY_LINES (600) of them in the window (4 s here); its next
 * line, a window later, comes after the count of those not written.
 */
static void
test_a_worker_cannot_flood_the_log(void **state)
{
	struct daemon d;
	bool over = false;

	(void)state;
	h_daemon_stop(&dmn, 10000);
	setenv("COTAL_TEST_LOG_FLOOD", "5000", 1);
	setenv("COTAL_TEST_LOG_WINDOW_MS", "4000", 1);
	int started = h_daemon_start(&mesh, &d, NULL);
	unsetenv("COTAL_TEST_LOG_FLOOD");
	unsetenv("COTAL_TEST_LOG_WINDOW_MS");
	assert_int_equal(started, 0);
	over = h_log_has(d.log, "test: log flood over", 30000);
	int lines = h_log_count(d.log, "test: log flood line");
	bool told = h_log_has(d.log, "more lines of this worker not written in the last 4 s "
	    "(its cap: 600 lines a window)", 5000);
	h_daemon_stop(&d, 5000);
	printf("• 5,000 lines written by the fan-out, %d in the log\n", lines);
	if (!over)
		fail_msg("the flooding fan-out's last line never reached the log; see %s", d.log);
	assert_true(lines >= 1);
	assert_true(lines <= 600);
	if (!told)
		fail_msg("no count of the lines not written; see %s", d.log);
}

/*
 * Issue 27: "a worker gets a signature only for a connection its role
 * makes (first connect and reconnects, with the backoff the supervisor
 * already knows), the budget survives respawns (a crash-looping worker does
 * not reset it), and a signature refused is logged with the worker and
 * count." A fan-out (test hook) asks for 20 signatures and dies, twice:
 * over both lives it gets no more than the budget earns in that time.
 */
static void
test_a_spent_signing_budget_survives_a_respawn(void **state)
{
	struct daemon d;
	struct timespec t0, t1;
	int granted[2], lives = 0;
	long from = file_size(mesh_log());

	(void)state;
	/* The space's lease free for this daemon, run alone or in order. */
	h_daemon_stop(&dmn, 10000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	setenv("COTAL_TEST_SIGN_FLOOD", "20", 1);
	int started = h_daemon_start(&mesh, &d, NULL);
	unsetenv("COTAL_TEST_SIGN_FLOOD");
	assert_int_equal(started, 0);
	for (int i = 0; i < 300 && lives < 2; i++) {
		usleep(100 * 1000);
		lives = flood_lives(d.log, from, granted, 2);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L;
	long earned = ms / SIGN_REFILL_MS;
	/* 40 asked, at most SIGN_BURST + earned granted: the first refusal
	 * is logged with the worker and its count, and the status counts
	 * every one over both lives (issue 41, finding 3: the lines are
	 * limited, LOG_LIMIT_LINES a window). */
	/* The worker lives on, asking 20 a life: the status's count is
	 * compared with the lives the log has told of, read while no life is
	 * asking (between a death and its respawn, the status written). */
	json_int_t refused = -1, want = -2;
	for (int64_t until = mono_ms() + 15000; refused != want && mono_ms() < until;
	    h_nap(100)) {
		int all[64], n;
		json_t *st = h_daemon_status(&d), *w;
		size_t i;
		json_array_foreach(json_object_get(st, "workers"), i, w)
			if (strcmp(json_string_value(json_object_get(w, "role")), "fanout") == 0)
				refused = json_integer_value(json_object_get(w, "signaturesRefused"));
		json_decref(st);
		n = flood_lives(d.log, from, all, 64);
		want = 20 * n;
		for (int k = 0; k < n; k++)
			want -= all[k];
	}
	bool counted = text_after(d.log, from, "delivery: worker fanout (pid ") &&
	    text_after(d.log, from, "asks for nonce signatures faster than its connections need") &&
	    text_after(d.log, from, "refused (1 refused so far)");
	int lines = h_log_count_after(d.log, from, "asks for nonce signatures faster");
	h_daemon_stop(&d, 5000);
	printf("• granted %d then %d of 20 each life; %lld refused in the status, %d lines\n",
	    granted[0], granted[1], (long long)refused, lines);
	if (refused != want)
		fail_msg("the status counts %lld refused signatures, the worker was refused %lld",
		    (long long)refused, (long long)want);
	assert_true(lines <= LOG_LIMIT_LINES);
	if (lives < 2)
		fail_msg("the flooding fan-out did not live twice in 30 s; see %s", d.log);
	/* Its first life spends the burst; the second gets only what the
	 * time since earned, never a fresh burst. */
	if (granted[0] > SIGN_BURST + earned || granted[0] + granted[1] > SIGN_BURST + earned)
		fail_msg("signatures granted: %d, then %d after a respawn; the budget allows %ld "
		    "over those %ld s", granted[0], granted[1], SIGN_BURST + earned, earned);
	if (!counted)
		fail_msg("no refusal logged with the worker and its count; see %s", d.log);
}

/*
 * Issue 41, finding 3: "A worker can make the supervisor write without
 * bound: every refused signing request [...] logs a line. Rate-limit these
 * lines (the shared limiter), and end a worker that keeps sending refused
 * requests past a bound". Test: "A worker sending 100,000 refused signing
 * requests: the log grows by <= 100 lines and the worker is ended." The
 * fan-out (test hook) asks for 100,000 signatures in a row: past the budget
 * and SIGN_REFUSED_MAX refusals it is killed, and the log from the daemon's
 * start to that kill holds at most 100 lines, LOG_LIMIT_LINES of them
 * refusals.
 */
static void
test_a_worker_sending_refused_signing_requests_is_ended(void **state)
{
	struct daemon d;
	long from = file_size(mesh_log());
	char killed[160];

	(void)state;
	h_daemon_stop(&dmn, 10000);
	setenv("COTAL_TEST_SIGN_FLOOD", "100000", 1);
	int started = h_daemon_start(&mesh, &d, NULL);
	unsetenv("COTAL_TEST_SIGN_FLOOD");
	assert_int_equal(started, 0);
	snprintf(killed, sizeof(killed), "sent more than %d refused signing requests; killing it",
	    SIGN_REFUSED_MAX);
	bool ended = h_log_has(d.log, killed, 20000);
	/* What the log held when the kill was said. */
	int grown = 0, refusals = 0;
	FILE *f = fopen(d.log, "r");
	char line[8192];
	assert_non_null(f);
	fseek(f, from, SEEK_SET);
	while (fgets(line, sizeof(line), f) != NULL) {
		grown++;
		refusals += strstr(line, "asks for nonce signatures faster") != NULL;
		if (strstr(line, killed) != NULL)
			break;
	}
	fclose(f);
	h_daemon_stop(&d, 5000);
	printf("• 100,000 signatures asked: ended after %d refusals; the log grew by %d lines, "
	    "%d of them refusals\n", SIGN_REFUSED_MAX, grown, refusals);
	if (!ended)
		fail_msg("the fan-out asking for 100,000 signatures was never ended; see %s", d.log);
	assert_true(grown <= 100);
	assert_true(refusals >= 1 && refusals <= LOG_LIMIT_LINES);
}

/*
 * Issue 42: "A crash loop degrades, it does not take the daemon down.
 * [...] Keep backing that worker off (capped), keep the other roles
 * serving, and say so: cotal status, /healthz [...] The daemon exits only
 * for what the seed says ends it". The reader is killed 12 times, each
 * time once it is back (a test build's backoff capped at 200 ms): past
 * the tenth restart in 5 minutes the log says it is crash-looping, the
 * status marks it, and the daemon goes on: the supervisor alive, the other
 * workers on their first process, the liveness rail answering bound, the
 * reader restarted again.
 */
static void
test_a_crash_loop_degrades_and_the_daemon_goes_on(void **state)
{
	struct daemon d;
	pid_t first[4];
	static const char *const roles4[] = { "fanout", "registry", "timer", "reader" };
	int kills = 0;

	(void)state;
	h_daemon_stop(&dmn, 10000);
	setenv("COTAL_TEST_RESTART_MAX_MS", "200", 1);
	int started = h_daemon_start(&mesh, &d, NULL);
	unsetenv("COTAL_TEST_RESTART_MAX_MS");
	assert_int_equal(started, 0);
	assert_int_equal(h_daemon_ready(&d, 20000, "fan-out bound", "reader bound", NULL), 0);
	for (int r = 0; r < 4; r++)
		first[r] = h_daemon_worker_pid(&d, roles4[r]);
	for (int64_t until = mono_ms() + 60000; kills < 12 && mono_ms() < until; h_nap(50)) {
		pid_t p = h_daemon_worker_pid(&d, "reader");
		static pid_t last;
		if (p <= 0 || p == last)
			continue;
		if (kill(p, SIGKILL) == 0) {
			last = p;
			kills++;
		}
	}
	bool said = h_log_has(d.log, "delivery: worker reader is crash-looping (killed by SIGKILL; "
	    "more than 10 restarts in 300 s): restarting it at most 30 s apart; the other roles "
	    "keep serving", 5000);
	/* Back once more, and marked in the status. */
	pid_t back = 0;
	bool looping = false;
	for (int64_t until = mono_ms() + 10000; (!looping || back <= 0) && mono_ms() < until;
	    h_nap(100)) {
		json_t *st = h_daemon_status(&d), *w;
		size_t i;
		json_array_foreach(json_object_get(st, "workers"), i, w)
			if (strcmp(json_string_value(json_object_get(w, "role")), "reader") == 0)
				looping = json_is_true(json_object_get(w, "crashLooping"));
		json_decref(st);
		back = h_daemon_worker_pid(&d, "reader");
	}
	bool alive = kill(d.pid, 0) == 0;
	int others = 0;
	for (int r = 0; r < 3; r++)
		others += h_daemon_worker_pid(&d, roles4[r]) == first[r];
	/* The rails keep answering: the liveness rail says bound. */
	char out[H_OUT_MAX];
	int lrc = h_cotal(&mesh, out, sizeof(out), "admin", "liveness", "--space", mesh.space,
	    "--wait", "3000", NULL);
	bool rails = lrc == 0 && strncmp(out, "bound", 5) == 0;
	printf("• reader killed %d times: crash-looping said %s, in the status %s; daemon %s, "
	    "%d of 3 other workers on their first process, liveness rail: %.40s\n", kills,
	    said ? "yes" : "no", looping ? "yes" : "no", alive ? "alive" : "gone", others, out);
	h_daemon_stop(&d, 10000);
	assert_int_equal(kills, 12);
	if (!said)
		fail_msg("no crash-looping line; see %s", d.log);
	assert_true(looping);
	assert_true(alive);
	assert_true(back > 0 && back != first[3]);
	assert_int_equal(others, 3);
	assert_true(rails);
	assert_false(h_log_has(d.log, "crash-looping (killed by SIGKILL; more than 10 restarts in "
	    "300 s), exiting", 0));
}

/* A stand-in daemon: a shell sleeping under cotal-deliveryd's name with
 * `--space space` among its arguments, each argument its own. */
static pid_t
fake_daemon(const char *space)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "/usr/sbin/cotal-deliveryd", "-c", "sleep 60; :", "x", "--space",
		    space, (char *)NULL);
		_exit(127);
	}
	/* Its exec done (its command line is what cotal down reads): at
	 * most 10 s. */
	char path[64], argv0[64] = "";
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	for (int i = 0; i < 1000 && strcmp(argv0, "/usr/sbin/cotal-deliveryd") != 0; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f != NULL ? fread(argv0, 1, sizeof(argv0) - 1, f) : 0;
		if (f != NULL)
			fclose(f);
		argv0[n] = '\0';
		if (strcmp(argv0, "/usr/sbin/cotal-deliveryd") != 0)
			usleep(10 * 1000);
	}
	assert_string_equal(argv0, "/usr/sbin/cotal-deliveryd");
	return pid;
}

static void
write_pid_record(const char *space, pid_t pid)
{
	char key[SPACE_KEY_MAX + 1], path[H_PATH_MAX * 2];
	FILE *f;

	space_key(space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/delivery.%s.pid", mesh.dir, key);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%ld\n", (long)pid);
	fclose(f);
	chmod(path, 0600);
}

/*
 * Issue 27: "the pid record is checked against the exact argument vector"
 * and "two spaces a and a b (cotal down --space a leaves a b running)".
 * Space a's record names the daemon of space "a b": cotal down --space a
 * clears it without a signal; naming a's own daemon, it stops that one.
 */
static void
test_cotal_down_a_never_stops_the_daemon_of_a_b(void **state)
{
	char out[H_OUT_MAX];
	pid_t ab, a;
	int st;

	(void)state;
	ab = fake_daemon("a b");
	write_pid_record("a", ab);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", "a", NULL), 0);
	bool spared = waitpid(ab, &st, WNOHANG) == 0 && kill(ab, 0) == 0;
	bool stale = strstr(out, "stale record") != NULL;
	kill(ab, SIGKILL);
	waitpid(ab, NULL, 0);
	if (!spared || !stale)
		fail_msg("cotal down --space a touched the daemon of space \"a b\":\n%s", out);

	a = fake_daemon("a");
	write_pid_record("a", a);
	assert_int_equal(h_cotal(&mesh, out, sizeof(out), "down", "--space", "a", NULL), 0);
	assert_int_equal(waitpid(a, &st, 0), a);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
		fail_msg("space a's own daemon was not stopped (status 0x%x):\n%s", st, out);
}

static void
test_missing_root_is_refused_naming_the_directory(void **state)
{
	char dir[H_PATH_MAX], out[H_OUT_MAX], want[H_PATH_MAX + 64];

	(void)state;
	/* Outside the test's workspace: no .cotal/ anywhere above it. */
	snprintf(dir, sizeof(dir), "/tmp/cotal-noroot-XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(h_daemon_run(&mesh, dir, out, sizeof(out), "--space", mesh.space, NULL), 1);
	snprintf(want, sizeof(want), "no .cotal/ directory in %s or above it", dir);
	if (strstr(out, want) == NULL)
		fail_msg("expected \"%s\" in:\n%s", want, out);
	/* Refused before anything was read or written there. */
	snprintf(want, sizeof(want), "%s/.cotal", dir);
	assert_true(access(want, F_OK) != 0);
	rmdir(dir);
}

/* Issue 28's operator settings: --max-memberships takes a whole number from
 * 1 to 1,000,000, --max-channels from 1 to 100,000; anything else is
 * refused naming the option, before anything is read. */
static void
test_max_memberships_is_bounded(void **state)
{
	static const char *const bad[] = { "0", "1000001", "-5", "12x", "", " 7" };
	static const struct { const char *opt, *over, *range; } opts[] = {
		{ "--max-memberships", "1000001", "is not a whole number from 1 to 1000000" },
		{ "--max-channels", "100001", "is not a whole number from 1 to 100000" },
	};
	char out[H_OUT_MAX], opt[64];

	(void)state;
	for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			const char *v = strcmp(bad[i], "1000001") == 0 ? opts[o].over : bad[i];
			assert_int_equal(h_daemon_run(&mesh, mesh.dir, out, sizeof(out), "--space",
			    mesh.space, opts[o].opt, v, NULL), 2);
			snprintf(opt, sizeof(opt), "%s: \"%s\" ", opts[o].opt, v);
			if (strstr(out, opt) == NULL || strstr(out, opts[o].range) == NULL)
				fail_msg("%s \"%s\": expected the bound named in:\n%s", opts[o].opt, v,
				    out);
		}
	}
}

/*
 * Issue 29: "Log lines carry an RFC 3339 timestamp in every log file the
 * project writes". Every line of the daemon's log file, its own and its
 * workers' (relayed), begins with the time it was written, UTC to the
 * millisecond, then its mark; so does the copy on its stderr when that is a
 * file (daemon.out here; a terminal or journald gets none).
 */
static void
test_every_log_line_carries_its_time(void **state)
{
	const char *files[] = { dmn.log, NULL };
	char out[H_PATH_MAX + 32], line[8192];
	int64_t now = wall_ms();
	int lines = 0, relayed = 0;

	(void)state;
	snprintf(out, sizeof(out), "%s/daemon.out", mesh.dir);
	files[1] = out;
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen(files[k], "r");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f) != NULL) {
			const char *t = log_line_text(line);
			struct tm tm = { 0 };
			int ms;
			if (k == 1 && strstr(line, "delivery") == NULL)
				continue; /* the broker's and the CLI's lines share the file */
			if (t == line || (strncmp(t, "✓ ", 4) != 0 && strncmp(t, "! ", 2) != 0 &&
			    strncmp(t, "✗ ", 4) != 0 && strncmp(t, "• ", 4) != 0))
				fail_msg("%s: a line without its time and mark: %s", files[k], line);
			assert_int_equal(sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year,
			    &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms), 7);
			tm.tm_year -= 1900;
			tm.tm_mon -= 1;
			int64_t at = (int64_t)timegm(&tm) * 1000 + ms;
			if (at > now + 1000 || at < now - 3600 * 1000)
				fail_msg("%s: a line stamped %lld ms from now: %s", files[k],
				    (long long)(at - now), line);
			lines++;
			relayed += k == 0 && (strstr(t, "delivery fanout") != NULL ||
			    strstr(t, "delivery reader") != NULL || strstr(t, "delivery registry") != NULL);
		}
		fclose(f);
	}
	printf("• %d lines, each stamped (%d of them a worker's)\n", lines, relayed);
	assert_true(relayed > 0);
}

/* "A TLS-required mesh always starts it with TLS demanded, so it refuses a
 * plaintext listener rather than upgrading on the server's unauthenticated
 * greeting": with the mesh's CA at hand, the suite's plaintext broker is
 * still refused (e2e_tls.c has the TLS broker). */
static void
test_tls_required_mesh_is_refused(void **state)
{
	char reg[H_PATH_MAX * 2], key[512], out[H_OUT_MAX], *saved;
	struct tls_files t;
	FILE *f;

	(void)state;
	assert_int_equal(h_tls_make(&mesh, "daemon", "DNS:localhost,IP:127.0.0.1", &t), 0);
	space_key(mesh.space, key, sizeof(key));
	snprintf(reg, sizeof(reg), "%s/meshes/space.%s.json", mesh.home, key);
	json_t *doc = json_load_file(reg, 0, NULL);
	assert_non_null(doc);
	saved = json_dumps(doc, 0);
	json_object_set_new(doc, "tlsRequired", json_true());
	json_object_set_new(doc, "tlsCa", json_string(t.ca));
	assert_int_equal(json_dump_file(doc, reg, 0), 0);
	json_decref(doc);
	int rc = h_daemon_run(&mesh, NULL, out, sizeof(out), "--space", mesh.space, "--root",
	    mesh.dir, NULL);
	assert_non_null(f = fopen(reg, "w"));
	fputs(saved, f);
	fclose(f);
	free(saved);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "does not offer TLS, and this mesh demands it"));
	assert_non_null(strstr(out, "refusing to dial in plaintext"));
}

/*
 * Issue 38: "the status file exists, naming every worker, no later than
 * the READY=1 notification (and the `up` line)". A daemon started after
 * the suite's released the lease; the moment its log says it is up, its
 * status file names its pid and the four workers, each connected, alive
 * and confined, and `cotal status` says the same. Without the write at
 * start-up the file came with the status timer's first tick, up to half a
 * second after the line (under systemd, `systemctl start` returns on
 * READY=1 and an operator asks at once).
 */
static void
test_status_file_names_every_worker_when_up(void **state)
{
	struct daemon d;
	char up[128], out[H_OUT_MAX];
	json_t *doc = NULL;

	(void)state;
	h_daemon_stop(&dmn, 10000);
	snprintf(up, sizeof(up), "delivery daemon up (space %s)", mesh.space);
	long from = file_size(mesh_log());
	assert_int_equal(h_daemon_start(&mesh, &d, NULL), 0);
	/* The suite's daemon removed its file on the way out. */
	assert_int_equal(access(d.status, F_OK), -1);
	int64_t until = mono_ms() + 30000;
	while (!text_after(d.log, from, up) && mono_ms() < until)
		usleep(2 * 1000);
	assert_true(text_after(d.log, from, up));
	doc = h_daemon_status(&d);
	bool cli_ok = h_cotal(&mesh, out, sizeof(out), "status", "--space", mesh.space, NULL) == 0;
	if (doc == NULL) {
		h_daemon_stop(&d, 5000);
		fail_msg("the daemon said it was up with no status file %s", d.status);
	}
	json_t *workers = json_object_get(doc, "workers"), *w;
	size_t i, named = 0;
	char why[512] = "";
	if (json_integer_value(json_object_get(doc, "pid")) != d.pid)
		snprintf(why, sizeof(why), "pid %lld, not the daemon's %ld",
		    (long long)json_integer_value(json_object_get(doc, "pid")), (long)d.pid);
	json_array_foreach(workers, i, w) {
		const char *role = json_string_value(json_object_get(w, "role"));
		const char *st = json_string_value(json_object_get(w, "state"));
		const char *conf = json_string_value(json_object_get(w, "confinement"));
		pid_t pid = (pid_t)json_integer_value(json_object_get(w, "pid"));
		char want[64], line[64];
		snprintf(want, sizeof(want), "sandbox %s: seccomp default-kill", role ? role : "?");
		snprintf(line, sizeof(line), "  %-8s connected", role ? role : "?");
		if (role == NULL || st == NULL || strcmp(st, "connected") != 0 || pid <= 0 ||
		    kill(pid, 0) != 0 || conf == NULL || strncmp(conf, want, strlen(want)) != 0 ||
		    strstr(out, line) == NULL)
			snprintf(why, sizeof(why), "worker %s: state %s, pid %ld, confinement %s",
			    role ? role : "?", st ? st : "?", (long)pid, conf ? conf : "?");
		else
			assert_confined(pid);
		named++;
	}
	json_decref(doc);
	h_daemon_stop(&d, 5000);
	if (named != NROLES || why[0] != '\0' || !cli_ok)
		fail_msg("when the daemon said it was up, its status file named %zu workers (%s); "
		    "cotal status answered:\n%s", named, why[0] ? why : "each one right", out);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_four_workers_are_confined),
		cmocka_unit_test(test_each_worker_has_its_own_connection),
		cmocka_unit_test(test_workers_hold_no_seed),
		cmocka_unit_test(test_cotal_status_lists_each_worker),
		cmocka_unit_test(test_kill9_each_worker_is_restarted),
		cmocka_unit_test(test_allow_all_credential_is_refused),
		cmocka_unit_test(test_expired_credential_is_refused_at_start),
		cmocka_unit_test(test_systemd_credential_wins_over_the_workspace),
		cmocka_unit_test(test_sys_observer_admission),
		cmocka_unit_test(test_sys_grants_beyond_the_role_are_refused),
		cmocka_unit_test(test_missing_root_is_refused_naming_the_directory),
		cmocka_unit_test(test_max_memberships_is_bounded),
		cmocka_unit_test(test_every_log_line_carries_its_time),
		cmocka_unit_test(test_cotal_down_a_never_stops_the_daemon_of_a_b),
		cmocka_unit_test(test_tls_required_mesh_is_refused),
		cmocka_unit_test(test_sigterm_stops_everything),
		/* After the suite's daemon released the lease of the space. */
		cmocka_unit_test(test_status_file_names_every_worker_when_up),
		/* After the suite's daemon released the lease of the space. */
		cmocka_unit_test(test_a_spent_signing_budget_survives_a_respawn),
		cmocka_unit_test(test_a_worker_sending_refused_signing_requests_is_ended),
		cmocka_unit_test(test_a_crash_loop_degrades_and_the_daemon_goes_on),
		cmocka_unit_test(test_a_worker_cannot_flood_the_log),
		cmocka_unit_test(test_sighup_reopens_the_log),
		cmocka_unit_test(test_the_logrotate_rule_rotates_a_live_log),
		cmocka_unit_test(test_consumer_denial_is_an_error_not_exists),
		cmocka_unit_test(test_workers_die_with_a_killed_supervisor),
	};
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, h_teardown));
}
