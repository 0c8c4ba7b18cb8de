package fsm

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/hashicorp/go-memdb"
)

// Table and index names.
const (
	tableJobs   = "jobs"
	tableBlobs  = "blobs"
	tableChunks = "blob_chunks"

	indexID    = "id"
	indexQueue = "queue" // queued jobs by (stream, target, queue index, create index)
	indexLease = "lease" // running jobs by (lease expiry, create index)
	indexIdem  = "idem"  // idempotency key, unique
	indexState = "state" // all jobs by (state, create index)
	// indexFinished holds done jobs only, by (finish time, create index),
	// for retention. Queued and running jobs have no entry, so it costs
	// nothing per queued job.
	indexFinished = "finished"

	prefix = "_prefix" // memdb's suffix for a prefix lookup on an index
)

// Every job index is unique: memdb appends the primary key (a 36-byte id) to
// each key of a non-unique index, so the indexes that are not naturally
// unique end in the create index (a job's raft create index is unique).
//
// There is no "all jobs by create index" index: listing every job walks the
// five state lanes of the state index merged by create index (see List).
// Each index entry costs a radix node, a leaf and two watch channels (about
// 350 bytes), so one index fewer is about a sixth of a queued job's memory.
//
// The indexers are hand-written: memdb's reflection-based field indexers
// were a visible share of apply time.
func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableJobs: {
			Name: tableJobs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:       {Name: indexID, Unique: true, Indexer: jobIDIndexer{}},
				indexQueue:    {Name: indexQueue, Unique: true, AllowMissing: true, Indexer: queueIndexer{}},
				indexLease:    {Name: indexLease, Unique: true, AllowMissing: true, Indexer: leaseIndexer{}},
				indexIdem:     {Name: indexIdem, Unique: true, AllowMissing: true, Indexer: idemIndexer{}},
				indexState:    {Name: indexState, Unique: true, Indexer: stateIndexer{}},
				indexFinished: {Name: indexFinished, Unique: true, AllowMissing: true, Indexer: finishedIndexer{}},
			},
		},
		tableBlobs: {
			Name: tableBlobs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: blobIDIndexer{}},
			},
		},
		tableChunks: {
			Name: tableChunks,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: chunkIndexer{}},
			},
		},
	}}
}

// appendUint appends an order-preserving key for v: the count of its
// significant 4-bit digits, then those digits one per byte, most significant
// first. Comparing two such keys bytewise compares the numbers, and a key is
// never a prefix of another.
//
// One digit per byte keeps the radix tree's fan-out at 16. With big-endian
// bytes, sequential indexes put 256 leaves under one node, and every
// transaction that touches that node copies its 4 KiB edge array (and grows
// it to 8 KiB to add one): that was most of the cost of a single-entry apply.
// For the raft indexes of a million jobs the key is also shorter (7 bytes).
func appendUint(b []byte, v uint64) []byte {
	n := 0
	for x := v; x != 0; x >>= 4 {
		n++
	}
	b = append(b, byte(n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(4*uint(i)))&0xf)
	}
	return b
}

// uintKeyLen is the most bytes appendUint adds.
const uintKeyLen = 17

// strKey returns the bytes of s without copying them. The radix tree never
// writes to a key, and the slice's capacity is its length, so an append to it
// (memdb appends to keys of non-unique indexes, which these are not) copies.
// It saves one copy of every job id (and idempotency key) in the id index.
func strKey(s string) []byte {
	if s == "" {
		// Not nil: memdb treats a nil key as "no argument" and scans.
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func argString(args []interface{}, i int) (string, error) {
	s, ok := args[i].(string)
	if !ok {
		return "", fmt.Errorf("argument %d must be a string, got %T", i, args[i])
	}
	return s, nil
}

func argUint(args []interface{}, i int) (uint64, error) {
	switch v := args[i].(type) {
	case uint64:
		return v, nil
	case int64:
		return uint64(v), nil
	case int:
		return uint64(v), nil
	}
	return 0, fmt.Errorf("argument %d must be an integer, got %T", i, args[i])
}

// stringArg is the FromArgs of an index keyed by one string.
func stringArg(name string, args []interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s index takes one string", name)
	}
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	return strKey(s), nil
}

// jobIDIndexer keys jobs by id. Args: (id).
type jobIDIndexer struct{}

func (jobIDIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	id := obj.(*Job).ID
	return id != "", strKey(id), nil
}

func (jobIDIndexer) FromArgs(args ...interface{}) ([]byte, error) { return stringArg("id", args) }

// idemIndexer keys jobs by idempotency key; jobs without one are not in it.
// Args: (key).
type idemIndexer struct{}

func (idemIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	k := obj.(*Job).IdempotencyKey
	return k != "", strKey(k), nil
}

func (idemIndexer) FromArgs(args ...interface{}) ([]byte, error) { return stringArg("idem", args) }

// blobIDIndexer keys blobs by id. Args: (id).
type blobIDIndexer struct{}

func (blobIDIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	id := obj.(*Blob).ID
	return id != "", strKey(id), nil
}

func (blobIDIndexer) FromArgs(args ...interface{}) ([]byte, error) { return stringArg("id", args) }

// queueIndexer keys queued jobs by stream, target, queue index and create
// index, so the first entry under (stream, target) is the job that has
// waited longest (ties, as after one reap, go in creation order).
// Prefix args (index "queue_prefix"): (stream, target) for that lane.
type queueIndexer struct{}

func (queueIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	if j.State != StateQueued {
		return false, nil, nil
	}
	k := make([]byte, 0, len(j.Stream)+len(j.Target)+2+2*8)
	k = append(k, j.Stream...)
	k = append(k, 0)
	k = append(k, j.Target...)
	k = append(k, 0)
	return true, appendUint(appendUint(k, j.QueueIndex), j.CreateIndex), nil
}

func (queueIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	return nil, fmt.Errorf("queue index: use %s%s with (stream, target)", indexQueue, prefix)
}

func (queueIndexer) PrefixFromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("queue index takes (stream, target)")
	}
	s, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	t, err := argString(args, 1)
	if err != nil {
		return nil, err
	}
	k := make([]byte, 0, len(s)+len(t)+2)
	k = append(append(k, s...), 0)
	return append(append(k, t...), 0), nil
}

// leaseIndexer keys running jobs by lease expiry then create index. Args:
// (expiresAt) as a lower bound.
type leaseIndexer struct{}

func (leaseIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	if j.State != StateRunning || j.Lease == nil {
		return false, nil, nil
	}
	return true, appendUint(appendUint(make([]byte, 0, 2*uintKeyLen), uint64(j.Lease.ExpiresAt)), j.CreateIndex), nil
}

func (leaseIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("lease index takes (expiresAt)")
	}
	v, err := argUint(args, 0)
	if err != nil {
		return nil, err
	}
	return appendUint(make([]byte, 0, uintKeyLen), v), nil
}

// finishedIndexer keys done jobs by finish time then create index. Args:
// (finishedAt) as a lower bound.
type finishedIndexer struct{}

func (finishedIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	if j.State != StateDone {
		return false, nil, nil
	}
	return true, appendUint(appendUint(make([]byte, 0, 2*uintKeyLen), uint64(j.FinishedAt)), j.CreateIndex), nil
}

func (finishedIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("finished index takes (finishedAt)")
	}
	v, err := argUint(args, 0)
	if err != nil {
		return nil, err
	}
	return appendUint(make([]byte, 0, uintKeyLen), v), nil
}

// stateLane is a state's one-byte code in the state index. Lane 0 holds any
// state this build does not know, so no job is ever left out of the index.
type stateLane byte

// stateLanes lists every lane, in code order.
var stateLanes = []stateLane{0, 1, 2, 3, 4, 5}

func laneOf(s State) stateLane {
	switch s {
	case StateQueued:
		return 1
	case StateRunning:
		return 2
	case StateDone:
		return 3
	case StateFailed:
		return 4
	case StateDead:
		return 5
	}
	return 0
}

// stateIndexer keys jobs by state lane then create index. Args: (state) for
// every job in a state, or (state, createIndex) as a lower bound; the state
// is a State, a string or a stateLane.
type stateIndexer struct{}

func (stateIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	k := make([]byte, 1, 8)
	k[0] = byte(laneOf(j.State))
	return true, appendUint(k, j.CreateIndex), nil
}

func (stateIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) < 1 || len(args) > 2 {
		return nil, fmt.Errorf("state index takes (state[, createIndex])")
	}
	var lane stateLane
	switch v := args[0].(type) {
	case State:
		lane = laneOf(v)
	case string:
		lane = laneOf(State(v))
	case stateLane:
		lane = v
	default:
		return nil, fmt.Errorf("state must be a State, got %T", args[0])
	}
	k := make([]byte, 1, 1+uintKeyLen)
	k[0] = byte(lane)
	if len(args) == 2 {
		v, err := argUint(args, 1)
		if err != nil {
			return nil, err
		}
		k = appendUint(k, v)
	}
	return k, nil
}

func (s stateIndexer) PrefixFromArgs(args ...interface{}) ([]byte, error) { return s.FromArgs(args...) }

// chunkIndexer keys blob chunks by (blob id, seq). Args: (blobID) for all
// chunks of a blob in order, or (blobID, seq) for one.
type chunkIndexer struct{}

func (chunkIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	c := obj.(*BlobChunk)
	k := append([]byte(c.BlobID), 0)
	return true, binary.BigEndian.AppendUint32(k, uint32(c.Seq)), nil
}

func (chunkIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) < 1 || len(args) > 2 {
		return nil, fmt.Errorf("chunk index takes (blobID[, seq])")
	}
	id, err := argString(args, 0)
	if err != nil {
		return nil, err
	}
	k := append([]byte(id), 0)
	if len(args) == 2 {
		v, err := argUint(args, 1)
		if err != nil {
			return nil, err
		}
		k = binary.BigEndian.AppendUint32(k, uint32(v))
	}
	return k, nil
}
