package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The tagged encoding: every log entry written from LevelTagged on, and
// every record of a version 10 snapshot, is a body format byte (bodyV2)
// and a sequence of fields. A field is a key, uvarint(number<<3 | kind),
// and a value: kind 0 a varint (integers zig-zag, bools 0 or 1), kind 2 a
// uvarint length and that many bytes (strings, byte slices, nested
// objects). Fields come in ascending number; a field at its zero value is
// left out; a list is its field repeated, once per element.
//
// A reader skips every field whose number it does not know, so an object
// grows by a field without a new command type, a new snapshot version or
// a new format byte. What a field means to the state machine still needs
// every replica to know it: a build that adds a field that changes how an
// entry applies proposes it only from a cluster level every server has
// (level.go), and until then writes entries without it.
//
// One method per object, fields(f *fields), lists its fields once, and
// serves both directions: writing, it appends each non-zero field; reading,
// it walks the fields present in step with the list, filling the ones it
// names and skipping the rest. So adding a field is one line in that
// method, with the number after the last one used (numbers are never
// reused).
const bodyV2 byte = 0x02

// Field kinds, the low 3 bits of a key.
const (
	kindVarint = 0
	kindBytes  = 2
)

// fielder is an object with a field list.
type fielder interface{ fields(f *fields) }

// fields writes (w) or reads an object's fields.
type fields struct {
	w bool
	e enc // writing: the output
	d dec // reading: the input after the pending key
	// Writing: the number of the last field written (a field list must
	// ascend). Reading: the pending key, 0 once the input is used up.
	last int
	key  uint64
	// pk, when set, packs a sealed trail (trail.go): strings are
	// references to its table, words their codes, times relative to its
	// base.
	pk *packer
}

// writeFields appends o's tagged fields to b.
func writeFields(b []byte, o fielder) []byte {
	f := fields{w: true, e: enc{b: b}}
	o.fields(&f)
	return f.e.b
}

// readFields fills o from the tagged fields in b; in, when set, shares
// repeated strings. f, when set, is the reader to use (a decoder's own,
// reused: o.fields takes it through an interface, so a new one is
// allocated).
func readFields(b []byte, o fielder, in *interner, f *fields) error {
	if f == nil {
		f = new(fields)
	}
	*f = fields{d: dec{b: b, in: in}}
	f.next()
	o.fields(f)
	f.finish()
	return f.d.err
}

// next reads the next key, or notes the end of the input.
func (f *fields) next() {
	if len(f.d.b) == 0 || f.d.err != nil {
		f.key = 0
		return
	}
	f.key = f.d.uvarint()
	if f.key>>3 == 0 || f.d.err != nil {
		f.d.fail("bad field key")
		f.key = 0
	}
}

// skip passes over the pending field's value.
func (f *fields) skip() {
	switch f.key & 7 {
	case kindVarint:
		f.d.uvarint()
	case kindBytes:
		f.d.raw(f.d.uvarint())
	default:
		f.d.fail("unknown field kind")
	}
	f.next()
}

// finish skips the fields after the last one the list names.
func (f *fields) finish() {
	for f.key != 0 {
		f.skip()
	}
}

// at reports whether the pending field is number n, skipping unknown
// fields before it. A field of the wrong kind is corrupt.
func (f *fields) at(n int, kind uint64) bool {
	for f.key != 0 && f.key>>3 < uint64(n) {
		f.skip()
	}
	if f.key>>3 != uint64(n) || f.key == 0 {
		return false
	}
	if f.key&7 != kind {
		f.d.fail(fmt.Sprintf("field %d of the wrong kind", n))
		f.key = 0
		return false
	}
	return true
}

// put writes field n's key.
func (f *fields) put(n int, kind uint64) {
	if n < f.last || n <= 0 {
		panic(fmt.Sprintf("fsm: field %d listed after field %d", n, f.last))
	}
	f.last = n
	f.e.uvarint(uint64(n)<<3 | kind)
}

func (f *fields) i64(n int, p *int64) {
	var base int64
	if f.pk != nil {
		base = f.pk.base
	}
	if f.w {
		if *p != 0 {
			f.put(n, kindVarint)
			f.e.varint(*p - base)
		}
		return
	}
	if f.at(n, kindVarint) {
		*p = f.d.varint() + base
		f.next()
	}
}

func (f *fields) u64(n int, p *uint64) {
	if f.w {
		if *p != 0 {
			f.put(n, kindVarint)
			f.e.uvarint(*p)
		}
		return
	}
	if f.at(n, kindVarint) {
		*p = f.d.uvarint()
		f.next()
	}
}

func (f *fields) int(n int, p *int) {
	if f.w {
		if *p != 0 {
			f.put(n, kindVarint)
			f.e.int(*p)
		}
		return
	}
	if f.at(n, kindVarint) {
		*p = f.d.int()
		f.next()
	}
}

func (f *fields) bool(n int, p *bool) {
	if f.w {
		if *p {
			f.put(n, kindVarint)
			f.e.byte1(1)
		}
		return
	}
	if f.at(n, kindVarint) {
		switch f.d.uvarint() {
		case 0:
			*p = false
		case 1:
			*p = true
		default:
			f.d.fail("bad bool")
		}
		f.next()
	}
}

// str is a string field; istr one likely to repeat (a stream, a role),
// which a reader with an interner shares.
func (f *fields) str(n int, p *string)  { f.string(n, p, false) }
func (f *fields) istr(n int, p *string) { f.string(n, p, true) }

func (f *fields) string(n int, p *string, intern bool) {
	if f.pk != nil {
		f.packedString(n, p, intern)
		return
	}
	if f.w {
		if *p != "" {
			f.put(n, kindBytes)
			f.e.str(*p)
		}
		return
	}
	if f.at(n, kindBytes) {
		if intern {
			*p = f.d.istr()
		} else {
			*p = f.d.str()
		}
		f.next()
	}
}

// bytes is a byte slice field: nil is left out, empty is kept empty.
func (f *fields) bytes(n int, p *[]byte) {
	if f.w {
		if *p != nil {
			f.put(n, kindBytes)
			f.e.uvarint(uint64(len(*p)))
			f.e.b = append(f.e.b, *p...)
		}
		return
	}
	if f.at(n, kindBytes) {
		raw := f.d.raw(f.d.uvarint())
		if f.d.err == nil {
			*p = append(make([]byte, 0, len(raw)), raw...)
		}
		f.next()
	}
}

// strs is a list of strings (interned when read): the field once per
// element. A list of none is left out and reads back nil.
func (f *fields) strs(n int, p *[]string) {
	if f.w {
		for _, s := range *p {
			f.put(n, kindBytes)
			f.e.str(s)
		}
		return
	}
	for f.at(n, kindBytes) {
		*p = append(*p, f.d.istr())
		f.next()
	}
}

// labels is a string map: the field once per entry, in key order, each a
// nested key (1) and value (2).
func (f *fields) labels(n int, p *map[string]string) {
	if f.w {
		keys := make([]string, 0, len(*p))
		for k := range *p {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv := label{k, (*p)[k]}
			f.obj(n, &kv)
		}
		return
	}
	for f.at(n, kindBytes) {
		var kv label
		f.readObj(&kv)
		if f.d.err != nil {
			return
		}
		if *p == nil {
			*p = map[string]string{}
		}
		(*p)[kv.k] = kv.v
	}
}

type label struct{ k, v string }

func (l *label) fields(f *fields) { f.istr(1, &l.k); f.str(2, &l.v) }

// Nested objects are written and read by the same fields value as the
// object around them (so nesting costs no allocation): open writes the
// key and keeps a byte for the length, which close fills in (moving the
// object if it takes more); enter points the reader at the nested bytes,
// and leave moves it back past them.
func (f *fields) open(n int) (at, last int) {
	f.put(n, kindBytes)
	at, last = len(f.e.b), f.last
	f.e.b = append(f.e.b, 0)
	f.last = 0
	return at, last
}

func (f *fields) close(at, last int) {
	f.last = last
	size := len(f.e.b) - at - 1
	if size < 0x80 {
		f.e.b[at] = byte(size)
		return
	}
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(size))
	f.e.b = append(f.e.b, lb[:k-1]...)
	copy(f.e.b[at+k:], f.e.b[at+1:at+1+size])
	copy(f.e.b[at:], lb[:k])
}

func (f *fields) enter(n int) (rest []byte, ok bool) {
	if !f.at(n, kindBytes) {
		return nil, false
	}
	raw := f.d.raw(f.d.uvarint())
	if f.d.err != nil {
		f.key = 0
		return nil, false
	}
	rest, f.d.b = f.d.b, raw
	f.next()
	return rest, true
}

func (f *fields) leave(rest []byte) {
	f.finish()
	if f.d.err != nil {
		f.key = 0
		return
	}
	f.d.b = rest
	f.next()
}

// obj is a nested object, written whole even when all its fields are zero
// (for list elements and pointers, whose presence says something).
func (f *fields) obj(n int, o fielder) {
	if f.w {
		at, last := f.open(n)
		o.fields(f)
		f.close(at, last)
		return
	}
	if rest, ok := f.enter(n); ok {
		o.fields(f)
		f.leave(rest)
	}
}

// readObj reads the pending field (known to be of kind bytes) as a nested
// object into o.
func (f *fields) readObj(o fielder) {
	if rest, ok := f.enter(int(f.key >> 3)); ok {
		o.fields(f)
		f.leave(rest)
	}
}

// objPtr is an optional nested object: nil is left out.
func objPtr[T any, P interface {
	*T
	fielder
}](f *fields, n int, p **T) {
	if f.w {
		if *p != nil {
			f.obj(n, P(*p))
		}
		return
	}
	if f.at(n, kindBytes) {
		v := new(T)
		f.readObj(P(v))
		*p = v
	}
}

// objs is a list of nested objects, the field once per element.
func objs[T any, P interface {
	*T
	fielder
}](f *fields, n int, p *[]T) {
	if f.w {
		for i := range *p {
			f.obj(n, P(&(*p)[i]))
		}
		return
	}
	for f.at(n, kindBytes) {
		var zero T
		*p = append(*p, zero)
		f.readObj(P(&(*p)[len(*p)-1]))
		if f.d.err != nil {
			*p = (*p)[:len(*p)-1]
			return
		}
	}
}

// The fields of the small objects commands share.

func (a *Actor) fields(f *fields) { f.istr(1, &a.Role); f.istr(2, &a.WorkerID); f.istr(3, &a.Token) }

func (r *LeaseRef) fields(f *fields) { f.str(1, &r.JobID); f.str(2, &r.AttemptID); f.str(3, &r.Token) }

func (je *JobError) fields(f *fields) {
	f.istr(1, &je.Code)
	f.str(2, &je.Message)
	f.str(3, &je.Stack)
	f.bool(4, &je.Retryable)
}

// actor, ref and jobError are nested values, left out when zero. They call
// the value's fields method directly (not through the fielder interface),
// so a command decoded on the stack stays there.
func (f *fields) actor(n int, a *Actor) {
	if f.w {
		if *a != (Actor{}) {
			at, last := f.open(n)
			a.fields(f)
			f.close(at, last)
		}
		return
	}
	if rest, ok := f.enter(n); ok {
		a.fields(f)
		f.leave(rest)
	}
}

func (f *fields) ref(n int, r *LeaseRef) {
	if f.w {
		if *r != (LeaseRef{}) {
			at, last := f.open(n)
			r.fields(f)
			f.close(at, last)
		}
		return
	}
	if rest, ok := f.enter(n); ok {
		r.fields(f)
		f.leave(rest)
	}
}

func (f *fields) jobError(n int, je *JobError) {
	if f.w {
		if *je != (JobError{}) {
			at, last := f.open(n)
			je.fields(f)
			f.close(at, last)
		}
		return
	}
	if rest, ok := f.enter(n); ok {
		je.fields(f)
		f.leave(rest)
	}
}

// u8 is a small enumeration (a step, an operation).
func (f *fields) u8(n int, p *uint8) {
	v := uint64(*p)
	f.u64(n, &v)
	if !f.w {
		if v > 0xff {
			f.d.fail(fmt.Sprintf("field %d out of range", n))
		}
		*p = uint8(v)
	}
}
