/*
 * The pure parts of the eviction sweep (lib/wire/connz.h,
 * roster.h, sweep.h): which principal a CONNZ entry belongs to, the checks
 * on CONNZ and KICK replies (network input) and on the server that sent
 * them, which servers a scan must hear from (a cluster answers once per
 * server), EvictionResult as JSON (WIRE.md §5), and what a sweep without a
 * broker reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "worker-registry/sweep.h"

#define U_OWNER "u_abcdefghijklmnopqrstuvwxyz" /* u_ + 26 of [a-z2-7] */
#define UKEY "UDVRW3SNCX2VJ2AN6I7CXXEMNBCOTLQIV34XPC3RL235L4W7CYN6Z63U"
#define ACCT "ABRJNMZNJOC4FGNRMOCTSM7H5QU6LE45CWERQ7YZG5JLEWILIENWYAB4"
#define SID "ND6H255UDDMIT3SUTVLDA2DMLTLDAAKJAMG2FDTMK5W65L2XUQG2QTG7"

static json_t *
parse(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);

	if (v == NULL)
		fail_msg("bad test JSON: %s: %s", e.text, text);
	return v;
}

/* The principal an entry (JSON text) names, or "" for none. */
static const char *
principal_of(const char *entry)
{
	static char out[PRINCIPAL_MAX + 1];
	json_t *e = parse(entry);

	if (connz_entry_principal(e, out, sizeof(out)) != 0)
		out[0] = '\0';
	json_decref(e);
	return out;
}

/* ---- connz_entry_principal -------------------------------------------- */

/* WIRE.md §5: "A connection's principal is its JWT tag principal:<o>.<a>
 * or authorized_user <o>-<a>." */
static void
test_entry_tag(void **state)
{
	(void)state;
	/* As the broker lists an agent this project minted (cli/profiles.c). */
	assert_string_equal(principal_of("{\"cid\":5,\"authorized_user\":\"" UKEY "\","
	    "\"tags\":[\"principal:local." UKEY "\",\"cotal-profile:agent\"]}"),
	    "local." UKEY);
	assert_string_equal(principal_of("{\"cid\":5,\"tags\":[\"cotal-profile:supervisor\","
	    "\"principal:" U_OWNER ".manager\"]}"), U_OWNER ".manager");
	/* Case is kept: actors are case-sensitive identity tokens. */
	assert_string_equal(principal_of("{\"tags\":[\"principal:local.Alice\"]}"),
	    "local.Alice");
}

static void
test_entry_authorized_user(void **state)
{
	(void)state;
	assert_string_equal(principal_of("{\"cid\":1,\"authorized_user\":\"local-alice\"}"),
	    "local.alice");
	assert_string_equal(principal_of("{\"authorized_user\":\"" U_OWNER "-bob_2\"}"),
	    U_OWNER ".bob_2");
	/* The tag wins over the user name. */
	assert_string_equal(principal_of("{\"authorized_user\":\"local-alice\","
	    "\"tags\":[\"principal:local.bob\"]}"), "local.bob");
	/* A tag that names no principal is ignored: the user name decides. */
	assert_string_equal(principal_of("{\"authorized_user\":\"local-alice\","
	    "\"tags\":[\"principal:nobody.bob\",\"principal:local.\",7]}"), "local.alice");
	/* Tags of another type are ignored too. */
	assert_string_equal(principal_of("{\"authorized_user\":\"local-alice\","
	    "\"tags\":\"principal:local.bob\"}"), "local.alice");
}

/* "the daemon's own connections and other non-principal users must never
 * match" (the brief), WIRE.md §1: "Anything else in the owner slot (e.g. a
 * raw U… nkey) parses but is NOT a principal". */
static void
test_entry_not_a_principal(void **state)
{
	(void)state;
	/* The delivery credential: a user nkey, no principal tag. */
	assert_string_equal(principal_of("{\"cid\":3,\"authorized_user\":\"" UKEY "\","
	    "\"tags\":[\"cotal-profile:delivery\"]}"), "");
	/* A provisioner, observer or evictor the same way. */
	assert_string_equal(principal_of("{\"authorized_user\":\"" UKEY "\"}"), "");
	assert_string_equal(principal_of("{\"cid\":3}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"admin\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"nobody-alice\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"local-al-ice\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"local-\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"-alice\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"local-al.ice\"}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"u_ABCDEFGHIJKLMNOPQRSTUVWXYZ-a\"}"),
	    "");
	assert_string_equal(principal_of("{\"authorized_user\":7}"), "");
	assert_string_equal(principal_of("{\"tags\":[\"principal:local.al ice\"]}"), "");
	assert_string_equal(principal_of("{\"tags\":[\"principal:local.al.ice\"]}"), "");
	assert_string_equal(principal_of("{\"tags\":[\"principal:local-alice\"]}"), "");
	assert_string_equal(principal_of("{\"tags\":[\"Principal:local.alice\"]}"), "");
	assert_string_equal(principal_of("{\"tags\":[\"principal:local.al\\u0000ice\"]}"), "");
	assert_string_equal(principal_of("{\"authorized_user\":\"local-al\\u0000ice\"}"), "");
	assert_string_equal(principal_of("[\"principal:local.alice\"]"), "");
	assert_string_equal(principal_of("\"local-alice\""), "");
	assert_int_equal(connz_entry_principal(NULL, (char[8]){ 0 }, 8), -1);
}

static void
test_entry_bounds(void **state)
{
	char small[8], actor[IDENT_MAX + 2], text[512];
	json_t *e;

	(void)state;
	e = parse("{\"tags\":[\"principal:local.alice\"]}");
	assert_int_equal(connz_entry_principal(e, small, sizeof(small)), -1);
	json_decref(e);
	/* An actor of IDENT_MAX chars is one; one more is not. */
	memset(actor, 'a', IDENT_MAX);
	actor[IDENT_MAX] = '\0';
	snprintf(text, sizeof(text), "{\"tags\":[\"principal:local.%s\"]}", actor);
	assert_int_equal(strlen(principal_of(text)), strlen("local.") + IDENT_MAX);
	actor[IDENT_MAX] = 'a';
	actor[IDENT_MAX + 1] = '\0';
	snprintf(text, sizeof(text), "{\"tags\":[\"principal:local.%s\"]}", actor);
	assert_string_equal(principal_of(text), "");
}

static void
test_entry_names(void **state)
{
	json_t *e;

	(void)state;
	e = parse("{\"authorized_user\":\"local-carol\",\"tags\":[\"principal:local.alice\","
	    "\"principal:local.bob\"]}");
	assert_true(connz_entry_names(e, "local.alice"));
	assert_true(connz_entry_names(e, "local.bob"));
	assert_false(connz_entry_names(e, "local.carol")); /* tags decide */
	assert_false(connz_entry_names(e, "local.Alice"));
	json_decref(e);
	/* However many tags come first. */
	json_t *tags = json_array();
	for (int i = 0; i < 20; i++) {
		char tag[64];
		snprintf(tag, sizeof(tag), "principal:local.a%d", i);
		json_array_append_new(tags, json_string(tag));
	}
	e = json_pack("{s:o}", "tags", tags);
	assert_true(connz_entry_names(e, "local.a19"));
	assert_false(connz_entry_names(e, "local.a20"));
	assert_false(connz_entry_names(e, NULL));
	json_decref(e);
	e = parse("{\"authorized_user\":\"local-carol\"}");
	assert_true(connz_entry_names(e, "local.carol"));
	assert_false(connz_entry_names(e, "local-carol"));
	json_decref(e);
}

/* ---- connz_page_parse -------------------------------------------------- */

/* A CONNZ reply as nats-server 2.10.27 sends it (trimmed of fields the
 * sweep does not read, which it ignores). */
#define SERVER "\"server\":{\"name\":\"cotal_dev\",\"host\":\"127.0.0.1\",\"id\":\"" SID "\"," \
	"\"ver\":\"2.10.27\",\"jetstream\":true,\"flags\":3,\"seq\":156,\"time\":\"2026-12-03T06:28:13Z\"}"
#define ENTRY(cid, tag) "{\"cid\":" #cid ",\"kind\":\"Client\",\"type\":\"nats\",\"name\":\"agent\"," \
	"\"lang\":\"C\",\"version\":\"3.4.1\",\"authorized_user\":\"" UKEY "\",\"account\":\"" ACCT "\"," \
	"\"issuer_key\":\"AAX\",\"name_tag\":\"alice\",\"tags\":[\"" tag "\",\"cotal-profile:agent\"]}"

static char *
page_text(const char *data_fields, const char *conns)
{
	char *s = NULL;

	assert_true(asprintf(&s, "{" SERVER ",\"data\":{\"server_id\":\"" SID "\","
	    "\"now\":\"2026-12-03T06:28:13Z\",%s,\"limit\":1024,\"connections\":[%s]}}",
	    data_fields, conns) > 0);
	return s;
}

/* -1 or 0; why filled. */
static int
page(const char *text, long long offset, struct connz_page *p, char *why, size_t whylen)
{
	json_t *r = parse(text);
	int rc = connz_page_parse(r, offset, p, why, whylen);

	json_decref(r);
	return rc;
}

static void
test_page_good(void **state)
{
	struct connz_page p;
	char why[256];
	char *t = page_text("\"num_connections\":2,\"total\":5,\"offset\":0",
	    ENTRY(57, "principal:local.alice") "," ENTRY(58, "principal:local.bob"));
	json_t *r = parse(t);

	(void)state;
	assert_int_equal(connz_page_parse(r, 0, &p, why, sizeof(why)), 0);
	assert_string_equal(p.server_id, SID);
	assert_string_equal(p.version, "2.10.27");
	assert_int_equal(p.total, 5);
	assert_int_equal(p.offset, 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(json_array_size(p.conns), 2);
	json_decref(r);
	free(t);

	/* Past the end: an empty page. */
	t = page_text("\"num_connections\":0,\"total\":3,\"offset\":3", "");
	assert_int_equal(page(t, 3, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 0);
	free(t);
	/* An omitted empty list is an empty page. */
	assert_int_equal(page("{" SERVER ",\"data\":{\"server_id\":\"" SID "\",\"num_connections\":0,"
	    "\"total\":0,\"offset\":0}}", 0, &p, why, sizeof(why)), 0);
	assert_int_equal(p.n, 0);
}

/* "CONNZ replies are network input: a missing/wrongly typed field is an
 * incomplete scan, never a crash" (the brief). */
static void
test_page_refused(void **state)
{
	static const struct {
		const char *data;   /* data fields */
		const char *conns;
		long long offset;
		const char *why;
	} bad[] = {
		{ "\"num_connections\":1,\"total\":\"1\",\"offset\":0", ENTRY(1, "x"), 0, "data.total" },
		{ "\"num_connections\":1,\"total\":1.0,\"offset\":0", ENTRY(1, "x"), 0, "data.total" },
		{ "\"num_connections\":1,\"total\":-1,\"offset\":0", ENTRY(1, "x"), 0, "data.total" },
		{ "\"num_connections\":1,\"offset\":0", ENTRY(1, "x"), 0, "data.total" },
		{ "\"num_connections\":1,\"total\":1", ENTRY(1, "x"), 0, "data.offset" },
		{ "\"total\":1,\"offset\":0", ENTRY(1, "x"), 0, "num_connections" },
		{ "\"num_connections\":2,\"total\":2,\"offset\":0", ENTRY(1, "x"), 0, "but 1" },
		{ "\"num_connections\":1,\"total\":9,\"offset\":4", ENTRY(1, "x"), 3, "asked for" },
		{ "\"num_connections\":2,\"total\":2,\"offset\":0", ENTRY(2, "x") "," ENTRY(1, "x"), 0,
		  "not sorted" },
		{ "\"num_connections\":2,\"total\":2,\"offset\":0", ENTRY(2, "x") "," ENTRY(2, "x"), 0,
		  "not sorted" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "7", 0, "not an object" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"name\":\"x\"}", 0, ".cid" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":\"3\"}", 0, ".cid" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":3.5}", 0, ".cid" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":-3}", 0, ".cid" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":3,\"tags\":\"principal:local.a\"}",
		  0, ".tags" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":3,\"tags\":[\"a\",null]}", 0,
		  ".tags[1]" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":3,\"authorized_user\":[]}", 0,
		  "authorized_user" },
		{ "\"num_connections\":1,\"total\":1,\"offset\":0", "{\"cid\":3,\"account\":1}", 0,
		  "account" },
	};
	struct connz_page p;
	char why[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = page_text(bad[i].data, bad[i].conns);
		why[0] = '\0';
		if (page(t, bad[i].offset, &p, why, sizeof(why)) != -1)
			fail_msg("case %zu accepted: %s", i, t);
		if (strstr(why, bad[i].why) == NULL)
			fail_msg("case %zu: why \"%s\" lacks \"%s\"", i, why, bad[i].why);
		free(t);
	}
}

static void
test_page_shapes(void **state)
{
	struct connz_page p;
	char why[256];

	(void)state;
	/* The broker's refusal, as 2.10 words one. */
	assert_int_equal(page("{" SERVER ",\"error\":{\"code\":403,\"description\":\"bad request\"}}",
	    0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "refused CONNZ: 403 bad request"));
	assert_int_equal(page("{" SERVER ",\"error\":\"x\"}", 0, &p, why, sizeof(why)), -1);
	assert_int_equal(page("{\"error\":{}}", 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "(no description)"));
	assert_int_equal(page("[]", 0, &p, why, sizeof(why)), -1);
	assert_int_equal(page("{\"data\":{}}", 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "server"));
	assert_int_equal(page("{" SERVER "}", 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "data"));
	assert_int_equal(page("{" SERVER ",\"data\":[]}", 0, &p, why, sizeof(why)), -1);
	/* A server id that could not be a subject token. */
	assert_int_equal(page("{" SERVER ",\"data\":{\"server_id\":\"N.*\",\"num_connections\":0,"
	    "\"total\":0,\"offset\":0,\"connections\":[]}}", 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "server_id"));
	assert_int_equal(page("{" SERVER ",\"data\":{\"server_id\":7,\"num_connections\":0,"
	    "\"total\":0,\"offset\":0,\"connections\":[]}}", 0, &p, why, sizeof(why)), -1);
	assert_int_equal(page("{" SERVER ",\"data\":{\"server_id\":\"" SID "\",\"num_connections\":0,"
	    "\"total\":0,\"offset\":0,\"connections\":{}}}", 0, &p, why, sizeof(why)), -1);
	/* A server of a cluster: its reply covers that server's connections,
	 * and says it is clustered (issue 15: every server is read). */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID "\",\"cluster\":\"c1\"},\"data\":{"
	    "\"server_id\":\"" SID "\",\"num_connections\":0,\"total\":0,\"offset\":0,"
	    "\"connections\":[]}}", 0, &p, why, sizeof(why)), 0);
	assert_true(p.clustered);
	assert_int_equal(page("{\"server\":{\"id\":\"" SID "\",\"cluster\":7},\"data\":{"
	    "\"server_id\":\"" SID "\",\"num_connections\":0,\"total\":0,\"offset\":0}}", 0, &p, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "server.cluster"));
	/* A version that is not a string is no version. */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID "\",\"ver\":2.1},\"data\":{"
	    "\"server_id\":\"" SID "\",\"num_connections\":0,\"total\":0,\"offset\":0}}", 0, &p, why,
	    sizeof(why)), 0);
	assert_string_equal(p.version, "");
	/* An empty cluster name is no cluster. */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID "\",\"cluster\":\"\"},\"data\":{"
	    "\"server_id\":\"" SID "\",\"num_connections\":0,\"total\":0,\"offset\":0}}", 0, &p, why,
	    sizeof(why)), 0);
	assert_false(p.clustered);
	assert_int_equal(connz_page_parse(NULL, 0, &p, why, sizeof(why)), -1);
}

static void
test_page_too_many(void **state)
{
	size_t cap = (SWEEP_PAGE + 1) * 16 + 256, used = 0;
	char *conns = malloc(cap), *t;
	struct connz_page p;
	char why[256], fields[128];

	(void)state;
	assert_non_null(conns);
	for (int i = 0; i <= SWEEP_PAGE; i++)
		used += (size_t)snprintf(conns + used, cap - used, "%s{\"cid\":%d}", i ? "," : "", i);
	snprintf(fields, sizeof(fields), "\"num_connections\":%d,\"total\":%d,\"offset\":0",
	    SWEEP_PAGE + 1, SWEEP_PAGE + 1);
	t = page_text(fields, conns);
	assert_int_equal(page(t, 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "at most"));
	free(t);
	free(conns);
}

/* ---- the server of a page (issue 15: every server of a cluster) -------- */

#define SID2 "NB2LQPEWIRPT7TJ4TMGZRGSS2JE3GVFSJJ3WLBHPODTRI5YMCNT6KOLQ"
#define EMPTY_DATA(id) "\"data\":{\"server_id\":\"" id "\",\"num_connections\":0,\"total\":0," \
	"\"offset\":0}"

static void
test_page_server_envelope(void **state)
{
	struct connz_page p;
	char why[256], text[512], name[SWEEP_SERVER_NAME_MAX + 2];

	(void)state;
	/* As a node of a 2.10 cluster answers: name, id, cluster. */
	assert_int_equal(page("{\"server\":{\"name\":\"n2\",\"id\":\"" SID "\",\"cluster\":\"c\","
	    "\"ver\":\"2.10.27\"}," EMPTY_DATA(SID) "}", 0, &p, why, sizeof(why)), 0);
	assert_string_equal(p.server_id, SID);
	assert_string_equal(p.server_name, "n2");
	assert_true(p.clustered);
	/* No name: "" (the sweep then pages that server unfiltered). */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID "\"}," EMPTY_DATA(SID) "}", 0, &p, why,
	    sizeof(why)), 0);
	assert_string_equal(p.server_name, "");
	/* A name the sweep could not quote or page by. */
	static const char *const bad_names[] = { "7", "\"\"", "\"n\\u0001\"", "\"n\\u0000x\"",
		"\"a\\nb\"", "[]" };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		snprintf(text, sizeof(text), "{\"server\":{\"id\":\"" SID "\",\"name\":%s},"
		    EMPTY_DATA(SID) "}", bad_names[i]);
		if (page(text, 0, &p, why, sizeof(why)) != -1 || strstr(why, "server.name") == NULL)
			fail_msg("name %s accepted (%s)", bad_names[i], why);
	}
	memset(name, 'n', sizeof(name) - 1);
	name[SWEEP_SERVER_NAME_MAX] = '\0';
	snprintf(text, sizeof(text), "{\"server\":{\"id\":\"" SID "\",\"name\":\"%s\"},"
	    EMPTY_DATA(SID) "}", name);
	assert_int_equal(page(text, 0, &p, why, sizeof(why)), 0);
	name[SWEEP_SERVER_NAME_MAX] = 'n';
	name[SWEEP_SERVER_NAME_MAX + 1] = '\0';
	snprintf(text, sizeof(text), "{\"server\":{\"id\":\"" SID "\",\"name\":\"%s\"},"
	    EMPTY_DATA(SID) "}", name);
	assert_int_equal(page(text, 0, &p, why, sizeof(why)), -1);
	/* The envelope's id: present, a server id, and the data's. */
	assert_int_equal(page("{\"server\":{\"name\":\"n1\"}," EMPTY_DATA(SID) "}", 0, &p, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "server.id"));
	assert_int_equal(page("{\"server\":{\"id\":\"N.>\"}," EMPTY_DATA(SID) "}", 0, &p, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "server.id"));
	assert_int_equal(page("{\"server\":{\"id\":\"" SID2 "\"}," EMPTY_DATA(SID) "}", 0, &p, why,
	    sizeof(why)), -1);
	assert_non_null(strstr(why, "not the answering server's"));
	/* A server that does not know the account: an empty page, no id. */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID2 "\"},\"data\":{\"num_connections\":0,"
	    "\"total\":0,\"offset\":0}}", 0, &p, why, sizeof(why)), 0);
	assert_string_equal(p.server_id, SID2);
	assert_int_equal(page("{\"server\":{\"id\":\"" SID2 "\"},\"data\":{\"num_connections\":0,"
	    "\"total\":2,\"offset\":0}}", 0, &p, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "data.server_id"));
	/* A refusal still says which server refused. */
	assert_int_equal(page("{\"server\":{\"id\":\"" SID2 "\",\"name\":\"n3\"},\"error\":{"
	    "\"code\":500,\"description\":\"x\"}}", 0, &p, why, sizeof(why)), -1);
	assert_string_equal(p.server_id, SID2);
	assert_string_equal(p.server_name, "n3");
	assert_non_null(strstr(why, "refused CONNZ: 500 x"));
}

static void
test_helpers(void **state)
{
	(void)state;
	assert_true(connz_version_has_kick("2.10.27"));
	assert_true(connz_version_has_kick("2.11.0-RC.1"));
	assert_true(connz_version_has_kick("2.14.0"));
	assert_true(connz_version_has_kick("3.0.0"));
	assert_false(connz_version_has_kick("2.9.10"));
	assert_false(connz_version_has_kick(""));
	assert_false(connz_version_has_kick("x"));
	assert_false(connz_version_has_kick(NULL));
	assert_true(connz_principal_valid("local.alice"));
	assert_true(connz_principal_valid(U_OWNER ".bob"));
	assert_false(connz_principal_valid("local-alice"));
	assert_false(connz_principal_valid("nobody.alice"));
	assert_false(connz_principal_valid(NULL));
	assert_true(connz_server_id_valid(SID, strlen(SID)));
	assert_false(connz_server_id_valid("N.*", 3));
	assert_false(connz_server_id_valid("", 0));
}

/* ---- the roster: which servers a scan must hear from ------------------- */

static struct connz_page
page_of(const char *id, const char *name, bool clustered)
{
	struct connz_page p;

	memset(&p, 0, sizeof(p));
	snprintf(p.server_id, sizeof(p.server_id), "%s", id);
	snprintf(p.server_name, sizeof(p.server_name), "%s", name);
	snprintf(p.version, sizeof(p.version), "2.10.27");
	p.clustered = clustered;
	return p;
}

/* Issue 15: "verifiedGone only when every server answered". */
static void
test_roster_expected_servers(void **state)
{
	struct roster r;
	struct connz_page a = page_of("NA", "n1", true), b = page_of("NB", "n2", true),
	    c = page_of("NC", "n3", true);
	bool added;

	(void)state;
	roster_init(&r, 0);
	assert_int_equal(r.expect, 1);
	roster_init(&r, 1000);
	assert_int_equal(r.expect, SWEEP_SERVERS_MAX);

	roster_init(&r, 3);
	assert_int_equal(roster_waiting(&r), ROSTER_WAIT);
	assert_int_equal(roster_add(&r, &a, &added), 0);
	assert_true(added);
	assert_int_equal(roster_add(&r, &a, &added), 0); /* the same server twice */
	assert_false(added);
	assert_int_equal(roster_add(&r, &b, &added), 1);
	assert_int_equal(roster_waiting(&r), ROSTER_WAIT);
	assert_false(roster_complete(&r));
	r.s[0].complete = r.s[1].complete = true;
	assert_false(roster_complete(&r)); /* the third has not answered */
	assert_int_equal(roster_add(&r, &c, &added), 2);
	/* All three: a clustered server's peers may not all be listed. */
	assert_int_equal(roster_waiting(&r), ROSTER_GRACE);
	assert_false(roster_complete(&r));
	r.s[2].complete = true;
	assert_true(roster_complete(&r));
	assert_int_equal(roster_find(&r, "NB"), 1);
	assert_int_equal(roster_find(&r, "NX"), -1);
	assert_string_equal(r.s[2].name, "n3");
	assert_string_equal(r.s[2].version, "2.10.27");

	/* One server not clustered: nobody else will answer. */
	struct connz_page solo = page_of("NS", "solo", false);
	roster_init(&r, 1);
	roster_add(&r, &solo, &added);
	assert_int_equal(roster_waiting(&r), ROSTER_DONE);
	/* More servers than were given are read too: each must be complete. */
	roster_init(&r, 1);
	roster_add(&r, &a, &added);
	roster_add(&r, &b, &added);
	r.s[0].complete = true;
	assert_false(roster_complete(&r));
	r.s[1].complete = true;
	assert_true(roster_complete(&r));
}

static void
test_roster_bounds(void **state)
{
	struct roster r;
	char note[SWEEP_NOTE_MAX];
	bool added;

	(void)state;
	roster_init(&r, 2);
	for (int i = 0; i < SWEEP_SERVERS_MAX; i++) {
		char id[16];
		snprintf(id, sizeof(id), "N%d", i);
		struct connz_page p = page_of(id, id, true);
		assert_int_equal(roster_add(&r, &p, &added), i);
		r.s[i].complete = true;
	}
	assert_true(roster_complete(&r));
	struct connz_page more = page_of("NMORE", "more", true);
	assert_int_equal(roster_add(&r, &more, &added), -1);
	assert_false(added);
	assert_int_equal(r.overflow, 1);
	/* A server that could not be listed was not read: never complete. */
	assert_false(roster_complete(&r));
	assert_int_equal(roster_waiting(&r), ROSTER_DONE);
	roster_missing(&r, NULL, note, sizeof(note));
	assert_string_equal(note, "more than 16 servers answered CONNZ");
}

/* The brief: "name which servers did not answer". */
static void
test_roster_names_the_missing(void **state)
{
	struct roster_seen seen = { .n = 0 };
	struct roster r;
	struct connz_page a = page_of("NA", "n1", true), b = page_of("NB", "n2", true),
	    c = page_of("NC", "n3", true), c2 = page_of("NC2", "n3", true);
	char note[SWEEP_NOTE_MAX];
	bool added;

	(void)state;
	/* Nothing heard before: a count. */
	roster_init(&r, 3);
	roster_add(&r, &a, &added);
	roster_missing(&r, &seen, note, sizeof(note));
	assert_string_equal(note, "2 of the 3 expected servers did not answer CONNZ");
	roster_remember(&r, &seen);
	assert_int_equal(seen.n, 1);
	/* All three answer once: all remembered, nothing missing. */
	roster_init(&r, 3);
	roster_add(&r, &a, &added);
	roster_add(&r, &b, &added);
	roster_add(&r, &c, &added);
	roster_missing(&r, &seen, note, sizeof(note));
	assert_string_equal(note, "");
	roster_remember(&r, &seen);
	assert_int_equal(seen.n, 3);
	/* Then n2 and n3 are silent: named. */
	roster_init(&r, 3);
	roster_add(&r, &a, &added);
	roster_missing(&r, &seen, note, sizeof(note));
	assert_string_equal(note, "servers n2, n3 did not answer CONNZ (1 of the 3 expected "
	    "answered)");
	/* n3 restarted (a new id, the same name): it answered. */
	roster_add(&r, &c2, &added);
	roster_missing(&r, &seen, note, sizeof(note));
	assert_string_equal(note, "server n2 did not answer CONNZ (2 of the 3 expected answered)");
	roster_remember(&r, &seen);
	assert_int_equal(seen.n, 3); /* names, not ids */
	/* A full memory forgets the oldest name. */
	for (int i = 0; i < SWEEP_SERVERS_MAX; i++) {
		char id[16];
		snprintf(id, sizeof(id), "X%d", i);
		struct connz_page p = page_of(id, id, true);
		roster_init(&r, 1);
		roster_add(&r, &p, &added);
		roster_remember(&r, &seen);
	}
	assert_int_equal(seen.n, SWEEP_SERVERS_MAX);
	assert_string_equal(seen.name[0], "X0");
	assert_string_equal(seen.name[SWEEP_SERVERS_MAX - 1], "X15");
	/* Unnamed servers are not remembered. */
	struct connz_page anon = page_of("NANON", "", false);
	roster_init(&r, 1);
	roster_add(&r, &anon, &added);
	roster_remember(&r, &seen);
	assert_string_equal(seen.name[0], "X0");
	roster_remember(&r, NULL);
}

/* ---- kick_reply_parse -------------------------------------------------- */

static void
test_kick_reply(void **state)
{
	char why[256];
	/* What nats-server 2.10.27 answers. */
	const char *ok = "{" SERVER "}";
	const char *gone = "{" SERVER ",\"error\":{\"code\":500,\"description\":\"no such client "
	    "or leafnode id\"}}";

	(void)state;
	assert_int_equal(kick_reply_parse(ok, strlen(ok), why, sizeof(why)), 1);
	assert_int_equal(kick_reply_parse(gone, strlen(gone), why, sizeof(why)), 0);
	assert_string_equal(why, "500 no such client or leafnode id");
	assert_int_equal(kick_reply_parse("{\"server\":{},\"data\":{}}", 23, why, sizeof(why)), 1);
	assert_int_equal(kick_reply_parse("{}", 2, why, sizeof(why)), -1);
	assert_int_equal(kick_reply_parse("[]", 2, why, sizeof(why)), -1);
	assert_int_equal(kick_reply_parse("nope", 4, why, sizeof(why)), -1);
	assert_int_equal(kick_reply_parse("{\"error\":3}", 11, why, sizeof(why)), -1);
	assert_int_equal(kick_reply_parse("", 0, why, sizeof(why)), -1);
	assert_int_equal(kick_reply_parse(NULL, 0, why, sizeof(why)), -1);
	/* Only len bytes count. */
	assert_int_equal(kick_reply_parse(ok, 5, why, sizeof(why)), -1);
}

/* ---- EvictionResult ---------------------------------------------------- */

/* WIRE.md §5: "EvictionResult = {principal, kicked, remaining,
 * verifiedGone, scanComplete, note?}". */
static void
test_result_json(void **state)
{
	struct eviction_result r = { .principal = "local.alice", .kicked = 2, .remaining = 0,
		.verified_gone = true, .scan_complete = true };
	json_t *j;
	char *s;

	(void)state;
	j = eviction_result_json(&r);
	assert_non_null(j);
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"kicked\":2,\"principal\":\"local.alice\",\"remaining\":0,"
	    "\"scanComplete\":true,\"verifiedGone\":true}");
	free(s);
	json_decref(j);

	r.kicked = 0;
	r.remaining = 1;
	r.verified_gone = false;
	r.scan_complete = false;
	snprintf(r.note, sizeof(r.note), "scan incomplete: \"quoted\"");
	j = eviction_result_json(&r);
	assert_non_null(j);
	assert_true(json_is_integer(json_object_get(j, "kicked")));
	assert_true(json_is_false(json_object_get(j, "verifiedGone")));
	assert_true(json_is_false(json_object_get(j, "scanComplete")));
	assert_int_equal(json_integer_value(json_object_get(j, "remaining")), 1);
	assert_string_equal(json_string_value(json_object_get(j, "note")), r.note);
	assert_int_equal(json_object_size(j), 6);
	json_decref(j);
}

static void
test_state_names(void **state)
{
	(void)state;
	assert_string_equal(principal_state_name(PRINCIPAL_LIVE), "live");
	assert_string_equal(principal_state_name(PRINCIPAL_GONE), "gone");
	assert_string_equal(principal_state_name(PRINCIPAL_UNKNOWN), "unknown");
	assert_string_equal(principal_state_name((enum principal_state)42), "unknown");
}

/* ---- a sweep with no broker -------------------------------------------- */

/* WIRE.md §5: "An incomplete scan never reports verifiedGone." */
static void
test_sweep_without_observer(void **state)
{
	struct sweeper s = { .observer = NULL, .kick = NULL, .account = ACCT };
	const char *ps[] = { "local.alice", "nobody.bob", "local.alice", "local.carol" };
	struct eviction_result out[4];
	char note[SWEEP_NOTE_MAX];
	bool complete = true;

	(void)state;
	sweep_evict(&s, ps, 4, out);
	assert_int_equal(s.connz_requests, 0);
	assert_int_equal(s.kick_requests, 0);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(out[i].principal, ps[i]);
		assert_false(out[i].verified_gone);
		assert_false(out[i].scan_complete);
		assert_int_equal(out[i].kicked, 0);
		assert_true(out[i].note[0] != '\0');
	}
	assert_non_null(strstr(out[0].note, "eviction is unavailable: no $SYS evictor credential "
	    "is provisioned"));
	assert_non_null(strstr(out[0].note, "scan incomplete: no $SYS observer connection"));
	assert_non_null(strstr(out[1].note, "not a principal"));
	assert_string_equal(out[2].note, out[0].note);

	assert_int_equal(sweep_liveness(&s, "local.alice", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_false(complete);
	assert_non_null(strstr(note, "scan incomplete"));
	assert_int_equal(sweep_liveness(&s, "local-alice", &complete, note, sizeof(note)),
	    PRINCIPAL_UNKNOWN);
	assert_non_null(strstr(note, "not a principal"));
}

static void
test_sweep_too_many(void **state)
{
	struct sweeper s = { .account = ACCT };
	int n = SWEEP_PRINCIPALS_MAX + 2;
	const char **ps = calloc((size_t)n, sizeof(*ps));
	struct eviction_result *out = calloc((size_t)n, sizeof(*out));

	(void)state;
	assert_non_null(ps);
	assert_non_null(out);
	for (int i = 0; i < n; i++)
		ps[i] = "local.alice";
	sweep_evict(&s, ps, n, out);
	assert_non_null(strstr(out[SWEEP_PRINCIPALS_MAX].note, "more than 256 principals"));
	assert_non_null(strstr(out[n - 1].note, "more than 256 principals"));
	assert_null(strstr(out[SWEEP_PRINCIPALS_MAX - 1].note, "more than"));
	assert_non_null(strstr(out[0].note, "scan incomplete"));
	assert_false(out[n - 1].verified_gone);
	sweep_evict(&s, ps, 0, out); /* nothing */
	free(ps);
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entry_tag),
		cmocka_unit_test(test_entry_authorized_user),
		cmocka_unit_test(test_entry_not_a_principal),
		cmocka_unit_test(test_entry_bounds),
		cmocka_unit_test(test_entry_names),
		cmocka_unit_test(test_page_good),
		cmocka_unit_test(test_page_refused),
		cmocka_unit_test(test_page_shapes),
		cmocka_unit_test(test_page_too_many),
		cmocka_unit_test(test_page_server_envelope),
		cmocka_unit_test(test_helpers),
		cmocka_unit_test(test_roster_expected_servers),
		cmocka_unit_test(test_roster_bounds),
		cmocka_unit_test(test_roster_names_the_missing),
		cmocka_unit_test(test_kick_reply),
		cmocka_unit_test(test_result_json),
		cmocka_unit_test(test_state_names),
		cmocka_unit_test(test_sweep_without_observer),
		cmocka_unit_test(test_sweep_too_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
