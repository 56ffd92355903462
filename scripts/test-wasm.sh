#!/usr/bin/env bash
# The lock-wasm (WebAssembly + npm) test suite, against a real lock-server:
#
#   scripts/test-wasm.sh
#
#   1. builds lock-server and lock-wasm's wasm32 test targets, then starts lock-server on
#      127.0.0.1 (random port, temp data dir) with CORS
#      allowing the origin of the wasm-bindgen-test-runner's browser page, plus a second one
#      killed -9 and restarted with a faked new boot id, so it holds back grants (L4 → 503
#      NOT_LEADER) for the rest of the run, a third with an auth file (the SDK's `token`
#      option, UNAUTHORIZED/FORBIDDEN) and a fourth serving https with a self-signed
#      certificate (--tls-self-signed);
#   2. wasm-bindgen-test suites of lock-wasm, with the two `wasm-pack test` commands of
#      lock-wasm/README.md (checked to be there as written): `--node` runs the unit tests in
#      src/ (the wire decoder, the trace context) and tests/wasm_node.rs in Node, and skips the
#      browser suite; `--headless --chrome` runs tests/web_browser.rs in headless Chromium and
#      skips the Node ones. `--mode no-install` and `--chromedriver` keep wasm-pack from
#      downloading anything: it uses the wasm-bindgen CLI and chromedriver setup installed;
#   3. builds and packs the npm package with the package README's own build command
#      (scripts/build-npm.sh, into target/npm), installs the tarball into a temp project and
#      runs the node:test suites (tests/node/*.test.*: among them the test kit's suite, its
#      scenarios against the real server, every README code block in the runtime it names,
#      and the workerd suite, tests/workerd/), `tsc --noEmit` on the TypeScript example, the
#      compiled example under Node, the package's browser entry in headless Chromium
#      (tests/node/browser-smoke.mjs), the smoke example, the TypeScript example and the test
#      kit's scenarios under Deno, and the `bun test` suites (tests/bun/); over https the
#      node:test suite https.test.mjs (Node with and without NODE_EXTRA_CA_CERTS) and the
#      smoke example under Deno with and without --cert; then, in a second project that also
#      has the OpenTelemetry API and SDK, the tracing suites (tests/node/otel-tracing.mjs, and
#      tests/node/otel-no-provider.mjs: the API without a provider, then one sampling nothing).
#
# Exits non-zero if any step fails; prints each runner's summary lines at the end.
# Installs what it needs on first use (binaryen and typescript from npm into .tools/, Bun and
# workerd through scripts/setup.sh test, deno from PyPI), so a second run only builds and tests.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tools="$root/.tools"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d /tmp/lock-wasm-test.XXXXXX)"
summary="$work/summary.txt"
failed=0
pids=()
url=""
page_port=""

log() { printf '\n== test-wasm: %s\n' "$*"; }
note() { printf '%s\n' "$*" >>"$summary"; }

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Runs a step, keeps its output in a log, and records its closing lines for the summary.
step() {
  local name="$1" pattern="$2"
  shift 2
  log "$name"
  local out="$work/$(echo "$name" | tr -c 'a-zA-Z0-9' '_').log"
  "$@" 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  note "--- $name: $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")"
  grep -E "$pattern" "$out" >>"$summary" || true
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

ensure_tools() {
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  command -v wasm-bindgen-test-runner >/dev/null || bash scripts/setup.sh run
  [ -x /usr/bin/chromedriver ] && [ -x "$tools/node_modules/.bin/bun" ] \
    && [ -x "$tools/node_modules/.bin/workerd" ] && command -v wasm-pack >/dev/null \
    || bash scripts/setup.sh test
  if [ ! -x "$tools/node_modules/.bin/tsc" ] || [ ! -x "$tools/node_modules/.bin/wasm-opt" ]; then
    log "npm install typescript@5 binaryen@132 into .tools/"
    npm install --silent --no-audit --no-fund --prefix "$tools" typescript@5 binaryen@132 >/dev/null
  fi
  if ! command -v deno >/dev/null; then
    log "pip install deno"
    python3 -m pip install --quiet deno
  fi
}

# Launches lock-server with the given extra flags; waits for its `listening` JSON line
# ({"event":"listening","addr":"127.0.0.1:N","scheme":"http"}); sets `url` and appends the
# pid to `pids`. For https, LAUNCH_CA names the certificate the health check trusts.
launch() {
  local log="$work/server-$((${#pids[@]} + 1)).log"
  "$CARGO_TARGET_DIR/debug/lock-server" --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  url=""
  for _ in $(seq 1 300); do
    local line scheme=http
    line="$(grep -m1 '"listening"' "$log")"
    [[ "$line" == *'"scheme":"https"'* ]] && scheme=https
    url="$(grep -oE '127\.0\.0\.1:[0-9]+' <<<"$line" | sed "s#^#$scheme://#")"
    [ -n "$url" ] && curl -sf ${LAUNCH_CA:+--cacert "$LAUNCH_CA"} "$url/healthz" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}

# Starts the servers. The browser suite's page is served by wasm-bindgen-test-runner on a
# port fixed in advance (WASM_BINDGEN_TEST_ADDRESS), so exactly its origin is allowed by CORS.
#   LOCK_URL               the main server;
#   LOCK_TEST_HOLDBACK_URL a server restarted after kill -9 with a different (faked) boot id:
#                          it holds back grants (L4 → 503 NOT_LEADER) for the largest TTL,
#                          5 minutes, which outlasts this whole suite.
start_servers() {
  log "cargo build -p lock-server"
  cargo build -q -p lock-server || return 1
  # The binary itself, for suites that start (and kill -9) servers of their own
  # (tests/node/service.test.mjs, through startServer in tests/node/helpers.mjs).
  export LOCK_SERVER_BIN="$CARGO_TARGET_DIR/debug/lock-server"
  # lock-wasm's wasm32 test targets and their dependencies, before any server starts: the
  # held-back server holds back for 5 minutes from its start, which a cold build of these on
  # a busy two-core machine can outlast. Once the servers are up, wasm-pack only rebuilds
  # the test crates, which read the servers' addresses at compile time.
  log "cargo build --tests --target wasm32-unknown-unknown (lock-wasm)"
  (cd lock-wasm && cargo build -q --tests --target wasm32-unknown-unknown) || return 1
  local runner_port origin
  runner_port="$(free_port)"
  export WASM_BINDGEN_TEST_ADDRESS="127.0.0.1:$runner_port"
  origin="http://127.0.0.1:$runner_port"
  # The browser smoke of the packed package serves its page on a port of its own.
  page_port="$(free_port)"
  # An admin token, so the test kit's scenarios can revoke (R1) against the real server.
  export LOCK_TEST_ADMIN_TOKEN="test-$RANDOM$RANDOM$RANDOM"
  launch --data-dir "$work/data" --cors-origin "$origin,http://127.0.0.1:$page_port" \
    --admin-token "$LOCK_TEST_ADMIN_TOKEN" || return 1
  export LOCK_URL="$url"
  # Its JSON log, where the tracing suite looks for the trace ids of its requests.
  export LOCK_LOG="$work/server-${#pids[@]}.log"
  export LOCK_TEST_PAGE_PORT="$page_port"

  echo boot-a >"$work/boot-id"
  launch --data-dir "$work/data-holdback" --boot-id-path "$work/boot-id" \
    --cors-origin "$origin" || return 1
  curl -sf -X POST "$url/v1/sessions" -H 'content-type: application/json' -d '{}' >/dev/null
  kill -9 "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null
  echo boot-b >"$work/boot-id"
  launch --data-dir "$work/data-holdback" --boot-id-path "$work/boot-id" \
    --cors-origin "$origin" || return 1
  export LOCK_TEST_HOLDBACK_URL="$url"

  # The package over https: Node trusts the certificate through NODE_EXTRA_CA_CERTS, Deno
  # through --cert (tests/node/https.test.mjs, deno_https).
  export LOCK_TLS_CA="$work/data-tls/self-signed-cert.pem"
  LAUNCH_CA="$LOCK_TLS_CA" launch --data-dir "$work/data-tls" --tls-self-signed || return 1
  export LOCK_TLS_URL="$url"
  log "lock-server at $LOCK_URL; held-back server at $LOCK_TEST_HOLDBACK_URL; https server at $LOCK_TLS_URL; CORS origin $origin"
}

# A server with an auth file of one client, `node`, whose keys start with `node/`; its token
# is random per run. Exports LOCK_AUTH_URL, LOCK_AUTH_TOKEN and LOCK_AUTH_PREFIX.
start_auth_server() {
  local token hash
  token="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
  hash="$(printf '%s\n' "$token" | "$CARGO_TARGET_DIR/debug/lock-server" hash-token)" || return 1
  printf '{"clients":[{"name":"node","tokenSha256":"%s","keyPrefixes":["node/"]}]}\n' "$hash" \
    >"$work/auth.json"
  launch --data-dir "$work/data-auth" --auth-file "$work/auth.json" || return 1
  export LOCK_AUTH_URL="$url" LOCK_AUTH_TOKEN="$token" LOCK_AUTH_PREFIX="node/"
  log "lock-server with an auth file at $LOCK_AUTH_URL"
}

# The wasm-bindgen-test suites, with lock-wasm/README.md's two commands ("By hand"). Each is
# one line there, and the environment variables it needs are named there too; both are
# checked before anything runs, so the README cannot drift from what runs. wasm-pack builds
# every test target of lock-wasm for wasm32 and runs them through wasm-bindgen-test-runner:
# the Node command runs the suites not configured for a browser (src/ unit tests,
# tests/wasm_node.rs), the Chromium command those that are (tests/web_browser.rs); the
# native-only test files have no wasm-bindgen tests ("no tests to run!"), and the one doc
# test (src/spawn.rs) is compiled for wasm32, which is all it checks there.
wasm_pack_node="wasm-pack test --mode no-install --node"
wasm_pack_chrome="wasm-pack test --mode no-install --headless --chrome --chromedriver /usr/bin/chromedriver"
readme_wasm_pack() {
  local readme=lock-wasm/README.md lines command var ok=0
  # The README's lines without their indent, read whole first: `sed | grep -q` under
  # pipefail fails when grep's early exit cuts sed's write short.
  lines="$(sed 's/^ *//' "$readme")" || return 1
  for command in "$wasm_pack_node" "$wasm_pack_chrome"; do
    grep -qxF -- "$command" <<<"$lines" \
      || { echo "$readme does not show: $command" >&2; ok=1; }
  done
  for var in LOCK_TEST_URL LOCK_TEST_HOLDBACK_URL WASM_BINDGEN_TEST_ADDRESS WASM_BINDGEN_TEST_TIMEOUT; do
    grep -q "$var" "$readme" || { echo "$readme does not name $var" >&2; ok=1; }
  done
  return "$ok"
}

wasm_bindgen_tests() {
  readme_wasm_pack || return 1
  # LOCK_TEST_URL and LOCK_TEST_HOLDBACK_URL are read at compile time (option_env!) by the
  # test crates, the same for both commands (so the second builds nothing new); the
  # held-back server's URL and the browser page's address, WASM_BINDGEN_TEST_ADDRESS, are
  # exported by start_servers. Both commands run, whatever the first gave.
  (
    cd lock-wasm || exit 1
    export LOCK_TEST_URL="$LOCK_URL" WASM_BINDGEN_TEST_TIMEOUT=120
    rc=0
    $wasm_pack_node || rc=1
    $wasm_pack_chrome || rc=1
    exit "$rc"
  )
}

# A temp project with the packed tarball installed, the way a user installs it.
install_package() {
  local project="$work/project"
  mkdir -p "$project"
  cp tests/node/*.mjs tests/node/*.cjs tests/node/*.ts tests/node/tsconfig*.json \
    tests/bun/*.js tests/workerd/* "$project/"
  printf '{ "name": "lock-wasm-consumer", "private": true, "type": "module" }\n' >"$project/package.json"
  (cd "$project" && npm install --silent --no-audit --no-fund --offline "$tarball") || return 1
  echo "$project"
}

# A second consumer project that also has the OpenTelemetry API and SDK (pinned; the API
# 1.9 line is the newest SDK 2.x accepts), for the tracing suite. The project above has
# none, so every other suite shows the package unchanged without it.
install_otel_project() {
  local project="$work/project-otel"
  mkdir -p "$project"
  cp tests/node/helpers.mjs tests/node/otel-tracing.mjs tests/node/otel-no-provider.mjs "$project/"
  printf '{ "name": "lock-wasm-otel-consumer", "private": true, "type": "module" }\n' >"$project/package.json"
  (cd "$project" && npm install --silent --no-audit --no-fund --prefer-offline "$tarball" \
    @opentelemetry/api@1.9.1 @opentelemetry/sdk-trace-base@2.12.1 \
    @opentelemetry/context-async-hooks@2.12.1) || return 1
  echo "$project"
}

otel_tests() {
  (cd "$1" && node --test --test-timeout=300000 --test-force-exit otel-tracing.mjs otel-no-provider.mjs)
}

# The runtimes the README's blocks and the workerd suite run in, for the node:test suites.
node_tests() {
  (cd "$1" && BUN="$tools/node_modules/.bin/bun" WORKERD="$tools/node_modules/.bin/workerd" \
    CHROMIUM=/usr/bin/chromium README_TARBALL="$tarball" \
    node --test --test-concurrency=1 --test-timeout=300000 --test-force-exit ./*.test.mjs ./*.test.cjs)
}

bun_tests() {
  (cd "$1" && "$tools/node_modules/.bin/bun" test ./bun-kit.test.js ./bun-lock.test.js)
}

deno_kit() {
  (cd "$1" && NO_COLOR=1 deno test --quiet --no-check --allow-read --allow-env deno-kit.mjs)
}

# The package README's build command (its `sh-checkout` block), run as written in the
# checkout: it writes target/npm/.
readme_build() {
  local command
  command="$(node tests/node/readme-blocks.mjs lock-wasm/npm/README.md sh-checkout)" || return 1
  [ -n "$command" ] || { echo "no sh-checkout block in the package README" >&2; return 1; }
  rm -f target/npm/lock-wasm-*.tgz
  bash -euo pipefail -c "$command"
}

# The example (with `await using`) and a plain-`lib` project both type-check.
typescript_check() {
  (cd "$1" && "$tools/node_modules/.bin/tsc" --noEmit -p tsconfig.json \
    && "$tools/node_modules/.bin/tsc" -p tsconfig.plain.json && echo "tsc --noEmit: 0 errors")
}

typescript_example() {
  (cd "$1" && "$tools/node_modules/.bin/tsc" -p tsconfig.json && node out/example.js)
}

browser_smoke() {
  (cd "$1" && node browser-smoke.mjs "$page_port")
}

deno_smoke() {
  (cd "$1" && deno run --quiet --allow-net=127.0.0.1 --allow-read --allow-env smoke.mjs)
}

# Deno runs the TypeScript example as-is, with native `await using`.
deno_example() {
  (cd "$1" && deno run --quiet --allow-net=127.0.0.1 --allow-read --allow-env example.ts)
}

# The smoke example over https under Deno: it runs with --cert naming the server's
# certificate, and is refused without it.
deno_https() {
  local smoke=(--quiet --allow-net=127.0.0.1 --allow-read --allow-env smoke.mjs)
  (cd "$1" && LOCK_URL="$LOCK_TLS_URL" deno run --cert "$LOCK_TLS_CA" "${smoke[@]}") || return 1
  if (cd "$1" && LOCK_URL="$LOCK_TLS_URL" deno run "${smoke[@]}") >"$work/deno-untrusted.log" 2>&1; then
    echo "Deno trusted an unknown certificate"
    return 1
  fi
  grep -qi certificate "$work/deno-untrusted.log" || { cat "$work/deno-untrusted.log"; return 1; }
  echo "deno https ok: trusted with --cert, refused without"
}

ensure_tools
: >"$summary"
start_servers || { echo "test-wasm: lock-server did not start" >&2; exit 1; }
start_auth_server || { echo "test-wasm: lock-server with an auth file did not start" >&2; exit 1; }
step "wasm-pack test (Node + headless Chromium)" '^ *(Running (unittests|tests/)|Doc-tests)|^test result:' wasm_bindgen_tests
step "build npm package (the README's command)" '^wasm size|\.tgz$' readme_build
tarball="$(ls "$root"/target/npm/lock-wasm-*.tgz 2>/dev/null | head -1)"
if [ -n "$tarball" ] && project="$(install_package)"; then
  step "node:test (packed tarball)" '^# (tests|pass|fail|cancelled|skipped)' node_tests "$project"
  step "tsc --noEmit (TypeScript example)" 'error TS|0 errors' typescript_check "$project"
  step "TypeScript example under Node (await using)" '^example ok' typescript_example "$project"
  step "browser smoke (packed package, headless Chromium)" '^browser smoke' browser_smoke "$project"
  step "Deno smoke" '^smoke ok' deno_smoke "$project"
  step "Deno TypeScript example (native await using)" '^example ok' deno_example "$project"
  step "Deno over https (--cert)" '^deno https' deno_https "$project"
  if otel_project="$(install_otel_project)"; then
    step "OpenTelemetry tracing (packed tarball + @opentelemetry/api)" '^# (tests|pass|fail)' \
      otel_tests "$otel_project"
  else
    note "--- install OpenTelemetry project: FAILED"
    failed=1
  fi
  step "Deno test kit scenarios" '^(ok|FAILED) \|' deno_kit "$project"
  step "bun test (Bun)" '^ *[0-9]+ (pass|fail)$|^Ran ' bun_tests "$project"
else
  note "--- install packed tarball: FAILED"
  failed=1
fi

printf '\n== test-wasm summary\n'
cat "$summary"
if [ "$failed" -ne 0 ]; then
  echo "test-wasm: FAILED"
  exit 1
fi
echo "test-wasm: all suites passed"
