#!/bin/sh
# The house's dependency order, checked over every #include "..." line
# (ARCHITECTURE.md "Layout", docs/development.md "Layout"). Two binaries,
# each with one entry:
#
#   cotal-deliveryd:
#   daemon/ (the entry) -> supervisor/, host/ (siblings) -> service/
#     -> worker-*/, metrics/ -> worker/ -> ipc/, sandbox/
#     -> lib/wire -> lib/nats -> lib/creds -> lib/
#
#   cotal:
#   cotal/ (the entry and the table of its interface) -> launcher/ -> cli/
#     -> lib/wire -> ... -> lib/
#
# A room may include its own headers and those of the rooms after it, never
# one before it nor a sibling: the supervisor and the host never include
# each other (what both use is in service/), and nothing but the entry
# includes a process room. A worker's room (worker-*) reaches ipc/ and
# sandbox/ only through worker/. The metrics server (metrics/) is a process
# without a broker connection: it takes ipc/ and sandbox/ directly, and
# nothing of lib/'s broker rooms. The `cotal` rooms reach none of the
# daemon's: the launcher runs cli's commands (mesh start and stop, space
# provision, creds audit, the manager's session, minting) and takes a
# space's file names from cli/spacefiles.h, which cotal status reads too.
# tests/ and bench/ may include anything. Usage: check-includes.sh [ROOT]
# (default: this tree). Prints each offending line and exits 1.
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2

# The rooms a file of the given room may include from.
allowed() {
	lib4="lib lib/creds lib/nats lib/wire"
	workers="worker-fanout worker-reader worker-registry worker-timer"
	case $1 in
	lib)             echo "lib" ;;
	lib/creds)       echo "lib lib/creds" ;;
	lib/nats)        echo "lib lib/creds lib/nats" ;;
	lib/wire)        echo "$lib4" ;;
	ipc)             echo "lib ipc" ;;
	sandbox)         echo "lib sandbox" ;;
	worker)          echo "$lib4 ipc sandbox worker" ;;
	worker-*)        echo "$lib4 worker $1" ;;
	metrics)         echo "lib ipc sandbox metrics" ;;
	service)         echo "$lib4 ipc sandbox metrics service" ;;
	supervisor)      echo "$lib4 ipc sandbox worker metrics service supervisor" ;;
	host)            echo "$lib4 ipc sandbox metrics service host" ;;
	daemon)          echo "$lib4 ipc sandbox worker $workers metrics service supervisor host daemon" ;;
	cotal)           echo "$lib4 cli launcher cotal" ;;
	launcher)        echo "$lib4 cli launcher" ;;
	cli)             echo "$lib4 cli" ;;
	*)               echo "*" ;;
	esac
}

# The room of a path: its folder, lib/<sub> for a lib room.
room_of() {
	case $1 in
	lib/*/*) echo "$1" | cut -d/ -f1-2 ;;
	*/*)     echo "$1" | cut -d/ -f1 ;;
	*)       echo "." ;;
	esac
}

bad=0
files=$(find lib ipc sandbox metrics worker worker-* service daemon supervisor host launcher cli cotal \
	-name '*.[ch]' 2>/dev/null | sort)
for f in $files; do
	from=$(room_of "$f")
	ok=$(allowed "$from")
	[ "$ok" = "*" ] && continue
	grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
	while IFS= read -r line; do
		n=${line%%:*}
		inc=$(echo "$line" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
		case $inc in
		*/*) to=$(room_of "$inc") ;;
		*)   to=$from ;;  # a sibling header of the same room
		esac
		hit=0
		for r in $ok; do
			[ "$r" = "$to" ] && hit=1
		done
		if [ $hit = 0 ]; then
			echo "$f:$n: includes \"$inc\" ($to): $from may include only: $ok"
		fi
	done
done > "${TMPDIR:-/tmp}/check-includes.$$"
if [ -s "${TMPDIR:-/tmp}/check-includes.$$" ]; then
	cat "${TMPDIR:-/tmp}/check-includes.$$"
	bad=1
fi
rm -f "${TMPDIR:-/tmp}/check-includes.$$"
count=$(echo "$files" | wc -w)
if [ $bad = 0 ]; then
	echo "include order: $count files, every #include in order"
fi
exit $bad
