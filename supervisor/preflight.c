/*
 * The grant preflight: before it binds, the supervisor asks the verdict
 * (lib/creds/verdict.c, which `cotal creds audit` asks too) of each
 * credential it holds: an expired one, and a grant a required feature of
 * the one table (lib/creds/needs.h) lacks, refuse the start, naming every
 * missing subject and the features that need it; an optional feature
 * without its grants is turned off with a `!` line.
 */
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/clock.h"
#include "lib/creds/verdict.h"
#include "lib/nats/kvwatch.h"
#include "supervisor/supervisor.h"

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

/* A verdict's line, in the log: a refusal does not bind. */
static void
say(void *arg, enum verdict_kind kind, const char *text)
{
	int *refused = arg;

	if (kind == VERDICT_REFUSAL) {
		log_errx("delivery: %s; not binding", text);
		(*refused)++;
	} else if (kind == VERDICT_OFF)
		log_warnx("delivery: %s", text);
	else
		log_info("delivery: %s", text);
}

int
preflight(struct sup *s)
{
	unsigned off = 0;
	int refused = 0;

	for (int c = NEED_DELIVERY; c <= NEED_SYS_EVICTOR; c++) {
		const struct sup_creds *sc = cred_of(s, (enum need_cred)c);
		unsigned o = 0;

		if (sc == NULL)
			continue;
		struct verdict_in in = { .cred = (enum need_cred)c, .path = sc->path,
			.jwt = sc->c.jwt, .token = s->token, .account = s->creds.account,
			.now = wall_ms() / 1000 };
		cred_verdict(&in, say, &refused, &o);
		off |= o;
	}
	if (refused > 0)
		return -1;
	if (off & VERDICT_OFF_EVICTOR) {
		sup_creds_free(&s->sys[IPC_SYS_EVICTOR]);
		s->have_sys[IPC_SYS_EVICTOR] = false;
	}
	s->register_off = (off & VERDICT_OFF_REGISTER) != 0;
	s->reader_memory_off = (off & VERDICT_OFF_READER_MEMORY) != 0;
	s->watch_fc_off = (off & VERDICT_OFF_WATCH_FC) != 0;
	kvwatch_flow_control(!s->watch_fc_off); /* the lease's watch */
	return 0;
}
