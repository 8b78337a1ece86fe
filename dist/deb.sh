#!/bin/sh
# make deb: build/deb/cotal-deliveryd_<version>_<arch>.deb with debhelper,
# then lintian on it (no error, no warning). The version is the one of
# CMakeLists.txt's project(); the tree is staged from the checkout's files
# (tracked and new, never the ignored build trees) with the commit written
# beside it, so --version names it. debian/changelog is written here from
# the same version: it has no other.
#
# Reproducible: two runs on one commit, in any two directories at any two
# times, give byte-identical packages (make check-reproducible checks it).
# The one time the package holds, its files' mtimes and the changelog's
# date, is the commit's (SOURCE_DATE_EPOCH, unless the caller set one:
# dpkg-deb clamps every mtime to it), in UTC; the compilers map the build
# directory to "." (debian/rules: reproducible=+all).
set -eu

version=$(sed -n 's/^project(cotal-deliveryd VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
[ -n "$version" ] || { echo "✗ make deb: no version in CMakeLists.txt's project()"; exit 1; }
commit=$(git describe --always --dirty --abbrev=12 2>/dev/null || true)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || true)
	if [ -z "$SOURCE_DATE_EPOCH" ]; then
		SOURCE_DATE_EPOCH=$(date +%s)
		echo "! make deb: no commit, so no time of one: the package carries this build's time and is not reproducible"
	fi
fi
export SOURCE_DATE_EPOCH
out=build/deb
src=$out/cotal-deliveryd-$version

for tool in dpkg-buildpackage dh lintian; do
	command -v "$tool" >/dev/null 2>&1 || { echo "✗ make deb: $tool is missing (make deps)"; exit 1; }
done
# The package claims only what is built and tested: the workers' seccomp
# policies load on x86-64 alone (sandbox/seccomp.c), so amd64.
arch=$(sed -n 's/^Architecture: *//p' debian/control)
[ "$arch" = amd64 ] || {
	echo "✗ make deb: debian/control claims Architecture: $arch; the seccomp policies load on x86-64 alone (sandbox/seccomp.c): claim amd64"
	exit 1
}
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -P --parents -t "$src"
printf '%s\n' "$commit" > "$src/.cotal-commit"
cat > "$src/debian/changelog" <<CHANGES
cotal-deliveryd ($version) unstable; urgency=medium

  * Built from ${commit:-a tree with no commit}.

 -- Cotal delivery maintainers <delivery@cotal.dev>  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGES

echo "• building cotal-deliveryd $version (${commit:-no commit}) with debhelper, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH ($(date -u -d "@$SOURCE_DATE_EPOCH" +%FT%TZ))"
(cd "$src" && dpkg-buildpackage -us -uc -b >../build.log 2>&1) || {
	tail -40 "$out/build.log"
	echo "✗ make deb: dpkg-buildpackage failed (all of it: $out/build.log)"
	exit 1
}
ls "$out"/*.deb
echo "• lintian"
lintian --fail-on error,warning --info "$out"/*.changes || { echo "✗ make deb: lintian reports an error or a warning"; exit 1; }
echo "✓ $(ls "$out"/cotal-deliveryd_*.deb): lintian reports no error and no warning"
