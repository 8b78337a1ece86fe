#!/bin/bash
# make check-systemd: the delivery service preset under a real systemd.
#
# Builds (once, cached in build/systemd/base) a Debian 12 root with
# debootstrap (minbase, systemd, dbus and the daemon's libraries), copies it
# for this run, installs the built daemon and CLI, the 2.10 test broker, the
# units (dist/systemd/) and the sysusers file, boots it with systemd-nspawn
# and runs tests/systemd/inside.sh in it. Root only (nspawn, debootstrap).
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
for f in "$BUILD/supervisor/cotal-deliveryd" "$BUILD/cli/cotal" "$broker" "$probe"; do
	[ -x "$f" ] || { echo "check-systemd: $f is missing (make build deps)" >&2; exit 2; }
done
if ! command -v systemd-nspawn >/dev/null || ! command -v debootstrap >/dev/null; then
	echo "• installing systemd-container and debootstrap (Debian packages)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd-container debootstrap >/dev/null
fi

t0=$(date +%s)
if [ ! -f "$base/.cotal-base" ]; then
	# The archive this machine's own apt sources name.
	mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
		grep -v security | head -1)
	mirror=${mirror:-http://deb.debian.org/debian/}
	echo "• debootstrap bookworm from $mirror into $base (cached for later runs)"
	rm -rf "$base"
	mkdir -p "$(dirname "$base")"
	debootstrap --variant=minbase \
		--include=systemd,dbus,libnats3.4,libjansson4,libevent-2.1-7,libseccomp2 \
		bookworm "$base" "$mirror" > "$logdir/debootstrap.log" 2>&1 ||
		{ echo "check-systemd: debootstrap failed; see $logdir/debootstrap.log" >&2; exit 1; }
	touch "$base/.cotal-base"
	echo "• root built in $(($(date +%s) - t0)) s"
fi

rm -rf "$run"
cp -a "$base" "$run"
install -m 0755 "$BUILD/supervisor/cotal-deliveryd" "$run/usr/local/sbin/cotal-deliveryd"
install -m 0755 "$BUILD/cli/cotal" "$run/usr/local/bin/cotal"
install -m 0755 "$broker" "$run/usr/local/bin/nats-server"
install -m 0755 "$probe" "$run/usr/local/bin/cotal-sandbox-probe"
install -m 0644 dist/systemd/cotal-deliveryd@.service dist/systemd/cotal-deliveryd-host.service \
	"$run/etc/systemd/system/"
install -m 0644 dist/sysusers.d/cotal-delivery.conf "$run/usr/lib/sysusers.d/"
install -m 0755 tests/systemd/inside.sh "$run/usr/local/bin/cotal-check-systemd"
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

rc=0
nsenter -t "$pid1" -a /usr/local/bin/cotal-check-systemd "$port" || rc=$?
nsenter -t "$pid1" -a journalctl --no-pager > "$logdir/journal.log" 2>&1 || true
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
