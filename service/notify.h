/*
 * systemd's notification protocol (sd_notify(3)), without libsystemd: one
 * AF_UNIX datagram of "KEY=value" lines per state change, sent to the socket
 * $NOTIFY_SOCKET names, and watchdog pings every half of $WATCHDOG_USEC.
 *
 * Outside systemd (no NOTIFY_SOCKET) every call is a no-op.
 */
#ifndef COTAL_NOTIFY_H
#define COTAL_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* The longest state text sent; a longer one is not sent at all. */
#define NOTIFY_STATE_MAX 4096

/*
 * Read NOTIFY_SOCKET (an absolute path, or "@name" for an abstract socket;
 * anything else, or a name too long for sun_path, is refused with a warning)
 * and WATCHDOG_USEC (decimal microseconds > 0; ignored when WATCHDOG_PID is
 * set and is not this process). All three variables are removed from the
 * environment, valid or not, so no child ever sees them. Call once, early,
 * before any child is started; calling again starts over.
 */
void notify_init(void);

/*
 * Send one state, e.g. "READY=1\nSTATUS=serving space demo", "STOPPING=1",
 * "STATUS=…", "WATCHDOG=1". 0 sent, 1 not under systemd (nothing to do),
 * -1 not sent (a failure is logged once until a send succeeds again).
 * Blocks at most one second when the receiver's queue is full.
 */
int notify_send(const char *state);
/* Under systemd: NOTIFY_SOCKET was set and valid. */
bool notify_active(void);
int notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Milliseconds between WATCHDOG=1 pings: half of WATCHDOG_USEC (at least
 * 1), 0 when the watchdog is off (unset, invalid, another pid's, or no
 * NOTIFY_SOCKET to ping). */
int64_t notify_watchdog_interval_ms(void);

#endif
