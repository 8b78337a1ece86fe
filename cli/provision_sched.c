/*
 * The settings an existing stream of a space takes in place (STREAM.UPDATE,
 * the broker's own JSON: nats.c 3.4.1's stream config lacks some fields):
 *
 * Message schedules on EPT_<s> (WIRE.md §6): on a broker that runs them
 * (nats-server 2.12 and later) the timer writer's .armed publish carries
 * `Nats-Schedule: @at …` and the broker fires it, which the stream must
 * allow (allow_msg_schedules).
 *
 * The read-ACL bucket's cap lifted (issue 39): a space provisioned before
 * kept its share of the budget as max_bytes, which its own history fills.
 */
#include "cli/provision.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/nats/natsconn.h"

#define SCHED_API_WAIT_MS 5000
#define SCHED_SUBJECT_MAX (PROV_NAME_MAX + 32)

/* A JetStream API answer as JSON; NULL with err when there is none or it
 * carries an error (the broker's words and code quoted). */
static json_t *
api_call(natsConnection *nc, const char *subject, const char *body, char *err, size_t errlen)
{
	natsMsg *reply = NULL;
	json_error_t jerr;
	json_t *root, *e;
	natsStatus s;

	s = natsConnection_Request(&reply, nc, subject, body, body != NULL ? (int)strlen(body) : 0,
	    SCHED_API_WAIT_MS);
	if (s != NATS_OK) {
		conn_jserror(subject, s, 0, err, errlen);
		return NULL;
	}
	root = json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), 0, &jerr);
	natsMsg_Destroy(reply);
	if (!json_is_object(root)) {
		snprintf(err, errlen, "%s: the answer is not a JSON object (%s)", subject,
		    root == NULL ? jerr.text : "another JSON value");
		json_decref(root);
		return NULL;
	}
	if ((e = json_object_get(root, "error")) != NULL) {
		const char *d = json_string_value(json_object_get(e, "description"));
		snprintf(err, errlen, "%s: %s (err_code %lld)", subject, d != NULL ? d : "refused",
		    (long long)json_integer_value(json_object_get(e, "err_code")));
		json_decref(root);
		return NULL;
	}
	return root;
}

int
provision_broker_schedules(natsConnection *nc, char *err, size_t errlen)
{
	return conn_broker_schedules(nc, SCHED_API_WAIT_MS, err, errlen);
}

/* A stream's config as the broker has it: the STREAM.INFO answer in *info
 * (json_decref it) and its config, or NULL with err. */
static json_t *
stream_config(natsConnection *nc, const char *name, json_t **info, char *err, size_t errlen)
{
	char subject[SCHED_SUBJECT_MAX];
	json_t *cfg;

	snprintf(subject, sizeof(subject), "$JS.API.STREAM.INFO.%s", name);
	if ((*info = api_call(nc, subject, NULL, err, errlen)) == NULL)
		return NULL;
	cfg = json_object_get(*info, "config");
	if (!json_is_object(cfg)) {
		snprintf(err, errlen, "%s: the answer holds no config", subject);
		return NULL;
	}
	return cfg;
}

/* STREAM.UPDATE with cfg: 1 when the answer's config has field (a true
 * boolean, or a number <= 0 when at_most_zero), else -1 with err. */
static int
stream_update(natsConnection *nc, const char *name, json_t *cfg, const char *field,
	      bool at_most_zero, char *err, size_t errlen)
{
	char subject[SCHED_SUBJECT_MAX], *body = json_dumps(cfg, JSON_COMPACT);
	json_t *upd, *v;
	int rc = -1;

	if (body == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.UPDATE.%s", name);
	upd = api_call(nc, subject, body, err, errlen);
	free(body);
	if (upd == NULL)
		return -1;
	v = json_object_get(json_object_get(upd, "config"), field);
	if (at_most_zero ? json_integer_value(v) <= 0 : json_is_true(v))
		rc = 1;
	else
		snprintf(err, errlen, "%s: the broker took the update but its config's %s is not "
		    "what was asked", subject, field);
	json_decref(upd);
	return rc;
}

int
provision_allow_schedules(natsConnection *nc, const char *name, char *err, size_t errlen)
{
	json_t *info = NULL, *cfg = stream_config(nc, name, &info, err, errlen);
	int rc = -1;

	if (cfg == NULL)
		goto out;
	if (json_is_true(json_object_get(cfg, "allow_msg_schedules"))) {
		rc = 0;
		goto out;
	}
	/* The broker requires roll-ups with schedules (each .armed rolls up its
	 * subject), and a schedule's fire purges its .armed. */
	if (json_object_set_new(cfg, "allow_msg_schedules", json_true()) != 0 ||
	    json_object_set_new(cfg, "allow_rollup_hdrs", json_true()) != 0 ||
	    json_object_set_new(cfg, "deny_purge", json_false()) != 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = stream_update(nc, name, cfg, "allow_msg_schedules", false, err, errlen);
out:
	json_decref(info);
	return rc;
}

int
provision_lift_cap(natsConnection *nc, const char *name, int64_t *was, char *err, size_t errlen)
{
	json_t *info = NULL, *cfg = stream_config(nc, name, &info, err, errlen);
	int rc = -1;

	*was = 0;
	if (cfg == NULL)
		goto out;
	*was = json_integer_value(json_object_get(cfg, "max_bytes"));
	if (*was <= 0) {
		rc = 0;
		goto out;
	}
	if (json_object_set_new(cfg, "max_bytes", json_integer(-1)) != 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = stream_update(nc, name, cfg, "max_bytes", true, err, errlen);
out:
	json_decref(info);
	return rc;
}
