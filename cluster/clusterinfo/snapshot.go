package clusterinfo

// SnapshotMeta describes a snapshot taken for a backup (cluster's
// Node.SaveSnapshot): the raft index and term it holds the state up to,
// its size in bytes, and raft's snapshot format version.
type SnapshotMeta struct {
	Index, Term uint64
	Size        int64
	Version     int
}
