/*
 * What the operator reads of a nats.c failure (lib/nats/natsconn.c
 * conn_strerror). Issue 43, finding 7: "The broker-down line reads
 * `unreachable at start: connect …: (conn.c:2088): No server available for
 * connection (No server available for connection)`: a source location,
 * said twice". A real connect to a port nothing listens on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <nats/nats.h>

#include "lib/nats/natsconn.h"

static void
test_a_failure_is_said_once_without_a_source_location(void **state)
{
	natsConnection *nc = NULL;
	natsOptions *o = NULL;
	char buf[512];

	(void)state;
	assert_int_equal(natsOptions_Create(&o), NATS_OK);
	/* Port 1 on loopback: refused at once. */
	assert_int_equal(natsOptions_SetURL(o, "nats://127.0.0.1:1"), NATS_OK);
	natsStatus s = natsConnection_Connect(&nc, o);
	natsOptions_Destroy(o);
	assert_int_not_equal(s, NATS_OK);
	conn_strerror(s, buf, sizeof(buf));
	printf("• %s\n", buf);
	assert_null(strstr(buf, ".c:"));
	assert_string_equal(buf, natsStatus_GetText(s));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_failure_is_said_once_without_a_source_location),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	nats_Close();
	return rc;
}
