package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
	// Version 3: the developer queue's catalogs and registry (devq.go).
	snapSession  byte = 5
	snapStream   byte = 6
	snapRegistry byte = 7
	// Version 4: the control plane's registry (controlplane.go).
	snapGateway byte = 8
	snapWorker  byte = 9
	// Version 5: the event feed (feed.go).
	snapFeedHead byte = 10
	snapFeed     byte = 11
	// Version 6: paused streams (cmd_pause.go).
	snapPause byte = 12
	// Version 7: the capability sets seen (capabilities.go).
	snapCaps byte = 13
	// Version 8: the streams' job defaults (cmd_defaults.go).
	snapDefaults byte = 14
	// Version 9: the cluster's level and the worker ids' bindings
	// (level.go, identity.go).
	snapLevel    byte = 15
	snapWorkerID byte = 16
	snapEnd      byte = 255
)

// snapshotVersion changes when the record layout changes incompatibly.
// Restore also reads versions 1 and 2. Version 3 adds the developer
// queue: the task fields of a job record, and session, stream and registry
// records. A state without any of it is written as version 2, which a node
// of the version before the developer queue can read (a rolling upgrade:
// such state exists only once every node applies its commands). Version 4
// adds gateway and worker records; a state without them is written as
// version 3 (or 2), for the same reason. Version 5 adds the event feed
// and when each attempt started; it is written once the feed is on, which
// the leader turns on only once every server applies it (feed.go). Version
// 6 adds paused streams and a job's cancel (its state, and when and why a
// cancel was asked), progress, checkpoint, priority, schedule, backoff,
// concurrency key and dependencies;
// it is written once a pause, a cancel, a progress or a create with those
// options has been applied, which the leader proposes only once every
// server applies them. Version 7 adds a job's requirements, the
// capabilities of the claim that took it and the workers it is not for, and
// the capability sets seen; it is written once a create with requirements,
// a claim with capabilities or a release not for its worker has been
// applied. Version 8 adds the streams' job defaults and a job's
// dependency policy; it is written once defaults have been set or a job
// created with the policy. Version 9 adds the cluster's level and the
// worker ids' bindings; it is written from LevelIdentity on, which the
// leader raises to only once every server applies it.
const snapshotVersion = 9

// SnapshotVersion is the newest snapshot version this build writes (and
// so the newest it reads).
const SnapshotVersion = snapshotVersion

// maxSnapRecord bounds one object record, so a corrupt length cannot make
// restore allocate without limit.
const maxSnapRecord = 1 << 30

type snapHeaderRecord struct {
	Version int
	Index   uint64
	// Hash is the state hash after the command at HashIndex, the last one
	// at or below Index (hash.go). Absent from snapshots of builds that
	// kept no hash: readers of those ignore the fields.
	Hash      []byte `codec:",omitempty"`
	HashIndex uint64 `codec:",omitempty"`
}

type snapEndRecord struct {
	Jobs, Blobs, Chunks int
	// Version 3.
	Sessions int `codec:",omitempty"`
	Streams  int `codec:",omitempty"`
	Registry int `codec:",omitempty"`
	// Version 4.
	Gateways int `codec:",omitempty"`
	Workers  int `codec:",omitempty"`
	// Version 5.
	FeedHead int `codec:",omitempty"`
	Feed     int `codec:",omitempty"`
	// Version 6.
	Paused int `codec:",omitempty"`
	// Version 7.
	Caps int `codec:",omitempty"`
	// Version 8.
	Defaults int `codec:",omitempty"`
	// Version 9.
	Level     int `codec:",omitempty"`
	WorkerIDs int `codec:",omitempty"`
}

type snapshot struct {
	t     *tables // a published view: never changes
	index uint64
	// the state hash at index (hash.go)
	hash      Hash
	hashIndex uint64
	hashKnown bool
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
	version := 2
	if s.t.devq() {
		version = 3
	}
	if s.t.controlPlane() {
		version = 4
	}
	if s.t.feed.on {
		version = 5
	}
	if s.t.jobControl {
		version = 6
	}
	if s.t.capabilities {
		version = 7
	}
	if s.t.version8 {
		version = 8
	}
	if s.t.level >= LevelIdentity {
		version = 9
	}
	head := snapHeaderRecord{Version: version, Index: s.index}
	if s.hashKnown {
		head.Hash, head.HashIndex = s.hash[:], s.hashIndex
	}
	if err := mp.Encode(head); err != nil {
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
	var (
		end snapEndRecord
		err error
	)
	// Jobs, then blobs, then chunks, each in key order; stop at the first
	// write error.
	s.t.byID.Ascend(func(it idItem) bool {
		e.b = e.b[:0]
		e.job(it.j, version)
		err = put(snapJob)
		end.Jobs++
		return err == nil
	})
	if err == nil {
		s.t.blobs.Ascend(func(it blobItem) bool {
			e.b = e.b[:0]
			e.blob(it.b)
			err = put(snapBlob)
			end.Blobs++
			return err == nil
		})
	}
	if err == nil {
		s.t.chunks.Ascend(func(it chunkItem) bool {
			e.b = e.b[:0]
			e.chunk(it.c)
			err = put(snapChunk)
			end.Chunks++
			return err == nil
		})
	}
	if err == nil && version >= 3 {
		s.t.sessions.Ascend(func(it sessionItem) bool {
			e.b = e.b[:0]
			e.session(it.s)
			err = put(snapSession)
			end.Sessions++
			return err == nil
		})
	}
	if err == nil && version >= 3 {
		s.t.streams.Ascend(func(it streamItem) bool {
			e.b = e.b[:0]
			e.stream(it.s)
			err = put(snapStream)
			end.Streams++
			return err == nil
		})
	}
	if err == nil && version >= 3 && s.t.registry != nil {
		e.b = e.b[:0]
		e.registry(s.t.registry)
		err = put(snapRegistry)
		end.Registry++
	}
	if err == nil && version >= 4 {
		s.t.gateways.Ascend(func(it gatewayItem) bool {
			e.b = e.b[:0]
			e.gateway(it.g)
			err = put(snapGateway)
			end.Gateways++
			return err == nil
		})
	}
	if err == nil && version >= 4 {
		s.t.workers.Ascend(func(it workerItem) bool {
			e.b = e.b[:0]
			e.worker(it.w)
			err = put(snapWorker)
			end.Workers++
			return err == nil
		})
	}
	if err == nil && version >= 5 {
		e.b = e.b[:0]
		e.uvarint(s.t.feed.latest)
		err = put(snapFeedHead)
		end.FeedHead++
	}
	if err == nil && version >= 5 {
		l := &s.t.feed
		for seq := l.oldest(); seq != 0 && seq <= l.latest && err == nil; seq++ {
			e.b = e.b[:0]
			e.feedEvent(l.get(seq))
			err = put(snapFeed)
			end.Feed++
		}
	}
	if err == nil && version >= 6 {
		for _, p := range s.t.pausedList() {
			e.b = e.b[:0]
			e.pause(p)
			if err = put(snapPause); err != nil {
				break
			}
			end.Paused++
		}
	}
	if err == nil && version >= 7 {
		for _, c := range s.t.capsSeenList() {
			e.b = e.b[:0]
			e.str(c.Key)
			e.varint(c.At)
			if err = put(snapCaps); err != nil {
				break
			}
			end.Caps++
		}
	}
	if err == nil && version >= 8 {
		for _, d := range s.t.defaultsList() {
			e.b = e.b[:0]
			e.defaults(d)
			if err = put(snapDefaults); err != nil {
				break
			}
			end.Defaults++
		}
	}
	if err == nil && version >= 9 {
		e.b = e.b[:0]
		e.int(s.t.level)
		err = put(snapLevel)
		end.Level++
	}
	if err == nil && version >= 9 {
		s.t.workerIDs.Ascend(func(it bindingItem) bool {
			e.b = e.b[:0]
			e.binding(it.b)
			err = put(snapWorkerID)
			end.WorkerIDs++
			return err == nil
		})
	}
	if err != nil {
		return err
	}
	if err := bw.WriteByte(snapEnd); err != nil {
		return err
	}
	if err := mp.Encode(end); err != nil {
		return err
	}
	return bw.Flush()
}

// Release is a no-op: the view is garbage collected.
func (s *snapshot) Release() {}

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

// levelRecord is the cluster's level in a snapshot.
type levelRecord struct{ level int }

func (e *enc) binding(b *WorkerBinding) {
	e.str(b.ID)
	e.str(b.Role)
	e.varint(b.BoundAt)
	e.varint(b.SeenAt)
}

func (d *dec) binding() *WorkerBinding {
	return &WorkerBinding{ID: d.str(), Role: d.istr(), BoundAt: d.varint(), SeenAt: d.varint()}
}

func (e *enc) gateway(g *Gateway) {
	e.str(g.ID)
	e.str(g.Address)
	e.labels(g.Metadata)
	e.int(g.Capacity)
	e.str(g.Health)
	e.varint(g.HealthAt)
	e.varint(g.RegisteredAt)
	e.varint(g.UpdatedAt)
	e.uvarint(g.CreateIndex)
	if g.Delivery != "" || g.Role != "" || g.Secret != "" {
		e.str(g.Delivery) // the optional tail (from LevelDelivery on)
		e.str(g.Role)
		e.str(g.Secret)
	}
}

func (d *dec) gateway() *Gateway {
	g := &Gateway{ID: d.str(), Address: d.str(), Metadata: d.labels(), Capacity: d.int(), Health: d.istr(),
		HealthAt: d.varint(), RegisteredAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
	if d.more() {
		g.Delivery, g.Role, g.Secret = d.istr(), d.istr(), d.str()
	}
	return g
}

func (e *enc) worker(w *Worker) {
	e.str(w.ID)
	e.str(w.Gateway)
	e.strs(w.Capabilities)
	e.labels(w.Metadata)
	e.int(w.Capacity)
	e.str(w.Health)
	e.varint(w.HealthAt)
	e.varint(w.RegisteredAt)
	e.varint(w.UpdatedAt)
	e.uvarint(w.CreateIndex)
}

func (d *dec) worker() *Worker {
	return &Worker{ID: d.str(), Gateway: d.istr(), Capabilities: d.strs(), Metadata: d.labels(), Capacity: d.int(),
		Health: d.istr(), HealthAt: d.varint(), RegisteredAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
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

func (e *enc) job(j *Job, version int) {
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
	if version >= 3 {
		e.str(j.ToolName)
		e.varint(j.Timeout)
		e.str(j.ClonedFrom)
	}
	if version >= 4 {
		e.bool(j.Route != nil)
		if j.Route != nil {
			e.strs(j.Route.Capabilities)
			e.labels(j.Route.Labels)
			e.str(j.Route.Key)
		}
	}
	if version >= 5 {
		for i := range j.AttemptLog {
			e.varint(j.AttemptLog[i].RunningAt)
		}
	}
	if version >= 6 {
		e.varint(j.CancelRequestedAt)
		e.str(j.CancelReason)
		e.bytes(j.Progress)
		e.varint(j.ProgressAt)
		e.bytes(j.Checkpoint)
		e.varint(j.CheckpointAt)
		e.int(j.Priority)
		e.varint(j.NotBefore)
		e.varint(j.BackoffBase)
		e.varint(j.BackoffMax)
		e.str(j.ConcurrencyKey)
		e.int(j.ConcurrencyLimit)
		e.strs(j.DependsOn)
		e.int(j.DepsPending)
	}
	if version >= 7 {
		e.str(j.Requires)
		e.str(j.ClaimCaps)
		e.strs(j.NotFor)
	}
	if version >= 8 {
		e.bool(j.RunOnDepFailure)
	}
	// The optional tail: a routed task's delivery (from LevelDelivery on,
	// so only builds that read it meet it).
	if j.Route != nil && j.Route.hasDelivery() {
		e.varint(j.Route.dispatchedAt)
		e.varint(j.Route.acceptedAt)
		e.strs(j.Route.refused)
	}
}

func (d *dec) job(version int) *Job {
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
	if version >= 3 {
		j.ToolName = d.istr()
		j.Timeout = d.varint()
		j.ClonedFrom = d.str()
	}
	if version >= 4 && d.bool() {
		j.Route = &RouteSpec{Capabilities: d.strs(), Labels: d.labels(), Key: d.str()}
	}
	if version >= 5 {
		for i := range j.AttemptLog {
			j.AttemptLog[i].RunningAt = d.varint()
		}
	}
	if version >= 6 {
		j.CancelRequestedAt = d.varint()
		j.CancelReason = d.str()
		j.Progress = d.bytes()
		j.ProgressAt = d.varint()
		j.Checkpoint = d.bytes()
		j.CheckpointAt = d.varint()
		j.Priority = d.int()
		j.NotBefore = d.varint()
		j.BackoffBase = d.varint()
		j.BackoffMax = d.varint()
		j.ConcurrencyKey = d.istr()
		j.ConcurrencyLimit = d.int()
		j.DependsOn = d.strs()
		j.DepsPending = d.int()
	}
	if version >= 7 {
		j.Requires = d.istr()
		j.ClaimCaps = d.istr()
		j.NotFor = d.strs()
	}
	if version >= 8 {
		j.RunOnDepFailure = d.bool()
	}
	if j.Route != nil && d.more() {
		j.Route.dispatchedAt, j.Route.acceptedAt, j.Route.refused = d.varint(), d.varint(), d.strs()
	}
	*jp = j
	return jp
}

func (e *enc) session(s *Session) {
	e.str(s.ID)
	e.str(s.Name)
	e.str(s.Description)
	e.str(s.Status)
	e.varint(s.StartedAt)
	e.varint(s.EndedAt)
	e.varint(s.UpdatedAt)
	e.uvarint(s.CreateIndex)
}

func (d *dec) session() *Session {
	return &Session{ID: d.str(), Name: d.str(), Description: d.str(), Status: d.istr(),
		StartedAt: d.varint(), EndedAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
}

func (e *enc) stream(s *Stream) {
	e.str(s.ID)
	e.str(s.Name)
	e.str(s.Session)
	e.str(s.Instructions)
	e.str(s.Status)
	e.varint(s.CreatedAt)
	e.varint(s.EndedAt)
	e.varint(s.UpdatedAt)
	e.uvarint(s.CreateIndex)
}

func (d *dec) stream() *Stream {
	return &Stream{ID: d.str(), Name: d.str(), Session: d.str(), Instructions: d.str(), Status: d.istr(),
		CreatedAt: d.varint(), EndedAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
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
