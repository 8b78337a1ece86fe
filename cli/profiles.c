/*
 * Credential profiles. Every grant is spelled out; nothing here uses a
 * wildcard wider than the subject shape it covers, and only the provisioner
 * (which is not a daemon credential) holds the JetStream API at large.
 *
 * Notation as in WIRE.md: s = space token, P = "cotal.<s>".
 */
#include "cli/profiles.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/creds/needs.h"
#include "lib/wire/tokens.h"

#define SUBJ_MAX 8192

static const struct {
	const char *name;
	enum profile p;
} profile_names[] = {
	{ "delivery", PROFILE_DELIVERY },
	{ "agent", PROFILE_AGENT },
	{ "supervisor", PROFILE_SUPERVISOR },
	{ "provisioner", PROFILE_PROVISIONER },
	{ "sys-observer", PROFILE_SYS_OBSERVER },
	{ "sys-evictor", PROFILE_SYS_EVICTOR },
};

int
profile_from_name(const char *name, enum profile *out)
{
	for (size_t i = 0; i < sizeof(profile_names) / sizeof(profile_names[0]); i++)
		if (strcmp(profile_names[i].name, name) == 0) {
			*out = profile_names[i].p;
			return 0;
		}
	return -1;
}

const char *
profile_name(enum profile p)
{
	for (size_t i = 0; i < sizeof(profile_names) / sizeof(profile_names[0]); i++)
		if (profile_names[i].p == p)
			return profile_names[i].name;
	return "?";
}

int
profile_is_system(enum profile p)
{
	return p == PROFILE_SYS_OBSERVER || p == PROFILE_SYS_EVICTOR;
}

/* Append a formatted subject to a JSON array. */
static void __attribute__((format(printf, 2, 3)))
add(json_t *arr, const char *fmt, ...)
{
	char buf[SUBJ_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(buf))
		json_array_append_new(arr, json_string(buf));
}

/*
 * Read a KV bucket: stream info (binding), direct and stored-message gets,
 * and an ordered watch. The watch's consumer is ephemeral, created by the
 * unnamed form only, so no durable or named consumer can be made (or
 * another party's be overwritten) on the bucket's stream.
 */
static void
add_kv_read(json_t *pub, const char *bucket)
{
	add(pub, "$JS.API.STREAM.INFO.KV_%s", bucket);
	add(pub, "$JS.API.DIRECT.GET.KV_%s", bucket);
	add(pub, "$JS.API.DIRECT.GET.KV_%s.>", bucket);
	add(pub, "$JS.API.STREAM.MSG.GET.KV_%s", bucket);
	add(pub, "$JS.API.CONSUMER.CREATE.KV_%s", bucket);
	add(pub, "$JS.API.CONSUMER.INFO.KV_%s.*", bucket);
	add(pub, "$JS.API.CONSUMER.DELETE.KV_%s.*", bucket);
	add(pub, "$JS.FC.KV_%s.>", bucket);
}

/* Add s to arr unless it is there. */
static void
add_once(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (strcmp(json_string_value(v), s) == 0)
			return;
	json_array_append_new(arr, json_string(s));
}

/* Every grant lib/creds/needs.c lists for credential kind c, optional ones
 * included: what the daemon's features publish and subscribe. */
static void
add_needs(enum need_cred c, const char *s, const char *inbox, const char *account,
	  struct grants *g)
{
	const struct need *t;
	size_t n;
	char subj[SUBJ_MAX];

	t = needs_table(&n);
	for (size_t i = 0; i < n; i++)
		if (t[i].cred == c &&
		    need_subject(&t[i], s, inbox, account, subj, sizeof(subj)) == 0)
			add_once(t[i].dir == PERMS_PUB ? g->pub_allow : g->sub_allow, subj);
}

static void
profile_delivery(const char *s, const char *inbox, struct grants *g)
{
	add_needs(NEED_DELIVERY, s, inbox, NULL, g);
	/* Belt and braces for reviewers: content is read only through
	 * JetStream consumers, never by a native subscription. */
	add(g->sub_deny, "cotal.%s.chat.>", s);
	add(g->sub_deny, "cotal.%s.dinbox.>", s);
	add(g->sub_deny, "cotal.%s.dlv.>", s);
}

/*
 * An agent: posts as itself, reads live what its read ACL allows, talks to
 * the delivery rails as itself, refreshes its own presence row, reads the
 * delivery lease row, and only binds (never creates) its own dlv_ durable.
 * No grant on INBOX.
 */
static void
profile_agent(const char *s, const char *inbox, const struct profile_params *pp,
	      struct grants *g)
{
	const char *o = pp->owner, *a = pp->actor;
	char durable[SUBJ_MAX];

	snprintf(durable, sizeof(durable), "dlv_%s-%s-%s", o, a, pp->uid);
	add(g->pub_allow, "$JS.API.INFO");
	add(g->pub_allow, "cotal.%s.chat.%s.%s.>", s, o, a);
	add(g->pub_allow, "cotal.%s.inst.*.*.%s.%s", s, o, a);
	add(g->pub_allow, "cotal.%s.ctl.delivery.%s.%s", s, o, a);
	add(g->pub_allow, "cotal.%s.live.delivery.%s.%s", s, o, a);
	add(g->pub_allow, "$KV.cotal_presence_%s.%s.%s", s, o, a);
	add(g->pub_allow, "$JS.API.STREAM.INFO.KV_cotal_presence_%s", s);
	add(g->pub_allow, "$JS.API.CONSUMER.INFO.DLV_%s.%s", s, durable);
	add(g->pub_allow, "$JS.API.CONSUMER.MSG.NEXT.DLV_%s.%s", s, durable);
	add(g->pub_allow, "$JS.ACK.DLV_%s.%s.>", s, durable);
	/* The lease row alone (direct get by subject): whether the plane it
	 * binds on serves the space (the seed's bind warning). */
	add(g->pub_allow, "$JS.API.DIRECT.GET.KV_cotal_delivery_%s.$KV.cotal_delivery_%s.lease.*", s,
	    s);

	add(g->sub_allow, "%s.>", inbox);
	for (size_t i = 0; i < pp->nallow; i++)
		add(g->sub_allow, "cotal.%s.chat.*.*.%s", s, pp->allow[i]);
	add(g->sub_allow, "cotal.%s.inst.%s.%s.>", s, o, a);
	add(g->sub_allow, "cotal.%s.ctl.delivery.%s.%s.reply.>", s, o, a);
	add(g->sub_allow, "cotal.%s.live.delivery.%s.%s.reply.>", s, o, a);

	add(g->pub_deny, "$JS.API.CONSUMER.CREATE.>");
	add(g->pub_deny, "$JS.API.CONSUMER.DURABLE.CREATE.>");
	add(g->pub_deny, "$JS.API.CONSUMER.DELETE.>");
	add(g->pub_deny, "cotal.%s.dinbox.>", s);
	add(g->pub_deny, "cotal.%s.dlv.>", s);
	add(g->sub_deny, "cotal.%s.dinbox.>", s);
	add(g->sub_deny, "cotal.%s.dlv.>", s);
}

/*
 * The manager (supervisor of agents): writes read-ACL rows, reads and
 * removes membership rows when it retires a lifecycle, and calls the admin
 * rail as itself.
 */
static void
profile_supervisor(const char *s, const char *inbox, const struct profile_params *pp,
		   struct grants *g)
{
	static const char *const buckets[] = { "acl", "members", "channels", "presence" };
	char name[SUBJ_MAX];

	add(g->pub_allow, "$JS.API.INFO");
	for (size_t i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
		snprintf(name, sizeof(name), "cotal_%s_%s", buckets[i], s);
		add_kv_read(g->pub_allow, name);
	}
	add(g->pub_allow, "$KV.cotal_acl_%s.>", s);
	add(g->pub_allow, "$KV.cotal_members_%s.>", s);
	add(g->pub_allow, "$KV.cotal_channels_%s.>", s);
	add(g->pub_allow, "cotal.%s.ctl.delivery-admin.%s.%s", s, pp->owner, pp->actor);
	add(g->pub_allow, "cotal.%s.ctl.delivery.%s.%s", s, pp->owner, pp->actor);
	add(g->pub_allow, "cotal.%s.live.delivery.%s.%s", s, pp->owner, pp->actor);
	add(g->sub_allow, "%s.>", inbox);
	add(g->sub_allow, "cotal.%s.ctl.delivery-admin.%s.%s.reply.>", s, pp->owner, pp->actor);
	add(g->sub_allow, "cotal.%s.ctl.delivery.%s.%s.reply.>", s, pp->owner, pp->actor);
	add(g->sub_allow, "cotal.%s.live.delivery.%s.%s.reply.>", s, pp->owner, pp->actor);
}

/*
 * The provisioner creates streams, buckets and consumers: it holds the
 * account's JetStream API and KV subjects. It is an operator's tool, never a
 * daemon credential.
 */
static void
profile_provisioner(const char *inbox, struct grants *g)
{
	add(g->pub_allow, "$JS.API.>");
	add(g->pub_allow, "$KV.>");
	add(g->pub_allow, "$JS.ACK.>");
	add(g->pub_allow, "$JS.FC.>");
	add(g->sub_allow, "%s.>", inbox);
}

/* Empty lists, tagged with the profile's name. */
static void
grants_init(struct grants *g, enum profile p)
{
	g->pub_allow = json_array();
	g->pub_deny = json_array();
	g->sub_allow = json_array();
	g->sub_deny = json_array();
	g->tags = json_array();
	add(g->tags, "cotal-profile:%s", profile_name(p));
}

int
profile_grants(enum profile p, const struct profile_params *pp, struct grants *g,
	       char *err, size_t errlen)
{
	char s[SPACE_TOKEN_MAX + 1], inbox[INBOX_PREFIX_MAX];

	memset(g, 0, sizeof(*g));
	if (pp->space == NULL || strlen(pp->space) > SPACE_NAME_MAX ||
	    !space_token(pp->space, s, sizeof(s))) {
		snprintf(err, errlen, "space: missing or longer than %d bytes", SPACE_NAME_MAX);
		return -1;
	}
	if (!inbox_prefix(pp->user_pub, inbox, sizeof(inbox))) {
		snprintf(err, errlen, "user key: not a public user nkey");
		return -1;
	}
	if (p == PROFILE_AGENT || p == PROFILE_SUPERVISOR) {
		if (!principal_owner_valid(pp->owner)) {
			snprintf(err, errlen, "owner: \"%s\" is not a principal owner "
			    "(\"local\" or \"u_\" + 26 of [a-z2-7])", pp->owner ? pp->owner : "");
			return -1;
		}
		if (!identity_token_valid(pp->actor)) {
			snprintf(err, errlen, "actor: \"%s\" must match ^[A-Za-z0-9_]+$",
			    pp->actor ? pp->actor : "");
			return -1;
		}
	}
	if (p == PROFILE_AGENT) {
		if (!lifecycle_uid_valid(pp->uid)) {
			snprintf(err, errlen, "uid: \"%s\" must match ^[a-z0-9]{26,32}$",
			    pp->uid ? pp->uid : "");
			return -1;
		}
		if (pp->nallow > PROFILE_MAX_ALLOW) {
			snprintf(err, errlen, "allow: %zu patterns, at most %d",
			    pp->nallow, PROFILE_MAX_ALLOW);
			return -1;
		}
		for (size_t i = 0; i < pp->nallow; i++)
			if (!channel_pattern_valid(pp->allow[i])) {
				snprintf(err, errlen, "allow: \"%s\" is not a channel pattern "
				    "(dotted segments of [A-Za-z0-9_-], '*', or a final '>')",
				    pp->allow[i]);
				return -1;
			}
	}
	if (p == PROFILE_SYS_OBSERVER && pp->space_account == NULL) {
		snprintf(err, errlen, "sys-observer: the space account key is required");
		return -1;
	}

	grants_init(g, p);
	if (pp->owner != NULL && pp->actor != NULL)
		add(g->tags, "principal:%s.%s", pp->owner, pp->actor);

	switch (p) {
	case PROFILE_DELIVERY:
		profile_delivery(s, inbox, g);
		break;
	case PROFILE_AGENT:
		profile_agent(s, inbox, pp, g);
		break;
	case PROFILE_SUPERVISOR:
		profile_supervisor(s, inbox, pp, g);
		break;
	case PROFILE_PROVISIONER:
		profile_provisioner(inbox, g);
		break;
	case PROFILE_SYS_OBSERVER:
		add_needs(NEED_SYS_OBSERVER, s, inbox, pp->space_account, g);
		break;
	case PROFILE_SYS_EVICTOR:
		add_needs(NEED_SYS_EVICTOR, s, inbox, NULL, g);
		break;
	}
	return 0;
}

void
grants_free(struct grants *g)
{
	json_decref(g->pub_allow);
	json_decref(g->pub_deny);
	json_decref(g->sub_allow);
	json_decref(g->sub_deny);
	json_decref(g->tags);
	memset(g, 0, sizeof(*g));
}

/* A grant of the file with its <s>, <user> and <space account> filled. */
static int
fill(const char *g, const char *token, const char *user, const char *account, char *out,
     size_t outlen)
{
	static const char *const names[] = { "<s>", "<user>", "<space account>" };
	const char *const values[] = { token, user, account };

	return subject_fill(g, names, values, 3, out, outlen);
}

int
profile_grants_from_file(const char *path, enum profile p, const struct profile_params *pp,
			 struct grants *g, char *err, size_t errlen)
{
	static const char *const dirs[] = { "pub", "sub" }, *const lists[] = { "allow", "deny" };
	char s[SPACE_TOKEN_MAX + 1], buf[SUBJ_MAX];
	json_error_t je;
	json_t *doc, *sec;

	memset(g, 0, sizeof(*g));
	if (pp->space == NULL || !space_token(pp->space, s, sizeof(s))) {
		snprintf(err, errlen, "space: missing or invalid");
		return -1;
	}
	if ((doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
		return -1;
	}
	if (!json_is_object(sec = json_object_get(doc, profile_name(p)))) {
		snprintf(err, errlen, "%s: no \"%s\" object", path, profile_name(p));
		json_decref(doc);
		return -1;
	}
	grants_init(g, p);
	for (int d = 0; d < 2; d++)
		for (int l = 0; l < 2; l++) {
			json_t *a = json_object_get(json_object_get(sec, dirs[d]), lists[l]), *v;
			json_t *to = d == 0 ? (l == 0 ? g->pub_allow : g->pub_deny) :
			    (l == 0 ? g->sub_allow : g->sub_deny);
			size_t i;
			if (a != NULL && !json_is_array(a)) {
				snprintf(err, errlen, "%s: %s.%s.%s is not an array", path,
				    profile_name(p), dirs[d], lists[l]);
				goto fail;
			}
			json_array_foreach(a, i, v) {
				if (!json_is_string(v) || fill(json_string_value(v), s, pp->user_pub,
				    pp->space_account, buf, sizeof(buf)) != 0) {
					snprintf(err, errlen, "%s: %s.%s.%s[%zu] is not a string whose "
					    "<…> names are <s>, <user> or <space account>", path,
					    profile_name(p), dirs[d], lists[l], i);
					goto fail;
				}
				json_array_append_new(to, json_string(buf));
			}
		}
	json_decref(doc);
	return 0;
fail:
	json_decref(doc);
	grants_free(g);
	return -1;
}
