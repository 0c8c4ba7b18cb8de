#!/usr/bin/env bash
# Undoes the developer queue's local set-up (seed 004 §19.2): stops the
# watchers this machine runs (their /tmp/spine-*.lock files name them) and
# the local cluster `make run` started (DATA/*/pid files, if any), deletes
# the local data dir and the /tmp/spine-* files. Leaves spine.yml alone.
# Env: DATA (default ./data).
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-./data}
for lock in /tmp/spine-*.lock; do
  [ -f "$lock" ] || continue
  pid=$(cat "$lock" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped watcher $pid ($lock)"
  fi
done
for pidfile in "$DATA"/*/pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" && echo "stopped node $pid"
  fi
done
rm -rf "$DATA"
rm -f /tmp/spine-*-pipe /tmp/spine-*-done /tmp/spine-*.lock /tmp/spine-*-watcher.log
echo "Cleaned up. Delete this folder to remove Spine entirely."
