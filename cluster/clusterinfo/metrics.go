package clusterinfo

import "time"

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
	// RaftConns counts the raft connections this node opened since it
	// started, by encoding and side (the msgpack ones it dials are not
	// counted); zero on a node with a test transport.
	RaftConns struct{ BinaryDialled, BinaryServed, MsgpackServed uint64 }
}
