#!/usr/bin/env bash
# Makes (once) the Debian root of RELEASE (bookworm, trixie) that the
# package test boots, and prints its path. Cached: a later run finds it
# ready and returns at once. The root is never booted itself: each test
# run boots an overlay of it. It holds what the test's job needs and the
# package does not bring: systemd and that release's python3-torch (the
# package's own dependencies are left to `apt-get install ./*.deb`).
# The bare variant is debootstrap's minbase and nothing else (no systemd,
# no Python): the GPU kit's test runs the kit there, with none of ltd's
# dependencies on the machine.
#   debian_root.sh RELEASE [bare]
#   LTD_TEST_ROOT_CACHE  where roots are kept (/var/cache/ltd-test), one per release
#   LTD_TEST_MIRROR      the Debian mirror (the host's apt source, else deb.debian.org)
set -euo pipefail
release=${1:?usage: debian_root.sh RELEASE [bare]}
variant=${2:-}
[[ $release =~ ^[a-z]+$ ]] || { echo "debian_root: '$release' is not a release name" >&2; exit 1; }
[[ -z $variant || $variant == bare ]] || { echo "debian_root: unknown variant '$variant' (bare)" >&2; exit 1; }
# The recipe's version: a root made by an older recipe is made again.
recipe=2
root=${LTD_TEST_ROOT_CACHE:-/var/cache/ltd-test}/$release-root
if [[ $variant == bare ]]; then
  recipe=bare-1
  root=${LTD_TEST_ROOT_CACHE:-/var/cache/ltd-test}/$release-bare-root
fi
if [[ $(cat "$root/.ltd-test-ready" 2>/dev/null) == "$recipe" ]]; then echo "$root"; exit 0; fi
mirror=${LTD_TEST_MIRROR:-}
if [[ -z $mirror ]]; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
command -v debootstrap >/dev/null || { echo "debian_root: no debootstrap (apt-get install debootstrap)" >&2; exit 1; }
# Built beside the cache and moved into place whole: an interrupted run
# leaves no half-made root behind under the cache's name. Only one run
# makes it at a time.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
if [[ $(cat "$root/.ltd-test-ready" 2>/dev/null) == "$recipe" ]]; then echo "$root"; exit 0; fi
tmp=$(mktemp -d "$root.new.XXXXXX")
log=$tmp.log
mounted=()
cleanup() {
  local m
  for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null; done
  rm -rf "$tmp" "$log"
}
trap cleanup EXIT
echo "debian_root: debootstrap $release${variant:+ ($variant)} from $mirror into $root (once)" >&2
include=--include=systemd,systemd-sysv,dbus,procps,ca-certificates
[[ $variant == bare ]] && include=
debootstrap --variant=minbase $include "$release" "$tmp" "$mirror" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
if [[ $variant == bare ]]; then
  rm -f "$tmp"/var/cache/apt/archives/*.deb
  echo "$recipe" >"$tmp/.ltd-test-ready"
  rm -rf "$root"
  mv "$tmp" "$root"
  echo "$root"
  exit 0
fi
# What the booted system needs to be quiet and reachable: a hostname, no
# getty on a console nobody reads, no timers that start apt, apt's sources.
echo ltd-test >"$tmp/etc/hostname"
printf 'deb %s %s main\n' "$mirror" "$release" >"$tmp/etc/apt/sources.list"
for unit in console-getty.service getty@.service systemd-timesyncd.service apt-daily.timer \
            apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer; do
  ln -sf /dev/null "$tmp/etc/systemd/system/$unit"
done
# The test's workload: that release's own torch (and man, to read the
# package's pages). Installed in a chroot with /proc mounted.
echo "debian_root: apt-get install python3-torch into the $release root (once)" >&2
for m in proc sys dev; do mount --rbind "/$m" "$tmp/$m"; mount --make-rslave "$tmp/$m"; mounted+=("$tmp/$m"); done
chroot "$tmp" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch && apt-get clean' \
  >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
for m in "${mounted[@]}"; do umount -R "$m" || umount -l "$m"; done
mounted=()
echo "$recipe" >"$tmp/.ltd-test-ready"
rm -rf "$root"
mv "$tmp" "$root"
echo "$root"
