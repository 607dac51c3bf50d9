#!/usr/bin/env bash
# Builds ltd's Debian packages, one set that installs on Debian 12
# (bookworm) and Debian 13 (trixie), and prints the .debs' paths, one a
# line, as its last lines.
#
#   scripts/package.sh    # -> dist/{ltd,libltworker0,libltworker-dev}_VERSION_ARCH.deb,
#                         #    dist/python3-ltd_VERSION_all.deb
#
# Built on the older release (Debian 12), so that the binaries need no
# newer libc or libstdc++ than either has. What differs between the two
# releases is linked statically (gRPC, protobuf, abseil, libuv: the
# archives; spdlog and fmt: header-only) or, where Debian ships no static
# archive (prometheus-cpp's core), kept as a private copy in
# /usr/lib/ARCH/ltd, named in ltd's RUNPATH. Every package depends only on
# what both releases have; a check below fails the build otherwise.
#
# The split is Debian's: ltd (the programs, units, man pages,
# completion), python3-ltd (the client, ltd.launch, ltworker),
# libltworker0 (the ranks' shared library) and libltworker-dev (its
# headers, CMake package, pkg-config file). Control fields come from
# packaging/debian/control through dpkg-gencontrol, the version from
# packaging/debian/changelog (LTD_DEB_VERSION overrides it), runtime
# dependencies from dpkg-shlibdeps. The Release build is made with
# dpkg-buildflags' hardening flags and -ffunction-sections/--gc-sections,
# and installed stripped. Needs dpkg-dev and go-md2man
# (scripts/install-deps.sh). LTD_LINTIAN=1 also runs lintian on each .deb
# and fails on an error.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${PKG_BUILD_DIR:-build-pkg}
out=${PKG_OUT_DIR:-$src/dist}
deb_dir=$src/packaging/debian

version=$(dpkg-parsechangelog -l "$deb_dir/changelog" -S Version)
upstream=$(sed -n 's/^project(ltd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[[ ${version%%-*} == "$upstream" ]] ||
  { echo "package: packaging/debian/changelog is at $version, CMakeLists.txt at $upstream: add a changelog entry" >&2; exit 1; }
version=${LTD_DEB_VERSION:-$version}
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
private=/usr/lib/$multiarch/ltd

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # As in build.sh: a clone in another folder reuses earlier compiles.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
fi
# Debian's hardening flags (no -g: nothing ships debug symbols), and a
# section per function so that the linker drops what no program calls.
# Without -g the checkout's path is in no object (fixfilepath would only
# put it on every compiler command line, and so in ccache's hash).
export DEB_BUILD_MAINT_OPTIONS="hardening=+all reproducible=-fixfilepath,-fixdebugpath" DEB_CFLAGS_MAINT_STRIP=-g DEB_CXXFLAGS_MAINT_STRIP=-g
sections="-ffunction-sections -fdata-sections"
cflags="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS) $sections"
cxxflags="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS) $sections"
ldflags="$(dpkg-buildflags --get LDFLAGS) -Wl,--gc-sections"
echo "package: building ltd $version (Release) in $build" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DLTD_BUILD_TESTS=OFF -DLTD_BUILD_EXAMPLES=OFF -DLTD_SPDLOG_HEADER_ONLY=ON -DLTD_PRIVATE_LIBDIR="$private" \
  -DCMAKE_C_FLAGS="$cflags" -DCMAKE_CXX_FLAGS="$cxxflags" \
  -DCMAKE_EXE_LINKER_FLAGS="$ldflags" -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" \
  -DLTWORKER_PYTHON_INSTALL_DIR=lib/python3/dist-packages -DLTWORKER_NCCL=OFF "${launcher[@]}" >&2
cmake --build "$build" -j"$(nproc)" >&2

stage=$(mktemp -d /tmp/ltd-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT
all=$stage/all
DESTDIR=$all cmake --install "$build" --strip >/dev/null

# Debian's places: units in /lib/systemd/system (read on a merged and an
# unmerged /usr alike), gzipped man pages, the conffile.
install -d "$all/etc/ltd"
install -m 0644 packaging/ltd.toml "$all/etc/ltd/ltd.toml"
if [[ -d $all/usr/lib/systemd/system ]]; then
  install -d "$all/lib/systemd"
  mv "$all/usr/lib/systemd/system" "$all/lib/systemd/system"
  rmdir --ignore-fail-on-non-empty "$all/usr/lib/systemd"
fi
[[ -e $all/lib/systemd/system/ltd.service ]] || { echo "package: no ltd.service installed" >&2; exit 1; }
compgen -G "$all/usr/share/man/man8/ltd.8" >/dev/null ||
  { echo "package: no man pages (apt-get install go-md2man, then run this again)" >&2; exit 1; }
find "$all/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
find "$all" -name __pycache__ -prune -exec rm -rf {} +

# The private copies: the shared objects the built ltd loads that are
# neither ltd's own nor in both releases.
install -d "$all$private"
copied_from=()  # the packages of the copies, which no package may depend on
while read -r name path; do
  case $name in
    libprometheus-cpp-*)
      install -m 0644 "$path" "$all$private/$name"
      copied_from+=("-x$(dpkg -S "$(readlink -f "$path")" | cut -d: -f1)")
      strip --strip-unneeded --remove-section=.comment --remove-section=.note "$all$private/$name" ;;
  esac
done < <(ldd "$build/daemon/ltd" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
# Every shared object any ELF file needs is a private copy, ltd's own, or
# one that Debian 12 and 13 both ship under that soname (libmunge.so.2:
# libmunge2 0.5.15 and 0.5.16, for --rdzv-auth munge).
both="libc.so.6 libm.so.6 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1 libsystemd.so.0 libz.so.1 libmunge.so.2"
mapfile -t elves < <(find "$all" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print)
for elf in "${elves[@]}"; do
  for needed in $(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ " $both " == *" $needed "* || -e $all$private/$needed || $needed == libltworker.so.* ]] ||
      { echo "package: ${elf#"$all"} needs $needed, which Debian 12 and 13 do not both ship" >&2; exit 1; }
  done
done

# The split. Whatever no other package takes is ltd's.
pkgs=(ltd python3-ltd libltworker0 libltworker-dev)
take() {  # take PACKAGE PATH...: moves the paths (globs) from the install to the package
  local pkg=$1 path
  shift
  for path in "$@"; do
    for p in "$all"/$path; do
      [[ -e $p || -L $p ]] || { echo "package: nothing installed at /$path for $pkg" >&2; exit 1; }
      install -d "$stage/$pkg/$(dirname "${p#"$all"/}")"
      mv "$p" "$stage/$pkg/${p#"$all"/}"
    done
  done
}
take python3-ltd usr/lib/python3/dist-packages/ltd usr/lib/python3/dist-packages/ltworker
take libltworker-dev usr/include/ltworker "usr/lib/$multiarch/libltworker.so" "usr/lib/$multiarch/cmake/ltworker" \
  "usr/lib/$multiarch/pkgconfig/ltworker.pc"
take libltworker0 "usr/lib/$multiarch/libltworker.so.*"
find "$all" -depth -type d -empty -delete
mv "$all" "$stage/ltd"

# Debian's source layout, for dpkg-gencontrol and dpkg-shlibdeps.
mkdir -p "$stage/src/debian"
cp "$deb_dir/control" "$deb_dir/changelog" "$stage/src/debian/"
soversion=$(sed -n 's/^Package: libltworker\([0-9]*\)$/\1/p' "$deb_dir/control")
printf 'libltworker %s libltworker%s (>= %s)\n' "$soversion" "$soversion" "${version%%-*}" >"$stage/src/debian/shlibs.local"

mkdir -p "$out"
debs=()
for pkg in "${pkgs[@]}"; do
  root=$stage/$pkg
  doc=$root/usr/share/doc/$pkg
  install -d "$doc" "$root/DEBIAN"
  install -m 0644 "$deb_dir/copyright" "$doc/copyright"
  gzip -9nc "$deb_dir/changelog" >"$doc/changelog.Debian.gz"
  chmod 0644 "$doc/changelog.Debian.gz"
  substvars=$stage/src/debian/$pkg.substvars
  : >"$substvars"
  mapfile -t elves < <(find "$root" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print)
  if ((${#elves[@]})); then
    (cd "$stage/src" && dpkg-shlibdeps -T"$substvars" -l"$stage/libltworker0/usr/lib/$multiarch" -l"$root$private" \
      "${copied_from[@]}" "${elves[@]/#/-e}" 2>"$stage/shlibdeps.log") || { cat "$stage/shlibdeps.log" >&2; exit 1; }
    grep -q '^shlibs:Depends=' "$substvars" || { echo "package: dpkg-shlibdeps found no dependencies of $pkg" >&2; exit 1; }
    case $(cat "$substvars") in *-dev*|*torch*|*libfmt*|*libspdlog*|*prometheus*|*civetweb*|*libgrpc*|*libprotobuf*|*libabsl*)
      echo "package: $pkg depends on what one release lacks: $(cat "$substvars")" >&2; exit 1 ;;
    esac
  fi
  case $pkg in
    ltd)
      cat "$deb_dir/copyright.private-libs" >>"$doc/copyright"
      for lib in prometheus-cpp-core1.0:prometheus-cpp; do
        install -m 0644 "/usr/share/doc/lib${lib%%:*}/copyright" "$doc/copyright.${lib#*:}" 2>/dev/null ||
          install -m 0644 "/usr/share/doc/${lib%%:*}/copyright" "$doc/copyright.${lib#*:}"
      done
      install -m 0755 "$deb_dir/postinst" "$deb_dir/prerm" "$deb_dir/postrm" "$root/DEBIAN/"
      (cd "$root" && find etc -type f | sed 's|^|/|') >"$root/DEBIAN/conffiles" ;;
    python3-ltd)
      install -m 0755 "$deb_dir/python3-ltd.postinst" "$root/DEBIAN/postinst"
      install -m 0755 "$deb_dir/python3-ltd.prerm" "$root/DEBIAN/prerm" ;;
    libltworker0)
      cp "$stage/src/debian/shlibs.local" "$root/DEBIAN/shlibs"
      echo 'activate-noawait ldconfig' >"$root/DEBIAN/triggers"
      chmod 0644 "$root/DEBIAN/shlibs" "$root/DEBIAN/triggers" ;;
  esac
  (cd "$stage/src" && dpkg-gencontrol -p"$pkg" -P"$root" -T"$substvars" -v"$version" 2>"$stage/gencontrol.log") ||
    { cat "$stage/gencontrol.log" >&2; exit 1; }
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -print0 | sed -z 's|^\./||' | sort -z |
    xargs -0 md5sum) >"$root/DEBIAN/md5sums"
  chmod 0644 "$root/DEBIAN/md5sums"
  pkg_arch=$(sed -n 's/^Architecture: //p' "$root/DEBIAN/control")
  deb=$out/${pkg}_${version#*:}_$pkg_arch.deb
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  installed=$(sed -n 's/^Installed-Size: //p' "$root/DEBIAN/control")
  echo "package: $(basename "$deb"): $(( $(stat -c %s "$deb") / 1024 )) KiB, installed $installed KiB" >&2
  debs+=("$deb")
done

if [[ ${LTD_LINTIAN:-0} == 1 ]]; then
  # lintian's temp dirs (mldbm-*) in the stage, which goes: it leaves
  # some in $TMPDIR otherwise.
  mkdir "$stage/lintian-tmp"
  TMPDIR=$stage/lintian-tmp lintian --fail-on error "${debs[@]}" >&2
fi
printf '%s\n' "${debs[@]}"
