#!/bin/sh
# make deps: the Debian packages the build and tests need, and the
# nats-server 2.10 test broker (Debian 13's package, unpacked in the build
# tree; the system's apt sources are never touched).
set -eu

broker_dir=${COTAL_BROKER_DIR:-build/brokers}
# openssl (the command): the TLS e2e tests make a CA and a broker certificate.
pkgs="build-essential cmake pkg-config libnats-dev libevent-dev libjansson-dev
libssl-dev libseccomp-dev libcmocka-dev nats-server clang libclang-rt-14-dev valgrind
openssl"

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
bin="$broker_dir/nats-server-2.10/usr/sbin/nats-server"
if [ -x "$bin" ]; then
	exit 0
fi
state="$broker_dir/apt"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/etc"
cat > "$state/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
apt_private() {
	apt-get -q -o Dir::Etc::SourceList="$state/etc/sources.list" \
	    -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$state/lists" \
	    -o Dir::Cache="$state/cache" -o Dir::State::Status=/dev/null \
	    -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
echo "• fetching the nats-server 2.10 package of Debian 13 into $broker_dir"
apt_private update >/dev/null
(cd "$state" && apt_private download nats-server >/dev/null)
deb=$(ls "$state"/nats-server_2.10*.deb 2>/dev/null | head -n 1)
if [ -z "$deb" ]; then
	echo "✗ make deps: Debian 13 did not offer a nats-server 2.10 package" >&2
	exit 1
fi
rm -rf "$broker_dir/nats-server-2.10"
dpkg-deb -x "$deb" "$broker_dir/nats-server-2.10"
"$bin" --version
