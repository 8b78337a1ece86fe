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
echo
echo "✓ demo mesh up. Credentials live in $root/.cotal (0700); the broker log is"
echo "  $root/.cotal/mesh/nats-server.log. Stop it with: make demo-stop"
