/* The pull loop of the fan-out, reader and timer workers (pullloop.h). */
#include "worker/pullloop.h"

#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/nats/natsconn.h"
#include "worker/worker.h"

static bool
holding(const struct pull_loop *l)
{
	return l->holding != NULL && l->holding();
}

/* The held batch, if any, finished. */
static void
finish(const struct pull_loop *l)
{
	if (l->finish != NULL)
		l->finish();
}

void
pull_loop_run(const struct pull_loop *l)
{
	char err[1024];
	natsMsgList list;
	uint64_t reconnects = 0;
	bool doubt = false, idle = false, resumed = false;
	uint64_t epoch;
	int64_t idle_checked = 0, last_msg = mono_ms();

	while (worker_serving()) {
		if (l->setup(err, sizeof(err)) == 0)
			break;
		l->teardown();
		/* A denial is the credential's fault, not the broker's mood:
		 * say so loudly and let the supervisor's backoff pace us. */
		if (strstr(err, "permission denied") != NULL || strstr(err, "other settings") != NULL)
			fatalx("cannot bind the %s: %s", l->what, err);
		log_warnx("cannot bind the %s yet: %s; retrying", l->what, err);
		worker_nap(PULL_SETUP_RETRY_MS);
	}
	if (!worker_serving()) {
		l->teardown();
		return;
	}
	/* A quiet consumer's request lasts PULL_WAIT_MS, yet the loop looks
	 * up every PULL_SLICE_MS: a stop waits for no request. */
	l->pull->expires_ms = PULL_WAIT_MS;
	log_ok("%s bound to %s", l->what, l->bound);
	worker_bound();
	/* Counted on the connection setup bound to: after a credential
	 * reload the puller held the destroyed one until then. */
	reconnects = conn_reconnects(l->pull->nc);
	epoch = fence_ticket(&W.fence);
	while (worker_wait_open()) {
		/* A quiesce came (it starts the fence's next epoch): a batch held
		 * across it is finished, the closed fence having refused its
		 * acks (worker/fence.h). */
		if (fence_ticket(&W.fence) != epoch) {
			epoch = fence_ticket(&W.fence);
			finish(l);
			resumed = true;
		}
		/* After a reconnect or a failed fetch, before anything else:
		 * what a lost node was carrying to us is asked back (the
		 * reader's ack floor paces the fan-out's may_fetch). */
		if (conn_reconnects(l->pull->nc) != reconnects)
			doubt = true, idle = false;
		/* Back from a quiesce: what the closed fence kept from being
		 * acked (a batch fetched or held before it) is asked back at
		 * once, not after the ack wait; once no delay we asked for a
		 * retry still runs (a 2.9.10 broker would hand such an entry
		 * over twice, see the idle check below). */
		bool after_quiesce = false;
		if (resumed && mono_ms() >= l->pull->delayed_until + PULL_LATE_MS) {
			doubt = after_quiesce = true, idle = false;
			resumed = false;
		}
		if (doubt) {
			/* The recovery asks back what is unacked: ours first. */
			finish(l);
			reconnects = conn_reconnects(l->pull->nc);
			int n = pull_recover(l->pull);
			if (n > 0 && idle)
				log_debug("%s: idle with deliveries pending: asked them back (%d "
				    "sequences from the ack floor)", l->what, n);
			else if (n > 0 && after_quiesce)
				log_info("%s: serving again after a quiesce: asked back what was "
				    "fetched before it and not acked (%d sequences from the ack "
				    "floor)", l->what, n);
			else if (n > 0)
				log_warnx("%s: asked the broker to redeliver at once what it still "
				    "counts as delivered (%d sequences from the ack floor): a lost "
				    "connection or fetch may have dropped them in flight", l->what, n);
			if (n >= 0)
				doubt = idle = false;
		}
		if (l->may_fetch != NULL && !l->may_fetch())
			break;
		/* A batch held: only what has come already, so that its acks
		 * wait for no fetch. */
		natsStatus s = pull_fetch(l->pull, l->batch_max, holding(l) ? 0 : PULL_SLICE_MS,
		    &list);
		if (s != NATS_OK) {
			natsMsgList_Destroy(&list);
			finish(l);
			doubt = true, idle = false;
			worker_nap(PULL_ERROR_NAP_MS);
			continue;
		}
		if (list.Count > 0) {
			/* The consumer's lag, from the batch's own metadata, for
			 * the metrics (gauges.c); held while the batch is. */
			worker_batch_begin(l->pull, &list);
			l->batch(&list);
			worker_batch_done();
			last_msg = mono_ms();
		} else if (holding(l)) {
			finish(l);
		} else if (mono_ms() - last_msg >= PULL_WAIT_MS &&
		    mono_ms() - idle_checked >= PULL_IDLE_CHECK_MS &&
		    mono_ms() >= l->pull->delayed_until + PULL_LATE_MS) {
			/* Idle (nothing for a whole request's life: a fetch returns
			 * every PULL_SLICE_MS, and a pause between two posts is no
			 * idleness), holding nothing, and no delay we asked for a
			 * retry still running: whatever the consumer still counts
			 * as delivered to us was lost on the way (a leader change
			 * behind our connection's back): ask for it again. Asked
			 * during a retry's delay, it cut that delay short, and a
			 * 2.9.10 broker then handed the entry over twice at once,
			 * the reader deciding on the second (a "gave up after 11
			 * deliveries" for the contract's ten). */
			idle_checked = mono_ms();
			doubt = idle = true;
		}
		if (list.Msgs != NULL)
			natsMsgList_Destroy(&list);
	}
	finish(l);
	/* A planned stop hands back what was fetched and not finished, and
	 * what the open request still took after the last fetch: NAKed once
	 * that request has expired, the next daemon takes it at once instead of
	 * after the consumer's ack wait (issue 42). The supervisor releases the
	 * lease only once this worker is gone. Not over a connection that is
	 * down: the broker hands it over again after the ack wait all the same. */
	if (!worker_serving() && natsConnection_Status(l->pull->nc) == NATS_CONN_STATUS_CONNECTED) {
		int n = pull_hand_back(l->pull);
		if (n > 0)
			log_info("%s: stopping: handed back %d deliveries not finished (NAK)", l->what,
			    n);
	}
	l->teardown();
}
