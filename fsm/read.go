package fsm

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Reader is a consistent, read-only view of the state at one moment. It is
// cheap to take and never blocks writers.
type Reader struct {
	txn        *memdb.Txn
	abandonCh  chan struct{}
	defaultMax int
}

// Job returns the job with the given id, or ErrNotFound.
func (r *Reader) Job(id string) (*Job, error) {
	raw, err := r.txn.First(tableJobs, indexID, id)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return raw.(*Job), nil
}

// JobByIdempotencyKey returns the job created with key, or nil.
func (r *Reader) JobByIdempotencyKey(key string) *Job {
	raw, err := r.txn.First(tableJobs, indexIdem, key)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*Job)
}

// ListFilter selects jobs for List. Zero fields match everything.
type ListFilter struct {
	State  State
	Stream string
	// Target matches jobs with exactly this target.
	Target string
	// Visible, when set, keeps only jobs this filter accepts (role checks).
	Visible func(*Job) bool
	// After is a cursor: only jobs created after this create index.
	After uint64
	// Limit caps the page (default 100).
	Limit int
	// MaxScan bounds the jobs examined for one page (default 100,000), so a
	// filter that matches little cannot make one request scan everything.
	MaxScan int
}

// List returns jobs in creation order matching f, and the cursor of the
// next page (0 when there is none).
func (r *Reader) List(f ListFilter) ([]*Job, uint64, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.MaxScan <= 0 {
		f.MaxScan = 100_000
	}
	var (
		it  memdb.ResultIterator
		err error
	)
	if f.State != "" {
		it, err = r.txn.LowerBound(tableJobs, indexState, f.State, f.After+1)
	} else {
		it, err = r.txn.LowerBound(tableJobs, indexCreated, f.After+1)
	}
	if err != nil {
		return nil, 0, err
	}
	var out []*Job
	var last uint64
	for scanned := 0; scanned < f.MaxScan; scanned++ {
		raw := it.Next()
		if raw == nil {
			return out, 0, nil
		}
		j := raw.(*Job)
		if f.State != "" && j.State != f.State {
			return out, 0, nil // walked past this state's keys
		}
		last = j.CreateIndex
		if (f.Stream != "" && j.Stream != f.Stream) || (f.Target != "" && j.Target != f.Target) ||
			(f.Visible != nil && !f.Visible(j)) {
			continue
		}
		out = append(out, j)
		if len(out) == f.Limit {
			return out, last, nil
		}
	}
	return out, last, nil
}

// NextClaimable returns the job a claim-next over streams for targets would
// take now (nil if none), and a watch set that fires when that answer may
// have changed: a job entering one of those queues, or a restore.
func (r *Reader) NextClaimable(streams, targets []string) (*Job, memdb.WatchSet) {
	ws := memdb.NewWatchSet()
	ws.Add(r.abandonCh)
	return nextQueued(r.txn, streams, targets, ws), ws
}

// Blob returns a committed blob's metadata, or ErrNotFound.
func (r *Reader) Blob(id string) (*Blob, error) {
	raw, err := r.txn.First(tableBlobs, indexID, id)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("blob %s: %w", id, ErrNotFound)
	}
	return raw.(*Blob), nil
}

// BlobChunks calls fn with each chunk of a committed blob, in order.
func (r *Reader) BlobChunks(id string, fn func([]byte) error) error {
	b, err := r.Blob(id)
	if err != nil {
		return err
	}
	for i := 0; i < b.Chunks; i++ {
		raw, err := r.txn.First(tableChunks, indexID, id, uint64(i))
		if err != nil {
			return err
		}
		if raw == nil {
			return fmt.Errorf("blob %s chunk %d: %w", id, i, ErrBlobIncomplete)
		}
		if err := fn(raw.(*BlobChunk).Data); err != nil {
			return err
		}
	}
	return nil
}

// Counts returns the number of jobs in each state.
func (r *Reader) Counts() (map[State]int, error) {
	out := map[State]int{}
	for _, s := range []State{StateQueued, StateRunning, StateDone, StateFailed, StateDead} {
		it, err := r.txn.Get(tableJobs, indexState, s)
		if err != nil {
			return nil, err
		}
		n := 0
		for raw := it.Next(); raw != nil; raw = it.Next() {
			n++
		}
		out[s] = n
	}
	return out, nil
}

// NextLeaseExpiry returns the earliest lease expiry among running jobs, or
// 0 when none is running.
func (r *Reader) NextLeaseExpiry() int64 {
	raw, err := r.txn.First(tableJobs, indexLease)
	if err != nil || raw == nil {
		return 0
	}
	return raw.(*Job).Lease.ExpiresAt
}
