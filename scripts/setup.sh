#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine, idempotently: each step checks
# before it installs, so a second run costs seconds.
#
#   scripts/setup.sh run    # what the run command needs: wasm target, wasm-bindgen CLI,
#                           # wasm-opt (npm binaryen@132, into .tools/), protoc (Debian)
#   scripts/setup.sh test   # everything the test suite needs (adds wasm-pack from crates.io,
#                           # Chromium, etcd, PostgreSQL, Redis, and Bun and workerd from npm
#                           # into .tools/)
#
# protoc is in run mode because lock-server always links etcd-client, whose build compiles
# etcd's .proto files: the binary the run command starts keeps both backends, so a user who
# outgrows one machine points the same binary at etcd. Debian's protobuf-compiler is how the
# project installs every other system tool, hence it rather than a protoc from crates.io.
#
# Nothing here downloads a prebuilt binary from outside the package registries: Debian
# packages, crates.io (cargo install builds from source), npm and PyPI only.
#
# Two environment variables serve the test that the run command needs nothing from the test
# set-up (scripts/test-run.sh):
#   SETUP_APT_RECORD=FILE  append every Debian package asked for to FILE, one a line, whether
#                          or not it was installed already (missing ones are still installed);
#   SETUP_TOOLS_DIR=DIR    where the npm tools go (default .tools/; scripts/build-ui.sh reads it).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-test}"
case "$mode" in
  run | test) ;;
  *) echo "usage: scripts/setup.sh run|test" >&2; exit 2 ;;
esac
tools="${SETUP_TOOLS_DIR:-$PWD/.tools}"

log() { printf '\n== setup: %s\n' "$*"; }

apt_install() {
  [ -n "${SETUP_APT_RECORD:-}" ] && printf '%s\n' "$@" >>"$SETUP_APT_RECORD"
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The wasm-bindgen CLI must match the wasm-bindgen crate in Cargo.lock exactly, or the
# generated JS glue and the wasm disagree at load time.
lock_version() {
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

ensure_wasm_bindgen() {
  local want have
  want="$(lock_version wasm-bindgen)"
  have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
  if [ "$have" != "$want" ]; then
    log "cargo install wasm-bindgen-cli $want (about 2.5 minutes on 2 cores, once per machine)"
    # Not --locked: the CLI's own lock file pins a webpki-roots release the registry mirror
    # does not serve; the exact CLI version is what matters for compatibility.
    cargo install wasm-bindgen-cli --version "$want"
  fi
}

# wasm-pack runs the SDK's wasm-bindgen-test suites (scripts/test-wasm.sh, as
# lock-wasm/README.md gives them). From crates.io, pinned: the npm package `wasm-pack` fetches
# its binary from GitHub, which is unreachable here. It downloads nothing at test time either:
# the tests call it with `--mode no-install`, so it uses the wasm-bindgen CLI above (on PATH,
# the exact Cargo.lock version, or it stops) and `--chromedriver /usr/bin/chromedriver`
# (Debian's chromium-driver, below), and never adds a rustup target.
WASM_PACK_VERSION=0.15.1
ensure_wasm_pack() {
  [ "$(wasm-pack --version 2>/dev/null)" = "wasm-pack $WASM_PACK_VERSION" ] && return 0
  log "cargo install wasm-pack $WASM_PACK_VERSION (about 4-10 minutes on 2 cores, once per machine)"
  cargo install wasm-pack --version "$WASM_PACK_VERSION"
}

ensure_rust() {
  command -v cargo >/dev/null || { echo "setup: cargo is required (rustup)" >&2; exit 1; }
  rustup target list --installed | grep -qx wasm32-unknown-unknown \
    || { log "rustup target add wasm32-unknown-unknown"; rustup target add wasm32-unknown-unknown; }
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
}

ensure_node() {
  command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
}

# The dashboard is served optimised: scripts/build-ui.sh refuses a release build without
# this wasm-opt. npm's binaryen, never Debian's (its v108 wasm-opt emits wasm that fails to load).
ensure_wasm_opt() {
  [ -x "$tools/node_modules/.bin/wasm-opt" ] && return 0
  log "npm install binaryen@132 into $tools"
  npm install --silent --no-audit --no-fund --prefix "$tools" binaryen@132 >/dev/null
}

# The npm package's other runtimes under test. Both npm packages ship the runtime's binary
# (in @oven/bun-linux-x64 and @cloudflare/workerd-linux-64); pinned, so the suites run the
# versions the package README names.
BUN_VERSION=1.4.5
WORKERD_VERSION=1.20261117.1
ensure_js_runtimes() {
  [ "$("$tools/node_modules/.bin/bun" --version 2>/dev/null)" = "$BUN_VERSION" ] \
    && [ -f "$tools/node_modules/workerd/package.json" ] \
    && grep -q "\"version\": \"$WORKERD_VERSION\"" "$tools/node_modules/workerd/package.json" \
    && return 0
  log "npm install bun@$BUN_VERSION workerd@$WORKERD_VERSION into $tools"
  npm install --silent --no-audit --no-fund --prefix "$tools" \
    "bun@$BUN_VERSION" "workerd@$WORKERD_VERSION" >/dev/null
}

ensure_rust
ensure_node
[ -f Cargo.lock ] || cargo generate-lockfile
ensure_wasm_bindgen
ensure_wasm_opt
# protoc builds etcd-client, which lock-server always links (see the top of this file).
apt_install protobuf-compiler
if [ "$mode" = "test" ]; then
  # etcd is the scale-out backend under test; Chromium and its driver run the browser suites;
  # PostgreSQL and Redis are the fencing examples' real resources (scripts/test-examples.sh);
  # curl (HTTP/2) and openssl (certificate fingerprints) check the TLS server independently.
  apt_install etcd-server etcd-client chromium chromium-driver postgresql redis-server curl openssl
  # iproute2 (`ip`): the partition run builds its network of namespaces with it
  # (chaos/src/netns.rs); usually present, absent from minimal images.
  apt_install iproute2
  # nginx: the load-balancer guide's configuration runs in front of replicas (lb_nginx).
  apt_install nginx
  ensure_wasm_pack
  ensure_js_runtimes
fi
log "ready ($mode)"
