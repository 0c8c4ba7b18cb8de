#!/usr/bin/env bash
# Undoes the developer queue's local set-up (seed 004 §19.2): stops the
# watchers this machine runs (their /tmp/spine-*.lock files name them) and
# the local cluster `make run` started (DATA/*/pid files, if any), deletes
# the local data dir and the /tmp/spine-* files. Leaves spine.yml alone.
# Env: DATA (default ./data); TMPDIR_SPINE (default /tmp), where the
# watchers keep their files.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-./data}
T=${TMPDIR_SPINE:-/tmp}
for lock in "$T"/spine-*.lock; do
  [ -f "$lock" ] || continue
  pid=$(cat "$lock" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped watcher $pid ($lock)"
  fi
done
if [ -f "$DATA/spine.lock" ]; then # the local cluster spine run started
  for pid in $(cat "$DATA/spine.lock"); do
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" && echo "stopped node $pid"
  done
fi
for pidfile in "$DATA"/*/pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped node $pid"
  fi
done
rm -rf "$DATA"
rm -f "$T"/spine-*-pipe "$T"/spine-*-done "$T"/spine-*.lock "$T"/spine-*-watcher.log "$T"/spine-*-peek.*
echo "Cleaned up. Delete this folder to remove Spine entirely."
