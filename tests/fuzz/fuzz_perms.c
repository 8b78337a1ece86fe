/*
 * Fuzz target: a credential's permissions and the subjects around them.
 * The first input byte picks a mode:
 *   0: the rest is a user's claims JSON, signed by a fixed dev key, decoded;
 *      then perms_from_jwt, perms_reply_inbox, jwt_allow_all and a grant
 *      check of every need of the table (lib/creds/needs.c);
 *   1: the rest is two subjects split at the first NUL: subject_covers and
 *      subject_overlaps, and what must hold between them;
 *   2: the rest is a reply subject: js_ack_meta;
 *   3: the rest is a PubAck: js_puback_parse, which must agree with a
 *      full decode on every answer it accepts.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/dev_signer.h"
#include "lib/nats/jsack.h"
#include "lib/creds/needs.h"
#include "lib/creds/nkeys.h"
#include "lib/creds/perms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
claims(const uint8_t *data, size_t size)
{
	static struct nkey signer;
	static int ready;
	char err[256], inbox[REPLY_INBOX_MAX], subj[1024], *tok;
	struct jwt j;
	struct perms p;
	json_t *c;

	if (!ready) {
		uint8_t seed[32];
		memset(seed, 0x44, sizeof(seed));
		if (nkey_from_raw(NKEY_ACCOUNT, seed, &signer) != 0)
			abort();
		ready = 1;
	}
	if ((c = json_loadb((const char *)data, size, 0, NULL)) == NULL)
		return;
	tok = dev_jwt_sign(c, &signer, err, sizeof(err));
	json_decref(c);
	if (tok == NULL)
		return;
	if (jwt_decode(tok, strlen(tok), &j, err, sizeof(err)) == 0) {
		(void)jwt_allow_all(&j, err, sizeof(err));
		if (perms_from_jwt(&j, &p, err, sizeof(err)) == 0) {
			const struct need *t;
			const char *deny;
			size_t n;
			if (perms_reply_inbox(&p, inbox, sizeof(inbox), err, sizeof(err)) != 0)
				strcpy(inbox, "_INBOX");
			t = needs_table(&n);
			for (size_t i = 0; i < n; i++)
				if (need_subject(&t[i], "s", inbox, "A", subj, sizeof(subj)) == 0)
					(void)perms_grant(&p, t[i].dir, subj, &deny);
			perms_free(&p);
		}
		jwt_free(&j);
	}
	free(tok);
}

static void
subjects(const uint8_t *data, size_t size)
{
	char *a = malloc(size + 1), *b;

	if (a == NULL)
		return;
	memcpy(a, data, size);
	a[size] = '\0';
	b = memchr(a, '\0', size) != NULL ? a + strlen(a) + 1 : a + size;
	if (b > a + size)
		b = a + size;
	bool cov = subject_covers(a, b), ov = subject_overlaps(a, b);
	/* Overlap is symmetric, and whatever covers a subject shares it. */
	if (ov != subject_overlaps(b, a))
		abort();
	if (cov && *b != '\0' && !ov)
		abort();
	free(a);
}

static void
puback(const char *d, size_t n)
{
	char why[256];
	uint64_t seq = 0;

	if (js_puback_parse(d, n, &seq, why, sizeof(why)) != 0)
		return;
	/* Accepted: a JSON object whose seq is that number, and no error. */
	json_t *doc = json_loadb(d, n, 0, NULL);
	json_t *sq = json_object_get(doc, "seq");
	if (!json_is_object(doc) || json_object_get(doc, "error") != NULL ||
	    !json_is_integer(sq) || (uint64_t)json_integer_value(sq) != seq || seq == 0)
		abort();
	json_decref(doc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct js_ack_meta m;
	char *s;

	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0:
		claims(data + 1, size - 1);
		break;
	case 1:
		subjects(data + 1, size - 1);
		break;
	case 2:
		if ((s = malloc(size)) == NULL)
			return 0;
		memcpy(s, data + 1, size - 1);
		s[size - 1] = '\0';
		(void)js_ack_meta(s, &m);
		free(s);
		break;
	case 3:
		puback((const char *)data + 1, size - 1);
		break;
	}
	return 0;
}
