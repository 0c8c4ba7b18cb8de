package cluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// hashFSM is a testFSM that keeps a running hash of its commands, as
// fsm.FSM does; skew, once set, makes it fold one extra byte into every
// later command, as a replica whose log diverged would.
type hashFSM struct {
	testFSM
	hmu     sync.Mutex
	h       [32]byte
	last    uint64
	applied uint64
	at      map[uint64][32]byte
	skew    bool
}

func (f *hashFSM) Apply(l *raft.Log) interface{} {
	f.hmu.Lock()
	data := l.Data
	if f.skew {
		data = append([]byte{'!'}, data...)
	}
	f.h = sha256.Sum256(append(f.h[:], data...))
	f.last, f.applied = l.Index, l.Index
	f.at[l.Index] = f.h
	f.hmu.Unlock()
	return f.testFSM.Apply(l)
}

func (f *hashFSM) StateHash() (uint64, [32]byte, bool) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.last, f.h, true
}

func (f *hashFSM) StateHashAt(index uint64) ([32]byte, bool) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	if index > f.applied {
		return [32]byte{}, false
	}
	for i := index; i > 0; i-- {
		if h, ok := f.at[i]; ok {
			return h, true
		}
	}
	return [32]byte{}, true
}

func (f *hashFSM) setSkew() {
	f.hmu.Lock()
	f.skew = true
	f.hmu.Unlock()
}

// Nodes gossip their state hashes and compare every peer's with their own
// at the same index: agreeing replicas count checks and no mismatch; a
// replica whose hash departs is reported by the others.
func TestStateHashGossipedAndCompared(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "h0"), newTCPConfig(t, "h1"), newTCPConfig(t, "h2")}
	cfgs[0].Bootstrap = true
	fsms := make([]*hashFSM, 3)
	nodes := make([]*Node, 3)
	for i, cfg := range cfgs {
		fsms[i] = &hashFSM{at: map[uint64][32]byte{}}
		cfg.FSM = fsms[i]
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Shutdown() })
		nodes[i] = n
	}
	leader := waitLeader(t, nodes[:1])
	for i, n := range nodes[1:] {
		c := cfgs[i+1]
		if err := leader.AddVoter(ctx, Member{ID: c.NodeID, RaftAddr: c.RaftAddr, HTTPAddr: c.HTTPAddr, GossipAddr: c.GossipAddr}); err != nil {
			t.Fatalf("add %s: %v", n.ID(), err)
		}
	}
	waitLeader(t, nodes)
	writes := func(prefix string) {
		for i := range 5 {
			applyOK(t, leader, fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	writes("a")
	waitFor(t, 20*time.Second, "every node to check every peer's hash", func() bool {
		for _, n := range nodes {
			if checks, _ := n.HashChecks(); checks < 2 {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		if _, mm := n.HashChecks(); mm != 0 {
			t.Fatalf("%s: %d mismatches between agreeing replicas", n.ID(), mm)
		}
		st, err := n.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.StateHash == "" || st.HashIndex == 0 || st.HashChecks == 0 {
			t.Fatalf("%s: status without its hash: %+v", n.ID(), st)
		}
	}

	// One replica departs: the others see it.
	fsms[2].setSkew()
	writes("b")
	waitFor(t, 20*time.Second, "the healthy nodes to report the diverged one", func() bool {
		for _, n := range nodes[:2] {
			if _, mm := n.HashChecks(); mm == 0 {
				return false
			}
		}
		return true
	})
	st, err := nodes[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.HashMismatches == 0 {
		t.Fatal("status does not report the mismatch")
	}
}
