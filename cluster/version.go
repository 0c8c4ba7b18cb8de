package cluster

import "github.com/hashicorp/raft"

// AllServersApply reports whether every server of the raft configuration
// applies command type t, as each gossips (Config.Commands). A leader asks
// before it proposes a type added in a rolling upgrade: an older node
// stops at a type it does not know (skipping it would diverge), so the new
// type waits until the last node runs the new version. A node whose gossip
// is not known yet counts as not applying it. Once open, the gate is not
// expected to close: a node of an older version must not join afterwards.
//
// A node without gossip (Config.DisableGossip: the in-process harnesses,
// whose nodes run one binary) cannot learn its peers' versions and
// answers by its own.
func (n *Node) AllServersApply(t uint8) bool {
	if n.cfg.Commands < t {
		return false
	}
	if n.cfg.DisableGossip {
		return true
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			continue
		}
		if p, ok := n.peers[string(s.ID)]; !ok || p.commands < t {
			return false
		}
	}
	return true
}
