/*
 * Fuzz target: the subject and record parsers of lib/wire/records.c.
 *
 * Every input goes to every parser: as a subject (chat, dinbox, lifecycle,
 * member key), as a post on a fixed chat subject, as an ACL, member,
 * presence or channel-config row, and as a fan-out entry. Whatever parses
 * is checked for the invariants the callers rely on (a parsed channel is
 * concrete, what we build parses back to the same fields) and freed.
 *
 * channel_pattern_match gets the input split at the first NUL or newline:
 * pattern before, channel after. When the pattern is a valid pattern and
 * the channel a concrete channel its answer is compared with a plain
 * token-by-token matcher written here from the NATS rules.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/records.h"
#include "lib/wire/tokens.h"

#define PREFIX "cotal.demo"
#define KEY_UID "abcdefghijklmnopqrstuvwxyz"
#define MEMBER_KEY "general/local.alice." KEY_UID

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct chat_subject fixed_cs = { "local", "alice", "general" };

/* NATS subject matching, from the rules: '*' matches one token, a final '>'
 * one or more, any other token itself. */
static bool
ref_match(const char *p, const char *c)
{
	for (;;) {
		const char *pe = strchr(p, '.'), *ce = strchr(c, '.');
		size_t pl = pe ? (size_t)(pe - p) : strlen(p);
		size_t cl = ce ? (size_t)(ce - c) : strlen(c);

		if (pl == 1 && p[0] == '>' && pe == NULL)
			return true; /* c is non-empty here: a concrete channel */
		if (!(pl == 1 && p[0] == '*') && (pl != cl || memcmp(p, c, pl) != 0))
			return false;
		if (pe == NULL || ce == NULL)
			return pe == NULL && ce == NULL;
		p = pe + 1;
		c = ce + 1;
	}
}

static void
check_lifecycle(const struct lifecycle *l)
{
	char buf[LIFECYCLE_MAX + 1];
	struct lifecycle back;

	if (!identity_token_valid(l->owner) || !identity_token_valid(l->actor) ||
	    !lifecycle_uid_valid(l->uid))
		abort();
	if (!lifecycle_format(l, buf, sizeof(buf)) || lifecycle_parse(buf, &back) != 0 ||
	    strcmp(back.owner, l->owner) != 0 || strcmp(back.actor, l->actor) != 0 ||
	    strcmp(back.uid, l->uid) != 0)
		abort();
}

static void
subjects(const char *s)
{
	static struct chat_subject cs;
	static char channel[CHANNEL_MAX + 1], key[MEMBER_KEY_MAX + 1];
	struct lifecycle l;
	char why[WHY_MAX];

	if (chat_subject_parse(s, PREFIX, &cs, why, sizeof(why)) == 0) {
		if (!identity_token_valid(cs.owner) || !identity_token_valid(cs.actor) ||
		    !channel_concrete_valid(cs.channel))
			abort();
		(void)channel_pattern_match(cs.channel, cs.channel);
	}
	if (dinbox_subject_parse(s, PREFIX, &l, why, sizeof(why)) == 0)
		check_lifecycle(&l);
	if (lifecycle_parse(s, &l) == 0)
		check_lifecycle(&l);
	if (member_key_parse(s, channel, sizeof(channel), &l) == 0) {
		check_lifecycle(&l);
		if (!channel_concrete_valid(channel))
			abort();
		/* The key formats back to itself. */
		if (!member_key_format(channel, &l, key, sizeof(key)) || strcmp(key, s) != 0)
			abort();
	}
}

/* The reader's fast path agrees with the full decode: same fields, and
 * the stored message decodes to the same message. must: the entry was
 * built from a decoded post, so the fast path has to take it. */
static void
entry_view_agrees(const char *s, size_t len, const json_t *msg, const char *channel,
		  uint64_t seq, enum entry_reason reason, uint64_t generation, bool must)
{
	struct entry_view v;

	if (entry_view(s, len, &v) != 0) {
		if (must) {
			fprintf(stderr, "the fast path refuses an entry the fan-out built\n");
			abort();
		}
		return;
	}
	if (v.msg < s || v.msg + v.msglen > s + len || strcmp(v.channel, channel) != 0 ||
	    v.seq != seq || v.reason != reason || v.generation != generation)
		abort();
	json_t *m = json_loadb(v.msg, v.msglen, 0, NULL);
	if (m == NULL || !json_equal(m, msg))
		abort();
	json_decref(m);
	size_t fl;
	char *f = frame_build_raw(v.msg, v.msglen, v.channel, &fl);
	json_t *fr = f ? json_loadb(f, fl, 0, NULL) : NULL;
	if (fr == NULL || !json_equal(json_object_get(fr, "msg"), msg))
		abort();
	json_decref(fr);
	free(f);
}

static void
entry_round_trip(const json_t *msg, const char *channel, uint64_t seq, enum entry_reason reason,
		 uint64_t generation, bool from_post)
{
	struct entry e;
	char why[WHY_MAX], *s;
	size_t len;

	if ((s = entry_build(msg, channel, seq, reason, generation, &len)) == NULL)
		return;
	if (entry_parse(s, len, &e, why, sizeof(why)) != 0) {
		fprintf(stderr, "an entry built from a decoded message does not parse: %s\n", why);
		abort();
	}
	if (strcmp(e.channel, channel) != 0 || e.seq != seq || e.reason != reason ||
	    e.generation != generation || !json_equal(e.msg, msg))
		abort();
	entry_free(&e);
	entry_view_agrees(s, len, msg, channel, seq, reason, generation, from_post);
	/* The fan-out's prefix plus the generation is the same entry. */
	{
		size_t plen;
		char *p = entry_prefix(msg, channel, seq, reason, &plen), *j;

		if (p == NULL)
			abort();
		if ((j = malloc(plen + 24)) == NULL)
			abort();
		snprintf(j, plen + 24, "%s%" PRIu64 "}", p, generation);
		if (strcmp(j, s) != 0)
			abort();
		free(j);
		free(p);
	}
	free(s);
}

static void
post(const char *data, size_t size)
{
	static const struct lifecycle to = { "local", "bob", KEY_UID };
	const char *names[MENTIONS_MAX];
	char why[WHY_MAX], key[DEDUP_KEY_MAX], *s;
	json_t *msg;
	size_t n, len;

	switch (post_decode(data, size, &fixed_cs, &msg, why, sizeof(why))) {
	case POST_OK:
		break;
	case POST_UNDECODABLE:
	case POST_INAUTHENTIC:
		if (msg != NULL)
			abort();
		return;
	default:
		abort();
	}
	if (msg == NULL ||
	    strcmp(json_string_value(json_object_get(msg, "channel")), fixed_cs.channel) != 0 ||
	    json_object_get(msg, "to") != NULL || json_object_get(msg, "toService") != NULL)
		abort();
	n = post_mentions(msg, names, MENTIONS_MAX);
	if (n > MENTIONS_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if (names[i] == NULL)
			abort();
	/* An id within MSG_ID_MAX always makes a key, unless it is empty. */
	if (dedup_key(post_id(msg), &to, 7, key, sizeof(key)) != (post_id(msg)[0] != '\0'))
		abort();
	entry_round_trip(msg, fixed_cs.channel, 42, REASON_DURABLE, 3, true);
	entry_round_trip(msg, fixed_cs.channel, 1, REASON_MENTION, 0, true);
	if ((s = frame_build(msg, fixed_cs.channel, &len)) == NULL)
		abort();
	free(s);
	json_decref(msg);
}

static void
rows(const char *data, size_t size, const char *subject_channel)
{
	struct member_row m;
	struct acl_row acl;
	struct entry e;
	char why[WHY_MAX], name[257], uid[UID_MAX + 1];
	size_t half = size / 2;

	acl_row_parse(data, size, &acl);
	if (acl.state != ACL_LIVE && acl.npatterns != 0)
		abort();
	if (acl.npatterns > ACL_PATTERNS_MAX)
		abort();
	for (size_t i = 0; i < acl.npatterns; i++)
		if (!channel_pattern_valid(acl.patterns[i]))
			abort();
	(void)acl_covers(&acl, "general");
	(void)acl_covers(&acl, "team.ops.x");
	if (subject_channel != NULL)
		(void)acl_covers(&acl, subject_channel);
	acl_row_free(&acl);

	if (member_row_parse(MEMBER_KEY, data, size, &m, why, sizeof(why)) == 0) {
		if (strcmp(m.channel, "general") != 0 || strcmp(m.who.uid, KEY_UID) != 0)
			abort();
		(void)membership_eligible(&m, m.join_cursor);
		(void)membership_eligible(&m, m.join_cursor + 1);
		if (m.has_leave)
			(void)membership_eligible(&m, m.leave_cursor + 1);
	}

	if (presence_row_parse("local.alice", data, size, name, sizeof(name), uid,
	    sizeof(uid)) == 0) {
		if (strlen(name) >= sizeof(name) || (uid[0] != '\0' && !lifecycle_uid_valid(uid)))
			abort();
	}

	if (entry_parse(data, size, &e, why, sizeof(why)) == 0) {
		if (e.msg == NULL || e.seq == 0 || !channel_concrete_valid(e.channel))
			abort();
		entry_round_trip(e.msg, e.channel, e.seq, e.reason, e.generation, false);
		entry_free(&e);
	} else if (e.msg != NULL) {
		abort();
	}

	{
		/* Whatever the fast path accepts stays within the input. */
		struct entry_view v;
		if (entry_view(data, size, &v) == 0 &&
		    (v.msg < data || v.msg + v.msglen > data + size || v.seq == 0 ||
		    !channel_concrete_valid(v.channel)))
			abort();
	}
	(void)channel_class(data, size, NULL, 0);
	(void)channel_class(NULL, 0, data, size);
	(void)channel_class(data, half, data + half, size - half);
}

static void
patterns(const char *s, size_t size)
{
	size_t cut = 0;
	char *p, *c;

	while (cut < size && s[cut] != '\0' && s[cut] != '\n')
		cut++;
	if ((p = malloc(cut + 1)) == NULL)
		return;
	memcpy(p, s, cut);
	p[cut] = '\0';
	/* The channel: after the cut, up to the next NUL. */
	{
		const char *rest = cut < size ? s + cut + 1 : s + size;
		size_t left = cut < size ? size - cut - 1 : 0;
		const char *nul = memchr(rest, '\0', left);
		size_t cl = nul != NULL ? (size_t)(nul - rest) : left;

		if ((c = malloc(cl + 1)) == NULL) {
			free(p);
			return;
		}
		memcpy(c, rest, cl);
		c[cl] = '\0';
	}
	bool got = channel_pattern_match(p, c);
	if (channel_pattern_valid(p) && channel_concrete_valid(c) && got != ref_match(p, c)) {
		fprintf(stderr, "channel_pattern_match(\"%s\", \"%s\") = %d\n", p, c, got);
		abort();
	}
	/* A concrete channel matches itself. */
	if (channel_concrete_valid(c) && !channel_pattern_match(c, c))
		abort();
	free(p);
	free(c);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct chat_subject cs;
	char *s, why[WHY_MAX];

	/* Subjects and keys are C strings: they end at the first NUL. */
	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	subjects(s);
	/* The records get the exact bytes, so ASan sees any read past them. */
	post((const char *)data, size);
	rows((const char *)data, size,
	    chat_subject_parse(s, PREFIX, &cs, why, sizeof(why)) == 0 ? cs.channel : NULL);
	patterns((const char *)data, size);
	free(s);
	return 0;
}
