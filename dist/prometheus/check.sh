#!/bin/sh
# Checks dist/prometheus (issue 29) with Debian's promtool and python3:
#   - the alert rules parse (promtool check rules) and their unit tests pass
#     (promtool test rules);
#   - the example Prometheus configuration is valid, with its rule file
#     (promtool check config);
#   - the Grafana dashboard is valid JSON, has its datasource and space
#     variables, and every panel's query parses as PromQL (written into a
#     scratch rule file, Grafana's variables filled in, for promtool);
#   - every cotal_delivery_* name the rules, their tests and the dashboard
#     use is a series docs/metrics.md lists (a row of its tables), so a
#     renamed series cannot silently break an alert or a panel.
# Usage: check.sh [ROOT] (default: this script's ../..). Prints one line per
# failure and exits 1 when anything failed, 2 when a tool is missing.
set -u
LC_ALL=C
export LC_ALL
root=${1:-$(dirname "$0")/../..}
cd "$root" || { echo "check.sh: cannot enter the repository root $root"; exit 2; }
dir=dist/prometheus
rules=$dir/cotal-delivery.rules.yml
tests=$dir/cotal-delivery.rules.test.yml
config=$dir/prometheus.example.yml
dash=$dir/cotal-delivery.dashboard.json
doc=docs/metrics.md

for f in "$rules" "$tests" "$config" "$dash" "$doc"; do
	[ -f "$f" ] || { echo "check.sh: FAIL: $f is missing (root: $(pwd))"; exit 1; }
done
command -v promtool >/dev/null 2>&1 ||
	{ echo "check.sh: promtool not found (Debian: apt-get install prometheus; make deps)"; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 2' HUP INT TERM
failed=""
fail() {
	echo "check.sh: FAIL: $*"
	failed="$failed
  $*"
}
# Runs a command, shows its output indented, and fails with the given words.
run() {
	what=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		sed 's/^/    /' "$tmp/out"
		echo "check.sh: ok: $what"
	else
		sed 's/^/    /' "$tmp/out"
		fail "$what"
	fi
}

promtool --version 2>&1 | sed -n '1s/^/check.sh: using /p'
run "promtool check rules $rules" promtool check rules "$rules"
run "promtool test rules $tests" promtool test rules "$tests"
run "promtool check config $config (and the rule files it names)" promtool check config "$config"

# The dashboard: JSON, its variables, and each query's PromQL.
if command -v python3 >/dev/null 2>&1; then
	if python3 -m json.tool "$dash" >/dev/null 2>"$tmp/json"; then
		echo "check.sh: ok: $dash is valid JSON"
		if python3 - "$dash" "$tmp/dashboard.rules.json" >"$tmp/out" 2>&1 <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
bad = []
if not isinstance(d.get('schemaVersion'), int) or d['schemaVersion'] < 36:
    bad.append('schemaVersion is %r, want 36 or later' % d.get('schemaVersion'))
var = {v.get('name'): v for v in d.get('templating', {}).get('list', [])}
ds = var.get('datasource')
if not ds or ds.get('type') != 'datasource' or ds.get('query') != 'prometheus':
    bad.append('no variable "datasource" of type datasource for prometheus')
sp = var.get('space')
q = sp and sp.get('query')
q = q.get('query') if isinstance(q, dict) else q
if not sp or sp.get('type') != 'query' or q != 'label_values(cotal_delivery_serving, space)':
    bad.append('no query variable "space" from label_values(cotal_delivery_serving, space)')
def walk(ps):
    for p in ps:
        yield p
        yield from walk(p.get('panels', []))
rules, ids = [], set()
for p in walk(d.get('panels', [])):
    if p.get('id') in ids:
        bad.append('panel id %r is used twice' % p.get('id'))
    ids.add(p.get('id'))
    if p.get('type') == 'row':
        continue
    ts = p.get('targets') or []
    if not ts:
        bad.append('panel %r has no query' % p.get('title'))
    for t in ts:
        e = t.get('expr', '')
        if not e.strip():
            bad.append('panel %r, query %s: empty' % (p.get('title'), t.get('refId')))
            continue
        for name in ('__rate_interval', '__interval', '__range'):
            e = e.replace('${%s}' % name, '5m').replace('$' + name, '5m')
        e = re.sub(r'\$\{?space\}?', '.*', e)
        if '$' in e:
            bad.append('panel %r, query %s: an unknown variable in %s' % (p.get('title'), t.get('refId'), e))
        rules.append({'record': 'dashboard_panel_%s_%s' % (p.get('id'), t.get('refId')), 'expr': e,
                      'labels': {'panel': str(p.get('title'))}})
json.dump({'groups': [{'name': 'dashboard', 'rules': rules}]}, open(sys.argv[2], 'w'), indent=1)
for b in bad:
    print(b)
print('%d queries in %d panels' % (len(rules), len([p for p in walk(d.get('panels', [])) if p.get('type') != 'row'])))
sys.exit(1 if bad else 0)
PY
		then
			sed 's/^/    /' "$tmp/out"
			echo "check.sh: ok: $dash has its variables"
			run "every query of $dash parses (promtool check rules)" \
				promtool check rules "$tmp/dashboard.rules.json"
		else
			sed 's/^/    /' "$tmp/out"
			fail "$dash: $(head -n 1 "$tmp/out")"
		fi
	else
		sed 's/^/    /' "$tmp/json"
		fail "$dash is not valid JSON"
	fi
elif command -v jq >/dev/null 2>&1; then
	if jq empty "$dash" >/dev/null 2>"$tmp/json"; then
		echo "check.sh: ok: $dash is valid JSON (jq; without python3 its queries are not checked)"
	else
		sed 's/^/    /' "$tmp/json"
		fail "$dash is not valid JSON"
	fi
else
	fail "neither python3 nor jq is installed to check $dash"
fi

# Every cotal_delivery_* name used is a series docs/metrics.md lists in a
# table row (| `name` | ...); a histogram's _bucket, _sum and _count are
# its own name's.
# shellcheck disable=SC2016 # backquotes of markdown, not a command
sed -n 's/^| `\(cotal_delivery_[a-z0-9_]*\)`.*/\1/p' "$doc" | sort -u >"$tmp/documented"
n=$(wc -l <"$tmp/documented")
if [ "$n" -lt 30 ]; then
	fail "$doc lists only $n series in its tables (| \`cotal_delivery_…\` | …): is its format changed?"
else
	for f in "$rules" "$tests" "$dash"; do
		grep -o 'cotal_delivery_[a-z0-9_][a-z0-9_]*' "$f" | sort -u |
		while IFS= read -r name; do
			grep -qx "$name" "$tmp/documented" && continue
			base=$(echo "$name" | sed -e "s/_bucket$//" -e "s/_sum$//" -e "s/_count$//")
			[ "$base" != "$name" ] && grep -qx "$base" "$tmp/documented" && continue
			echo "$f: $name"
		done
	done >"$tmp/unknown"
	if [ -s "$tmp/unknown" ]; then
		while IFS= read -r line; do
			fail "$line is not a series docs/metrics.md lists"
		done <"$tmp/unknown"
	else
		echo "check.sh: ok: every cotal_delivery_* name in the rules, tests and dashboard is one of the $n series in $doc"
	fi
fi

if [ -n "$failed" ]; then
	echo "check.sh: FAILED:$failed"
	exit 1
fi
echo "check.sh: all checks passed"
