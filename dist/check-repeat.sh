#!/bin/sh
# make check-repeat N=5: run the whole of `make check` N times in a row and
# print one line per run (pass or fail, its time, and ctest's failures), then
# the count. Each run's full output is kept in build/repeat/run-<k>.log.
# Exit status: 0 only when every run passed.
set -u
cd "$(dirname "$0")/.."

n=${1:-5}
case $n in
'' | *[!0-9]*) echo "✗ check-repeat: N must be a number of runs, not \"$n\"" >&2; exit 2 ;;
esac
[ "$n" -ge 1 ] || { echo "✗ check-repeat: N must be at least 1" >&2; exit 2; }

mkdir -p build/repeat
failed=0
k=1
while [ "$k" -le "$n" ]; do
	log="build/repeat/run-$k.log"
	t0=$(date +%s)
	if make check >"$log" 2>&1; then
		verdict=pass
	else
		verdict=FAIL
		failed=$((failed + 1))
	fi
	t1=$(date +%s)
	# ctest's own summaries ("100% tests passed, 0 tests failed out of 61"),
	# one per build, and the names of what failed.
	summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" | tr '\n' ';' | sed 's/;$//')
	fails=$(sed -n 's/^[[:space:]]*[0-9]* - \([A-Za-z0-9_]*\) (.*/\1/p' "$log" | tr '\n' ' ')
	echo "run $k/$n: $verdict in $((t1 - t0)) s — ${summary:-no ctest summary (see $log)}${fails:+ — failed: $fails}"
	k=$((k + 1))
done
echo "check-repeat: $((n - failed))/$n runs passed"
[ "$failed" -eq 0 ]
