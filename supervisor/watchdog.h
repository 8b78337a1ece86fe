/*
 * The broker watchdog (seed: "After a reachability check at start-up, the
 * daemon watches the broker only through its resident connection's
 * events"). Pure: the supervisor feeds it the resident connection's
 * disconnects and reconnects and a tick of its event loop, and asks for a
 * verdict; unit-tested.
 *
 * Issue 15: serving means the delivery workers reach the broker too, so the
 * workers' connections are a second source. The broker counts as gone
 * while either source is down: a daemon whose workers are cut off from
 * every listed server (while the supervisor still reaches one) stops
 * renewing its lease and exits on the same window.
 *
 * A disconnect starts a clock and a reconnect stops it. The daemon exits
 * when the time since the disconnect, less the time its own event loop was
 * stalled meanwhile, reaches the window; and, however long it was stalled,
 * when the wall time since the disconnect reaches the backstop (four times
 * the window by default, never less than the window).
 */
#ifndef COTAL_WATCHDOG_H
#define COTAL_WATCHDOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WATCHDOG_WINDOW_MS 15000     /* COTAL_DELIVERY_BROKER_GONE_MS */
#define WATCHDOG_BACKSTOP_FACTOR 4   /* COTAL_DELIVERY_BROKER_GONE_BACKSTOP_MS default */
#define WATCHDOG_TICK_MS 250         /* the event loop's tick */
#define WATCHDOG_ENV_WINDOW "COTAL_DELIVERY_BROKER_GONE_MS"
#define WATCHDOG_ENV_BACKSTOP "COTAL_DELIVERY_BROKER_GONE_BACKSTOP_MS"

/* The seed's exact lines. */
#define WATCHDOG_LINE_GONE "✗ delivery: broker connection unavailable (broker unreachable), " \
	"exiting (coupled to the broker)"
#define WATCHDOG_LINE_BACKSTOP "✗ delivery: broker connection unavailable past backstop " \
	"(broker unreachable), exiting (coupled to the broker)"

enum watchdog_source {
	WATCHDOG_RESIDENT = 1, /* the supervisor's resident connection */
	WATCHDOG_WORKERS = 2,  /* a worker's connection */
};

struct watchdog {
	int64_t window_ms, backstop_ms;
	bool down;            /* any source down */
	unsigned sources;     /* enum watchdog_source bits that are down */
	int64_t down_at;      /* monotonic ms of the disconnect */
	int64_t down_wall;    /* wall ms of the disconnect (the backstop's clock) */
	int64_t stalled_ms;   /* event-loop stall since the disconnect */
	int64_t last_tick;    /* monotonic ms of the last tick, 0 before the first */
};

enum watchdog_verdict { WATCHDOG_OK = 0, WATCHDOG_GONE, WATCHDOG_BACKSTOP };

/*
 * The window and backstop from the environment (either may be unset):
 * whole milliseconds, window >= 1; a backstop below the window is raised
 * to it. 0, or -1 with err naming the variable.
 */
int watchdog_config(const char *window_env, const char *backstop_env, int64_t *window,
		    int64_t *backstop, char *err, size_t errlen);
void watchdog_init(struct watchdog *w, int64_t window_ms, int64_t backstop_ms);
/* A source went down (the clock starts with the first) or came back (it
 * stops with the last). */
void watchdog_disconnected(struct watchdog *w, unsigned source, int64_t mono, int64_t wall);
void watchdog_reconnected(struct watchdog *w, unsigned source);
/* Is the resident connection itself down? */
bool watchdog_resident_down(const struct watchdog *w);
/* The loop was busy waiting for the broker until mono: that is no stall
 * of the daemon's own. */
void watchdog_busy(struct watchdog *w, int64_t mono);
/* A tick of the event loop (due every WATCHDOG_TICK_MS): what came later
 * than that is the loop's own stall. */
enum watchdog_verdict watchdog_tick(struct watchdog *w, int64_t mono, int64_t wall);

#endif
