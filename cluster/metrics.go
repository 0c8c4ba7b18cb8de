package cluster

import (
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Metrics are the figures of this node an operator graphs (the metrics
// every node exports): raft's state as this node sees it, its log and
// snapshots on disk, and gossip's view of the members.
type Metrics struct {
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State                                      string
	Term, LastIndex, CommitIndex, AppliedIndex uint64
	// LastContact is the time since this node last heard from a leader
	// (0 on the leader; negative if it never has).
	LastContact time.Duration
	// LeaderChanges counts the leader changes this node observed since it
	// started (a leader elected or lost).
	LeaderChanges uint64
	// LogBatches and LogAppendSeconds: the batches appended to the log
	// (one write and one fsync each) and the time they took.
	LogBatches       uint64
	LogEntries       uint64
	LogAppendSeconds float64
	// LogBytes and SnapshotBytes are the size on disk of the raft log (and
	// stable store) and of the snapshots kept; 0 when stores are in memory.
	LogBytes, SnapshotBytes int64
	// Members counts the gossip members by health: "alive", "suspect",
	// and "dead" for the raft servers gossip does not see.
	Members map[string]int
	// HashMismatches counts the peers' state hashes that differed from
	// this node's at the same index.
	HashMismatches uint64
}

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
