/*
 * `cotal agent post|recv`: the minimal agent's side of the data path, for
 * demos and operators. Both use the agent's own credential: it posts as
 * itself and binds only its own dlv_ durable. (join, leave and the other
 * control-rail commands are in rails.c.)
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/records.h"
#include "lib/wire/tokens.h"
#include "lib/wsnames.h"

#define RECV_BATCH 256
#define LEASE_READ_MS 2000 /* the lease row's direct get */

struct io_args {
	const char *root, *space, *server, *id;
	const char *pos[3];
	int npos;
	int wait_ms;
};

static int
parse_args(const char *verb, int argc, char **argv, struct io_args *a)
{
	memset(a, 0, sizeof(*a));
	a->wait_ms = 2000;
	for (int i = 0; i < argc; i++) {
		int more = i + 1 < argc;
		if (strcmp(argv[i], "--root") == 0 && more)
			a->root = argv[++i];
		else if (strcmp(argv[i], "--space") == 0 && more)
			a->space = argv[++i];
		else if (strcmp(argv[i], "--server") == 0 && more)
			a->server = argv[++i];
		else if (strcmp(argv[i], "--id") == 0 && more)
			a->id = argv[++i];
		else if (strcmp(argv[i], "--wait") == 0 && more) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end != '\0' || v < 0 || v > 600000) {
				log_errx("agent %s: --wait must be milliseconds (0-600000)", verb);
				return -1;
			}
			a->wait_ms = (int)v;
		} else if (argv[i][0] != '-' && a->npos < 3)
			a->pos[a->npos++] = argv[i];
		else {
			log_errx("agent %s: unknown or incomplete argument \"%s\"", verb, argv[i]);
			return -1;
		}
	}
	if (a->space == NULL) {
		log_errx("agent %s: --space is required", verb);
		return -1;
	}
	return 0;
}

int
cli_agent_load(const char *root, const char *space, const char *name, struct agent_ref *r,
	       char *err, size_t errlen)
{
	char dir[WS_PATH_MAX], path[WS_FILE_MAX];
	const char *principal, *uid;
	json_t *rec;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (ws_locate(root, &r->ws, err, errlen) != 0 ||
	    ws_agent_known(&r->ws, space, name, err, errlen) != 0 ||
	    ws_space_dir(&r->ws, space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	snprintf(r->space, sizeof(r->space), "%s", space);
	space_token(space, r->token, sizeof(r->token));
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(path, sizeof(path), "%s/agents/%s.json", dir, name);
	if ((rec = ws_read_json(path, 64 * 1024, err, errlen)) == NULL)
		return -1;
	principal = json_string_value(json_object_get(rec, "principal"));
	uid = json_string_value(json_object_get(rec, "lifecycleUid"));
	const char *dot = principal ? strchr(principal, '.') : NULL;
	if (dot == NULL || uid == NULL || (size_t)(dot - principal) > IDENT_MAX ||
	    strlen(dot + 1) > IDENT_MAX || strlen(uid) > UID_MAX) {
		snprintf(err, errlen, "%.2048s: principal or lifecycleUid missing or malformed", path);
		goto out;
	}
	memcpy(r->owner, principal, (size_t)(dot - principal));
	strcpy(r->actor, dot + 1);
	strcpy(r->uid, uid);
	snprintf(r->creds, sizeof(r->creds), "%s/agents/%s.creds", dir, name);
	rc = 0;
out:
	json_decref(rec);
	return rc;
}

int
cli_agent_connect(const struct agent_ref *r, const char *server, struct conn_opts *o,
		  struct creds *c, natsConnection **nc, char *err, size_t errlen)
{
	struct conn_opts plain = { 0 };
	char name[128];

	snprintf(name, sizeof(name), "cotal agent %s", r->name);
	if (o == NULL)
		o = &plain;
	o->name = name;
	int rc = cli_connect_opts(&r->ws, r->space, server, r->creds, o, c, nc, err, errlen);
	o->name = NULL;
	return rc;
}

void
cli_print_message(const char *channel, const json_t *msg)
{
	json_t *part = json_array_get(json_object_get(msg, "parts"), 0);
	const char *text = json_string_value(json_object_get(part, "text"));

	const char *from = json_string_value(json_object_get(json_object_get(msg, "from"), "name"));

	/* Another agent's bytes: escaped (issue 41, finding 6). */
	printf("%s %s: %s\n", channel ? cli_esc(channel) : "?", from ? cli_esc(from) : "?",
	    text ? cli_esc(text) : "(no text part)");
}

int
cmd_agent_post(int argc, char **argv)
{
	struct io_args a;
	struct agent_ref r;
	struct creds c = { 0 };
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	char err[16384], subj[8192], from[PRINCIPAL_MAX + 1], id[128];
	int rc = 1;

	if (parse_args("post", argc, argv, &a) != 0 || a.npos != 3) {
		return CLI_USAGE;
	}
	if (!channel_concrete_valid(a.pos[1]) || strlen(a.pos[1]) > CHANNEL_MAX) {
		log_errx("agent post: CHANNEL \"%s\" is not a concrete channel", a.pos[1]);
		return 1;
	}
	if (cli_agent_load(a.root, a.space, a.pos[0], &r, err, sizeof(err)) != 0 ||
	    cli_agent_connect(&r, a.server, NULL, &c, &nc, err, sizeof(err)) != 0)
		goto fail;
	if (a.id == NULL) {
		snprintf(id, sizeof(id), "%s-%" PRId64, r.name, wall_ms());
		a.id = id;
	}
	snprintf(subj, sizeof(subj), "cotal.%s.chat.%s.%s.%s", r.token, r.owner, r.actor, a.pos[1]);
	principal_format(r.owner, r.actor, from, sizeof(from));
	json_t *msg = json_pack("{s:s, s:I, s:s, s:{s:s, s:s}, s:[{s:s, s:s}], s:s}",
	    "id", a.id, "ts", (json_int_t)wall_ms(), "space", r.space, "from", "id", from,
	    "name", r.name, "parts", "kind", "text", "text", a.pos[2], "channel", a.pos[1]);
	char *body = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	natsStatus s = natsConnection_JetStream(&js, nc, NULL);
	if (s == NATS_OK)
		s = js_Publish(&pa, js, subj, body, (int)strlen(body), NULL, &jerr);
	free(body);
	if (s != NATS_OK) {
		char why[1024];
		conn_strerror(s, why, sizeof(why));
		snprintf(err, sizeof(err), "publish to %s: %s", subj, why);
		goto fail;
	}
	printf("posted %s to %s (CHAT seq %" PRIu64 ")\n", a.id, a.pos[1], pa->Sequence);
	rc = 0;
	goto out;
fail:
	log_errx("agent post: %s", err);
out:
	jsPubAck_Destroy(pa);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	if (c.jwt)
		creds_free(&c);
	return rc;
}

/*
 * What the lease row of shard 0 says of the plane this connection reached
 * (direct get of lease.0 in cotal_delivery_<s>): NULL when a daemon holds
 * it ready, else the condition, into buf.
 */
static const char *
lease_condition(natsConnection *nc, const char *token, char *buf, size_t len)
{
	char subj[2 * SPACE_TOKEN_MAX + 96];
	const char *status = NULL, *op = NULL, *last = NULL;
	struct lease_row row;
	natsMsg *m = NULL;
	natsStatus s;

	snprintf(subj, sizeof(subj), "$JS.API.DIRECT.GET.KV_cotal_delivery_%s.$KV.cotal_delivery_%s."
	    "lease.0", token, token);
	s = natsConnection_RequestString(&m, nc, subj, "", LEASE_READ_MS);
	if (s != NATS_OK) {
		/* A denied read times out; the broker's words are the
		 * connection's last error. */
		natsConnection_GetLastError(nc, &last);
		snprintf(buf, len, "lease unreadable: %s", last != NULL && last[0] != '\0' ? last :
		    natsStatus_GetText(s));
		return buf;
	}
	if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status != NULL) {
		const char *desc = NULL;
		natsMsgHeader_Get(m, "Description", &desc);
		if (strcmp(status, "404") == 0)
			snprintf(buf, len, "no lease row");
		else
			snprintf(buf, len, "lease unreadable: the broker answered %s%s%s", status,
			    desc ? " " : "", desc ? desc : "");
	} else if (natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK && op != NULL)
		snprintf(buf, len, "no lease row"); /* released (DEL) or purged */
	else if (lease_row_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &row) != 0)
		snprintf(buf, len, "lease unreadable: lease.0 holds no lease row");
	else if (!row.ready)
		snprintf(buf, len, "lease not ready");
	else
		buf = NULL;
	natsMsg_Destroy(m);
	return buf;
}

int
cmd_agent_recv(int argc, char **argv)
{
	struct io_args a;
	struct agent_ref r;
	struct creds c = { 0 };
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	natsSubscription *sub = NULL;
	jsSubOptions so;
	jsErrCode jerr = 0;
	char err[16384], stream[SPACE_TOKEN_MAX + 8], durable[LIFECYCLE_MAX + 8], why[1024];
	int rc = 1, n = 0;

	if (parse_args("recv", argc, argv, &a) != 0 || a.npos != 1) {
		return CLI_USAGE;
	}
	if (cli_agent_load(a.root, a.space, a.pos[0], &r, err, sizeof(err)) != 0 ||
	    cli_agent_connect(&r, a.server, NULL, &c, &nc, err, sizeof(err)) != 0)
		goto fail;
	snprintf(stream, sizeof(stream), "DLV_%s", r.token);
	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", r.owner, r.actor, r.uid);
	jsSubOptions_Init(&so);
	so.Stream = stream;
	so.Consumer = durable;
	so.ManualAck = true;
	natsStatus s = natsConnection_JetStream(&js, nc, NULL);
	if (s == NATS_OK)
		s = js_PullSubscribe(&sub, js, NULL, durable, NULL, &so, &jerr);
	if (s != NATS_OK) {
		conn_strerror(s, why, sizeof(why));
		snprintf(err, sizeof(err), "bind %s: %s", durable, why);
		goto fail;
	}
	/* The seed: bound whatever the lease says, and said when no daemon
	 * serves the space on this plane. */
	char cond[1024];
	if (lease_condition(nc, r.token, cond, sizeof(cond)) != NULL)
		log_warnx("agent recv: bound %s on space %s without a ready delivery lease (%s): a "
		    "delivery daemon that starts on this plane delivers through it; if another "
		    "plane serves space %s, reconnect there (that re-binds %s)", durable, a.space,
		    cond, a.space, durable);
	/* Everything waiting, then whatever arrives within --wait. */
	for (int wait = a.wait_ms > 0 ? a.wait_ms : 1;;) {
		natsMsgList list = { 0 };
		s = natsSubscription_Fetch(&list, sub, RECV_BATCH, wait, &jerr);
		if (s != NATS_OK || list.Count == 0) {
			natsMsgList_Destroy(&list);
			break;
		}
		for (int i = 0; i < list.Count; i++) {
			natsMsg *m = list.Msgs[i];
			json_t *f = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0,
			    NULL);
			cli_print_message(json_string_value(json_object_get(f, "channel")),
			    json_object_get(f, "msg"));
			json_decref(f);
			/* Surfaced: the entry's journey ends here. */
			natsMsg_Ack(m, NULL);
			n++;
		}
		natsMsgList_Destroy(&list);
		wait = 200;
	}
	natsConnection_Flush(nc);
	printf("%d message%s for %s\n", n, n == 1 ? "" : "s", r.name);
	rc = 0;
	goto out;
fail:
	log_errx("agent recv: %s", err);
out:
	natsSubscription_Destroy(sub);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	if (c.jwt)
		creds_free(&c);
	return rc;
}
