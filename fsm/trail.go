package fsm

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A job's trail: its attempts and the events of its history after a folded
// created event (history.go). A job that has neither (a queued job made by
// a plain create) has no trail; one that has them holds them open, as two
// slices, while it can still change often, and sealed once it is finished.
//
// A finished job is kept for the retention window (72 hours by default),
// and what it holds beyond its payload and result is mostly its trail: an
// attempt's four strings (two of them UUIDs), each event's four, and the
// slices around them, about 380 bytes for one attempt, in four objects the
// collector marks. Sealed, the trail is one string of about 120 bytes
// without pointers: each distinct string once (a UUID as its 16 bytes, a
// role, worker id or actor as its index among the sealNames), the fields
// in the tagged encoding of the snapshot's records (fields.go) with
// strings as references to that table and times relative to the job's
// creation. A sealed trail is the same trail: every reader gets it
// back whole (AttemptLog, History), a change of the job opens it again
// (copyJob), and the snapshot writes it as it writes an open one. Sealing
// is a matter of this node's memory only; nothing written or replicated
// depends on it.
type trail struct {
	attempts []Attempt
	history  []Event // after a created event kept as the job's creator
}

// packed is j's sealed trail ("" while the trail is open or absent): the
// numbers of events and attempts, the string table, and the tagged
// fields.
func (j *Job) packed() string {
	if j.sealed == nil {
		return ""
	}
	return unsafe.String(j.sealed, int(j.sealedLen))
}

// hasTrail reports whether j has attempts or events after its creator,
// open or sealed.
func (j *Job) hasTrail() bool { return j.trail != nil || j.sealed != nil }

// AttemptLog returns j's attempts, oldest first, one per claim. It may
// share its array with the stored job: the caller must not change it.
func (j *Job) AttemptLog() []Attempt {
	at, _ := j.trailParts()
	return at
}

// events returns the events of j's history after a created event kept as
// its creator.
func (j *Job) events() []Event {
	_, h := j.trailParts()
	return h
}

// trailParts returns j's attempts and events() at once, unpacking a sealed
// trail once.
func (j *Job) trailParts() ([]Attempt, []Event) {
	switch {
	case j.sealed != nil:
		return unpackTrail(j.packed(), j.CreatedAt)
	case j.trail == nil:
		return nil, nil
	}
	return j.trail.attempts, j.trail.history
}

// numStored is len(j.events()), without unpacking a sealed trail.
func (j *Job) numStored() int {
	switch {
	case j.sealed != nil:
		n, _ := binary.Uvarint(unsafe.Slice(j.sealed, j.sealedLen))
		return int(n)
	case j.trail == nil:
		return 0
	}
	return len(j.trail.history)
}

// openTrail returns j's trail for a change. j must be a job of the caller's
// own: a new one, or a copy (copyJob gives a copy an open trail of its own).
func (j *Job) openTrail() *trail {
	if j.sealed != nil {
		at, h := j.trailParts()
		j.trail, j.sealed, j.sealedLen = &trail{attempts: at, history: h}, nil, 0
	}
	if j.trail == nil {
		j.trail = &trail{}
	}
	return j.trail
}

// setTrail gives j (a job being decoded or made) these attempts and
// events, without a trail when both are empty.
func (j *Job) setTrail(attempts []Attempt, events []Event) {
	j.sealed, j.sealedLen = nil, 0
	if len(attempts) == 0 && len(events) == 0 {
		j.trail = nil
		return
	}
	j.trail = &trail{attempts: attempts, history: events}
}

// addAttempt appends a to j's attempts; j must be the caller's own.
func (j *Job) addAttempt(a Attempt) {
	t := j.openTrail()
	t.attempts = append(t.attempts, a)
}

// copyTrail returns j's trail for a copy of j: open, with attempts of its
// own (a change of the copy may change one in place) and history capped
// (an addition copies it; addEvent).
func (j *Job) copyTrail() *trail {
	if j.sealed != nil {
		at, h := j.trailParts()
		return &trail{attempts: at, history: h}
	}
	t := j.trail
	if t == nil {
		return nil
	}
	return &trail{attempts: append([]Attempt(nil), t.attempts...), history: t.history[:len(t.history):len(t.history)]}
}

// sealIfFinished seals the trail of a finished job. j must be the caller's
// own and not yet read by anyone else: the job an apply stores (put), or
// one a restore decoded.
func (j *Job) sealIfFinished() {
	t := j.trail
	if t == nil || !j.State.Terminal() {
		return
	}
	j.trail = nil
	if len(t.attempts) == 0 && len(t.history) == 0 {
		return
	}
	packed := packTrail(t.attempts, t.history, j.CreatedAt)
	if uint64(len(packed)) > math.MaxUint32 {
		j.trail = t // beyond sealedLen: kept open
		return
	}
	j.sealed, j.sealedLen = unsafe.StringData(packed), uint32(len(packed))
}

// The packed form. Within it, a string field is a varint reference (its
// index in the table) where the tagged encoding has the string's bytes, a
// word field (an event's type or state) its code, and a time its distance
// from the job's CreatedAt. It lives only in this process's memory, so the
// codes need not be stable across builds.

// packer is the string table of a trail being packed or unpacked.
type packer struct {
	tab []string
	// name (packing): some field holding tab[i] is one whose values
	// repeat across jobs (a role, a worker id, an actor: the fields a
	// decode interns), so the table holds it as a sealName.
	name []bool
	base int64 // the job's CreatedAt
}

// ref returns s's index in the table, adding it.
func (p *packer) ref(s string, name bool) uint64 {
	for i, t := range p.tab {
		if t == s {
			p.name[i] = p.name[i] || name
			return uint64(i)
		}
	}
	p.tab, p.name = append(p.tab, s), append(p.name, name)
	return uint64(len(p.tab) - 1)
}

// packedString is a string field of a sealed trail: its index in the
// table.
func (f *fields) packedString(n int, p *string, name bool) {
	if f.w {
		if *p != "" {
			f.put(n, kindVarint)
			f.e.uvarint(f.pk.ref(*p, name))
		}
		return
	}
	if f.at(n, kindVarint) {
		if i := f.d.uvarint(); i < uint64(len(f.pk.tab)) {
			*p = f.pk.tab[i]
		} else {
			f.d.fail("string reference past the table")
		}
		f.next()
	}
}

// String kinds in the table.
const (
	packLiteral = 0 // a uvarint length and the bytes
	packUUID    = 1 // 16 bytes, written back as canonical lowercase text
	packName    = 2 // a uvarint: its index among the sealNames
)

// sealNames are the names sealed trails share: the roles, worker ids and
// actors that thousands of finished jobs repeat are held once in the
// process, and a trail refers to one by its index. Names are only ever
// added (an index stays valid while any trail holds it), at most
// sealNamesMax of them, each at most sealNameMaxLen bytes: past that, a
// trail holds the string itself. Like the interner's bound, this keeps a
// stream of distinct values (worker ids of a thousand short-lived
// workers) from growing the table without end.
//
// Lookups take no lock (a restore's decoders pack trails on every core
// at once): ids and tab are replaced whole, under mu, by an add, which
// the bound makes rare.
var sealNames struct {
	mu  sync.Mutex
	ids atomic.Pointer[map[string]uint64]
	tab atomic.Pointer[[]string]
}

const (
	sealNamesMax   = 4096
	sealNameMaxLen = 64
)

// sealNameRef returns s's index among the sealNames, adding it if there
// is room.
func sealNameRef(s string) (uint64, bool) {
	if ids := sealNames.ids.Load(); ids != nil {
		if id, ok := (*ids)[s]; ok {
			return id, true
		}
	}
	if len(s) > sealNameMaxLen {
		return 0, false
	}
	sealNames.mu.Lock()
	defer sealNames.mu.Unlock()
	var ids map[string]uint64
	var tab []string
	if p := sealNames.ids.Load(); p != nil {
		if id, ok := (*p)[s]; ok {
			return id, true
		}
		ids, tab = *p, *sealNames.tab.Load()
	}
	if len(tab) >= sealNamesMax {
		return 0, false
	}
	s = strings.Clone(s) // not a part of some larger string it would pin
	id := uint64(len(tab))
	// A reader holds the table it loaded, of its length: the append
	// writes past it.
	tab = append(tab, s)
	next := make(map[string]uint64, len(ids)+1)
	for k, v := range ids {
		next[k] = v
	}
	next[s] = id
	sealNames.tab.Store(&tab) // before the id that points into it
	sealNames.ids.Store(&next)
	return id, true
}

// sharedAttemptText reports whether s is a claim event's text that
// attemptText shares ("attempt 2 of 3", both numbers at most
// maxSharedAttemptText): one of at most 400, which every finished job
// repeats, so a sealed trail holds it as a sealName too.
func sharedAttemptText(s string) bool {
	rest, ok := strings.CutPrefix(s, "attempt ")
	if !ok || len(rest) > len("20 of 20") {
		return false
	}
	n, m, ok := strings.Cut(rest, " of ")
	return ok && smallCount(n) && smallCount(m)
}

// smallCount reports whether s is a number from 1 to maxSharedAttemptText
// as strconv writes it.
func smallCount(s string) bool {
	v, err := strconv.Atoi(s)
	return err == nil && v >= 1 && v <= maxSharedAttemptText && strconv.Itoa(v) == s
}

// sealName returns the sealName of index id ("", false when there is none).
func sealName(id uint64) (string, bool) {
	tab := sealNames.tab.Load()
	if tab == nil || id >= uint64(len(*tab)) {
		return "", false
	}
	return (*tab)[id], true
}

var packBufs = sync.Pool{New: func() any { return &packBuf{} }}

type packBuf struct {
	out []byte
	p   packer
	f   fields // here, not on the stack: the field lists take it through an interface
}

// packTrail seals attempts and events (non-empty) into one string.
func packTrail(attempts []Attempt, events []Event, base int64) string {
	pb := packBufs.Get().(*packBuf)
	defer packBufs.Put(pb)
	pb.p = packer{tab: pb.p.tab[:0], name: pb.p.name[:0], base: base}
	f := &pb.f
	*f = fields{w: true, e: enc{b: f.e.b[:0]}, pk: &pb.p}
	objs(f, 1, &attempts)
	objs(f, 2, &events)
	e := enc{b: pb.out[:0]}
	e.uvarint(uint64(len(events)))
	e.uvarint(uint64(len(attempts)))
	e.uvarint(uint64(len(pb.p.tab)))
	for i, s := range pb.p.tab {
		if u, ok := uuidBytes(s); ok {
			e.byte1(packUUID)
			e.b = append(e.b, u[:]...)
			continue
		}
		if pb.p.name[i] || sharedAttemptText(s) {
			if id, ok := sealNameRef(s); ok {
				e.byte1(packName)
				e.uvarint(id)
				continue
			}
		}
		e.byte1(packLiteral)
		e.str(s)
	}
	e.b = append(e.b, f.e.b...)
	pb.out = e.b
	clear(pb.p.tab) // hold no strings in the pool
	return string(e.b)
}

// uuidBytes returns s's 16 bytes when s is a UUID in canonical lowercase
// text (8-4-4-4-12 hex digits), the form that uuidText gives back.
func uuidBytes(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	for i, at := range uuidDigitsAt {
		hi, lo := lowerHex[s[at]], lowerHex[s[at+1]]
		if hi|lo == 0xff {
			return u, false
		}
		u[i] = hi<<4 | lo
	}
	return u, true
}

// uuidDigitsAt are where a UUID's text has each byte's two digits.
var uuidDigitsAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// lowerHex is the value of each lowercase hex digit, 0xff for any other
// byte.
var lowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// workedOn reports whether a claim of role took j: it names the role as an
// attempt's owner. A sealed trail is opened only when its table holds the
// role at all.
func (j *Job) workedOn(role string) bool {
	if !j.hasTrail() {
		return false
	}
	if j.sealed != nil && !packedHolds(j.packed(), role) {
		return false // a string not in the table is in no field
	}
	for _, a := range j.AttemptLog() {
		if a.Owner == role {
			return true
		}
	}
	return false
}

// packedHolds reports whether s is in the string table of a sealed trail,
// without opening it.
func packedHolds(packed string, s string) bool {
	d := dec{b: unsafe.Slice(unsafe.StringData(packed), len(packed))}
	d.uvarint()
	d.uvarint()
	u, uuid := uuidBytes(s)
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		switch d.byte1() {
		case packUUID:
			if b := d.raw(16); uuid && string(b) == string(u[:]) {
				return true
			}
		case packName:
			if t, _ := sealName(d.uvarint()); t == s {
				return true
			}
		case packLiteral:
			if string(d.raw(d.uvarint())) == s {
				return true
			}
		default:
			return false
		}
	}
	return false
}
