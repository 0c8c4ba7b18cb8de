package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/spine-queue/spine/internal/gcpace"
	"io"
)

// Snapshot reading and restore: the record stream of every snapshot version
// is decoded, each record by its kind's row of the record table
// (snapshot_table.go), and put back into a fresh set of tables; the
// trailer's counts are checked against what was read.

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
	rs := &restoring{w: w}
	switch {
	case h.Version == 1:
		err = readRecordsV1(br, rs)
	case h.Version >= 2 && h.Version <= snapshotVersion:
		// The records are decoded on every core (snapshot_decode.go),
		// the collector paced by what is read (internal/gcpace) until the
		// restore ends.
		defer gcpace.HoldForRestore()()
		br, err = readRecordsV2(br, r, rs, h.Version)
	default:
		return nil, h, fmt.Errorf("restore: snapshot version %d, this build reads 1 to %d", h.Version, snapshotVersion)
	}
	if err == nil {
		err = rs.flush()
	}
	got := &rs.got
	for _, v := range snapVersions {
		if err == nil && v.n <= h.Version && v.restored != nil {
			err = v.restored(w)
		}
	}
	if err != nil {
		return nil, h, err
	}
	// The trailer's type byte has been read.
	var want map[string]int
	if err := readMsgpack(br, &want); err != nil {
		return nil, h, fmt.Errorf("restore trailer: %w", err)
	}
	for _, k := range snapKinds {
		if k != nil && want[k.name] != got[k.kind] {
			return nil, h, fmt.Errorf("restore: the trailer counts %d %s records, the snapshot holds %d", want[k.name], k.name, got[k.kind])
		}
	}
	return w.t, h, nil
}

// snapCounts counts the records read of each kind.
type snapCounts [256]int

// restoring is a restore under way: the state being built, the records
// read of each kind, and the jobs read but not stored yet.
type restoring struct {
	w    *writer
	got  snapCounts
	jobs bulkJobs
}

// restoreRecord stores one decoded record of kind k and counts it. The
// records of a bulk kind are collected, and stored all at once before a
// record of another kind is.
func (rs *restoring) restoreRecord(k *snapKind, obj any) error {
	if rs.got[k.kind]++; k.once && rs.got[k.kind] > 1 {
		return fmt.Errorf("restore: more than one %s record", k.name)
	}
	if k.bulk {
		return rs.jobs.add(obj.(*Job))
	}
	if err := rs.flush(); err != nil {
		return err
	}
	return k.restore(rs.w, obj)
}

// flush stores the jobs collected (snapshot_bulk.go).
func (rs *restoring) flush() error {
	return rs.jobs.flush(rs.w, func(w *writer, j *Job) error { return snapKinds[snapJob].restore(w, j) })
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

// readRecordsV1 inserts msgpack object records up to and including the
// trailer's type byte.
func readRecordsV1(br *bufio.Reader, rs *restoring) error {
	for {
		t, err := readType(br)
		if err != nil || t == snapEnd {
			return err
		}
		k := snapKinds[t]
		if k == nil || k.msgpack == nil {
			return fmt.Errorf("restore: unknown record type %d in a version 1 snapshot", t)
		}
		obj := k.msgpack()
		if err := readMsgpack(br, obj); err != nil {
			return fmt.Errorf("restore record %d: %w", t, err)
		}
		if jv, ok := obj.(*jobV1); ok {
			jv.Job.setTrail(jv.AttemptLog, nil)
			jv.Job.adoptHistory(jv.History)
			jv.Job.sealIfFinished()
			obj = &jv.Job
		}
		if err := rs.restoreRecord(k, obj); err != nil {
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
