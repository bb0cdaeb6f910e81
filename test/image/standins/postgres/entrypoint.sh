#!/bin/sh
set -eu
password=${POSTGRES_PASSWORD:-}
[ -n "${POSTGRES_PASSWORD_FILE:-}" ] && password=$(cat "$POSTGRES_PASSWORD_FILE")
user=${POSTGRES_USER:-postgres}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$password" > /tmp/pwfile
  initdb -D "$PGDATA" -U "$user" --pwfile=/tmp/pwfile --auth=scram-sha-256 >/dev/null
  rm -f /tmp/pwfile
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start >/dev/null
  [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != "$user" ] && PGPASSWORD=$password psql -h /var/run/postgresql -p "${PGPORT:-5432}" -U "$user" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  [ "${POSTGRES_DB:-$user}" = "$user" ] && PGPASSWORD=$password psql -h /var/run/postgresql -p "${PGPORT:-5432}" -U "$user" -d postgres -c "CREATE DATABASE \"$user\"" >/dev/null 2>&1 || true
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -p "${PGPORT:-5432}"
