package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// A snapshot is a header record, one record per object, and a trailer that
// counts them, so a truncated snapshot is detected on restore. Every record
// starts with its type byte. The header and trailer are msgpack (so any
// version can read the header and refuse a version it does not know); in
// version 2 each object record is a uvarint length and the object in the
// binary encoding of codec.go (version 1 wrote objects as msgpack).
const (
	snapHeader byte = 1
	snapJob    byte = 2
	snapBlob   byte = 3
	snapChunk  byte = 4
	snapEnd    byte = 255
)

// snapshotVersion changes when the record layout changes incompatibly.
// Restore also reads version 1.
const snapshotVersion = 2

// maxSnapRecord bounds one object record, so a corrupt length cannot make
// restore allocate without limit.
const maxSnapRecord = 1 << 30

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
	mp := codec.NewEncoder(bw, msgpackHandle)
	if err := bw.WriteByte(snapHeader); err != nil {
		return err
	}
	if err := mp.Encode(snapHeaderRecord{Version: snapshotVersion, Index: s.index}); err != nil {
		return err
	}
	var (
		e   enc
		hdr [1 + binary.MaxVarintLen64]byte
	)
	put := func(t byte) error {
		hdr[0] = t
		n := binary.PutUvarint(hdr[1:], uint64(len(e.b)))
		if _, err := bw.Write(hdr[:1+n]); err != nil {
			return err
		}
		_, err := bw.Write(e.b)
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
			e.b = e.b[:0]
			switch v := raw.(type) {
			case *Job:
				e.job(v)
			case *Blob:
				e.blob(v)
			case *BlobChunk:
				e.chunk(v)
			}
			if err := put(tbl.t); err != nil {
				return err
			}
			*tbl.n++
		}
	}
	if err := bw.WriteByte(snapEnd); err != nil {
		return err
	}
	if err := mp.Encode(end); err != nil {
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
	br := bufio.NewReaderSize(r, 1<<20)
	mp := codec.NewDecoder(br, msgpackHandle)
	t, err := br.ReadByte()
	if err != nil || t != snapHeader {
		return nil, 0, fmt.Errorf("restore: snapshot does not start with a header")
	}
	var h snapHeaderRecord
	if err := mp.Decode(&h); err != nil {
		return nil, 0, fmt.Errorf("restore header: %w", err)
	}
	txn := db.Txn(true)
	defer txn.Abort()
	var got snapEndRecord
	switch h.Version {
	case 1:
		err = readRecordsV1(br, mp, txn, &got)
	case snapshotVersion:
		err = readRecordsV2(br, txn, &got)
	default:
		return nil, 0, fmt.Errorf("restore: snapshot version %d, this build reads 1 and %d", h.Version, snapshotVersion)
	}
	if err != nil {
		return nil, 0, err
	}
	// The trailer's type byte has been read.
	var want snapEndRecord
	if err := mp.Decode(&want); err != nil {
		return nil, 0, fmt.Errorf("restore trailer: %w", err)
	}
	if want != got {
		return nil, 0, fmt.Errorf("restore: snapshot counts %+v, read %+v", want, got)
	}
	txn.Commit()
	return db, h.Index, nil
}

func readType(br *bufio.Reader) (byte, error) {
	t, err := br.ReadByte()
	if errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("restore: snapshot truncated (no trailer)")
	}
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	return t, nil
}

// readRecordsV2 inserts binary object records up to and including the
// trailer's type byte. Decoding runs in its own goroutine, a batch of
// records ahead of the inserts (memdb takes one writer at a time, so the
// inserts themselves cannot be spread over cores).
func readRecordsV2(br *bufio.Reader, txn *memdb.Txn, got *snapEndRecord) error {
	type record struct {
		table string
		obj   interface{}
	}
	const batchLen = 1024
	batches := make(chan []record, 4)
	errc := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(batches)
		in := newInterner()
		var buf []byte
		recs := make([]record, 0, batchLen)
		send := func() bool {
			select {
			case batches <- recs:
				recs = make([]record, 0, batchLen)
				return true
			case <-stop:
				return false
			}
		}
		for {
			t, err := readType(br)
			if err != nil {
				errc <- err
				return
			}
			if t == snapEnd {
				if len(recs) > 0 {
					send()
				}
				errc <- nil
				return
			}
			n, err := binary.ReadUvarint(br)
			if err != nil {
				errc <- fmt.Errorf("restore: record length: %w", err)
				return
			}
			if n > maxSnapRecord {
				errc <- fmt.Errorf("restore: record of %d bytes", n)
				return
			}
			if uint64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err := io.ReadFull(br, buf); err != nil {
				errc <- fmt.Errorf("restore: snapshot truncated: %w", err)
				return
			}
			d := dec{b: buf, in: in}
			var r record
			switch t {
			case snapJob:
				r = record{tableJobs, d.job()}
			case snapBlob:
				r = record{tableBlobs, d.blob()}
			case snapChunk:
				r = record{tableChunks, d.chunk()}
			default:
				errc <- fmt.Errorf("restore: unknown record type %d", t)
				return
			}
			if err := d.done(); err != nil {
				errc <- fmt.Errorf("restore record %d: %w", t, err)
				return
			}
			recs = append(recs, r)
			if len(recs) == batchLen && !send() {
				return
			}
		}
	}()
	for recs := range batches {
		for _, r := range recs {
			switch r.table {
			case tableJobs:
				got.Jobs++
			case tableBlobs:
				got.Blobs++
			case tableChunks:
				got.Chunks++
			}
			if err := txn.Insert(r.table, r.obj); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
		}
	}
	return <-errc
}

// readRecordsV1 inserts msgpack object records up to and including the
// trailer's type byte.
func readRecordsV1(br *bufio.Reader, mp *codec.Decoder, txn *memdb.Txn, got *snapEndRecord) error {
	for {
		t, err := readType(br)
		if err != nil {
			return err
		}
		var (
			table string
			obj   interface{}
		)
		switch t {
		case snapEnd:
			return nil
		case snapJob:
			table, obj = tableJobs, new(Job)
			got.Jobs++
		case snapBlob:
			table, obj = tableBlobs, new(Blob)
			got.Blobs++
		case snapChunk:
			table, obj = tableChunks, new(BlobChunk)
			got.Chunks++
		default:
			return fmt.Errorf("restore: unknown record type %d", t)
		}
		if err := mp.Decode(obj); err != nil {
			return fmt.Errorf("restore record %d: %w", t, err)
		}
		if err := txn.Insert(table, obj); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
}

// Object encodings of snapshot version 2.

func (e *enc) optError(je *JobError) {
	e.bool(je != nil)
	if je != nil {
		e.jobError(je)
	}
}

func (d *dec) optError() *JobError {
	if !d.bool() {
		return nil
	}
	je := d.jobError()
	return &je
}

func (e *enc) job(j *Job) {
	e.str(j.ID)
	e.str(j.Stream)
	e.str(j.Target)
	e.bytes(j.Payload)
	e.str(string(j.State))
	e.int(j.Attempts)
	e.int(j.MaxAttempts)
	e.varint(j.LeaseSeconds)
	e.str(j.TaskClass)
	e.str(j.IdempotencyKey)
	e.bool(j.Lease != nil)
	if l := j.Lease; l != nil {
		e.str(l.Owner)
		e.str(l.WorkerID)
		e.str(l.AttemptID)
		e.str(l.Token)
		e.varint(l.ExpiresAt)
	}
	e.bytes(j.Result)
	e.optError(j.Error)
	e.str(j.Stdout)
	e.str(j.Stderr)
	e.uvarint(uint64(len(j.Comments)))
	for _, c := range j.Comments {
		e.varint(c.At)
		e.str(c.Actor)
		e.str(c.Text)
	}
	e.uvarint(uint64(len(j.AttemptLog)))
	for i := range j.AttemptLog {
		a := &j.AttemptLog[i]
		e.str(a.ID)
		e.str(a.Owner)
		e.str(a.WorkerID)
		e.str(a.Token)
		e.varint(a.StartedAt)
		e.varint(a.EndedAt)
		e.str(string(a.Outcome))
		e.optError(a.Error)
		e.bool(a.Requeued)
		e.bool(a.DLQ)
		e.bool(a.ByHolder)
	}
	e.uvarint(uint64(len(j.History)))
	for i := range j.History {
		ev := &j.History[i]
		e.int(ev.Seq)
		e.varint(ev.At)
		e.str(ev.Type)
		e.str(ev.Actor)
		e.str(string(ev.From))
		e.str(string(ev.To))
		e.str(ev.AttemptID)
		e.str(ev.WorkerID)
		e.str(ev.Text)
	}
	e.varint(j.CreatedAt)
	e.varint(j.UpdatedAt)
	e.varint(j.StartedAt)
	e.varint(j.FinishedAt)
	e.uvarint(j.CreateIndex)
	e.uvarint(j.QueueIndex)
	e.uvarint(j.ModifyIndex)
}

func (d *dec) job() *Job {
	var j Job
	j.ID = d.str()
	j.Stream = d.istr()
	j.Target = d.istr()
	j.Payload = d.bytes()
	j.State = State(d.istr())
	j.Attempts = d.int()
	j.MaxAttempts = d.int()
	j.LeaseSeconds = d.varint()
	j.TaskClass = d.istr()
	j.IdempotencyKey = d.str()
	if d.bool() {
		j.Lease = &Lease{Owner: d.istr(), WorkerID: d.istr(), AttemptID: d.str(), Token: d.str(), ExpiresAt: d.varint()}
	}
	j.Result = d.bytes()
	j.Error = d.optError()
	j.Stdout = d.str()
	j.Stderr = d.str()
	if n := d.count(3); n > 0 {
		j.Comments = make([]Comment, n)
		for i := range j.Comments {
			j.Comments[i] = Comment{At: d.varint(), Actor: d.istr(), Text: d.str()}
		}
	}
	if n := d.count(10); n > 0 {
		j.AttemptLog = make([]Attempt, n)
		for i := range j.AttemptLog {
			j.AttemptLog[i] = Attempt{ID: d.str(), Owner: d.istr(), WorkerID: d.istr(), Token: d.str(),
				StartedAt: d.varint(), EndedAt: d.varint(), Outcome: Outcome(d.istr()), Error: d.optError(),
				Requeued: d.bool(), DLQ: d.bool(), ByHolder: d.bool()}
		}
	}
	n := d.count(9)
	var jp *Job
	if n == 1 {
		// As in create: the job and its one event in one allocation.
		jc := &jobWithCreated{}
		j.History = jc.ev[:1:1]
		jp = &jc.Job
	} else {
		if n > 0 {
			j.History = make([]Event, n)
		}
		jp = new(Job)
	}
	for i := range j.History {
		j.History[i] = Event{Seq: d.int(), At: d.varint(), Type: d.istr(), Actor: d.istr(),
			From: State(d.istr()), To: State(d.istr()), AttemptID: d.str(), WorkerID: d.istr(), Text: d.istr()}
	}
	j.CreatedAt = d.varint()
	j.UpdatedAt = d.varint()
	j.StartedAt = d.varint()
	j.FinishedAt = d.varint()
	j.CreateIndex = d.uvarint()
	j.QueueIndex = d.uvarint()
	j.ModifyIndex = d.uvarint()
	*jp = j
	return jp
}

func (e *enc) blob(b *Blob) {
	e.str(b.ID)
	e.varint(b.Size)
	e.str(b.ContentType)
	e.int(b.Chunks)
	e.varint(b.CreatedAt)
}

func (d *dec) blob() *Blob {
	return &Blob{ID: d.str(), Size: d.varint(), ContentType: d.istr(), Chunks: d.int(), CreatedAt: d.varint()}
}

func (e *enc) chunk(c *BlobChunk) {
	e.str(c.BlobID)
	e.int(c.Seq)
	e.bytes(c.Data)
}

func (d *dec) chunk() *BlobChunk {
	return &BlobChunk{BlobID: d.str(), Seq: d.int(), Data: d.bytes()}
}
