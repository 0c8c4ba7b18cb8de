package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/spine-queue/spine/internal/testcluster"
)

// testFSM appends every command to a slice; snapshots are the slice as JSON.
type testFSM struct {
	mu   sync.Mutex
	cmds []string
	// restoreDelay (nanoseconds) makes each Restore take at least that
	// long, as a large state's would.
	restoreDelay atomic.Int64
}

func (f *testFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return len(f.cmds)
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &testSnap{cmds: append([]string(nil), f.cmds...)}, nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if d := f.restoreDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d)) // a large state's restore
	}
	var cmds []string
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

func (f *testFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

type testSnap struct{ cmds []string }

func (s *testSnap) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.cmds); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s *testSnap) Release() {}

// testLogWriter sends log lines to t.Log until the test ends; late lines
// from goroutines still winding down are dropped instead of panicking.
type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB, name string) hclog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { // registered first, so it runs after node shutdowns
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: w, Level: hclog.Info})
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := testcluster.FreePort(true)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// fastTimings makes elections quick for tests.
func fastTimings(c *Config) {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.ApplyTimeout = 5 * time.Second
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLeader waits until exactly one of nodes is the ready leader and every
// node in nodes agrees on its id.
func waitLeader(t testing.TB, nodes []*Node) *Node {
	t.Helper()
	var leader *Node
	waitFor(t, 10*time.Second, "a ready leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if id, _ := n.Leader(); id != leader.ID() {
				return false
			}
		}
		return true
	})
	return leader
}

func applyOK(t testing.TB, n *Node, cmd string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, idx, err := n.Apply(ctx, []byte(cmd))
	if err != nil {
		t.Fatalf("apply %q on %s: %v", cmd, n.ID(), err)
	}
	return idx
}

func waitFSM(t testing.TB, f *testFSM, want []string) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("fsm to hold %d commands", len(want)), func() bool {
		return strings.Join(f.list(), ",") == strings.Join(want, ",")
	})
}

// batchFSM is a testFSM that also implements raft.BatchingFSM.
type batchFSM struct {
	testFSM
	batches int
}

func (f *batchFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	f.mu.Lock()
	f.batches++
	f.mu.Unlock()
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.Apply(l)
		}
	}
	return out
}
