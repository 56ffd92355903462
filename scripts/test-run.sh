#!/usr/bin/env bash
# The run command, tested as a new user meets it (scripts/test.sh's `run` stage):
#
#   scripts/test-run.sh
#
# 1. Nothing the test set-up installs is in reach: a temp dir of symlinks to every command on
#    PATH except those of the Debian packages `scripts/setup.sh test` asks for (protoc, etcd,
#    etcdctl, chromium, chromedriver) and deno stands in for PATH (nothing is uninstalled),
#    and the npm tools go to an empty temp dir instead of .tools/ (SETUP_TOOLS_DIR).
# 2. `scripts/setup.sh run` under that PATH, recording the Debian packages it asks for
#    (SETUP_APT_RECORD); only the commands of those packages are then added to the PATH. A
#    run mode that forgot one fails the build below.
# 3. A warm target dir would skip a build step that needs such a tool: the release artifacts
#    of etcd-client, whose build script runs protoc, are removed first, so it runs again.
# 4. tests/browser/run-smoke.mjs starts scripts/run.sh under that PATH, as the README gives
#    it, and checks the dashboard, a clean SIGINT stop and a clean restart.
# Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
work="$(mktemp -d /tmp/run-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
bin="$work/bin"

log() { printf '\n== test-run: %s\n' "$*"; }

# The commands Debian packages put on PATH.
commands_of() {
  local pkg
  for pkg in "$@"; do dpkg -L "$pkg" 2>/dev/null; done | grep -E '^(/usr)?(/local)?/s?bin/[^/]+$' | sort -u
}

# $bin: a symlink to the first command of each name on PATH, except those named in $1 or
# resolving to one of them (an alias such as x-www-browser -> chromium).
filtered_path() {
  local hidden=" $1 " dir f name
  mkdir -p "$bin"
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    [ -d "$dir" ] || continue
    for f in "$dir"/*; do
      name="${f##*/}"
      [ -x "$f" ] && [ ! -d "$f" ] && [ ! -e "$bin/$name" ] || continue
      case "$hidden" in *" $name "* | *" $(readlink -f "$f") "*) continue ;; esac
      ln -s "$f" "$bin/$name"
    done
  done
}

if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --silent) || exit 1
fi

log "hide what the test set-up installs"
# The Debian packages test mode asks for: those it asked for when this was written, plus
# whatever it asks for now.
printf '%s\n' protobuf-compiler etcd-server etcd-client chromium chromium-driver >"$work/test-packages"
SETUP_APT_RECORD="$work/test-packages" scripts/setup.sh test >/dev/null || exit 1
mapfile -t test_commands < <(commands_of $(sort -u "$work/test-packages"))
hidden=(deno)
for cmd in "${test_commands[@]}"; do hidden+=("${cmd##*/}" "$(readlink -f "$cmd")"); done
filtered_path "${hidden[*]}"
for name in protoc etcd chromium; do
  if PATH="$bin" command -v "$name" >/dev/null; then
    echo "test-run: $name is still on the filtered PATH" >&2
    exit 1
  fi
done
echo "hidden: ${hidden[*]}"

log "scripts/setup.sh run, under that PATH"
PATH="$bin" SETUP_APT_RECORD="$work/run-packages" SETUP_TOOLS_DIR="$work/tools" \
  scripts/setup.sh run || exit 1
touch "$work/run-packages"
mapfile -t run_packages < <(sort -u "$work/run-packages")
for cmd in $(commands_of "${run_packages[@]}"); do ln -sfn "$cmd" "$bin/${cmd##*/}"; done
echo "run mode asked for: ${run_packages[*]:-no Debian package} (only their commands are back on the PATH)"

log "cargo clean --release -p etcd-client (its build script runs protoc)"
cargo clean -q --release -p etcd-client || exit 1

log "scripts/run.sh under that PATH (tests/browser/run-smoke.mjs)"
PATH="$bin" SETUP_TOOLS_DIR="$work/tools" node tests/browser/run-smoke.mjs --work "$work"
