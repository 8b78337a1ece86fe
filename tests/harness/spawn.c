/*
 * Children of a test: the cotal CLI, and any program, run with a mesh's
 * environment (its COTAL_HOME, its nats-server), to their end with their
 * output captured, or in the background logging to a file.
 */
#include "tests/harness/harness_int.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef COTAL_CLI_PATH
#error "COTAL_CLI_PATH must name the cotal binary"
#endif

#define ENV_MAX 512

/*
 * The environment of a child, built before fork: a threaded process (nats.c
 * runs threads here) may only call async-signal-safe functions between fork
 * and exec, and setenv is not one. The caller frees with h_env_free.
 */
static char **
env_for(struct mesh *m)
{
	extern char **environ;
	char **env = calloc(ENV_MAX + 3, sizeof(*env));
	size_t n = 0;

	for (char **e = environ; *e != NULL && n < ENV_MAX; e++)
		if (strncmp(*e, "COTAL_HOME=", 11) != 0 && strncmp(*e, "COTAL_NATS_SERVER=", 18) != 0)
			env[n++] = strdup(*e);
	if (asprintf(&env[n++], "COTAL_HOME=%s", m->home) < 0 ||
	    asprintf(&env[n++], "COTAL_NATS_SERVER=%s", m->nats_bin) < 0)
		abort();
	env[n] = NULL;
	return env;
}

void
h_env_free(char **env)
{
	for (char **e = env; *e != NULL; e++)
		free(*e);
	free(env);
}

/*
 * Start argv in the background with the mesh's environment, stdout and
 * stderr appended to logpath. The child dies with the test, however the
 * test dies, and inherits none of the test's own broker connections.
 */
pid_t
hi_spawn_logged(struct mesh *m, char *const argv[], const char *logpath)
{
	return hi_spawn_in(m, argv, logpath, NULL);
}

pid_t
hi_spawn_in(struct mesh *m, char *const argv[], const char *logpath, const char *netns)
{
	char **env = env_for(m);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	char nspath[128] = "";
	pid_t pid;

	if (netns != NULL && *netns != '\0')
		snprintf(nspath, sizeof(nspath), "/var/run/netns/%s", netns);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nspath[0] != '\0') {
			/* Into the test host's network namespace (netns.c); a
			 * child that cannot get there never runs in the
			 * test's own. */
			int nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
			if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
				dprintf(2, "harness: cannot enter network namespace %s: %s\n",
				    netns, strerror(errno));
				_exit(126);
			}
			close(nsfd);
		}
		closefrom(3);
		execve(argv[0], argv, env);
		_exit(127);
	}
	h_env_free(env);
	if (fd >= 0)
		close(fd);
	return pid;
}

size_t
h_read_to_end(int fd, char *out, size_t outlen)
{
	size_t got = 0;

	for (;;) {
		char tmp[4096];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (out != NULL && got + 1 < outlen) {
			size_t n = (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
			memcpy(out + got, tmp, n);
			got += n;
		}
	}
	if (out != NULL && outlen > 0)
		out[got] = '\0';
	return got;
}

/* Run argv with the mesh's environment; capture output. */
int
hi_run_capture(struct mesh *m, char *const argv[], char *out, size_t outlen)
{
	int pipefd[2];
	pid_t pid;
	int status;

	char **env = env_for(m);

	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		h_env_free(env);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		h_env_free(env);
		return -1;
	}
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		/* Not the test's own broker connections. */
		closefrom(3);
		execve(argv[0], argv, env);
		_exit(127);
	}
	h_env_free(env);
	close(pipefd[1]);
	h_read_to_end(pipefd[0], out, outlen);
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (getenv("COTAL_TEST_VERBOSE") != NULL && out != NULL)
		fprintf(stderr, "$ %s %s %s\n%s", argv[0], argv[1] ? argv[1] : "",
		    argv[1] && argv[2] ? argv[2] : "", out);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The CLI's argv: args (NULL-ended) then "--root <dir>" (every cotal
 * command takes it anywhere). */
static void
cotal_argv(struct mesh *m, char **argv, size_t max, va_list ap)
{
	size_t n = 0;
	char *a;

	argv[n++] = (char *)COTAL_CLI_PATH;
	while ((a = va_arg(ap, char *)) != NULL && n + 3 < max)
		argv[n++] = a;
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	argv[n] = NULL;
}

int
h_cotal(struct mesh *m, char *out, size_t outlen, ...)
{
	char *argv[64];
	va_list ap;

	va_start(ap, outlen);
	cotal_argv(m, argv, 64, ap);
	va_end(ap);
	return hi_run_capture(m, argv, out, outlen);
}

int
h_cotal_argv(struct mesh *m, char *out, size_t outlen, char *const args[])
{
	char *argv[128];
	size_t n = 0;

	argv[n++] = (char *)COTAL_CLI_PATH;
	for (size_t i = 0; args[i] != NULL && n + 3 < 128; i++)
		argv[n++] = args[i];
	argv[n++] = (char *)"--root";
	argv[n++] = m->dir;
	argv[n] = NULL;
	return hi_run_capture(m, argv, out, outlen);
}

pid_t
h_cotal_spawn(struct mesh *m, const char *outpath, ...)
{
	char *argv[64];
	va_list ap;

	va_start(ap, outpath);
	cotal_argv(m, argv, 64, ap);
	va_end(ap);
	return hi_spawn_logged(m, argv, outpath);
}
