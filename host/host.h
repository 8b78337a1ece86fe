/*
 * The delivery host: `cotal-deliveryd --spaces MANIFEST [--server URL]
 * [--run-dir DIR] [--user U]` serves every space the manifest names, one
 * lane per space (lib/manifest.h).
 *
 * A lane is that space's daemon: this binary started again (fork + exec)
 * as `--space S --root R [--server U] --lane`, its own supervisor process
 * with its own credential, connections, lease, watchdog, timer writer and
 * workers, so no two lanes' secrets ever share an address space. A lane
 * writes no pid record (the record is what `cotal down` signals for one
 * space); the host writes its own.
 *
 * What the host may do: read the manifest; start, signal and reap its
 * lanes, each in its own process group; relay their stdout and stderr
 * lines, each prefixed with the lane's space; write its pid record and its
 * status file in its run directory; talk to systemd's notify socket.
 * What it never does: read, hold or pass a credential, or open a broker
 * connection.
 *
 * A lane that exits (it lost the broker, its credential or its lease) is
 * reopened alone with backoff (service/restart.h, restart_lane), logged
 * with its space and cause; the other lanes keep serving. SIGTERM or SIGINT
 * stops every lane the seed's way (SIGTERM: each releases its lease;
 * SIGKILL 15 s later) and then the host. SIGHUP re-reads the manifest: a
 * valid one opens the added lanes and closes the removed ones (a changed
 * root or server is both), touching no other; an invalid one is refused,
 * naming its field, and every lane stays as it is.
 */
#ifndef COTAL_HOST_H
#define COTAL_HOST_H

int host_main(int argc, char **argv);

#endif
