#!/bin/bash
# make check-systemd: the delivery service preset under a real systemd.
#
# Builds (once, cached in build/systemd/base) a Debian 12 root with
# debootstrap (minbase, systemd, dbus and the daemon's libraries), copies it
# for this run with the 2.10 test broker and the sandbox probe, boots it
# with systemd-nspawn, installs the package (`make deb`) in it with apt-get,
# runs tests/systemd/inside.sh against the packaged files, then purges the
# package and checks that nothing it made is left but the state directory,
# root's by then. Root only (nspawn, debootstrap).
#
# nspawn's own syscall filter would hide bpf() (IPAddressDeny= silently not
# enforced) and Landlock (the workers could not confine themselves): both
# are let through. There is no host systemd here: --register=no
# --keep-unit.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
base=$BUILD/systemd/base
run=$BUILD/systemd/run
logdir=$BUILD/systemd
broker=$BUILD/brokers/nats-server-2.10/usr/sbin/nats-server

if [ "$(id -u)" != 0 ]; then
	echo "check-systemd: needs root (systemd-nspawn, debootstrap)" >&2
	exit 2
fi
probe=$BUILD/tests/sandbox/sandbox_probe
for f in "$broker" "$probe"; do
	[ -x "$f" ] || { echo "check-systemd: $f is missing (make build deps)" >&2; exit 2; }
done
deb=$(ls "$BUILD"/deb/cotal-deliveryd_*_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "check-systemd: no package in $BUILD/deb (make deb)" >&2; exit 2; }
if ! command -v systemd-nspawn >/dev/null || ! command -v debootstrap >/dev/null; then
	echo "• installing systemd-container and debootstrap (Debian packages)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd-container debootstrap >/dev/null
fi

t0=$(date +%s)
# What the root holds besides minbase (logrotate: inside.sh runs the
# package's rule). The cache is rebuilt when this list changes.
include=systemd,dbus,libnats3.4,libjansson4,libevent-2.1-7,libseccomp2,logrotate
if [ "$(cat "$base/.cotal-base" 2>/dev/null)" != "$include" ]; then
	# The archive this machine's own apt sources name.
	mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
		grep -v security | head -1)
	mirror=${mirror:-http://deb.debian.org/debian/}
	echo "• debootstrap bookworm from $mirror into $base (cached for later runs)"
	rm -rf "$base"
	mkdir -p "$(dirname "$base")"
	debootstrap --variant=minbase --include="$include" \
		bookworm "$base" "$mirror" > "$logdir/debootstrap.log" 2>&1 ||
		{ echo "check-systemd: debootstrap failed; see $logdir/debootstrap.log" >&2; exit 1; }
	echo "$include" > "$base/.cotal-base"
	echo "• root built in $(($(date +%s) - t0)) s"
fi

rm -rf "$run"
cp -a "$base" "$run"
install -m 0755 "$broker" "$run/usr/local/bin/nats-server"
install -m 0755 "$probe" "$run/usr/local/bin/cotal-sandbox-probe"
install -m 0755 tests/systemd/inside.sh "$run/usr/local/bin/cotal-check-systemd"
install -m 0644 "$deb" "$run/root/$(basename "$deb")"  # /tmp is a tmpfs once booted
# No getty on the read-only console.
rm -f "$run/etc/systemd/system/getty.target.wants/"* 2>/dev/null || true

# A loopback port free on the host (the container shares its network).
port=
for p in $(seq 24222 24322); do
	if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/$((p + 1))) 2>/dev/null; then
		port=$p
		break
	fi
done
[ -n "$port" ] || { echo "check-systemd: no free port" >&2; exit 1; }

machine=cotal-check-$$
t1=$(date +%s%N)
systemd-nspawn -D "$run" -M "$machine" --boot --register=no --keep-unit --console=read-only \
	--system-call-filter="bpf landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
	> "$logdir/console.log" 2>&1 &
nspawn=$!
stop() {
	if [ -n "${pid1:-}" ] && kill -0 "$pid1" 2>/dev/null; then
		nsenter -t "$pid1" -a systemctl poweroff >/dev/null 2>&1 || true
	fi
	for _ in $(seq 1 100); do kill -0 "$nspawn" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$nspawn" 2>/dev/null || true
}
trap stop EXIT
pid1=
for _ in $(seq 1 300); do
	pid1=$(pgrep -P "$nspawn" | head -1 || true)
	if [ -n "$pid1" ] && [ -S "/proc/$pid1/root/run/systemd/private" ] &&
	   nsenter -t "$pid1" -a systemctl is-system-running --wait >/dev/null 2>&1; then
		break
	fi
	sleep 0.1
done
booted=$((($(date +%s%N) - t1) / 1000000))
if [ -z "$pid1" ] || ! [ -S "/proc/$pid1/root/run/systemd/private" ]; then
	echo "check-systemd: the container did not boot; see $logdir/console.log" >&2
	exit 1
fi
echo "• Debian 12 booted under systemd-nspawn in $booted ms (pid 1: $pid1)"

in_box() { nsenter -t "$pid1" -a env DEBIAN_FRONTEND=noninteractive "$@"; }
rc=0
# The package, as an operator installs it: apt-get, its dependencies from
# what the root holds. It makes the user and starts nothing.
if in_box apt-get install -y -q "/root/$(basename "$deb")" > "$logdir/apt-install.log" 2>&1; then
	echo "ok - apt-get install ./$(basename "$deb")"
else
	echo "not ok - apt-get install ./$(basename "$deb") (see $logdir/apt-install.log)"
	exit 1
fi
if in_box getent passwd cotal-delivery >/dev/null &&
   [ "$(in_box systemctl list-units --all --no-legend 'cotal-deliveryd*' | wc -l)" = 0 ]; then
	echo "ok - the package made the user cotal-delivery and started no unit"
else
	echo "not ok - after install: the user, or a unit running: $(in_box systemctl list-units --all --no-legend 'cotal-deliveryd*')"
	rc=$((rc + 1))
fi
# What the units' Documentation= names and the README's links to the
# guide's pages are installed (a page moved or left out of the package).
docs=$(in_box sh -c 'for u in cotal-deliveryd@x.service cotal-deliveryd-host.service; do
		systemctl show -P Documentation "$u"; done' | tr -d '"' | tr ' ' '\n' | sort -u)
missing=""
for d in $docs; do
	case "$d" in
	man:*) n=${d#man:}; sec=${n#*\(}; sec=${sec%\)}; n=${n%%\(*}
		f="/usr/share/man/man$sec/$n.$sec.gz" ;;
	file://*) f=${d#file://} ;;
	*) f="(unknown kind) $d" ;;
	esac
	in_box test -f "$f" || missing="$missing $f"
done
links=$(in_box grep -o '](docs/[a-zA-Z0-9_.-]*' /usr/share/doc/cotal-deliveryd/README.md | cut -c3- | sort -u)
for l in $links; do
	in_box test -f "/usr/share/doc/cotal-deliveryd/$l" || missing="$missing /usr/share/doc/cotal-deliveryd/$l"
done
if [ -n "$docs" ] && [ -n "$links" ] && [ -z "$missing" ]; then
	echo "ok - the units' documentation ($(echo $docs | wc -w) entries) and the README's $(echo $links | wc -w) pages are installed"
else
	echo "not ok - documentation missing from the package:${missing:- none named}"
	rc=$((rc + 1))
fi
nsenter -t "$pid1" -a /usr/local/bin/cotal-check-systemd "$port" || rc=$((rc + $?))
nsenter -t "$pid1" -a journalctl --no-pager > "$logdir/journal.log" 2>&1 || true

# Purged: no unit, user, file or directory of the package's is left, but
# the state directory (/var/lib/cotal, the spaces' logs and records).
# (the package's prerm stops what runs from it)
freed_uid=$(in_box id -u cotal-delivery || true)
freed_gid=$(in_box id -g cotal-delivery || true)
if in_box apt-get purge -y -q cotal-deliveryd > "$logdir/apt-purge.log" 2>&1; then
	left=$(in_box sh -c 'systemctl daemon-reload
		systemctl list-unit-files --no-legend "cotal-deliveryd*"
		getent passwd cotal-delivery; getent group cotal-delivery
		ls -d /usr/sbin/cotal-deliveryd /usr/bin/cotal /etc/cotal /etc/logrotate.d/cotal-deliveryd \
		    /lib/systemd/system/cotal-deliveryd* /usr/lib/sysusers.d/cotal-delivery.conf \
		    /usr/lib/tmpfiles.d/cotal-deliveryd.conf /usr/share/doc/cotal-deliveryd 2>/dev/null
		dpkg -L cotal-deliveryd 2>/dev/null; true' 2>&1 || true)
	if [ -z "$left" ] && in_box test -d /var/lib/cotal/.cotal; then
		echo "ok - apt-get purge left nothing of the package's but the state directory /var/lib/cotal"
	else
		echo "not ok - apt-get purge left: $left"
		rc=$((rc + 1))
	fi
	# Issue 41: the kept state is root's and closed (0700), and the next
	# account given the freed uid and gid reads nothing of it.
	not_root=$(in_box find /var/lib/cotal \( ! -uid 0 -o ! -gid 0 \) -printf '%p %u:%g; ' 2>&1 | head -c 400)
	mode=$(in_box stat -c '%a %U:%G' /var/lib/cotal 2>&1 || true)
	in_box groupadd -g "$freed_gid" cotal-next >/dev/null 2>&1 || true
	in_box useradd -u "$freed_uid" -g "$freed_gid" -M -s /usr/sbin/nologin cotal-next >/dev/null 2>&1 || true
	as_next=$(in_box setpriv --reuid="$freed_uid" --regid="$freed_gid" --clear-groups \
		sh -c 'cat /var/lib/cotal/.cotal/delivery.*.log >/dev/null && echo read; ls /var/lib/cotal' 2>&1 || true)
	in_box userdel cotal-next >/dev/null 2>&1 || true
	in_box groupdel cotal-next >/dev/null 2>&1 || true
	if [ -n "$freed_uid" ] && [ -z "$not_root" ] && [ "$mode" = "700 root:root" ] &&
	   ! printf '%s\n' "$as_next" | grep -qx read; then
		echo "ok - after the purge /var/lib/cotal and all in it are root's (700 root:root), and a new account given the freed uid $freed_uid reads none of it ($(printf '%s\n' "$as_next" | tail -1))"
	else
		echo "not ok - the kept state after the purge: $mode; not root's: ${not_root:-none}; the next account with uid $freed_uid: $(printf '%s\n' "$as_next" | tr '\n' ' ')"
		rc=$((rc + 1))
	fi
else
	echo "not ok - apt-get purge cotal-deliveryd (see $logdir/apt-purge.log)"
	rc=$((rc + 1))
fi
echo "• journal: $logdir/journal.log; console: $logdir/console.log"

# The preset's score, as systemd rates it (a unit over 0.9 fails).
for u in dist/systemd/cotal-deliveryd@.service dist/systemd/cotal-deliveryd-host.service; do
	score=$(systemd-analyze security --offline=yes "$u" 2>/dev/null | awk '/Overall exposure/ {print $(NF-2)}')
	if systemd-analyze security --offline=yes --threshold=9 "$u" >/dev/null 2>&1; then
		echo "ok - $(basename "$u"): exposure $score (threshold 0.9)"
	else
		echo "not ok - $(basename "$u"): exposure $score, over 0.9"
		rc=$((rc + 1))
	fi
done
echo "check-systemd: $([ "$rc" = 0 ] && echo PASSED || echo "FAILED ($rc)") in $(($(date +%s) - t0)) s"
exit "$rc"
