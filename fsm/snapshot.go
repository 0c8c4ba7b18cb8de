package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Snapshot record types: each record is one type byte then one msgpack value.
const (
	snapHeader byte = 1
	snapJob    byte = 2
	snapBlob   byte = 3
	snapChunk  byte = 4
	snapEnd    byte = 255
)

// snapshotVersion changes when the record layout changes incompatibly.
const snapshotVersion = 1

type snapHeaderRecord struct {
	Version int
	Index   uint64
}

type snapEndRecord struct {
	Jobs, Blobs, Chunks int
}

type snapshot struct {
	db    *memdb.MemDB
	index uint64
}

// Persist streams every record to sink, ending with a trailer that counts
// them so a truncated snapshot is detected on restore.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := codec.NewEncoder(bw, msgpackHandle)
	put := func(t byte, v interface{}) error {
		if err := bw.WriteByte(t); err != nil {
			return err
		}
		return enc.Encode(v)
	}
	if err := put(snapHeader, snapHeaderRecord{Version: snapshotVersion, Index: s.index}); err != nil {
		return err
	}
	txn := s.db.Txn(false)
	var end snapEndRecord
	for _, tbl := range []struct {
		name string
		t    byte
		n    *int
	}{{tableJobs, snapJob, &end.Jobs}, {tableBlobs, snapBlob, &end.Blobs}, {tableChunks, snapChunk, &end.Chunks}} {
		it, err := txn.Get(tbl.name, indexID)
		if err != nil {
			return err
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if err := put(tbl.t, raw); err != nil {
				return err
			}
			*tbl.n++
		}
	}
	if err := put(snapEnd, end); err != nil {
		return err
	}
	return bw.Flush()
}

// Release is a no-op: the memdb snapshot is garbage collected.
func (s *snapshot) Release() {}

// readSnapshot builds a fresh store from a snapshot stream.
func readSnapshot(r io.Reader) (*memdb.MemDB, uint64, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, 0, err
	}
	var index uint64
	br := bufio.NewReaderSize(r, 1<<20)
	dec := codec.NewDecoder(br, msgpackHandle)
	txn := db.Txn(true)
	defer txn.Abort()
	var got snapEndRecord
	sawHeader := false
	for {
		t, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("restore: snapshot truncated (no trailer)")
		}
		if err != nil {
			return nil, 0, fmt.Errorf("restore: %w", err)
		}
		if !sawHeader && t != snapHeader {
			return nil, 0, fmt.Errorf("restore: snapshot does not start with a header")
		}
		switch t {
		case snapHeader:
			var h snapHeaderRecord
			if err := dec.Decode(&h); err != nil {
				return nil, 0, fmt.Errorf("restore header: %w", err)
			}
			if h.Version != snapshotVersion {
				return nil, 0, fmt.Errorf("restore: snapshot version %d, this build reads %d", h.Version, snapshotVersion)
			}
			sawHeader = true
			index = h.Index
		case snapJob:
			j := new(Job)
			if err := dec.Decode(j); err != nil {
				return nil, 0, fmt.Errorf("restore job: %w", err)
			}
			if err := txn.Insert(tableJobs, j); err != nil {
				return nil, 0, err
			}
			got.Jobs++
		case snapBlob:
			b := new(Blob)
			if err := dec.Decode(b); err != nil {
				return nil, 0, fmt.Errorf("restore blob: %w", err)
			}
			if err := txn.Insert(tableBlobs, b); err != nil {
				return nil, 0, err
			}
			got.Blobs++
		case snapChunk:
			c := new(BlobChunk)
			if err := dec.Decode(c); err != nil {
				return nil, 0, fmt.Errorf("restore chunk: %w", err)
			}
			if err := txn.Insert(tableChunks, c); err != nil {
				return nil, 0, err
			}
			got.Chunks++
		case snapEnd:
			var want snapEndRecord
			if err := dec.Decode(&want); err != nil {
				return nil, 0, fmt.Errorf("restore trailer: %w", err)
			}
			if want != got {
				return nil, 0, fmt.Errorf("restore: snapshot counts %+v, read %+v", want, got)
			}
			txn.Commit()
			return db, index, nil
		default:
			return nil, 0, fmt.Errorf("restore: unknown record type %d", t)
		}
	}
}
