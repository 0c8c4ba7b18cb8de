package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// AddVoter adds m as a voter. It runs on the leader only (ErrNotLeader
// otherwise) and is idempotent: a voter with the same id and address is left
// alone; the same id at a different address (or a server with another id at
// m's address) is removed first; a non-voter is promoted. m's HTTP and gossip
// addresses are remembered so Leader and Status can name them before gossip
// catches up.
func (n *Node) AddVoter(ctx context.Context, m Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: member needs node_id and raft_addr", ErrInvalidConfig)
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := n.checkJoinProof(m); err != nil {
		n.logger.Warn("join refused: no proof of a gossip key of this cluster", "id", m.ID, "addr", m.RaftAddr)
		return err
	}
	if err := n.checkPeerTLS(ctx, m); err != nil {
		n.logger.Warn("join refused: no mutual-TLS handshake with the node's raft address", "id", m.ID, "addr", m.RaftAddr, "error", err)
		return err
	}
	n.learnPeers([]Member{m})
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range cfg.Servers {
		sameID := s.ID == raft.ServerID(m.ID)
		sameAddr := s.Address == raft.ServerAddress(m.RaftAddr)
		switch {
		case sameID && sameAddr && s.Suffrage == raft.Voter:
			return nil
		case sameID && sameAddr:
			// Non-voter: AddVoter below promotes it.
		case sameID || sameAddr:
			n.logger.Info("replacing server", "old_id", s.ID, "old_addr", s.Address, "id", m.ID, "addr", m.RaftAddr)
			if err := n.futureErr(ctx, n.raft.RemoveServer(s.ID, 0, n.timeout(ctx))); err != nil {
				return err
			}
		}
	}
	n.logger.Info("adding voter", "id", m.ID, "addr", m.RaftAddr)
	return n.futureErr(ctx, n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.timeout(ctx)))
}

// RemoveServer removes the server with id from the raft configuration. It
// runs on the leader only (ErrNotLeader otherwise); removing a server that is
// not a member returns nil.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	found := false
	for _, s := range cfg.Servers {
		if s.ID == raft.ServerID(id) {
			found = true
		}
	}
	if !found {
		return nil
	}
	n.logger.Info("removing server", "id", id)
	return n.futureErr(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.timeout(ctx)))
}

// TransferLeadership hands leadership to the voter with id to, or to the most
// up-to-date voter if to is "". It runs on the leader only (ErrNotLeader
// otherwise); ErrUnknownServer if to is not in the configuration.
func (n *Node) TransferLeadership(ctx context.Context, to string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if to == n.cfg.NodeID {
		return nil
	}
	if to == "" {
		return n.futureErr(ctx, n.transfer(func() raft.Future { return n.raft.LeadershipTransfer() }))
	}
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range cfg.Servers {
		if s.ID == raft.ServerID(to) {
			return n.futureErr(ctx, n.transfer(func() raft.Future { return n.raft.LeadershipTransferToServer(s.ID, s.Address) }))
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownServer, to)
}

// transfer starts a leadership transfer with the read lease suspended until
// raft has finished it, whether or not the caller waits that long: the
// target is elected at once, by voters that still know this node as leader.
func (n *Node) transfer(start func() raft.Future) raft.Future {
	resume := n.lease.transfer()
	f := start()
	out := &waitedFuture{done: make(chan struct{})}
	go func() {
		out.err = f.Error()
		resume()
		close(out.done)
	}()
	return out
}

// waitedFuture is a raft.Future another goroutine waits on (a raft future
// must have one waiter).
type waitedFuture struct {
	done chan struct{}
	err  error
}

func (f *waitedFuture) Error() error {
	<-f.done
	return f.err
}

// futureErr waits for a membership/transfer future under ctx and translates
// its error. If ctx ends first the change may still happen.
func (n *Node) futureErr(ctx context.Context, f raft.Future) error {
	err, ctxDone := n.waitFuture(ctx, f)
	if ctxDone {
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
	return translateOpErr(err)
}

// LeaderInfo names the current leader in Status.
type LeaderInfo struct {
	// ID is the leader's node id, "" if unknown.
	ID string `json:"id"`
	// HTTPAddr is the leader's advertised HTTP URL, "" if unknown.
	HTTPAddr string `json:"http_addr"`
}

// NodeStatus is one server of the raft configuration in Status.
type NodeStatus struct {
	// ID is the node id.
	ID string `json:"id"`
	// RaftAddr is the raft address from the configuration.
	RaftAddr string `json:"raft_addr"`
	// HTTPAddr is the advertised HTTP URL ("" if not known yet).
	HTTPAddr string `json:"http_addr"`
	// GossipAddr is the memberlist address ("" if not known yet).
	GossipAddr string `json:"gossip_addr"`
	// Suffrage is "voter", "nonvoter" or "staging".
	Suffrage string `json:"suffrage"`
	// Alive is true if memberlist sees the node alive and Raft does not say
	// otherwise (reach.go): the leader counts a follower that has not
	// answered its AppendEntries for about a second as not alive; a follower
	// counts so the leader once it has not heard from it that long, and the
	// nodes the leader gossips as not answering. Always true for self.
	Alive bool `json:"alive"`
	// HashIndex and StateHash are the node's latest state hash as it
	// gossiped it (this node's own, current, for self); absent if unknown.
	HashIndex uint64 `json:"hash_index,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
}

// Status is this node's view of the cluster, served by GET /cluster/status.
type Status struct {
	// Leader is the current leader, as this node knows it.
	Leader LeaderInfo `json:"leader"`
	// Nodes is the raft configuration joined with gossip metadata.
	Nodes []NodeStatus `json:"nodes"`
	// Term is the current raft term.
	Term uint64 `json:"term"`
	// CommitIndex is the highest log index known committed.
	CommitIndex uint64 `json:"commit_index"`
	// AppliedIndex is the highest index applied to the local FSM.
	AppliedIndex uint64 `json:"applied_index"`
	// NodeID is this node's id.
	NodeID string `json:"node_id"`
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State string `json:"state"`
	// LastContact is the time since the leader was last heard from, as a
	// Go duration ("0s" on the leader, "never" if never).
	LastContact string `json:"last_contact"`
	// LogBatches and LogEntries count, since this process started, the
	// batches raft appended to this node's log (one write and one fsync
	// each) and the entries in them: entries per batch is how much group
	// commit is saving.
	LogBatches uint64 `json:"log_batches"`
	LogEntries uint64 `json:"log_entries"`
	// LogAppendSeconds is the time those batches took to write and fsync:
	// divided by LogBatches, the disk's cost of one durable append.
	LogAppendSeconds float64 `json:"log_append_seconds"`
	// LogWritesOverlapped counts the batches this node, as leader, wrote to
	// its log while they were being replicated instead of before (always 0
	// with SerialLogWrite).
	LogWritesOverlapped uint64 `json:"log_writes_overlapped"`
	// HashIndex and StateHash are this node's running hash of the commands
	// it has applied, and the index of the last one: equal on two nodes
	// that have applied the same log up to the same index ("" if the state
	// machine keeps none, or it is unknown after restoring a snapshot of a
	// build without it).
	HashIndex uint64 `json:"hash_index"`
	StateHash string `json:"state_hash"`
	// HashChecks counts the peers' gossiped state hashes this node
	// compared with its own at the same index; HashMismatches those that
	// differed. A mismatch means the replicas diverged: it is logged at
	// error level and must stay 0.
	HashChecks     uint64 `json:"hash_checks"`
	HashMismatches uint64 `json:"hash_mismatches"`
}

// Status reports this node's view of the cluster. It works on any node.
func (n *Node) Status(ctx context.Context) (Status, error) {
	if n.isShutdown() {
		return Status{}, ErrShutdown
	}
	f := n.raft.GetConfiguration()
	err, ctxDone := n.waitFuture(ctx, f)
	if ctxDone {
		return Status{}, err
	}
	if err != nil {
		return Status{}, translateOpErr(err)
	}
	st := Status{
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.AppliedIndex(),
		NodeID:       n.cfg.NodeID,
		State:        n.raft.State().String(),
		Nodes:        []NodeStatus{},
		LogBatches:   n.stores.counted.appends.Load(),
		LogEntries:   n.stores.counted.entries.Load(),

		LogAppendSeconds: time.Duration(n.stores.counted.appendNanos.Load()).Seconds(),
	}
	if n.stores.overlap != nil {
		st.LogWritesOverlapped = n.stores.overlap.overlapped.Load()
	}
	st.HashIndex, st.StateHash = n.StateHash()
	st.HashChecks, st.HashMismatches = n.HashChecks()
	st.Leader.ID, st.Leader.HTTPAddr = n.Leader()
	switch lc := n.raft.LastContact(); {
	case n.raft.State() == raft.Leader:
		st.LastContact = "0s"
	case lc.IsZero():
		st.LastContact = "never"
	default:
		st.LastContact = time.Since(lc).Round(time.Millisecond).String()
	}
	down := n.notAlive()
	for _, s := range f.Configuration().Servers {
		ns := NodeStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: suffrage(s.Suffrage)}
		if ns.ID == n.cfg.NodeID {
			ns.HTTPAddr, ns.GossipAddr, ns.Alive = n.cfg.HTTPAddr, n.cfg.GossipAddr, true
			ns.HashIndex, ns.StateHash = st.HashIndex, st.StateHash
		} else if p, ok := n.peer(ns.ID); ok {
			ns.HTTPAddr, ns.GossipAddr, ns.Alive = p.HTTPAddr, p.GossipAddr, p.alive && !down[ns.ID]
			if p.report != nil {
				ns.HashIndex, ns.StateHash = p.report.index, p.report.hash
			}
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st, nil
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	case raft.Staging:
		return "staging"
	default:
		return s.String()
	}
}
