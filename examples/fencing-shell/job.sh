#!/bin/sh
# A shell job's fenced write to PostgreSQL. Run it under the lock:
#
#   lockctl exec "$KEY" -- examples/fencing-shell/job.sh VALUE
#
# lockctl puts the lock's key and fencing token in LOCK_KEY and LOCK_FENCING_TOKEN. The
# write is the one statement of the PostgreSQL recipe (docs/fencing.md): the row is written
# only if no higher token wrote it first. psql reads the connection from the PG*
# variables. Exit status 3: fenced out (a newer holder wrote; never retry).
set -eu
value="$1"
written="$(psql -X -v ON_ERROR_STOP=1 -qtA \
  -v key="$LOCK_KEY" -v token="$LOCK_FENCING_TOKEN" -v value="$value" <<'SQL'
INSERT INTO documents (key, value, fencing_token) VALUES (:'key', :'value', :'token')
ON CONFLICT (key) DO UPDATE
  SET value = EXCLUDED.value, fencing_token = EXCLUDED.fencing_token
  WHERE documents.fencing_token <= EXCLUDED.fencing_token
RETURNING 1;
SQL
)"
if [ "$written" != 1 ]; then
  echo "fenced out: token $LOCK_FENCING_TOKEN of $LOCK_KEY is below the one that wrote last" >&2
  exit 3
fi
