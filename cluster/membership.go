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
	if m.Transport != 0 {
		n.joinedBinary(m)
	}
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
			l := n.SupportedLevel()
			ns.SupportedLevel = &l
		} else if p, ok := n.peer(ns.ID); ok {
			ns.HTTPAddr, ns.GossipAddr, ns.Alive = p.HTTPAddr, p.GossipAddr, p.alive && !down[ns.ID]
			if p.report != nil {
				ns.HashIndex, ns.StateHash = p.report.index, p.report.hash
			}
			if p.commands > 0 || p.level > 0 {
				l := p.supported()
				ns.SupportedLevel = &l
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
