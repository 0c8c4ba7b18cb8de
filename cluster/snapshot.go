package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// Backups: a snapshot of the state taken on the leader for an operator to
// keep, and the restore of one into a running cluster (the leader installs
// it and raft sends it to every follower).

// SaveSnapshot takes a snapshot of the state on the leader, holding every
// entry committed before the call, and opens it. The caller closes the
// reader.
func (n *Node) SaveSnapshot(ctx context.Context) (*SnapshotMeta, io.ReadCloser, error) {
	if n.isShutdown() {
		return nil, nil, ErrShutdown
	}
	if !n.IsLeader() {
		return nil, nil, ErrNotLeader
	}
	// Every entry committed so far is applied before the snapshot is cut.
	if err, done := n.waitFuture(ctx, n.raft.Barrier(0)); done || err != nil {
		if done {
			return nil, nil, err
		}
		return nil, nil, translateOpErr(err)
	}
	f := n.raft.Snapshot()
	if err, done := n.waitFuture(ctx, f); done || err != nil {
		if done {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("take snapshot: %w", translateOpErr(err))
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, nil, err
	}
	return &SnapshotMeta{Index: meta.Index, Term: meta.Term, Size: meta.Size, Version: int(meta.Version)}, rc, nil
}

// RestoreSnapshot replaces the cluster's state with a snapshot's (size
// bytes read from r, taken at raft index index): the leader installs it as
// a snapshot of its own at an index past both its log and index, and raft
// sends it to every follower. Past index: the state's jobs carry the raft
// indexes of the entries that made them (their create index orders the
// queue), so the entries after the restore must not reuse any of them,
// however far behind the backup's cluster this cluster's log is. The snapshot
// must have been checked to restore (fsm.SummarizeSnapshot): a state
// machine that fails to restore it stops the node.
func (n *Node) RestoreSnapshot(r io.Reader, size int64, index uint64, timeout time.Duration) (uint64, error) {
	if n.isShutdown() {
		return 0, ErrShutdown
	}
	if !n.IsLeader() {
		return 0, ErrNotLeader
	}
	// raft puts the snapshot at max(its last index, meta.Index) + 1.
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size, Index: index}
	n.logger.Warn("restoring a snapshot: the cluster's state is being replaced", "bytes", size)
	restores := n.tracker.restores.Load()
	if err := n.raft.Restore(meta, r, timeout); err != nil {
		if n.tracker.restores.Load() != restores {
			// raft installed the snapshot here, then waited for an entry
			// after it to commit, and that wait failed (most often: the
			// followers took longer to install it than the leader lease,
			// and leadership moved). Whether the cluster keeps the
			// restored state depends on who leads now: not "nothing
			// restored".
			n.logger.Warn("snapshot installed on this node, but not confirmed by the cluster", "error", err)
			return 0, fmt.Errorf("%w: the snapshot was installed on the leader, which could not confirm it with the other nodes (%v)", ErrOutcomeUnknown, err)
		}
		return 0, translateOpErr(err)
	}
	idx := n.raft.LastIndex()
	n.logger.Warn("snapshot restored; followers install it from this node", "index", idx)
	return idx, nil
}
