package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/spine-queue/spine/internal/gcpace"
	"io"
	"runtime"
	"slices"
	"sync"
)

// Decoding the records of a snapshot of version 2 or later on every core.
// A record is its type byte, a uvarint length and that many bytes, so the
// stream cuts into blocks of whole records without decoding any: one
// goroutine (split) reads the stream into blocks of about decodeBlockLen
// bytes, checks each record's type and length, and hands each block to the
// decoders, as many as there are cores, each with its own interner. The
// restore takes the blocks' records in the order of the stream, so the
// state built, and the first error met, are the same as one decoder's. A
// block's bytes are copied out as its records are decoded (no object
// holds any of them), and the block goes back to be read into again.

// decodeBlockLen is the size of a block of records. A record longer than
// a block gets a block of its own, grown as its bytes arrive.
const decodeBlockLen = 1 << 20

// record is one decoded record of kind k.
type record struct {
	k   *snapKind
	obj any
}

// recordBlock is a block of whole records, then what they decode to: the
// records before the first that did not decode, and its error. err alone
// (no bytes) is the end of the stream or what cut it.
type recordBlock struct {
	b    []byte
	recs []record
	err  error
	done chan struct{} // closed once decoded
}

// snapDecoder is a decode under way.
type snapDecoder struct {
	version int
	src     io.Reader
	work    chan *recordBlock // to the decoders
	order   chan *recordBlock // to the restore, in the stream's order
	free    chan []byte       // blocks to read into again
	// lists of records to decode into again
	freeRecs chan []record
	stop     chan struct{}
	wg       sync.WaitGroup
	rest     []byte // what split read past the trailer's type byte
}

// readRecordsV2 stores the binary object records of the stream r, which
// br buffers, up to and including the trailer's type byte, and returns a
// reader of the trailer.
func readRecordsV2(br *bufio.Reader, r io.Reader, rs *restoring, version int) (*bufio.Reader, error) {
	workers := runtime.GOMAXPROCS(0)
	sd := &snapDecoder{
		version: version,
		// The bytes br holds, then the stream itself: a block is read
		// from the stream directly, not through br's buffer.
		src:      io.MultiReader(io.LimitReader(br, int64(br.Buffered())), r),
		work:     make(chan *recordBlock, workers),
		order:    make(chan *recordBlock, 2*workers+2),
		free:     make(chan []byte, 2*workers+4),
		freeRecs: make(chan []record, 2*workers+4),
		stop:     make(chan struct{}),
	}
	sd.wg.Add(1 + workers)
	go sd.split()
	for range workers {
		go sd.decode()
	}
	err := sd.restore(rs)
	close(sd.stop)
	// No goroutine reads the stream or holds a record once this returns.
	sd.wg.Wait()
	if err != nil {
		return nil, err
	}
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(sd.rest), r), 4096), nil
}

// restore stores the records in the stream's order, and returns the first
// error met: a record that did not decode, or was refused, or the stream
// cut short.
func (sd *snapDecoder) restore(rs *restoring) error {
	for blk := range sd.order {
		<-blk.done
		for _, r := range blk.recs {
			if err := rs.restoreRecord(r.k, r.obj); err != nil {
				return err
			}
		}
		if blk.recs != nil {
			clear(blk.recs)
			select {
			case sd.freeRecs <- blk.recs[:0]:
			default:
			}
		}
		if blk.err != nil {
			if blk.err == io.EOF {
				return nil
			}
			return blk.err
		}
	}
	return errors.New("restore: the record stream ended without its end")
}

// send hands blk to the restore (and, holding records, to the decoders),
// unless the restore has stopped.
func (sd *snapDecoder) send(blk *recordBlock) bool {
	select {
	case sd.order <- blk:
	case <-sd.stop:
		return false
	}
	if blk.b == nil {
		close(blk.done)
		return true
	}
	select {
	case sd.work <- blk:
		return true
	case <-sd.stop:
		return false
	}
}

// block returns an empty block of at least n bytes' capacity.
func (sd *snapDecoder) block(n int) []byte {
	if n <= decodeBlockLen {
		select {
		case b := <-sd.free:
			return b[:0]
		default:
		}
		n = decodeBlockLen
	}
	return make([]byte, 0, n)
}

// split reads the stream into blocks of whole records, up to the trailer's
// type byte.
func (sd *snapDecoder) split() {
	defer sd.wg.Done()
	defer close(sd.work)
	defer close(sd.order)
	// cut hands the whole records before off on, then the end (err).
	cut := func(b []byte, err error) {
		if len(b) > 0 && !sd.send(&recordBlock{b: b, done: make(chan struct{})}) {
			return
		}
		sd.send(&recordBlock{err: err, done: make(chan struct{})})
	}
	buf := sd.block(decodeBlockLen)
	for eof := false; ; {
		// The whole records buf holds end at off; need, when set, is how
		// much of buf the next one takes (at least: its length may not
		// all be in).
		off, need := 0, 0
		for need == 0 && off < len(buf) {
			t := buf[off]
			if t == snapEnd {
				sd.rest = append([]byte(nil), buf[off+1:]...)
				cut(buf[:off], io.EOF)
				return
			}
			if k := snapKinds[t]; k == nil || k.since > sd.version {
				cut(buf[:off], fmt.Errorf("restore: unknown record type %d in a version %d snapshot", t, sd.version))
				return
			}
			n, w := binary.Uvarint(buf[off+1:])
			switch {
			case w < 0:
				cut(buf[:off], errors.New("restore: record length: varint overflows a 64-bit integer"))
				return
			case w == 0:
				need = off + 1 + binary.MaxVarintLen64
			case n > maxSnapRecord:
				cut(buf[:off], fmt.Errorf("restore: record of %d bytes", n))
				return
			case uint64(len(buf)-off-1-w) < n:
				need = off + 1 + w + int(n)
			default:
				off += 1 + w + int(n)
			}
		}
		if eof {
			what := "no trailer"
			if off < len(buf) {
				what = "a record cut short"
			}
			cut(buf[:off], fmt.Errorf("restore: snapshot truncated (%s): %w", what, io.ErrUnexpectedEOF))
			return
		}
		if len(buf) == cap(buf) {
			// Full: the whole records go to the decoders, what follows
			// them to a new block: one of the usual size, or for a record
			// longer than that, one grown as its bytes arrive (at most
			// doubling what is in), up to the record.
			size := decodeBlockLen
			if part := len(buf) - off; need-off > size {
				size = min(need-off, max(size, 2*part))
			}
			next := append(sd.block(size), buf[off:]...)
			if off > 0 && !sd.send(&recordBlock{b: buf[:off], done: make(chan struct{})}) {
				return
			}
			buf = next
		}
		m, err := sd.src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		gcpace.RestoreRead(m)
		if errors.Is(err, io.EOF) {
			eof = true
		} else if err != nil {
			cut(nil, fmt.Errorf("restore: %w", err))
			return
		}
		select {
		case <-sd.stop:
			return
		default:
		}
	}
}

// decode decodes the blocks handed to it.
func (sd *snapDecoder) decode() {
	defer sd.wg.Done()
	d := &dec{in: newInterner(), scratch: &decodeScratch{}}
	for blk := range sd.work {
		blk.recs, blk.err = decodeBlock(blk.b, sd.version, d, sd.records())
		if cap(blk.b) == decodeBlockLen {
			select {
			case sd.free <- blk.b:
			default:
			}
		}
		blk.b = nil
		close(blk.done)
	}
}

// decodeBlock decodes the whole records of b (their types and lengths
// checked by split) with d.
func decodeBlock(b []byte, version int, d *dec, recs []record) ([]record, error) {
	for len(b) > 0 {
		t := b[0]
		n, w := binary.Uvarint(b[1:])
		body := b[1+w : 1+w+int(n)]
		b = b[1+w+int(n):]
		k := snapKinds[t]
		d.b, d.err = body, nil
		obj := k.read(d, version)
		if err := d.done(); err != nil {
			return recs, fmt.Errorf("restore record %d: %w", t, err)
		}
		recs = append(recs, record{k, obj})
	}
	return recs, nil
}

// records returns an empty list of records to decode a block into.
func (sd *snapDecoder) records() []record {
	select {
	case recs := <-sd.freeRecs:
		return recs
	default:
		return nil
	}
}

// decodeScratch is a decoder's reader of tagged fields, and the job and
// history it decodes a job record into before copying it out.
type decodeScratch struct {
	f   fields
	job Job
	tr  trail
	ev  []Event
	at  []Attempt
}

// taggedJob decodes a job record of version snapTagged or later, as
// readTagged does, but through the decoder's scratch job: the job it
// returns is then allocated at its size, its created event kept as its
// creator when it can be (a queued job is then one allocation, as create
// makes it), and the rest of its history and its attempts sized exactly,
// as addEvent keeps them. A finished job's trail is sealed straight from
// the scratch arrays.
func (d *dec) taggedJob() *Job {
	s := d.scratch
	j := &s.job
	s.tr = trail{history: s.ev[:0], attempts: s.at[:0]}
	*j = Job{trail: &s.tr}
	if err := readFields(d.b, j, d.in, &s.f); err != nil {
		d.fail(err.Error())
	}
	d.b = nil
	h, at := s.tr.history, s.tr.attempts
	if cap(h) > cap(s.ev) {
		s.ev = h[:0]
	}
	if cap(at) > cap(s.at) {
		s.at = at[:0]
	}
	s.tr = trail{}
	out := new(Job)
	*out = *j
	if out.State.Terminal() {
		// Sealed straight from the scratch arrays, through the scratch
		// trail: the job keeps only the packed form.
		s.tr = trail{attempts: at}
		out.trail = &s.tr
		out.setHistory(h)
		out.sealIfFinished()
		if out.trail == &s.tr { // too long to seal: kept open, in arrays of its own
			out.trail = &trail{attempts: slices.Clone(at), history: slices.Clone(s.tr.history)}
		}
		s.tr = trail{}
		return out
	}
	out.setTrail(at, nil)
	out.setHistory(h)
	if len(at) > 0 {
		out.trail.attempts = append(make([]Attempt, 0, len(at)), at...)
	}
	if evs := out.events(); len(evs) > 0 {
		out.setEvents(append(make([]Event, 0, len(evs)), evs...))
	}
	return out
}
