package cluster

import (
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Metrics returns this node's figures. It waits for nothing raft's main
// loop does, so it answers while raft is busy; the sizes on disk are a
// walk of the data directory.
func (n *Node) Metrics() Metrics {
	m := Metrics{
		State:            n.raft.State().String(),
		Term:             n.raft.CurrentTerm(),
		LastIndex:        n.raft.LastIndex(),
		CommitIndex:      n.raft.CommitIndex(),
		AppliedIndex:     n.AppliedIndex(),
		LeaderChanges:    n.leaderChanges.Load(),
		LogBatches:       n.stores.counted.appends.Load(),
		LogEntries:       n.stores.counted.entries.Load(),
		LogAppendSeconds: time.Duration(n.stores.counted.appendNanos.Load()).Seconds(),
		Members:          map[string]int{"alive": 1, "suspect": 0, "dead": 0},
	}
	_, m.HashMismatches = n.HashChecks()
	if b := n.bin; b != nil {
		m.RaftConns.BinaryDialled = b.dialedBinary.Load()
		m.RaftConns.BinaryServed = b.servedBinary.Load()
		m.RaftConns.MsgpackServed = b.servedMsgpack.Load()
	}
	switch lc := n.raft.LastContact(); {
	case n.raft.State() == raft.Leader:
	case lc.IsZero():
		m.LastContact = -1
	default:
		m.LastContact = time.Since(lc)
	}
	if n.cfg.DataDir != "" && n.cfg.LogStore == nil {
		dir := filepath.Join(n.cfg.DataDir, raftDirName)
		total := dirSize(dir)
		m.SnapshotBytes = dirSize(filepath.Join(dir, snapDirName))
		m.LogBytes = total - m.SnapshotBytes
	}
	// Gossip: the members it sees, by state; raft servers it does not see
	// are dead to it.
	seen := map[string]bool{n.cfg.NodeID: true}
	if ml := n.ml; ml != nil {
		for _, mem := range ml.Members() {
			id := mem.Name // gossip names a member by its node id
			if id == n.cfg.NodeID || seen[id] {
				continue
			}
			seen[id] = true
			if mem.State == memberlist.StateSuspect {
				m.Members["suspect"]++
			} else {
				m.Members["alive"]++
			}
		}
	}
	if cfg, err := n.configuration(); err == nil {
		for _, s := range cfg.Servers {
			if !seen[string(s.ID)] {
				m.Members["dead"]++
			}
		}
	}
	return m
}

// dirSize adds up the sizes of the regular files under dir.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
