#!/bin/sh
# make demo: bring up a local authenticated dev mesh, provision a space and
# add two agents, then show what is there. Run by the Makefile, which sets
# BUILD, DEMO_ROOT, DEMO_SPACE, DEMO_PORT and COTAL_HOME.
set -eu
cotal="$BUILD/cli/cotal"
root="$DEMO_ROOT"
space="$DEMO_SPACE"

echo "• dev mesh in $root (space $space, broker on 127.0.0.1:$DEMO_PORT)"
"$cotal" mesh init --dev --root "$root" --port "$DEMO_PORT" --space "$space"
"$cotal" mesh start --root "$root"
"$cotal" space provision "$space" --root "$root"
for name in alice bob; do
	if [ -f "$root/.cotal/space.$(printf %s "$space" | od -An -tx1 | tr -d ' \n')/agents/$name.json" ]; then
		echo "• agent $name exists already"
		continue
	fi
	echo "• adding agent $name"
	"$cotal" agent add "$name" --space "$space" --allow general,ops --root "$root"
done
# The delivery daemon, in the background, with its four confined workers.
daemon="$BUILD/supervisor/cotal-deliveryd"
key=$(printf %s "$space" | od -An -tx1 | tr -d ' \n')
status="$root/.cotal/delivery.$key.status.json"
if ! "$cotal" status --space "$space" --root "$root" >/dev/null 2>&1; then
	echo "• starting cotal-deliveryd (log $root/.cotal/delivery.$key.log)"
	nohup "$daemon" --space "$space" --root "$root" >/dev/null 2>&1 &
	i=0
	until grep -q '"state": "connected"' "$status" 2>/dev/null &&
	    [ "$(grep -c '"state": "connected"' "$status")" -eq 4 ]; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "✗ the daemon did not bring its workers up; see $root/.cotal/delivery.$key.log"
			exit 1
		fi
		sleep 0.1
	done
fi
# The registry's rails answer once it has bound them: the liveness probe,
# as a manager would ask it.
i=0
until live=$("$cotal" admin liveness --space "$space" --root "$root" --wait 1000 2>&1); do
	i=$((i + 1))
	if [ $i -gt 50 ]; then
		echo "✗ the daemon's rails do not answer ($live); see $root/.cotal/delivery.$key.log"
		exit 1
	fi
	sleep 0.2
done
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
echo "✓ demo mesh up. Credentials live in $root/.cotal (0700); the broker log is"
echo "  $root/.cotal/mesh/nats-server.log. Stop everything with: make demo-stop"
