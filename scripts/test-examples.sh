#!/usr/bin/env bash
# The fencing examples (examples/fencing-*) and the fenced leader election
# (examples/election-postgres), each against a real server of its kind:
#
#   scripts/test-examples.sh
#
#   1. builds lock-server and the npm package (scripts/build-npm.sh → target/npm/, the
#      tarball the examples' package.json points at);
#   2. starts private instances on free loopback ports, each with a temp data dir: a
#      lock-server, Debian's PostgreSQL (initdb + postgres as an unprivileged user when run
#      as root: PostgreSQL refuses root) and Debian's redis-server (no persistence);
#   3. in each example: `npm ci` (pinned dependencies, the lock-wasm tarball just built) and
#      `npm test` (node:test: the fencing rule against the resource, then the paused-worker
#      scenario through real worker processes; election-postgres: a frozen leader's late
#      write refused by PostgreSQL after a second service process took over).
#
# Every process it starts is stopped on exit, failure and Ctrl-C included. Exits non-zero if
# any example fails. The system packages (Node, PostgreSQL, redis-server) come from
# `scripts/setup.sh test`, which scripts/test.sh runs first.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d /tmp/fencing-examples.XXXXXX)"
pids=()
pg_pid=""
failed=0

log() { printf '\n== test-examples: %s\n' "$*"; }

cleanup() {
  local pid
  # PostgreSQL's SIGTERM waits for its clients to disconnect; SIGINT disconnects them.
  [ -n "$pg_pid" ] && kill -INT "$pg_pid" 2>/dev/null
  for pid in "${pids[@]}"; do
    # Each example's tests run in a process group of their own (setsid): signal the whole
    # group, and wake stopped workers (SIGCONT) so that they can act on the SIGTERM.
    kill -TERM -- "-$pid" 2>/dev/null
    kill -CONT -- "-$pid" 2>/dev/null
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}" $pg_pid; do
    wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Polls `check` (a command) every 0.1 s until it succeeds, the process `pid` dies, or 600
# polls pass (a generous bound for a loaded machine; a healthy start takes a second or two).
await_ready() {
  local pid="$1"
  shift
  for _ in $(seq 1 600); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# PostgreSQL refuses to run as root: as root, initdb and the server run as `nobody`, in a
# directory that user owns. A command prefix (an array), so that a backgrounded server's pid
# is the server's own.
db_user=()
[ "$(id -u)" -eq 0 ] && db_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env --)

pg_bin() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -n "$dir" ] || { echo "test-examples: PostgreSQL not installed (scripts/setup.sh test)" >&2; return 1; }
  echo "$dir"
}

# A throw-away cluster: trust auth on 127.0.0.1 only, no Unix socket, fsync off (nothing
# here tests durability; the examples test the atomicity of one statement).
start_postgres() {
  local bin dir port pid
  bin="$(pg_bin)" || return 1
  dir="$work/postgres"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown nobody:nogroup "$dir"
  chmod 755 "$work"
  "${db_user[@]}" "$bin/initdb" -D "$dir/data" -U fencing --auth=trust -E UTF8 --no-sync \
    >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; return 1; }
  for _ in 1 2 3 4 5; do # a free port can be taken between the probe and the bind: retry
    port="$(free_port)"
    "${db_user[@]}" "$bin/postgres" -D "$dir/data" -p "$port" -c listen_addresses=127.0.0.1 \
      -c unix_socket_directories= -c fsync=off >"$work/postgres.log" 2>&1 &
    pid=$!
    if await_ready "$pid" pg_isready -q -h 127.0.0.1 -p "$port" -U fencing -d postgres; then
      pg_pid="$pid"
      export PGHOST=127.0.0.1 PGPORT="$port" PGUSER=fencing PGDATABASE=postgres
      return 0
    fi
    kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  cat "$work/postgres.log" >&2
  return 1
}

start_redis() {
  local port pid
  for _ in 1 2 3 4 5; do
    port="$(free_port)"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$work" >"$work/redis.log" 2>&1 &
    pid=$!
    if await_ready "$pid" redis-cli -h 127.0.0.1 -p "$port" ping; then
      pids+=("$pid")
      export REDIS_URL="redis://127.0.0.1:$port"
      return 0
    fi
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  cat "$work/redis.log" >&2
  return 1
}

lock_server_url() {
  grep -m1 '"listening"' "$work/lock-server.log" | grep -oE '127\.0\.0\.1:[0-9]+' | sed 's#^#http://#'
}

lock_server_healthy() {
  local url
  url="$(lock_server_url)"
  [ -n "$url" ] && curl -sf "$url/healthz"
}

# Port 0: the server picks a free port and prints it in its `listening` JSON line.
start_lock_server() {
  "$CARGO_TARGET_DIR/debug/lock-server" --listen 127.0.0.1:0 --data-dir "$work/lock-data" \
    >"$work/lock-server.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  await_ready "$pid" lock_server_healthy || { cat "$work/lock-server.log" >&2; return 1; }
  export LOCK_URL
  LOCK_URL="$(lock_server_url)"
}

# One example: install exactly what its lock file pins plus the tarball just built, then its
# tests, in a process group of their own so that cleanup reaches stopped workers too.
run_example() {
  local dir="examples/$1"
  log "$dir: npm ci"
  (cd "$dir" && npm ci --no-audit --no-fund --silent) || return 1
  # The lock file must not pin the local tarball's checksum: npm would install a cached
  # older build under it. Check that the SDK installed is the one just built.
  cmp -s "$dir/node_modules/lock-wasm/node/lock_wasm_bg.wasm" "$npm_out/package/node/lock_wasm_bg.wasm" \
    || { echo "test-examples: $dir installed a stale lock-wasm (package-lock.json integrity?)" >&2; return 1; }
  log "$dir: npm test"
  (cd "$dir" && exec setsid npm test) &
  local pid=$!
  pids+=("$pid")
  wait "$pid"
}

log "cargo build -p lock-server -p lockctl"
cargo build -q -p lock-server -p lockctl || exit 1
log "scripts/build-npm.sh"
npm_out="$root/target/npm"
bash scripts/build-npm.sh "$npm_out" || exit 1
start_lock_server || { echo "test-examples: lock-server did not start" >&2; exit 1; }
start_postgres || { echo "test-examples: PostgreSQL did not start" >&2; exit 1; }
start_redis || { echo "test-examples: redis-server did not start" >&2; exit 1; }
log "lock-server $LOCK_URL; PostgreSQL 127.0.0.1:$PGPORT; Redis $REDIS_URL"

results=()
for example in fencing-postgres fencing-redis fencing-http election-postgres; do
  if run_example "$example"; then
    results+=("$example: ok")
  else
    results+=("$example: FAILED")
    failed=$((failed + 1))
  fi
done

# The shell job recipe: lockctl and psql, no npm.
log "examples/fencing-shell: test.sh"
if LOCKCTL="$CARGO_TARGET_DIR/debug/lockctl" examples/fencing-shell/test.sh; then
  results+=("fencing-shell: ok")
else
  results+=("fencing-shell: FAILED")
  failed=$((failed + 1))
fi

printf '\n== test-examples summary\n'
printf '%s\n' "${results[@]}"
echo "examples: $((${#results[@]} - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
