package cluster

import "github.com/hashicorp/raft"

// A node gossips what its build applies (nodeMeta): the highest command
// type (Config.Commands) and the highest cluster level (Config.Level). The
// leader raises the cluster's level (fsm/level.go) only as far as every
// server of the raft configuration supports (MinSupportedLevel).

// Command types whose presence tells the level of a build that gossips no
// level: the builds before levels were gossiped applied level 1 from the
// type that raises the level on, and level 2 from the dispatch type. These
// are facts about past builds and never change.
const (
	commandLevel    = 42 // the level command (fsm.CmdLevel)
	commandDispatch = 43 // the dispatch command (fsm.CmdDispatch)
)

// levelOf is the highest level a build supports, from what it gossips: its
// level when it gossips one, else the level its highest command type tells.
func levelOf(level int, commands uint8) int {
	if level > 0 {
		return level
	}
	switch {
	case commands >= commandDispatch:
		return 2
	case commands >= commandLevel:
		return 1
	}
	return 0
}

// SupportedLevel is the highest cluster level this node's build supports.
func (n *Node) SupportedLevel() int { return levelOf(n.cfg.Level, n.cfg.Commands) }

// MinSupportedLevel is the highest cluster level every server of the raft
// configuration (voters and non-voters) supports, as each gossips it: the
// level the leader may raise the cluster to. A server whose gossip is not
// known yet counts as supporting none (0): the level waits until it is
// heard from. Once a level is supported it is not expected to be
// withdrawn: a node of an older build must not join afterwards.
//
// A node without gossip (Config.DisableGossip: the in-process harnesses,
// whose nodes run one binary) cannot learn its peers' builds and answers
// by its own.
func (n *Node) MinSupportedLevel() int {
	own := n.SupportedLevel()
	if n.cfg.DisableGossip || own == 0 {
		return own
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	return minSupported(own, n.cfg.NodeID, f.Configuration().Servers, n.peers)
}

// minSupported is the lowest level the servers support: self's own, each
// other's as peers knows it (0 for one it does not know).
func minSupported(own int, self string, servers []raft.Server, peers map[string]peerInfo) int {
	low := own
	for _, s := range servers {
		if s.ID == raft.ServerID(self) {
			continue
		}
		p, ok := peers[string(s.ID)]
		if !ok {
			return 0
		}
		low = min(low, p.supported())
	}
	return low
}

// supported is the highest level the peer's build supports, as gossiped
// (0 if never heard from).
func (p peerInfo) supported() int { return levelOf(p.level, p.commands) }
