#!/bin/sh
# make check-reproducible: the package is what the sources build. HEAD is
# cloned into two directories of different names and lengths, and `make
# deb` runs in each, one after the other: the second with its clock a year
# and a month ahead (faketime), another time zone, locale and umask. Each
# .deb of the first must be byte-identical to the second's (cmp). When one
# differs, the check prints which files in it differ (their sha256 and
# dpkg-deb's listing of modes, owners and times) and diffoscope's report,
# keeps both trees for a look, and fails.
#
# It checks a commit, not the working tree: uncommitted changes are not in
# the clones. Exit status: 0 identical, 1 different, 2 a build failed.
set -u
cd "$(dirname "$0")/.."

head=$(git rev-parse --verify -q HEAD) || { echo "✗ check-reproducible: not a git checkout with a commit" >&2; exit 2; }
git diff --quiet HEAD 2>/dev/null ||
	echo "! check-reproducible: the working tree has uncommitted changes; this checks HEAD ($(git rev-parse --short=12 HEAD)) without them"
brokers=${BROKERS:-$PWD/build/brokers}
root=$(mktemp -d "${TMPDIR:-/tmp}/cotal-reproducible.XXXXXX")
first=$root/first
second=$root/the-second-build-in-another-directory
# The packages must carry no time but the commit's, whatever the caller's.
unset SOURCE_DATE_EPOCH

# build DIR LOG [COMMAND PREFIX...]: clone HEAD into DIR, make deb there.
build() {
	dir=$1 log=$2
	shift 2
	git clone -q "$PWD" "$dir" && git -C "$dir" checkout -q --detach "$head" &&
		(cd "$dir" && "$@" nice make --no-print-directory deb BROKERS="$brokers") >"$log" 2>&1 || {
		tail -20 "$log"
		echo "✗ check-reproducible: make deb failed in $dir (all of it: $log)"
		exit 2
	}
}

echo "• make deb of $(git rev-parse --short=12 HEAD) in $first, at $(date -u +%FT%TZ)"
build "$first" "$root/first.log"
if command -v faketime >/dev/null 2>&1; then
	clock="faketime -f +400d"
	when="a clock 400 days ahead ($(faketime -f +400d date -u +%FT%TZ))"
else
	clock=""
	when="the real clock, $(date -u +%FT%TZ) (faketime is missing: make deps)"
fi
echo "• make deb again in $second, with $when, TZ=Pacific/Chatham, LC_ALL=C, umask 0002"
(umask 0002 && export TZ=Pacific/Chatham LC_ALL=C && build "$second" "$root/second.log" $clock)
[ $? = 0 ] || exit 2

debs=$(cd "$first/build/deb" && ls -- *.deb 2>/dev/null)
[ -n "$debs" ] || { echo "✗ check-reproducible: the first build made no .deb"; exit 2; }
[ "$debs" = "$(cd "$second/build/deb" && ls -- *.deb 2>/dev/null)" ] || {
	echo "✗ check-reproducible: the two builds made different packages: $(echo $debs) against $(cd "$second/build/deb" && echo *.deb)"
	echo "  (both trees kept in $root)"
	exit 1
}

# files DEB: one line per file of the package, its sha256 and its name,
# control files as control/NAME.
files() {
	x=$(mktemp -d)
	dpkg-deb -x "$1" "$x/data" && dpkg-deb -e "$1" "$x/control" &&
		(cd "$x" && find . -type f | LC_ALL=C sort | xargs -r sha256sum)
	rm -rf "$x"
}

differ=0
for deb in $debs; do
	a=$first/build/deb/$deb b=$second/build/deb/$deb
	if cmp -s "$a" "$b"; then
		echo "ok - $deb: byte-identical ($(sha256sum < "$a" | cut -c1-16)…, $(wc -c < "$a") bytes)"
		continue
	fi
	differ=$((differ + 1))
	echo "not ok - $deb differs: $(cmp "$a" "$b" 2>&1 | sed 's/.*differ: //')"
	echo "  files whose bytes differ (sha256, first build then second):"
	files "$a" > "$root/$deb.first.sha256"
	files "$b" > "$root/$deb.second.sha256"
	diff "$root/$deb.first.sha256" "$root/$deb.second.sha256" | grep '^[<>]' | sed 's/^/    /'
	echo "  modes, owners and times that differ (dpkg-deb -c):"
	dpkg-deb -c "$a" > "$root/$deb.first.list"
	dpkg-deb -c "$b" > "$root/$deb.second.list"
	diff "$root/$deb.first.list" "$root/$deb.second.list" | grep '^[<>]' | head -20 | sed 's/^/    /'
	if command -v diffoscope >/dev/null 2>&1; then
		diffoscope --text "$root/$deb.diffoscope.txt" "$a" "$b" >/dev/null 2>&1
		echo "  diffoscope's report ($(wc -l < "$root/$deb.diffoscope.txt") lines, all of it in $root/$deb.diffoscope.txt):"
		head -150 "$root/$deb.diffoscope.txt" | sed 's/^/    /'
	else
		echo "  (no diffoscope here for a byte-level report: make deps installs diffoscope-minimal)"
	fi
done
if [ "$differ" = 0 ]; then
	rm -rf "$root"
	echo "✓ check-reproducible: two builds of $(git rev-parse --short=12 HEAD), in two directories at two times, gave byte-identical packages"
	exit 0
fi
echo "✗ check-reproducible: $differ package(s) differ between the two builds (both trees kept in $root)"
exit 1
