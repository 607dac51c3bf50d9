#!/usr/bin/env bash
# Makes (once) the Debian 12 root the package test boots, and prints its
# path. Cached: a later run finds it ready and returns at once. The root
# is never booted itself: each test run boots a copy of it.
#   LTD_TEST_ROOT_CACHE  where it is kept (/var/cache/ltd-test/bookworm-root)
#   LTD_TEST_MIRROR      the Debian mirror (the host's apt source, else deb.debian.org)
set -euo pipefail
root=${LTD_TEST_ROOT_CACHE:-/var/cache/ltd-test/bookworm-root}
if [[ -f $root/.ltd-test-ready ]]; then echo "$root"; exit 0; fi
mirror=${LTD_TEST_MIRROR:-}
if [[ -z $mirror ]]; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
command -v debootstrap >/dev/null || { echo "bookworm_root: no debootstrap (apt-get install debootstrap)" >&2; exit 1; }
# Built beside the cache and moved into place whole: an interrupted run
# leaves no half-made root behind under the cache's name.
mkdir -p "$(dirname "$root")"
tmp=$(mktemp -d "$root.new.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "bookworm_root: debootstrap bookworm from $mirror into $root (once)" >&2
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,procps,ca-certificates \
  bookworm "$tmp" "$mirror" >"$tmp.log" 2>&1 || { tail -20 "$tmp.log" >&2; rm -f "$tmp.log"; exit 1; }
rm -f "$tmp.log"
# What the booted system needs to be quiet and reachable: a hostname, no
# getty on a console nobody reads, apt's sources.
echo ltd-test >"$tmp/etc/hostname"
printf 'deb %s bookworm main\n' "$mirror" >"$tmp/etc/apt/sources.list"
for unit in console-getty.service getty@.service systemd-timesyncd.service apt-daily.timer \
            apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$tmp/etc/systemd/system/$unit"
done
touch "$tmp/.ltd-test-ready"
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "$root"
