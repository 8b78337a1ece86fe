/*
 * `cotal admin inventory|evict|liveness|reload`: the manager's requests on
 * the delivery daemon's admin rail (WIRE.md §5), as the manager, with the
 * space's standing supervisor credential, waiting for the daemon with the
 * seed's retry cadence (lib/wire/ctlclient.c), as a manager retiring an
 * agent does.
 */
#include "cli/rails.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "lib/log.h"
#include "lib/strmap.h"
#include "lib/workspace.h"
#include "lib/wire/records.h"
#include "lib/wire/tokens.h"

/* ---- what a person reads (issue 43: prose by default, --json for
 * scripts). Every string of a reply is the daemon's, some of them an
 * agent's (a channel's name): each is printed escaped. ---- */

static const char *
str(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));

	return v != NULL ? v : "?";
}

static long long
num(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* lifecycleMemberships: one line per membership row of the lifecycle. */
static void
prose_inventory(const json_t *data)
{
	const json_t *rows = json_object_get(data, "memberships"), *r;
	size_t i, n = json_array_size(rows);

	if (n == 0) {
		printf("no membership rows for this lifecycle\n");
		return;
	}
	printf("%zu membership row%s:\n", n, n == 1 ? "" : "s");
	json_array_foreach(rows, i, r) {
		printf("  %s  generation %lld, joined at %lld", cli_esc(str(r, "channel")),
		    num(r, "generation"), num(r, "joinCursor"));
		if (json_is_integer(json_object_get(r, "leaveCursor")))
			printf(", left at %lld", num(r, "leaveCursor"));
		printf(", %s\n", json_is_true(json_object_get(r, "activated")) ? "activated" :
		    "not activated yet");
	}
}

/* One EvictionResult (WIRE.md §5). */
static void
prose_eviction(const json_t *r)
{
	const char *note = json_string_value(json_object_get(r, "note"));

	if (json_is_true(json_object_get(r, "verifiedGone")))
		printf("%s: gone, verified (%lld connection%s kicked)", cli_esc(str(r, "principal")),
		    num(r, "kicked"), num(r, "kicked") == 1 ? "" : "s");
	else
		printf("%s: NOT verified gone: %lld kicked, %lld remaining%s",
		    cli_esc(str(r, "principal")), num(r, "kicked"), num(r, "remaining"),
		    json_is_true(json_object_get(r, "scanComplete")) ? "" :
		    ", the scan was incomplete");
	printf("%s%s\n", note != NULL ? "; " : "", note != NULL ? cli_esc(note) : "");
}

static void
prose_evictions(const json_t *data)
{
	const json_t *r;
	size_t i;

	if (json_is_array(data))
		json_array_foreach(data, i, r)
			prose_eviction(r);
	else
		prose_eviction(data);
}

/* principalLiveness. */
static void
prose_principal_liveness(const json_t *data)
{
	const char *note = json_string_value(json_object_get(data, "note"));

	printf("%s: %s (%s)%s%s\n", cli_esc(str(data, "principal")), cli_esc(str(data, "state")),
	    json_is_true(json_object_get(data, "sweepComplete")) ? "the sweep was complete" :
	    "the sweep was incomplete", note != NULL ? "; " : "", note != NULL ? cli_esc(note) : "");
}

/* reloadCreds. Its wire answer is the same whether the file held a renewed
 * credential (adopted, the resident connection moves onto it 250 ms later)
 * or the one in use (nothing to adopt): what is true of both is said. */
static void
prose_reload(const json_t *data)
{
	const json_t *d = json_object_get(data, "delivery");

	if (json_is_true(json_object_get(d, "ok")))
		printf("the daemon holds the credential its file holds now, proved with the broker "
		    "(%s); a renewed one is adopted and the resident connection moves onto it "
		    "250 ms after this answer (the daemon's log says which)\n",
		    json_is_true(json_object_get(d, "brokerAccepted")) ? "accepted" : "not accepted");
	else
		printf("not adopted\n");
}

/*
 * One admin request with the seed's retry cadence within --wait; args is
 * stolen. Prints the reply's data in prose (with --json the reply). The
 * exit status: 0 on ok:true, 1 otherwise.
 */
static int
admin_call(const struct rail_args *a, const char *op, json_t *args,
	   void (*prose)(const json_t *data))
{
	struct cli_session s;
	struct ctl_result res = { 0 };
	int rc = 0;

	if (admin_session(a, &s) != 0) {
		json_decref(args);
		return 1;
	}
	ctl_call_retry(s.client, RAIL_ADMIN, op, args,
	    a->wait_ms < ADMIN_TRY_MS ? a->wait_ms : ADMIN_TRY_MS, a->wait_ms, &res);
	json_decref(args);
	if (res.outcome != CTL_REPLIED || !res.ok)
		rc = call_failed(a, &res, RAIL_ADMIN);
	else if (a->json)
		print_json(res.reply);
	else if (res.data != NULL)
		prose(res.data);
	else
		printf("ok\n");
	ctl_result_free(&res);
	cli_session_close(&s);
	return rc;
}

static bool
principal_ok(const struct rail_args *a, const char *p)
{
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];

	if (principal_parse(p, owner, sizeof(owner), actor, sizeof(actor)) == 0)
		return true;
	log_errx("%s: PRINCIPAL \"%s\" is not <owner>.<actor> with a principal owner (\"local\" "
	    "or \"u_\" + 26 of [a-z2-7])", a->verb, p);
	return false;
}

int
cmd_admin_inventory(int argc, char **argv)
{
	struct rail_args a;

	if (parse_rail_args("admin inventory", argc, argv, 0, 2, 2, ADMIN_WAIT_MS, &a) != 0)
		return rails_usage();
	if (!principal_ok(&a, a.pos[0]))
		return 1;
	if (!lifecycle_uid_valid(a.pos[1])) {
		log_errx("%s: UID \"%s\" must match ^[a-z0-9]{26,32}$", a.verb, a.pos[1]);
		return 1;
	}
	return admin_call(&a, "lifecycleMemberships", json_pack("{s:s, s:s}", "principal",
	    a.pos[0], "lifecycleUid", a.pos[1]), prose_inventory);
}

/* ---- eviction in batches, with a ledger ---- */

#define EVICT_TOTAL_MAX 100000          /* principals of one eviction */
#define EVICT_FROM_MAX (16 * 1024 * 1024) /* bytes of a --from file */
#define EVICT_LINE_MAX 512
#define LEDGER_MAX (64 * 1024 * 1024)   /* bytes of a ledger read back */
#define LEDGER_FORMAT "cotal-admin-evict/1"

struct evict {
	char **p;          /* the principals, in order, each once */
	size_t n, cap;
	struct strmap seen; /* the same, to drop a principal named twice */
	char digest[SHA256_HEX + 1];
};

static void
evict_free(struct evict *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->p[i]);
	free(e->p);
	strmap_clear(&e->seen, NULL);
	memset(e, 0, sizeof(*e));
}

/* Add principal p (where names where it came from): -1 after a refusal. */
static int
evict_add(struct evict *e, const struct rail_args *a, const char *p, const char *where)
{
	char owner[IDENT_MAX + 1], actor[IDENT_MAX + 1];

	if (principal_parse(p, owner, sizeof(owner), actor, sizeof(actor)) != 0) {
		log_errx("%s: %s \"%s\" is not <owner>.<actor> with a principal owner (\"local\" "
		    "or \"u_\" + 26 of [a-z2-7])", a->verb, where, p);
		return -1;
	}
	if (strmap_get(&e->seen, p) != NULL)
		return 0; /* named twice: evicted once */
	if (e->n == EVICT_TOTAL_MAX) {
		log_errx("%s: more than %d principals", a->verb, EVICT_TOTAL_MAX);
		return -1;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 256;
		char **q = realloc(e->p, cap * sizeof(*q));
		if (q == NULL) {
			log_errx("%s: out of memory", a->verb);
			return -1;
		}
		e->p = q, e->cap = cap;
	}
	if ((e->p[e->n] = strdup(p)) == NULL || strmap_put(&e->seen, p, e->p[e->n], NULL) != 0) {
		free(e->p[e->n]);
		log_errx("%s: out of memory", a->verb);
		return -1;
	}
	e->n++;
	return 0;
}

/* --from FILE: a principal per line; blank lines and # comments skipped. */
static int
evict_read_from(struct evict *e, const struct rail_args *a)
{
	char line[EVICT_LINE_MAX + 2], where[EVICT_LINE_MAX + 64];
	FILE *f = fopen(a->from, "r");
	long total = 0;
	int no = 0, rc = 0;

	if (f == NULL) {
		log_errx("%s: --from %s: %s", a->verb, a->from, strerror(errno));
		return -1;
	}
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		size_t n = strlen(line);
		no++;
		total += (long)n;
		if (total > EVICT_FROM_MAX) {
			log_errx("%s: --from %s: more than %d bytes", a->verb, a->from, EVICT_FROM_MAX);
			rc = -1;
			break;
		}
		if (n > 0 && line[n - 1] != '\n' && !feof(f)) {
			log_errx("%s: --from %s:%d: a line longer than %d bytes", a->verb, a->from, no,
			    EVICT_LINE_MAX);
			rc = -1;
			break;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
		    line[n - 1] == '\t'))
			line[--n] = '\0';
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		snprintf(where, sizeof(where), "--from %s:%d", a->from, no);
		rc = evict_add(e, a, p, where);
	}
	if (rc == 0 && ferror(f)) {
		log_errx("%s: --from %s: %s", a->verb, a->from, strerror(errno));
		rc = -1;
	}
	fclose(f);
	return rc;
}

/* The SHA-256 of the principals, in order, one per line: what a ledger
 * records of the eviction it belongs to. */
static void
evict_digest(struct evict *e)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (c == NULL) {
		snprintf(e->digest, sizeof(e->digest), "(out of memory)");
		return;
	}
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	for (size_t i = 0; i < e->n; i++) {
		EVP_DigestUpdate(c, e->p[i], strlen(e->p[i]));
		EVP_DigestUpdate(c, "\n", 1);
	}
	EVP_DigestFinal_ex(c, md, NULL);
	EVP_MD_CTX_free(c);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(e->digest + 2 * i, 3, "%02x", md[i]);
}

/*
 * The ledger of an eviction begun before: the number of batches it
 * recorded as sent (0 when there is no ledger yet), and what each verified
 * into *verified. -1 after a refusal naming the file: another eviction's,
 * or not a ledger.
 */
static long
ledger_read(const struct rail_args *a, const struct evict *e, size_t batches, json_t **verified)
{
	json_error_t je;
	json_t *l;
	struct stat st;

	*verified = json_array();
	if (lstat(a->ledger, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		log_errx("%s: --ledger %s: %s", a->verb, a->ledger, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > LEDGER_MAX) {
		log_errx("%s: --ledger %s: not a regular file of at most %d bytes", a->verb,
		    a->ledger, LEDGER_MAX);
		return -1;
	}
	if ((l = json_load_file(a->ledger, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		log_errx("%s: --ledger %s: not a ledger (line %d: %s)", a->verb, a->ledger, je.line,
		    je.text);
		return -1;
	}
	const char *fmt = json_string_value(json_object_get(l, "format"));
	const char *space = json_string_value(json_object_get(l, "space"));
	const char *digest = json_string_value(json_object_get(l, "digest"));
	json_t *sent = json_object_get(l, "sent"), *v = json_object_get(l, "verified");
	long n = -1;
	if (fmt == NULL || strcmp(fmt, LEDGER_FORMAT) != 0 || !json_is_integer(sent) ||
	    !json_is_array(v))
		log_errx("%s: --ledger %s: not a ledger of cotal admin evict (%s)", a->verb, a->ledger,
		    LEDGER_FORMAT);
	else if (space == NULL || strcmp(space, a->space) != 0 || digest == NULL ||
	    strcmp(digest, e->digest) != 0 ||
	    json_integer_value(json_object_get(l, "principals")) != (json_int_t)e->n)
		log_errx("%s: --ledger %s records another eviction (space %s, %" JSON_INTEGER_FORMAT
		    " principals, digest %.12s…), not this one (space %s, %zu principals, digest "
		    "%.12s…); give this one a ledger of its own", a->verb, a->ledger, space ? space :
		    "?", json_integer_value(json_object_get(l, "principals")), digest ? digest : "?",
		    a->space, e->n, e->digest);
	else if (json_integer_value(json_object_get(l, "batches")) != (json_int_t)batches)
		log_errx("%s: --ledger %s cut this eviction into %" JSON_INTEGER_FORMAT " batches, this "
		    "cotal into %zu (of %d principals each): resuming from it could skip some; give "
		    "this one a ledger of its own", a->verb, a->ledger,
		    json_integer_value(json_object_get(l, "batches")), batches, EVICT_MAX);
	else if (json_integer_value(sent) < 0 || (size_t)json_integer_value(sent) > batches ||
	    json_array_size(v) != (size_t)json_integer_value(sent))
		log_errx("%s: --ledger %s: \"sent\" %" JSON_INTEGER_FORMAT " does not fit %zu batches "
		    "and %zu verified lists", a->verb, a->ledger, json_integer_value(sent), batches,
		    json_array_size(v));
	else {
		n = (long)json_integer_value(sent);
		json_decref(*verified);
		*verified = json_incref(v);
	}
	json_decref(l);
	return n;
}

/* The ledger after `sent` batches, written whole (a temporary file,
 * synced, renamed over it), 0600. */
static int
ledger_write(const struct rail_args *a, const struct evict *e, size_t batches, size_t sent,
	     json_t *verified)
{
	char err[1024];
	json_t *l = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:O}", "format", LEDGER_FORMAT,
	    "space", a->space, "principals", (json_int_t)e->n, "digest", e->digest, "batches",
	    (json_int_t)batches, "sent", (json_int_t)sent, "verified", verified);
	int rc = l != NULL ? ws_write_json(a->ledger, l, 0600, err, sizeof(err)) : -1;

	if (rc != 0)
		log_errx("%s: --ledger %s: %s", a->verb, a->ledger, l ? err : "out of memory");
	json_decref(l);
	return rc;
}

#ifdef COTAL_TEST_HOOKS
/* Test hooks: COTAL_TEST_EVICT_KILL_AFTER=N kills the command right after
 * the ledger of its Nth batch is written, as a restart's executor window
 * would cut it short; COTAL_TEST_EVICT_HOLD=N:PATH holds it after its Nth
 * batch until PATH exists (at most 60 s), so a test can act between two. */
static void
between_hook(size_t batch)
{
	const char *k = getenv("COTAL_TEST_EVICT_KILL_AFTER"), *h = getenv("COTAL_TEST_EVICT_HOLD");
	const char *path = h != NULL ? strchr(h, ':') : NULL;

	if (k != NULL && (size_t)atol(k) == batch)
		raise(SIGKILL);
	if (path != NULL && (size_t)atol(h) == batch)
		for (int i = 0; i < 1200 && access(path + 1, F_OK) != 0; i++) {
			struct timespec ts = { 0, 50 * 1000000L };
			nanosleep(&ts, NULL);
		}
}
#endif

/*
 * The seed: "The manager sends those holders as one evictPrincipals
 * request per 256 [...] The manager records the holders each request
 * verified before it sends the next, so a restart cut short by its executor
 * window resumes after the last recorded request." Each batch waits with
 * the retirement's retry cadence; a refusal or a reply that cannot be read
 * stops at once, naming the batch.
 */
static int
evict_batches(const struct rail_args *a, struct evict *e)
{
	size_t batches = (e->n + EVICT_MAX - 1) / EVICT_MAX, verified_n = 0;
	json_t *verified = NULL;
	struct cli_session s;
	long from = 0;
	int rc = 0;

	evict_digest(e);
	if (a->ledger != NULL && (from = ledger_read(a, e, batches, &verified)) < 0) {
		json_decref(verified);
		return 1;
	}
	if (verified == NULL)
		verified = json_array();
	if (from > 0)
		log_info("%s: the ledger %s records %ld of %zu batches sent; resuming with batch "
		    "%ld", a->verb, a->ledger, from, batches, from + 1);
	if ((size_t)from == batches) {
		log_ok("%s: all %zu batches were sent before (ledger %s); nothing to send", a->verb,
		    batches, a->ledger);
		json_decref(verified);
		return 0;
	}
	if (admin_session(a, &s) != 0) {
		json_decref(verified);
		return 1;
	}
	for (size_t b = (size_t)from; b < batches && rc == 0; b++) {
		size_t lo = b * EVICT_MAX, hi = lo + EVICT_MAX < e->n ? lo + EVICT_MAX : e->n;
		struct ctl_result res = { 0 };
		json_t *list = json_array(), *gone = json_array(), *v;
		size_t i;

		for (i = lo; i < hi; i++)
			json_array_append_new(list, json_string(e->p[i]));
		json_t *args = json_pack("{s:o}", "principals", list);
		ctl_call_retry(s.client, RAIL_ADMIN, "evictPrincipals", args,
		    a->wait_ms < ADMIN_TRY_MS ? a->wait_ms : ADMIN_TRY_MS, a->wait_ms, &res);
		json_decref(args);
		if (res.outcome != CTL_REPLIED || !res.ok) {
			call_failed(a, &res, RAIL_ADMIN);
			rc = 1;
		} else if (!json_is_array(res.data) || json_array_size(res.data) != hi - lo) {
			log_errx("%s: the reply to batch %zu is not %zu eviction results", a->verb,
			    b + 1, hi - lo);
			rc = 1;
		}
		if (rc != 0) {
			log_errx("%s: batch %zu of %zu (principals %zu-%zu) not done: nothing after it "
			    "was sent%s%s", a->verb, b + 1, batches, lo + 1, hi,
			    a->ledger ? "; run again with the same --ledger to resume from it: " : "",
			    a->ledger ? a->ledger : "");
			json_decref(gone);
			ctl_result_free(&res);
			break;
		}
		json_array_foreach(res.data, i, v)
			if (json_is_true(json_object_get(v, "verifiedGone")) &&
			    json_is_string(json_object_get(v, "principal")))
				json_array_append(gone, json_object_get(v, "principal"));
		verified_n += json_array_size(gone);
		json_array_append_new(verified, gone);
		if (a->json)
			print_json(res.reply);
		else
			prose_evictions(res.data);
		ctl_result_free(&res);
		/* Recorded before the next is sent. */
		if (a->ledger != NULL && ledger_write(a, e, batches, b + 1, verified) != 0) {
			rc = 1;
			break;
		}
		log_info("%s: batch %zu of %zu: %zu principals, %zu verified gone%s%s", a->verb, b + 1,
		    batches, hi - lo, json_array_size(json_array_get(verified, b)),
		    a->ledger ? "; recorded in " : "", a->ledger ? a->ledger : "");
#ifdef COTAL_TEST_HOOKS
		between_hook(b + 1);
#endif
	}
	if (rc == 0)
		log_ok("%s: %zu principals in %zu batches, %zu verified gone in this run", a->verb,
		    e->n, batches, verified_n);
	json_decref(verified);
	cli_session_close(&s);
	return rc;
}

int
cmd_admin_evict(int argc, char **argv)
{
	struct rail_args a;
	struct evict e = { 0 };
	int rc = 1;

	strmap_init(&e.seen);

	if (parse_rail_args("admin evict", argc, argv, OPT_FROM | OPT_LEDGER, 0, RAIL_POS_MAX,
	    ADMIN_WAIT_MS, &a) != 0)
		return rails_usage();
	for (int i = 0; i < a.npos; i++)
		if (evict_add(&e, &a, a.pos[i], "PRINCIPAL") != 0)
			goto out;
	if (a.from != NULL && evict_read_from(&e, &a) != 0)
		goto out;
	if (e.n == 0) {
		log_errx("%s: no principal to evict (PRINCIPAL... or --from FILE)", a.verb);
		evict_free(&e);
		return rails_usage();
	}
	/* One principal, no ledger: the single-principal verb. */
	if (e.n == 1 && a.ledger == NULL)
		rc = admin_call(&a, "evictPrincipal", json_pack("{s:s}", "principal", e.p[0]),
		    prose_evictions);
	else
		rc = evict_batches(&a, &e);
out:
	evict_free(&e);
	return rc;
}

/*
 * Without PRINCIPAL, the daemon's liveness probe (P.live.delivery.<o>.<a>)
 * as the manager sees it: exit 0 only when bound. With one, the admin
 * rail's principalLiveness.
 */
int
cmd_admin_liveness(int argc, char **argv)
{
	struct rail_args a;
	struct cli_session s;
	char instance[256], why[512];

	if (parse_rail_args("admin liveness", argc, argv, 0, 0, 1, ADMIN_WAIT_MS, &a) != 0)
		return rails_usage();
	if (a.npos == 1) {
		if (!principal_ok(&a, a.pos[0]))
			return 1;
		return admin_call(&a, "principalLiveness", json_pack("{s:s}", "principal",
		    a.pos[0]), prose_principal_liveness);
	}
	if (admin_session(&a, &s) != 0)
		return 1;
	enum liveness l = ctl_liveness(s.client, a.wait_ms < ADMIN_TRY_MS ? a.wait_ms :
	    ADMIN_TRY_MS, instance, sizeof(instance), why, sizeof(why));
	cli_session_close(&s);
	if (a.json) {
		json_t *v = json_pack("{s:s}", "responder", liveness_name(l));
		if (*instance != '\0')
			json_object_set_new(v, "instance", json_string(instance));
		if (*why != '\0')
			json_object_set_new(v, "why", json_string(why));
		print_json(v);
		json_decref(v);
	} else if (*instance != '\0') {
		printf("%s (instance %s)\n", liveness_name(l), instance);
	} else if (*why != '\0') {
		printf("%s (%s)\n", liveness_name(l), why);
	} else {
		printf("%s\n", liveness_name(l));
	}
	return l == LIVE_BOUND ? 0 : 1;
}

int
cmd_admin_reload(int argc, char **argv)
{
	struct rail_args a;

	if (parse_rail_args("admin reload", argc, argv, OPT_EXPECT, 0, 0, ADMIN_WAIT_MS, &a) != 0)
		return rails_usage();
	return admin_call(&a, "reloadCreds", *a.expect == '\0' ? NULL :
	    json_pack("{s:{s:s}}", "expected", "delivery", a.expect), prose_reload);
}
