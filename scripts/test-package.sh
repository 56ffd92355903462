#!/usr/bin/env bash
# The Debian package (scripts/package-deb.sh), checked without installing it
# (scripts/test.sh's `package` stage):
#
#   scripts/test-package.sh
#
# 1. It builds, and `dpkg-deb -c` lists the binaries, the unit and the environment file where
#    the unit expects them (its ExecStart and EnvironmentFile); the environment file is a
#    conffile and listens on loopback.
# 2. The unit passes `systemd-analyze verify` against the unpacked tree (skipped, with a note,
#    where systemd-analyze is missing).
# 3. The unpacked lock-server starts with the packaged environment file (only the port and
#    the data dir moved: the packaged port may be taken here, and the unit's state directory
#    is systemd's to make) and answers /healthz; the unpacked lockctl runs a job under a lock
#    on it and reads the lock back.
# Exits non-zero on any failure. Runs after the `run` stage, whose release build it reuses.
set -uo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d /tmp/test-package.XXXXXX)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failed=0
log() { printf '\n== test-package: %s\n' "$*"; }
check() { # check DESCRIPTION COMMAND...: runs COMMAND, reports, counts a failure
  local what="$1"
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; failed=$((failed + 1)); fi
}

log "scripts/package-deb.sh"
deb="$(scripts/package-deb.sh "$work/out" | tail -1)"
[ -f "$deb" ] || { echo "test-package: no package built" >&2; exit 1; }
echo "$deb"

log "contents (dpkg-deb -c)"
dpkg-deb -c "$deb" | tee "$work/contents"
listed() { grep -qE " \./${1#/}\$" "$work/contents"; }
for path in /usr/bin/lock-server /usr/bin/lockctl /lib/systemd/system/lock-server.service \
  /etc/default/lock-server; do
  check "$path is in the package" listed "$path"
done
root="$work/root"
dpkg-deb -x "$deb" "$root"
unit="$root/lib/systemd/system/lock-server.service"
exec_start="$(sed -n 's/^ExecStart=//p' "$unit" | cut -d' ' -f1)"
env_file="$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")"
check "the unit's ExecStart ($exec_start) is packaged" listed "$exec_start"
check "the unit's EnvironmentFile ($env_file) is packaged" listed "$env_file"
check "$env_file is a conffile" sh -c "dpkg-deb -I '$deb' conffiles | grep -qx '$env_file'"
check "the environment file listens on loopback" grep -qE '^LOCK_LISTEN=127\.0\.0\.1:' "$root$env_file"
check "the environment file switches the demo ledger off" grep -qx 'LOCK_DEMO_LEDGER=false' "$root$env_file"
for directive in DynamicUser=yes StateDirectory=lock-server ProtectSystem=strict NoNewPrivileges=yes \
  PrivateTmp=yes ProtectHome=yes Restart=on-failure 'ExecReload=/bin/kill -HUP $MAINPID' \
  Environment=LOCK_DATA_DIR=/var/lib/lock-server; do
  check "the unit says $directive" grep -qxF "$directive" "$unit"
done

log "systemd-analyze verify"
# Against the unpacked tree (--root), so that ExecStart is the packaged binary; the targets the
# unit is ordered against and ExecReload's /bin/kill are this machine's, copied in. verify
# only warns (exit 0) about an unknown key or a bad value, so any output at all fails.
verify_unit() {
  local vroot="$work/verify-root" out rc
  cp -a "$root/." "$vroot"
  mkdir -p "$vroot/usr/lib/systemd/system" "$vroot/bin"
  cp -a /usr/lib/systemd/system/. "$vroot/usr/lib/systemd/system/"
  cp /bin/kill "$vroot/bin/kill"
  out="$(systemd-analyze verify --man=no --root="$vroot" /lib/systemd/system/lock-server.service 2>&1)"
  rc=$?
  [ -n "$out" ] && echo "$out"
  [ "$rc" -eq 0 ] && [ -z "$out" ]
}
if command -v systemd-analyze >/dev/null && [ -d /usr/lib/systemd/system ] && [ -x /bin/kill ]; then
  check "systemd-analyze verify accepts the unit, without a warning" verify_unit
else
  echo "note: systemd-analyze (or the system's units, or /bin/kill) is missing here; the unit was not verified"
fi

log "the unpacked binaries with the packaged environment"
healthz() { curl -sf "http://$1/healthz" >/dev/null; }
(
  set -a
  # shellcheck source=/dev/null
  . "$root$env_file"
  set +a
  LOCK_LISTEN="127.0.0.1:0" LOCK_DATA_DIR="$work/data" exec "$root/usr/bin/lock-server"
) >"$work/server.log" 2>&1 &
server_pid=$!
addr=""
for _ in $(seq 1 600); do # a bound only: a healthy start takes a moment
  addr="$(grep -m1 '"listening"' "$work/server.log" | grep -oE '127\.0\.0\.1:[0-9]+')"
  [ -n "$addr" ] && healthz "$addr" && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
check "the packaged lock-server answers /healthz" healthz "${addr:-127.0.0.1:1}"
export LOCK_URL="http://${addr:-127.0.0.1:1}"
lockctl="$root/usr/bin/lockctl"
token="$("$lockctl" exec package/smoke --no-wait -- sh -c 'echo "$LOCK_FENCING_TOKEN"')"
check "the packaged lockctl runs a job under a lock (token '$token')" \
  sh -c "[ '$token' -gt 0 ] 2>/dev/null"
check "the packaged lockctl reads the lock back, released" \
  sh -c "'$lockctl' status package/smoke --json | grep -q '\"holder\":null'"
check "the packaged server answers the demo ledger 404 (switched off)" \
  sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' '$LOCK_URL/v1/demo/ledger/package')\" = 404 ]"
kill -TERM "$server_pid"
wait "$server_pid"
stopped=$?
check "the packaged lock-server stops cleanly on SIGTERM" [ "$stopped" -eq 0 ]
server_pid=""
[ "$failed" -eq 0 ] || { echo "--- lock-server output"; cat "$work/server.log"; }

echo "test-package: $failed failure(s)"
[ "$failed" -eq 0 ]
