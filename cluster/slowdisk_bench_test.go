package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// slowStore is an in-memory log whose appends take as long as a slow
// disk's fsync.
type slowStore struct {
	*raft.InmemStore
	delay time.Duration
}

func (s *slowStore) StoreLogs(logs []*raft.Log) error {
	time.Sleep(s.delay)
	return s.InmemStore.StoreLogs(logs)
}

func (s *slowStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// BenchmarkElectionsSlowDisk measures what sending heartbeats through raft's
// main loop (design.md §2) costs in leader elections when every append
// takes as long as a slow disk: 3 nodes on TCP with the default timings
// (500 ms), a writer proposing for 10 s, with and without the fast path.
// It reports whether the cluster could form at all (add its voters within
// 30 s), the terms that passed while writing (new elections) and the
// writes made.
//
//	go test -run xxx -bench ElectionsSlowDisk -benchtime 1x ./cluster/
func BenchmarkElectionsSlowDisk(b *testing.B) {
	for _, delay := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond} {
		for _, fast := range []bool{false, true} {
			b.Run(fmt.Sprintf("fsync=%s/fastpath=%v", delay, fast), func(b *testing.B) {
				heartbeatFastPath = fast
				defer func() { heartbeatFastPath = false }()
				for range b.N {
					terms, writes, formed := slowDiskRun(b, delay, 10*time.Second)
					if !formed {
						b.Log("no leader kept its quorum long enough to add the voters in 30 s")
						b.ReportMetric(0, "formed")
						continue
					}
					b.ReportMetric(1, "formed")
					b.ReportMetric(float64(terms), "elections")
					b.ReportMetric(float64(writes), "writes")
				}
			})
		}
	}
}

// readyLeader returns the one ready leader among nodes, or nil.
func readyLeader(nodes []*Node) *Node {
	var l *Node
	for _, n := range nodes {
		if n.IsLeader() {
			if l != nil {
				return nil
			}
			l = n
		}
	}
	return l
}

func slowDiskRun(b *testing.B, delay, run time.Duration) (elections uint64, writes int, formed bool) {
	nodes := make([]*Node, 3)
	for i := range 3 {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, nil)
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("s%d", i)
		store := &slowStore{InmemStore: raft.NewInmemStore(), delay: delay}
		cfg := Config{NodeID: id, DataDir: b.TempDir(), HTTPAddr: "http://" + id + ".invalid",
			Bootstrap: i == 0, FSM: &testFSM{}, Logger: testLogger(b, id), Transport: tr, DisableGossip: true,
			LogStore: store, StableStore: store.InmemStore, SnapshotStore: raft.NewInmemSnapshotStore()}
		n, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = n
	}
	defer func() {
		for _, n := range nodes {
			n.Shutdown()
		}
	}()
	// Membership changes may fail while a leader steps down (the slowest
	// disks): retry on whoever leads, for a bounded time.
	formDeadline := time.Now().Add(30 * time.Second)
	for i, n := range nodes[1:] {
		for {
			if time.Now().After(formDeadline) {
				return 0, 0, false
			}
			leader := readyLeader(nodes[:i+1])
			if leader == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if leader.AddVoter(context.Background(), n.self()) == nil {
				break
			}
		}
	}
	var start uint64
	for _, n := range nodes {
		start = max(start, n.raft.CurrentTerm())
	}
	deadline := time.Now().Add(run)
	for time.Now().Before(deadline) {
		var l *Node
		for _, n := range nodes {
			if n.IsLeader() {
				l = n
			}
		}
		if l == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, _, err := l.Apply(ctx, []byte("w")); err == nil {
			writes++
		}
		cancel()
	}
	var last uint64
	for _, n := range nodes {
		last = max(last, n.raft.CurrentTerm())
	}
	return last - start, writes, true
}
