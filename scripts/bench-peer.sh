#!/usr/bin/env bash
# `make bench-peer`: Spine next to NATS JetStream on this machine, in one
# command. ROUNDS rounds of three runs, each with JOBS jobs: natsbench (a
# 3-node JetStream cluster with NATS's default sync, which acknowledges a
# write before it is fsynced), `bin/spine-bench --local 3` (3 spine nodes,
# every write fsynced) and `natsbench -sync always` (JetStream fsyncing every
# write). Each round starts one system further along than the round before
# (NATS default, Spine, sync always; then Spine, sync always, NATS default;
# …), so no system always runs first on a machine that warms up or slows
# down. Then `spine-bench peer` prints a table per system (each round's
# create, lifecycle and mixed jobs/s, server CPU per lifecycle job, peak RSS
# per node), Spine's ratio to each NATS mode within a round as min–max over
# the rounds, and one JSON line.
#
# natsbench is the peer benchmark kept outside this repository (PEERBENCH,
# see its README.md); it is built from there unless NATSBENCH names a
# binary. bin/spine (make build) and bin/spine-bench are built from the
# working tree.
#
# Env:
#   PEERBENCH  natsbench's source directory (default ../shared/peerbench from the
#              repository root; not needed with NATSBENCH)
#   NATSBENCH  a prebuilt natsbench binary, instead of building PEERBENCH's into bin/natsbench
#   ROUNDS     rounds of three runs, four with TMPFS (default 3)
#   JOBS       -jobs / --jobs of every run (default 20000)
#   CONNECT    where the clients connect, on both sides (default rr): rr spreads them over
#              the three nodes (natsbench's default; Spine's followers forward writes to the
#              leader, as NATS servers route to the stream's leader); leader puts them on the
#              leader (Spine's; NATS's stream leader for producers, consumer leader for workers)
#   OUT        where each run's output (ROUND-SYSTEM.txt) and the summary (peer.txt) are
#              kept (default bin/bench-peer-<UTC time>)
#   TMPFS      a tmpfs directory (e.g. /dev/shm): each round also runs Spine with its nodes'
#              data there (spine-bench --workdir), a control in which no durable write
#              reaches a disk, to tell what the disk costs Spine from everything else; its
#              ratios to NATS are printed apart (default: not run)
# A run that fails or is not clean (errors, redeliveries, jobs left) is
# reported when it ends and left out of the ratios; the script goes on with
# the other runs and exits 1 after the summary.
set -euo pipefail
case "${1:-}" in
  '') ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-peer: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
# Paths given in the env are named from the caller's directory.
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
if [ -n "${NATSBENCH:-}" ]; then
  [ -f "$NATSBENCH" ] && [ -x "$NATSBENCH" ] || { echo "bench-peer: NATSBENCH=$NATSBENCH is not an executable" >&2; exit 2; }
  NATSBENCH=$(abs "$NATSBENCH")
fi
if [ -n "${PEERBENCH:-}" ] && [ -d "$PEERBENCH" ]; then PEERBENCH=$(cd "$PEERBENCH" && pwd); fi
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/.."
PEERBENCH=${PEERBENCH:-../shared/peerbench}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-20000}
OUT=${OUT:-bin/bench-peer-$(date -u +%Y%m%d-%H%M%S)}
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench-peer: ROUNDS must be a positive number" >&2; exit 2 ;; esac
case "$JOBS" in ''|*[!0-9]*|0) echo "bench-peer: JOBS must be a positive number" >&2; exit 2 ;; esac
CONNECT=${CONNECT:-rr}
case "$CONNECT" in rr|leader) ;; *) echo "bench-peer: CONNECT must be rr or leader" >&2; exit 2 ;; esac
TMPFS=${TMPFS:-}
if [ -n "$TMPFS" ] && [ "$(stat -f -c %T "$TMPFS" 2>/dev/null)" != tmpfs ]; then
  echo "bench-peer: TMPFS=$TMPFS is not a tmpfs directory" >&2
  exit 2
fi
if [ -z "${NATSBENCH:-}" ] && [ ! -f "$PEERBENCH/go.mod" ]; then
  echo "bench-peer: no peer benchmark at PEERBENCH=$PEERBENCH (natsbench's source, kept outside" >&2
  echo "this repository): set PEERBENCH to its directory, or NATSBENCH to a built natsbench" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

echo "== building bin/spine and bin/spine-bench: working tree ($(git describe --always --dirty 2>/dev/null || echo unknown))"
"${MAKE:-make}" --no-print-directory build
go build -o bin/spine-bench ./cmd/spine-bench
if [ -n "${NATSBENCH:-}" ]; then
  nats=$NATSBENCH
  echo "== natsbench: $nats (prebuilt)"
else
  PEERBENCH=$(cd "$PEERBENCH" && pwd)
  nats=$(pwd)/bin/natsbench
  echo "== building natsbench from $PEERBENCH into $nats"
  # GOWORK=off: the peer is its own module, whatever workspace is around it.
  (cd "$PEERBENCH" && GOWORK=off go build -o "$nats" .)
fi

systems=(nats-default spine nats-always)
[ -n "$TMPFS" ] && systems+=(spine-tmpfs)
n=${#systems[@]}
files=()  # the runs that printed a JSON line, for the summary
failed=() # ROUND-SYSTEM (what went wrong)
total=$((n * ROUNDS))
k=0
for round in $(seq 1 "$ROUNDS"); do
  for j in $(seq 0 $((n - 1))); do
    sys=${systems[$(((round - 1 + j) % n))]}
    case $sys in
      nats-default) cmd=("$nats" -jobs "$JOBS" -connect "$CONNECT") ;;
      spine) cmd=(bin/spine-bench --local 3 --jobs "$JOBS" --binary bin/spine --connect "$CONNECT") ;;
      nats-always) cmd=("$nats" -jobs "$JOBS" -sync always -connect "$CONNECT") ;;
      spine-tmpfs) cmd=(bin/spine-bench --local 3 --jobs "$JOBS" --binary bin/spine --connect "$CONNECT" --workdir "$TMPFS") ;;
    esac
    k=$((k + 1))
    log="$OUT/$round-$sys.txt"
    echo "== run $k/$total, round $round: $sys: ${cmd[*]}"
    rc=0
    "${cmd[@]}" >"$log" 2>&1 || rc=$?
    grep -E '^\[[ABC] ' "$log" | sed 's/ | .*//; s/^/   /' || true
    # Both tools write "clean":true only when the run completed without
    # errors, redeliveries or jobs left; natsbench exits 0 even when not.
    json=$(grep '^{' "$log" | tail -n 1 || true)
    problem=""
    if [ -z "$json" ]; then
      problem="exit $rc, no JSON line"
    elif ! grep -q '"clean":true' <<<"$json"; then
      problem="exit $rc, not clean"
    elif [ $rc -ne 0 ]; then
      problem="exit $rc"
    fi
    [ -n "$json" ] && files+=("$log")
    if [ -n "$problem" ]; then
      failed+=("$round-$sys ($problem)")
      echo "bench-peer: run $k ($round-$sys) failed: $problem; its last lines:" >&2
      tail -n 20 "$log" | sed 's/^/   /' >&2
    fi
  done
done

peer_rc=0
if [ ${#files[@]} -gt 0 ]; then
  bin/spine-bench peer "${files[@]}" 2>&1 | tee "$OUT/peer.txt" || peer_rc=$?
fi
echo "each run's output and the summary: $OUT"
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench-peer: ${#failed[@]} of $total runs failed or were not clean: ${failed[*]}" >&2
  exit 1
fi
if [ $peer_rc -ne 0 ]; then
  echo "bench-peer: spine-bench peer failed (exit $peer_rc)" >&2
  exit 1
fi
