#!/usr/bin/env bash
# `make bench-compare`: compares the node binary of a base commit with the
# working tree's, in alternating runs of the cluster benchmark on this
# machine, each pair in the order the pair before it did not take (base,
# new, new, base, base, new, …: a machine that slows down or speeds up over
# the runs then weighs on both builds alike), and prints per metric the per-run values,
# the means and the ratio new/base (`spine-bench compare`), then one JSON
# line. Both builds are driven by the working tree's spine-bench: only
# `--binary` differs between the runs.
#
# The base build comes from a temporary `git worktree add` of BASE in a
# temp dir, removed afterwards (also on failure or Ctrl-C).
#
# Env:
#   BASE      commit to compare against (default main; any rev: HEAD~1, a tag, a sha)
#   BASE_BIN  a prebuilt spine binary to use as the base instead of building BASE
#   NEW_BIN   a prebuilt spine binary to use as the new build instead of the working tree's
#   PAIRS     alternating pairs of runs (default 3)
#   JOBS      --jobs of each run (default 20000)
#   PROFILE   1: also profile each run's leader (as --profile)
#   OUT       where each run's output, the comparison and the profiles are kept
#             (default bin/bench-compare-<UTC time>)
# Options:
#   --profile   when the lifecycle phase starts (every job queued), take a heap profile
#               (after a collection) and then a CPU profile of PROFILE_SECONDS (default 8;
#               keep it below the phase's length) of the leader of every run, into OUT,
#               and merge them per build into OUT/base.cpu.pb.gz, new.cpu.pb.gz,
#               base.heap.pb.gz and new.heap.pb.gz for `go tool pprof -diff_base`. Every
#               run is profiled, so both builds bear the same cost.
#   -- ARGS     further arguments for every spine-bench run (e.g. -- --workers 64)
set -euo pipefail
# Prebuilt binaries are named from the caller's directory.
abs() { (cd "$(dirname "$1")" && echo "$(pwd)/$(basename "$1")"); }
[ -n "${BASE_BIN:-}" ] && BASE_BIN=$(abs "$BASE_BIN")
[ -n "${NEW_BIN:-}" ] && NEW_BIN=$(abs "$NEW_BIN")
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/.."
BASE=${BASE:-main}
PAIRS=${PAIRS:-3}
JOBS=${JOBS:-20000}
PROFILE_SECONDS=${PROFILE_SECONDS:-8}
OUT=${OUT:-bin/bench-compare-$(date -u +%Y%m%d-%H%M%S)}
profile=${PROFILE:-}
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-compare: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$PAIRS" in ''|*[!0-9]*|0) echo "bench-compare: PAIRS must be a positive number" >&2; exit 2 ;; esac
mkdir -p "$OUT"
profile_dir=""
[ "$profile" = 1 ] && profile_dir=$OUT

work=$(mktemp -d "${TMPDIR:-/tmp}/spine-bench-compare.XXXXXX")
base_tree=""
cleanup() {
  if [ -n "$base_tree" ] && [ -d "$base_tree" ]; then
    git worktree remove --force "$base_tree" 2>/dev/null || rm -rf "$base_tree"
    git worktree prune 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building spine-bench (working tree)"
go build -o "$work/spine-bench" ./cmd/spine-bench

if [ -n "${BASE_BIN:-}" ]; then
  base_bin=$BASE_BIN
  base_label="$BASE_BIN (prebuilt)"
else
  sha=$(git rev-parse --verify --quiet "$BASE^{commit}") || { echo "bench-compare: BASE=$BASE is not a commit" >&2; exit 2; }
  base_label="$BASE ($(git log -1 --format='%h %s' "$sha" | cut -c1-70))"
  echo "== building the base: $base_label"
  base_tree="$work/base-src"
  git worktree add --detach --quiet "$base_tree" "$sha"
  (cd "$base_tree" && go build -o "$work/spine-base" ./cmd/spine)
  git worktree remove --force "$base_tree"
  base_tree=""
  base_bin="$work/spine-base"
fi
if [ -n "${NEW_BIN:-}" ]; then
  new_bin=$NEW_BIN
  new_label="$NEW_BIN (prebuilt)"
else
  new_label="working tree ($(git describe --always --dirty 2>/dev/null || echo unknown))"
  echo "== building the new: $new_label"
  go build -o "$work/spine-new" ./cmd/spine
  new_bin="$work/spine-new"
fi
for b in "$base_bin" "$new_bin"; do
  [ -x "$b" ] || { echo "bench-compare: $b is not an executable" >&2; exit 2; }
done

pprof_args=()
if [ -n "$profile_dir" ]; then
  cp "$base_bin" "$profile_dir/spine-base"
  cp "$new_bin" "$profile_dir/spine-new"
  pprof_args=(--local-env SPINE_PPROF=1)
fi

# profile_run LOG NAME: once LOG shows the create phase's line (the
# lifecycle phase starts then, with every job queued), a heap profile of the
# leader after a collection, then a CPU profile. The head token is the local
# test cluster's (internal/testcluster).
profile_run() {
  local log=$1 name=$2 url="" i
  for i in $(seq 1 6000); do # 10 minutes at most
    [ -z "$url" ] && url=$(sed -n 's/^cluster: leader [^ ]* (\(http[^)]*\)).*/\1/p' "$log" | head -1)
    grep -q '^\[A create\]' "$log" 2>/dev/null && break
    grep -q '^{' "$log" 2>/dev/null && return 0 # the run ended first
    sleep 0.1
  done
  [ -n "$url" ] || return 0
  curl -sf --max-time 60 -H "Authorization: Bearer test-head-token" \
    "$url/debug/pprof/heap?gc=1" -o "$profile_dir/$name.heap.pb.gz" || echo "   (no heap profile of $name)"
  curl -sf --max-time $((PROFILE_SECONDS + 30)) -H "Authorization: Bearer test-head-token" \
    "$url/debug/pprof/profile?seconds=$PROFILE_SECONDS" -o "$profile_dir/$name.cpu.pb.gz" ||
    echo "   (no CPU profile of $name: did the run end within PROFILE_SECONDS=$PROFILE_SECONDS of the lifecycle's start?)"
}

base_logs=()
new_logs=()
total=$((2 * PAIRS))
k=0
for i in $(seq 1 "$PAIRS"); do
  order="base new"
  [ $((i % 2)) -eq 0 ] && order="new base"
  for side in $order; do
    k=$((k + 1))
    if [ $side = base ]; then bin=$base_bin; else bin=$new_bin; fi
    log="$OUT/$side-$i.log"
    echo "== run $k/$total: $side ($bin)"
    prof_pid=""
    if [ -n "$profile_dir" ]; then
      : >"$log"
      profile_run "$log" "$side-$i" &
      prof_pid=$!
    fi
    rc=0
    "$work/spine-bench" --local 3 --jobs "$JOBS" --binary "$bin" ${pprof_args[@]+"${pprof_args[@]}"} ${extra[@]+"${extra[@]}"} >"$log" 2>&1 || rc=$?
    [ -n "$prof_pid" ] && wait "$prof_pid" || true
    grep '^summary:' "$log" | sed 's/^/   /' || true
    if [ $rc -ne 0 ]; then
      echo "bench-compare: run $k ($side) failed (exit $rc); its last lines:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    if [ $side = base ]; then base_logs+=("$log"); else new_logs+=("$log"); fi
  done
done

base_csv=$(IFS=,; echo "${base_logs[*]}")
new_csv=$(IFS=,; echo "${new_logs[*]}")
"$work/spine-bench" compare --base "$base_csv" --new "$new_csv" --base-label "$base_label" --new-label "$new_label" | tee "$OUT/compare.txt"

if [ -n "$profile_dir" ]; then
  for side in base new; do
    for kind in cpu heap; do
      set -- "$profile_dir/$side"-*."$kind".pb.gz
      [ -e "$1" ] && go tool pprof -proto "$@" >"$profile_dir/$side.$kind.pb.gz" 2>/dev/null || true
    done
  done
  echo
  echo "profiles of each run's leader, and merged per build, in $profile_dir:"
  echo "  go tool pprof -top -diff_base $profile_dir/base.cpu.pb.gz $profile_dir/new.cpu.pb.gz"
  echo "  go tool pprof -top -sample_index=inuse_space -diff_base $profile_dir/base.heap.pb.gz $profile_dir/new.heap.pb.gz"
fi
echo "each run's output and the comparison: $OUT"
