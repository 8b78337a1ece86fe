/* The lease of a space's shard (see lease.h). */
#include "supervisor/lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "lib/clock.h"
#include "lib/nats/kvcas.h"
#include "lib/nats/natsconn.h"

bool
lease_row_ours(const struct lease *l, const struct lease_row *r)
{
	return strcmp(r->holder, l->holder) == 0 && strcmp(r->incarnation, l->incarnation) == 0;
}

char *
lease_row_build(const struct lease *l, size_t *len)
{
	json_t *v = json_pack("{s:s, s:s, s:I, s:b}", "holder", l->holder, "incarnation",
	    l->incarnation, "since", (json_int_t)l->since, "ready", l->ready);
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(v);
	if (s != NULL)
		*len = strlen(s);
	return s;
}

/* What to say of a failed write: a denial names the refused subject and
 * operation; anything else is quoted as the broker gave it. */
static enum lease_claim
write_failure(const struct lease *l, const struct lease_io *io, bool again, const char *err,
	      char *why, size_t whylen)
{
	char text[512], read_api[LEASE_BUCKET_MAX + 48];

	if (io->denied != NULL && io->denied(l->subject, text, sizeof(text))) {
		snprintf(why, whylen, "✗ delivery: the lease write for shard 0 was refused (publish "
		    "\"%s\") — this credential cannot write %s.%s. Not binding.", l->subject,
		    l->bucket, LEASE_KEY);
		return LEASE_DENIED;
	}
	/* The claim reads the row first: a credential that may not read it
	 * is refused as plainly. */
	snprintf(read_api, sizeof(read_api), "$JS.API.STREAM.MSG.GET.KV_%s", l->bucket);
	if (io->denied != NULL && io->denied(read_api, text, sizeof(text))) {
		snprintf(why, whylen, "✗ delivery: the lease read for shard 0 was refused (publish "
		    "\"%s\") — this credential cannot read %s.%s. Not binding.", read_api,
		    l->bucket, LEASE_KEY);
		return LEASE_DENIED;
	}
	snprintf(why, whylen, "✗ delivery: could not %s the lease for shard 0: %s. Not binding.",
	    again ? "re-acquire" : "acquire", err);
	return LEASE_REFUSED;
}

enum lease_claim
lease_claim(struct lease *l, const struct lease_io *io, bool again, char *why, size_t whylen)
{
	char err[1024], *val = NULL, *body;
	struct lease_row row;
	size_t len;
	uint64_t at, rev;
	int have, w;

	for (int tries = 0; tries < 2; tries++) {
		l->took_over[0] = '\0'; /* said only of the row this write replaces */
		have = kvcas_read(io->js, l->bucket, LEASE_KEY, &val, &len, &at, err, sizeof(err));
		if (have < 0)
			return write_failure(l, io, again, err, why, whylen);
		bool parsed = have == 1 && lease_row_parse(val, len, &row) == 0;
		bool ours = parsed && lease_row_ours(l, &row);
		free(val);
		val = NULL;
		/* This machine's own dead predecessor's row is taken over by
		 * compare-and-set on the revision just read (issue 42): any
		 * doubt keeps the refusal below. */
		char dead[384];
		if (have == 1 && !ours && parsed && l->dead != NULL &&
		    l->dead(&row, l->dead_arg, dead, sizeof(dead))) {
			snprintf(l->took_over, sizeof(l->took_over), "incarnation %s of %s, revision "
			    "%" PRIu64 ": %s", row.incarnation, row.holder, at, dead);
			ours = true;
		}
		/* "Only a create refused because a live lease exists makes it say
		 * that another daemon has taken the shard" (seed). */
		if (have == 1 && !ours) {
			snprintf(why, whylen, "✗ delivery: a live lease already exists for shard 0 — "
			    "another delivery daemon is running. Not binding.");
			return LEASE_LIVE_ELSEWHERE;
		}
		if (l->since == 0)
			l->since = wall_ms();
		if ((body = lease_row_build(l, &len)) == NULL) {
			snprintf(why, whylen, "✗ delivery: out of memory");
			return LEASE_REFUSED;
		}
		w = kvcas_write(io->js, l->bucket, LEASE_KEY, body, len, at, false, NULL, &rev, err,
		    sizeof(err));
		free(body);
		if (w == 0) {
			l->rev = rev;
			l->held = true;
			return LEASE_CLAIMED;
		}
		if (w < 0)
			return write_failure(l, io, again, err, why, whylen);
		/* A write in between: read again, once. */
	}
	l->took_over[0] = '\0';
	snprintf(why, whylen, "✗ delivery: a live lease already exists for shard 0 — another "
	    "delivery daemon is running. Not binding.");
	return LEASE_LIVE_ELSEWHERE;
}

int
lease_renew(struct lease *l, const struct lease_io *io, char *why, size_t whylen)
{
	char err[1024], *body;
	size_t len;
	uint64_t rev;
	int w;

	if ((body = lease_row_build(l, &len)) == NULL) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	w = kvcas_write(io->js, l->bucket, LEASE_KEY, body, len, l->rev, false, NULL, &rev, err,
	    sizeof(err));
	free(body);
	if (w == 0) {
		l->rev = rev;
		return 0;
	}
	if (w == 1)
		snprintf(why, whylen, "the lease row changed since revision %" PRIu64, l->rev);
	else
		snprintf(why, whylen, "%s", err);
	return -1;
}

enum lease_reading
lease_reread(struct lease *l, const struct lease_io *io, struct lease_row *row, char *why,
	     size_t whylen)
{
	char *val = NULL;
	size_t len;
	uint64_t at;
	int have = kvcas_read(io->js, l->bucket, LEASE_KEY, &val, &len, &at, why, whylen);
	enum lease_reading r;

	memset(row, 0, sizeof(*row));
	if (have < 0)
		return LEASE_UNKNOWN;
	if (have == 0) {
		r = LEASE_GONE;
	} else if (lease_row_parse(val, len, row) == 0 && lease_row_ours(l, row)) {
		l->rev = at;
		r = LEASE_OURS;
	} else {
		r = LEASE_TAKEN;
	}
	free(val);
	return r;
}

int
lease_describe_holder(const struct lease *l, const struct lease_io *io, char *out, size_t outlen,
		      char *why, size_t whylen)
{
	char stream[LEASE_BUCKET_MAX + 4], when[64];
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsMsg *m = NULL;
	struct lease_row row;
	natsStatus s;
	int64_t max_age_ms = 0;

	snprintf(stream, sizeof(stream), "KV_%s", l->bucket);
	s = js_GetLastMsg(&m, io->js, stream, l->subject, NULL, &jerr);
	if (s != NATS_OK) {
		conn_jserror("read the lease row", s, jerr, why, whylen);
		return -1;
	}
	if (lease_row_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &row) != 0) {
		snprintf(why, whylen, "the row at %s is no lease row", l->subject);
		natsMsg_Destroy(m);
		return -1;
	}
	int64_t written_ms = natsMsg_GetTime(m) / 1000000;
	natsMsg_Destroy(m);
	if (js_GetStreamInfo(&si, io->js, stream, NULL, &jerr) == NATS_OK && si->Config != NULL)
		max_age_ms = si->Config->MaxAge / 1000000;
	jsStreamInfo_Destroy(si);
	int64_t age_ms = wall_ms() - written_ms;
	if (age_ms < 0)
		age_ms = 0;
	if (max_age_ms <= 0 || written_ms <= 0) {
		snprintf(out, outlen, "delivery: the lease of shard 0 is held by %s (incarnation %s), "
		    "written %" PRId64 " s ago", row.holder, row.incarnation, age_ms / 1000);
		return 0;
	}
	int64_t left_ms = max_age_ms - age_ms;
	time_t at = (time_t)((written_ms + max_age_ms) / 1000);
	struct tm tm;
	gmtime_r(&at, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(out, outlen, "delivery: the lease of shard 0 is held by %s (incarnation %s), "
	    "written %" PRId64 " s ago; a running holder renews it every %d s, and if that daemon "
	    "is gone it expires in %" PRId64 " s (at %s)", row.holder, row.incarnation,
	    age_ms / 1000, LEASE_RENEW_MS / 1000, left_ms > 0 ? (left_ms + 999) / 1000 : 0, when);
	return 0;
}

int
lease_release(struct lease *l, const struct lease_io *io, char *why, size_t whylen)
{
	struct lease_row row;
	uint64_t rev;
	int w;

	if (!l->held)
		return 0;
	switch (lease_reread(l, io, &row, why, whylen)) {
	case LEASE_OURS:
		break;
	case LEASE_UNKNOWN:
		return -1;
	default:
		l->held = false;
		return 0; /* not ours to release */
	}
	w = kvcas_write(io->js, l->bucket, LEASE_KEY, NULL, 0, l->rev, true, NULL, &rev, why,
	    whylen);
	if (w == 0)
		l->held = false;
	else if (w == 1)
		snprintf(why, whylen, "the lease row changed under the release");
	return w == 0 ? 0 : -1;
}
