/*
 * `cotal creds audit FILE`: what a security reviewer reads of a delivery or
 * $SYS credential. It decodes the JWT, prints issuer, account, expiry and
 * every grant, marks each grant with the daemon features that need it (the
 * one table, lib/creds/needs.c), lists what the profile needs and the credential
 * lacks, and flags what a least-privilege review must see. Then the daemon's
 * own verdict (lib/creds/verdict.c, what its start-up asks): exit 0 only
 * when the daemon would take the credential for that profile, 1 with the
 * daemon's own words for each reason it would not.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/profiles.h"
#include "lib/creds/creds.h"
#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"
#include "lib/log.h"
#include "lib/creds/needs.h"
#include "lib/creds/perms.h"
#include "lib/creds/verdict.h"
#include "lib/wire/tokens.h"

#define SUBJ_MAX 1024

static const char *const dir_word[2] = { "publish", "subscribe" };
static const char *const dir_key[2] = { "pub", "sub" };

struct audit {
	enum need_cred cred;
	char token[SPACE_TOKEN_MAX + 1];  /* "" when unknown */
	char inbox[REPLY_INBOX_MAX];
	const char *account;              /* the space account (observer), or NULL */
	struct perms p;
	json_t *out;                      /* the report, for both renderings */
	int refused;                      /* the daemon's reasons not to take it */
};

/* A line of the daemon's verdict, kept for both renderings. */
static void
verdict_line(void *arg, enum verdict_kind kind, const char *text)
{
	struct audit *a = arg;
	json_t *v = json_object_get(a->out, "verdict");

	json_array_append_new(json_object_get(v, kind == VERDICT_REFUSAL ? "refusals" :
	    kind == VERDICT_OFF ? "off" : "notes"), json_string(text));
}

/* The space token: --space's, else the second token of the first
 * "cotal.<token>.…" grant. */
static void
infer_token(struct audit *a, const char *space)
{
	if (space != NULL) {
		space_token(space, a->token, sizeof(a->token));
		return;
	}
	for (int d = 0; d < 2 && a->token[0] == '\0'; d++)
		for (size_t i = 0; i < a->p.allow[d].n && a->token[0] == '\0'; i++) {
			const char *g = a->p.allow[d].v[i], *dot;
			if (strncmp(g, "cotal.", 6) == 0 && (dot = strchr(g + 6, '.')) != NULL &&
			    (size_t)(dot - g - 6) < sizeof(a->token) && g[6] != '*' && g[6] != '>')
				snprintf(a->token, sizeof(a->token), "%.*s", (int)(dot - g - 6), g + 6);
		}
}

/* The features of this credential kind whose needs grant g covers. */
static json_t *
needed_by(const struct audit *a, enum perms_dir d, const char *g)
{
	const struct need *t;
	size_t n;
	char subj[SUBJ_MAX];
	json_t *f = json_array();

	t = needs_table(&n);
	for (size_t i = 0; i < n; i++) {
		if (t[i].cred != a->cred || t[i].dir != d ||
		    need_subject(&t[i], a->token[0] ? a->token : "*", a->inbox,
		    a->account ? a->account : "*", subj, sizeof(subj)) != 0 ||
		    !subject_covers(g, subj))
			continue;
		bool seen = false;
		size_t k;
		json_t *v;
		json_array_foreach(f, k, v)
			seen = seen || strcmp(json_string_value(v), t[i].feature) == 0;
		if (!seen)
			json_array_append_new(f, json_string(t[i].feature));
	}
	return f;
}

/* A publish grant that reaches the JetStream API beyond named streams: a
 * wildcard at or before the stream's token. */
static bool
js_api_wide(const char *g)
{
	char buf[SUBJ_MAX], *tok[8], *save = NULL, *t;
	int n = 0, stream_at = 4;

	snprintf(buf, sizeof(buf), "%s", g);
	for (t = strtok_r(buf, ".", &save); t != NULL && n < 8; t = strtok_r(NULL, ".", &save))
		tok[n++] = t;
	if (n == 0 || !subject_overlaps(g, "$JS.API.>"))
		return false;
	if (n > 3 && strcmp(tok[2], "CONSUMER") == 0 && strcmp(tok[3], "DURABLE") == 0)
		stream_at = 5;
	for (int i = 0; i < n && i <= stream_at; i++)
		if (strcmp(tok[i], "*") == 0 || strcmp(tok[i], ">") == 0)
			return true;
	return false;
}

static void
flag(json_t *flags, const char *kind, const char *fmt, const char *arg)
{
	char buf[SUBJ_MAX + 256];

	snprintf(buf, sizeof(buf), fmt, arg);
	json_array_append_new(flags, json_pack("{s:s, s:s}", "kind", kind, "detail", buf));
}

static void
grants_report(struct audit *a, json_t *flags)
{
	json_t *grants = json_object();
	size_t beyond = 0;

	for (int d = 0; d < 2; d++) {
		json_t *dir = json_object(), *allow = json_array(), *deny = json_array();
		for (size_t i = 0; i < a->p.allow[d].n; i++) {
			const char *g = a->p.allow[d].v[i];
			json_t *f = needed_by(a, (enum perms_dir)d, g);
			if (json_array_size(f) == 0)
				beyond++;
			if (d == PERMS_PUB && js_api_wide(g))
				flag(flags, "js-api-wide", "publishes \"%s\": the JetStream API beyond "
				    "named streams", g);
			json_array_append_new(allow, json_pack("{s:s, s:o}", "subject", g,
			    "needed_by", f));
		}
		for (size_t i = 0; i < a->p.deny[d].n; i++)
			json_array_append_new(deny, json_string(a->p.deny[d].v[i]));
		json_object_set_new(dir, "allow", allow);
		json_object_set_new(dir, "deny", deny);
		json_object_set_new(grants, dir_key[d], dir);
	}
	json_object_set_new(a->out, "grants", grants);
	if (beyond > 0) {
		char n[32];
		snprintf(n, sizeof(n), "%zu", beyond);
		flag(flags, "beyond-profile", "%s grants no feature of the profile needs", n);
	}
}

static void
missing_report(struct audit *a)
{
	const struct need *t;
	size_t n;
	json_t *missing = json_array();

	t = needs_table(&n);
	for (size_t i = 0; i < n; i++) {
		char subj[SUBJ_MAX];
		const char *deny = NULL;
		if (t[i].cred != a->cred)
			continue;
		if (need_subject(&t[i], a->token[0] ? a->token : "<s>", a->inbox,
		    a->account ? a->account : "<space account>", subj, sizeof(subj)) != 0)
			continue;
		if (perms_grant(&a->p, t[i].dir, subj, &deny))
			continue;
		/* One entry per subject, every feature that needs it. */
		json_t *hit = NULL, *v;
		size_t k;
		json_array_foreach(missing, k, v)
			if (strcmp(json_string_value(json_object_get(v, "subject")), subj) == 0 &&
			    strcmp(json_string_value(json_object_get(v, "dir")), dir_key[t[i].dir]) == 0)
				hit = v;
		if (hit == NULL) {
			hit = json_pack("{s:s, s:s, s:[], s:b}", "dir", dir_key[t[i].dir], "subject",
			    subj, "features", "optional", 1);
			if (deny != NULL)
				json_object_set_new(hit, "denied_by", json_string(deny));
			json_array_append_new(missing, hit);
		}
		json_array_append_new(json_object_get(hit, "features"), json_string(t[i].feature));
		if (!t[i].optional)
			json_object_set_new(hit, "optional", json_false());
	}
	json_object_set_new(a->out, "missing", missing);
}

/* A string of the audit's output as printed: every one of them may carry
 * bytes the credential's minter chose (its name, its subjects), escaped
 * (issue 41, finding 6: an escape sequence could hide the refusal line). */
static const char *
text_of(const json_t *v)
{
	return cli_esc(json_string_value(v));
}

static void
print_human(const struct audit *a)
{
	json_t *o = a->out, *v, *w;
	size_t i, k;

	printf("credential %s\n", text_of(json_object_get(o, "file")));
	printf("  user     %s (name \"%s\")\n", text_of(json_object_get(o, "user")),
	    text_of(json_object_get(o, "name")));
	printf("  issuer   %s\n", text_of(json_object_get(o, "issuer")));
	printf("  account  %s\n", text_of(json_object_get(o, "account")));
	printf("  expires  %s\n", text_of(json_object_get(o, "expires")));
	printf("  profile  %s (space token %s, reply inbox %s)\n",
	    text_of(json_object_get(o, "profile")),
	    text_of(json_object_get(o, "space_token")),
	    text_of(json_object_get(o, "reply_inbox")));
	for (int d = 0; d < 2; d++) {
		json_t *g = json_object_get(json_object_get(o, "grants"), dir_key[d]);
		json_t *allow = json_object_get(g, "allow"), *deny = json_object_get(g, "deny");
		printf("%s allow (%zu)\n", dir_word[d], json_array_size(allow));
		json_array_foreach(allow, i, v) {
			json_t *f = json_object_get(v, "needed_by");
			printf("  %s %s", json_array_size(f) ? "✓" : "+",
			    text_of(json_object_get(v, "subject")));
			if (json_array_size(f) == 0)
				printf("  — beyond the profile\n");
			else {
				printf("  — ");
				json_array_foreach(f, k, w)
					printf("%s%s", k ? ", " : "", text_of(w));
				printf("\n");
			}
		}
		printf("%s deny (%zu)\n", dir_word[d], json_array_size(deny));
		json_array_foreach(deny, i, v)
			printf("  - %s\n", text_of(v));
	}
	json_t *missing = json_object_get(o, "missing");
	printf("missing (%zu)\n", json_array_size(missing));
	json_array_foreach(missing, i, v) {
		bool opt = json_is_true(json_object_get(v, "optional"));
		const char *deny = text_of(json_object_get(v, "denied_by"));
		printf("  %s %s \"%s\"%s%s%s — ", opt ? "!" : "✗",
		    strcmp(text_of(json_object_get(v, "dir")), "pub") == 0 ? "publish" :
		    "subscribe to", text_of(json_object_get(v, "subject")),
		    deny ? " (denied by \"" : "", deny ? deny : "", deny ? "\")" : "");
		json_array_foreach(json_object_get(v, "features"), k, w)
			printf("%s%s", k ? ", " : "", text_of(w));
		printf("%s\n", opt ? " (optional: off without it)" : "");
	}
	json_t *flags = json_object_get(o, "flags");
	printf("review flags (%zu)\n", json_array_size(flags));
	json_array_foreach(flags, i, v)
		printf("  ! %s: %s\n", text_of(json_object_get(v, "kind")),
		    text_of(json_object_get(v, "detail")));
	json_t *verdict = json_object_get(o, "verdict");
	json_t *refusals = json_object_get(verdict, "refusals"), *off = json_object_get(verdict, "off");
	size_t nr = json_array_size(refusals), no = json_array_size(off);
	printf("the daemon's verdict (%zu refusal%s, %zu feature%s off)\n", nr, nr == 1 ? "" : "s",
	    no, no == 1 ? "" : "s");
	json_array_foreach(refusals, i, v)
		printf("  ✗ %s\n", text_of(v));
	json_array_foreach(off, i, v)
		printf("  ! %s\n", text_of(v));
	json_array_foreach(json_object_get(verdict, "notes"), i, v)
		printf("  • %s\n", text_of(v));
	if (a->refused > 0)
		printf("✗ the daemon refuses this credential for the %s profile\n",
		    text_of(json_object_get(o, "profile")));
	else
		printf("✓ the daemon takes this credential for the %s profile\n",
		    text_of(json_object_get(o, "profile")));
}

int
cmd_creds_audit(int argc, char **argv)
{
	const char *file = NULL, *space = NULL, *pname = NULL, *account = NULL;
	char why[1024], exp[64];
	struct audit a = { 0 };
	struct creds c;
	struct jwt j;
	bool as_json = false;
	enum profile prof = PROFILE_DELIVERY;
	int rc = 2;

	for (int i = 0; i < argc; i++) {
		const char *x = argv[i];
		bool more = i + 1 < argc;
		if (strcmp(x, "--space") == 0 && more)
			space = argv[++i];
		else if (strcmp(x, "--profile") == 0 && more)
			pname = argv[++i];
		else if (strcmp(x, "--account") == 0 && more)
			account = argv[++i];
		else if (strcmp(x, "--root") == 0 && more)
			i++; /* as every command takes it; the audit reads FILE only */
		else if (strcmp(x, "--json") == 0)
			as_json = true;
		else if (x[0] != '-' && file == NULL)
			file = x;
		else {
			log_errx("creds audit: unknown or incomplete argument \"%s\"", x);
			goto usage;
		}
	}
	if (file == NULL)
		goto usage;
	if (account != NULL && (account[0] != 'A' || strlen(account) != NKEY_PUBLIC_LEN)) {
		log_errx("creds audit: --account \"%s\" is not an account's public key (A and 55 "
		    "more characters)", account);
		return 2;
	}
	if (pname != NULL && (profile_from_name(pname, &prof) != 0 ||
	    (prof != PROFILE_DELIVERY && prof != PROFILE_SYS_OBSERVER && prof != PROFILE_SYS_EVICTOR))) {
		log_errx("creds audit: --profile \"%s\" is not one of delivery, sys-observer, "
		    "sys-evictor", pname);
		return 2;
	}
	a.cred = prof == PROFILE_SYS_OBSERVER ? NEED_SYS_OBSERVER :
	    prof == PROFILE_SYS_EVICTOR ? NEED_SYS_EVICTOR : NEED_DELIVERY;
	if (creds_load(file, &c, why, sizeof(why)) != 0) {
		log_errx("creds audit: %s", why);
		return 2;
	}
	if (jwt_decode(c.jwt, strlen(c.jwt), &j, why, sizeof(why)) != 0) {
		log_errx("creds audit: %s: %s", file, why);
		creds_free(&c);
		return 2;
	}
	if (perms_from_jwt(&j, &a.p, why, sizeof(why)) != 0) {
		log_errx("creds audit: %s: %s", file, why);
		goto out;
	}
	json_t *flags = json_array();
	if (perms_reply_inbox(&a.p, a.inbox, sizeof(a.inbox), why, sizeof(why)) != 0) {
		snprintf(a.inbox, sizeof(a.inbox), "_INBOX_%s", j.sub);
		flag(flags, "no-reply-inbox", "%s", why);
	}
	infer_token(&a, space);
	/* The space account: --account's, else the delivery credential's own.
	 * An observer's is not inferred from its own CONNZ grant (the check
	 * of that grant would then hold by construction): without --account
	 * it is unknown, and said so. */
	if (account != NULL)
		a.account = account;
	else if (a.cred == NEED_DELIVERY)
		a.account = j.issuer_account ? j.issuer_account : j.iss;
	else if (a.cred == NEED_SYS_OBSERVER)
		flag(flags, "space-account-unknown", "%s", "which account's connections it must list "
		    "is unknown: pass --account (the space's account key)");
	if (j.exp == 0)
		snprintf(exp, sizeof(exp), "never");
	else {
		time_t t = (time_t)j.exp;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	a.out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
	    "file", file, "user", j.sub, "name", j.name ? j.name : "", "issuer", j.iss,
	    "account", j.issuer_account ? j.issuer_account : j.iss, "expires", exp,
	    "profile", need_cred_name(a.cred), "space_token",
	    a.cred != NEED_DELIVERY ? "-" : a.token[0] ? a.token : "?",
	    "reply_inbox", a.inbox);
	if (jwt_allow_all(&j, why, sizeof(why)))
		flag(flags, "allow-all", "%s", why);
	if (j.exp == 0)
		flag(flags, "no-expiry", "%s", "the credential never expires");
	/* A creds file's seed: S + the key type's letter. */
	if (c.seed[0] == 'S' && c.seed[1] != 'U')
		flag(flags, "seed-not-a-user", "%s", c.seed[1] == 'A' ? "the seed is an account key: "
		    "whoever holds the file can sign users" : "the seed is not a user key");
	if (a.token[0] == '\0' && a.cred == NEED_DELIVERY)
		flag(flags, "space-unknown", "%s", "no cotal.<space>.… grant names the space: pass "
		    "--space");
	grants_report(&a, flags);
	missing_report(&a);
	json_object_set_new(a.out, "flags", flags);
	/* What the daemon's start-up says of it, in its words. */
	struct verdict_in in = { .cred = a.cred, .path = file, .jwt = c.jwt,
		.token = a.token[0] ? a.token : "<s>",
		.account = a.account ? a.account : "<space account>", .now = (int64_t)time(NULL) };
	unsigned off;
	json_object_set_new(a.out, "verdict", json_pack("{s:[], s:[], s:[]}", "refusals", "off",
	    "notes"));
	a.refused = cred_verdict(&in, verdict_line, &a, &off);
	json_object_set_new(a.out, "ok", json_boolean(a.refused == 0));
	if (as_json) {
		char *s = json_dumps(a.out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		printf("%s\n", s ? s : "{}");
		free(s);
	} else
		print_human(&a);
	rc = a.refused > 0 ? 1 : 0;
out:
	json_decref(a.out);
	perms_free(&a.p);
	jwt_free(&j);
	creds_free(&c);
	return rc;
usage:
	fprintf(stderr, "usage: cotal creds audit FILE [--space S] [--profile delivery|sys-observer|"
	    "sys-evictor] [--account A] [--json]\n");
	return 2;
}
