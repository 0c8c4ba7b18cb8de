package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Table and index names.
const (
	tableJobs   = "jobs"
	tableBlobs  = "blobs"
	tableChunks = "blob_chunks"

	indexID      = "id"
	indexQueue   = "queue"   // queued jobs by (stream, target, queue index)
	indexLease   = "lease"   // running jobs by lease expiry
	indexIdem    = "idem"    // idempotency key, unique
	indexCreated = "created" // all jobs by create index
	indexState   = "state"   // jobs by (state, create index)
)

func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableJobs: {
			Name: tableJobs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:      {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
				indexQueue:   {Name: indexQueue, AllowMissing: true, Indexer: queueIndexer{}},
				indexLease:   {Name: indexLease, AllowMissing: true, Indexer: leaseIndexer{}},
				indexIdem:    {Name: indexIdem, Unique: true, AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "IdempotencyKey"}},
				indexCreated: {Name: indexCreated, Unique: true, Indexer: createdIndexer{}},
				indexState:   {Name: indexState, Indexer: stateIndexer{}},
			},
		},
		tableBlobs: {
			Name: tableBlobs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
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

func be64(b []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(b, v)
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

// queueIndexer keys queued jobs by stream, target and queue index, so the
// first entry under (stream, target) is the job that has waited longest.
// Args: (stream, target) for that lane.
type queueIndexer struct{}

func (queueIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	if j.State != StateQueued {
		return false, nil, nil
	}
	k := make([]byte, 0, len(j.Stream)+len(j.Target)+10)
	k = append(k, j.Stream...)
	k = append(k, 0)
	k = append(k, j.Target...)
	k = append(k, 0)
	return true, be64(k, j.QueueIndex), nil
}

func (queueIndexer) FromArgs(args ...interface{}) ([]byte, error) {
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

// leaseIndexer keys running jobs by lease expiry. Args: (expiresAt) as a
// lower bound.
type leaseIndexer struct{}

func (leaseIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	if j.State != StateRunning || j.Lease == nil {
		return false, nil, nil
	}
	return true, be64(make([]byte, 0, 8), uint64(j.Lease.ExpiresAt)), nil
}

func (leaseIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("lease index takes (expiresAt)")
	}
	v, err := argUint(args, 0)
	if err != nil {
		return nil, err
	}
	return be64(make([]byte, 0, 8), v), nil
}

// createdIndexer orders all jobs by create index. Args: (createIndex).
type createdIndexer struct{}

func (createdIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	return true, be64(make([]byte, 0, 8), obj.(*Job).CreateIndex), nil
}

func (createdIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("created index takes (createIndex)")
	}
	v, err := argUint(args, 0)
	if err != nil {
		return nil, err
	}
	return be64(make([]byte, 0, 8), v), nil
}

// stateIndexer keys jobs by state then create index. Args: (state) for
// every job in a state, or (state, createIndex) as a lower bound.
type stateIndexer struct{}

func (stateIndexer) FromObject(obj interface{}) (bool, []byte, error) {
	j := obj.(*Job)
	k := make([]byte, 0, len(j.State)+9)
	k = append(append(k, j.State...), 0)
	return true, be64(k, j.CreateIndex), nil
}

func (stateIndexer) FromArgs(args ...interface{}) ([]byte, error) {
	if len(args) < 1 || len(args) > 2 {
		return nil, fmt.Errorf("state index takes (state[, createIndex])")
	}
	var s string
	switch v := args[0].(type) {
	case State:
		s = string(v)
	case string:
		s = v
	default:
		return nil, fmt.Errorf("state must be a State, got %T", args[0])
	}
	k := append([]byte(s), 0)
	if len(args) == 2 {
		v, err := argUint(args, 1)
		if err != nil {
			return nil, err
		}
		k = be64(k, v)
	}
	return k, nil
}

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
