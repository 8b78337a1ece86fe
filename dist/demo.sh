#!/bin/sh
# make demo: bring up a local authenticated dev mesh, provision a space and
# add two agents, then show what is there. Run by the Makefile, which sets
# BUILD, DEMO_ROOT, DEMO_SPACE, DEMO_PORT and COTAL_HOME.
set -eu
cotal="$BUILD/cotal/cotal"
root="$DEMO_ROOT"
space="$DEMO_SPACE"

echo "• dev mesh in $root (space $space, broker on 127.0.0.1:$DEMO_PORT)"
"$cotal" mesh init --dev --root "$root" --port "$DEMO_PORT" --space "$space"
# The launcher: the broker, the space's streams and buckets, the run's
# delivery credential (24 h), and the daemon with its four confined
# workers, reported once it serves. Its lines go to the space's log.
echo "• cotal up --detach --metrics $DEMO_METRICS"
"$cotal" up --space "$space" --root "$root" --detach --metrics "$DEMO_METRICS"
for name in alice bob; do
	if [ -f "$root/.cotal/space.$(printf %s "$space" | od -An -tx1 | tr -d ' \n')/agents/$name.json" ]; then
		echo "• agent $name exists already"
		continue
	fi
	echo "• adding agent $name"
	"$cotal" agent add "$name" --space "$space" --allow general,ops --root "$root"
done
# up reported the daemon serving: its liveness responder answers "bound",
# as a manager would ask it.
live=$("$cotal" admin liveness --space "$space" --root "$root" --wait 3000 2>&1)
echo "• liveness of the delivery plane: $live"
# The durable data path: alice and bob join channel general durably over
# the ctl.delivery rail (the registry writes their membership rows), each
# posts, and each post reaches the other's dlv_ durable through the fan-out
# writer and the trusted reader (the sender gets no copy of its own post).
for name in alice bob; do
	"$cotal" agent join "$name" general --space "$space" --root "$root"
done
"$cotal" agent post alice general "hello from alice (make demo)" --space "$space" --root "$root"
"$cotal" agent post bob general "hello from bob (make demo)" --space "$space" --root "$root"
echo "• what each member's dlv_ durable surfaces:"
"$cotal" agent recv bob --space "$space" --root "$root" --wait 3000
"$cotal" agent recv alice --space "$space" --root "$root" --wait 3000
echo "• alice's memberships, and the newest post of general's history, over ctl.delivery:"
"$cotal" agent memberships alice --space "$space" --root "$root"
"$cotal" agent history alice general --space "$space" --root "$root" --limit 1
sleep 1.6 # a STATUS period and a status-file tick, so the counters below include it all
"$cotal" status --space "$space" --root "$root"
echo
echo "✓ demo mesh up. The daemon's metrics: http://$DEMO_METRICS/metrics, its health:"
echo "  http://$DEMO_METRICS/healthz (docs/observing.md). Credentials live in $root/.cotal (0700); the broker log is"
echo "  $root/.cotal/mesh/nats-server.log. Stop everything with: make demo-stop
  (cotal down: the daemon, its run credential, then the broker up started)"
