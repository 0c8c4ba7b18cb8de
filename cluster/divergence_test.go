package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// faultTransport is a real TCP transport whose outgoing RPCs a test can
// drop, or, for heartbeats, answer itself. Pipelining is refused so every
// AppendEntries passes through the filter.
type faultTransport struct {
	*raft.NetworkTransport
	mu   sync.Mutex
	rule func(target raft.ServerAddress, heartbeat bool) faultAction
}

type faultAction int

const (
	deliver faultAction = iota
	drop                // the RPC fails as if the network lost it
	fakeAck             // a heartbeat is answered "accepted" without being sent
)

var errDropped = errors.New("fault transport: dropped")

func newFaultTransport(t *testing.T) *faultTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &faultTransport{NetworkTransport: tr}
}

func (f *faultTransport) setRule(rule func(target raft.ServerAddress, heartbeat bool) faultAction) {
	f.mu.Lock()
	f.rule = rule
	f.mu.Unlock()
}

func (f *faultTransport) action(target raft.ServerAddress, heartbeat bool) faultAction {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rule == nil {
		return deliver
	}
	return f.rule(target, heartbeat)
}

func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	return len(a.Entries) == 0 && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 && a.LeaderCommitIndex == 0
}

func (f *faultTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (f *faultTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	switch f.action(target, isHeartbeat(args)) {
	case drop:
		return errDropped
	case fakeAck:
		*resp = raft.AppendEntriesResponse{Term: args.Term, Success: true}
		return nil
	}
	return f.NetworkTransport.AppendEntries(id, target, args, resp)
}

func (f *faultTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if f.action(target, false) != deliver {
		return errDropped
	}
	return f.NetworkTransport.RequestVote(id, target, args, resp)
}

func (f *faultTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if f.action(target, false) != deliver {
		return errDropped
	}
	return f.NetworkTransport.RequestPreVote(id, target, args, resp)
}

func (f *faultTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if f.action(target, false) != deliver {
		return errDropped
	}
	return f.NetworkTransport.TimeoutNow(id, target, args, resp)
}

// TestPausedLeaderCannotWriteUnderNewTerm provokes hashicorp/raft#695, the
// cause of the replica divergence seen under leader pauses: a deposed leader
// whose main loop has not yet noticed dispatches a client's entry under the
// term a heartbeat just taught it, at the index where the new leader put
// its own entry of that term. Log matching then hides the difference from
// every later append, and the old leader applies an entry nobody else has.
//
// The interleaving is made deterministic with the network instead of a
// pause: the old leader (slow timings, so its own lease check does not
// step it down) is cut off, its heartbeats acknowledged by the fault
// transport so it keeps believing in its quorum; the other two elect a new
// leader; then only the new leader's heartbeats reach the old one, and a
// client's command is handed to the old one the moment its term changes.
// Afterwards every node must hold the same log and have applied the same
// commands.
func TestPausedLeaderCannotWriteUnderNewTerm(t *testing.T) {
	const size = 3
	trans := make([]*faultTransport, size)
	fsms := make([]*testFSM, size)
	nodes := make([]*Node, size)
	for i := range size {
		trans[i] = newFaultTransport(t)
	}
	start := func(i int, slow bool) {
		id := fmt.Sprintf("d%d", i)
		fsms[i] = &testFSM{}
		cfg := Config{NodeID: id, DataDir: t.TempDir(), HTTPAddr: "http://" + id + ".invalid",
			Bootstrap: i == 0, FSM: fsms[i], Logger: testLogger(t, id), Transport: trans[i], DisableGossip: true}
		fastTimings(&cfg)
		if slow {
			// The old leader: it must stay in its leader loop, idle, for the
			// whole time the test needs.
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, 5*time.Second
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Shutdown() })
		nodes[i] = n
	}
	start(0, false)
	start(1, false)
	start(2, true) // the old leader
	boot := waitLeader(t, nodes[:1])
	ctx := context.Background()
	for _, n := range nodes[1:] {
		// The fast timings can depose the first leader on a loaded machine
		// while it adds the others: add again through whoever leads.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := boot.AddVoter(context.Background(), n.self())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			boot = waitLeader(t, nodes)
		}
	}
	old := nodes[2]
	oldAddr := trans[2].LocalAddr()
	// A transfer can time out on a loaded machine (the target must win an
	// election within the leader's election timeout): try until a deadline.
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := waitLeader(t, nodes)
		if l == old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("leadership did not move to the slow node")
		}
		if err := l.TransferLeadership(ctx, old.ID()); err != nil {
			t.Logf("transfer to %s: %v", old.ID(), err)
		}
	}
	var want []string
	for i := range 3 {
		cmd := fmt.Sprintf("before-%d", i)
		applyOK(t, old, cmd)
		want = append(want, cmd)
	}
	for _, f := range fsms {
		waitFSM(t, f, want)
	}
	oldTerm := old.raft.CurrentTerm()

	// Cut the old leader off. Its heartbeats are acknowledged by the
	// transport so it keeps its leadership; nothing else gets through.
	trans[2].setRule(func(_ raft.ServerAddress, hb bool) faultAction {
		if hb {
			return fakeAck
		}
		return drop
	})
	for i := range 2 {
		trans[i].setRule(func(target raft.ServerAddress, _ bool) faultAction {
			if target == oldAddr {
				return drop
			}
			return deliver
		})
	}
	var leader *Node
	var li int
	waitFor(t, 10*time.Second, "a new leader among the other two", func() bool {
		for i, n := range nodes[:2] {
			if n.IsLeader() {
				leader, li = n, i
				return true
			}
		}
		return false
	})
	newTerm := leader.raft.CurrentTerm()
	if newTerm <= oldTerm || old.raft.State() != raft.Leader {
		t.Fatalf("setup: new term %d (old %d), old leader in state %s", newTerm, oldTerm, old.raft.State())
	}

	// Let only the new leader's heartbeats reach the old one, and hand the
	// old one a command as soon as its term changes.
	trans[li].setRule(func(target raft.ServerAddress, hb bool) faultAction {
		if target == oldAddr && !hb {
			return drop
		}
		return deliver
	})
	waitFor(t, 10*time.Second, "the old leader to learn the new term", func() bool {
		return old.raft.CurrentTerm() >= newTerm
	})
	stray := old.raft.Apply([]byte("stray"), 2*time.Second)

	// Heal and keep writing through the new leader.
	for _, tr := range trans {
		tr.setRule(nil)
	}
	strayErr := stray.Error()
	t.Logf("the old leader's stray command: %v", strayErr)
	if strayErr == nil {
		want = append(want, "stray")
	}
	for i := range 3 {
		cmd := fmt.Sprintf("after-%d", i)
		applyOK(t, leader, cmd)
		want = append(want, cmd)
	}
	last := leader.raft.LastIndex()
	waitFor(t, 10*time.Second, "every node to apply the new leader's log", func() bool {
		for _, n := range nodes {
			if n.AppliedIndex() < last {
				return false
			}
		}
		return true
	})

	// Raft's log-matching rule: the same entries at every index.
	for idx := uint64(1); idx <= last; idx++ {
		var ref raft.Log
		if err := nodes[li].stores.logs.GetLog(idx, &ref); err != nil {
			continue // compacted on the leader
		}
		for i, n := range nodes {
			var got raft.Log
			if err := n.stores.logs.GetLog(idx, &got); err != nil {
				continue
			}
			if got.Term != ref.Term || got.Type != ref.Type || string(got.Data) != string(ref.Data) {
				t.Errorf("index %d: node %d holds (term %d, %s, %q), the leader (term %d, %s, %q)",
					idx, i, got.Term, got.Type, got.Data, ref.Term, ref.Type, ref.Data)
			}
		}
	}
	// And the same commands applied everywhere, the stray one nowhere
	// unless it was acknowledged.
	for i, f := range fsms {
		if got := fmt.Sprint(f.list()); got != fmt.Sprint(want) {
			t.Errorf("node %d applied %s, want %s", i, got, fmt.Sprint(want))
		}
	}
}
