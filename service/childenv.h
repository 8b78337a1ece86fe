/*
 * The environment a confined child of this binary gets at exec (a
 * supervisor's workers, the metrics server of a supervisor or a host):
 * only the sanitizers' options and the test hooks it reads; nothing secret
 * lives in them. Built once before any fork: the supervisor runs nats.c
 * threads, and a child of a threaded process may call nothing but
 * async-signal-safe functions before it execs.
 */
#ifndef COTAL_SERVICE_CHILDENV_H
#define COTAL_SERVICE_CHILDENV_H

/* Build it (once; again only after child_env_free). */
void child_env_build(void);
/* It, built first if it is not yet: NULL-terminated "NAME=value" strings.
 * Once built, no allocation: what a forked child may call before exec. */
char *const *child_env(void);
/* Free it. */
void child_env_free(void);

#endif
