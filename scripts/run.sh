#!/usr/bin/env bash
# The main job: lock-server on the embedded SQLite store, serving the bench-ui dashboard.
# Installs what it needs (scripts/setup.sh run), builds the optimised dashboard into www/,
# then builds and runs the server in the foreground. The last step is an `exec`: the server
# replaces this script, so Ctrl-C (SIGINT) or SIGTERM reach it directly and stop it
# gracefully. Extra arguments go to lock-server.
#
# Defaults (override through the environment, see README "Configuration"):
#   LOCK_LISTEN=127.0.0.1:7878  LOCK_DATA_DIR=./data  LOCK_WEB_ROOT=www
# LOCK_LISTEN with port 0 picks a free port; the server's `listening` line names it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
scripts/build-ui.sh

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
case "$LOCK_LISTEN" in
  *:0) echo "dashboard: at the address of the \"listening\" line below" ;;
  *) echo "dashboard: http://$LOCK_LISTEN/" ;;
esac
# `cargo run` builds, then execs the binary in place (wherever CARGO_TARGET_DIR puts it).
exec cargo run --release --locked -p lock-server --bin lock-server -- "$@"
