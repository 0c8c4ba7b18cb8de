#!/usr/bin/env bash
# Failover drill (docs/drill.md): builds ./bin/spine and ./bin/spine-drill,
# starts a NODES-node cluster (default 3), runs producers and workers through
# the Go client, SIGKILLs the leader KILLS times (default 10), drains, and
# verifies nothing acknowledged was lost or completed twice and that every
# node agrees. Prints a report; exits non-zero on any violation.
#
#   scripts/failover-drill.sh                 # 3 nodes, 10 kills
#   NODES=5 KILLS=5 scripts/failover-drill.sh
#   SEED=1234 scripts/failover-drill.sh       # replay a seed
#   scripts/failover-drill.sh --json          # extra flags go to spine-drill
#
# Env read by spine-drill: NODES, KILLS, SEED, PRODUCERS, WORKERS, TIMEOUT
# (hard bound, default 10m), KILL_GAP_MIN/MAX, DRAIN_TIMEOUT, KEEP=1, JSON=1.
# BIN (default ./bin/spine) is where the spine binary is built.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-./bin/spine}
mkdir -p bin "$(dirname "$BIN")"
echo "building $BIN and bin/spine-drill..." >&2
go build -o "$BIN" ./cmd/spine
go build -o bin/spine-drill ./cmd/spine-drill

# The drill stops its own cluster (by pid) on SIGINT/SIGTERM; forward the
# signal to it and wait, so no node outlives this script. The nodes also
# carry a parent-death SIGKILL should the drill itself be killed.
drill_pid=""
forward() {
  sig=$1
  if [ -n "$drill_pid" ]; then
    kill "-$sig" "$drill_pid" 2>/dev/null || true
  fi
}
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward TERM' HUP

./bin/spine-drill --binary "$BIN" "$@" &
drill_pid=$!
rc=0
# wait returns early (status > 128) when a trapped signal arrives: wait again
# while the drill is still shutting its cluster down.
while :; do
  set +e
  wait "$drill_pid"
  rc=$?
  set -e
  if [ "$rc" -gt 128 ] && kill -0 "$drill_pid" 2>/dev/null; then
    continue
  fi
  break
done
exit "$rc"
