/*
 * Serving the shard under the lease, through the daemon's life (seed,
 * "Where it runs" and the lease paragraphs; WIRE.md §4):
 *
 *   claim (ready:false) -> workers bound -> ready:true -> watch -> serving
 *   renew by CAS every 15 s; on a failed renew, or a foreign or deleted row
 *   seen by the watch: QUIESCE every worker, then read the row again:
 *     ours    -> adopt the broker's revision and RESUME
 *     gone    -> claim it again (a daemon whose lease key expired creates it
 *                again) and RESUME
 *     taken   -> exit 1 without releasing
 *     unknown -> stay quiesced and read again
 *   on exit: re-read, and delete by CAS only if ours.
 *
 * With --standby a daemon refused by a live lease does not exit: it waits
 * (SHARD_STANDBY), watching the row and trying the claim every second, and
 * claims the lease the moment the row is deleted (the holder's release) or
 * has expired (the holder died: the bucket's 30 s age).
 */
#include "supervisor/supervisor.h"
#include "service/notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "supervisor/holder.h"
#include "lib/log.h"
#include "lib/nats/kvwatch.h"
#include "lib/wire/tokens.h"

/* The shard's state, and since when (the status file shows both). */
static void
shard_enter(struct sup *s, enum shard_state st)
{
	s->shard = st;
	s->shard_since_ms = wall_ms();
	s->status_dirty = true;
}

static const struct lease_io *
io_of(struct sup *s)
{
	static struct lease_io io;

	io.js = s->js;
	io.denied = resident_denied;
	return &io;
}

/*
 * The lease's broker calls run on the event loop and may wait for the
 * broker: that wait is the broker's silence, not the daemon's own stall,
 * so the watchdog's tick clock moves past it.
 */
static void
broker_call_done(struct sup *s)
{
	watchdog_busy(&s->wd, mono_ms());
}

static void
clear_violation(struct sup *s)
{
	pthread_mutex_lock(&s->vmu);
	s->violation[0] = '\0';
	pthread_mutex_unlock(&s->vmu);
}

/* Log a line that already carries its mark. */
static void
log_marked(const char *line)
{
	if (strncmp(line, "✗ ", strlen("✗ ")) == 0)
		log_errx("%s", line + strlen("✗ "));
	else
		log_warnx("%s", line);
}

/* lease.dead: the row's holder is this machine's dead predecessor, by the
 * holder record (holder.h). */
static bool
predecessor_dead(const struct lease_row *row, void *arg, char *why, size_t whylen)
{
	const struct sup *s = arg;

	return s->holder_path[0] != '\0' && holder_record_proves_dead(s->holder_path, row, why,
	    whylen);
}

int
shard_claim(struct sup *s)
{
	char why[2048];

	snprintf(s->lease.bucket, sizeof(s->lease.bucket), "cotal_delivery_%s", s->token);
	snprintf(s->lease.subject, sizeof(s->lease.subject), "$KV.%s.%s", s->lease.bucket,
	    LEASE_KEY);
	snprintf(s->lease.holder, sizeof(s->lease.holder), "local.%s", s->creds.user_pub);
	snprintf(s->lease.incarnation, sizeof(s->lease.incarnation), "%s", s->instance);
	s->lease.ready = false;
	/* A lane writes no record (the host is the one process of its
	 * spaces): it waits for a dead lane's row to age out. */
	if (!s->lane)
		snprintf(s->holder_path, sizeof(s->holder_path), "%s/delivery.%s.holder.json",
		    s->ws.cotal, s->key);
	s->lease.dead = predecessor_dead;
	s->lease.dead_arg = s;
	shard_enter(s, SHARD_CLAIMING);
	pthread_mutex_init(&s->wmu, NULL);
	clear_violation(s);
#ifdef COTAL_TEST_HOOKS
	/* A test build may be slow to claim: COTAL_TEST_CLAIM_DELAY_MS (the e2e
	 * suite signals the daemon meanwhile). */
	if (getenv("COTAL_TEST_CLAIM_DELAY_MS") != NULL) {
		struct timespec ts = { atoi(getenv("COTAL_TEST_CLAIM_DELAY_MS")) / 1000,
			(atoi(getenv("COTAL_TEST_CLAIM_DELAY_MS")) % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
#endif
	switch (lease_claim(&s->lease, io_of(s), false, why, sizeof(why))) {
	case LEASE_CLAIMED:
		break;
	case LEASE_LIVE_ELSEWHERE:
		return 1;
	default:
		log_marked(why);
		return -1;
	}
	s->release_on_exit = true;
	shard_enter(s, SHARD_STARTING);
	if (s->lease.took_over[0] != '\0')
		log_ok("delivery: took over the lease of shard 0 from this machine's dead predecessor "
		    "(%s)", s->lease.took_over);
	log_info("delivery: lease of shard 0 claimed (%s, incarnation %s, revision %llu); "
	    "binding the workers", s->lease.holder, s->lease.incarnation,
	    (unsigned long long)s->lease.rev);
	return 0;
}

void
shard_claim_refused(struct sup *s)
{
	char line[1024], why[512];

	log_errx("delivery: a live lease already exists for shard 0 — another delivery daemon "
	    "is running. Not binding.");
	/* Who, and until when: a crashed holder's row outlives it by up to
	 * its age. */
	if (lease_describe_holder(&s->lease, io_of(s), line, sizeof(line), why, sizeof(why)) == 0)
		log_info("%s", line);
	broker_call_done(s);
}

/* The watch's apply runs on the mirror's thread: it only flags and wakes
 * the loop, which reads the row itself. */
static void
watch_apply(void *arg, const struct kvw_entry *e)
{
	struct sup *s = arg;
	char ev = 'L';

	if (strcmp(e->key, LEASE_KEY) != 0)
		return;
	/* Our own renewals come back too: the loop reads the row and tells. */
	pthread_mutex_lock(&s->wmu);
	s->watch_changed = true;
	pthread_mutex_unlock(&s->wmu);
	(void)!write(s->evpipe[1], &ev, 1);
}

static void
watch_reset(void *arg)
{
	(void)arg;
}

/* A renewal of the lease row, counted for the status and the metrics. */
static int
renew(struct sup *s, char *why, size_t whylen)
{
	int rc = lease_renew(&s->lease, io_of(s), why, whylen);

	if (rc == 0) {
		s->stats.renewals++;
		s->stats.last_renewal_ms = wall_ms(); /* a moment: the wall clock (status.schema.json) */
	} else {
		s->stats.renewal_failures++;
	}
	s->status_dirty = true;
	return rc;
}

static void on_renew(evutil_socket_t fd, short what, void *arg);
static void on_recheck(evutil_socket_t fd, short what, void *arg);

static void
arm(struct event *ev, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

#ifdef COTAL_TEST_HOOKS
static void on_bound(evutil_socket_t fd, short what, void *arg);
#endif
static void startup_finish(struct sup *s);
static void recheck_begin(struct sup *s);
static void on_renew(evutil_socket_t fd, short what, void *arg);
static void on_recheck(evutil_socket_t fd, short what, void *arg);

void
shard_workers_bound(struct sup *s)
{
	char why[1024];

	if (s->startup_done || s->shard != SHARD_STARTING)
		return;
#ifdef COTAL_TEST_HOOKS
	/* A test build may hold the ready write: COTAL_TEST_READY_DELAY_MS
	 * (the e2e suite asks for reloadCreds before start-up finished). */
	const char *hold = getenv("COTAL_TEST_READY_DELAY_MS");
	static struct event *ev_hold;
	if (hold != NULL && ev_hold == NULL) {
		ev_hold = evtimer_new(s->base, on_bound, s);
		arm(ev_hold, atoi(hold));
		return;
	}
	if (ev_hold != NULL && evtimer_pending(ev_hold, NULL))
		return;
#endif
	/* The timers first: a failed ready write re-checks with them. */
	if (s->ev_renew == NULL) {
		s->ev_renew = evtimer_new(s->base, on_renew, s);
		s->ev_recheck = evtimer_new(s->base, on_recheck, s);
	}
	s->lease.ready = true;
	clear_violation(s);
	if (renew(s, why, sizeof(why)) != 0) {
		/* Read the row again, as after a failed renewal: still ours →
		 * start-up finishes then (startup_finish from recheck). */
		log_errx("delivery: could not mark the lease of shard 0 ready: %s; quiescing the "
		    "workers and reading it again", why);
		recheck_begin(s);
		return;
	}
	shard_enter(s, SHARD_SERVING);
	workers_send_lease(s);
	startup_finish(s);
}

/* The lease ready and every worker serving: say so, renew, watch. The
 * status file first, naming every worker: whoever the up line or READY=1
 * tells (systemctl start returns on it) may run `cotal status` at once,
 * and the periodic write (on_status_timer) comes up to half a second
 * later. */
static void
startup_finish(struct sup *s)
{
	status_write(s);
	if (s->lane)
		log_ok("delivery daemon up (space %s) — a lane of the delivery host (pid %ld)",
		    s->space, (long)getppid());
	else if (notify_active())
		log_ok("delivery daemon up (space %s) — a systemd service: stop it with systemctl "
		    "stop", s->space);
	else
		log_ok("delivery daemon up (space %s) — stop with: cotal down", s->space);
	notify_sendf("READY=1\nSTATUS=serving space %s (shard 0)", s->space);
	arm(s->ev_renew, LEASE_RENEW_MS);
	shard_watch(s);
	/* The seed: start-up is finished once the lease watch is bound. */
	s->startup_done = true;
}

#ifdef COTAL_TEST_HOOKS
static void
on_bound(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	shard_workers_bound(arg);
}
#endif

void
shard_watch(struct sup *s)
{
	char err[512];

	if (s->watching || s->nc == NULL)
		return;
	if (kvmirror_open(&s->lease_watch, s->nc, s->creds.inbox, s->js, s->lease.bucket, watch_apply,
	    watch_reset, s, err, sizeof(err)) != 0) {
		/* Renewals still see a foreign row within 15 s. */
		log_warnx("delivery: cannot watch %s.%s: %s; relying on the renewals",
		    s->lease.bucket, LEASE_KEY, err);
		kvmirror_close(&s->lease_watch);
		return;
	}
	s->watching = true;
}

void
shard_unwatch(struct sup *s)
{
	if (!s->watching)
		return;
	kvmirror_close(&s->lease_watch);
	s->watching = false;
}

/* Doubt: stop acting, then read the row again once every worker is quiet. */
#ifdef COTAL_TEST_HOOKS
static int64_t recheck_hold_until;
#endif

static void
doubt(struct sup *s, const char *why)
{
	if (s->shard == SHARD_RECHECKING || s->stopping)
		return;
	log_warnx("delivery: re-checking the lease of shard 0: %s; quiescing the workers", why);
	recheck_begin(s);
}

/* Quiesce the workers and read the lease row again (recheck), after a
 * failed renewal or a failed ready write. */
static void
recheck_begin(struct sup *s)
{
	shard_enter(s, SHARD_RECHECKING);
	evtimer_del(s->ev_renew);
	workers_send_lease(s);
	workers_quiesce(s);
	s->quiesce_deadline = mono_ms() + LEASE_QUIESCE_WAIT_MS;
#ifdef COTAL_TEST_HOOKS
	/* A test build may hold the re-check: COTAL_TEST_RECHECK_HOLD_MS (the
	 * e2e suite watches /healthz meanwhile). */
	if (getenv("COTAL_TEST_RECHECK_HOLD_MS") != NULL)
		recheck_hold_until = mono_ms() + atoi(getenv("COTAL_TEST_RECHECK_HOLD_MS"));
#endif
	arm(s->ev_recheck, 100);
}

static void
recheck(struct sup *s)
{
	struct lease_row row;
	char why[2048];

	if (s->shard != SHARD_RECHECKING || s->stopping)
		return;
#ifdef COTAL_TEST_HOOKS
	if (mono_ms() < recheck_hold_until) {
		arm(s->ev_recheck, recheck_hold_until - mono_ms());
		return;
	}
#endif
	if (!workers_all_quiesced(s) && mono_ms() < s->quiesce_deadline) {
		arm(s->ev_recheck, 100);
		return;
	}
	/* Nothing to read while the broker is away: the watchdog decides. */
	if (watchdog_resident_down(&s->wd)) {
		arm(s->ev_recheck, LEASE_RECHECK_RETRY_MS);
		return;
	}
	enum lease_reading reading = lease_reread(&s->lease, io_of(s), &row, why, sizeof(why));
	broker_call_done(s);
	switch (reading) {
	case LEASE_OURS:
		/* A renewal that failed is written again now, before resuming:
		 * a row left to its age would expire while we serve. */
		if (renew(s, why, sizeof(why)) != 0) {
			broker_call_done(s);
			log_warnx("delivery: the lease of shard 0 is still ours, but renewing it "
			    "failed (%s); staying quiesced and reading it again", why);
			arm(s->ev_recheck, LEASE_RECHECK_RETRY_MS);
			return;
		}
		broker_call_done(s);
		log_ok("delivery: the lease of shard 0 is still ours; renewed it (revision %llu); "
		    "resuming", (unsigned long long)s->lease.rev);
		break;
	case LEASE_GONE:
		clear_violation(s);
		s->lease.ready = true;
		switch (lease_claim(&s->lease, io_of(s), true, why, sizeof(why))) {
		case LEASE_CLAIMED:
			log_ok("delivery: the lease of shard 0 was gone; claimed it again (revision "
			    "%llu); resuming", (unsigned long long)s->lease.rev);
			break;
		case LEASE_LIVE_ELSEWHERE:
			log_errx("delivery: another delivery daemon has taken shard 0. Exiting.");
			s->release_on_exit = false;
			sup_stop(s, 1);
			return;
		default:
			log_marked(why);
			sup_stop(s, 1);
			return;
		}
		break;
	case LEASE_TAKEN:
		log_errx("delivery: another delivery daemon has taken shard 0 (holder %s, incarnation "
		    "%s). Exiting.", row.holder[0] ? row.holder : "?",
		    row.incarnation[0] ? row.incarnation : "?");
		s->release_on_exit = false;
		sup_stop(s, 1);
		return;
	case LEASE_UNKNOWN:
		log_warnx("delivery: cannot read the lease of shard 0 (%s); staying quiesced", why);
		arm(s->ev_recheck, LEASE_RECHECK_RETRY_MS);
		return;
	}
	shard_enter(s, SHARD_SERVING);
	workers_resume(s);
	workers_send_lease(s);
	if (!s->startup_done)
		startup_finish(s);
	else
		arm(s->ev_renew, LEASE_RENEW_MS);
}

static void
on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	recheck(arg);
}

static void
on_renew(evutil_socket_t fd, short what, void *arg)
{
	struct sup *s = arg;
	char why[1024];

	(void)fd, (void)what;
	if (s->shard != SHARD_SERVING || s->stopping)
		return;
	/* While the broker is away, or the workers are cut off from it, the
	 * lease is not renewed: a daemon that is not serving lets it run out
	 * (a standby takes over). The watchdog decides on exiting; a renewal
	 * once every connection is back finds out how the row stands. */
	if (s->wd.down) {
		arm(s->ev_renew, 1000);
		return;
	}
	int renewed = renew(s, why, sizeof(why));
	broker_call_done(s);
	if (renewed != 0) {
		doubt(s, why);
		return;
	}
	arm(s->ev_renew, LEASE_RENEW_MS);
}

void
shard_worker_quiesced(struct sup *s)
{
	if (s->shard == SHARD_RECHECKING && workers_all_quiesced(s))
		recheck(s);
}

void
shard_on_event(struct sup *s, char ev)
{
	bool changed;

	switch (ev) {
	case 'D':
		/* The broker drops a connection whose credential expired: that is
		 * no broker gone (seed). */
		if (reload_is_expired(s)) {
			reload_expired(s);
			break;
		}
		s->stats.connected = false;
		s->status_dirty = true;
		watchdog_disconnected(&s->wd, WATCHDOG_RESIDENT, mono_ms(), boot_ms());
		log_warnx("delivery: resident broker connection lost; reconnecting (the watchdog "
		    "allows %lld ms)", (long long)s->wd.window_ms);
		break;
	case 'R':
		s->stats.connected = true;
		s->stats.reconnects++;
		s->status_dirty = true;
		watchdog_reconnected(&s->wd, WATCHDOG_RESIDENT);
		log_ok("delivery: resident broker connection back");
		break;
	case 'X':
		reload_expired(s);
		break;
	case 'C':
		/* nats.c gives up after repeated refusals of an expired credential:
		 * the renewal opens a new connection. */
		if (reload_is_expired(s)) {
			reload_expired(s);
			break;
		}
		if (!s->stopping) {
			log_errx("delivery: the resident broker connection closed for good; exiting");
			s->release_on_exit = false;
			sup_stop(s, 1);
		}
		break;
	case 'L':
		if (!s->watching)
			break;
		pthread_mutex_lock(&s->wmu);
		changed = s->watch_changed;
		s->watch_changed = false;
		pthread_mutex_unlock(&s->wmu);
		if (changed && s->shard == SHARD_STANDBY) {
			standby_event(s);
			break;
		}
		/* Our own renewal reads back as ours; anything else is another
		 * writer or a delete. */
		if (changed && s->shard == SHARD_SERVING && !watchdog_resident_down(&s->wd)) {
			struct lease_row row;
			char why[512];
			enum lease_reading r = lease_reread(&s->lease, io_of(s), &row, why, sizeof(why));
			broker_call_done(s);
			if (r != LEASE_OURS)
				doubt(s, r == LEASE_GONE ? "the lease row was deleted" :
				    r == LEASE_TAKEN ? "another writer changed the lease row" : why);
		}
		break;
	}
}

/* ---- standby ---- */

static void
standby_try(struct sup *s)
{
	char why[2048];

	if (s->shard != SHARD_STANDBY || s->stopping)
		return;
	enum lease_claim c = lease_claim(&s->lease, io_of(s), false, why, sizeof(why));
	broker_call_done(s);
	switch (c) {
	case LEASE_CLAIMED:
		break;
	case LEASE_LIVE_ELSEWHERE:
		if (s->standby_until != 0 && mono_ms() >= s->standby_until) {
			/* A start under a service manager waited a lease's life:
			 * the holder renews it, so it lives. Refused as ever. */
			shard_claim_refused(s);
			sup_stop(s, 1);
			return;
		}
		arm(s->ev_standby, STANDBY_POLL_MS);
		return;
	case LEASE_DENIED:
		log_marked(why);
		sup_stop(s, 1);
		return;
	default:
		/* The broker did not answer (a leader election, a node lost):
		 * a standby keeps waiting; the watchdog decides on a broker gone. */
		log_warnx("delivery: standby: cannot claim the lease of shard 0 yet: %s", why);
		arm(s->ev_standby, STANDBY_POLL_MS);
		return;
	}
	evtimer_del(s->ev_standby);
	s->release_on_exit = true;
	shard_enter(s, SHARD_STARTING);
	log_ok("delivery: standby: the lease of shard 0 was free; claimed it (%s, incarnation %s, "
	    "revision %llu); taking over", s->lease.holder, s->lease.incarnation,
	    (unsigned long long)s->lease.rev);
	s->on_claimed(s);
}

static void
on_standby(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	standby_try(arg);
}

void
standby_begin(struct sup *s)
{
	shard_enter(s, SHARD_STANDBY);
	s->ev_standby = evtimer_new(s->base, on_standby, s);
	shard_watch(s);
	if (s->standby_until != 0) {
		log_info("delivery: another delivery daemon holds the lease of shard 0; under the "
		    "service manager this start waits up to %d s for it to be released or to "
		    "expire (watching %s.%s), then exits 1 (--standby waits for good)",
		    SERVICE_LEASE_WAIT_MS / 1000, s->lease.bucket, LEASE_KEY);
		notify_sendf("STATUS=waiting up to %d s for the lease of space %s (shard 0 held "
		    "elsewhere)", SERVICE_LEASE_WAIT_MS / 1000, s->space);
	} else {
		log_info("delivery: standby (--standby): another delivery daemon holds the lease "
		    "of shard 0; watching %s.%s and taking over once it is released or expires",
		    s->lease.bucket, LEASE_KEY);
		notify_sendf("STATUS=standby for space %s (shard 0 held elsewhere)", s->space);
	}
	arm(s->ev_standby, STANDBY_POLL_MS);
}

void
standby_event(struct sup *s)
{
	/* A change of the row (a release deletes it): try at once. */
	evtimer_del(s->ev_standby);
	standby_try(s);
}

void
standby_free(struct sup *s)
{
	if (s->ev_standby != NULL)
		event_free(s->ev_standby);
	s->ev_standby = NULL;
}

void
shard_release(struct sup *s)
{
	char why[1024];

	/* Leaving because the broker is gone: close the connection first, so
	 * the watch's teardown does not wait out its timeouts on it. */
	if ((!s->release_on_exit || watchdog_resident_down(&s->wd)) && s->nc != NULL)
		natsConnection_Close(s->nc);
	shard_unwatch(s);
	if (!s->release_on_exit || s->nc == NULL || watchdog_resident_down(&s->wd))
		return;
	if (lease_release(&s->lease, io_of(s), why, sizeof(why)) != 0)
		log_warnx("delivery: could not release the lease of shard 0: %s (it expires within "
		    "30 s)", why);
	else
		log_info("delivery: lease of shard 0 released");
}

void
shard_free(struct sup *s)
{
	if (s->ev_renew != NULL)
		event_free(s->ev_renew);
	if (s->ev_recheck != NULL)
		event_free(s->ev_recheck);
	s->ev_renew = s->ev_recheck = NULL;
}
