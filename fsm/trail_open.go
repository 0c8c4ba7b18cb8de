package fsm

import (
	"encoding/hex"
	"slices"
	"sync"
	"unsafe"
)

// Reading a sealed trail (trail.go): opened whole for a reader or a change
// (unpackTrail), or one attempt and one event at a time into scratch
// values for a snapshot's record (sealedReader), which then allocates
// nothing.

// unpackTrail opens a sealed trail. It cannot fail on what packTrail
// wrote; anything else is a bug, and panics. Its strings but UUIDs are
// substrings of packed (which is never changed), so a trail opens in a
// few allocations: its two slices and its UUIDs' text.
func unpackTrail(packed string, base int64) ([]Attempt, []Event) {
	r := openSealed(packed, base, false)
	defer r.close()
	var attempts []Attempt
	var events []Event
	if r.nat > 0 {
		attempts = make([]Attempt, 0, r.nat)
	}
	if r.nev > 0 {
		events = make([]Event, 0, r.nev)
	}
	objs(&r.f, 1, &attempts)
	objs(&r.f, 2, &events)
	r.done()
	return attempts, events
}

// sealedReader reads a sealed trail's fields.
type sealedReader struct {
	p        packer
	f        fields
	nev, nat int
	// scratch (when set): a UUID's text is made in uuids and lives until
	// the next trail this reader opens; the caller keeps no string.
	scratch bool
	uuids   []byte
	a       Attempt // a scratch attempt and event (readers of one at a time)
	e       Event
}

var sealedReaders = sync.Pool{New: func() any { return &sealedReader{} }}

// openSealed returns a reader of packed, whose table it has read, at its
// first attempt.
func openSealed(packed string, base int64, scratch bool) *sealedReader {
	r := sealedReaders.Get().(*sealedReader)
	r.scratch, r.uuids = scratch, r.uuids[:0]
	d := dec{b: unsafe.Slice(unsafe.StringData(packed), len(packed))}
	r.nev, r.nat = d.count(1), d.count(1)
	n := d.count(1)
	r.p = packer{tab: slices.Grow(r.p.tab[:0], n)[:n], base: base}
	if scratch {
		r.uuids = slices.Grow(r.uuids, 36*n)
	}
	for i := range r.p.tab {
		switch d.byte1() {
		case packUUID:
			r.p.tab[i] = r.uuidText(d.raw(16))
		case packName:
			if s, ok := sealName(d.uvarint()); ok {
				r.p.tab[i] = s
			} else {
				d.fail("no such name")
			}
		case packLiteral:
			k := d.uvarint()
			at := len(packed) - len(d.b)
			if d.raw(k); d.err == nil {
				r.p.tab[i] = packed[at : at+int(k)]
			}
		default:
			d.fail("bad string kind")
		}
	}
	r.f = fields{d: d, pk: &r.p}
	r.f.next()
	return r
}

// uuidText is the text of a UUID's 16 bytes: a string of its own, or in
// the reader's scratch.
func (r *sealedReader) uuidText(b []byte) string {
	if !r.scratch {
		return uuidText(b)
	}
	at := len(r.uuids)
	r.uuids = appendUUIDText(r.uuids, b)
	if len(r.uuids) == at {
		return ""
	}
	return unsafe.String(&r.uuids[at], len(r.uuids)-at)
}

// attempt reads the next attempt into r.a; false after the last.
func (r *sealedReader) attempt() bool {
	r.a = Attempt{}
	return r.next(1, &r.a)
}

// event reads the next event into r.e (after the attempts); false after
// the last.
func (r *sealedReader) event() bool {
	r.e = Event{}
	return r.next(2, &r.e)
}

// next reads the next object of field n (which o must be empty for) into
// o; false after the last.
func (r *sealedReader) next(n int, o fielder) bool {
	if !r.f.at(n, kindBytes) {
		return false
	}
	r.f.readObj(o)
	return r.f.d.err == nil
}

// done checks that the whole trail was read back; a trail packTrail wrote
// always is, so anything else is a bug, and panics.
func (r *sealedReader) done() {
	r.f.finish()
	if err := r.f.d.err; err != nil {
		panic("fsm: a sealed trail does not read back: " + err.Error())
	}
}

// close returns r to the pool, holding no strings.
func (r *sealedReader) close() {
	clear(r.p.tab)
	r.f, r.a, r.e = fields{}, Attempt{}, Event{}
	sealedReaders.Put(r)
}

// writeSealed writes a sealed trail's attempts as fields na and its events
// as fields ne of f (writing), as objs would write them open, without
// opening it; between the two, beforeEvents (when set) writes what goes
// first among the events.
func writeSealed(f *fields, packed string, base int64, na, ne int, beforeEvents func()) {
	r := openSealed(packed, base, true)
	defer r.close()
	for r.attempt() {
		f.obj(na, &r.a)
	}
	if beforeEvents != nil {
		beforeEvents()
	}
	for r.event() {
		f.obj(ne, &r.e)
	}
	r.done()
}

// uuidText is the canonical text of a UUID's 16 bytes.
func uuidText(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	var t [36]byte
	return string(appendUUIDText(t[:0], b))
}

// appendUUIDText appends the canonical text of a UUID's 16 bytes to t
// (nothing when b is not 16 bytes).
func appendUUIDText(t []byte, b []byte) []byte {
	if len(b) != 16 {
		return t
	}
	at := len(t)
	t = append(t, make([]byte, 36)...)
	u := t[at:]
	hex.Encode(u[0:8], b[0:4])
	u[8] = '-'
	hex.Encode(u[9:13], b[4:6])
	u[13] = '-'
	hex.Encode(u[14:18], b[6:8])
	u[18] = '-'
	hex.Encode(u[19:23], b[8:10])
	u[23] = '-'
	hex.Encode(u[24:36], b[10:16])
	return t
}
