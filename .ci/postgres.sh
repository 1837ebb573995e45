#!/usr/bin/env bash
# A throwaway PostgreSQL server for the history tests: `source .ci/postgres.sh` starts one in a temp dir, as an
# unprivileged user when run as root (initdb refuses root), on a free loopback port, exports
# GPUPERF_TEST_POSTGRES_URL, and installs an EXIT trap that stops it and removes the directory on every path.
# It exits non-zero (so CI fails) when the server does not start.

gpuperf_pg_stop() {
    if [ -n "${GPUPERF_PG_DIR:-}" ] && [ -d "$GPUPERF_PG_DIR" ]; then
        gpuperf_pg_as pg_ctl -D "$GPUPERF_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$GPUPERF_PG_DIR"
    fi
}

gpuperf_pg_as() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$GPUPERF_PG_USER" -- "$@"
    else
        "$@"
    fi
}

gpuperf_pg_start() {
    command -v initdb >/dev/null && command -v pg_ctl >/dev/null || {
        echo "postgres.sh: initdb/pg_ctl not on PATH (PostgreSQL 15 server binaries needed)" >&2; return 1; }
    GPUPERF_PG_USER=nobody
    GPUPERF_PG_DIR=$(mktemp -d /tmp/gpuperf-pg.XXXXXX)
    trap gpuperf_pg_stop EXIT
    trap 'gpuperf_pg_stop; exit 143' INT TERM HUP
    chmod 755 "$GPUPERF_PG_DIR"
    [ "$(id -u)" = 0 ] && chown "$GPUPERF_PG_USER" "$GPUPERF_PG_DIR"
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    gpuperf_pg_as initdb -D "$GPUPERF_PG_DIR/data" -U gpuperf --auth=trust -E UTF8 >"$GPUPERF_PG_DIR/initdb.log" 2>&1 \
        || { cat "$GPUPERF_PG_DIR/initdb.log" >&2; return 1; }
    gpuperf_pg_as pg_ctl -D "$GPUPERF_PG_DIR/data" -l "$GPUPERF_PG_DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $GPUPERF_PG_DIR -c max_connections=100 -c fsync=off" start \
        >/dev/null || { cat "$GPUPERF_PG_DIR/server.log" >&2; return 1; }
    export GPUPERF_TEST_POSTGRES_URL="postgresql://gpuperf@127.0.0.1:$port/postgres"
    python3 -c 'import os, sqlalchemy as sa; u = os.environ["GPUPERF_TEST_POSTGRES_URL"].replace("postgresql://", "postgresql+psycopg://", 1); sa.create_engine(u).connect().close()' \
        || { echo "postgres.sh: the server started but does not accept connections" >&2; cat "$GPUPERF_PG_DIR/server.log" >&2; return 1; }
    echo "postgres.sh: PostgreSQL $(pg_ctl --version | awk '{print $3}') at $GPUPERF_TEST_POSTGRES_URL"
}
