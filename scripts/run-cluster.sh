#!/usr/bin/env bash
# Starts a local Spine cluster of NODES (default 3) nodes in the foreground.
# Data lives under DATA (default ./data/<node>); dev tokens are generated once
# into DATA/tokens.env and printed. Ctrl-C stops every node this script started.
set -euo pipefail

NODES=${NODES:-3}
DATA=${DATA:-./data}
BIN=${BIN:-./bin/spine}
BASE_PORT=${BASE_PORT:-36725}
export LEASE_SECONDS=${LEASE_SECONDS:-300}
export REAPER_INTERVAL_MS=${REAPER_INTERVAL_MS:-1000}

mkdir -p "$DATA"
if [ ! -f "$DATA/tokens.env" ]; then
  gen() { head -c 18 /dev/urandom | base64 | tr -d '/+=' ; }
  umask 077
  {
    echo "HEAD_TOKEN=head-$(gen)"
    echo "LEFT_CLAW_TOKEN=left-$(gen)"
    echo "RIGHT_CLAW_TOKEN=right-$(gen)"
  } > "$DATA/tokens.env"
fi
set -a; . "$DATA/tokens.env"; set +a

pids=()
stop() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "stopped ${#pids[@]} nodes"
}
trap stop INT TERM EXIT

urls=()
for i in $(seq 1 "$NODES"); do
  http=$((BASE_PORT + (i - 1) * 10)); raft=$((http + 1)); gossip=$((http + 2))
  urls+=("http://127.0.0.1:$http")
  args=(serve --node-id "n$i" --data-dir "$DATA/n$i" --http-addr "127.0.0.1:$http"
        --raft-addr "127.0.0.1:$raft" --gossip-addr "127.0.0.1:$gossip")
  if [ "$i" = 1 ]; then args+=(--bootstrap); else args+=(--join "${urls[0]}"); fi
  mkdir -p "$DATA/n$i"
  "$BIN" "${args[@]}" 2> >(sed -u "s/^/[n$i] /" >&2) &
  pids+=($!)
done

addrs=$(IFS=,; echo "${urls[*]}")
# Wait (bounded) until every node is a voter.
for _ in $(seq 1 100); do
  if n=$("$BIN" cluster status --addr "$addrs" --token "$HEAD_TOKEN" --retry-for 0 2>/dev/null | grep -c '"suffrage": "voter"'); then
    [ "$n" -ge "$NODES" ] && break
  fi
  sleep 0.2
done

cat <<MSG

Spine: $NODES-node cluster up.
  URLs:              ${urls[*]}
  HEAD_TOKEN=$HEAD_TOKEN
  LEFT_CLAW_TOKEN=$LEFT_CLAW_TOKEN
  RIGHT_CLAW_TOKEN=$RIGHT_CLAW_TOKEN
Try:
  export SPINE_ADDRS=$addrs SPINE_TOKEN=\$HEAD_TOKEN   # or: set -a; . $DATA/tokens.env; set +a
  $BIN cluster status --output table
  $BIN jobs create --payload '{"task":"hello"}'
Ctrl-C stops all nodes.

MSG
wait
