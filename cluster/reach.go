package cluster

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Whether a node is alive, as Status reports it. memberlist alone is slow
// to tell: a node killed without leaving is probed, then suspected, and
// only declared dead after its suspicion timeout (SuspicionMult × probe
// interval, about 5 s with the LAN defaults), and memberlist does not
// expose the suspect state. Raft knows sooner: the leader sends every
// follower an AppendEntries every HeartbeatTimeout/10, and guardTransport
// records when each one last accepted one (readLease). So:
//
//   - the leader counts a follower that has accepted nothing for
//     peerDownAfter as not alive, and gossips the list of those in its
//     metadata (nodeMeta.Down);
//   - a follower counts the leader as not alive once it has not heard from
//     it for peerDownAfter, and any node the leader's gossiped list names;
//   - and every node counts a node memberlist does not see alive as not
//     alive, as before.
//
// A killed node thus shows as not alive on every node about a second after
// its death (peerDownAfter, plus a gossip round on followers) instead of
// about five. This is only what Status reports; it decides nothing.

// peerDownAfter is how long a node may go without answering the leader's
// AppendEntries (or a follower without hearing from the leader) before
// Status shows it as not alive: twice the heartbeat timeout, at least a
// second (a follower busy with a large write answers heartbeats late).
func (c *Config) peerDownAfter() time.Duration {
	return max(time.Second, 2*c.HeartbeatTimeout)
}

// downPublishInterval is how often the leader checks whether the set of
// followers it cannot reach changed, to gossip it.
const downPublishInterval = 200 * time.Millisecond

// unreachable returns, sorted, those of ids that have accepted no
// AppendEntries of term for after, as of now, and those that have accepted
// none in term, half of after since another one did: a live follower
// answers a new leader's first heartbeat at once, and a leader just
// elected after its predecessor was killed should not take longer than
// that to say so. Before any follower has accepted one in term it knows
// nothing and returns nil: the first heartbeats are still under way.
func (l *readLease) unreachable(term uint64, ids []raft.ServerID, now time.Time, after time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term != l.term {
		return nil
	}
	var out []string
	for _, id := range ids {
		t, ok := l.acked[id]
		if ok && now.Sub(t) >= after || !ok && now.Sub(l.since) >= after/2 {
			out = append(out, string(id))
		}
	}
	slices.Sort(out)
	return out
}

// unreachableFollowers is, on the leader, the servers of the configuration
// other than itself that have not answered it for peerDownAfter; nil on
// any other node.
func (n *Node) unreachableFollowers() []string {
	if n.raft.State() != raft.Leader {
		return nil
	}
	cfg, err := n.configuration()
	if err != nil {
		return nil
	}
	ids := make([]raft.ServerID, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		if string(s.ID) != n.cfg.NodeID {
			ids = append(ids, s.ID)
		}
	}
	return n.lease.unreachable(n.raft.CurrentTerm(), ids, time.Now(), n.cfg.peerDownAfter())
}

// notAlive is the set of nodes this node's raft view (and, on a follower,
// the leader's gossiped view) says are not alive; see the top of this file.
func (n *Node) notAlive() map[string]bool {
	down := map[string]bool{}
	if n.raft.State() == raft.Leader {
		for _, id := range n.unreachableFollowers() {
			down[id] = true
		}
		return down
	}
	_, lid := n.raft.LeaderWithID()
	if lid == "" || string(lid) == n.cfg.NodeID {
		return down
	}
	leader := string(lid)
	if lc := n.raft.LastContact(); lc.IsZero() || time.Since(lc) >= n.cfg.peerDownAfter() {
		down[leader] = true
		return down
	}
	if p, ok := n.peer(leader); ok && p.alive {
		for _, id := range p.down {
			if id != n.cfg.NodeID {
				down[id] = true
			}
		}
	}
	return down
}

// downLoop gossips, while this node leads, the followers it cannot reach
// (nodeMeta.Down), and an empty list once it no longer leads.
func (n *Node) downLoop() {
	defer n.wg.Done()
	t := time.NewTicker(downPublishInterval)
	defer t.Stop()
	var published []string
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-t.C:
		}
		down := n.unreachableFollowers()
		if slices.Equal(down, published) {
			continue
		}
		n.lease.gossiped.Store(&down)
		if err := n.ml.UpdateNode(time.Second); err != nil {
			n.logger.Debug("gossip unreachable followers", "error", err)
			continue
		}
		if len(down) > len(published) {
			n.logger.Info("followers not answering", "nodes", down)
		}
		published = down
	}
}
