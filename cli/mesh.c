/*
 * `cotal mesh init --dev | start | stop`: a local authenticated dev mesh.
 *
 * init makes the operator, the system account and one account per space
 * (each with its own signing key), a nats-server config in operator mode
 * with a MEMORY resolver, the per-space credentials of WIRE.md §8 and the
 * mesh registry record. Running it again keeps every key and credential it
 * already made and adds the spaces that are new.
 *
 * `init --dev --open` makes an open mesh instead: a broker without
 * authentication, and the registry records. Open mode is live-only (the
 * seed: there is no trusted reader, so no durable backstop): no keys, no
 * credentials, and no delivery daemon will start on it.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "cli/dev_signer.h"
#include "cli/mesh.h"
#include "cli/mint.h"
#include "lib/creds/creds.h"
#include "lib/log.h"
#include "lib/servers.h"
#include "lib/wire/tokens.h"

#define MESH_MAX_SPACES 64
#define CONF_MAX (1024 * 1024)
#define VERSION_OUT_MAX 256   /* what `nats-server --version` prints */
#define VERSION_WAIT_MS 5000
/* The first nats-server that accepts `sync_interval` in its jetstream block. */
#define SYNC_INTERVAL_SINCE 210

/* The credentials init makes for every space (WIRE.md §8 and the CLI). */
static const enum profile space_creds[] = {
	PROFILE_DELIVERY, PROFILE_SYS_OBSERVER, PROFILE_SYS_EVICTOR,
	PROFILE_PROVISIONER, PROFILE_SUPERVISOR,
};

static int
sign_account(const char *name, const struct nkey *id, const struct nkey *signing,
	     const struct nkey *op, bool jetstream, char **jwt, char *err, size_t errlen)
{
	char idpub[NKEY_PUBLIC_LEN + 1], skpub[NKEY_PUBLIC_LEN + 1], why[256];
	const char *sks[1] = { skpub };
	json_t *claims;

	nkey_public(id, idpub);
	nkey_public(signing, skpub);
	claims = dev_account_claims(name, idpub, sks, 1, jetstream);
	*jwt = claims ? dev_jwt_sign(claims, op, why, sizeof(why)) : NULL;
	json_decref(claims);
	if (*jwt == NULL) {
		snprintf(err, errlen, "sign account %s: %s", name, claims ? why : "no claims");
		return -1;
	}
	return 0;
}

/* The brokers of the mesh: one (nodes 0) or a cluster of nodes 1..N. */
struct mesh_nodes {
	int count;                        /* 0: one broker, no cluster */
	int ports[MESH_NODES_MAX];        /* client ports; [0] alone when count is 0 */
	int route_ports[MESH_NODES_MAX];  /* cluster (route) ports */
};

/* One node's nats-server.conf; sys_pub NULL for an open mesh. */
static int
write_conf(const struct workspace *ws, const char *listen, const struct mesh_nodes *mn,
	   int node, const char *sys_pub, json_t *preload, bool sync_always, char *err,
	   size_t errlen)
{
	char path[WS_FILE_MAX];
	int port = mn->ports[node > 0 ? node - 1 : 0];
	size_t cap = CONF_MAX, n = 0;
	char *buf = malloc(cap);
	const char *acct;
	json_t *jwt;
	int rc;

	if (buf == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
#define EMIT(...) do { \
	int w_ = snprintf(buf + n, cap - n, __VA_ARGS__); \
	if (w_ < 0 || (size_t)w_ >= cap - n) { free(buf); \
		snprintf(err, errlen, "nats-server.conf over %d bytes", CONF_MAX); return -1; } \
	n += (size_t)w_; } while (0)
	EMIT("# Written by `cotal mesh init --dev`: a local broker%s.\n",
	    sys_pub != NULL ? " in operator mode" : ", open (no authentication)");
	const char *fmt = strchr(listen, ':') ? "[%s]:%d" : "%s:%d";
	if (node == 0)
		EMIT("server_name: cotal_dev\n");
	else
		EMIT("server_name: cotal_dev_%d\n", node);
	EMIT("listen: \"");
	EMIT(fmt, listen, port);
	EMIT("\"\n");
	if (node > 0) {
		/* Routes between the nodes: loopback only, like the clients. */
		EMIT("cluster: {\n  name: cotal_dev\n  listen: \"");
		EMIT(fmt, listen, mn->route_ports[node - 1]);
		EMIT("\"\n  routes: [\n");
		for (int i = 0; i < mn->count; i++)
			if (i != node - 1) {
				EMIT("    \"nats-route://");
				EMIT(fmt, listen, mn->route_ports[i]);
				EMIT("\"\n");
			}
		EMIT("  ]\n}\n");
	}
	/* The delivery credential's grants ride the CONNECT line (WIRE.md §7). */
	EMIT("max_control_line: 65536\n");
	if (sys_pub == NULL) {
		EMIT("# Open mode (--open): no authentication; live-only, no delivery daemon.\n");
	} else {
		EMIT("operator: \"%s/operator.jwt\"\n", ws->mesh);
		EMIT("system_account: %s\n", sys_pub);
		EMIT("resolver: MEMORY\n");
		EMIT("resolver_preload: {\n");
		json_object_foreach(preload, acct, jwt)
			EMIT("  %s: \"%s\"\n", acct, json_string_value(jwt));
		EMIT("}\n");
	}
	if (node == 0)
		EMIT("jetstream: {\n  store_dir: \"%s/jetstream\"\n", ws->mesh);
	else
		EMIT("jetstream: {\n  store_dir: \"%s/jetstream-%d\"\n", ws->mesh, node);
	/* A ceiling on reservations: every space provisioned here reserves
	 * its storage budget (PROV_STORAGE_DEFAULT, 4 GiB, unless --storage
	 * says) against it, whatever it writes; what the dev mesh writes is
	 * bounded by each stream's max_bytes. 256 such spaces fit. */
	EMIT("  max_memory_store: 256MB\n  max_file_store: 1TB\n");
	/* Without it the file store flushes in the background (every 2 min)
	 * and a broker crash loses writes it already acknowledged: the copies
	 * the delivery service promises at least once. */
	if (sync_always)
		EMIT("  # every write reaches the disk before it is acknowledged\n"
		    "  sync_interval: always\n");
	EMIT("}\n");
	mesh_node_file(ws->mesh, node, "pid", path, sizeof(path));
	EMIT("pid_file: \"%s\"\n", path);
#undef EMIT
	mesh_node_file(ws->mesh, node, "conf", path, sizeof(path));
	rc = ws_write_file(path, buf, n, 0600, err, errlen);
	free(buf);
	return rc;
}

static int
write_registry(const char *space, const char *url, const char *root, char *err,
	       size_t errlen)
{
	char path[WS_PATH_MAX], dir[WS_PATH_MAX];
	json_t *doc;
	int rc;

	if (ws_registry_path(space, path, sizeof(path), err, errlen) != 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	if (ws_mkdirs(dir, err, errlen) != 0)
		return -1;
	doc = json_pack("{s:s, s:b, s:s}", "server", url, "tlsRequired", 0, "root", root);
	rc = ws_write_json(path, doc, 0600, err, errlen);
	json_decref(doc);
	return rc;
}

/* Mint one of a space's standing credentials unless it exists already. */
static int
ensure_creds(const struct workspace *ws, const char *space, enum profile p,
	     char *err, size_t errlen)
{
	char dir[WS_PATH_MAX], path[WS_FILE_MAX];
	struct mint_req req = { .profile = p, .space = space };
	struct minted m;
	int rc;

	if (ws_space_dir(ws, space, true, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s.creds", dir, profile_name(p));
	if (access(path, F_OK) == 0)
		return 0;
	if (mint_user(ws, &req, &m, err, errlen) != 0)
		return -1;
	rc = ws_write_file(path, m.creds, strlen(m.creds), 0600, err, errlen);
	if (rc == 0)
		log_ok("minted %s (user %.12s…) for space %s", path, m.user_pub, space);
	minted_free(&m);
	return rc;
}

/*
 * The version of the nats-server at bin, from its --version ("nats-server:
 * v2.10.27"), as major * 100 + minor; -1 with err when it cannot be told.
 * Run without a shell; its output is bounded and it gets VERSION_WAIT_MS.
 */
static int
broker_version(const char *bin, char *err, size_t errlen)
{
	char out[VERSION_OUT_MAX] = "";
	size_t n = 0;
	int fds[2], major, minor, status;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		execlp(bin, bin, "--version", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
	while (n + 1 < sizeof(out) && poll(&pfd, 1, VERSION_WAIT_MS) > 0) {
		ssize_t r = read(fds[0], out + n, sizeof(out) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = '\0';
	close(fds[0]);
	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && n == 0) {
		snprintf(err, errlen, "cannot run %s", bin);
		return -1;
	}
	const char *v = strstr(out, "nats-server: v");
	if (v == NULL || sscanf(v, "nats-server: v%d.%d", &major, &minor) != 2 || major < 0 ||
	    minor < 0 || minor > 99 || major > 99) {
		snprintf(err, errlen, "%s --version did not name a nats-server version", bin);
		return -1;
	}
	return major * 100 + minor;
}

/*
 * Should the config make JetStream sync every write (sync_interval: always)?
 * want: the operator's choice ("always" or "default"); bin: the broker the
 * config is for. Says what the choice means for the at-least-once promise.
 */
static bool
sync_decide(const char *want, const char *bin)
{
	char why[512];
	int v;

	if (strcmp(want, "default") == 0) {
		log_warnx("broker store: the broker's own sync interval (--sync-interval default): "
		    "a broker crash can lose writes it already acknowledged, copies owed to members "
		    "among them");
		return false;
	}
	if ((v = broker_version(bin, why, sizeof(why))) < 0) {
		log_warnx("broker store: %s; wrote sync_interval: always all the same (a "
		    "nats-server before 2.10 refuses it: unknown field \"sync_interval\")", why);
		return true;
	}
	if (v < SYNC_INTERVAL_SINCE) {
		log_warnx("broker store: nats-server %d.%d (%s) does not accept sync_interval, so "
		    "it flushes writes to disk in the background: a crash of that broker (kill -9, "
		    "OOM, power loss) can lose writes it already acknowledged, and the delivery "
		    "service's \"losing nothing\" holds only across clean broker stops. Run "
		    "nats-server 2.10 or later (make deps fetches one), or a 3-replica cluster",
		    v / 100, v % 100, bin);
		return false;
	}
	log_info("broker store: sync_interval: always (nats-server %d.%d): every JetStream write "
	    "reaches the disk before the broker acknowledges it", v / 100, v % 100);
	return true;
}

/* "P" or "P1,P2,...": up to max ports into out; their count, or -1 (logged). */
static int
parse_ports(const char *opt, const char *s, int *out, int max)
{
	char buf[256], *save = NULL;
	int n = 0;

	if (strlen(s) >= sizeof(buf)) {
		log_errx("mesh init: %s %.64s…: too long", opt, s);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		if (n == max) {
			log_errx("mesh init: %s %s: at most %d ports", opt, s, max);
			return -1;
		}
		if (cli_parse_port(t, &out[n++]) != 0)
			return -1;
	}
	if (n == 0)
		log_errx("mesh init: %s \"%s\": no port", opt, s);
	return n > 0 ? n : -1;
}

/* The nodes' ports: one given port per node, or the first and the next ones.
 * 0, or -1 (logged). */
static int
nodes_ports(const char *opt, const int *given, int ngiven, int count, int *out)
{
	if (ngiven != 1 && ngiven != count) {
		log_errx("mesh init: %s: give one port, or one for each of the %d nodes", opt, count);
		return -1;
	}
	for (int i = 0; i < count; i++) {
		out[i] = ngiven == 1 ? given[0] + i : given[i];
		if (out[i] > 65535) {
			log_errx("mesh init: %s: port %d is past 65535", opt, out[i]);
			return -1;
		}
	}
	return 0;
}

/* The mesh's URL list: one nats:// URL per node, comma-separated. */
static void
nodes_url(const char *listen, const struct mesh_nodes *mn, char *out, size_t outlen)
{
	char one[300];

	out[0] = '\0';
	for (int i = 0; i < (mn->count > 0 ? mn->count : 1); i++) {
		snprintf(one, sizeof(one), strchr(listen, ':') ? "nats://[%s]:%d" : "nats://%s:%d",
		    listen, mn->ports[i]);
		if (!servers_append(out, outlen, one))
			break;
	}
}

/*
 * The keys and JWTs of an operator-mode mesh: the operator, the system
 * account and one account per space of jspaces (each kept when it exists),
 * their public keys into mesh, their JWTs into preload (the broker's MEMORY
 * resolver); the system account's public key into sys_pub.
 */
static int
mesh_keys(const struct workspace *ws, json_t *mesh, json_t *jspaces, json_t *preload,
	  char sys_pub[NKEY_PUBLIC_LEN + 1], char *err, size_t errlen)
{
	char path[WS_FILE_MAX], key[SPACE_KEY_MAX + 1];
	char pub[NKEY_PUBLIC_LEN + 1], skpub[NKEY_PUBLIC_LEN + 1];
	struct nkey op = { 0 }, sys = { 0 }, syssk = { 0 };
	char *jwt = NULL;
	int rc = -1;

	snprintf(path, sizeof(path), "%s/keys", ws->mesh);
	if (ws_mkdirs(path, err, errlen) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/keys/operator.nk", ws->mesh);
	if (devkey_load(path, NKEY_OPERATOR, 1, &op, err, errlen) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/keys/system.nk", ws->mesh);
	if (devkey_load(path, NKEY_ACCOUNT, 1, &sys, err, errlen) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/keys/system-signing.nk", ws->mesh);
	if (devkey_load(path, NKEY_ACCOUNT, 1, &syssk, err, errlen) != 0)
		goto fail;
	nkey_public(&sys, pub);
	nkey_public(&syssk, skpub);
	json_object_set_new(mesh, "systemAccount", json_string(pub));
	json_object_set_new(mesh, "systemSigningKey", json_string(skpub));

	/* Operator JWT, naming the system account. */
	{
		char oppub[NKEY_PUBLIC_LEN + 1], why[256];
		nkey_public(&op, oppub);
		json_t *claims = dev_operator_claims("cotal-dev", oppub, pub);
		jwt = claims ? dev_jwt_sign(claims, &op, why, sizeof(why)) : NULL;
		json_decref(claims);
		if (jwt == NULL) {
			snprintf(err, errlen, "sign operator: %s", why);
			goto fail;
		}
		snprintf(path, sizeof(path), "%s/operator.jwt", ws->mesh);
		if (ws_write_file(path, jwt, strlen(jwt), 0600, err, errlen) != 0)
			goto fail;
		free(jwt);
		jwt = NULL;
		json_object_set_new(mesh, "operator", json_string(oppub));
	}
	if (sign_account("SYS", &sys, &syssk, &op, false, &jwt, err, errlen) != 0)
		goto fail;
	json_object_set_new(preload, pub, json_string(jwt));
	free(jwt);
	jwt = NULL;

	/* One account per space. */
	const char *sname;
	json_t *sp;
	json_object_foreach(jspaces, sname, sp) {
		struct nkey acc = { 0 }, sk = { 0 };
		if (!space_key(sname, key, sizeof(key))) {
			snprintf(err, errlen, "space name too long");
			goto fail;
		}
		snprintf(path, sizeof(path), "%s/keys/space.%s.nk", ws->mesh, key);
		if (devkey_load(path, NKEY_ACCOUNT, 1, &acc, err, errlen) != 0)
			goto fail;
		snprintf(path, sizeof(path), "%s/keys/space.%s-signing.nk", ws->mesh, key);
		if (devkey_load(path, NKEY_ACCOUNT, 1, &sk, err, errlen) != 0) {
			nkey_wipe(&acc);
			goto fail;
		}
		int r = sign_account(sname, &acc, &sk, &op, true, &jwt, err, errlen);
		nkey_public(&acc, pub);
		nkey_public(&sk, skpub);
		nkey_wipe(&acc);
		nkey_wipe(&sk);
		if (r != 0)
			goto fail;
		json_object_set_new(sp, "account", json_string(pub));
		json_object_set_new(sp, "signingKey", json_string(skpub));
		json_object_set_new(preload, pub, json_string(jwt));
		free(jwt);
		jwt = NULL;
	}

	nkey_public(&sys, sys_pub);
	rc = 0;
fail:
	free(jwt);
	nkey_wipe(&op);
	nkey_wipe(&sys);
	nkey_wipe(&syssk);
	return rc;
}

int
cmd_mesh_init(int argc, char **argv)
{
	const char *root = NULL, *listen = "127.0.0.1", *spaces[MESH_MAX_SPACES];
	const char *bin = NULL, *sync = NULL;
	char err[1024], path[WS_FILE_MAX], url[1024], sys_pub[NKEY_PUBLIC_LEN + 1] = "";
	size_t nspaces = 0;
	int dev = 0, open_mode = 0, rc = 1, nports = 0, nroutes = 0;
	int ports[MESH_NODES_MAX] = { 4222 }, routes[MESH_NODES_MAX] = { 6222 };
	struct mesh_nodes mn = { 0 };
	struct workspace ws;
	json_t *mesh = NULL, *preload = json_object(), *jspaces;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--dev") == 0)
			dev = 1;
		else if (strcmp(argv[i], "--open") == 0)
			open_mode = 1;
		else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			root = argv[++i];
		else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
			listen = argv[++i];
		else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			if ((nports = parse_ports("--port", argv[++i], ports, MESH_NODES_MAX)) < 0)
				goto out;
		} else if (strcmp(argv[i], "--route-port") == 0 && i + 1 < argc) {
			if ((nroutes = parse_ports("--route-port", argv[++i], routes,
			    MESH_NODES_MAX)) < 0)
				goto out;
		} else if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*argv[i] == '\0' || *end != '\0' || v < 3 || v > MESH_NODES_MAX) {
				log_errx("mesh init: --cluster %s: a dev cluster has 3 to %d nodes "
				    "(JetStream's 3 replicas need 3)", argv[i], MESH_NODES_MAX);
				goto out;
			}
			mn.count = (int)v;
		} else if (strcmp(argv[i], "--nats-server") == 0 && i + 1 < argc) {
			bin = argv[++i];
		} else if (strcmp(argv[i], "--sync-interval") == 0 && i + 1 < argc) {
			sync = argv[++i];
			if (strcmp(sync, "always") != 0 && strcmp(sync, "default") != 0) {
				log_errx("mesh init: --sync-interval %s: must be always (every write "
				    "on disk before its acknowledgement) or default (the broker's own)",
				    sync);
				goto out;
			}
		} else if (strcmp(argv[i], "--space") == 0 && i + 1 < argc) {
			if (nspaces == MESH_MAX_SPACES) {
				log_errx("mesh init: at most %d spaces", MESH_MAX_SPACES);
				goto out;
			}
			spaces[nspaces++] = argv[++i];
		} else {
			log_errx("mesh init: unknown or incomplete argument \"%s\"", argv[i]);
			goto usage;
		}
	}
	if (!dev) {
		log_errx("mesh init: only --dev meshes are made by this command "
		    "(a production mesh's keys are not kept on this host)");
		goto usage;
	}
	if (nspaces == 0) {
		log_errx("mesh init: name at least one --space");
		goto usage;
	}
	for (size_t i = 0; i < nspaces; i++)
		if (strlen(spaces[i]) == 0 || strlen(spaces[i]) > SPACE_NAME_MAX) {
			log_errx("mesh init: --space must be 1 to %d bytes", SPACE_NAME_MAX);
			goto out;
		}
	if (strcmp(listen, "127.0.0.1") != 0 && strcmp(listen, "::1") != 0 &&
	    strcmp(listen, "localhost") != 0) {
		log_errx("mesh init: --listen %s: a dev mesh listens on loopback only", listen);
		goto out;
	}
	if (ws_create(root, &ws, err, sizeof(err)) != 0) {
		log_errx("mesh init: %s", err);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/dev-mesh.json", ws.mesh);
	if (access(path, F_OK) == 0) {
		if ((mesh = ws_dev_mesh(&ws, err, sizeof(err))) == NULL) {
			log_errx("mesh init: %s", err);
			goto out;
		}
		/* A mesh keeps its mode: open (no authentication) or operator. */
		const char *was = json_string_value(json_object_get(mesh, "auth"));
		bool was_open = was != NULL && strcmp(was, "open") == 0;
		if (was_open != (open_mode != 0)) {
			log_errx("mesh init: %s is %s dev mesh; a mesh keeps its mode (%s, or init "
			    "another --root)", path, was_open ? "an open" : "an authenticated",
			    was_open ? "add --open" : "drop --open");
			goto out;
		}
		/* An existing mesh keeps its nodes and ports unless named. */
		json_t *jc = json_object_get(mesh, "cluster");
		if (mn.count == 0 && json_is_object(jc))
			mn.count = (int)json_integer_value(json_object_get(jc, "nodes"));
		if (mn.count < 0 || mn.count > MESH_NODES_MAX || mn.count == 1 || mn.count == 2) {
			snprintf(err, sizeof(err), "dev-mesh.json: cluster.nodes %d is not 3 to %d",
			    mn.count, MESH_NODES_MAX);
			goto fail;
		}
		if (nports == 0 && mn.count == 0 &&
		    json_integer_value(json_object_get(mesh, "port")) > 0) {
			ports[0] = (int)json_integer_value(json_object_get(mesh, "port"));
			nports = 1;
		}
		json_t *jp = json_object_get(jc, "ports"), *jr = json_object_get(jc, "routePorts");
		if (nports == 0 && mn.count > 0 && json_array_size(jp) == (size_t)mn.count) {
			for (int k = 0; k < mn.count; k++)
				ports[k] = (int)json_integer_value(json_array_get(jp, (size_t)k));
			nports = mn.count;
		}
		if (nroutes == 0 && mn.count > 0 && json_array_size(jr) == (size_t)mn.count) {
			for (int k = 0; k < mn.count; k++)
				routes[k] = (int)json_integer_value(json_array_get(jr, (size_t)k));
			nroutes = mn.count;
		}
	} else
		mesh = json_object();
	if (mn.count == 0) {
		if (nports > 1 || nroutes > 0) {
			log_errx("mesh init: several --port values and --route-port are for a cluster "
			    "(--cluster N)");
			goto out;
		}
		mn.ports[0] = ports[0];
	} else if (nodes_ports("--port", ports, nports > 0 ? nports : 1, mn.count, mn.ports) != 0 ||
	    nodes_ports("--route-port", routes, nroutes > 0 ? nroutes : 1, mn.count,
	    mn.route_ports) != 0) {
		goto out;
	}
	/* An existing mesh keeps its store's sync choice unless one is named. */
	if (sync == NULL)
		sync = json_string_value(json_object_get(mesh, "syncInterval"));
	/* A literal from here on: the record's own string goes with the set. */
	sync = sync != NULL && strcmp(sync, "default") == 0 ? "default" : "always";
	json_object_set_new(mesh, "syncInterval", json_string(sync));
	bool sync_always = sync_decide(sync, bin != NULL ? bin : cli_nats_server_path());
	if (!json_is_object(json_object_get(mesh, "spaces")))
		json_object_set_new(mesh, "spaces", json_object());
	jspaces = json_object_get(mesh, "spaces");

	/* Every space of the mesh, old and new. */
	for (size_t i = 0; i < nspaces; i++)
		if (json_object_get(jspaces, spaces[i]) == NULL)
			json_object_set_new(jspaces, spaces[i], json_object());
	if (open_mode)
		json_object_set_new(mesh, "auth", json_string("open"));
	else {
		json_object_set_new(mesh, "auth", json_string("operator"));
		if (mesh_keys(&ws, mesh, jspaces, preload, sys_pub, err, sizeof(err)) != 0)
			goto fail;
	}

	nodes_url(listen, &mn, url, sizeof(url));
	json_object_set_new(mesh, "server", json_string(url));
	json_object_set_new(mesh, "listen", json_string(listen));
	json_object_set_new(mesh, "port", json_integer(mn.ports[0]));
	if (mn.count > 0) {
		json_t *jc = json_object(), *jp = json_array(), *jr = json_array();
		for (int k = 0; k < mn.count; k++) {
			json_array_append_new(jp, json_integer(mn.ports[k]));
			json_array_append_new(jr, json_integer(mn.route_ports[k]));
		}
		json_object_set_new(jc, "nodes", json_integer(mn.count));
		json_object_set_new(jc, "ports", jp);
		json_object_set_new(jc, "routePorts", jr);
		json_object_set_new(mesh, "cluster", jc);
	} else {
		json_object_del(mesh, "cluster");
	}
	snprintf(path, sizeof(path), "%s/dev-mesh.json", ws.mesh);
	if (ws_write_json(path, mesh, 0600, err, sizeof(err)) != 0)
		goto fail;
	for (int node = mn.count > 0 ? 1 : 0; node <= mn.count; node++)
		if (write_conf(&ws, listen, &mn, node, open_mode ? NULL : sys_pub, preload,
		    sync_always, err, sizeof(err)) != 0)
			goto fail;
	const char *sname;
	json_t *sp;
	json_object_foreach(jspaces, sname, sp) {
		for (size_t k = 0; !open_mode && k < sizeof(space_creds) / sizeof(space_creds[0]);
		    k++)
			if (ensure_creds(&ws, sname, space_creds[k], err, sizeof(err)) != 0)
				goto fail;
		if (write_registry(sname, url, ws.root, err, sizeof(err)) != 0)
			goto fail;
	}
	log_ok("%sdev mesh ready in %s/.cotal (%s %s, %zu space%s) — start it with: "
	    "cotal mesh start --root %s", open_mode ? "open " : "", ws.root,
	    mn.count > 0 ? "cluster" : "broker", url, json_object_size(jspaces),
	    json_object_size(jspaces) == 1 ? "" : "s", ws.root);
	if (open_mode)
		log_warnx("open mode is live-only: no authentication, no delivery daemon, no "
		    "durable channels (an auth mesh, without --open, has them)");
	rc = 0;
	goto out;
fail:
	log_errx("mesh init: %s", err);
	goto out;
usage:
	rc = CLI_USAGE;
out:
	json_decref(preload);
	json_decref(mesh);
	return rc;
}

