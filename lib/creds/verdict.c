/* Whether the daemon takes a credential (verdict.h). Pure logic over a JWT. */
#include "lib/creds/verdict.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/creds/perms.h"

#define SUBJ_MAX 1024
#define FEATURES_MAX 512
#define LINE_MAX_LEN (2 * SUBJ_MAX + FEATURES_MAX + 256)

static const char *
cred_words(enum need_cred c)
{
	return c == NEED_DELIVERY ? "credential" : c == NEED_SYS_OBSERVER ?
	    "$SYS observer credential" : "$SYS evictor credential";
}

bool
cred_allow_all(const char *path, const struct jwt *j, enum need_cred c, char *out, size_t outlen)
{
	char why[256];

	if (!jwt_allow_all(j, why, sizeof(why)))
		return false;
	snprintf(out, outlen, "refusing an allow-all credential: %s (user %.12s…): %s; mint the "
	    "least-privilege one with: cotal creds mint --profile %s", path, j->sub, why,
	    need_cred_name(c));
	return true;
}

/* The account whose connections a $SYS observer may list: the X of its
 * "$SYS.REQ.ACCOUNT.<X>.CONNZ" grant ("" when it has none). */
static void
cred_observer_account(const struct jwt *j, char *acct, size_t len)
{
	json_t *allow = jwt_user_list(j, "pub", "allow"), *v;
	size_t i;

	acct[0] = '\0';
	json_array_foreach(allow, i, v) {
		const char *sub = json_string_value(v), *end;
		if (sub != NULL && strncmp(sub, "$SYS.REQ.ACCOUNT.", 17) == 0 &&
		    (end = strstr(sub + 17, ".CONNZ")) != NULL && end[6] == '\0' &&
		    (size_t)(end - sub - 17) < len) {
			memcpy(acct, sub + 17, (size_t)(end - sub - 17));
			acct[end - sub - 17] = '\0';
		}
	}
}

/* The refusal of an observer that lists another account's connections:
 * true with its text. */
static bool
cred_observer_elsewhere(const char *path, const struct jwt *j, const char *account, char *out,
			size_t outlen)
{
	char scans[128];

	cred_observer_account(j, scans, sizeof(scans));
	if (strcmp(scans, account) == 0)
		return false;
	snprintf(out, outlen, "the $SYS observer %s (user %.12s…) lists the connections of account "
	    "%s, not of this space's account %s", path, j->sub, scans[0] ? scans : "(none)",
	    account);
	return true;
}

/* "a, b and c": every feature of this credential that needs subj (same
 * direction). True when one of them is required. */
static bool
features_needing(const struct verdict_in *in, const struct need *t, size_t n, enum perms_dir d,
		 const char *inbox, const char *subj, char *out, size_t outlen)
{
	const char *f[16];
	size_t nf = 0;
	char buf[SUBJ_MAX];
	bool required = false;

	for (size_t i = 0; i < n && nf < 16; i++) {
		if (t[i].cred != in->cred || t[i].dir != d ||
		    need_subject(&t[i], in->token, inbox, in->account, buf, sizeof(buf)) != 0 ||
		    strcmp(buf, subj) != 0)
			continue;
		required = required || !t[i].optional;
		bool seen = false;
		for (size_t k = 0; k < nf; k++)
			seen = seen || strcmp(f[k], t[i].feature) == 0;
		if (!seen)
			f[nf++] = t[i].feature;
	}
	out[0] = '\0';
	for (size_t k = 0; k < nf; k++) {
		size_t used = strlen(out);
		snprintf(out + used, outlen - used, "%s%s", k == 0 ? "" : k + 1 == nf ? " and " : ", ",
		    f[k]);
	}
	return required;
}

/* Did an earlier row of the table already name this subject? */
static bool
said_before(const struct verdict_in *in, const struct need *t, size_t i, const char *inbox,
	    const char *subj)
{
	char prev[SUBJ_MAX];

	for (size_t k = 0; k < i; k++)
		if (t[k].cred == in->cred && t[k].dir == t[i].dir &&
		    need_subject(&t[k], in->token, inbox, in->account, prev, sizeof(prev)) == 0 &&
		    strcmp(prev, subj) == 0)
			return true;
	return false;
}

/* Each subject a feature needs and the grants lack: one line. */
static int
grants(const struct verdict_in *in, const struct perms *p, const char *inbox, verdict_say_fn say,
       void *arg, unsigned *off)
{
	const struct need *t;
	size_t n;
	int refused = 0;
	char line[LINE_MAX_LEN];

	t = needs_table(&n);
	for (size_t i = 0; i < n; i++) {
		char subj[SUBJ_MAX], feats[FEATURES_MAX], denied[SUBJ_MAX + 32] = "";
		const char *deny = NULL;

		if (t[i].cred != in->cred)
			continue;
		if (inbox[0] == '\0' && strncmp(t[i].pattern, "<inbox>", 7) == 0)
			snprintf(subj, sizeof(subj), "_INBOX….> (its sub.allow has no reply inbox)");
		else if (need_subject(&t[i], in->token, inbox, in->account, subj, sizeof(subj)) != 0 ||
		    perms_grant(p, t[i].dir, subj, &deny))
			continue;
		if (said_before(in, t, i, inbox, subj))
			continue;
		bool required = features_needing(in, t, n, t[i].dir, inbox, subj, feats,
		    sizeof(feats));
		if (feats[0] == '\0') {
			snprintf(feats, sizeof(feats), "%s", t[i].feature);
			required = !t[i].optional;
		}
		if (deny != NULL)
			snprintf(denied, sizeof(denied), ", denied by \"%s\"", deny);
		const char *verb = t[i].dir == PERMS_PUB ? "publish" : "subscribe to";
		if (required) {
			snprintf(line, sizeof(line), "the %s may not %s \"%s\"%s (%s %s it)",
			    cred_words(in->cred), verb, subj, denied, feats,
			    strstr(feats, " and ") ? "need" : "needs");
			refused++;
		} else if (in->cred == NEED_SYS_EVICTOR) {
			snprintf(line, sizeof(line), "the %s may not %s \"%s\"%s (%s needs it); "
			    "eviction is off (deny-new-only posture)", cred_words(in->cred), verb,
			    subj, denied, feats);
			*off |= VERDICT_OFF_EVICTOR;
		} else if (strcmp(t[i].feature, NEED_F_WATCH_FC) == 0) {
			snprintf(line, sizeof(line), "the %s may not %s \"%s\"%s (%s needs it); it "
			    "is off: a bucket larger than what the broker pushes at once may be "
			    "dropped as a slow consumer's and loaded again", cred_words(in->cred), verb,
			    subj, denied, feats);
			*off |= VERDICT_OFF_WATCH_FC;
		} else if (strcmp(t[i].feature, NEED_F_READER_MEMORY) == 0) {
			snprintf(line, sizeof(line), "the %s may not %s \"%s\"%s (%s needs it); it "
			    "is off: an entry the broker hands over again after it lost the reader's "
			    "acks is framed again", cred_words(in->cred), verb, subj, denied, feats);
			*off |= VERDICT_OFF_READER_MEMORY;
		} else {
			snprintf(line, sizeof(line), "the %s may not %s \"%s\"%s (%s needs it); %s "
			    "is off: refused on the rail", cred_words(in->cred), verb, subj, denied,
			    feats, t[i].feature);
			*off |= VERDICT_OFF_REGISTER;
		}
		say(arg, required, line);
	}
	return refused;
}

int
cred_verdict(const struct verdict_in *in, verdict_say_fn say, void *arg, unsigned *off)
{
	char line[LINE_MAX_LEN], why[512], inbox[REPLY_INBOX_MAX] = "";
	struct jwt j;
	struct perms p;
	int refused = 0;

	*off = 0;
	if (jwt_decode(in->jwt, strlen(in->jwt), &j, why, sizeof(why)) != 0) {
		snprintf(line, sizeof(line), "%s: %s", in->path, why);
		say(arg, true, line);
		return 1;
	}
	/* An allow-all grants every subject: nothing more to say of it. */
	if (cred_allow_all(in->path, &j, in->cred, line, sizeof(line))) {
		say(arg, true, line);
		jwt_free(&j);
		return 1;
	}
	if (j.exp != 0 && j.exp <= in->now) {
		char at[32];
		time_t t = (time_t)j.exp;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
		/* The evictor serves an optional feature: expired, it is as
		 * absent (the seed's deny-new-only posture), never the
		 * daemon's end. */
		bool optional = in->cred == NEED_SYS_EVICTOR;
		snprintf(line, sizeof(line), "the %s %s (user %.12s…) expired at %s: the broker "
		    "refuses it; renew it with: cotal creds mint --profile %s --renew%s",
		    cred_words(in->cred), in->path, j.sub, at, need_cred_name(in->cred),
		    optional ? "; eviction is off (deny-new-only posture)" : "");
		say(arg, !optional, line);
		if (optional)
			*off |= VERDICT_OFF_EVICTOR;
		else
			refused++;
	}
	if (perms_from_jwt(&j, &p, why, sizeof(why)) != 0) {
		snprintf(line, sizeof(line), "the %s's permissions cannot be read: %s",
		    cred_words(in->cred), why);
		say(arg, true, line);
		jwt_free(&j);
		return refused + 1;
	}
	if (in->cred == NEED_SYS_OBSERVER &&
	    cred_observer_elsewhere(in->path, &j, in->account, line, sizeof(line))) {
		say(arg, true, line);
		refused++;
	}
	/* No reply inbox leaves it empty: the needs of <inbox> say so. */
	if (perms_reply_inbox(&p, inbox, sizeof(inbox), why, sizeof(why)) != 0)
		inbox[0] = '\0';
	refused += grants(in, &p, inbox, say, arg, off);
	perms_free(&p);
	jwt_free(&j);
	return refused;
}
