#!/usr/bin/env bash
# Start a throw-away PostgreSQL + pgvector server on loopback for the tests; print its URL.
#
#   url=$(bash scripts/postgres-test-server.sh)      # e.g. postgresql://deltamem@127.0.0.1:54329/deltamem
#   export DELTAMEM_TEST_PG_URL="$url"
#   bash scripts/postgres-test-server.sh stop         # stop the server started before
#
# Where the server comes from. Debian bookworm ships `postgresql` (15) but no pgvector package
# (`postgresql-15-pgvector` exists only from trixie on; `apt-cache policy postgresql-15-pgvector`
# shows no candidate), so on bookworm the PostgreSQL 16 + pgvector 0.6.2 binaries of the PyPI
# wheel `pgserver` are used. When Debian does offer the pgvector package, Debian's server is used
# instead. The route taken is printed on stderr; if neither can be had the script fails.
#
# The cluster belongs to a non-root system user (PostgreSQL refuses to run as root) and lives in
# a temporary folder; it listens on 127.0.0.1 only, with trust authentication for that address.
# Logs and state go to $DELTAMEM_PG_DIR (default /tmp/deltamem-pg). Idempotent: when the server
# is already up, the script only prints the URL.
set -euo pipefail

PG_DIR=${DELTAMEM_PG_DIR:-/tmp/deltamem-pg}
PG_PORT=${DELTAMEM_PG_PORT:-54329}
PG_USER=deltamem-pg
DB=deltamem
URL="postgresql://deltamem@127.0.0.1:${PG_PORT}/${DB}"
PGSERVER_VERSION=0.1.4

log() { echo "postgres-test-server: $*" >&2; }

as_pg() { runuser -u "$PG_USER" -- "$@"; }

find_bin() {
  # Debian's server when its pgvector package is installable, else the pgserver wheel's.
  if [ -x /usr/lib/postgresql/15/bin/postgres ] && [ -f /usr/share/postgresql/15/extension/vector.control ]; then
    echo /usr/lib/postgresql/15/bin
    return
  fi
  if apt-cache policy postgresql-15-pgvector 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    log "installing Debian postgresql and postgresql-15-pgvector"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-15-pgvector >&2
    echo /usr/lib/postgresql/15/bin
    return
  fi
  log "Debian has no postgresql-15-pgvector here; using the pgserver==$PGSERVER_VERSION wheel (PostgreSQL 16 + pgvector)"
  if ! python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('pgserver') is None)"; then
    python -m pip install -q "pgserver==$PGSERVER_VERSION" >&2
  fi
  # The wheel sits under root's folder, which the server's user cannot enter: copy it out once
  # (the binaries find their libraries at $ORIGIN/../../../pgserver.libs, so keep that layout).
  local w="$PG_DIR/wheel"
  if [ ! -x "$w/pgserver/pginstall/bin/postgres" ]; then
    local site
    site=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('pgserver').origin).parent.parent)")
    rm -rf "$w.tmp"
    mkdir -p "$w.tmp/pgserver"
    cp -a "$site/pgserver/pginstall" "$w.tmp/pgserver/pginstall"
    cp -a "$site/pgserver.libs" "$w.tmp/pgserver.libs"
    chmod -R a+rX "$w.tmp"
    rm -rf "$w"
    mv "$w.tmp" "$w"
  fi
  echo "$w/pgserver/pginstall/bin"
}

if [ "${1:-start}" = "stop" ]; then
  if [ -f "$PG_DIR/bin" ] && [ -d "$PG_DIR/data" ]; then
    as_pg "$(cat "$PG_DIR/bin")/pg_ctl" -D "$PG_DIR/data" -m fast stop >&2 || true
  fi
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  log "run as root (it creates the system user $PG_USER and may apt-get install)"
  exit 2
fi
if [ -z "$(apt-cache policy postgresql 2>/dev/null)" ]; then
  apt-get update -qq >&2
fi
id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"

BIN=$(find_bin | tail -n 1)
[ -x "$BIN/postgres" ] || { log "no PostgreSQL binaries found (got '$BIN')"; exit 1; }
mkdir -p "$PG_DIR"
echo "$BIN" > "$PG_DIR/bin"
chown "$PG_USER" "$PG_DIR"
chmod 755 "$PG_DIR"

if as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; then
  echo "$URL"
  exit 0
fi
if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
  as_pg "$BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --no-instructions >&2
  cat >> "$PG_DIR/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
fi
as_pg "$BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start >&2
psql() { as_pg "$BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ -z "$(psql -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname = 'deltamem'")" ]; then
  psql -d postgres -c "CREATE ROLE deltamem LOGIN CREATEDB" >&2
fi
if [ -z "$(psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]; then
  psql -d postgres -c "CREATE DATABASE $DB OWNER deltamem" >&2
fi
psql -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS vector" >&2
log "server up (binaries: $BIN, data: $PG_DIR/data)"
echo "$URL"
