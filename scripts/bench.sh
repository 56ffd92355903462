#!/usr/bin/env bash
# The one benchmark command. Not a test: it prints tables and records them.
#
#   scripts/bench.sh [bench args...]     # e.g. --seconds 5 --rounds 5; `all` by default
#
# 1. installs redis-server from Debian if missing (etcd: /usr/bin/etcd, installed by setup);
# 2. builds the `bench` crate in release;
# 3. runs, side by side in one invocation: Brooker's backoff experiment (seeded simulation),
#    lock-server vs a trivial axum handler vs Redis (no persistence / appendfsync always) vs
#    etcd at 1, 10 and 50 clients, lock-server over TLS (HTTP/2, HTTP/1.1) vs plain HTTP/1.1,
#    an etcd-backend replica vs raw etcd, the live backoff sweep against lock-server, and the
#    wait queue vs full jitter on SQLite and etcd;
# 4. rewrites its sections of docs/BENCHMARKS.md (Summary, Server vs Redis and etcd, TLS and
#    HTTP/2 vs plain HTTP/1.1, etcd backend, Backoff strategies (simulation), Backoff
#    strategies (live server), Wait queue vs full jitter (live server)) and docs/bench/*.svg;
# 5. then the client side (scripts/bench-client.sh): gzipped wasm size, SDK vs raw fetch in
#    Node, dashboard time to first plot, recorded in the "Client side" section;
# 6. then the dashboard's sweep in headless Chromium over HTTP/2 beside the native sweep
#    (scripts/bench-dashboard.sh), in its own section.
#
# Redis and etcd run on random 127.0.0.1 ports in temp dirs, only for the bench's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

if ! command -v redis-server >/dev/null; then
  echo "installing redis-server (Debian)" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y redis-server >/dev/null
  else sudo apt-get install -y redis-server >/dev/null; fi
fi
[ -x /usr/bin/etcd ] || { echo "etcd missing: apt-get install -y etcd-server" >&2; exit 1; }

cargo build --release -p bench
"$CARGO_TARGET_DIR/release/bench" "${@:-all}"

# The client side (with `all`, the default) records its own section; a failure there does
# not undo the server's.
if [ $# -eq 0 ] || [ "$1" = all ]; then
  bash scripts/bench-client.sh || echo "warning: scripts/bench-client.sh failed (its section is left as it was)" >&2
  bash scripts/bench-dashboard.sh || echo "warning: scripts/bench-dashboard.sh failed (its section is left as it was)" >&2
fi
