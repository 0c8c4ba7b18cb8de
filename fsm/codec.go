package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The body of a log entry (after its type byte) and of a version 2 to 9
// snapshot record is a hand-written binary encoding: msgpack through
// reflection cost more than the rest of an apply put together.
//
// A body starts with a format byte. bodyV2 is the tagged encoding of
// fields.go, written from LevelTagged on. bodyV1 is the positional one
// before it, still read (old logs replay) and written below LevelTagged (so
// the builds of a rolling upgrade read it): fields in declaration order, integers as (zig-zag) varints, strings as a uvarint
// length and bytes, byte slices as uvarint(length+1) and bytes with 0 for nil
// (so nil and empty survive a round trip), bools as one byte, slices as a
// uvarint count and their elements. A body whose first byte is a msgpack map
// marker is a legacy msgpack body and is still decoded, so a log written
// before this encoding replays.
const bodyV1 byte = 0x01

// errCorrupt is wrapped by every decode failure.
var errCorrupt = errors.New("corrupt body")

// enc appends the binary encoding to a byte slice.
type enc struct{ b []byte }

func (e *enc) byte1(v byte)     { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) int(v int)        { e.varint(int64(v)) }
func (e *enc) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *enc) bytes(p []byte) {
	if p == nil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

func (e *enc) bool(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}

func (e *enc) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *enc) actor(a Actor) { e.str(a.Role); e.str(a.WorkerID) }

func (e *enc) ref(r LeaseRef) { e.str(r.JobID); e.str(r.AttemptID); e.str(r.Token) }

func (e *enc) jobError(je *JobError) {
	e.str(je.Code)
	e.str(je.Message)
	e.str(je.Stack)
	e.bool(je.Retryable)
}

// dec reads the binary encoding. The first failure sticks: every later read
// returns a zero value, and err says what went wrong.
type dec struct {
	b   []byte
	err error
	in  *interner // optional: shares repeated strings
	// optional: a snapshot decoder's own buffers, reused from record to
	// record (snapshot_decode.go)
	scratch *decodeScratch
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
	d.b = nil
}

func (d *dec) byte1() byte {
	if len(d.b) == 0 {
		d.fail("short")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int {
	v := d.varint()
	if v < math.MinInt || v > math.MaxInt {
		d.fail("int overflow")
		return 0
	}
	return int(v)
}

// more reports whether bytes are left: a body's optional tail (fields
// added at its end, written only when set) is read only when there is one.
func (d *dec) more() bool { return d.err == nil && len(d.b) > 0 }

// raw returns the next n bytes, aliased.
func (d *dec) raw(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("length past end")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) str() string {
	p := d.raw(d.uvarint())
	if len(p) == 0 {
		return ""
	}
	return string(p)
}

// istr reads a string that is likely to repeat (stream, role, target) and
// shares one copy of it.
func (d *dec) istr() string {
	p := d.raw(d.uvarint())
	if len(p) == 0 {
		return ""
	}
	if d.in != nil {
		return d.in.bytes(p)
	}
	return string(p)
}

func (d *dec) bytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	p := d.raw(n - 1)
	if d.err != nil {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

func (d *dec) bool() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

// count reads a slice length, refusing one that cannot fit in what is left
// (each element takes at least min bytes), so garbage cannot make a huge
// allocation.
func (d *dec) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count past end")
		return 0
	}
	return int(n)
}

func (d *dec) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.istr()
	}
	return out
}

func (d *dec) actor() Actor { return Actor{Role: d.istr(), WorkerID: d.istr()} }

func (d *dec) ref() LeaseRef { return LeaseRef{JobID: d.str(), AttemptID: d.str(), Token: d.str()} }

func (d *dec) jobError() JobError {
	return JobError{Code: d.istr(), Message: d.str(), Stack: d.str(), Retryable: d.bool()}
}

// done reports the decode's error, or an error if bytes are left over.
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(d.b))
	}
	return d.err
}

// encodeCommand appends the body of cmd, which must be the command struct
// (or pointer to it) of type t: tagged from LevelTagged on, else the
// positional body the builds before it read, under the type of the form
// that carries cmd's fields (so the type written may differ from t). ok is
// false for a value that is no command of the table.
func encodeCommand(b []byte, level int, t CommandType, cmd interface{}) (_ []byte, _ CommandType, ok bool, err error) {
	c, ok, err := asCommand(t, cmd)
	if !ok || err != nil {
		return b, t, ok, err
	}
	if !t.current() {
		return b, t, true, fmt.Errorf("encode %s: an old form, written only by the command it is a form of", t)
	}
	if level >= LevelTagged {
		b = append(b, bodyV2)
		if cc, ok := c.(*CreateCommand); ok {
			// The hottest command, through its concrete method: nothing
			// escapes, nothing is allocated but the entry.
			f := fields{w: true, e: enc{b: b}}
			cc.fields(&f)
			return f.e.b, t, true, nil
		}
		return writeFields(b, c), t, true, nil
	}
	e := enc{b: append(b, bodyV1)}
	switch v := c.(type) {
	case formEncoder:
		t = v.encodeV1(&e)
	case v1Codec:
		v.encode(&e)
	default:
		return b, t, true, fmt.Errorf("encode %s: no positional form: it needs level %d", t, LevelTagged)
	}
	return e.b, t, true, nil
}

// DecodeCommand decodes the log entry data (type byte then body) into a
// pointer to its command struct. An old form decodes into the command it is
// a form of, whose type is returned. It returns an error, never panics, for
// any input; Apply panics on that error because state must not diverge.
func DecodeCommand(data []byte) (CommandType, interface{}, error) {
	if len(data) == 0 {
		return 0, nil, fmt.Errorf("%w: empty entry", errCorrupt)
	}
	t := CommandType(data[0])
	v, err := decodeBody(t, data[1:], nil)
	if row := commandTable[t]; err == nil && row.of != 0 {
		t = row.of
	}
	return t, v, err
}

// errUnknownCommand is returned by decodeBody for a type it does not know.
var errUnknownCommand = errors.New("unknown command type")

func decodeBody(t CommandType, body []byte, in *interner) (command, error) {
	return decodeBodyWith(nil, t, body, in)
}

// decodeBodyWith is decodeBody reading tagged fields with scratch (nil: a
// new one), which the apply goroutine reuses from entry to entry.
func decodeBodyWith(scratch *fields, t CommandType, body []byte, in *interner) (command, error) {
	row := commandTable[t]
	if row == nil {
		return nil, fmt.Errorf("%w %d", errUnknownCommand, uint8(t))
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty %s body", errCorrupt, t)
	}
	switch body[0] {
	case bodyV2:
		if !t.current() {
			return nil, fmt.Errorf("%w: %s is an old form, never tagged", errCorrupt, t)
		}
		cmd := row.new()
		if scratch == nil {
			scratch = new(fields)
		}
		*scratch = fields{d: dec{b: body[1:], in: in}}
		scratch.next()
		cmd.fields(scratch)
		scratch.finish()
		if err := scratch.d.err; err != nil {
			return nil, fmt.Errorf("decode %s: %w", t, err)
		}
		return cmd, nil
	case bodyV1:
		d := dec{b: body[1:], in: in}
		var cmd command
		if row.decodeV1 != nil {
			cmd = row.decodeV1(&d, t)
		} else if v1, ok := row.new().(v1Codec); ok {
			v1.decode(&d)
			cmd = v1.(command)
		} else {
			return nil, fmt.Errorf("%w: %s has no positional form", errCorrupt, t)
		}
		if err := d.done(); err != nil {
			return nil, fmt.Errorf("decode %s: %w", t, err)
		}
		return cmd, nil
	}
	if !isMsgpackMap(body[0]) {
		return nil, fmt.Errorf("%w: unknown body format %#x", errCorrupt, body[0])
	}
	cmd := row.new()
	if err := decodeMsgpack(body, cmd); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	if fs, ok := cmd.(formSetter); ok {
		fs.setForm(t)
	}
	return cmd, nil
}

func (d *dec) create(c *CreateCommand) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Stream = d.istr()
	c.Target = d.istr()
	c.Payload = d.bytes()
	c.MaxAttempts = d.int()
	c.LeaseSeconds = d.varint()
	c.TaskClass = d.istr()
	c.IdempotencyKey = d.str()
	c.Actor = d.actor()
}

// decodeCreate is decodeBody for the hottest command, into a struct the
// caller owns (so it can live on the stack).
func decodeCreate(c *CreateCommand, body []byte, in *interner) error {
	if len(body) == 0 || body[0] != bodyV2 {
		v, err := decodeBody(CmdCreate, body, in)
		if err != nil {
			return err
		}
		*c = *v.(*CreateCommand)
		return nil
	}
	f := fields{d: dec{b: body[1:], in: in}}
	f.next()
	c.fields(&f)
	f.finish()
	if f.d.err != nil {
		return fmt.Errorf("decode %s: %w", CmdCreate, f.d.err)
	}
	return nil
}

// isMsgpackMap reports whether b starts a msgpack map, as every legacy
// (msgpack) command body does.
func isMsgpackMap(b byte) bool { return b&0xf0 == 0x80 || b == 0xde || b == 0xdf }
