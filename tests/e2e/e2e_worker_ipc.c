/*
 * A worker against a test program that plays its supervisor: the IPC
 * protocol end to end with a real broker. CONFIG and JWT in, nonces signed
 * on the sign channel, READY, the fence (QUIESCE -> QUIESCED, RESUME),
 * STATUS, STOP -> exit 0; and a peer that speaks garbage stops the worker.
 */
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/ipc.h"
#include "lib/creds.h"
#include "lib/jwt.h"
#include "lib/nkeys.h"
#include "lib/tokens.h"
#include "tests/harness/harness.h"

static struct mesh mesh;
static struct creds dcreds;

struct fake {
	pid_t pid;
	int ch, sign;
	int signed_nonces;
	uint8_t buf[IPC_MAX_FRAME];
};

static int
setup(void **state)
{
	char path[H_PATH_MAX * 2], key[512], err[512];

	(void)state;
	if (h_mesh_up(&mesh, "wipc", true) != 0)
		return -1;
	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	return creds_load(path, &dcreds, err, sizeof(err));
}

static int
teardown(void **state)
{
	(void)state;
	creds_free(&dcreds);
	h_mesh_down(&mesh);
	return 0;
}

static void
spawn_worker(struct fake *f, const char *role)
{
	int chp[2], sgp[2];
	struct ipc_config cfg = { 0 };
	struct jwt j;
	char err[512];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sgp), 0);
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int a = fcntl(chp[1], F_DUPFD, 16), b = fcntl(sgp[1], F_DUPFD, 16);
		dup2(a, 3);
		dup2(b, 4);
		closefrom(5);
		execl(COTAL_DAEMON_PATH, "cotal-deliveryd", "--worker", role, (char *)NULL);
		_exit(127);
	}
	close(chp[1]);
	close(sgp[1]);
	f->ch = chp[0];
	f->sign = sgp[0];
	f->signed_nonces = 0;

	assert_int_equal(jwt_decode(dcreds.jwt, strlen(dcreds.jwt), &j, err, sizeof(err)), 0);
	snprintf(cfg.role, sizeof(cfg.role), "%s", role);
	snprintf(cfg.space, sizeof(cfg.space), "%s", mesh.space);
	snprintf(cfg.url, sizeof(cfg.url), "%s", mesh.url);
	assert_true(inbox_prefix(j.sub, cfg.inbox_prefix, sizeof(cfg.inbox_prefix)));
	jwt_free(&j);
	cfg.broker_port = (uint32_t)mesh.port;
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam("nobody");
		assert_non_null(pw);
		cfg.uid = pw->pw_uid;
		cfg.gid = pw->pw_gid;
		cfg.drop_privs = 1;
	}
	assert_int_equal(ipc_send(f->ch, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	assert_int_equal(ipc_send(f->ch, IPC_JWT, dcreds.jwt, strlen(dcreds.jwt)), 0);
}

/* Serve the sign channel and wait for a message of type want on the main
 * channel (STATUS messages are skipped unless wanted). */
static int
await(struct fake *f, uint16_t want, int ms, struct ipc_msg *out)
{
	struct pollfd p[2] = { { .fd = f->ch, .events = POLLIN }, { .fd = f->sign, .events = POLLIN } };
	char err[256];

	for (int waited = 0; waited < ms; waited += 50) {
		if (poll(p, 2, 50) <= 0)
			continue;
		if (p[1].revents & POLLIN) {
			struct ipc_msg m;
			uint8_t sig[NKEY_SIG_LEN];
			struct nkey k;
			assert_int_equal(ipc_recv(f->sign, f->buf, IPC_TO_SUPERVISOR, &m, err, sizeof(err)), 1);
			assert_int_equal(m.type, IPC_SIGN_REQ);
			assert_int_equal(m.len, 15); /* the broker's nonce */
			assert_int_equal(nkey_from_seed(dcreds.seed, strlen(dcreds.seed), &k, err, sizeof(err)), 0);
			assert_int_equal(nkey_sign(&k, m.payload, m.len, sig), 0);
			nkey_wipe(&k);
			assert_int_equal(ipc_send(f->sign, IPC_SIGN_REP, sig, sizeof(sig)), 0);
			f->signed_nonces++;
		}
		if (p[0].revents & (POLLIN | POLLHUP)) {
			int rc = ipc_recv(f->ch, f->buf, IPC_TO_SUPERVISOR, out, err, sizeof(err));
			if (rc == 0)
				return -1;
			assert_int_equal(rc, 1);
			if (out->type == want)
				return 0;
		}
	}
	return -1;
}

static int
wait_exit(struct fake *f, int ms)
{
	int st;

	for (int waited = 0; waited < ms; waited += 20) {
		if (waitpid(f->pid, &st, WNOHANG) == f->pid)
			return st;
		usleep(20 * 1000);
	}
	kill(f->pid, SIGKILL);
	waitpid(f->pid, &st, 0);
	return -1;
}

static void
test_worker_speaks_the_protocol(void **state)
{
	struct fake f;
	struct ipc_msg m;
	struct ipc_status st;

	(void)state;
	spawn_worker(&f, "registry");
	/* The worker's connection is signed here, not by itself. */
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	assert_true(f.signed_nonces >= 1);
	assert_int_equal(await(&f, IPC_STATUS, 3000, &m), 0);
	memcpy(&st, m.payload, sizeof(st));
	assert_int_equal(st.state, IPC_STATE_CONNECTED);

	/* The fence: QUIESCE is answered once nothing is in flight. */
	assert_int_equal(ipc_send(f.ch, IPC_QUIESCE, NULL, 0), 0);
	assert_int_equal(await(&f, IPC_QUIESCED, 6000, &m), 0);
	assert_int_equal(await(&f, IPC_STATUS, 3000, &m), 0);
	memcpy(&st, m.payload, sizeof(st));
	assert_int_equal(st.state, IPC_STATE_QUIESCED);
	assert_int_equal(ipc_send(f.ch, IPC_RESUME, NULL, 0), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(await(&f, IPC_STATUS, 3000, &m), 0);
		memcpy(&st, m.payload, sizeof(st));
		if (st.state == IPC_STATE_CONNECTED)
			break;
	}
	assert_int_equal(st.state, IPC_STATE_CONNECTED);

	/* RECONNECT: a new connection, signed through us again. */
	int before = f.signed_nonces;
	assert_int_equal(ipc_send(f.ch, IPC_RECONNECT, NULL, 0), 0);
	for (int i = 0; i < 10 && f.signed_nonces == before; i++)
		await(&f, IPC_STATUS, 1000, &m);
	assert_true(f.signed_nonces > before);

	assert_int_equal(ipc_send(f.ch, IPC_STOP, NULL, 0), 0);
	int ws = wait_exit(&f, 3000);
	assert_true(ws >= 0 && WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 0);
	close(f.ch);
	close(f.sign);
}

/* "a peer that speaks garbage is compromised or broken": the worker exits. */
static void
test_worker_stops_on_garbage(void **state)
{
	struct fake f;
	struct ipc_msg m;
	const char junk[] = "not a frame at all";

	(void)state;
	spawn_worker(&f, "timer");
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	assert_int_equal(send(f.ch, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	int ws = wait_exit(&f, 3000);
	assert_true(ws >= 0);
	assert_true(WIFEXITED(ws));
	assert_int_not_equal(WEXITSTATUS(ws), 0);
	close(f.ch);
	close(f.sign);
}

/* A worker whose supervisor goes away exits too (the channel closes). */
static void
test_worker_exits_when_the_channel_closes(void **state)
{
	struct fake f;
	struct ipc_msg m;

	(void)state;
	spawn_worker(&f, "fanout");
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	close(f.ch);
	int ws = wait_exit(&f, 3000);
	assert_true(ws >= 0);
	close(f.sign);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worker_speaks_the_protocol),
		cmocka_unit_test(test_worker_stops_on_garbage),
		cmocka_unit_test(test_worker_exits_when_the_channel_closes),
	};
	signal(SIGPIPE, SIG_IGN);
	h_use_broker_29(argc > 1 && strcmp(argv[1], "--broker-29") == 0);
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	nats_Close();
	return rc;
}
