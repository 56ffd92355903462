#!/usr/bin/env bash
# The main job: lock-server on the embedded SQLite store, serving the bench-ui dashboard.
# Installs what it needs, builds the dashboard into www/, then runs the server in the
# foreground (Ctrl-C stops it gracefully). Extra arguments go to lock-server.
#
# Defaults (override through the environment, see README "Configuration"):
#   LOCK_LISTEN=127.0.0.1:7878  LOCK_DATA_DIR=./data  LOCK_WEB_ROOT=www
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
[ -x scripts/build-ui.sh ] && scripts/build-ui.sh

export LOCK_LISTEN="${LOCK_LISTEN:-127.0.0.1:7878}"
export LOCK_DATA_DIR="${LOCK_DATA_DIR:-./data}"
export LOCK_WEB_ROOT="${LOCK_WEB_ROOT:-www}"
# R1 (force revoke) is disabled without an admin token; make one for this run so the
# dashboard's operator can use it, and say where it is.
if [ -z "${LOCK_ADMIN_TOKEN:-}" ]; then
  mkdir -p "$LOCK_DATA_DIR"
  token_file="$LOCK_DATA_DIR/admin-token"
  [ -s "$token_file" ] || (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > "$token_file")
  LOCK_ADMIN_TOKEN="$(cat "$token_file")"
  export LOCK_ADMIN_TOKEN
  echo "admin token (for R1 force revoke): in $token_file"
fi
echo "dashboard: http://$LOCK_LISTEN/"
cargo build --release -p lock-server
exec target/release/lock-server "$@"
