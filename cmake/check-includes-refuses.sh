#!/bin/sh
# check-includes.sh refuses what runs back up the house, and only that
# (ctest unit_include_order_refuses). In a scratch tree, one file per arrow:
# each back-arrow below must be named, file and line; each arrow the order
# allows must not be. Usage: check-includes-refuses.sh [ROOT] (this tree's
# cmake/check-includes.sh by default).
set -u
src=${1:-$(dirname "$0")/..}
d=$(mktemp -d) || exit 2
trap 'rm -rf "$d"' EXIT

# room/file  the header it includes
refused='
lib/nats/x.c         lib/wire/records.h
host/x.c             supervisor/supervisor.h
supervisor/x.c       host/host.h
service/x.c          supervisor/supervisor.h
service/x.c          host/host.h
supervisor/y.c       daemon/main.h
host/y.c             daemon/main.h
metrics/x.c          service/metrics.h
worker/x.c           service/relay.h
cli/x.c              supervisor/supervisor.h
launcher/x.c         service/notify.h
cli/y.c              launcher/launcher.h
cli/w.c              cotal/commands.h
launcher/y.c         cotal/commands.h
'
allowed='
daemon/x.c           supervisor/main.h
daemon/y.c           host/host.h
daemon/z.c           worker-fanout/fanout.h
supervisor/z.c       service/metrics.h
host/z.c             service/restart.h
service/z.c          metrics/metrics.h
cli/z.c              lib/pidfile.h
cotal/x.c            launcher/launcher.h
cotal/y.c            cli/cli.h
launcher/z.c         cli/spacefiles.h
'
add() {
	mkdir -p "$d/$(dirname "$1")"
	echo "#include \"$2\"" >> "$d/$1"
}
echo "$refused$allowed" | while read -r f h; do
	[ -n "$f" ] && add "$f" "$h"
done
out=$(sh "$src/cmake/check-includes.sh" "$d")
rc=$?
echo "$out"
bad=0
if [ $rc != 1 ]; then
	echo "✗ check-includes.sh exited $rc on a tree with back-arrows (1 expected)"
	bad=1
fi
# Each file holds its arrows one a line, in the order added: the line
# number is the arrow's place among its file's.
for set in refused allowed; do
	eval list=\"\$$set\"
	echo "$list" | awk 'NF { n[$1]++; print $1, n[$1], $2 }' > "$d/.$set"
	while read -r f n h; do
		if echo "$out" | grep -q "^$f:$n: includes \"$h\""; then
			[ $set = allowed ] && { echo "✗ $f includes $h, which the order allows: refused"; bad=1; }
		else
			[ $set = refused ] && { echo "✗ $f includes $h, a back-arrow: not refused"; bad=1; }
		fi
	done < "$d/.$set"
done
[ $bad = 0 ] && echo "• every back-arrow refused, naming its line; every allowed arrow let through"
exit $bad
