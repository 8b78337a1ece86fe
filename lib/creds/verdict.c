/* Whether the daemon takes a credential (verdict.h). Pure logic over a JWT. */
#include "lib/creds/verdict.h"

#include <stdio.h>
#include <stdlib.h>
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

/* The X of an observer's "$SYS.REQ.ACCOUNT.<X>.CONNZ" grant, into acct:
 * true when g has that form (X one token, a wildcard included). */
static bool
connz_account(const char *g, char *acct, size_t len)
{
	static const char pre[] = "$SYS.REQ.ACCOUNT.", post[] = ".CONNZ";
	size_t n = strlen(g), pl = sizeof(pre) - 1, sl = sizeof(post) - 1;

	if (n <= pl + sl || strncmp(g, pre, pl) != 0 || strcmp(g + n - sl, post) != 0 ||
	    memchr(g + pl, '.', n - pl - sl) != NULL || n - pl - sl >= len)
		return false;
	memcpy(acct, g + pl, n - pl - sl);
	acct[n - pl - sl] = '\0';
	return true;
}

/* Each observer grant that lists another account's connections, or every
 * account's, wherever it stands in the list: a refusal each. */
static int
observer_elsewhere(const struct verdict_in *in, const struct jwt *j, const struct perms *p,
		   verdict_say_fn say, void *arg)
{
	char acct[PERMS_SUBJECT_MAX], line[LINE_MAX_LEN];
	int refused = 0;

	for (size_t i = 0; i < p->allow[PERMS_PUB].n; i++) {
		if (!connz_account(p->allow[PERMS_PUB].v[i], acct, sizeof(acct)) ||
		    strcmp(acct, in->account) == 0)
			continue;
		snprintf(line, sizeof(line), "the $SYS observer %s (user %.12s…) lists the "
		    "connections of account %s, not of this space's account %s", in->path, j->sub,
		    acct, in->account);
		say(arg, VERDICT_REFUSAL, line);
		refused++;
	}
	return refused;
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
		say(arg, required ? VERDICT_REFUSAL : VERDICT_OFF, line);
	}
	return refused;
}

/* Is g within what a row of t (this credential, this direction) names:
 * does one of them cover g whole? With wide, the other way: does g cover
 * one of them (g is of use to a feature)? */
static bool
named_by(const struct verdict_in *in, const struct need *t, size_t n, enum perms_dir d,
	 const char *inbox, const char *g, bool wide)
{
	char subj[SUBJ_MAX];

	for (size_t i = 0; i < n; i++)
		if (t[i].cred == in->cred && t[i].dir == d &&
		    need_subject(&t[i], in->token, inbox, in->account, subj, sizeof(subj)) == 0 &&
		    (wide ? subject_covers(g, subj) : subject_covers(subj, g)))
			return true;
	return false;
}

/* The grants beyond the role, one line naming each (cred_verdict's
 * comment): a refusal for a $SYS credential, a note for the delivery one.
 * The line stops short of the log's line and counts what it leaves out. */
static int
beyond_role(const struct verdict_in *in, const struct jwt *j, const struct perms *p,
	    const char *inbox, verdict_say_fn say, void *arg)
{
	const struct need *t, *tol;
	size_t n, ntol, listed = 0, more = 0, off = 0;
	char line[LINE_MAX_LEN], acct[PERMS_SUBJECT_MAX];
	bool sys = in->cred != NEED_DELIVERY;

	t = needs_table(&n);
	tol = needs_tolerated(&ntol);
	line[0] = '\0';
	for (int d = PERMS_PUB; d <= PERMS_SUB; d++)
		for (size_t i = 0; i < p->allow[d].n; i++) {
			const char *g = p->allow[d].v[i];
			if (in->cred == NEED_SYS_OBSERVER && d == PERMS_PUB &&
			    connz_account(g, acct, sizeof(acct)) && strcmp(acct, in->account) != 0)
				continue; /* refused by observer_elsewhere */
			if (sys ? named_by(in, t, n, (enum perms_dir)d, inbox, g, false) ||
			    named_by(in, tol, ntol, (enum perms_dir)d, inbox, g, false) :
			    named_by(in, t, n, (enum perms_dir)d, inbox, g, true))
				continue;
			int k = snprintf(line + off, sizeof(line) - off, "%s%s \"%s\"",
			    listed == 0 ? "" : ", ", d == PERMS_PUB ? "publish" : "subscribe", g);
			if (k < 0 || (size_t)k >= sizeof(line) - off - 256) {
				line[off] = '\0';
				more++;
				continue;
			}
			off += (size_t)k;
			listed++;
		}
	if (listed + more == 0)
		return 0;
	char *text = NULL, tail[64] = "";
	if (more > 0)
		snprintf(tail, sizeof(tail), " and %zu more", more);
	if (sys) {
		if (asprintf(&text, "the %s %s (user %.12s…) grants what its role does not need: "
		    "%s%s; a $SYS credential's signatures go to a confined worker, so it may grant "
		    "no more: mint it with: cotal creds mint --profile %s", cred_words(in->cred),
		    in->path, j->sub, line, tail, need_cred_name(in->cred)) < 0)
			text = NULL;
	} else if (asprintf(&text, "the %s %s (user %.12s…) grants %zu subject%s no feature of "
	    "the daemon needs (taken, never used): %s%s", cred_words(in->cred), in->path, j->sub,
	    listed + more, listed + more == 1 ? "" : "s", line, tail) < 0)
		text = NULL;
	say(arg, sys ? VERDICT_REFUSAL : VERDICT_NOTE, text != NULL ? text :
	    "a credential grants what its role does not need (no memory to name them)");
	free(text);
	return sys ? 1 : 0;
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
		say(arg, VERDICT_REFUSAL, line);
		return 1;
	}
	/* An allow-all grants every subject: nothing more to say of it. */
	if (cred_allow_all(in->path, &j, in->cred, line, sizeof(line))) {
		say(arg, VERDICT_REFUSAL, line);
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
		say(arg, optional ? VERDICT_OFF : VERDICT_REFUSAL, line);
		if (optional)
			*off |= VERDICT_OFF_EVICTOR;
		else
			refused++;
	}
	if (perms_from_jwt(&j, &p, why, sizeof(why)) != 0) {
		snprintf(line, sizeof(line), "the %s's permissions cannot be read: %s",
		    cred_words(in->cred), why);
		say(arg, VERDICT_REFUSAL, line);
		jwt_free(&j);
		return refused + 1;
	}
	if (in->cred == NEED_SYS_OBSERVER)
		refused += observer_elsewhere(in, &j, &p, say, arg);
	/* No reply inbox leaves it empty: the needs of <inbox> say so. */
	if (perms_reply_inbox(&p, inbox, sizeof(inbox), why, sizeof(why)) != 0)
		inbox[0] = '\0';
	refused += grants(in, &p, inbox, say, arg, off);
	refused += beyond_role(in, &j, &p, inbox, say, arg);
	perms_free(&p);
	jwt_free(&j);
	return refused;
}
