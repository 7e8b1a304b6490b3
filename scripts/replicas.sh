#!/usr/bin/env bash
# Start PostgreSQL (the test server script) and N `deltamem serve` replicas on loopback, to try
# several service processes on one database. Everything listens on 127.0.0.1 only.
#
#   bash scripts/replicas.sh [N]        # start (default 2); prints the URLs and an API key
#   bash scripts/replicas.sh stop       # stop the replicas started before (PostgreSQL stays up;
#                                       # `bash scripts/postgres-test-server.sh stop` stops it)
#
# Replica i listens on port $((DELTAMEM_REPLICA_PORT + i)) (default 8100, 8101, ...); its log,
# pid and the key file are under $DELTAMEM_REPLICA_DIR (default /tmp/deltamem-replicas).
# DELTAMEM_REPLICA_EMBEDDER picks the embedder (default minilm, the bundled model; hashing:256
# needs no model). Any replica serves any bank: a learn's write decision is serialised across
# them by the bank's advisory lock in PostgreSQL (see docs/design-notes.md).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${DELTAMEM_REPLICA_DIR:-/tmp/deltamem-replicas}
BASE=${DELTAMEM_REPLICA_PORT:-8100}
EMBEDDER=${DELTAMEM_REPLICA_EMBEDDER:-minilm}
TENANT=${DELTAMEM_REPLICA_TENANT:-demo}

stop() {
  shopt -s nullglob
  for f in "$DIR"/replica-*.pid; do
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" && echo "stopped replica pid $pid" >&2
    fi
    rm -f "$f"
  done
}

if [ "${1:-}" = "stop" ]; then
  stop
  exit 0
fi
N=${1:-2}
case "$N" in ''|*[!0-9]*) echo "usage: $0 [N] | stop" >&2; exit 2 ;; esac

url=$(bash scripts/postgres-test-server.sh)
mkdir -p "$DIR"
stop
rm -f "$DIR/keys.json"
key=$(python -m deltamem api-key "$TENANT" --keys "$DIR/keys.json")
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  nohup python -m deltamem serve "$url" --keys "$DIR/keys.json" --host 127.0.0.1 \
    --port "$port" --embedder "$EMBEDDER" >"$DIR/replica-$i.log" 2>&1 &
  echo $! >"$DIR/replica-$i.pid"
done
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  for _ in $(seq 1 120); do
    if python -c "import httpx, sys; sys.exit(httpx.get('http://127.0.0.1:$port/healthz', timeout=2).status_code != 200)" 2>/dev/null; then
      break
    fi
    if ! kill -0 "$(cat "$DIR/replica-$i.pid")" 2>/dev/null; then
      echo "replica $i exited; its log:" >&2
      cat "$DIR/replica-$i.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "replica $i: http://127.0.0.1:$port"
done
echo "database: $url"
echo "tenant $TENANT, API key: $key"
echo "try:  curl -s -H 'X-API-Key: $key' http://127.0.0.1:$BASE/v1/banks"
