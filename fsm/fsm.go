package fsm

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
)

// Config holds the few settings the state machine needs. They must be the
// same on every node: they shape replicated state.
type Config struct {
	// DefaultMaxAttempts applies to jobs created without maxAttempts (default 5).
	DefaultMaxAttempts int
	// Logger receives apply and restore messages.
	Logger hclog.Logger
}

// Result is what Apply returns for every command: the job (or blob) after
// the command, the answer details, and a domain error when the command was
// refused. A refused command changed nothing.
type Result struct {
	Job  *Job
	Jobs []*Job // reap: the jobs taken back; purge: the jobs deleted
	Blob *Blob
	// Claimed is false when a claim-next found nothing to claim.
	Claimed bool
	// Duplicate is true when the command repeated one already applied
	// (idempotency key, or a finished attempt's complete/fail): the answer
	// is the first one's and nothing changed.
	Duplicate bool
	Requeued  bool
	DLQ       bool
	Err       error
}

// FSM is the job state machine. It implements raft.FSM and raft.BatchingFSM.
type FSM struct {
	cfg    Config
	logger hclog.Logger

	mu sync.RWMutex // guards db and abandonCh swaps on restore
	db *memdb.MemDB
	// abandonCh is closed when a restore replaces db, waking watchers of the
	// old one.
	abandonCh chan struct{}

	applied atomic.Uint64

	// intern shares repeated strings of applied commands; ApplyBatch holds
	// its lock.
	intern *interner
}

// New returns an empty state machine.
func New(cfg Config) (*FSM, error) {
	if cfg.DefaultMaxAttempts <= 0 {
		cfg.DefaultMaxAttempts = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("memdb schema: %w", err)
	}
	return &FSM{cfg: cfg, logger: cfg.Logger.Named("fsm"), db: db, abandonCh: make(chan struct{}), intern: newInterner()}, nil
}

// AppliedIndex is the Raft index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

func (f *FSM) memdb() *memdb.MemDB {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db
}

// Apply applies one committed log entry. It returns a *Result for command
// entries and nil for others.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in one memdb transaction, so a batch
// costs one commit however many entries it holds.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	f.intern.mu.Lock()
	defer f.intern.mu.Unlock()
	db := f.memdb()
	txn := db.Txn(true)
	defer txn.Abort()
	// Taken under the write lock, so it is exactly the state txn starts from.
	b := &batch{txn: txn, base: db.Txn(false), size: len(logs)}
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		out[i] = f.applyOne(b, l.Index, l.Data)
	}
	txn.Commit()
	if n := len(logs); n > 0 {
		f.applied.Store(logs[n-1].Index)
	}
	return out
}

func (f *FSM) applyOne(b *batch, index uint64, data []byte) interface{} {
	if len(data) == 0 {
		panic(fmt.Sprintf("fsm: empty log entry at index %d", index))
	}
	t := CommandType(data[0])
	if newCommand(t) == nil {
		if t&IgnoreUnknownFlag != 0 {
			f.logger.Warn("ignoring unknown optional command", "type", uint8(t), "index", index)
			return nil
		}
		panic(fmt.Sprintf("fsm: unknown command type %d at index %d", uint8(t), index))
	}
	a := applier{batch: b, index: index, maxAttempts: f.cfg.DefaultMaxAttempts, in: f.intern}
	if t == CmdCreate {
		var c CreateCommand
		if err := decodeCreate(&c, data[1:], f.intern); err != nil {
			panic(fmt.Sprintf("fsm: decode %s at index %d: %v", t, index, err))
		}
		return a.create(&c)
	}
	cmd, err := decodeBody(t, data[1:], f.intern)
	if err != nil {
		panic(fmt.Sprintf("fsm: decode %s at index %d: %v", t, index, err))
	}
	switch c := cmd.(type) {
	case *CreateCommand:
		return a.create(c)
	case *ClaimCommand:
		return a.claim(c)
	case *HeartbeatCommand:
		return a.heartbeat(c)
	case *CompleteCommand:
		return a.complete(c)
	case *FailCommand:
		return a.fail(c)
	case *ReleaseCommand:
		return a.release(c)
	case *ReapCommand:
		return a.reap(c)
	case *CommentCommand:
		return a.comment(c)
	case *RedriveCommand:
		return a.redrive(c)
	case *PurgeCommand:
		return a.purge(c)
	case *BlobChunkCommand:
		return a.blobChunk(c)
	case *BlobCommitCommand:
		return a.blobCommit(c)
	}
	panic(fmt.Sprintf("fsm: no apply for %s at index %d", t, index))
}

// Snapshot captures the state as of now; Persist streams it without holding
// any lock (memdb snapshots are immutable).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{db: f.memdb().Snapshot(), index: f.AppliedIndex()}, nil
}

// Restore replaces the whole state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	db, index, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.applied.Store(index)
	f.mu.Lock()
	old := f.abandonCh
	f.db = db
	f.abandonCh = make(chan struct{})
	f.mu.Unlock()
	close(old)
	return nil
}

// Read returns a consistent read-only view of the current state.
func (f *FSM) Read() *Reader {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &Reader{txn: f.db.Txn(false), abandonCh: f.abandonCh, defaultMax: f.cfg.DefaultMaxAttempts}
}
