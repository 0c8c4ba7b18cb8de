#!/usr/bin/env bash
# spine-watcher.sh STREAM: wakes the agent that works STREAM when a task is
# queued in it (seed 004 §13, docs/WORKER_PLAYBOOK.md).
#
# The agent touches the done flag when it is idle and blocks reading one
# line from the pipe; the watcher writes "wake" to the pipe, and removes the
# flag, only while the flag exists and the stream has a queued task. Instead
# of the seed's 60 s poll it waits on a long-poll peek that answers the
# moment a task is committed, so the agent wakes within a second of the
# enqueue and an idle watcher costs the cluster one open request.
#
# Files: /tmp/spine-STREAM.lock (pid; a second watcher is refused),
# /tmp/spine-STREAM-pipe (FIFO), /tmp/spine-STREAM-done (idle flag).
# Env: SPINE (the spine binary, default: spine on PATH), SPINE_ADDRS,
# SPINE_TOKEN; SPINE_WATCH_WAIT (long-poll length, default 30s);
# SPINE_WATCH_BUSY (seconds between looks at the flag while the agent
# works, default 1).
set -u

STREAM=${1:?usage: spine-watcher.sh STREAM}
SPINE=${SPINE:-spine}
WAIT=${SPINE_WATCH_WAIT:-30s}
BUSY=${SPINE_WATCH_BUSY:-1}
PIPE=/tmp/spine-$STREAM-pipe
DONE=/tmp/spine-$STREAM-done
LOCK=/tmp/spine-$STREAM.lock
LOG="[spine-watcher]"

# === Lockfile check ===
if [ -f "$LOCK" ]; then
    OLD_PID=$(cat "$LOCK" 2>/dev/null)
    if [ -n "$OLD_PID" ] && kill -0 "$OLD_PID" 2>/dev/null; then
        echo "$LOG ERROR: Stream '$STREAM' already has active watcher (PID $OLD_PID)"
        echo "$LOG Kill it first: kill $OLD_PID"
        exit 1
    fi
    rm -f "$LOCK"
fi
echo $$ > "$LOCK"
# Every wait (the long poll, the busy sleep) runs as a child the shell
# waits on, so SIGTERM ends the watcher at once rather than after the wait.
CHILD=
PEEKOUT=$(mktemp "/tmp/spine-$STREAM-peek.XXXXXX")
cleanup() {
    [ -n "$CHILD" ] && kill "$CHILD" 2>/dev/null
    rm -f "$LOCK" "$PEEKOUT"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# waitfor CMD...: run CMD as a child and wait for it; its exit status.
waitfor() {
    "$@" & CHILD=$!
    wait "$CHILD"
    local rc=$?
    CHILD=
    return $rc
}

# === FIFO ===
# Opened read-write on fd 3, so writing "wake" never blocks and the pipe
# never sees end-of-file while the watcher lives. A deleted pipe is made
# again (and reopened) before the next wake.
open_pipe() {
    [ -p "$PIPE" ] || { rm -f "$PIPE"; mkfifo "$PIPE"; }
    exec 3<>"$PIPE"
}
open_pipe

echo "$LOG Started for stream: $STREAM"
echo "$LOG Pipe: $PIPE"
echo "$LOG Done flag: $DONE"
echo "$LOG Lock: $LOCK (PID $$)"
"$SPINE" stream show "$STREAM" --output table 2>/dev/null | sed "s/^/$LOG /"

# === Main loop ===
while true; do
    if [ ! -p "$PIPE" ]; then
        echo "$LOG Pipe was deleted; making it again"
        open_pipe
    fi
    if [ -f "$DONE" ]; then
        # The agent is idle: wait for work (answers at once if there is some).
        waitfor "$SPINE" peek --stream="$STREAM" --wait="$WAIT" > "$PEEKOUT" 2>/dev/null
        rc=$?
        TASK=$(cat "$PEEKOUT")
        if [ $rc -ne 0 ]; then
            waitfor sleep 1 # the cluster is unreachable, or the stream ended: look again soon
            continue
        fi
        if [ -n "$TASK" ] && [ -f "$DONE" ]; then
            echo "$LOG Task available, waking the agent..."
            rm -f "$DONE"
            [ -p "$PIPE" ] || open_pipe
            echo "wake" >&3
        fi
    else
        # The agent is busy: look at the flag again shortly.
        waitfor sleep "$BUSY"
    fi
done
