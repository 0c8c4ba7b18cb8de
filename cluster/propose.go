package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// proposer groups concurrent proposals into fewer, larger Raft batches.
//
// hashicorp/raft already commits every entry waiting in its apply channel
// with one fsync'ed StoreLogs, but proposals that trickle in one at a time
// each start a batch of their own, so under load the leader and every
// follower fsync for every handful of entries. The proposer keeps at most
// maxInflight generations of proposals in flight; whatever arrives meanwhile
// waits and is enqueued together, back to back, when a generation completes.
// Entries, their order and their indexes are unchanged: only their grouping
// into disk writes is.
type proposer struct {
	r           *raft.Raft
	timeout     func() time.Duration
	maxInflight int

	mu       sync.Mutex
	pending  []*proposal
	inflight int
}

type proposal struct {
	cmd  []byte
	done chan proposalResult // buffered: the proposer never blocks on a caller
}

type proposalResult struct {
	future raft.ApplyFuture
	err    error
}

func newProposer(r *raft.Raft, maxInflight int, timeout func() time.Duration) *proposer {
	return &proposer{r: r, maxInflight: maxInflight, timeout: timeout}
}

// propose queues cmd and returns the channel its outcome arrives on.
func (p *proposer) propose(cmd []byte) <-chan proposalResult {
	pr := &proposal{cmd: cmd, done: make(chan proposalResult, 1)}
	p.mu.Lock()
	p.pending = append(p.pending, pr)
	batch := p.takeLocked()
	p.mu.Unlock()
	if batch != nil {
		p.submit(batch)
	}
	return pr.done
}

// takeLocked starts a new generation with everything pending, if a slot is
// free.
func (p *proposer) takeLocked() []*proposal {
	if len(p.pending) == 0 || p.inflight >= p.maxInflight {
		return nil
	}
	batch := p.pending
	p.pending = nil
	p.inflight++
	return batch
}

// submit enqueues a generation and, once raft has resolved all of it, frees
// its slot and starts the next one.
func (p *proposer) submit(batch []*proposal) {
	futures := make([]raft.ApplyFuture, len(batch))
	timeout := p.timeout()
	for i, pr := range batch {
		futures[i] = p.r.Apply(pr.cmd, timeout)
	}
	go func() {
		for i, f := range futures {
			batch[i].done <- proposalResult{future: f, err: f.Error()}
		}
		p.mu.Lock()
		p.inflight--
		next := p.takeLocked()
		p.mu.Unlock()
		if next != nil {
			p.submit(next)
		}
	}()
}
