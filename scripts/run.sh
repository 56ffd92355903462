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
#
# Plain HTTP by default. Over TLS (HTTPS with HTTP/2, which the dashboard needs above 6
# contenders: a browser keeps at most 6 HTTP/1.1 connections per host):
#   LOCK_TLS=self-signed scripts/run.sh     # a certificate made in LOCK_DATA_DIR, reused after
#   LOCK_TLS_CERT=cert.pem LOCK_TLS_KEY=key.pem scripts/run.sh   # your own
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
scheme=http
case "${LOCK_TLS:-}" in
  "") [ -n "${LOCK_TLS_CERT:-}" ] && scheme=https ;;
  self-signed)
    export LOCK_TLS_SELF_SIGNED=true
    scheme=https
    echo "TLS: self-signed certificate $LOCK_DATA_DIR/self-signed-cert.pem (its SHA-256 fingerprint is in" \
      "the \"tls_self_signed\" line below): the browser warns once; compare the fingerprint and proceed," \
      "or trust the file (curl --cacert, NODE_EXTRA_CA_CERTS, deno --cert)"
    ;;
  *) echo "run.sh: LOCK_TLS is either unset or self-signed (own certificate: LOCK_TLS_CERT, LOCK_TLS_KEY)" >&2; exit 2 ;;
esac
case "$LOCK_LISTEN" in
  *:0) echo "dashboard: at the address of the \"listening\" line below ($scheme)" ;;
  *) echo "dashboard: $scheme://$LOCK_LISTEN/" ;;
esac
# lockctl, the shell client, next to the server in target/release/ (a build of its own: one
# cargo command for both would resolve features jointly and rebuild the server's crates).
cargo build --release --locked -p lockctl
# `cargo run` builds, then execs the binary in place (wherever CARGO_TARGET_DIR puts it).
exec cargo run --release --locked -p lock-server --bin lock-server -- "$@"
