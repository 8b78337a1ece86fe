/*
 * `cotal agent join|leave|memberships|history`: requests on the delivery
 * daemon's control rails (WIRE.md §5), and what every rail command shares
 * (rails.h). Agent commands call ctl.delivery as the agent itself, with its
 * own credential, once. (The manager's commands are admin.c's.)
 */
#include "cli/rails.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/ctlclient.h"
#include "lib/creds/jwt.h"
#include "lib/log.h"
#include "lib/wsnames.h"

#define AGENT_WAIT_MS 5000    /* an agent command's one try */

/* A client with its connection. */
void
cli_session_close(struct cli_session *s)
{
	natsConnection_Destroy(s->nc);
	ctl_client_free(s->client);
	if (s->creds.jwt != NULL)
		creds_free(&s->creds);
	memset(s, 0, sizeof(*s));
}

static int
parse_uint(const char *verb, const char *opt, const char *text, uint64_t min, uint64_t max,
	   uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*text < '0' || *text > '9')
		goto bad;
	v = strtoull(text, &end, 10);
	if (*end != '\0' || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	log_errx("%s: %s \"%s\" must be a whole number from %" PRIu64 " to %" PRIu64, verb, opt,
	    text, min, max);
	return -1;
}

/*
 * Parse argv: min_pos..max_pos positional arguments and the options in
 * opts. 0, or -1 after a refusal that names the argument.
 */
int
parse_rail_args(const char *verb, int argc, char **argv, unsigned opts, int min_pos,
		int max_pos, int wait_default, struct rail_args *a)
{
	uint64_t v;

	memset(a, 0, sizeof(*a));
	a->verb = verb;
	a->wait_ms = wait_default;
	for (int i = 0; i < argc; i++) {
		const char *o = argv[i];
		bool more = i + 1 < argc;
		if (strcmp(o, "--root") == 0 && more) {
			a->root = argv[++i];
		} else if (strcmp(o, "--space") == 0 && more) {
			a->space = argv[++i];
		} else if (strcmp(o, "--server") == 0 && more) {
			a->server = argv[++i];
		} else if (strcmp(o, "--json") == 0) {
			a->json = true;
		} else if (strcmp(o, "--wait") == 0 && more) {
			if (parse_uint(verb, o, argv[++i], 1, WAIT_MAX_MS, &v) != 0)
				return -1;
			a->wait_ms = (int)v;
		} else if ((opts & OPT_GENERATION) && strcmp(o, "--generation") == 0 && more) {
			if (parse_uint(verb, o, argv[++i], 1, INT64_MAX, &a->generation) != 0)
				return -1;
		} else if ((opts & OPT_LIMIT) && strcmp(o, "--limit") == 0 && more) {
			if (parse_uint(verb, o, argv[++i], 1, HISTORY_LIMIT_MAX, &a->limit) != 0)
				return -1;
		} else if ((opts & OPT_EXPECT) && strcmp(o, "--expect") == 0 && more) {
			const char *h = argv[++i];
			size_t n = strlen(h);
			bool hex = n == SHA256_HEX;
			for (size_t k = 0; hex && k < n; k++)
				hex = isxdigit((unsigned char)h[k]) != 0;
			if (!hex) {
				log_errx("%s: --expect \"%s\" must be the SHA-256 of the delivery JWT "
				    "(64 hex digits)", verb, h);
				return -1;
			}
			for (size_t k = 0; k < n; k++)
				a->expect[k] = (char)tolower((unsigned char)h[k]);
		} else if ((opts & OPT_FROM) && strcmp(o, "--from") == 0 && more) {
			a->from = argv[++i];
		} else if ((opts & OPT_LEDGER) && strcmp(o, "--ledger") == 0 && more) {
			a->ledger = argv[++i];
		} else if (o[0] == '-') {
			log_errx("%s: unknown or incomplete option \"%s\"", verb, o);
			return -1;
		} else if (a->npos < max_pos) {
			a->pos[a->npos++] = o;
		} else {
			log_errx("%s: unexpected argument \"%s\"", verb, o);
			return -1;
		}
	}
	if (a->space == NULL) {
		log_errx("%s: --space is required", verb);
		return -1;
	}
	if (a->npos < min_pos) {
		log_errx("%s: missing arguments", verb);
		return -1;
	}
	return 0;
}

int
rails_usage(void)
{
	return CLI_USAGE;
}

static bool
channel_ok(const struct rail_args *a, const char *ch)
{
	if (strlen(ch) <= CHANNEL_MAX && channel_concrete_valid(ch))
		return true;
	log_errx("%s: CHANNEL \"%s\" must be a concrete channel (durable membership is "
	    "per-concrete-channel, not wildcard)", a->verb, ch);
	return false;
}

/* A session that did not open: say why, naming the command. -1. */
static int
session_failed(const struct rail_args *a, struct cli_session *s, const char *err)
{
	log_errx("%s: %s", a->verb, err);
	cli_session_close(s);
	return -1;
}

/* Connect as the agent named a->pos[0]. */
static int
agent_session(const struct rail_args *a, struct agent_ref *r, struct cli_session *s)
{
	struct conn_opts o = { 0 };
	char err[4096];

	memset(s, 0, sizeof(*s));
	if (cli_agent_load(a->root, a->space, a->pos[0], r, err, sizeof(err)) != 0)
		goto fail;
	if ((s->client = ctl_client_new(a->space, r->owner, r->actor, r->name)) == NULL) {
		snprintf(err, sizeof(err), "agent %s: principal %s.%s is not made of identity tokens",
		    r->name, r->owner, r->actor);
		goto fail;
	}
	ctl_client_conn_opts(s->client, &o);
	if (cli_agent_connect(r, a->server, &o, &s->creds, &s->nc, err, sizeof(err)) != 0)
		goto fail;
	ctl_client_attach(s->client, s->nc);
	return 0;
fail:
	return session_failed(a, s, err);
}

/* The principal a credential's JWT is tagged with ("principal:<o>.<a>"). */
static int
creds_principal(const struct creds *c, char *owner, size_t olen, char *actor, size_t alen,
		char *err, size_t errlen)
{
	struct jwt j;
	json_t *tags, *t;
	size_t i;
	int rc = -1;

	if (jwt_decode(c->jwt, strlen(c->jwt), &j, err, errlen) != 0)
		return -1;
	tags = json_object_get(j.nats, "tags");
	json_array_foreach(tags, i, t) {
		const char *v = json_string_value(t);
		if (v != NULL && strncmp(v, "principal:", 10) == 0 &&
		    principal_parse(v + 10, owner, olen, actor, alen) == 0) {
			rc = 0;
			break;
		}
	}
	if (rc != 0)
		snprintf(err, errlen, "its JWT carries no principal:<owner>.<actor> tag");
	jwt_free(&j);
	return rc;
}

int
cli_manager_open(const struct workspace *ws, const char *space, const char *server,
		 struct cli_session *s, char *err, size_t errlen)
{
	struct conn_opts o = { .name = "cotal admin" };
	char path[WS_FILE_MAX], url[1024], why[1024];
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];
	struct cli_tls t = { 0 };
	bool tls = false;

	memset(s, 0, sizeof(*s));
	if (ws_space_known(ws, space, err, errlen) != 0 ||
	    cli_space_creds_path(ws, space, "supervisor", path, sizeof(path), err, errlen) != 0 ||
	    ws_server_url(ws, space, server, url, sizeof(url), &tls, err, errlen) != 0 ||
	    cli_tls_begin(space, url, tls, &t, &o, err, errlen) != 0)
		goto fail;
	if (creds_load(path, &s->creds, why, sizeof(why)) != 0 ||
	    creds_principal(&s->creds, owner, sizeof(owner), actor, sizeof(actor), why,
	    sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		goto fail;
	}
	if ((s->client = ctl_client_new(space, owner, actor, "cotal admin")) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	ctl_client_conn_opts(s->client, &o);
	o.url = url;
	if (conn_open(&o, &s->creds, &s->nc, err, errlen) != 0)
		goto fail;
	cli_tls_end(&t, &o);
	ctl_client_attach(s->client, s->nc);
	return 0;
fail:
	cli_tls_end(&t, &o);
	cli_session_close(s);
	return -1;
}

/* Connect as the manager: the space's standing supervisor credential. */
int
admin_session(const struct rail_args *a, struct cli_session *s)
{
	struct workspace ws;
	char err[WS_FILE_MAX + 2048];

	memset(s, 0, sizeof(*s));
	if (ws_locate(a->root, &ws, err, sizeof(err)) != 0 ||
	    cli_manager_open(&ws, a->space, a->server, s, err, sizeof(err)) != 0)
		return session_failed(a, s, err);
	return 0;
}

void
print_json(const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	printf("%s\n", text ? text : "null");
	free(text);
}

/*
 * A call that did not end in ok:true: with --json a refusal's raw reply,
 * otherwise say why, naming the command. 1.
 */
int
call_failed(const struct rail_args *a, const struct ctl_result *r, enum rail rail)
{
	if (r->outcome == CTL_REPLIED && a->json) {
		print_json(r->reply);
		return 1;
	}
	switch (r->outcome) {
	case CTL_REPLIED: {
		char *details = NULL;
		json_t *d = json_object_get(r->reply, "details");
		if (d != NULL)
			details = json_dumps(d, JSON_COMPACT | JSON_ENCODE_ANY);
		log_errx("%s: %s%s%s", a->verb, r->error ? r->error : "refused, without a reason",
		    details ? " " : "", details ? details : "");
		free(details);
		break;
	}
	case CTL_NO_RESPONDERS:
		log_errx("%s: no responders on the %s rail of space %s (is the delivery daemon "
		    "running?)", a->verb, rail_kind(rail), a->space);
		break;
	case CTL_TIMEOUT:
		log_errx("%s: no reply on the %s rail within %d ms (%s)", a->verb, rail_kind(rail),
		    a->wait_ms, r->why);
		break;
	default:
		log_errx("%s: %s: %s", a->verb, ctl_outcome_name(r->outcome), r->why);
		break;
	}
	return 1;
}

/*
 * One request as the agent; args is stolen. 0 when it ended in ok:true,
 * -1 after call_failed otherwise.
 */
static int
agent_call(const struct rail_args *a, struct cli_session *s, const char *op, json_t *args,
	   struct ctl_result *r)
{
	ctl_call(s->client, RAIL_CTL, op, args, a->wait_ms, r);
	json_decref(args);
	if (r->outcome == CTL_REPLIED && r->ok)
		return 0;
	call_failed(a, r, RAIL_CTL);
	return -1;
}

/* What an agent command does once connected: its exit status. */
typedef int agent_fn(const struct rail_args *, const struct agent_ref *, struct cli_session *,
		     struct ctl_result *);

/*
 * An agent command: NAME, or NAME CHANNEL when npos is 2, and the options
 * in opts; then fn as the agent, with a result that is freed after it.
 */
static int
agent_cmd(int argc, char **argv, const char *verb, unsigned opts, int npos,
	  agent_fn *fn)
{
	struct rail_args a;
	struct agent_ref r;
	struct cli_session s;
	struct ctl_result res = { 0 };
	int rc;

	if (parse_rail_args(verb, argc, argv, opts, npos, npos, AGENT_WAIT_MS, &a) != 0)
		return rails_usage();
	if ((npos == 2 && !channel_ok(&a, a.pos[1])) || agent_session(&a, &r, &s) != 0)
		return 1;
	rc = fn(&a, &r, &s, &res);
	ctl_result_free(&res);
	cli_session_close(&s);
	return rc;
}

static int
join(const struct rail_args *a, const struct agent_ref *r, struct cli_session *s,
     struct ctl_result *res)
{
	if (agent_call(a, s, "durableJoin", json_pack("{s:s}", "channel", a->pos[1]), res) != 0)
		return 1;
	json_t *gen = json_object_get(res->data, "generation");
	bool durable = json_is_true(json_object_get(res->data, "durable"));
	const char *reason = json_string_value(json_object_get(res->data, "reason"));
	if (a->json)
		print_json(res->reply);
	else if (durable && json_is_integer(gen))
		printf("%s joined %s durably (generation %" JSON_INTEGER_FORMAT ")\n", r->name,
		    a->pos[1], json_integer_value(gen));
	else if (durable)
		printf("%s joined %s durably\n", r->name, a->pos[1]);
	else
		printf("%s did not join %s durably: %s\n", r->name, a->pos[1],
		    reason ? reason : "the daemon gave no reason");
	/* A join that is not durable leaves the agent without a durable
	 * membership: a script must not take it for one. */
	return durable ? 0 : 1;
}

int
cmd_agent_join(int argc, char **argv)
{
	return agent_cmd(argc, argv, "agent join", 0, 2, join);
}

/* The generation of the agent's open membership of channel, from
 * listMemberships; 0 when it has none (reported). */
static uint64_t
open_generation(const struct rail_args *a, struct cli_session *s, const struct agent_ref *r,
		const char *channel)
{
	struct ctl_result res = { 0 };
	json_t *m;
	size_t i;
	uint64_t gen = 0;

	if (agent_call(a, s, "listMemberships", json_pack("{s:s}", "lifecycleUid", r->uid),
	    &res) != 0)
		goto out;
	json_array_foreach(json_object_get(res.data, "memberships"), i, m) {
		const char *ch = json_string_value(json_object_get(m, "channel"));
		json_int_t g = json_integer_value(json_object_get(m, "generation"));
		if (ch != NULL && strcmp(ch, channel) == 0 && g > 0) {
			gen = (uint64_t)g;
			break;
		}
	}
	if (gen == 0)
		log_errx("%s: %s has no open durable membership of %s", a->verb, r->name, channel);
out:
	ctl_result_free(&res);
	return gen;
}

static int
leave(const struct rail_args *a, const struct agent_ref *r, struct cli_session *s,
      struct ctl_result *res)
{
	uint64_t gen = a->generation != 0 ? a->generation : open_generation(a, s, r, a->pos[1]);
	if (gen == 0)
		return 1;
	json_t *args = json_pack("{s:s, s:I, s:s}", "channel", a->pos[1], "generation",
	    (json_int_t)gen, "lifecycleUid", r->uid);
	if (agent_call(a, s, "durableLeave", args, res) != 0)
		return 1;
	if (a->json)
		print_json(res->reply);
	else if (json_is_true(json_object_get(res->data, "alreadyLeft")))
		printf("%s had already left %s (generation %" PRIu64 ")\n", r->name, a->pos[1],
		    gen);
	else
		printf("%s left %s (generation %" PRIu64 ")\n", r->name, a->pos[1], gen);
	return 0;
}

int
cmd_agent_leave(int argc, char **argv)
{
	return agent_cmd(argc, argv, "agent leave", OPT_GENERATION,
	    2, leave);
}

static int
memberships(const struct rail_args *a, const struct agent_ref *r, struct cli_session *s,
	    struct ctl_result *res)
{
	json_t *m;
	size_t i;

	if (agent_call(a, s, "listMemberships", json_pack("{s:s}", "lifecycleUid", r->uid),
	    res) != 0)
		return 1;
	json_t *list = json_object_get(res->data, "memberships");
	if (a->json)
		print_json(res->reply);
	else if (json_array_size(list) == 0)
		printf("%s has no open durable memberships\n", r->name);
	json_array_foreach(a->json ? NULL : list, i, m) {
		printf("%s generation %" JSON_INTEGER_FORMAT " %s\n",
		    json_string_value(json_object_get(m, "channel")) ?: "?",
		    json_integer_value(json_object_get(m, "generation")),
		    json_is_true(json_object_get(m, "activated")) ? "activated" : "not activated");
	}
	return 0;
}

int
cmd_agent_memberships(int argc, char **argv)
{
	return agent_cmd(argc, argv, "agent memberships", 0, 1, memberships);
}

static int
history(const struct rail_args *a, const struct agent_ref *r, struct cli_session *s,
	struct ctl_result *res)
{
	json_t *item, *args;
	size_t i;

	(void)r;
	args = json_pack("{s:s}", "channel", a->pos[1]);
	if (a->limit != 0)
		json_object_set_new(args, "limit", json_integer((json_int_t)a->limit));
	if (agent_call(a, s, "readHistory", args, res) != 0)
		return 1;
	if (a->json) {
		print_json(res->reply);
	} else {
		json_array_foreach(json_object_get(res->data, "items"), i, item) {
			const char *ch = json_string_value(json_object_get(item, "channel"));
			cli_print_message(ch ? ch : a->pos[1], item);
		}
		printf("%s\n", json_is_true(json_object_get(res->data, "complete")) ?
		    "complete" : "more history exists");
	}
	return 0;
}

int
cmd_agent_history(int argc, char **argv)
{
	return agent_cmd(argc, argv, "agent history", OPT_LIMIT, 2,
	    history);
}

