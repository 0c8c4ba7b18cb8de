#!/usr/bin/env bash
# scripts/teardown.sh [--dry-run | --list]: stops this project's local Spine
# processes, waits until they have exited, and only then deletes its data
# dir. Leaves spine.yml, and every other project's nodes and watchers, alone.
#
# This project's processes, each identified by its command line (and, for a
# relative path, its working directory) before it is signalled, so a
# recorded pid the system has since given to another process is left alone:
#   - make run's script (DATA/run.pid) and the nodes it started (DATA/nodes.txt);
#   - the local cluster spine run started (DATA/spine.lock) and the watchers
#     it started (DATA/watchers, each holding /tmp/spine-STREAM.lock);
#   - any other process of this user that is a node serving a data dir
#     inside DATA (`spine… serve`: a node restarted from nodes.txt, or
#     started by hand with --data-dir under DATA) or a shell running a
#     watcher script of this project (scripts/spine-watcher.sh or
#     DATA/spine-watcher.sh).
# They get SIGTERM; what still runs after TEARDOWN_WAIT seconds (default 30)
# gets SIGKILL. Then DATA is deleted, with the /tmp/spine-STREAM-* files of
# the streams whose watchers were this project's.
#
# It refuses (exit 1, nothing stopped, nothing deleted) when it cannot tell
# which processes are this project's: a record it cannot read, a process it
# cannot identify, a node of DATA run by another user, a DATA that holds
# nothing Spine wrote. It also deletes nothing while one of them still runs.
# --dry-run lists what it would stop and delete, and changes nothing;
# --list prints only the processes, one "PID WHAT" line each.
#
# Env: DATA (default ./data; a relative path is taken from the project
# directory, the one holding scripts/); TEARDOWN_WAIT; TMPDIR_SPINE (default /tmp),
# where the watchers keep their files.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd -P)
DATA=${DATA:-./data}
T=${TMPDIR_SPINE:-/tmp}
WAIT=${TEARDOWN_WAIT:-30}
DRY= LIST=
case "${1:-}" in
  --dry-run) DRY=1 ;;
  --list) DRY=1 LIST=1 ;;
  "") ;;
  *) echo "usage: scripts/teardown.sh [--dry-run | --list]" >&2; exit 2 ;;
esac

refuse() {
  echo "teardown: $*" >&2
  echo "teardown: refusing: nothing was stopped or deleted." >&2
  exit 1
}

if [ ! -e "$DATA" ]; then
  [ -n "$LIST" ] || echo "Nothing to tear down: $DATA does not exist."
  exit 0
fi
[ -d "$DATA" ] || refuse "DATA=$DATA is not a directory"
DATA_ABS=$(cd "$DATA" && pwd -P) || refuse "cannot enter DATA=$DATA"
[ "$DATA_ABS" != / ] && [ "$DATA_ABS" != "$ROOT" ] && [ "$DATA_ABS" != "$(cd ~ 2>/dev/null && pwd -P)" ] ||
  refuse "DATA=$DATA is $DATA_ABS, not a data dir"

# DATA must hold something Spine wrote: make run's or spine run's files, or
# a node's data dir (its Raft directory), at its top or one level down.
spine_data=
for f in tokens.env nodes.txt spine.lock watchers run.pid env raft; do
  [ -e "$DATA_ABS/$f" ] && spine_data=1
done
for d in "$DATA_ABS"/*/raft; do
  [ -d "$d" ] && spine_data=1
done
if [ -z "$spine_data" ] && [ -n "$(ls -A "$DATA_ABS")" ]; then
  refuse "$DATA_ABS holds files Spine did not write (no tokens.env, nodes.txt, spine.lock, watchers or node data dir); it is not deleted"
fi

# --- Reading processes (Linux: /proc; elsewhere: ps and lsof) ---

have_proc=
[ -r /proc/self/cmdline ] && have_proc=1
if [ -z "$have_proc" ] && ! ps -p $$ -o args= >/dev/null 2>&1; then
  refuse "cannot read processes' command lines (no /proc, no ps)"
fi

# proc_argv PID: ARGV=(the process's arguments); fails when it has exited
# or its command line cannot be read.
proc_argv() {
  ARGV=()
  if [ -n "$have_proc" ]; then
    [ -r "/proc/$1/cmdline" ] || return 1
    local a
    while IFS= read -r -d '' a; do ARGV+=("$a"); done < "/proc/$1/cmdline" 2>/dev/null || return 1
  else
    local line
    line=$(ps -p "$1" -o args= 2>/dev/null) || return 1
    # shellcheck disable=SC2206 # ps joins the arguments with spaces
    ARGV=($line)
  fi
  [ ${#ARGV[@]} -gt 0 ]
}

proc_cwd() {
  if [ -n "$have_proc" ]; then
    readlink "/proc/$1/cwd" 2>/dev/null
  else
    lsof -a -p "$1" -d cwd -Fn 2>/dev/null | sed -n 's/^n//p'
  fi
}

proc_uid() {
  if [ -n "$have_proc" ]; then
    stat -c %u "/proc/$1" 2>/dev/null
  else
    ps -p "$1" -o uid= 2>/dev/null | tr -d ' '
  fi
}

# alive PID: the process exists and is not a zombie.
alive() {
  kill -0 "$1" 2>/dev/null || [ "$(proc_uid "$1")" != "" ] || return 1
  local st
  if [ -n "$have_proc" ]; then
    st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
  else
    st=$(ps -p "$1" -o stat= 2>/dev/null | cut -c1)
  fi
  [ -n "$st" ] && [ "$st" != Z ]
}

all_pids() {
  if [ -n "$have_proc" ]; then
    local p
    for p in /proc/[0-9]*; do echo "${p#/proc/}"; done
  else
    ps -axo pid= | tr -d ' '
  fi
}

# abs PATH CWD: PATH made absolute against CWD, symlinks resolved when it
# exists.
abs() {
  local p=$1
  case "$p" in /*) ;; *) p="$2/$p" ;; esac
  if [ -d "$p" ]; then (cd "$p" && pwd -P); else
    local d; d=$(cd "$(dirname "$p")" 2>/dev/null && pwd -P) && echo "$d/$(basename "$p")" || echo "$p"
  fi
}

inside() { [ "$1" = "$2" ] || case "$1" in "$2"/*) true ;; *) false ;; esac; }

# classify PID: sets KIND (node, watcher, runner or empty: not this
# project's), WHAT (a description) and STREAM (a watcher's); returns 2 when
# the process is a node or watcher whose paths cannot be resolved.
classify() {
  local pid=$1 i dd= rel cwd script= prog
  KIND= WHAT= STREAM=
  proc_argv "$pid" || return 0
  prog=${ARGV[0]##*/}
  if [ "${ARGV[1]:-}" = serve ] && [ "${prog#spine}" != "$prog" ]; then
    for ((i = 2; i < ${#ARGV[@]}; i++)); do
      case "${ARGV[$i]}" in
        --data-dir) dd=${ARGV[$((i + 1))]:-} ;;
        --data-dir=*) dd=${ARGV[$i]#--data-dir=} ;;
      esac
    done
    if [ -z "$dd" ] && [ -n "$have_proc" ]; then
      dd=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | sed -n 's/^SPINE_DATA_DIR=//p' | tail -1)
    fi
    [ -n "$dd" ] || dd=./data
    case "$dd" in
      /*) cwd=/ ;;
      *) cwd=$(proc_cwd "$pid") && [ -n "$cwd" ] || return 2 ;;
    esac
    rel=$(abs "$dd" "$cwd")
    if inside "$rel" "$DATA_ABS"; then
      KIND=node WHAT="node (data dir $rel)"
    fi
    return 0
  fi
  # Scripts: a shell running them (an editor or a pager holding the file is not one).
  case "$prog" in bash | sh) ;; *) return 0 ;; esac
  case "${ARGV[1]:-}" in
    spine-watcher.sh | */spine-watcher.sh) script=${ARGV[1]}; STREAM=${ARGV[2]:-} ;;
    run-cluster.sh | */run-cluster.sh) KIND=runner; WHAT="make run's script" ;;
  esac
  if [ -n "$script" ]; then
    case "$script" in
      /*) cwd=/ ;;
      *) cwd=$(proc_cwd "$pid") && [ -n "$cwd" ] || return 2 ;;
    esac
    script=$(abs "$script" "$cwd")
    if inside "$script" "$DATA_ABS" || [ "$script" = "$ROOT/scripts/spine-watcher.sh" ] || recorded_watcher "$pid" "$STREAM"; then
      KIND=watcher WHAT="watcher of stream $STREAM"
    fi
  fi
  return 0
}

# --- The records ---

RUNNER= RECORDED_WATCHERS=() RECORDED_NODES=()
check_pid() { case "$1" in '' | *[!0-9]*) return 1 ;; esac; }
if [ -f "$DATA_ABS/run.pid" ]; then
  RUNNER=$(tr -d ' \n' < "$DATA_ABS/run.pid")
  check_pid "$RUNNER" || refuse "$DATA_ABS/run.pid does not hold a pid"
fi
if [ -f "$DATA_ABS/nodes.txt" ]; then
  while read -r id pid _; do
    case "$id" in '#'* | '') continue ;; esac
    check_pid "$pid" || refuse "$DATA_ABS/nodes.txt: line '$id $pid …' is not ID PID COMMAND"
    RECORDED_NODES+=("$pid")
  done < "$DATA_ABS/nodes.txt"
fi
if [ -f "$DATA_ABS/spine.lock" ]; then
  for pid in $(cat "$DATA_ABS/spine.lock"); do
    check_pid "$pid" || refuse "$DATA_ABS/spine.lock: '$pid' is not a pid"
    RECORDED_NODES+=("$pid")
  done
fi
if [ -f "$DATA_ABS/watchers" ]; then
  while read -r pid stream rest; do
    [ -z "$pid" ] && continue
    check_pid "$pid" && [ -n "$stream" ] && [ -z "$rest" ] ||
      refuse "$DATA_ABS/watchers: line '$pid $stream $rest' is not PID STREAM"
    RECORDED_WATCHERS+=("$pid $stream")
  done < "$DATA_ABS/watchers"
fi
recorded_watcher() {
  local w
  for w in ${RECORDED_WATCHERS[@]+"${RECORDED_WATCHERS[@]}"}; do
    [ "$w" = "$1 $2" ] && [ "$(tr -d ' \n' < "$T/spine-$2.lock" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}

# --- Which processes are this project's ---

me=$(id -u)
TARGETS=() DESCS=() STREAMS=()
for w in ${RECORDED_WATCHERS[@]+"${RECORDED_WATCHERS[@]}"}; do STREAMS+=("${w#* }"); done
for pid in $(all_pids); do
  [ "$pid" = $$ ] && continue
  classify "$pid"
  rc=$?
  [ "$KIND" = runner ] && [ "$pid" != "$RUNNER" ] && continue # another project's make run
  if [ $rc = 2 ]; then
    [ "$(proc_uid "$pid")" = "$me" ] || continue # another user's, with a relative path: not ours
    refuse "cannot tell whether pid $pid (${ARGV[*]}) is this project's: its working directory cannot be read"
  fi
  [ -n "$KIND" ] || continue
  alive "$pid" || continue
  if [ "$(proc_uid "$pid")" != "$me" ]; then
    refuse "pid $pid ($WHAT) belongs to user $(proc_uid "$pid"); stop it as that user, then run this again"
  fi
  TARGETS+=("$pid") DESCS+=("$WHAT")
  [ -n "$STREAM" ] && STREAMS+=("$STREAM")
done
for pid in ${RECORDED_NODES[@]+"${RECORDED_NODES[@]}"} $RUNNER; do
  [ -n "$LIST" ] && break
  if alive "$pid" && ! printf ' %s ' "${TARGETS[@]+"${TARGETS[@]}"}" | grep -q " $pid "; then
    echo "pid $pid, recorded in $DATA_ABS, is now another process ($(proc_argv "$pid" && echo "${ARGV[*]}")): left alone"
  fi
done

describe() { local i; for i in "${!TARGETS[@]}"; do echo "  pid ${TARGETS[$i]}: ${DESCS[$i]}"; done; }
if [ -n "$LIST" ]; then
  for i in "${!TARGETS[@]}"; do echo "${TARGETS[$i]} ${DESCS[$i]}"; done
  exit 0
fi
if [ -n "$DRY" ]; then
  if [ ${#TARGETS[@]} -gt 0 ]; then echo "Would stop:"; describe; else echo "Nothing of this project runs."; fi
  echo "Would delete $DATA_ABS"
  exit 0
fi

# --- Stop: SIGTERM, wait, SIGKILL what is left (still the same process) ---

running() {
  local p out=()
  for p in ${TARGETS[@]+"${TARGETS[@]}"}; do alive "$p" && out+=("$p"); done
  echo ${out[@]+"${out[@]}"}
}
# wait_gone SECONDS PIDS...: true once none of PIDS runs.
wait_gone() {
  local deadline=$((SECONDS + $1)) p left
  shift
  while :; do
    left=
    for p in "$@"; do alive "$p" && left=1; done
    [ -z "$left" ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}
if [ ${#TARGETS[@]} -gt 0 ]; then
  echo "Stopping this project's processes:"
  describe
  # make run's script first: it stops its nodes itself and exits cleanly.
  for i in "${!TARGETS[@]}"; do
    [ "${DESCS[$i]}" = "make run's script" ] || continue
    kill -TERM "${TARGETS[$i]}" 2>/dev/null
    wait_gone "$WAIT" "${TARGETS[$i]}"
  done
  # shellcheck disable=SC2046
  for p in $(running); do kill -TERM "$p" 2>/dev/null; done
  # shellcheck disable=SC2046
  if ! wait_gone "$WAIT" $(running); then
    for i in "${!TARGETS[@]}"; do
      p=${TARGETS[$i]}
      alive "$p" || continue
      classify "$p"
      [ -n "$KIND" ] || continue # exited, and the pid is already someone else's
      echo "pid $p (${DESCS[$i]}) still runs ${WAIT}s after SIGTERM: SIGKILL"
      kill -KILL "$p" 2>/dev/null
    done
    # shellcheck disable=SC2046
    wait_gone 10 $(running) || {
      echo "teardown: still running: $(running); $DATA_ABS is not deleted" >&2
      exit 1
    }
  fi
  echo "stopped ${#TARGETS[@]} processes"
fi

rm -rf "$DATA_ABS"
for s in ${STREAMS[@]+"${STREAMS[@]}"}; do
  # A lock that names a live process is another project's watcher of the same stream.
  lockpid=$(tr -d ' \n' < "$T/spine-$s.lock" 2>/dev/null)
  if [ -n "$lockpid" ] && check_pid "$lockpid" && alive "$lockpid"; then continue; fi
  rm -f "$T/spine-$s.lock" "$T/spine-$s-pipe" "$T/spine-$s-done" "$T/spine-$s-watcher.log" "$T/spine-$s-peek."*
done
echo "Deleted $DATA_ABS."
echo "Cleaned up. Delete this folder to remove Spine entirely."
