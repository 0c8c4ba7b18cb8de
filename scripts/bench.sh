#!/usr/bin/env bash
# `make bench`: builds bin/spine and bin/spine-bench, then runs
# `bin/spine-bench --local`, which
# starts a 3-node cluster of real processes (internal/testcluster) in a temp
# dir on 127.0.0.1, runs phases A create / B lifecycle / C mixed (defaults:
# 20000 jobs, 16 producers, 16 workers, 256-byte payload, the
# shape of the NATS comparison in docs/performance.md), stops the nodes by pid and removes the temp dir.
# The last line of output is one JSON object; the exit status is non-zero on
# any error or lost job.
#
# Extra arguments go to `spine-bench`, e.g.  scripts/bench.sh --jobs 5000
# Env: BIN (default ./bin/spine), NODES (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-./bin/spine}
NODES=${NODES:-3}
mkdir -p "$(dirname "$BIN")"
BENCH="$(dirname "$BIN")/spine-bench"
go build -o "$BIN" ./cmd/spine
go build -o "$BENCH" ./cmd/spine-bench
exec "$BENCH" --local "$NODES" --binary "$BIN" "$@"
