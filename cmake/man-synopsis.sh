#!/bin/sh
# cotal(1) from its page and the one table of cotal's commands (cotal/commands.c):
# each `.\" @CMD <command>` line of the page becomes that command's synopsis
# line, in the table's order, and `.\" @EXIT-STATUS` the exit statuses; the
# bash completion beside it. Run by the build after cotal is linked.
#   man-synopsis.sh COTAL PAGE.in PAGE COMPLETION
set -eu
cotal=$1 in=$2 out=$3 completion=$4
tmp=$out.tmp.$$
trap 'rm -f "$tmp" "$tmp.lines" "$tmp.exit"' EXIT
"$cotal" --interface mdoc > "$tmp.lines"
"$cotal" --interface mdoc-exit > "$tmp.exit"
# The page's markers and the table's lines pair up one for one, command
# for command: a page that names another command fails the build.
awk -v lines="$tmp.lines" -v exits="$tmp.exit" '
	/^\.\\" @CMD / {
		want = $0; sub(/^\.\\" @CMD /, "", want)
		if ((getline line < lines) <= 0) { print "man-synopsis: no table line for " want > "/dev/stderr"; exit 2 }
		if (index(line, ".It Nm Cm " want " ") != 1 && line != ".It Nm Cm " want) {
			print "man-synopsis: the page says " want ", the table " line > "/dev/stderr"; exit 2
		}
		print line; n++; next
	}
	/^\.\\" @EXIT-STATUS$/ { while ((getline l < exits) > 0) print l; next }
	{ print }
	END { if ((getline extra < lines) > 0) { print "man-synopsis: the page has no marker for: " extra > "/dev/stderr"; exit 2 } }
' "$in" > "$tmp"
mv "$tmp" "$out"
"$cotal" --interface bash > "$completion.tmp.$$"
mv "$completion.tmp.$$" "$completion"
