#!/usr/bin/env bash
# The Debian package for operators: lock-server and lockctl in /usr/bin, the systemd unit
# lock-server.service and its environment file /etc/default/lock-server (a conffile).
#
#   scripts/package-deb.sh [OUT_DIR]      # default: target/debian
#
# Prints the path of the .deb on its last line. Built with Debian's own `dpkg-deb --build`
# from a staged tree rather than cargo-deb: nothing to build or download first, and every
# file the package holds is named in this one script. The binaries are the release build of
# scripts/run.sh (the same cargo commands, so after a run nothing is rebuilt); the unit and
# the environment file are packaging/deb/.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-$root/target}"
out="${1:-$target/debian}"

# The same two commands as scripts/run.sh: each resolves its package's features alone, so a
# joint build would rebuild shared crates with other features.
cargo build --release --locked -p lock-server >&2
cargo build --release --locked -p lockctl >&2

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
[ -n "$version" ] || { echo "package-deb: no version in Cargo.toml [workspace.package]" >&2; exit 1; }
arch="$(dpkg --print-architecture)"
# The newest glibc symbol version the binaries need is the package's libc6 dependency.
glibc="$(objdump -T "$target/release/lock-server" "$target/release/lockctl" |
  grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -uV | tail -1)"

stage="$(mktemp -d /tmp/package-deb.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/lock-server"
install -D -m 0755 "$target/release/lock-server" "$pkg/usr/bin/lock-server"
install -D -m 0755 "$target/release/lockctl" "$pkg/usr/bin/lockctl"
install -D -m 0644 packaging/deb/lock-server.service "$pkg/lib/systemd/system/lock-server.service"
# Root only: it may hold the admin token.
install -D -m 0600 packaging/deb/lock-server.default "$pkg/etc/default/lock-server"
install -d -m 0755 "$pkg/DEBIAN"
echo /etc/default/lock-server >"$pkg/DEBIAN/conffiles"
cat >"$pkg/DEBIAN/control" <<CONTROL
Package: lock-server
Version: $version-1
Architecture: $arch
Maintainer: lock service maintainers <root@localhost>
Depends: libc6 (>= $glibc)
Section: net
Priority: optional
Installed-Size: $(du -sk "$pkg" | cut -f1)
Description: fencing-token distributed lock service and its shell client
 lock-server grants named locks whose every grant carries a fencing token
 that strictly increases per key, across restarts and crashes. lockctl runs a
 shell command under such a lock, and reads or revokes locks.
CONTROL
# systemd learns of the unit; the operator enables it (README "Install on a server").
cat >"$pkg/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
SCRIPT
cat >"$pkg/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl disable --now lock-server.service || true
fi
SCRIPT
cat >"$pkg/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
SCRIPT
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/lock-server_${version}-1_${arch}.deb"
dpkg-deb --root-owner-group --build "$pkg" "$deb" >&2
echo "$deb"
