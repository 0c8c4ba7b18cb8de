package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestReadLease(t *testing.T) {
	l := newReadLease(500 * time.Millisecond)
	t0 := time.Now()
	voters := []raft.ServerID{"a", "b", "c"}
	ok := &raft.AppendEntriesResponse{Term: 3, Success: true}

	if l.holds("a", 3, voters, t0) {
		t.Fatal("lease held with no follower heard from")
	}
	l.answered("b", 3, t0, ok)
	if !l.holds("a", 3, voters, t0.Add(100*time.Millisecond)) {
		t.Fatal("lease not held with a quorum (self and b) heard from 100 ms ago")
	}
	// The lease runs from when the append was sent, not answered.
	if l.holds("a", 3, voters, t0.Add(500*time.Millisecond)) {
		t.Fatal("lease held 500 ms after the quorum's append was sent")
	}
	// A paused leader wakes up to an old contact: no lease.
	if l.holds("a", 3, voters, t0.Add(4*time.Second)) {
		t.Fatal("lease held after a pause of 4 s")
	}
	// Another term's leader, or a node that is not a voter, holds nothing.
	if l.holds("a", 4, voters, t0.Add(100*time.Millisecond)) {
		t.Fatal("lease held in a term with no answers")
	}
	if l.holds("x", 3, voters, t0.Add(100*time.Millisecond)) {
		t.Fatal("a non-voter holds the lease")
	}
	// Refusals and answers from a newer term do not count; a newer term's
	// answers reset the lease.
	l.answered("c", 3, t0.Add(time.Second), &raft.AppendEntriesResponse{Term: 3, Success: false})
	l.answered("c", 3, t0.Add(time.Second), &raft.AppendEntriesResponse{Term: 5, Success: false})
	if l.holds("a", 3, voters, t0.Add(1100*time.Millisecond)) {
		t.Fatal("a refused append renewed the lease")
	}
	l.answered("c", 4, t0.Add(time.Second), &raft.AppendEntriesResponse{Term: 4, Success: true})
	if l.holds("a", 3, voters, t0.Add(1100*time.Millisecond)) || !l.holds("a", 4, voters, t0.Add(1100*time.Millisecond)) {
		t.Fatal("answers of term 4 did not replace term 3's")
	}
	l.answered("b", 3, t0.Add(2*time.Second), ok)
	if l.holds("a", 3, voters, t0.Add(2*time.Second)) {
		t.Fatal("an answer of an older term counted")
	}
	// A transfer suspends the lease until it ends.
	resume := l.transfer()
	if l.holds("a", 4, voters, t0.Add(1100*time.Millisecond)) {
		t.Fatal("lease held during a leadership transfer")
	}
	resume()
	if !l.holds("a", 4, voters, t0.Add(1100*time.Millisecond)) {
		t.Fatal("lease not back after the transfer ended")
	}
	// A single voter is its own quorum.
	if !newReadLease(time.Second).holds("a", 9, []raft.ServerID{"a"}, t0) {
		t.Fatal("a one-node cluster's leader holds no lease")
	}
}

// A real leader cut off from its followers loses the lease within the
// lease timeout; healed, it holds it again.
func TestLeaderLosesReadLeaseWhenCutOff(t *testing.T) {
	trans := make([]*faultTransport, 3)
	nodes := make([]*Node, 3)
	for i := range 3 {
		trans[i] = newFaultTransport(t)
		id := string(rune('p' + i))
		cfg := Config{NodeID: id, DataDir: t.TempDir(), HTTPAddr: "http://" + id + ".invalid",
			Bootstrap: i == 0, FSM: &testFSM{}, Logger: testLogger(t, id), Transport: trans[i], DisableGossip: true}
		fastTimings(&cfg)
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Shutdown() })
		nodes[i] = n
	}
	boot := waitLeader(t, nodes[:1])
	if !boot.StillRecent() {
		t.Fatal("a one-voter leader does not hold its lease")
	}
	for _, n := range nodes[1:] {
		if err := boot.AddVoter(t.Context(), n.self()); err != nil {
			t.Fatal(err)
		}
	}
	leader := waitLeader(t, nodes)
	waitFor(t, 10*time.Second, "the leader's read lease", leader.StillRecent)
	if _, ok := leader.RecentIndex(); !ok {
		t.Fatal("RecentIndex refused while the lease holds")
	}
	for i, n := range nodes {
		if n == leader {
			trans[i].setRule(func(raft.ServerAddress, bool) faultAction { return drop })
		}
	}
	waitFor(t, 10*time.Second, "the cut-off leader to lose its lease", func() bool { return !leader.StillRecent() })
	if _, ok := leader.RecentIndex(); ok && leader.IsLeader() {
		t.Fatal("RecentIndex vouches for a leader without its lease")
	}
}
