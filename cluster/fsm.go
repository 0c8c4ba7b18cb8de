package cluster

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// applyTracker records the index of the last entry the user's FSM has
// actually applied. raft.AppliedIndex is not enough: it advances when a batch
// is handed to the FSM goroutine, before the FSM has applied it.
type applyTracker struct {
	applied   atomic.Uint64
	snapIndex atomic.Uint64 // index of the snapshot most recently opened
	restores  atomic.Uint64 // snapshots the FSM has restored

	mu     sync.Mutex
	notify chan struct{} // closed and replaced on every advance
}

func newApplyTracker() *applyTracker {
	return &applyTracker{notify: make(chan struct{})}
}

func (t *applyTracker) set(index uint64) {
	t.applied.Store(index)
	t.mu.Lock()
	close(t.notify)
	t.notify = make(chan struct{})
	t.mu.Unlock()
}

func (t *applyTracker) wait() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notify
}

// trackedFSM passes every call through to the user's FSM and records the
// applied index. It also implements raft.ConfigurationStore (forwarding only
// if the inner FSM does) so configuration entries advance the index too.
type trackedFSM struct {
	inner raft.FSM
	t     *applyTracker
	// durable, if set, returns once the log entry at an index is on this
	// node's disk (overlapLog.waitDurable): nothing is applied, and so
	// nothing answered, before that.
	durable func(index uint64)
}

func (f *trackedFSM) Apply(l *raft.Log) interface{} {
	if f.durable != nil {
		f.durable(l.Index)
	}
	resp := f.inner.Apply(l)
	f.t.set(l.Index)
	return resp
}

func (f *trackedFSM) Snapshot() (raft.FSMSnapshot, error) { return f.inner.Snapshot() }

func (f *trackedFSM) Restore(rc io.ReadCloser) error {
	if err := f.inner.Restore(rc); err != nil {
		return err
	}
	// raft opens the snapshot (trackedSnapshots.Open) right before Restore on
	// the same goroutine, so snapIndex is this snapshot's index.
	f.t.restores.Add(1)
	f.t.set(f.t.snapIndex.Load())
	return nil
}

func (f *trackedFSM) StoreConfiguration(index uint64, c raft.Configuration) {
	if cs, ok := f.inner.(raft.ConfigurationStore); ok {
		cs.StoreConfiguration(index, c)
	}
	f.t.set(index)
}

// trackedBatchingFSM preserves raft.BatchingFSM of the inner FSM.
type trackedBatchingFSM struct {
	trackedFSM
	batch raft.BatchingFSM
}

func (f *trackedBatchingFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if f.durable != nil && len(logs) > 0 {
		f.durable(logs[len(logs)-1].Index)
	}
	resp := f.batch.ApplyBatch(logs)
	if len(logs) > 0 {
		f.t.set(logs[len(logs)-1].Index)
	}
	return resp
}

func wrapFSM(inner raft.FSM, t *applyTracker, durable func(uint64)) raft.FSM {
	tf := trackedFSM{inner: inner, t: t, durable: durable}
	if b, ok := inner.(raft.BatchingFSM); ok {
		return &trackedBatchingFSM{trackedFSM: tf, batch: b}
	}
	return &tf
}

// trackedSnapshots records the index of each snapshot opened, so the FSM
// wrapper knows which index a Restore brings it to.
type trackedSnapshots struct {
	raft.SnapshotStore
	t *applyTracker
}

func (s *trackedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.t.snapIndex.Store(meta.Index)
	}
	return meta, rc, err
}
