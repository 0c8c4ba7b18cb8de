package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// overlapLog lets the leader write a batch to its own disk while the batch
// is on its way to the followers, instead of before (the Raft thesis,
// §10.2.1). hashicorp/raft calls StoreLogs on the leader and sends the
// entries only once it returns, so a commit waits for the leader's fsync and
// then a follower's, one after the other. Here the leader's StoreLogs hands
// the batch to a writer goroutine and returns at once; raft sends it, the
// followers store it, and the two fsyncs run at the same time.
//
// raft now counts the leader toward the quorum before the batch is on its
// disk, so what a commit lets anyone observe is held back until it is:
//
//   - the state machine applies an entry only once the leader's copy is
//     durable (waitDurable, called by the FSM wrapper), and raft answers a
//     proposal only after applying it: a client is told of a write only when
//     it is on the leader's disk and a follower's;
//   - the commit index sent to followers is clamped below the leader's first
//     entry not yet durable (commitBound, applied by commitClampTransport),
//     so no follower applies an entry that a power loss on the leader could
//     leave on only one disk.
//
// Only batches of commands take this path, and only on the leader.
// Configuration changes, no-ops and barriers are written and synced before
// StoreLogs returns, as are a follower's appends (its acknowledgement to the
// leader is its promise that the entries are on disk), after every batch
// still queued has been written.
//
// A failed write cannot be taken back: raft has already sent and maybe
// committed entries the leader's log does not hold. The node stops
// (fatal), as a database does when an fsync fails, and restarts from what
// its disk holds; nothing it had not made durable was acknowledged.
type overlapLog struct {
	raft.LogStore // the durable store
	leader        atomic.Pointer[func() bool]
	fatal         func(error)

	mu      sync.Mutex
	changed *sync.Cond  // broadcast whenever queue shrinks or the writer fails
	queue   []*raft.Log // accepted, not yet durable; ascending, contiguous
	failed  error
	closed  bool
	kick    chan struct{}
	done    chan struct{}

	// firstPending is the index of queue's first entry, 0 when it is empty:
	// every entry below it that the log holds is durable.
	firstPending atomic.Uint64
	overlapped   atomic.Uint64 // batches that took the overlapped path
}

func newOverlapLog(inner raft.LogStore, fatal func(error)) *overlapLog {
	l := &overlapLog{LogStore: inner, fatal: fatal, kick: make(chan struct{}, 1), done: make(chan struct{})}
	l.changed = sync.NewCond(&l.mu)
	go l.writer()
	return l
}

// setLeaderCheck tells the log how to know it is on the leader. raft calls
// StoreLogs only from its main goroutine, which is also the one that changes
// its state, so raft.State read there is exact.
func (l *overlapLog) setLeaderCheck(isLeader func() bool) { l.leader.Store(&isLeader) }

func (l *overlapLog) overlaps(logs []*raft.Log) bool {
	isLeader := l.leader.Load()
	if isLeader == nil || len(logs) == 0 || !(*isLeader)() {
		return false
	}
	for _, e := range logs {
		if e.Type != raft.LogCommand {
			return false
		}
	}
	return true
}

func (l *overlapLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *overlapLog) StoreLogs(logs []*raft.Log) error {
	if l.overlaps(logs) {
		l.mu.Lock()
		if err := l.failed; err != nil {
			l.mu.Unlock()
			return err
		}
		if len(l.queue) == 0 {
			l.firstPending.Store(logs[0].Index)
		}
		l.queue = append(l.queue, logs...)
		l.mu.Unlock()
		l.overlapped.Add(1)
		select {
		case l.kick <- struct{}{}:
		default:
		}
		return nil
	}
	if err := l.drain(); err != nil {
		return err
	}
	return l.LogStore.StoreLogs(logs)
}

// drain waits until every entry queued so far is durable.
func (l *overlapLog) drain() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.queue); n > 0 {
		l.waitLocked(l.queue[n-1].Index)
	}
	return l.failed
}

// waitLocked waits until no queued entry at or below index remains, or the
// writer has failed.
func (l *overlapLog) waitLocked(index uint64) {
	for l.failed == nil && len(l.queue) > 0 && l.queue[0].Index <= index {
		l.changed.Wait()
	}
}

// waitDurable returns once the entry at index, if this node's log holds it,
// is on disk. On a follower it returns at once. If the writer has failed it
// never returns: the node is stopping, and the entry must not be applied.
func (l *overlapLog) waitDurable(index uint64) {
	if fp := l.firstPending.Load(); fp == 0 || fp > index {
		return
	}
	l.mu.Lock()
	l.waitLocked(index)
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		select {} // fatal has been called; the node is going down
	}
}

// commitBound clamps a commit index to what the leader holds on disk.
func (l *overlapLog) commitBound(commit uint64) uint64 {
	if fp := l.firstPending.Load(); fp != 0 && commit >= fp {
		return fp - 1
	}
	return commit
}

func (l *overlapLog) writer() {
	defer close(l.done)
	for {
		l.mu.Lock()
		for len(l.queue) == 0 && !l.closed {
			l.mu.Unlock()
			<-l.kick
			l.mu.Lock()
		}
		if len(l.queue) == 0 && l.closed {
			l.mu.Unlock()
			return
		}
		batch := l.queue // everything queued so far, in one append
		l.mu.Unlock()

		err := l.LogStore.StoreLogs(batch)

		l.mu.Lock()
		if err != nil {
			l.failed = fmt.Errorf("raft log: overlapped write of entries %d-%d: %w", batch[0].Index, batch[len(batch)-1].Index, err)
			l.changed.Broadcast()
			failed := l.failed
			l.mu.Unlock()
			l.fatal(failed)
			return
		}
		rest := l.queue[len(batch):]
		l.queue = append([]*raft.Log(nil), rest...)
		if len(l.queue) > 0 {
			l.firstPending.Store(l.queue[0].Index)
		} else {
			l.firstPending.Store(0)
		}
		l.changed.Broadcast()
		l.mu.Unlock()
	}
}

// GetLog serves queued entries from memory: the replicators read a batch
// while it is still being written.
func (l *overlapLog) GetLog(index uint64, out *raft.Log) error {
	if fp := l.firstPending.Load(); fp != 0 && index >= fp {
		l.mu.Lock()
		if n := len(l.queue); n > 0 && index >= l.queue[0].Index && index <= l.queue[n-1].Index {
			*out = *l.queue[index-l.queue[0].Index]
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
	}
	return l.LogStore.GetLog(index, out)
}

func (l *overlapLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	if n := len(l.queue); n > 0 {
		last := l.queue[n-1].Index
		l.mu.Unlock()
		return last, nil
	}
	l.mu.Unlock()
	return l.LogStore.LastIndex()
}

func (l *overlapLog) FirstIndex() (uint64, error) {
	first, err := l.LogStore.FirstIndex()
	if err != nil || first != 0 {
		return first, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 {
		return l.queue[0].Index, nil
	}
	return 0, nil
}

// DeleteRange waits for queued entries it covers to be written first, so a
// follower truncating a conflicting tail deletes what is really on disk.
// Compaction of the head (the snapshot goroutine) never waits.
func (l *overlapLog) DeleteRange(min, max uint64) error {
	if fp := l.firstPending.Load(); fp != 0 && max >= fp {
		if err := l.drain(); err != nil {
			return err
		}
	}
	return l.LogStore.DeleteRange(min, max)
}

// IsMonotonic passes on the wrapped store's answer.
func (l *overlapLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Close writes what is queued and stops the writer.
func (l *overlapLog) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}
