package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// Checksums for the values of raft's stable store and of raft-wal's segment
// list.
//
// Both live in a bolt file (raft/wal/wal-meta.db with the WAL backend,
// raft/raft.db with the bolt one). bbolt checksums only its two meta pages:
// checkBolt finds a page whose structure is damaged, but a byte flipped
// inside a value reads back as another value. For raft's CurrentTerm,
// LastVoteTerm and LastVoteCand that is silent and unsafe (a node whose
// term or vote changed under it may vote twice in a term); for raft-wal's
// segment list (key "m" of bucket "wal-meta", JSON) it can hide or
// resurrect log entries, or make raft-wal delete segment files it no longer
// lists.
//
// So every value is written with a checksum record beside it, under a key of
// its own in the same store: "spine-crc/<key>" for a stable key,
// "spine-crc-wal-state" for the segment list. The values themselves stay
// where and how raft and raft-wal keep them, so an older spine still reads
// them. A record holds the CRC-32C fingerprints of the values that may be on
// disk and ends with a CRC-32C of its own. The store writes one key per
// transaction, so a write is three: the record with the old value's
// fingerprint and the new one's, the value, the record with the new one's
// only. A crash between them leaves a value its record accepts; once the
// write is done the old fingerprint is gone (a counter such as the term,
// one bit flipped, is often its previous value). A value that matches none
// of its record's fingerprints, or a damaged record, refuses the start
// (ErrCorruptStore, naming the file and the key); at run time the read
// fails, and raft does not vote on it.
//
// Data written before these records existed has none: the first start that
// finds none writes them for the values found (which are taken on trust,
// once) and then the key "spine-crc-format"; from then on a value without a
// record is refused too. An older spine that writes to the store afterwards
// does not update the records: the next start of this version refuses it.
const (
	sumKeyPrefix   = "spine-crc/"
	sumFormatKey   = "spine-crc-format"
	walStateSumKey = "spine-crc-wal-state"
	walStateName   = "wal-state" // what the segment list's fingerprint is keyed by
	sumRecordV1    = 1
	maxSums        = 4
)

// The stable keys raft keeps (raft.go: keyCurrentTerm and friends): checked
// at every start. uint64 says whether raft reads the key with GetUint64.
var raftStableKeys = []struct {
	key    string
	uint64 bool
}{
	{"CurrentTerm", true},
	{"LastVoteTerm", true},
	{"LastVoteCand", false},
}

// corruptFile is the error of a store file that fails its check: the node
// must not start with it, and the cure is a dead disk's.
func corruptFile(what, path, why string) error {
	return fmt.Errorf("%w: %s %s: %s; %s", ErrCorruptStore, what, path, why, cure(what))
}

func cure(what string) string {
	return "this node's " + what + " cannot be trusted: remove it from the cluster (spine cluster remove), empty its data directory and add it again, as for a dead disk (docs/operations.md)"
}

// fingerprint is the CRC-32C of a value under its key (an absent value is
// the empty one).
func fingerprint(key string, val []byte) uint32 {
	c := crc32.Update(0, walCRC, []byte(key))
	c = crc32.Update(c, walCRC, []byte{0})
	return crc32.Update(c, walCRC, val)
}

func fingerprintUint64(key string, v uint64) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return fingerprint(key, b[:])
}

// encodeSums is a checksum record: format byte, count, the fingerprints
// (big-endian), and the CRC-32C of all that.
func encodeSums(sums []uint32) []byte {
	b := []byte{sumRecordV1, byte(len(sums))}
	for _, s := range sums {
		b = binary.BigEndian.AppendUint32(b, s)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, walCRC))
}

func decodeSums(b []byte) ([]uint32, error) {
	if len(b) < 6 || b[0] != sumRecordV1 || len(b) != 2+4*int(b[1])+4 {
		return nil, fmt.Errorf("a malformed record of %d bytes", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, walCRC) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("the record does not match its own CRC")
	}
	sums := make([]uint32, b[1])
	for i := range sums {
		sums[i] = binary.BigEndian.Uint32(body[2+4*i:])
	}
	return sums, nil
}

// nextSums is the record to write before a value whose fingerprint is next
// replaces one of those in onDisk.
func nextSums(onDisk []uint32, next uint32) []uint32 {
	out := make([]uint32, 0, len(onDisk)+1)
	for _, s := range onDisk {
		if s != next && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	out = append(out, next)
	if len(out) > maxSums {
		out = out[len(out)-maxSums:]
	}
	return out
}

func isNotFound(err error) bool {
	return err != nil && (errors.Is(err, raftboltdb.ErrKeyNotFound) || err.Error() == "not found")
}

// checkedStable is raft's stable store with a checksum record beside every
// value (see above). file names the store's file in errors.
type checkedStable struct {
	inner raft.StableStore
	file  string

	mu        sync.Mutex
	formatted bool // the store holds sumFormatKey: a value without a record is damage
}

// openCheckedStable wraps inner and checks raft's keys before raft reads
// them; a store written before the records existed gets them now.
func openCheckedStable(inner raft.StableStore, file string) (*checkedStable, error) {
	s := &checkedStable{inner: inner, file: file}
	if err := s.verify(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *checkedStable) corrupt(why string) error {
	return corruptFile("raft stable store", s.file, why)
}

// raw is a key's value, nil if absent (raft-boltdb says "not found").
func (s *checkedStable) raw(key string) ([]byte, error) {
	v, err := s.inner.Get([]byte(key))
	if isNotFound(err) {
		return nil, nil
	}
	return v, err
}

// sums is key's checksum record; ok is false if it has none.
func (s *checkedStable) sums(key string) (sums []uint32, ok bool, err error) {
	b, err := s.raw(sumKeyPrefix + key)
	if err != nil || len(b) == 0 {
		return nil, false, err
	}
	sums, err = decodeSums(b)
	if err != nil {
		return nil, false, s.corrupt(fmt.Sprintf("the checksum record of %s is damaged (%v)", key, err))
	}
	return sums, true, nil
}

func (s *checkedStable) putSums(key string, sums []uint32) error {
	return s.inner.Set([]byte(sumKeyPrefix+key), encodeSums(sums))
}

// current is key's value as raft reads it and its fingerprint.
func (s *checkedStable) current(key string, isUint64 bool) (shown string, fp uint32, err error) {
	if isUint64 {
		v, err := s.inner.GetUint64([]byte(key))
		if isNotFound(err) {
			v, err = 0, nil
		}
		if err != nil {
			return "", 0, s.corrupt(fmt.Sprintf("%s cannot be read (%v)", key, err))
		}
		return fmt.Sprint(v), fingerprintUint64(key, v), nil
	}
	v, err := s.raw(key)
	if err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("%q", v), fingerprint(key, v), nil
}

// check holds key's value, read as shown with fingerprint fp, against its
// record.
func (s *checkedStable) check(key, shown string, fp uint32) error {
	sums, ok, err := s.sums(key)
	if err != nil {
		return err
	}
	if !ok {
		if !s.formatted {
			return nil // written before the records existed
		}
		if v, err := s.raw(key); err != nil {
			return err
		} else if len(v) > 0 {
			return s.corrupt(fmt.Sprintf("%s (%s) has no checksum record, though every value of this store has one", key, shown))
		}
		return nil
	}
	if !slices.Contains(sums, fp) {
		return s.corrupt(fmt.Sprintf("%s (%s) does not match the checksum it was written with", key, shown))
	}
	return nil
}

// verify checks raft's keys, giving the ones without a record (data from
// before the records) one, and marks the store as checksummed.
func (s *checkedStable) verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.raw(sumFormatKey)
	if err != nil {
		return err
	}
	if len(f) > 0 {
		if _, err := decodeSums(f); err != nil {
			return s.corrupt(fmt.Sprintf("the key %s is damaged (%v)", sumFormatKey, err))
		}
		s.formatted = true
	}
	for _, k := range raftStableKeys {
		shown, fp, err := s.current(k.key, k.uint64)
		if err != nil {
			return err
		}
		sums, ok, err := s.sums(k.key)
		if err != nil {
			return err
		}
		if ok && !slices.Contains(sums, fp) || !ok && s.formatted {
			if err := s.check(k.key, shown, fp); err != nil {
				return err
			}
		}
		if !ok || len(sums) > 1 {
			// First start with records, or a crash between a record
			// and its value: one fingerprint, the value's.
			if err := s.putSums(k.key, []uint32{fp}); err != nil {
				return err
			}
		}
	}
	if !s.formatted {
		if err := s.inner.Set([]byte(sumFormatKey), encodeSums(nil)); err != nil {
			return err
		}
		s.formatted = true
	}
	return nil
}

func (s *checkedStable) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.raw(string(key))
	if err != nil {
		return err
	}
	return s.write(string(key), fingerprint(string(key), old), fingerprint(string(key), val), func() error { return s.inner.Set(key, val) })
}

// write writes a value (set) whose fingerprint is next over one whose
// fingerprint is old: record of both, value, record of next.
func (s *checkedStable) write(key string, old, next uint32, set func() error) error {
	if err := s.putSums(key, nextSums([]uint32{old}, next)); err != nil {
		return err
	}
	if err := set(); err != nil {
		return err
	}
	if old == next {
		return nil
	}
	return s.putSums(key, []uint32{next})
}

func (s *checkedStable) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.inner.Get(key)
	if err != nil && !isNotFound(err) {
		return v, err
	}
	if cerr := s.check(string(key), fmt.Sprintf("%q", v), fingerprint(string(key), v)); cerr != nil {
		return nil, cerr
	}
	return v, err
}

func (s *checkedStable) SetUint64(key []byte, val uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, old, err := s.current(string(key), true)
	if err != nil {
		return err
	}
	return s.write(string(key), old, fingerprintUint64(string(key), val), func() error { return s.inner.SetUint64(key, val) })
}

func (s *checkedStable) GetUint64(key []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.inner.GetUint64(key)
	if err != nil && !isNotFound(err) {
		return v, err
	}
	if cerr := s.check(string(key), fmt.Sprint(v), fingerprintUint64(string(key), v)); cerr != nil {
		return 0, cerr
	}
	return v, err
}

// walMetaState is what verifyWALMeta found of raft-wal's segment list.
type walMetaState struct {
	onDisk []uint32 // the fingerprint of the list on disk
	legacy bool     // the list has no checksum record yet (older data)
	tidy   bool     // its record holds other fingerprints too (a crash mid-write)
}

// verifyWALMeta checks raft-wal's metadata file in dir before the WAL
// opens it: bbolt's page check, then the segment list against its
// checksum record. A missing file is a new log.
func verifyWALMeta(dir string) (walMetaState, error) {
	path := filepath.Join(dir, metadb.FileName)
	absent := walMetaState{onDisk: []uint32{fingerprint(walStateName, nil)}}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return absent, nil
	} else if err != nil {
		return absent, err
	}
	if err := checkBolt(path); errors.Is(err, ErrCorruptStore) {
		return absent, fmt.Errorf("%w; %s", err, cure("raft stable store"))
	} else if err != nil {
		return absent, err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: boltOpenWait})
	if err != nil {
		return absent, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var st walMetaState
	var why string
	err = db.View(func(tx *bbolt.Tx) error {
		meta, stable := tx.Bucket([]byte(metadb.MetaBucket)), tx.Bucket([]byte(metadb.StableBucket))
		if meta == nil || stable == nil {
			why = "a bucket of raft-wal's is missing"
			return nil
		}
		m := meta.Get([]byte(metadb.MetaKey))
		if m != nil {
			var ps types.PersistentState
			if err := json.Unmarshal(m, &ps); err != nil {
				why = fmt.Sprintf("raft-wal's segment list does not parse (%v)", err)
				return nil
			}
		}
		fp := fingerprint(walStateName, m)
		st.onDisk = []uint32{fp}
		rec := stable.Get([]byte(walStateSumKey))
		if len(rec) == 0 {
			if f := stable.Get([]byte(sumFormatKey)); len(f) > 0 && m != nil {
				why = "raft-wal's segment list has no checksum record, though every value of this store has one"
			}
			st.legacy = true
			return nil
		}
		sums, err := decodeSums(rec)
		if err != nil {
			why = fmt.Sprintf("the checksum record of raft-wal's segment list is damaged (%v)", err)
			return nil
		}
		if !slices.Contains(sums, fp) {
			why = "raft-wal's segment list does not match the checksum it was written with"
		}
		st.tidy = len(sums) > 1
		return nil
	})
	if err != nil {
		return absent, fmt.Errorf("read %s: %w", path, err)
	}
	if why != "" {
		return absent, corruptFile("raft stable store", path, why)
	}
	return st, nil
}

// checkedWALMeta is raft-wal's metadata store with a checksum record
// written before every new segment list (see above).
type checkedWALMeta struct {
	inner  types.MetaStore
	mu     sync.Mutex
	state  walMetaState
	loaded bool
}

func newCheckedWALMeta(st walMetaState) *checkedWALMeta {
	return &checkedWALMeta{inner: &metadb.BoltMetaDB{}, state: st}
}

func (m *checkedWALMeta) Load(dir string) (types.PersistentState, error) {
	ps, err := m.inner.Load(dir)
	if err != nil {
		return ps, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state.legacy || m.state.tidy {
		// Older data, or a crash in the middle of a write: one
		// fingerprint, the list's.
		if err := m.inner.SetStable([]byte(walStateSumKey), encodeSums(m.state.onDisk)); err != nil {
			return ps, err
		}
		m.state.legacy, m.state.tidy = false, false
	}
	return ps, nil
}

func (m *checkedWALMeta) CommitState(ps types.PersistentState) error {
	enc, err := json.Marshal(ps) // what metadb stores
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sums := nextSums(m.state.onDisk, fingerprint(walStateName, enc))
	if err := m.inner.SetStable([]byte(walStateSumKey), encodeSums(sums)); err != nil {
		return err
	}
	if err := m.inner.CommitState(ps); err != nil {
		m.state.onDisk = sums // it may or may not be on disk
		return err
	}
	m.state.onDisk = sums[len(sums)-1:]
	if len(sums) == 1 {
		return nil
	}
	return m.inner.SetStable([]byte(walStateSumKey), encodeSums(m.state.onDisk))
}

func (m *checkedWALMeta) GetStable(key []byte) ([]byte, error) { return m.inner.GetStable(key) }

func (m *checkedWALMeta) SetStable(key, value []byte) error { return m.inner.SetStable(key, value) }

func (m *checkedWALMeta) Close() error { return m.inner.Close() }
