package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// lockedBuffer is a log output read while nodes write it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// linesWith returns the lines of log that contain every word.
func linesWith(log string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// Only raft's replication finding a follower behind the leader's snapshot
// is lowered; the same words from anywhere else, another error, or another
// message stay errors.
func TestExpectedLogMiss(t *testing.T) {
	const prev, next = "github.com/hashicorp/raft.(*Raft).setPreviousLog", "github.com/hashicorp/raft.(*Raft).setNewLogs"
	for _, tc := range []struct {
		fn, msg string
		args    []interface{}
		want    bool
	}{
		{prev, "failed to get log", []interface{}{"index", uint64(7), "error", raft.ErrLogNotFound}, true},
		{next, "failed to get log", []interface{}{"index", uint64(7), "error", raft.ErrLogNotFound}, true},
		{next, "failed to get log", []interface{}{"index", uint64(7), "error", fmt.Errorf("wal: %w", raft.ErrLogNotFound)}, true},
		// Applying its own log, raft panics right after: a real error.
		{"github.com/hashicorp/raft.(*Raft).processLogs", "failed to get log", []interface{}{"index", uint64(7), "error", raft.ErrLogNotFound}, false},
		{"github.com/hashicorp/raft.NewRaft", "failed to get log", []interface{}{"index", uint64(7), "error", raft.ErrLogNotFound}, false},
		{"", "failed to get log", []interface{}{"index", uint64(7), "error", raft.ErrLogNotFound}, false},
		// The store failing is an error wherever it happens.
		{next, "failed to get log", []interface{}{"index", uint64(7), "error", errors.New("read /data/wal: input/output error")}, false},
		{next, "failed to get log", []interface{}{"index", uint64(7)}, false},
		{next, "failed to appendEntries to", []interface{}{"error", raft.ErrLogNotFound}, false},
	} {
		if got := expectedLogMiss(tc.fn, tc.msg, tc.args); got != tc.want {
			t.Errorf("expectedLogMiss(%q, %q, %v) = %v, want %v", tc.fn, tc.msg, tc.args, got, tc.want)
		}
	}

	// Called from outside raft, the adapter changes nothing, through any of
	// its derived loggers.
	var out lockedBuffer
	l := newRaftLogger(hclog.New(&hclog.LoggerOptions{Name: "spine", Output: &out, Level: hclog.Debug})).Named("raft").With("k", "v")
	l.Error("failed to get log", "index", 7, "error", raft.ErrLogNotFound)
	l.Log(hclog.Error, "failed to get log", "index", 8, "error", raft.ErrLogNotFound)
	l.Warn("failed to get log entry", "index", 9)
	if got := len(linesWith(out.String(), "[ERROR] spine.raft: failed to get log:")); got != 2 {
		t.Errorf("log:\n%s\nwant the two errors at ERROR", out.String())
	}
	if len(linesWith(out.String(), "[WARN]  spine.raft: failed to get log entry")) != 1 {
		t.Errorf("log:\n%s\nwant the warning unchanged", out.String())
	}
}

// A node joins a cluster whose leader has compacted its log: the leader
// finds the entries gone and sends the snapshot, which raft logs as
// "failed to get log ... log not found". That is the expected path, so
// the node log has it at DEBUG and no ERROR line for it, and the joiner
// catches up.
func TestJoinBehindASnapshotLogsNoError(t *testing.T) {
	ctx := context.Background()
	var out lockedBuffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "spine", Output: &out, Level: hclog.Debug})
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1")}
	cfgs[0].Bootstrap = true
	for i := range cfgs {
		cfgs[i].Logger = logger.Named(cfgs[i].NodeID)
		cfgs[i].SnapshotInterval = 50 * time.Millisecond
		cfgs[i].SnapshotThreshold = 4
		cfgs[i].TrailingLogs = 2
	}
	n0 := startTCP(t, cfgs[0])
	leader := waitLeader(t, []*Node{n0.Node})
	var want []string
	var last uint64
	for i := 0; i < 20; i++ {
		cmd := fmt.Sprintf("c%d", i)
		last = applyOK(t, leader, cmd)
		want = append(want, cmd)
	}
	waitFor(t, 10*time.Second, "the leader to compact its log", func() bool {
		var si uint64
		fmt.Sscan(leader.raft.Stats()["last_snapshot_index"], &si)
		first, err := leader.stores.logs.FirstIndex()
		return err == nil && si+5 >= last && first > 1
	})

	n1 := startTCP(t, cfgs[1])
	m := Member{ID: n1.cfg.NodeID, RaftAddr: n1.cfg.RaftAddr, HTTPAddr: n1.cfg.HTTPAddr, GossipAddr: n1.cfg.GossipAddr}
	if err := leader.AddVoter(ctx, m); err != nil {
		t.Fatalf("add n1: %v", err)
	}
	waitFSM(t, n1.fsm, want)

	log := out.String()
	if errs := linesWith(log, "[ERROR]", "failed to get log"); len(errs) > 0 {
		t.Errorf("the expected snapshot fallback logged errors:\n%s", strings.Join(errs, "\n"))
	}
	if len(linesWith(log, "[DEBUG] spine.n0.raft: failed to get log", "log not found")) == 0 ||
		len(linesWith(log, "[INFO]  spine.n0.raft: installing snapshot on")) == 0 {
		t.Errorf("the join did not go through the snapshot fallback:\n%s", log)
	}
}

// A joining node says in its join which raft protocol it serves, so the
// leader replicates to it in binary from the first AppendEntries, without
// first opening a msgpack pipeline it would close (and raft log as an
// error) once gossip tells.
func TestJoinDialsBinaryFromTheStart(t *testing.T) {
	ctx := context.Background()
	var out lockedBuffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "spine", Output: &out, Level: hclog.Debug})
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1")}
	cfgs[0].Bootstrap = true
	for i := range cfgs {
		cfgs[i].Logger = logger.Named(cfgs[i].NodeID)
	}
	n0 := startTCP(t, cfgs[0])
	leader := waitLeader(t, []*Node{n0.Node})
	want := []string{"c0"}
	applyOK(t, leader, "c0")

	n1 := startTCP(t, cfgs[1])
	if err := leader.AddVoter(ctx, n1.self()); err != nil {
		t.Fatalf("add n1: %v", err)
	}
	waitFSM(t, n1.fsm, want)
	want = append(want, "c1")
	applyOK(t, leader, "c1")
	waitFSM(t, n1.fsm, want)

	if got := n1.bin.servedMsgpack.Load(); got != 0 {
		t.Errorf("the joined node served %d msgpack connections; its join said it serves binary", got)
	}
	if n1.bin.servedBinary.Load() == 0 {
		t.Error("the joined node served no binary connection")
	}
	if errs := linesWith(out.String(), "[ERROR]"); len(errs) > 0 {
		t.Errorf("a join logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// The transport reopening a msgpack pipeline in binary is logged at INFO.
func TestBinUpgradeLoggedAsInfo(t *testing.T) {
	var out lockedBuffer
	l := newRaftLogger(hclog.New(&hclog.LoggerOptions{Name: "spine", Output: &out, Level: hclog.Debug}))
	l.Error("failed to pipeline appendEntries", "peer", "n1", "error", errBinUpgrade)
	l.Error("failed to pipeline appendEntries", "peer", "n1", "error", errors.New("connection reset"))
	log := out.String()
	if len(linesWith(log, "[INFO]  spine: failed to pipeline appendEntries", "binary protocol")) != 1 ||
		len(linesWith(log, "[ERROR] spine: failed to pipeline appendEntries", "connection reset")) != 1 {
		t.Errorf("log:\n%s\nwant the upgrade at INFO and the reset at ERROR", log)
	}
}
