#!/usr/bin/env bash
# Property-based API fuzzing of lock-server with schemathesis (PyPI), from its own
# /openapi.json: >= 1000 generated cases (positive and negative), checked for
#   - not_a_server_error           (0 responses of 5xx)
#   - response_schema_conformance  (bodies match the documented schema)
#   - status_code_conformance      (only documented statuses)
#   - content_type_conformance     (documented content types)
#
# Usage: scripts/schemathesis.sh [MAX_EXAMPLES_PER_OPERATION]   (default 120)
# Env:   LOCK_SERVER_BIN  use this binary instead of building one
#        CARGO_TARGET_DIR where to build (default target/)
#        SCHEMATHESIS_SEED (default 1)
# Exit status: schemathesis's (0 = every check passed), or 1 if < 1000 cases ran.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
EXAMPLES="${1:-120}"
SEED="${SCHEMATHESIS_SEED:-1}"
VENV="$ROOT/.tools/schemathesis-venv"
ADMIN_TOKEN="schemathesis-admin"

if [ ! -x "$VENV/bin/schemathesis" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q schemathesis
fi

if [ -z "${LOCK_SERVER_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q -p lock-server --bin lock-server)
  LOCK_SERVER_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/lock-server"
fi

WORK="$(mktemp -d /tmp/schemathesis-XXXXXX)"
cleanup() {
  if [ -n "${SERVER_PID:-}" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

"$LOCK_SERVER_BIN" --listen 127.0.0.1:0 --data-dir "$WORK/data" --admin-token "$ADMIN_TOKEN" \
  >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
ADDR=""
for _ in $(seq 1 300); do
  ADDR="$(grep -o '"addr":"[^"]*"' "$WORK/server.out" 2>/dev/null | head -1 | cut -d'"' -f4 || true)"
  [ -n "$ADDR" ] && break
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "lock-server did not start"; cat "$WORK/server.err"; exit 1; }
BASE="http://$ADDR"
echo "lock-server at $BASE (data in $WORK)"

set +e
"$VENV/bin/schemathesis" run "$BASE/openapi.json" \
  --url "$BASE" \
  --checks not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance \
  --max-examples "$EXAMPLES" \
  --seed "$SEED" \
  --generation-database none \
  --phases examples,coverage,fuzzing \
  -H "Authorization: Bearer $ADMIN_TOKEN" \
  --report ndjson --report-ndjson-path "$WORK/events.ndjson" \
  --no-color 2>&1 | tee "$WORK/schemathesis.txt"
STATUS=${PIPESTATUS[0]}
set -e

# Count generated cases from the summary line "Test cases:  N generated, ...".
CASES="$(grep -A1 '^Test cases:' "$WORK/schemathesis.txt" | grep -o '[0-9]* generated' | grep -o '[0-9]*' || echo 0)"
echo "generated test cases: $CASES"
if kill -0 "$SERVER_PID" 2>/dev/null; then echo "server still up after the run"; else echo "SERVER DIED"; STATUS=1; fi
if [ "$CASES" -lt 1000 ]; then echo "fewer than 1000 cases ran"; exit 1; fi
exit "$STATUS"
