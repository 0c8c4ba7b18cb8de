package cluster

import (
	"errors"
	"runtime"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftLogger is the logger raft writes through: the node's logger, except
// that raft's "failed to get log ... log not found" from the leader's
// replication to a follower is logged at DEBUG, not ERROR. It is the
// expected path whenever a follower needs entries the leader has already
// compacted into a snapshot (after a snapshot restore, when a node joins or
// comes back far behind): raft then sends that follower the snapshot and
// logs "installing snapshot on" at INFO. Every other error, including a
// missing entry anywhere else (the node applying its own log, which raft
// follows with a panic), stays at ERROR.
type raftLogger struct{ hclog.Logger }

func newRaftLogger(l hclog.Logger) hclog.Logger { return raftLogger{l} }

func (l raftLogger) Error(msg string, args ...interface{}) {
	l.Log(hclog.Error, msg, args...)
}

func (l raftLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	if level == hclog.Error && expectedLogMiss(raftCaller(), msg, args) {
		level = hclog.Debug
	}
	if level == hclog.Error && argError(args, errBinUpgrade) {
		// The transport closed a msgpack pipeline to reopen it in binary
		// once the peer's gossip said it serves it: expected, once a peer.
		level = hclog.Info
	}
	l.Logger.Log(level, msg, args...)
}

func (l raftLogger) With(args ...interface{}) hclog.Logger { return raftLogger{l.Logger.With(args...)} }
func (l raftLogger) Named(name string) hclog.Logger        { return raftLogger{l.Logger.Named(name)} }
func (l raftLogger) ResetNamed(name string) hclog.Logger {
	return raftLogger{l.Logger.ResetNamed(name)}
}

// snapshotFallbacks are the raft functions whose "failed to get log" with
// raft.ErrLogNotFound sends the follower a snapshot instead (replicateTo's
// SEND_SNAP).
var snapshotFallbacks = map[string]bool{
	"github.com/hashicorp/raft.(*Raft).setPreviousLog": true,
	"github.com/hashicorp/raft.(*Raft).setNewLogs":     true,
}

// expectedLogMiss reports whether raft's error log line msg/args, written
// from function fn, is the leader finding that a follower needs compacted
// entries.
func expectedLogMiss(fn, msg string, args []interface{}) bool {
	if msg != "failed to get log" || !snapshotFallbacks[fn] {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "error" {
			err, ok := args[i+1].(error)
			return ok && errors.Is(err, raft.ErrLogNotFound)
		}
	}
	return false
}

// argError reports whether the log line's "error" argument is target.
func argError(args []interface{}, target error) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "error" {
			err, ok := args[i+1].(error)
			return ok && errors.Is(err, target)
		}
	}
	return false
}

// raftCaller names the function that called the raftLogger method calling
// it ("" when it is not a raft function).
func raftCaller() string {
	pc := make([]uintptr, 8)
	// Skip runtime.Callers, raftCaller and Log (and Error, which calls Log).
	n := runtime.Callers(3, pc)
	frames := runtime.CallersFrames(pc[:n])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/hashicorp/raft.") {
			return f.Function
		}
		own := strings.HasPrefix(f.Function, "github.com/spine-queue/spine/cluster.raftLogger.") ||
			strings.HasPrefix(f.Function, "github.com/spine-queue/spine/cluster.(*raftLogger).")
		if !own || !more {
			return ""
		}
	}
}
