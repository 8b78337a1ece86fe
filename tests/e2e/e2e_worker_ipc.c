/*
 * A worker against a test program that plays its supervisor: the IPC
 * protocol end to end with a real broker. CONFIG and JWT in, nonces signed
 * on the sign channel, READY, the fence (QUIESCE -> QUIESCED, RESUME),
 * STATUS, STOP -> exit 0; and a peer that speaks garbage stops the worker.
 * The registry also gets what the supervisor sends it alone (the $SYS
 * users' JWTs, whose nonces are signed here too, and the lease), and keeps
 * the admin requests it holds across a RECONNECT.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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
#include "lib/clock.h"
#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"
#include "lib/wire/records.h"
#include "lib/wire/tokens.h"
#include "tests/harness/harness.h"

static struct mesh mesh;
static struct creds dcreds;
/* The $SYS users of eviction, indexed by enum ipc_sys (their seeds stay
 * here, as they stay in the supervisor). */
static struct creds syscreds[3];
static const char *const sys_files[] = { [IPC_SYS_OBSERVER] = "sys-observer.creds",
	[IPC_SYS_EVICTOR] = "sys-evictor.creds" };

struct fake {
	pid_t pid;
	int ch, sign;
	int signed_nonces;       /* the worker's own connection (SIGN_REQ) */
	int signed_sys;          /* a $SYS user's connection (SIGN_SYS) */
	int hold_sign_ms;        /* wait this long before signing a SIGN_REQ */
	int64_t sign_req_ms;     /* when the last SIGN_REQ arrived */
	int64_t signed_ms;       /* when its signature went back */
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
	if (creds_load(path, &dcreds, err, sizeof(err)) != 0)
		return -1;
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++) {
		snprintf(path, sizeof(path), "%s/.cotal/space.%s/%s", mesh.dir, key, sys_files[w]);
		if (creds_load(path, &syscreds[w], err, sizeof(err)) != 0) {
			fprintf(stderr, "✗ %s: %s\n", path, err);
			return -1;
		}
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++)
		if (syscreds[w].jwt != NULL)
			creds_free(&syscreds[w]);
	creds_free(&dcreds);
	h_mesh_down(&mesh);
	return 0;
}

/*
 * The registry's extras, as supervisor/workers.c send_registry_extras sends
 * them after CONFIG and JWT: each $SYS user's JWT behind its header (the
 * account is the delivery credential's), then the lease.
 */
static void
send_registry_extras(struct fake *f)
{
	struct ipc_lease l = { .state = IPC_LEASE_SERVING };
	struct jwt d, u;
	char err[512];

	assert_int_equal(jwt_decode(dcreds.jwt, strlen(dcreds.jwt), &d, err, sizeof(err)), 0);
	for (int w = IPC_SYS_OBSERVER; w <= IPC_SYS_EVICTOR; w++) {
		struct ipc_sys_creds h = { .which = (uint32_t)w };
		size_t jl = strlen(syscreds[w].jwt);
		uint8_t *buf = malloc(sizeof(h) + jl);

		assert_non_null(buf);
		assert_int_equal(jwt_decode(syscreds[w].jwt, jl, &u, err, sizeof(err)), 0);
		assert_true(inbox_prefix(u.sub, h.inbox_prefix, sizeof(h.inbox_prefix)));
		snprintf(h.user, sizeof(h.user), "%s", u.sub);
		snprintf(h.account, sizeof(h.account), "%s",
		    d.issuer_account ? d.issuer_account : d.iss);
		jwt_free(&u);
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), syscreds[w].jwt, jl);
		assert_int_equal(ipc_send(f->ch, IPC_SYS_CREDS, buf, sizeof(h) + jl), 0);
		free(buf);
	}
	jwt_free(&d);
	snprintf(l.instance, sizeof(l.instance), "test");
	assert_int_equal(ipc_send(f->ch, IPC_LEASE, &l, sizeof(l)), 0);
}

/* The worker's log, relayed to ours until it closes (the supervisor's
 * relay: a worker's standard error is a pipe, never a file, since its
 * RLIMIT_FSIZE 0 makes a write to a file fatal). */
static void *
relay_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0 && write(STDERR_FILENO, buf, (size_t)n) < 0)
			break;
	close(fd);
	return NULL;
}

/* A worker's standard error instead of the relay, when >= 0. */
static int worker_log_fd = -1;

/* Spawn `cotal-deliveryd --worker <role>` on the two channels, its standard
 * error a pipe relayed to ours (or worker_log_fd); env, when not NULL, is one more NAME=VALUE
 * for its environment. */
static void
spawn_worker(struct fake *f, const char *role, const char *env)
{
	extern char **environ;
	char *argv[] = { (char *)"cotal-deliveryd", (char *)"--worker", (char *)role, NULL };
	int chp[2], sgp[2];
	size_t n = 0;
	struct ipc_config cfg = { 0 };
	struct jwt j;
	char err[512];

	/* Built before the fork: the child only dups and execs. Ours first,
	 * so that it wins over an inherited one. */
	while (environ[n] != NULL)
		n++;
	char **envp = calloc(n + 2, sizeof(*envp));
	assert_non_null(envp);
	if (env != NULL)
		envp[0] = (char *)env;
	memcpy(envp + (env != NULL), environ, n * sizeof(*envp));

	int logp[2];
	pthread_t relay;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sgp), 0);
	assert_int_equal(pipe2(logp, O_CLOEXEC), 0);
	memset(f, 0, offsetof(struct fake, buf));
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int a = fcntl(chp[1], F_DUPFD, 16), b = fcntl(sgp[1], F_DUPFD, 16);
		dup2(worker_log_fd >= 0 ? worker_log_fd : logp[1], 2);
		dup2(a, 3);
		dup2(b, 4);
		closefrom(5);
		execve(COTAL_DAEMON_PATH, argv, envp);
		_exit(127);
	}
	free(envp);
	close(chp[1]);
	close(sgp[1]);
	close(logp[1]);
	assert_int_equal(pthread_create(&relay, NULL, relay_main, (void *)(intptr_t)logp[0]), 0);
	pthread_detach(relay);
	f->ch = chp[0];
	f->sign = sgp[0];

	assert_int_equal(jwt_decode(dcreds.jwt, strlen(dcreds.jwt), &j, err, sizeof(err)), 0);
	snprintf(cfg.role, sizeof(cfg.role), "%s", role);
	snprintf(cfg.space, sizeof(cfg.space), "%s", mesh.space);
	snprintf(cfg.url, sizeof(cfg.url), "%s", mesh.url);
	assert_true(inbox_prefix(j.sub, cfg.inbox_prefix, sizeof(cfg.inbox_prefix)));
	cfg.max_memberships = 1000;
	cfg.max_channels = 100;
	jwt_free(&j);
	cfg.broker_ports[0] = (uint32_t)mesh.port;
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam("nobody");
		assert_non_null(pw);
		cfg.uid = pw->pw_uid;
		cfg.gid = pw->pw_gid;
		cfg.drop_privs = 1;
	}
	assert_int_equal(ipc_send(f->ch, IPC_CONFIG, &cfg, sizeof(cfg)), 0);
	assert_int_equal(ipc_send(f->ch, IPC_JWT, dcreds.jwt, strlen(dcreds.jwt)), 0);
	if (strcmp(role, "registry") == 0)
		send_registry_extras(f);
}

/* Answer one request of the sign channel as the supervisor's on_sign does:
 * the worker's own nonce with the delivery seed, a $SYS user's nonce with
 * that user's seed. */
static void
sign_one(struct fake *f)
{
	struct ipc_msg m;
	const uint8_t *nonce;
	const char *seed;
	size_t len;
	uint8_t sig[NKEY_SIG_LEN];
	struct nkey k;
	char err[256];

	assert_int_equal(ipc_recv(f->sign, f->buf, IPC_TO_SUPERVISOR, &m, err, sizeof(err)), 1);
	if (m.type == IPC_SIGN_SYS) {
		assert_true(m.payload[0] == IPC_SYS_OBSERVER || m.payload[0] == IPC_SYS_EVICTOR);
		seed = syscreds[m.payload[0]].seed;
		nonce = m.payload + 1;
		len = m.len - 1;
	} else {
		assert_int_equal(m.type, IPC_SIGN_REQ);
		seed = dcreds.seed;
		nonce = m.payload;
		len = m.len;
		f->sign_req_ms = mono_ms();
		if (f->hold_sign_ms > 0)
			usleep((useconds_t)f->hold_sign_ms * 1000);
	}
	assert_int_equal(len, 15); /* the broker's nonce */
	assert_int_equal(nkey_from_seed(seed, strlen(seed), &k, err, sizeof(err)), 0);
	assert_int_equal(nkey_sign(&k, nonce, len, sig), 0);
	nkey_wipe(&k);
	assert_int_equal(ipc_send(f->sign, IPC_SIGN_REP, sig, sizeof(sig)), 0);
	if (m.type == IPC_SIGN_SYS) {
		f->signed_sys++;
	} else {
		f->signed_ms = mono_ms();
		f->signed_nonces++;
	}
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
		if (p[1].revents & POLLIN)
			sign_one(f);
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

/* Play the supervisor for about ms: sign what is asked, let the main
 * channel's STATUS go by (no message has type IPC_TYPE_END). */
static void
serve(struct fake *f, int ms)
{
	struct ipc_msg m;

	(void)await(f, IPC_TYPE_END, ms, &m);
}

/* A ctl.delivery-admin request of the manager's and the replies it got,
 * recorded on nats.c's thread as they arrive. */
struct admin_call {
	char subj[512], reply[600], body[512];
	natsSubscription *sub;
	pthread_mutex_t mu;
	int answers;
	int64_t first_ms; /* when the first reply arrived */
	json_t *first;    /* its body */
};

static void
on_admin_reply(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct admin_call *c = closure;

	(void)nc, (void)sub;
	pthread_mutex_lock(&c->mu);
	if (c->answers++ == 0) {
		c->first_ms = mono_ms();
		c->first = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), 0,
		    NULL);
	}
	pthread_mutex_unlock(&c->mu);
	natsMsg_Destroy(msg);
}

/* How many replies c got so far; *at: when the first came. */
static int
admin_answers(struct admin_call *c, int64_t *at)
{
	pthread_mutex_lock(&c->mu);
	int n = c->answers;
	if (at != NULL)
		*at = c->first_ms;
	pthread_mutex_unlock(&c->mu);
	return n;
}

/*
 * Subscribe for the reply of the manager's request op(args), not sent yet.
 * The manager is the space's supervisor credential; its principal is
 * local.<user key> (cli/mint.c), the subject and the reply subject bound to
 * it as tests/e2e/e2e_registry.c forms them.
 */
static void
admin_prepare(struct conn *mgr, struct admin_call *c, const char *tag, const char *op,
	      const char *args)
{
	struct jwt j;
	char err[256];

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	assert_int_equal(jwt_decode(mgr->creds.jwt, strlen(mgr->creds.jwt), &j, err,
	    sizeof(err)), 0);
	snprintf(c->subj, sizeof(c->subj), "cotal.%s.ctl.delivery-admin.local.%s", mesh.token,
	    j.sub);
	snprintf(c->reply, sizeof(c->reply), "%s.reply.%s", c->subj, tag);
	snprintf(c->body, sizeof(c->body), "{\"op\":\"%s\",\"args\":%s,\"from\":{\"id\":"
	    "\"local.%s\",\"name\":\"manager\"}}", op, args, j.sub);
	jwt_free(&j);
	assert_int_equal(natsConnection_Subscribe(&c->sub, mgr->nc, c->reply, on_admin_reply, c),
	    NATS_OK);
}

static void
admin_send(struct conn *mgr, struct admin_call *c)
{
	assert_int_equal(natsConnection_PublishRequestString(mgr->nc, c->subj, c->reply, c->body),
	    NATS_OK);
}

/* A reply {ok:true, data:{principal: ...}} about principal. */
static void
assert_answered_about(struct admin_call *c, const char *principal)
{
	pthread_mutex_lock(&c->mu);
	json_t *r = c->first;
	pthread_mutex_unlock(&c->mu);
	assert_non_null(r);
	if (!json_is_true(json_object_get(r, "ok"))) {
		char *t = json_dumps(r, JSON_COMPACT);
		fail_msg("%s was refused: %s", c->reply, t ? t : "?");
	}
	assert_string_equal(json_string_value(json_object_get(json_object_get(r, "data"),
	    "principal")), principal);
}

static void
admin_done(struct admin_call *c)
{
	natsSubscription_Unsubscribe(c->sub);
	natsSubscription_Destroy(c->sub);
	json_decref(c->first);
	pthread_mutex_destroy(&c->mu);
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

/* STOP: the worker exits 0 within ms; its channels closed. */
static void
stop_worker(struct fake *f, int ms)
{
	assert_int_equal(ipc_send(f->ch, IPC_STOP, NULL, 0), 0);
	int ws = wait_exit(f, ms);
	assert_true(ws >= 0 && WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 0);
	close(f->ch);
	close(f->sign);
}

static void
test_worker_speaks_the_protocol(void **state)
{
	struct fake f;
	struct ipc_msg m;
	struct ipc_status st;

	(void)state;
	spawn_worker(&f, "registry", NULL);
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

	stop_worker(&f, 3000);
}

/*
 * A worker whose standard error is a regular file (a fake supervisor's, or
 * a hand-made start with its output redirected) refuses before its sandbox
 * and says why: with RLIMIT_FSIZE 0 its first line written there would
 * have killed it with SIGXFSZ, saying nothing (a test run with its output
 * in a file saw every worker die before its first line).
 */
static void
test_a_worker_logging_to_a_file_refuses_and_says_why(void **state)
{
	struct fake f;
	char path[H_PATH_MAX], buf[4096];
	int st;

	(void)state;
	snprintf(path, sizeof(path), "%s/worker-stderr.log", mesh.dir);
	worker_log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(worker_log_fd >= 0);
	spawn_worker(&f, "fanout", NULL);
	close(worker_log_fd);
	worker_log_fd = -1;
	st = wait_exit(&f, 10000);
	if (st == -1 || WIFSIGNALED(st))
		fail_msg("the worker did not stop by itself (%s %d)", st == -1 ? "still running" :
		    "killed by signal", st == -1 ? 0 : WTERMSIG(st));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	if (strstr(buf, "its log (standard error) is a regular file") == NULL)
		fail_msg("the worker did not say why it stopped: %s", buf);
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
	spawn_worker(&f, "timer", NULL);
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
	spawn_worker(&f, "fanout", NULL);
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	close(f.ch);
	int ws = wait_exit(&f, 3000);
	assert_true(ws >= 0);
	close(f.sign);
}

#define SWEEP_HOLD_MS 2000 /* the test hook's hold on a sweep naming local.slowhold */
#define SIGN_HOLD_MS 300   /* how late the new connection's nonce is signed */
#define CALL_MS 10000
#define QUIET_MS 1500

/*
 * The seed (delivery-service-contracts): "After an adoption the daemon
 * reconnects with the new credentials 250ms after its reply. A
 * delivery-admin request it reads in the meantime is answered once that
 * reconnect completes, or after 5s. A reply sent while the connection is
 * down would be lost, and its caller, such as a manager evicting its
 * predecessor right after its boot renewal, would wait out its whole 15s
 * request timeout."
 *
 * The manager sends an eviction that the daemon's test hook holds, then a
 * liveness request that waits behind it in the serial admin queue, and the
 * worker is told to RECONNECT while the eviction is held. The eviction is
 * answered on the old connection, before it goes; the liveness request on
 * the new one: after this fake signed the new connection's nonce, which it
 * holds back SIGN_HOLD_MS, so that a reply sent before the connection came
 * back cannot pass for one sent after. Neither is answered twice. Both are
 * answered on nats-server 2.9 too (no KICK: nobody is connected to kick).
 */
static void
test_registry_holds_queued_admin_replies_across_a_reconnect(void **state)
{
	struct fake f;
	struct ipc_msg m;
	struct conn mgr;
	struct admin_call probe, held, queued;
	char err[1024], env[128];
	int64_t t_send, t_reconnect, t_held = 0, t_queued = 0, until;

	(void)state;
#ifndef COTAL_TEST_HOOKS
	skip(); /* the sweep hold is a test hook of the daemon */
#endif
	snprintf(env, sizeof(env), "COTAL_TEST_SWEEP_DELAY=local.slowhold:%d", SWEEP_HOLD_MS);
	spawn_worker(&f, "registry", env);
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	if (h_connect_profile(&mesh, "supervisor", &mgr, err, sizeof(err)) != 0)
		fail_msg("manager: %s", err);
	admin_prepare(&mgr, &probe, "probe", "noSuchOp", "{}");
	admin_prepare(&mgr, &held, "held", "evictPrincipal", "{\"principal\":\"local.slowhold\"}");
	admin_prepare(&mgr, &queued, "queued", "principalLiveness",
	    "{\"principal\":\"local.afterhold\"}");
	assert_int_equal(natsConnection_Flush(mgr.nc), NATS_OK);

	/* The rails are bound a moment after READY: an unknown op, refused
	 * at once, tells when. */
	for (until = mono_ms() + CALL_MS; admin_answers(&probe, NULL) == 0 && mono_ms() < until;) {
		admin_send(&mgr, &probe);
		serve(&f, 200);
	}
	assert_true(admin_answers(&probe, NULL) > 0);

	/* The eviction, then the liveness request behind it. The eviction's
	 * sweep is held once the $SYS observer is connected (its nonces are
	 * signed here; the evictor's KICKs are the supervisor's to send, and
	 * nobody is connected to kick). */
	t_send = mono_ms();
	admin_send(&mgr, &held);
	admin_send(&mgr, &queued);
	assert_int_equal(natsConnection_Flush(mgr.nc), NATS_OK);
	for (until = mono_ms() + CALL_MS; f.signed_sys < 1 && mono_ms() < until;)
		serve(&f, 100);
	assert_true(f.signed_sys >= 1);
	serve(&f, 300);
	assert_int_equal(admin_answers(&held, NULL), 0);
	assert_int_equal(admin_answers(&queued, NULL), 0);

	/* The credential is renewed: a new connection, its nonce signed late. */
	int before = f.signed_nonces;
	f.hold_sign_ms = SIGN_HOLD_MS;
	t_reconnect = mono_ms();
	assert_int_equal(ipc_send(f.ch, IPC_RECONNECT, NULL, 0), 0);
	for (until = mono_ms() + CALL_MS; f.signed_nonces == before && mono_ms() < until;)
		serve(&f, 100);
	assert_true(f.signed_nonces > before);
	for (until = mono_ms() + CALL_MS; admin_answers(&queued, NULL) == 0 && mono_ms() < until;)
		serve(&f, 100);
	serve(&f, QUIET_MS);

	int held_n = admin_answers(&held, &t_held), queued_n = admin_answers(&queued, &t_queued);
	print_message("sent +0; RECONNECT +%lld; eviction answered %d× (first +%lld); new "
	    "connection's nonce asked +%lld, signed +%lld; liveness answered %d× (first +%lld) "
	    "ms\n",
	    (long long)(t_reconnect - t_send), held_n, (long long)(t_held - t_send),
	    (long long)(f.sign_req_ms - t_send), (long long)(f.signed_ms - t_send), queued_n,
	    (long long)(t_queued - t_send));
	assert_int_equal(held_n, 1);
	assert_int_equal(queued_n, 1);
	/* In hand when RECONNECT came (the hook's nap ends with it: it naps
	 * with worker_nap), answered on the old connection. */
	assert_true(t_held >= t_reconnect);
	assert_true(t_held <= f.sign_req_ms);
	/* Answered once the new connection is up, well within 5 s. */
	assert_true(t_queued >= f.signed_ms);
	assert_true(t_queued - f.signed_ms < 5000);
	assert_answered_about(&held, "local.slowhold");
	assert_answered_about(&queued, "local.afterhold");

	stop_worker(&f, 5000);
	admin_done(&probe);
	admin_done(&held);
	admin_done(&queued);
	h_close(&mgr);
}

/* The `reader` consumer's ack floor and its deliveries not acked. */
static void
reader_acks(struct conn *c, uint64_t *floor, int64_t *pending)
{
	jsConsumerInfo *ci = h_reader_info(c, &mesh);

	assert_non_null(ci);
	*floor = ci->AckFloor.Stream;
	*pending = ci->NumAckPending + (int64_t)ci->NumPending;
	jsConsumerInfo_Destroy(ci);
}

/* Post n's entry for agent a on channel qflow, as the fan-out writes it
 * (its dedup key included), published asynchronously on c. */
static void
entry_publish(struct conn *c, const struct agent *a, const char *from, int n)
{
	char pid[32], subj[512], id[DEDUP_KEY_MAX];
	struct lifecycle to;
	natsMsg *msg = NULL;
	size_t len;

	snprintf(pid, sizeof(pid), "qf-%d", n);
	json_t *post = json_pack("{s:s, s:I, s:s, s:{s:s, s:s}, s:[{s:s, s:s}], s:s}",
	    "id", pid, "ts", (json_int_t)wall_ms(), "space", mesh.space, "from", "id", from,
	    "name", "qflow", "parts", "kind", "text", "text", "flow", "channel", "qflow");
	assert_non_null(post);
	snprintf(to.owner, sizeof(to.owner), "%s", a->owner);
	snprintf(to.actor, sizeof(to.actor), "%s", a->actor);
	snprintf(to.uid, sizeof(to.uid), "%s", a->uid);
	char *body = entry_build(post, "qflow", (uint64_t)n, REASON_DURABLE, 1, &len);
	assert_non_null(body);
	assert_true(dedup_key(pid, &to, 1, id, sizeof(id)));
	snprintf(subj, sizeof(subj), "cotal.%s.dinbox.%s.%s.%s", mesh.token, to.owner, to.actor,
	    to.uid);
	assert_int_equal(natsMsg_Create(&msg, subj, NULL, body, (int)len), NATS_OK);
	natsMsgHeader_Set(msg, "Nats-Msg-Id", id);
	assert_int_equal(js_PublishMsgAsync(c->js, &msg, NULL), NATS_OK);
	free(body);
	json_decref(post);
}

/* INBOX and DLV keep 1000 messages a subject (WIRE.md §2): 1000 each. */
#define QF_AGENTS 20
#define QF_EACH 1000
#define QF_TRICKLE 3    /* agents of the flow that goes on after the RESUME */

/*
 * The reader under a flow of entries, a QUIESCE in its middle (issue 40:
 * the reader publishes one batch's frames while the one before waits for
 * its acks). The fence: "a unit of work dispatched before the quiesce never
 * acks or answers after it" (ARCHITECTURE.md), a batch held across it
 * included: once QUIESCED is answered and the broker has applied what
 * came before it, the consumer's ack floor and its count of entries not
 * acked stay where they are while the worker is quiesced. After a RESUME,
 * under a flow that goes on, it asks back what the fence kept from being
 * acked within 30 s (the ack wait is 60 s): every entry acked, one frame
 * each in DLV (a frame published before the quiesce and published again
 * after it keeps its key: no second copy), none lost.
 */
static void
test_reader_acks_nothing_after_a_quiesce(void **state)
{
	struct agent a[QF_AGENTS + QF_TRICKLE];
	struct conn prov, dlv;
	struct fake f;
	struct ipc_msg m;
	char err[512], path[H_PATH_MAX * 2], key[512], subj[512];
	uint64_t floor0, floor1, floor_end = 0, base = 0;
	int64_t pend0, pend1, pend_end = -1, frames0;
	const int total = QF_AGENTS * QF_EACH;

	(void)state;
	assert_int_equal(h_connect_profile(&mesh, "provisioner", &prov, err, sizeof(err)), 0);
	space_key(mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/delivery.creds", mesh.dir, key);
	assert_int_equal(h_connect(&mesh, path, &dlv, err, sizeof(err)), 0);
	for (int i = 0; i < QF_AGENTS + QF_TRICKLE; i++) {
		char name[32];
		snprintf(name, sizeof(name), "qflow%d", i);
		assert_int_equal(h_agent_add(&mesh, name, "qflow", &a[i]), 0);
		if (h_member_put(&prov, &mesh, &a[i], "qflow", 0, 0, 1, err, sizeof(err)) != 0)
			fail_msg("member row: %s", err);
	}
	snprintf(subj, sizeof(subj), "DLV_%s", mesh.token);
	frames0 = h_stream_msgs(&prov, subj);
	assert_true(frames0 >= 0);
	assert_int_equal(h_stream_last_seq(&prov, &mesh, "INBOX", &base), 0);
	/* The entries, as the fan-out writes them (posts 1..QF_EACH, one
	 * entry per member each), before the reader starts: a flow. */
	for (int n = 1; n <= QF_EACH; n++)
		for (int i = 0; i < QF_AGENTS; i++)
			entry_publish(&dlv, &a[i], a[0].principal, n);
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = 20000;
	assert_int_equal(js_PublishAsyncComplete(dlv.js, &po), NATS_OK);

	spawn_worker(&f, "reader", NULL);
	assert_int_equal(await(&f, IPC_READY, 10000, &m), 0);
	/* In the middle of the flow: some acked, most not. */
	int64_t t0 = mono_ms();
	do {
		serve(&f, 20);
		reader_acks(&prov, &floor0, &pend0);
	} while (floor0 == 0 && mono_ms() - t0 < 20000);
	assert_true(floor0 > 0);
	if (pend0 == 0)
		fail_msg("the flow was over before the QUIESCE (%d entries): nothing tested",
		    total);
	assert_int_equal(ipc_send(f.ch, IPC_QUIESCE, NULL, 0), 0);
	assert_int_equal(await(&f, IPC_QUIESCED, 6000, &m), 0);
	/* QUIESCED is answered once what the worker sent is at the broker,
	 * but a broker applies a consumer's acks on a queue of its own (2.9.10
	 * after the PONG too): read until two reads 100 ms apart agree. */
	reader_acks(&prov, &floor0, &pend0);
	t0 = mono_ms();
	for (;;) {
		serve(&f, 100);
		reader_acks(&prov, &floor1, &pend1);
		if (floor1 == floor0 && pend1 == pend0)
			break;
		floor0 = floor1, pend0 = pend1;
		if (mono_ms() - t0 > 5000)
			fail_msg("the reader's acks still move 5 s after QUIESCED");
	}
	serve(&f, 1500);
	reader_acks(&prov, &floor1, &pend1);
	assert_int_equal(floor1, floor0);
	assert_int_equal(pend1, pend0);

	/* Resumed under a flow that goes on (an entry every 100 ms on each
	 * of QF_TRICKLE other agents, so the worker is never idle a second:
	 * no idle check asks anything back): what the closed fence kept from
	 * being acked is asked back at once (pullloop.c), and the ack floor
	 * passes the first flow well within the consumer's 60 s ack wait. */
	assert_int_equal(ipc_send(f.ch, IPC_RESUME, NULL, 0), 0);
	int trickled = 0;
	t0 = mono_ms();
	do {
		trickled++;
		for (int i = QF_AGENTS; i < QF_AGENTS + QF_TRICKLE; i++)
			entry_publish(&dlv, &a[i], a[0].principal, QF_EACH + trickled);
		serve(&f, 100);
		reader_acks(&prov, &floor_end, &pend_end);
	} while (floor_end < base + (uint64_t)total && mono_ms() - t0 < 30000);
	if (floor_end < base + (uint64_t)total)
		fail_msg("30 s after the RESUME the ack floor is %llu, the first flow ends at %llu",
		    (unsigned long long)floor_end, (unsigned long long)(base + total));
	assert_int_equal(js_PublishAsyncComplete(dlv.js, &po), NATS_OK);
	const int all = total + trickled * QF_TRICKLE;
	t0 = mono_ms();
	do {
		serve(&f, 100);
		reader_acks(&prov, &floor_end, &pend_end);
	} while ((floor_end < base + (uint64_t)all || pend_end != 0) && mono_ms() - t0 < 30000);
	assert_int_equal(floor_end, base + (uint64_t)all);
	assert_int_equal(pend_end, 0);
	snprintf(subj, sizeof(subj), "DLV_%s", mesh.token);
	assert_int_equal(h_stream_msgs(&prov, subj), frames0 + all);
	stop_worker(&f, 8000);
	h_close(&dlv);
	h_close(&prov);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worker_speaks_the_protocol),
		cmocka_unit_test(test_a_worker_logging_to_a_file_refuses_and_says_why),
		cmocka_unit_test(test_worker_stops_on_garbage),
		cmocka_unit_test(test_worker_exits_when_the_channel_closes),
		cmocka_unit_test(test_registry_holds_queued_admin_replies_across_a_reconnect),
		cmocka_unit_test(test_reader_acks_nothing_after_a_quiesce),
	};
	signal(SIGPIPE, SIG_IGN);
	h_use_broker(h_broker_arg(argc, argv));
	return h_done(cmocka_run_group_tests(tests, setup, teardown));
}
