#!/usr/bin/env bash
# Builds ltd's Debian package and prints the .deb's path as its last line.
#
#   scripts/package.sh            # -> dist/ltd_VERSION_ARCH.deb
#
# A Release build of the binaries alone (no tests, no examples) into
# $PKG_BUILD_DIR (build-pkg), installed with --strip under /usr into a
# staging root, plus what the build does not install: /etc/ltd/ltd.toml
# (a conffile, every key commented at its default), gzipped man pages, the
# maintainer scripts (packaging/debian: dh_installsystemd's conventions).
# Runtime dependencies come from dpkg-shlibdeps on the binaries (gRPC,
# protobuf, abseil and libuv are linked statically; libltworker_nccl is
# left out, so that no non-free libnccl2 is required). No debug symbols
# are shipped. Needs dpkg-dev and go-md2man (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${PKG_BUILD_DIR:-build-pkg}
out=${PKG_OUT_DIR:-$src/dist}

version=$(sed -n 's/^project(ltd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
version=${LTD_DEB_VERSION:-$version}
arch=$(dpkg --print-architecture)

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
echo "package: building ltd $version (Release) in $build" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DLTD_BUILD_TESTS=OFF -DLTD_BUILD_EXAMPLES=OFF \
  -DLTWORKER_PYTHON_INSTALL_DIR=lib/python3/dist-packages -DLTWORKER_NCCL=OFF "${launcher[@]}" >&2
cmake --build "$build" -j"$(nproc)" >&2

stage=$(mktemp -d /tmp/ltd-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
DESTDIR=$root cmake --install "$build" --strip >/dev/null

# Debian's places: units in /lib/systemd/system (as on a bookworm root
# that is not merged into /usr), gzipped man pages, a copyright file.
install -d "$root/etc/ltd" "$root/DEBIAN"
install -m 0644 packaging/ltd.toml "$root/etc/ltd/ltd.toml"
if [[ -d $root/usr/lib/systemd/system ]]; then
  install -d "$root/lib/systemd"
  mv "$root/usr/lib/systemd/system" "$root/lib/systemd/system"
  rmdir --ignore-fail-on-non-empty "$root/usr/lib/systemd"
fi
[[ -e $root/lib/systemd/system/ltd.service ]] || { echo "package: no ltd.service installed" >&2; exit 1; }
compgen -G "$root/usr/share/man/man8/ltd.8" >/dev/null ||
  { echo "package: no man pages (apt-get install go-md2man, then run this again)" >&2; exit 1; }
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
install -m 0644 packaging/debian/copyright "$root/usr/share/doc/ltd/copyright"
find "$root" -name __pycache__ -prune -exec rm -rf {} +

# Runtime dependencies of every ELF file, as Debian computes them.
mkdir -p "$stage/shlibs/debian"
printf 'Source: ltd\n\nPackage: ltd\nArchitecture: any\n' >"$stage/shlibs/debian/control"
mapfile -t elves < <(find "$root" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print)
depends=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -l"$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)" \
  "${elves[@]/#/-e}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[[ -n $depends ]] || { echo "package: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
case $depends in *-dev*|*torch*) echo "package: a build dependency leaked in: $depends" >&2; exit 1 ;; esac

installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@INSTALLED_SIZE@|$installed_size|" \
  -e "s|@DEPENDS@|$depends|" packaging/debian/control.in >"$root/DEBIAN/control"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
(cd "$root" && find etc -type f | sed 's|^|/|') >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print0 | sed -z 's|^\./||' |
  xargs -0 md5sum) >"$root/DEBIAN/md5sums"

mkdir -p "$out"
deb=$out/ltd_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
size=$(stat -c %s "$deb")
echo "package: $(basename "$deb"): $((size / 1024)) KiB, installed $((installed_size / 1024)) MiB" >&2
echo "$deb"
