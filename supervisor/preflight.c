/*
 * The grant preflight: before it binds, the supervisor reads its
 * credentials' own JWT permissions (allow and deny, NATS wildcards) and
 * checks them against the one table of what each feature publishes and
 * subscribes (lib/creds/needs.h). A grant a required feature lacks refuses the
 * start, naming every missing subject and the features that need it; an
 * optional feature without its grants is turned off with a `!` line.
 */
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/creds/needs.h"
#include "lib/creds/perms.h"
#include "supervisor/supervisor.h"

#define SUBJ_MAX 1024
#define FEATURES_MAX 512

/* The credential a kind of need is checked against, or NULL when the
 * daemon holds none of that kind (the admission decided what that means). */
static const struct sup_creds *
cred_of(const struct sup *s, enum need_cred c)
{
	switch (c) {
	case NEED_DELIVERY:
		return &s->creds;
	case NEED_SYS_OBSERVER:
		return s->have_sys[IPC_SYS_OBSERVER] ? &s->sys[IPC_SYS_OBSERVER] : NULL;
	case NEED_SYS_EVICTOR:
		return s->have_sys[IPC_SYS_EVICTOR] ? &s->sys[IPC_SYS_EVICTOR] : NULL;
	}
	return NULL;
}

/* "a, b and c": every feature of kind c that needs subj (same direction).
 * True when one of them is required. */
static bool
features_needing(const struct need *t, size_t n, enum need_cred c, enum perms_dir d,
		 const char *subj, const struct sup *s, const char *inbox, char *out,
		 size_t outlen)
{
	const char *f[16];
	size_t nf = 0;
	char buf[SUBJ_MAX];
	bool required = false;

	for (size_t i = 0; i < n && nf < 16; i++) {
		if (t[i].cred != c || t[i].dir != d ||
		    need_subject(&t[i], s->token, inbox, s->creds.account, buf, sizeof(buf)) != 0 ||
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

int
preflight(struct sup *s)
{
	const struct need *t;
	size_t n;
	int missing_required = 0;
	bool off_register = false, off_evictor = false, off_reader_memory = false;

	t = needs_table(&n);
	for (int c = NEED_DELIVERY; c <= NEED_SYS_EVICTOR; c++) {
		const struct sup_creds *sc = cred_of(s, (enum need_cred)c);
		struct perms p;
		struct jwt j;
		char why[512];

		if (sc == NULL)
			continue;
		int rc = jwt_decode(sc->c.jwt, strlen(sc->c.jwt), &j, why, sizeof(why));
		if (rc == 0) {
			rc = perms_from_jwt(&j, &p, why, sizeof(why));
			jwt_free(&j);
		}
		if (rc != 0) {
			log_errx("delivery: the %s credential's permissions cannot be read: %s; "
			    "not binding", need_cred_name((enum need_cred)c), why);
			return -1;
		}
		for (size_t i = 0; i < n; i++) {
			char subj[SUBJ_MAX], feats[FEATURES_MAX];
			const char *deny = NULL;
			bool dup = false;

			if ((int)t[i].cred != c)
				continue;
			if (sc->inbox[0] == '\0' && strncmp(t[i].pattern, "<inbox>", 7) == 0)
				snprintf(subj, sizeof(subj), "_INBOX….> (its sub.allow has no reply inbox)");
			else if (need_subject(&t[i], s->token, sc->inbox, s->creds.account, subj,
			    sizeof(subj)) != 0 || perms_grant(&p, t[i].dir, subj, &deny))
				continue;
			/* One line per subject, naming every feature that needs it. */
			for (size_t k = 0; k < i && !dup; k++) {
				char prev[SUBJ_MAX];
				dup = (int)t[k].cred == c && t[k].dir == t[i].dir &&
				    need_subject(&t[k], s->token, sc->inbox, s->creds.account, prev,
				    sizeof(prev)) == 0 && strcmp(prev, subj) == 0;
			}
			if (dup)
				continue;
			bool required = features_needing(t, n, (enum need_cred)c, t[i].dir, subj, s,
			    sc->inbox, feats, sizeof(feats));
			if (feats[0] == '\0') {
				snprintf(feats, sizeof(feats), "%s", t[i].feature);
				required = !t[i].optional;
			}
			char denied[SUBJ_MAX + 32] = "";
			if (deny != NULL)
				snprintf(denied, sizeof(denied), ", denied by \"%s\"", deny);
			const char *cred = c == NEED_DELIVERY ? "credential" :
			    c == NEED_SYS_OBSERVER ? "$SYS observer credential" :
			    "$SYS evictor credential";
			if (!required && c == NEED_SYS_EVICTOR) {
				log_warnx("delivery: the %s may not %s \"%s\"%s (%s needs it); eviction "
				    "is off (deny-new-only posture)", cred,
				    t[i].dir == PERMS_PUB ? "publish" : "subscribe to", subj, denied, feats);
				off_evictor = true;
			} else if (!required && strcmp(t[i].feature, NEED_F_READER_MEMORY) == 0) {
				log_warnx("delivery: the %s may not %s \"%s\"%s (%s needs it); it is "
				    "off: an entry the broker hands over again after it lost the "
				    "reader's acks is framed again", cred,
				    t[i].dir == PERMS_PUB ? "publish" : "subscribe to", subj, denied, feats);
				off_reader_memory = true;
			} else if (!required) {
				log_warnx("delivery: the %s may not %s \"%s\"%s (%s needs it); %s is "
				    "off: refused on the rail", cred,
				    t[i].dir == PERMS_PUB ? "publish" : "subscribe to", subj, denied, feats,
				    t[i].feature);
				off_register = true;
			} else {
				log_errx("delivery: the %s may not %s \"%s\"%s (%s %s it); not binding",
				    cred, t[i].dir == PERMS_PUB ? "publish" : "subscribe to", subj,
				    denied, feats, strstr(feats, " and ") ? "need" : "needs");
				missing_required++;
			}
		}
		perms_free(&p);
	}
	if (missing_required > 0)
		return -1;
	if (off_evictor) {
		sup_creds_free(&s->sys[IPC_SYS_EVICTOR]);
		s->have_sys[IPC_SYS_EVICTOR] = false;
	}
	s->register_off = off_register;
	s->reader_memory_off = off_reader_memory;
	return 0;
}
