/*
 * How an existing stream or consumer differs from what WIRE.md §3 expects,
 * worded the way operators read JetStream configs (see provision.h).
 */
#include "cli/provision.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_US INT64_C(1000)
#define NS_PER_MS INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MIN (60 * NS_PER_SEC)
#define NS_PER_HOUR (60 * NS_PER_MIN)
#define DIFF_VALUE_MAX (PROV_STREAM_SUBJECTS_MAX * PROV_SUBJECT_MAX + 16)

/* Appends to a bounded buffer; output past the end is dropped, never overrun. */
struct sbuf {
	char *p;
	size_t cap;
	size_t len;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->p == NULL || b->cap == 0 || b->len + 1 >= b->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	b->len += (size_t)n;
	if (b->len >= b->cap)
		b->len = b->cap - 1;
}

/* Go's time.Duration.String(), the notation operators know from the nats CLI. */
static void
fmt_duration(char *out, size_t outlen, int64_t d)
{
	struct sbuf b = {out, outlen, 0};
	uint64_t u;
	uint64_t unit;
	const char *suffix;
	uint64_t whole, frac;
	int digits;

	out[0] = '\0';
	if (d == 0) {
		sb_printf(&b, "0s");
		return;
	}
	if (d < 0) {
		sb_printf(&b, "-");
		u = (uint64_t)0 - (uint64_t)d;
	} else {
		u = (uint64_t)d;
	}
	if (u < (uint64_t)NS_PER_SEC) {
		if (u < (uint64_t)NS_PER_US) {
			sb_printf(&b, "%" PRIu64 "ns", u);
			return;
		}
		unit = u < (uint64_t)NS_PER_MS ? (uint64_t)NS_PER_US : (uint64_t)NS_PER_MS;
		suffix = u < (uint64_t)NS_PER_MS ? "\xc2\xb5s" : "ms";
		digits = u < (uint64_t)NS_PER_MS ? 3 : 6;
	} else {
		uint64_t h = u / (uint64_t)NS_PER_HOUR;
		uint64_t m = (u / (uint64_t)NS_PER_MIN) % 60;

		if (h > 0)
			sb_printf(&b, "%" PRIu64 "h%" PRIu64 "m", h, m);
		else if (m > 0)
			sb_printf(&b, "%" PRIu64 "m", m);
		u %= (uint64_t)NS_PER_MIN;
		unit = (uint64_t)NS_PER_SEC;
		suffix = "s";
		digits = 9;
	}
	whole = u / unit;
	frac = u % unit;
	sb_printf(&b, "%" PRIu64, whole);
	if (frac != 0) {
		while (frac % 10 == 0) {
			frac /= 10;
			digits--;
		}
		sb_printf(&b, ".%0*" PRIu64, digits, frac);
	}
	sb_printf(&b, "%s", suffix);
}

static const char *
retention_str(jsRetentionPolicy r)
{
	switch (r) {
	case js_LimitsPolicy:
		return "limits";
	case js_InterestPolicy:
		return "interest";
	case js_WorkQueuePolicy:
		return "workqueue";
	}
	return "unknown";
}

static const char *
storage_str(jsStorageType s)
{
	return s == js_FileStorage ? "file" : s == js_MemoryStorage ? "memory" : "unknown";
}

static const char *
discard_str(jsDiscardPolicy d)
{
	return d == js_DiscardOld ? "old" : d == js_DiscardNew ? "new" : "unknown";
}

static const char *
deliver_str(jsDeliverPolicy p)
{
	switch (p) {
	case js_DeliverAll:
		return "all";
	case js_DeliverLast:
		return "last";
	case js_DeliverNew:
		return "new";
	case js_DeliverByStartSequence:
		return "by start sequence";
	case js_DeliverByStartTime:
		return "by start time";
	case js_DeliverLastPerSubject:
		return "last per subject";
	}
	return "unknown";
}

static const char *
ack_str(jsAckPolicy p)
{
	switch (p) {
	case js_AckExplicit:
		return "explicit";
	case js_AckNone:
		return "none";
	case js_AckAll:
		return "all";
	}
	return "unknown";
}

static const char *
bool_str(bool v)
{
	return v ? "true" : "false";
}

static void
diff_item(struct sbuf *b, int *n, const char *field, const char *have, const char *want)
{
	sb_printf(b, "%s%s %s (want %s)", *n > 0 ? "; " : "", field, have, want);
	(*n)++;
}

static void
diff_str(struct sbuf *b, int *n, const char *field, const char *have, const char *want)
{
	if (strcmp(have, want) != 0)
		diff_item(b, n, field, have, want);
}

static void
diff_int(struct sbuf *b, int *n, const char *field, int64_t have, int64_t want)
{
	char hs[32], ws[32];

	if (have == want)
		return;
	snprintf(hs, sizeof(hs), "%" PRId64, have);
	snprintf(ws, sizeof(ws), "%" PRId64, want);
	diff_item(b, n, field, hs, ws);
}

static void
diff_dur(struct sbuf *b, int *n, const char *field, int64_t have, int64_t want)
{
	char hs[48], ws[48];

	if (have == want)
		return;
	fmt_duration(hs, sizeof(hs), have);
	fmt_duration(ws, sizeof(ws), want);
	diff_item(b, n, field, hs, ws);
}

static bool
subject_in(const char *s, const char **list, int len)
{
	int i;

	for (i = 0; i < len; i++)
		if (list[i] != NULL && strcmp(list[i], s) == 0)
			return true;
	return false;
}

/* Same subjects regardless of order (duplicates within one list do not
 * occur: the server refuses them). */
static bool
subjects_equal(const jsStreamConfig *a, const jsStreamConfig *b)
{
	int i;

	if (a->SubjectsLen != b->SubjectsLen)
		return false;
	for (i = 0; i < a->SubjectsLen; i++)
		if (a->Subjects[i] == NULL || !subject_in(a->Subjects[i], b->Subjects, b->SubjectsLen))
			return false;
	return true;
}

static void
subjects_str(char *out, size_t outlen, const jsStreamConfig *c)
{
	struct sbuf b = {out, outlen, 0};
	int i;

	out[0] = '\0';
	sb_printf(&b, "[");
	for (i = 0; i < c->SubjectsLen; i++)
		sb_printf(&b, "%s%s", i > 0 ? " " : "", c->Subjects[i] ? c->Subjects[i] : "");
	sb_printf(&b, "]");
}

int
provision_stream_diff(const jsStreamConfig *have, const jsStreamConfig *want, char *out,
		      size_t outlen)
{
	struct sbuf b = {out, outlen, 0};
	int n = 0;

	if (out != NULL && outlen > 0)
		out[0] = '\0';
	if (!subjects_equal(have, want)) {
		char *hs = malloc(DIFF_VALUE_MAX), *ws = malloc(DIFF_VALUE_MAX);

		if (hs != NULL && ws != NULL) {
			subjects_str(hs, DIFF_VALUE_MAX, have);
			subjects_str(ws, DIFF_VALUE_MAX, want);
			diff_item(&b, &n, "subjects", hs, ws);
		} else {
			diff_item(&b, &n, "subjects", "(differ)", "(out of memory)");
		}
		free(hs);
		free(ws);
	}
	diff_str(&b, &n, "retention", retention_str(have->Retention), retention_str(want->Retention));
	diff_str(&b, &n, "storage", storage_str(have->Storage), storage_str(want->Storage));
	diff_str(&b, &n, "discard", discard_str(have->Discard), discard_str(want->Discard));
	diff_dur(&b, &n, "duplicate window", have->Duplicates, want->Duplicates);
	diff_int(&b, &n, "max messages per subject", have->MaxMsgsPerSubject,
		 want->MaxMsgsPerSubject);
	diff_dur(&b, &n, "max age", have->MaxAge, want->MaxAge);
	diff_str(&b, &n, "allow direct", bool_str(have->AllowDirect), bool_str(want->AllowDirect));
	diff_str(&b, &n, "allow rollup", bool_str(have->AllowRollup), bool_str(want->AllowRollup));
	diff_str(&b, &n, "deny delete", bool_str(have->DenyDelete), bool_str(want->DenyDelete));
	diff_str(&b, &n, "deny purge", bool_str(have->DenyPurge), bool_str(want->DenyPurge));
	diff_int(&b, &n, "replicas", have->Replicas, want->Replicas);
	return n;
}

/* A byte count as operators read it: "unlimited", or B, KiB, MiB, GiB, TiB
 * with at most two decimals ("1.20 GiB"). */
static void
fmt_bytes(char *out, size_t outlen, int64_t b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	if (b < 0) {
		snprintf(out, outlen, "unlimited");
		return;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, outlen, "%" PRId64 " B", b);
	else
		snprintf(out, outlen, "%.2f %s", v, unit[u]);
}

int
provision_stream_notes(const jsStreamConfig *have, const jsStreamConfig *want, char *out,
		       size_t outlen)
{
	struct sbuf b = {out, outlen, 0};
	char hs[32], ws[32];
	int n = 0;

	if (out != NULL && outlen > 0)
		out[0] = '\0';
	/* 0 and -1 both mean no limit to the broker. */
	int64_t h = have->MaxBytes > 0 ? have->MaxBytes : -1, w = want->MaxBytes > 0 ?
	    want->MaxBytes : -1;
	if (h != w) {
		fmt_bytes(hs, sizeof(hs), h);
		fmt_bytes(ws, sizeof(ws), w);
		diff_item(&b, &n, "max bytes", hs, ws);
	}
	return n;
}

int
provision_consumer_diff(const jsConsumerConfig *have, const jsConsumerConfig *want, char *out,
			size_t outlen)
{
	struct sbuf b = {out, outlen, 0};
	const char *hd = have->DeliverSubject != NULL ? have->DeliverSubject : "";
	const char *wd = want->DeliverSubject != NULL ? want->DeliverSubject : "";
	int n = 0;

	if (out != NULL && outlen > 0)
		out[0] = '\0';
	if ((hd[0] == '\0') != (wd[0] == '\0'))
		diff_item(&b, &n, "mode", hd[0] ? "push" : "pull", wd[0] ? "push" : "pull");
	diff_str(&b, &n, "deliver policy", deliver_str(have->DeliverPolicy),
		 deliver_str(want->DeliverPolicy));
	diff_str(&b, &n, "ack policy", ack_str(have->AckPolicy), ack_str(want->AckPolicy));
	diff_dur(&b, &n, "ack wait", have->AckWait, want->AckWait);
	diff_str(&b, &n, "filter subject", have->FilterSubject ? have->FilterSubject : "",
		 want->FilterSubject ? want->FilterSubject : "");
	return n;
}

