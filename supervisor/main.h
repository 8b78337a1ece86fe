/*
 * The supervisor of one space: what the binary's entry (daemon/main.c)
 * hands a command line over to when it names no other role. The process
 * and what it may do: supervisor/main.c.
 */
#ifndef COTAL_SUPERVISOR_MAIN_H
#define COTAL_SUPERVISOR_MAIN_H

/* supervisor_main's answer to a usage error (an unknown or incomplete
 * argument, no --space), having said what was wrong: the entry prints the
 * binary's usage and exits 2. */
#define SUPERVISOR_USAGE (-2)

/* `cotal-deliveryd --space S ...`: the daemon, until it stops. Its exit
 * status, or SUPERVISOR_USAGE. */
int supervisor_main(int argc, char **argv);

#endif
