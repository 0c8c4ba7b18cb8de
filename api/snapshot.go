package api

import "time"

// SnapshotInfo describes a backup: the index and term of the last entry
// its state holds on the cluster it was taken from, and when and where.
type SnapshotInfo struct {
	Index   uint64    `json:"index"`
	Term    uint64    `json:"term"`
	Size    int64     `json:"size"`
	TakenAt time.Time `json:"taken_at"`
	NodeID  string    `json:"node_id"`
}

// SnapshotContents counts what a snapshot's state holds.
type SnapshotContents struct {
	// Index is the state machine's own record of the last entry applied.
	Index      uint64         `json:"index"`
	Jobs       map[string]int `json:"jobs"`
	Streams    int            `json:"streams"`
	Sessions   int            `json:"sessions"`
	Blobs      int            `json:"blobs"`
	Gateways   int            `json:"gateways"`
	Workers    int            `json:"workers"`
	FeedEvents int            `json:"feed_events"`
	Registry   bool           `json:"registry"`
	StateHash  string         `json:"state_hash,omitempty"`
}

// SnapshotRestored answers PUT /v1/snapshot: the cluster's state is now the
// snapshot's, from raft index Index on.
type SnapshotRestored struct {
	Restored bool             `json:"restored"`
	Index    uint64           `json:"index"`
	Snapshot SnapshotInfo     `json:"snapshot"`
	Contents SnapshotContents `json:"contents"`
}
