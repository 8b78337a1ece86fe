#!/bin/bash
# make check-systemd-loaded: make check-systemd with a busy loop on every
# core beside it, for as long as it runs. Its checks assert from timestamps
# and contracts, never from how many polls fit in a window: they must hold.
set -u
cd "$(dirname "$0")/../.."
hogs=()
for _ in $(seq 1 "$(nproc)"); do
	(while :; do :; done) &
	hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
echo "• $(nproc) busy loops beside check-systemd"
bash tests/systemd/check-systemd.sh
