#!/usr/bin/env bash
# Makes sure a local PostgreSQL cluster runs and has a role the tests may create databases
# with; prints `export BROWSERD_TEST_PG_URL=...` for the caller to eval. Needs root.
set -euo pipefail
# Only the export line goes to stdout (the caller evals it); everything the PostgreSQL tools
# print (pg_ctlcluster says "Removed stale pid file." on a fresh machine) goes to stderr.
exec 3>&1 1>&2
if [ "$(id -u)" != "0" ]; then
  echo "setup-postgres: run as root (or export BROWSERD_TEST_PG_URL yourself)" >&2
  exit 1
fi
ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^$ver main$"; then
  pg_createcluster "$ver" main >/dev/null 3>&-
fi
if ! pg_lsclusters -h | awk '$1=="'"$ver"'" && $2=="main" {print $4}' | grep -q online; then
  pg_ctlcluster "$ver" main start 3>&-   # the server must not inherit the caller's pipe
fi
port=$(pg_lsclusters -h | awk '$1=="'"$ver"'" && $2=="main" {print $3}')
for _ in $(seq 1 50); do
  runuser -u postgres -- psql -p "$port" -qtAc 'select 1' >/dev/null 2>&1 && break
  sleep 0.2
done
runuser -u postgres -- psql -p "$port" -qtAc "DO \$\$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='browserd_test') THEN
    CREATE ROLE browserd_test LOGIN CREATEDB PASSWORD 'browserd_test';
  END IF;
END\$\$;" >/dev/null
echo "export BROWSERD_TEST_PG_URL=postgres://browserd_test:browserd_test@127.0.0.1:$port/postgres" >&3
