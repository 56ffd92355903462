#!/usr/bin/env bash
# The shell job recipe against real PostgreSQL and a real lock-server, through lockctl
# (run by scripts/test-examples.sh, which starts both and exports LOCK_URL and PG*):
#
#   LOCKCTL=target/debug/lockctl examples/fencing-shell/test.sh
#
# 1. Two jobs under the lock write in turn; the second's token is higher, and the row holds
#    its value and token.
# 2. A job whose token is stale (a paused job coming back, here its token replayed by hand)
#    is fenced out with status 3 and leaves the row as it was.
set -euo pipefail
cd "$(dirname "$0")"
: "${LOCKCTL:?the lockctl binary}" "${LOCK_URL:?}" "${PGHOST:?}"
fail() { echo "fencing-shell: $*" >&2; exit 1; }
row() { psql -X -qtA -F ' ' -c "SELECT value, fencing_token FROM documents WHERE key = 'shell/report'"; }

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE IF NOT EXISTS documents (
  key text PRIMARY KEY, value text NOT NULL, fencing_token bigint NOT NULL)"
psql -X -q -c "DELETE FROM documents WHERE key = 'shell/report'"

"$LOCKCTL" exec shell/report -- ./job.sh first
read -r value first < <(row)
[ "$value" = first ] || fail "the first job's write is missing: $(row)"
"$LOCKCTL" exec shell/report -- ./job.sh second
read -r value second < <(row)
[ "$value" = second ] && [ "$second" -gt "$first" ] || fail "the second job did not write with a higher token: $(row)"
echo "ok: two jobs under the lock wrote in turn (tokens $first, $second)"

status=0
LOCK_KEY=shell/report LOCK_FENCING_TOKEN="$first" ./job.sh stale 2>/dev/null || status=$?
[ "$status" -eq 3 ] || fail "a stale token was not fenced out (status $status)"
[ "$(row)" = "second $second" ] || fail "the stale write left a trace: $(row)"
echo "ok: a stale token is fenced out (status 3) and the row is unchanged"
