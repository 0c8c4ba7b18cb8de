#!/usr/bin/env bash
# Starts a local Spine cluster in the foreground (make run).
#
#   NODES      number of nodes (default 3): n1 bootstraps, the others join it
#   BASE_PORT  HTTP port of n1 (default 36725); node i listens on
#              BASE_PORT+10(i-1) (HTTP), +1 (Raft) and +2 (gossip), all on 127.0.0.1
#   DATA       data directory (default ./data): DATA/nI is node i's data dir
#   BIN        the spine binary (default ./bin/spine)
#
# Dev tokens are generated once into DATA/tokens.env and printed; each
# node's pid and the full command that started it are printed and written
# to DATA/nodes.txt (run a line's command again to restart a node you
# killed). DATA/env exports SPINE_ADDRS, SPINE_TOKEN and the three tokens
# for another shell (`. data/env`); DATA/run.pid is this script's pid, for
# scripts/teardown.sh. Ctrl-C (or SIGTERM) stops every node this script
# started and exits 0 when they stopped cleanly. A node that exits while it
# runs is reported and the others keep running; once every node it started
# has exited, it lists the nodes of DATA still running (restarted from
# nodes.txt) and exits 0 if there are some, 1 if none is left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

NODES=${NODES:-3}
DATA=${DATA:-./data}
BIN=${BIN:-./bin/spine}
BASE_PORT=${BASE_PORT:-36725}
export LEASE_SECONDS=${LEASE_SECONDS:-300}
export REAPER_INTERVAL_MS=${REAPER_INTERVAL_MS:-1000}

mkdir -p "$DATA"
# Absolute paths: the printed commands work from any directory.
DATA=$(cd "$DATA" && pwd)
bin_arg=$BIN
case "$BIN" in
  /*) ;;
  */*) BIN="$(cd "$(dirname "$BIN")" 2>/dev/null && pwd)/$(basename "$BIN")" || BIN= ;;
  *) BIN=$(command -v "$BIN" || true) ;;
esac
if [ ! -x "$BIN" ]; then
  echo "run-cluster: BIN=$bin_arg is not an executable spine binary (make build builds bin/spine)" >&2
  exit 1
fi

if [ ! -f "$DATA/tokens.env" ]; then
  gen() { head -c 18 /dev/urandom | base64 | tr -d '/+=' ; }
  (
    umask 077
    {
      echo "HEAD_TOKEN=head-$(gen)"
      echo "LEFT_CLAW_TOKEN=left-$(gen)"
      echo "RIGHT_CLAW_TOKEN=right-$(gen)"
    } > "$DATA/tokens.env"
  )
fi
set -a; . "$DATA/tokens.env"; set +a

# One make run per data dir: a second one would find the ports taken and
# the first one's record overwritten.
if [ -f "$DATA/run.pid" ] && p=$(cat "$DATA/run.pid") && [ -n "$p" ] && kill -0 "$p" 2>/dev/null &&
  tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q run-cluster.sh; then
  echo "run-cluster: make run already runs on $DATA (pid $p); stop it (Ctrl-C there, or scripts/teardown.sh) first" >&2
  exit 1
fi
if still=$(DATA=$DATA "$here/teardown.sh" --list 2>/dev/null) && [ -n "$still" ]; then
  echo "run-cluster: nodes of $DATA still run (pid, what):" >&2
  echo "$still" | sed 's/^/  /' >&2
  echo "run-cluster: stop them first: DATA=$DATA scripts/teardown.sh stops them and deletes the data, or kill those pids" >&2
  exit 1
fi
echo $$ > "$DATA/run.pid"

pids=()
# stop sends SIGTERM to every node still running and waits for them; it
# returns 1 if one of them exited with an error.
stop() {
  trap - INT TERM EXIT
  local p rc=0 running=()
  for p in ${pids[@]+"${pids[@]}"}; do
    if kill -TERM "$p" 2>/dev/null; then running+=("$p"); fi
  done
  for p in ${running[@]+"${running[@]}"}; do
    local s=0
    wait "$p" 2>/dev/null || s=$?
    # 130/143: the node was ended by the terminal's SIGINT or our SIGTERM
    # before it could handle it; that is a stop too.
    case $s in
      0|130|143) ;;
      *) echo "node pid $p exited with status $s" >&2; rc=1 ;;
    esac
  done
  echo "stopped ${#running[@]} nodes"
  return $rc
}
trap 'stop; rc=$?; rm -f "$DATA/run.pid"; exit $rc' INT TERM
trap 'rc=$?; stop || true; rm -f "$DATA/run.pid"; exit $rc' EXIT

nodes_txt="$DATA/nodes.txt"
{
  echo "# Nodes started by scripts/run-cluster.sh on $(date '+%Y-%m-%d %H:%M:%S'): ID PID COMMAND."
  echo "# To restart a node you stopped, run its COMMAND (from any directory); stop that one yourself."
} > "$nodes_txt"

urls=()
cmds=()
for i in $(seq 1 "$NODES"); do
  http=$((BASE_PORT + (i - 1) * 10)); raft=$((http + 1)); gossip=$((http + 2))
  urls+=("http://127.0.0.1:$http")
  args=(serve --node-id "n$i" --data-dir "$DATA/n$i" --http-addr "127.0.0.1:$http"
        --raft-addr "127.0.0.1:$raft" --gossip-addr "127.0.0.1:$gossip")
  if [ "$i" = 1 ]; then args+=(--bootstrap); else args+=(--join "${urls[0]}"); fi
  mkdir -p "$DATA/n$i"
  # Each line of the node's log prefixed with its id; the prefixer ignores
  # Ctrl-C so that it outlives the node's last lines (a node writing to a
  # closed pipe would die of SIGPIPE while it shuts down).
  "$BIN" "${args[@]}" 2> >(trap '' INT TERM; exec sed -u "s/^/[n$i] /" >&2) &
  pids+=($!)
  # The command as a shell would run it: the tokens from tokens.env, the
  # environment this script sets, and the binary with the same arguments.
  cmd="(set -a; . $(printf '%q' "$DATA/tokens.env"); set +a; LEASE_SECONDS=$(printf '%q' "$LEASE_SECONDS") REAPER_INTERVAL_MS=$(printf '%q' "$REAPER_INTERVAL_MS") exec $(printf '%q ' "$BIN" "${args[@]}"))"
  cmd=${cmd/% )/)}
  cmds+=("$cmd")
  echo "n$i $! $cmd" >> "$nodes_txt"
done

addrs=$(IFS=,; echo "${urls[*]}")
# Wait (bounded) until every node is a voter.
for _ in $(seq 1 100); do
  if n=$("$BIN" cluster status --addr "$addrs" --token "$HEAD_TOKEN" --retry-for 0 2>/dev/null | grep -c '"suffrage": "voter"'); then
    [ "$n" -ge "$NODES" ] && break
  fi
  sleep 0.2
done

(
  umask 077
  {
    echo "# make run's cluster, for another shell: . $(printf '%q' "$DATA/env")"
    echo "export SPINE_ADDRS=$addrs"
    echo "export HEAD_TOKEN=$HEAD_TOKEN LEFT_CLAW_TOKEN=$LEFT_CLAW_TOKEN RIGHT_CLAW_TOKEN=$RIGHT_CLAW_TOKEN"
    echo "export SPINE_TOKEN=\$HEAD_TOKEN"
  } > "$DATA/env"
)

echo
echo "Spine: $NODES-node cluster up (data in $DATA)."
echo "  URLs:  ${urls[*]}"
echo "  HEAD_TOKEN=$HEAD_TOKEN"
echo "  LEFT_CLAW_TOKEN=$LEFT_CLAW_TOKEN"
echo "  RIGHT_CLAW_TOKEN=$RIGHT_CLAW_TOKEN"
echo "  (all three are in $DATA/tokens.env)"
echo
echo "Nodes (also in $nodes_txt):"
for i in $(seq 1 "$NODES"); do
  echo "  n$i  pid ${pids[$((i - 1))]}  ${urls[$((i - 1))]}"
  echo "      ${cmds[$((i - 1))]}"
done
echo
echo "Try, in another shell:"
echo "  . $(printf '%q' "$DATA/env")   # exports SPINE_ADDRS, SPINE_TOKEN (the head token) and the three tokens, that is:"
echo "  export SPINE_ADDRS=$addrs SPINE_TOKEN=$HEAD_TOKEN"
echo "  $BIN cluster status --output table"
echo "  $BIN jobs create --payload '{\"task\":\"hello\"}'"
if [ "$DATA" = "$(pwd)/data" ]; then
  echo "  (In $(pwd), spine finds HEAD_TOKEN in ./data/tokens.env by itself when SPINE_TOKEN is not set.)"
fi
echo "Ctrl-C stops all nodes. scripts/teardown.sh stops them and deletes $DATA."
echo

# Watch the nodes until Ctrl-C or SIGTERM (which land in stop). A node that
# exits by itself, or that you kill, is reported; the others keep running.
# (Polling, with the shell's own "Killed" notices silenced, keeps this to
# what bash 3.2 has: no wait -n.)
set +e
reported=()
left=${#pids[@]}
while [ "$left" -gt 0 ]; do
  sleep 1 & wait $! 2>/dev/null
  for i in "${!pids[@]}"; do
    p=${pids[$i]}
    [ -n "${reported[$i]:-}" ] && continue
    kill -0 "$p" 2>/dev/null && continue
    wait "$p" 2>/dev/null; s=$?
    if [ "$s" -gt 128 ]; then why="was killed (SIG$(kill -l $((s - 128))))"; else why="exited with status $s"; fi
    echo "run-cluster: n$((i + 1)) (pid $p) $why; the others keep running. Its command is in $nodes_txt." >&2
    reported[$i]=1
    left=$((left - 1))
  done
done
trap - EXIT
rm -f "$DATA/run.pid"
still=$(DATA=$DATA "$here/teardown.sh" --list 2>/dev/null) || still=
if [ -n "$still" ]; then
  echo "run-cluster: every node this script started has exited; these of $DATA still run, started outside this script (pid, what):" >&2
  echo "$still" | sed 's/^/  /' >&2
  echo "run-cluster: they keep running; stop them with scripts/teardown.sh (it deletes $DATA too), or kill those pids" >&2
  exit 0
fi
echo "run-cluster: every node this script started has exited; none of $DATA runs" >&2
exit 1
