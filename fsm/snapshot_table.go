package fsm

import (
	"bufio"
	"encoding/binary"
	"fmt"
)

// The snapshot record table. Every kind of object a snapshot holds is one
// row: its record type byte, its count's name in the trailer, the version
// that introduced it, how a view's objects of the kind are written, and how
// one record is decoded and put back. Writing walks the rows in kind order
// and the trailer counts what each wrote; restore reads whatever rows the
// stream holds and checks the trailer's counts. A new kind of state is so
// one row here (and the version that carries it, in snapVersions), not a
// record constant, a write section, two switches and a trailer field.

// snapKind is one row of the table.
type snapKind struct {
	kind byte
	// name is the kind's key in the trailer, a msgpack map of name to
	// count (snapTrailer): part of the format, never renamed. The kinds of
	// version 1 are always counted, the others only when present, as in
	// the struct earlier builds wrote and read.
	name string
	// since is the version that introduced the kind: a snapshot of an
	// older version holds none (a state written at one writes none, and
	// restore refuses one).
	since int
	// once: a snapshot holds at most one record of the kind.
	once bool
	// write emits the kind's records of a published view, of a snapshot
	// of the given version, through r.
	write func(t *tables, version int, r *recordWriter)
	// read decodes one record body. It runs on the decoding goroutine,
	// ahead of the restore: it reads the record alone, never the state.
	read func(d *dec, version int) any
	// restore stores one decoded record in the state being restored,
	// refusing what a consistent snapshot cannot hold (a record without
	// its key, a key twice).
	restore func(w *writer, obj any) error
	// msgpack returns the object a version 1 snapshot held as a msgpack
	// record (kinds of version 1 only).
	msgpack func() any
	// bulk: the kind's records are jobs, collected as they are read and
	// stored all at once (snapshot_bulk.go); restore stores one when they
	// cannot be.
	bulk bool
}

// snapKinds is the table, by record type byte.
var snapKinds [256]*snapKind

// registerSnap adds a row. A kind is registered once, and the header's and
// trailer's type bytes are no kind.
func registerSnap(k *snapKind) {
	if k.kind == snapHeader || k.kind == snapEnd || snapKinds[k.kind] != nil {
		panic(fmt.Sprintf("fsm: snapshot record type %d (%s) registered twice or reserved", k.kind, k.name))
	}
	if k.since < 1 || k.since > snapshotVersion {
		panic(fmt.Sprintf("fsm: snapshot record %s introduced by version %d, this build writes 1 to %d", k.name, k.since, snapshotVersion))
	}
	snapKinds[k.kind] = k
}

// snapRow makes the row of a kind whose records decode to a *T.
func snapRow[T any](kind byte, name string, since int,
	write func(t *tables, version int, r *recordWriter),
	read func(d *dec, version int) *T,
	restore func(w *writer, v *T) error,
) *snapKind {
	k := &snapKind{kind: kind, name: name, since: since, write: write,
		read: func(d *dec, version int) any {
			if version >= snapTagged {
				return readTagged[T](d)
			}
			return read(d, version)
		},
		restore: func(w *writer, obj any) error { return restore(w, obj.(*T)) },
	}
	if since == 1 {
		k.msgpack = func() any { return new(T) }
	}
	return k
}

// once marks k as a kind a snapshot holds at most one record of.
func once(k *snapKind) *snapKind {
	k.once = true
	return k
}

// bulk marks k as the kind of the jobs, stored all at once.
func bulk(k *snapKind) *snapKind {
	k.bulk = true
	return k
}

// catalogRow makes the row of a catalog (catalog.go): every object in key
// order, each put back under its key, which must be set and unique.
func catalogRow[V any](kind byte, name string, since, tree int, cat func(t *tables) *catalog[V],
	key func(v *V) string, encode func(e *enc, v *V), decode func(d *dec) *V,
) *snapKind {
	return snapRow(kind, name, since,
		func(t *tables, _ int, r *recordWriter) {
			cat(t).ascend(func(v *V) bool { return r.add(any(v).(fielder), func(e *enc) { encode(e, v) }) })
		},
		func(d *dec, _ int) *V { return decode(d) },
		func(w *writer, v *V) error {
			k := key(v)
			if k == "" || cat(w.t).get(k) != nil {
				return fmt.Errorf("restore: %s record %q without its key or twice", name, k)
			}
			putIn(w, tree, cat(w.t), k, v)
			return nil
		})
}

// recordWriter writes the records of one kind: a row's write encodes an
// object into e, then put writes it as a record.
type recordWriter struct {
	e    enc
	bw   *bufio.Writer
	kind byte
	// version is the snapshot's: from snapTagged on every record is
	// written in the tagged encoding (fields.go).
	version int
	f       fields
	n       int // records of the kind written
	err     error
	hdr     [1 + binary.MaxVarintLen64]byte
}

// add writes o as one record: its field list from snapTagged on, else
// what legacy writes (the record of an earlier version).
func (r *recordWriter) add(o fielder, legacy func(e *enc)) bool {
	if r.version >= snapTagged {
		// The writer's own fields value: nothing allocated per record.
		r.f.w, r.f.e.b, r.f.last = true, r.e.b, 0
		o.fields(&r.f)
		r.e.b = r.f.e.b
	} else {
		legacy(&r.e)
	}
	return r.put()
}

// readTagged decodes a record of version snapTagged or later: the fields
// of a *T, whatever its kind.
func readTagged[T any](d *dec) any {
	if _, job := any((*T)(nil)).(*Job); job && d.scratch != nil {
		return d.taggedJob()
	}
	v := new(T)
	o, ok := any(v).(fielder)
	if !ok {
		d.fail("a record kind without a field list")
		return v
	}
	var f *fields
	if d.scratch != nil {
		f = &d.scratch.f
	}
	if err := readFields(d.b, o, d.in, f); err != nil {
		d.fail(err.Error())
	}
	d.b = nil
	if j, ok := any(v).(*Job); ok {
		j.adoptHistory(j.events())
		j.sealIfFinished()
	}
	return v
}

// put writes what e holds as one record (its type byte, a uvarint length
// and the body), empties e, and reports whether writing may go on.
func (r *recordWriter) put() bool {
	if r.err != nil {
		return false
	}
	r.hdr[0] = r.kind
	n := binary.PutUvarint(r.hdr[1:], uint64(len(r.e.b)))
	if _, r.err = r.bw.Write(r.hdr[:1+n]); r.err == nil {
		_, r.err = r.bw.Write(r.e.b)
	}
	r.e.b = r.e.b[:0]
	r.n++
	return r.err == nil
}

func init() {
	registerSnap(bulk(snapRow(snapJob, "Jobs", 1,
		func(t *tables, version int, r *recordWriter) {
			t.byID.Ascend(func(it idItem) bool { return r.add(it.j, func(e *enc) { e.job(it.j, version) }) })
		},
		(*dec).job,
		func(w *writer, j *Job) error {
			if j.ID == "" {
				return fmt.Errorf("restore: job record without an id")
			}
			if w.t.job(j.ID) != nil {
				return fmt.Errorf("restore: job %s appears twice", j.ID)
			}
			w.putJob(nil, j)
			return nil
		})))
	// A version 1 snapshot's job is msgpack, its fields by name: its
	// history is a field of its own there (history.go).
	snapKinds[snapJob].msgpack = func() any { return new(jobV1) }
	registerSnap(snapRow(snapBlob, "Blobs", 1,
		func(t *tables, _ int, r *recordWriter) {
			t.blobs.Ascend(func(it blobItem) bool { return r.add(it.b, func(e *enc) { e.blob(it.b) }) })
		},
		func(d *dec, _ int) *Blob { return d.blob() },
		func(w *writer, b *Blob) error {
			if b.ID == "" {
				return fmt.Errorf("restore: blob record without an id")
			}
			w.putBlob(b)
			return nil
		}))
	registerSnap(snapRow(snapChunk, "Chunks", 1,
		func(t *tables, _ int, r *recordWriter) {
			t.chunks.Ascend(func(it chunkItem) bool { return r.add(it.c, func(e *enc) { e.chunk(it.c) }) })
		},
		func(d *dec, _ int) *BlobChunk { return d.chunk() },
		func(w *writer, c *BlobChunk) error { w.putChunk(c); return nil }))

	registerSnap(catalogRow(snapSession, "Sessions", 3, tSessions, func(t *tables) *catalog[Session] { return t.sessions },
		func(s *Session) string { return s.Name }, (*enc).session, (*dec).session))
	registerSnap(catalogRow(snapStream, "Streams", 3, tStreams, func(t *tables) *catalog[Stream] { return t.streams },
		func(s *Stream) string { return s.Name }, (*enc).stream, (*dec).stream))
	registerSnap(once(snapRow(snapRegistry, "Registry", 3,
		func(t *tables, _ int, r *recordWriter) {
			if t.registry != nil {
				r.add(t.registry, func(e *enc) { e.registry(t.registry) })
			}
		},
		func(d *dec, _ int) *Registry { return d.registry() },
		func(w *writer, reg *Registry) error { w.putRegistry(reg); return nil })))
	registerSnap(catalogRow(snapGateway, "Gateways", 4, tGateways, func(t *tables) *catalog[Gateway] { return t.gateways },
		func(g *Gateway) string { return g.ID }, (*enc).gateway, (*dec).gateway))
	registerSnap(catalogRow(snapWorker, "Workers", 4, tWorkers, func(t *tables) *catalog[Worker] { return t.workers },
		func(w *Worker) string { return w.ID }, (*enc).worker, (*dec).worker))

	// The feed's head comes before its events: each event is checked
	// against it as it is restored, and the feed against it at the end
	// (snapVersions).
	registerSnap(once(snapRow(snapFeedHead, "FeedHead", 5,
		func(t *tables, _ int, r *recordWriter) {
			r.add(&feedHead{seq: t.feed.latest}, func(e *enc) { e.uvarint(t.feed.latest) })
		},
		func(d *dec, _ int) *feedHead { return &feedHead{seq: d.uvarint()} },
		func(w *writer, h *feedHead) error { w.feedHead = h.seq; return nil })))
	registerSnap(snapRow(snapFeed, "Feed", 5,
		func(t *tables, _ int, r *recordWriter) {
			l := &t.feed
			ev := new(FeedEvent) // each event in turn, as it was fed
			for seq := l.oldest(); seq != 0 && seq <= l.latest; seq++ {
				if l.get(seq).expand(seq, ev); !r.add(ev, func(e *enc) { e.feedEvent(ev) }) {
					return
				}
			}
		},
		func(d *dec, _ int) *FeedEvent { return d.feedEvent() },
		func(w *writer, ev *FeedEvent) error { return w.t.feed.restore(ev, w.feedHead) }))

	registerSnap(snapRow(snapPause, "Paused", 6,
		func(t *tables, _ int, r *recordWriter) {
			for _, p := range t.pausedList() {
				if !r.add(p, func(e *enc) { e.pause(p) }) {
					return
				}
			}
		},
		func(d *dec, _ int) *StreamPause { return d.pause() },
		func(w *writer, p *StreamPause) error {
			if p.Stream == "" || w.t.isPaused(p.Stream) {
				return fmt.Errorf("restore: stream pause record %q without a stream or twice", p.Stream)
			}
			w.setPause(p.Stream, p)
			return nil
		}))
	registerSnap(snapRow(snapCaps, "Caps", 7,
		func(t *tables, _ int, r *recordWriter) {
			for _, c := range t.capsSeenList() {
				if !r.add(&c, func(e *enc) { e.str(c.Key); e.varint(c.At) }) {
					return
				}
			}
		},
		func(d *dec, _ int) *CapsSeen { return &CapsSeen{Key: d.str(), At: d.varint()} },
		func(w *writer, c *CapsSeen) error {
			if _, dup := w.t.capsSeen[c.Key]; c.Key == "" || dup {
				return fmt.Errorf("restore: capability set record %q empty or twice", c.Key)
			}
			if w.t.capsSeen == nil {
				w.t.capsSeen = map[string]int64{}
			}
			w.t.capsSeen[c.Key] = c.At
			return nil
		}))
	registerSnap(snapRow(snapDefaults, "Defaults", 8,
		func(t *tables, _ int, r *recordWriter) {
			for _, d := range t.defaultsList() {
				if !r.add(d, func(e *enc) { e.defaults(d) }) {
					return
				}
			}
		},
		func(d *dec, _ int) *StreamDefaults { return d.defaults() },
		func(w *writer, d *StreamDefaults) error {
			if d.Stream == "" || w.t.defaults[d.Stream] != nil {
				return fmt.Errorf("restore: stream defaults record %q without a stream or twice", d.Stream)
			}
			w.setDefaults(d.Stream, d)
			return nil
		}))

	registerSnap(once(snapRow(snapLevel, "Level", 9,
		func(t *tables, _ int, r *recordWriter) {
			r.add(&levelRecord{level: t.level}, func(e *enc) { e.int(t.level) })
		},
		func(d *dec, _ int) *levelRecord { return &levelRecord{level: d.int()} },
		func(w *writer, l *levelRecord) error {
			if l.level < 1 || l.level > LatestLevel {
				return fmt.Errorf("restore: level record %d not one this build applies (1 to %d)", l.level, LatestLevel)
			}
			w.t.level = l.level
			return nil
		})))
	registerSnap(snapRow(snapWorkerID, "WorkerIDs", 9,
		func(t *tables, _ int, r *recordWriter) {
			t.workerIDs.Ascend(func(it bindingItem) bool { return r.add(it.b, func(e *enc) { e.binding(it.b) }) })
		},
		func(d *dec, _ int) *WorkerBinding { return d.binding() },
		func(w *writer, b *WorkerBinding) error {
			if b.ID == "" || b.Role == "" || w.t.binding(b.ID) != nil {
				return fmt.Errorf("restore: worker id record %q without an id or role, or twice", b.ID)
			}
			w.putBinding(b)
			return nil
		}))
	// Named tokens (tokens.go): a version 11 kind, in the tagged encoding
	// only; each goes back under its name and its hash.
	registerSnap(snapRow(snapToken, "Tokens", 11,
		func(t *tables, _ int, r *recordWriter) {
			t.tokens.ascend(func(tk *Token) bool { return r.add(tk, nil) })
		},
		func(d *dec, _ int) *Token { return readTagged[Token](d).(*Token) },
		func(w *writer, tk *Token) error {
			if tk.Name == "" || tk.Hash == "" || w.t.tokens.get(tk.Name) != nil || w.t.tokenHashes.get(tk.Hash) != nil {
				return fmt.Errorf("restore: token record %q without its name or hash, or twice", tk.Name)
			}
			w.putToken(tk)
			return nil
		}))
}
