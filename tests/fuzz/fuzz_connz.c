/*
 * Fuzz target: what the broker answers the eviction sweep
 * (lib/wire/connz.c) and the bookkeeping of the servers that
 * answer (roster.c).
 *
 * The input's first byte picks the offset the page is checked against
 * (0, 1023 or 2046: a first page and later ones); the rest is a reply as
 * it would come off the wire. It goes to connz_page_parse, to
 * kick_reply_parse, and, when it parses as JSON, every connection entry
 * (of a page that checks, or the value itself) to connz_entry_principal
 * and connz_entry_names, which must agree. A page that checks must keep
 * the promises the sweep relies on, and enters a roster.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/connz.h"
#include "worker-registry/roster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise ends the run (whatever NDEBUG says). */
#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static void
check_entry(const json_t *e)
{
	char p[PRINCIPAL_MAX + 1];

	if (connz_entry_principal(e, p, sizeof(p)) == 0) {
		CHECK(connz_principal_valid(p));
		CHECK(connz_entry_names(e, p));
	}
	CHECK(!connz_entry_names(e, NULL));
}

static void
check_page(const struct connz_page *pg, long long offset)
{
	static struct roster_seen seen;
	struct roster r;
	char note[256];
	long long prev = -1;
	bool added;
	size_t i;
	const json_t *e;

	CHECK(connz_server_id_valid(pg->server_id, strlen(pg->server_id)));
	CHECK(strlen(pg->server_name) <= SWEEP_SERVER_NAME_MAX);
	CHECK(pg->offset == offset && pg->total >= 0 && pg->n <= SWEEP_PAGE);
	CHECK(pg->n == 0 || json_array_size(pg->conns) == pg->n);
	json_array_foreach(pg->conns, i, e) {
		long long cid = (long long)json_integer_value(json_object_get(e, "cid"));
		CHECK(json_is_object(e) && cid > prev);
		prev = cid;
		check_entry(e);
	}
	roster_init(&r, 2);
	CHECK(roster_add(&r, pg, &added) == 0 && added);
	CHECK(roster_add(&r, pg, &added) == 0 && !added);
	CHECK(!roster_complete(&r));
	roster_missing(&r, &seen, note, sizeof(note));
	CHECK(note[0] != '\0');
	roster_remember(&r, &seen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long long offsets[] = { 0, 1023, 2046 };
	struct connz_page pg;
	char why[256];
	json_t *r;
	long long offset;

	if (size == 0)
		return 0;
	offset = offsets[data[0] % 3];
	data++;
	size--;
	(void)kick_reply_parse((const char *)data, size, why, sizeof(why));
	r = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (r == NULL)
		return 0;
	if (connz_page_parse(r, offset, &pg, why, sizeof(why)) == 0)
		check_page(&pg, offset);
	else
		CHECK(why[0] != '\0');
	check_entry(r);
	json_decref(r);
	return 0;
}
