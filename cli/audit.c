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
#include "lib/workspace.h"
#include "lib/wsnames.h"

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

/* ---- what the audit finds by itself, as the other commands do (issue
 * 43): the profile from the credential's own name and grants when not
 * given, the space's account from the workspace; an account it cannot
 * find is said and stops the audit, never printed as a stand-in ---- */

static bool
audit_profile(enum profile p)
{
	return p == PROFILE_DELIVERY || p == PROFILE_SYS_OBSERVER || p == PROFILE_SYS_EVICTOR;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The profile and space a credential's name gives ("<profile>@<space>", as
 * cotal creds mint names it): true when it names an audited profile. */
static bool
of_name(const char *name, enum profile *prof, char *space, size_t spacelen)
{
	const char *at = name != NULL ? strchr(name, '@') : NULL;
	char p[32];

	if (at == NULL || (size_t)(at - name) >= sizeof(p) || at[1] == '\0')
		return false;
	snprintf(p, sizeof(p), "%.*s", (int)(at - name), name);
	if (profile_from_name(p, prof) != 0 || !audit_profile(*prof))
		return false;
	snprintf(space, spacelen, "%s", at + 1);
	return true;
}

/* The profile a credential's grants make it: a KICK grant an evictor, an
 * account's CONNZ an observer, anything else the delivery profile. */
static enum profile
of_grants(const struct perms *p)
{
	const struct perms_list *pub = &p->allow[PERMS_PUB];

	for (size_t i = 0; i < pub->n; i++)
		if (strncmp(pub->v[i], "$SYS.REQ.SERVER.", 16) == 0 && ends_with(pub->v[i], ".KICK"))
			return PROFILE_SYS_EVICTOR;
	for (size_t i = 0; i < pub->n; i++)
		if (strncmp(pub->v[i], "$SYS.REQ.ACCOUNT.", 17) == 0 &&
		    ends_with(pub->v[i], ".CONNZ"))
			return PROFILE_SYS_OBSERVER;
	return PROFILE_DELIVERY;
}

/*
 * The account of the space a $SYS credential serves, as the daemon knows
 * it: the issuer account of the space's delivery credential in the
 * workspace (--root, else the nearest .cotal/ above FILE, else above the
 * working directory), else the dev mesh's record of the space. The space:
 * space (--space or the credential's name), else the workspace's only one.
 * 0 with acct, or -1 with err naming what to pass and what exists.
 */
static int
space_account(const char *root, const char *space, const char *file, char *acct,
	      size_t acctlen, char *err, size_t errlen)
{
	struct workspace ws;
	char dir[WS_PATH_MAX], path[WS_FILE_MAX], list[1024], only[SPACE_NAME_MAX + 1], e[512];
	char fdir[WS_PATH_MAX];
	struct creds c;
	struct jwt j;

	/* No --root: the workspace holding FILE (a folder above it with a
	 * .cotal/), else the one above the working directory. */
	bool near_file = false;
	char *slash = NULL;
	if (root == NULL && realpath(file, fdir) != NULL)
		while (!near_file && (slash = strrchr(fdir, '/')) != NULL && slash > fdir) {
			*slash = '\0';
			near_file = ws_locate(fdir, &ws, e, sizeof(e)) == 0;
		}
	if (root == NULL && !near_file && ws_locate(NULL, &ws, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "the space account this credential must list is unknown: no "
		    "workspace found (%s); pass --account A, or --root DIR and --space S", e);
		return -1;
	}
	if (root != NULL && ws_locate(root, &ws, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "the space account this credential must list is unknown: %s; "
		    "pass --account A", e);
		return -1;
	}
	if (space == NULL) {
		size_t n = ws_space_names(&ws, list, sizeof(list), only, sizeof(only));
		if (n != 1) {
			snprintf(err, errlen, "the space account this credential must list is unknown: "
			    "which space it serves is not named; pass --space S (%s%.900s)",
			    n == 0 ? "none in " : "spaces: ", n == 0 ? ws.root : list);
			return -1;
		}
		space = only;
	}
	if (ws_space_known(&ws, space, err, errlen) != 0 ||
	    ws_space_dir(&ws, space, false, dir, sizeof(dir), err, errlen) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/delivery.creds", dir);
	acct[0] = '\0';
	if (creds_load(path, &c, e, sizeof(e)) == 0) {
		if (jwt_decode(c.jwt, strlen(c.jwt), &j, e, sizeof(e)) == 0) {
			snprintf(acct, acctlen, "%s", j.issuer_account ? j.issuer_account : j.iss);
			jwt_free(&j);
		}
		creds_free(&c);
	}
	if (acct[0] == '\0') {
		json_t *mesh = ws_dev_mesh(&ws, e, sizeof(e));
		const char *a = json_string_value(json_object_get(json_object_get(json_object_get(
		    mesh, "spaces"), space), "account"));
		if (a != NULL)
			snprintf(acct, acctlen, "%s", a);
		json_decref(mesh);
	}
	if (acct[0] != 'A' || strlen(acct) != NKEY_PUBLIC_LEN) {
		snprintf(err, errlen, "the account of space %s is unknown: no delivery credential in "
		    "%.600s and no dev mesh record of it; pass --account A", space, dir);
		return -1;
	}
	return 0;
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
	printf("  profile  %s, from %s (space token %s, reply inbox %s)\n",
	    text_of(json_object_get(o, "profile")), text_of(json_object_get(o, "profile_from")),
	    text_of(json_object_get(o, "space_token")),
	    text_of(json_object_get(o, "reply_inbox")));
	if (strcmp(text_of(json_object_get(o, "profile")), "sys-observer") == 0)
		printf("  lists    the connections of space account %s\n",
		    text_of(json_object_get(o, "space_account")));
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
	const char *file = NULL, *space = NULL, *pname = NULL, *account = NULL, *root = NULL;
	const char *found = "--profile";
	char why[1024], exp[64], named_space[SPACE_NAME_MAX + 1], acct[NKEY_PUBLIC_LEN + 1];
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
			root = argv[++i];
		else if (strcmp(x, "--json") == 0)
			as_json = true;
		else if (x[0] != '-' && file == NULL)
			file = x;
		else {
			log_errx("creds audit: unknown or incomplete argument \"%s\"", x);
			goto usage;
		}
	}
	if (file == NULL) {
		log_errx("creds audit: FILE, the credential to audit, is required");
		goto usage;
	}
	if (account != NULL && (account[0] != 'A' || strlen(account) != NKEY_PUBLIC_LEN)) {
		log_errx("creds audit: --account \"%s\" is not an account's public key (A and 55 "
		    "more characters)", account);
		return CLI_USAGE;
	}
	if (pname != NULL && (profile_from_name(pname, &prof) != 0 ||
	    (prof != PROFILE_DELIVERY && prof != PROFILE_SYS_OBSERVER && prof != PROFILE_SYS_EVICTOR))) {
		log_errx("creds audit: --profile \"%s\" is not one of delivery, sys-observer, "
		    "sys-evictor", pname);
		return CLI_USAGE;
	}
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
	/* No --profile: the credential's name ("<profile>@<space>"), else
	 * its grants. A name's space serves where --space is not given. */
	enum profile by_name;
	named_space[0] = '\0';
	bool named = of_name(j.name, &by_name, named_space, sizeof(named_space));
	if (pname == NULL) {
		prof = named ? by_name : of_grants(&a.p);
		found = named ? "its name" : "its grants";
	}
	if (space == NULL && named_space[0] != '\0')
		space = named_space;
	a.cred = prof == PROFILE_SYS_OBSERVER ? NEED_SYS_OBSERVER :
	    prof == PROFILE_SYS_EVICTOR ? NEED_SYS_EVICTOR : NEED_DELIVERY;
	json_t *flags = json_array();
	if (perms_reply_inbox(&a.p, a.inbox, sizeof(a.inbox), why, sizeof(why)) != 0) {
		snprintf(a.inbox, sizeof(a.inbox), "_INBOX_%s", j.sub);
		flag(flags, "no-reply-inbox", "%s", why);
	}
	infer_token(&a, a.cred == NEED_DELIVERY ? space : NULL);
	/* The space account: --account's, else the delivery credential's own;
	 * a $SYS credential's from the workspace (space_account), never from
	 * its own CONNZ grant (the check of that grant would then hold by
	 * construction). Unknown, the audit stops and says what to pass. */
	if (account != NULL)
		a.account = account;
	else if (a.cred == NEED_DELIVERY)
		a.account = j.issuer_account ? j.issuer_account : j.iss;
	else if (space_account(root, space, file, acct, sizeof(acct), why, sizeof(why)) == 0)
		a.account = acct;
	else if (a.cred == NEED_SYS_EVICTOR)
		a.account = ""; /* its KICK grant names no account */
	else {
		log_errx("creds audit: %s (audited as %s, from %s)", why,
		    profile_name(prof), found);
		json_decref(flags);
		rc = 2;
		goto out;
	}
	if (j.exp == 0)
		snprintf(exp, sizeof(exp), "never");
	else {
		time_t t = (time_t)j.exp;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	a.out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
	    "file", file, "user", j.sub, "name", j.name ? j.name : "", "issuer", j.iss,
	    "account", j.issuer_account ? j.issuer_account : j.iss, "expires", exp,
	    "profile", need_cred_name(a.cred), "profile_from", found,
	    "space_account", a.account != NULL ? a.account : "", "space_token",
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
		.token = a.token[0] ? a.token : "<s>", .account = a.account,
		.now = (int64_t)time(NULL) };
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
	return CLI_USAGE;
}
