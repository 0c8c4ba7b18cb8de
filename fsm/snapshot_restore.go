package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Snapshot reading and restore: the record stream of every snapshot version
// is decoded and each object put back into a fresh set of tables.

// readSnapshot builds a fresh store from a snapshot stream.
func readSnapshot(r io.Reader) (*tables, snapHeaderRecord, error) {
	w := &writer{t: newTables()}
	br := bufio.NewReaderSize(r, 1<<20)
	t, err := br.ReadByte()
	if err != nil || t != snapHeader {
		return nil, snapHeaderRecord{}, fmt.Errorf("restore: snapshot does not start with a header")
	}
	var h snapHeaderRecord
	if err := readMsgpack(br, &h); err != nil {
		return nil, h, fmt.Errorf("restore header: %w", err)
	}
	var got snapEndRecord
	switch h.Version {
	case 1:
		err = readRecordsV1(br, w, &got)
	case 2, 3, 4, 5, 6, 7, 8, 9:
		err = readRecordsV2(br, w, &got, h.Version)
		if err == nil && h.Version >= 5 {
			w.t.feed.on = true
			err = w.t.feed.restored(w.feedHead)
		}
		w.t.jobControl = h.Version >= 6
		w.t.capabilities = h.Version >= 7
		w.t.version8 = h.Version >= 8
	default:
		return nil, h, fmt.Errorf("restore: snapshot version %d, this build reads 1 to %d", h.Version, snapshotVersion)
	}
	if err != nil {
		return nil, h, err
	}
	// The trailer's type byte has been read.
	var want snapEndRecord
	if err := readMsgpack(br, &want); err != nil {
		return nil, h, fmt.Errorf("restore trailer: %w", err)
	}
	if want != got {
		return nil, h, fmt.Errorf("restore: snapshot counts %+v, read %+v", want, got)
	}
	return w.t, h, nil
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
// records ahead of the inserts (the indexes take one writer at a time, so
// the inserts themselves cannot be spread over cores).
func readRecordsV2(br *bufio.Reader, w *writer, got *snapEndRecord, version int) error {
	type record struct {
		t   byte
		obj interface{}
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
			if buf, err = appendFull(br, buf[:0], n); err != nil {
				errc <- fmt.Errorf("restore: snapshot truncated: %w", err)
				return
			}
			d := dec{b: buf, in: in}
			var r record
			switch t {
			case snapJob:
				r = record{t, d.job(version)}
			case snapSession:
				r = record{t, d.session()}
			case snapStream:
				r = record{t, d.stream()}
			case snapRegistry:
				r = record{t, d.registry()}
			case snapGateway:
				r = record{t, d.gateway()}
			case snapWorker:
				r = record{t, d.worker()}
			case snapFeedHead:
				r = record{t, &feedHead{seq: d.uvarint()}}
			case snapFeed:
				r = record{t, d.feedEvent()}
			case snapPause:
				r = record{t, d.pause()}
			case snapCaps:
				r = record{t, &CapsSeen{Key: d.str(), At: d.varint()}}
			case snapDefaults:
				r = record{t, d.defaults()}
			case snapLevel:
				r = record{t, &levelRecord{level: d.int()}}
			case snapWorkerID:
				r = record{t, d.binding()}
			case snapBlob:
				r = record{t, d.blob()}
			case snapChunk:
				r = record{t, d.chunk()}
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
			if err := restoreObject(w, r.obj, got); err != nil {
				return err
			}
		}
	}
	return <-errc
}

// readRecordsV1 inserts msgpack object records up to and including the
// trailer's type byte.
func readRecordsV1(br *bufio.Reader, w *writer, got *snapEndRecord) error {
	for {
		t, err := readType(br)
		if err != nil {
			return err
		}
		var obj interface{}
		switch t {
		case snapEnd:
			return nil
		case snapJob:
			obj = new(Job)
		case snapBlob:
			obj = new(Blob)
		case snapChunk:
			obj = new(BlobChunk)
		default:
			return fmt.Errorf("restore: unknown record type %d", t)
		}
		if err := readMsgpack(br, obj); err != nil {
			return fmt.Errorf("restore record %d: %w", t, err)
		}
		if err := restoreObject(w, obj, got); err != nil {
			return err
		}
	}
}

// appendFull appends the next n bytes of r to b. The buffer grows as the
// bytes arrive (at most doubling), so a corrupt length allocates about what
// the stream holds, not what the length says.
func appendFull(r io.Reader, b []byte, n uint64) ([]byte, error) {
	end := uint64(len(b)) + n
	for uint64(len(b)) < end {
		if len(b) == cap(b) {
			c := min(end, max(2*uint64(cap(b)), 1<<20))
			b = append(make([]byte, 0, c), b...)
		}
		m, err := io.ReadFull(r, b[len(b):min(uint64(cap(b)), end)])
		b = b[:len(b)+m]
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// readMsgpack reads one msgpack value from br and decodes it into v. It
// reads the value's bytes first (msgpackValue) and decodes those: the
// stream decoder allocates the length an extension declares before it
// reads a byte of it, so 13 bytes of garbage could allocate gigabytes.
func readMsgpack(br *bufio.Reader, v interface{}) error {
	raw, err := msgpackValue(br, nil)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return decodeMsgpack(raw, v)
}

// msgpackValue appends the bytes of the next msgpack value of br to b,
// following its structure without decoding it.
func msgpackValue(br *bufio.Reader, b []byte) ([]byte, error) {
	for pending := uint64(1); pending > 0; pending-- {
		c, err := br.ReadByte()
		if err != nil {
			return b, err
		}
		b = append(b, c)
		// Each value is its type byte, then lenBytes bytes of a big-endian
		// length or count (times perLen payload bytes or values), then fixed
		// bytes of payload.
		var lenBytes, fixed uint64
		var values bool // the length counts values (an array's or a map's)
		perLen := uint64(1)
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixints, nil, bools
		case c <= 0x8f: // fixmap
			pending += 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			pending += uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			fixed = uint64(c & 0x1f)
		case c >= 0xc4 && c <= 0xc6: // bin 8, 16, 32
			lenBytes = 1 << (c - 0xc4)
		case c >= 0xc7 && c <= 0xc9: // ext 8, 16, 32: length, type, data
			lenBytes, fixed = 1<<(c-0xc7), 1
		case c == 0xca, c == 0xcb: // float 32, 64
			fixed = 4 << (c - 0xca)
		case c >= 0xcc && c <= 0xcf: // uint 8 to 64
			fixed = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3: // int 8 to 64
			fixed = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8: // fixext 1 to 16: type, data
			fixed = 1 + 1<<(c-0xd4)
		case c >= 0xd9 && c <= 0xdb: // str 8, 16, 32
			lenBytes = 1 << (c - 0xd9)
		case c == 0xdc, c == 0xdd: // array 16, 32
			lenBytes, values = 2<<(c-0xdc), true
		case c == 0xde, c == 0xdf: // map 16, 32
			lenBytes, values, perLen = 2<<(c-0xde), true, 2
		default: // 0xc1: never used
			return b, fmt.Errorf("msgpack: invalid type byte %#x", c)
		}
		start := len(b)
		if b, err = appendFull(br, b, lenBytes); err != nil {
			return b, err
		}
		var n uint64
		for _, x := range b[start:] {
			n = n<<8 | uint64(x)
		}
		if values {
			// Each value takes at least a byte: garbage ends at the stream's end.
			if pending += n * perLen; pending > 1<<40 {
				return b, fmt.Errorf("msgpack: %d values pending", pending)
			}
			n = 0
		}
		if b, err = appendFull(br, b, n+fixed); err != nil {
			return b, err
		}
	}
	return b, nil
}

// restoreObject stores one object read from a snapshot and counts it. Two
// records with the same key mean a corrupt snapshot.
func restoreObject(w *writer, obj interface{}, got *snapEndRecord) error {
	switch v := obj.(type) {
	case *Job:
		got.Jobs++
		if v.ID == "" {
			return fmt.Errorf("restore: job record without an id")
		}
		if w.t.job(v.ID) != nil {
			return fmt.Errorf("restore: job %s appears twice", v.ID)
		}
		w.putJob(nil, v)
	case *Blob:
		got.Blobs++
		if v.ID == "" {
			return fmt.Errorf("restore: blob record without an id")
		}
		w.putBlob(v)
	case *BlobChunk:
		got.Chunks++
		w.putChunk(v)
	case *Session:
		got.Sessions++
		if v.Name == "" || w.t.session(v.Name) != nil {
			return fmt.Errorf("restore: session record %q without a name or twice", v.Name)
		}
		w.putSession(v)
	case *Stream:
		got.Streams++
		if v.Name == "" || w.t.stream(v.Name) != nil {
			return fmt.Errorf("restore: stream record %q without a name or twice", v.Name)
		}
		w.putStream(v)
	case *Registry:
		got.Registry++
		if w.t.registry != nil {
			return fmt.Errorf("restore: two registry records")
		}
		w.putRegistry(v)
	case *Gateway:
		got.Gateways++
		if v.ID == "" || w.t.gateway(v.ID) != nil {
			return fmt.Errorf("restore: gateway record %q without an id or twice", v.ID)
		}
		w.putGateway(v)
	case *Worker:
		got.Workers++
		if v.ID == "" || w.t.worker(v.ID) != nil {
			return fmt.Errorf("restore: worker record %q without an id or twice", v.ID)
		}
		w.putWorker(v)
	case *feedHead:
		got.FeedHead++
		if got.FeedHead > 1 {
			return fmt.Errorf("restore: two feed head records")
		}
		w.feedHead = v.seq
	case *FeedEvent:
		got.Feed++
		return w.t.feed.restore(v, w.feedHead)
	case *StreamPause:
		got.Paused++
		if v.Stream == "" || w.t.isPaused(v.Stream) {
			return fmt.Errorf("restore: stream pause record %q without a stream or twice", v.Stream)
		}
		w.setPause(v.Stream, v)
	case *CapsSeen:
		got.Caps++
		if _, dup := w.t.capsSeen[v.Key]; v.Key == "" || dup {
			return fmt.Errorf("restore: capability set record %q empty or twice", v.Key)
		}
		if w.t.capsSeen == nil {
			w.t.capsSeen = map[string]int64{}
		}
		w.t.capsSeen[v.Key] = v.At
	case *StreamDefaults:
		got.Defaults++
		if v.Stream == "" || w.t.defaults[v.Stream] != nil {
			return fmt.Errorf("restore: stream defaults record %q without a stream or twice", v.Stream)
		}
		w.setDefaults(v.Stream, v)
	case *levelRecord:
		got.Level++
		if got.Level > 1 || v.level < 1 || v.level > LatestLevel {
			return fmt.Errorf("restore: level record %d twice or not one this build applies (1 to %d)", v.level, LatestLevel)
		}
		w.t.level = v.level
	case *WorkerBinding:
		got.WorkerIDs++
		if v.ID == "" || v.Role == "" || w.t.binding(v.ID) != nil {
			return fmt.Errorf("restore: worker id record %q without an id or role, or twice", v.ID)
		}
		w.putBinding(v)
	}
	return nil
}
