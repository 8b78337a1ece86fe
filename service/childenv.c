/* The environment of a confined child: see childenv.h. */
#include "service/childenv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

/* Only these variables reach a confined child: nothing secret lives in them. */
static const char *const env_pass[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
	"COTAL_DEBUG",
#ifdef COTAL_TEST_HOOKS
	"COTAL_TEST_JOIN_DELAY", "COTAL_TEST_ACTIVATE_DELAY", /* worker-registry/membership.c */
	"COTAL_TEST_SWEEP_DELAY", /* worker-registry/admin.c */
	"COTAL_TEST_SIGN_FLOOD", /* worker/worker.c */
	"COTAL_TEST_RELOAD_FLOOD", /* worker-registry/registry.c */
	"COTAL_TEST_KICK", /* worker-registry/admin.c */
	"COTAL_TEST_LOG_WINDOW_MS", /* lib/log.c */
	"COTAL_TEST_LOG_FLOOD", /* worker/worker.c */
	"COTAL_TEST_STAGE_MAX", /* lib/nats/kvmirror.c */
#endif
};

static char *env[sizeof(env_pass) / sizeof(env_pass[0]) + 1];
static bool env_built;

void
child_env_build(void)
{
	size_t n = 0;

	if (env_built)
		return;
	env_built = true;

	for (size_t i = 0; i < sizeof(env_pass) / sizeof(env_pass[0]); i++) {
		const char *v = getenv(env_pass[i]);
		if (v == NULL)
			continue;
		size_t len = strlen(env_pass[i]) + strlen(v) + 2;
		if ((env[n] = malloc(len)) == NULL)
			fatalx("out of memory");
		snprintf(env[n++], len, "%s=%s", env_pass[i], v);
	}
	env[n] = NULL;
}

char *const *
child_env(void)
{
	child_env_build();
	return env;
}

void
child_env_free(void)
{
	for (char **e = env; *e != NULL; e++)
		free(*e);
	env[0] = NULL;
	env_built = false;
}
