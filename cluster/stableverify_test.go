package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"
)

// openTestStores opens a data dir's stores as a node does.
func openTestStores(t *testing.T, dataDir, backend string) (*stores, error) {
	t.Helper()
	cfg := &Config{DataDir: dataDir, Logger: testLogger(t, "store"), LogBackend: backend, SerialLogWrite: true, walSegmentSize: 4096}
	return openStores(cfg, func(err error) { t.Errorf("log write failed: %v", err) })
}

// fillStores writes a term, a vote and some log entries, as raft would.
func fillStores(t *testing.T, st *stores, term uint64) {
	t.Helper()
	for _, err := range []error{
		st.stable.SetUint64([]byte("CurrentTerm"), term),
		st.stable.SetUint64([]byte("LastVoteTerm"), term),
		st.stable.Set([]byte("LastVoteCand"), []byte("n2")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	first, _ := st.logs.LastIndex()
	var logs []*raft.Log
	for i := range uint64(40) {
		logs = append(logs, &raft.Log{Index: first + 1 + i, Term: term, Type: raft.LogCommand, Data: bytes.Repeat([]byte("q"), 300)})
	}
	if err := st.logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func wantStable(t *testing.T, st *stores, term uint64, cand string) {
	t.Helper()
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		if v, err := st.stable.GetUint64([]byte(k)); err != nil || v != term {
			t.Fatalf("%s: %d, %v; want %d", k, v, err, term)
		}
	}
	if v, err := st.stable.Get([]byte("LastVoteCand")); err != nil || string(v) != cand {
		t.Fatalf("LastVoteCand: %q, %v", v, err)
	}
}

func walMetaPath(dataDir string) string {
	return filepath.Join(dataDir, raftDirName, walDirName, metadb.FileName)
}

// editBolt changes one value of a closed bolt file in place of a flipped
// byte: bbolt's page check cannot see it, only the checksums can.
func editBolt(t *testing.T, path, bucket, key string, edit func([]byte) []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		v := b.Get([]byte(key))
		nv := edit(append([]byte(nil), v...))
		if nv == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), nv)
	}); err != nil {
		t.Fatal(err)
	}
}

func flipBit(b []byte) []byte {
	if len(b) == 0 {
		panic("no byte to flip")
	}
	b[0] ^= 0x01
	return b
}

func wantCorrupt(t *testing.T, err error, file string, words ...string) {
	t.Helper()
	if !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("want ErrCorruptStore naming %s, got %v", file, err)
	}
	for _, w := range append([]string{file, "cannot be trusted"}, words...) {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the error does not say %q: %v", w, err)
		}
	}
	t.Logf("refused: %v", err)
}

func TestStableStoreChecksumsPassIntactData(t *testing.T) {
	for _, backend := range []string{LogBackendWAL, LogBackendBolt} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			st, err := openTestStores(t, dir, backend)
			if err != nil {
				t.Fatal(err)
			}
			fillStores(t, st, 7)
			fillStores(t, st, 8)
			st.close()
			for range 2 {
				st, err = openTestStores(t, dir, backend)
				if err != nil {
					t.Fatalf("reopen intact stores: %v", err)
				}
				wantStable(t, st, 8, "n2")
				if last, _ := st.logs.LastIndex(); last != 80 {
					t.Fatalf("last index %d", last)
				}
				st.close()
			}
		})
	}
}

func TestStableStoreRefusesAFlippedValue(t *testing.T) {
	cases := []struct {
		name, bucket, key string
		edit              func([]byte) []byte
		words             []string
	}{
		{"term", metadb.StableBucket, "CurrentTerm", flipBit, []string{"CurrentTerm (6)", "does not match"}},
		{"vote term", metadb.StableBucket, "LastVoteTerm", flipBit, []string{"LastVoteTerm"}},
		{"vote", metadb.StableBucket, "LastVoteCand", flipBit, []string{"LastVoteCand", `"o2"`}},
		{"term gone", metadb.StableBucket, "CurrentTerm", func([]byte) []byte { return nil }, []string{"CurrentTerm (0)"}},
		{"record of the term", metadb.StableBucket, sumKeyPrefix + "CurrentTerm", func(b []byte) []byte { b[3] ^= 0x10; return b }, []string{"checksum record of CurrentTerm is damaged"}},
		{"record gone", metadb.StableBucket, sumKeyPrefix + "LastVoteCand", func([]byte) []byte { return nil }, []string{"LastVoteCand", "has no checksum record"}},
		{"segment list", metadb.MetaBucket, metadb.MetaKey, func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"MaxIndex":`))
			b[i+len(`"MaxIndex":`)] ^= 0x01 // a digit for another
			return b
		}, []string{"segment list does not match"}},
		{"segment list unparsable", metadb.MetaBucket, metadb.MetaKey, func(b []byte) []byte { b[0] ^= 0x01; return b }, []string{"does not parse"}},
		{"record of the segment list", metadb.StableBucket, walStateSumKey, flipBit, []string{"segment list is damaged"}},
		{"record of the segment list gone", metadb.StableBucket, walStateSumKey, func([]byte) []byte { return nil }, []string{"has no checksum record"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := openTestStores(t, dir, LogBackendWAL)
			if err != nil {
				t.Fatal(err)
			}
			fillStores(t, st, 7)
			st.close()
			editBolt(t, walMetaPath(dir), tc.bucket, tc.key, tc.edit)
			if err := checkBolt(walMetaPath(dir)); err != nil {
				t.Fatalf("bbolt's own check sees it: %v", err)
			}
			st, err = openTestStores(t, dir, LogBackendWAL)
			if err == nil {
				st.close()
			}
			wantCorrupt(t, err, walMetaPath(dir), tc.words...)
		})
	}
}

// A byte flipped in the file itself, where the term's value is stored.
func TestStableStoreRefusesAFlippedByteInTheFile(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStores(t, dir, LogBackendWAL)
	if err != nil {
		t.Fatal(err)
	}
	fillStores(t, st, 7)
	st.close()
	path := walMetaPath(dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy of the key's value (bolt's leaf pages hold a key and its
	// value side by side; freed pages may hold older copies).
	n := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("CurrentTerm"))
		if j < 0 {
			break
		}
		at := i + j
		if !bytes.HasSuffix(b[:at], []byte(sumKeyPrefix)) && at+len("CurrentTerm")+8 <= len(b) {
			v := b[at+len("CurrentTerm"):]
			if binary.LittleEndian.Uint64(v) == 7 {
				v[0] ^= 0x04 // 7 -> 3
				n++
			}
		}
		i = at + 1
	}
	if n == 0 {
		t.Fatal("the term's value is not in the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = openTestStores(t, dir, LogBackendWAL)
	if err == nil {
		st.close()
	}
	wantCorrupt(t, err, path, "CurrentTerm (3)")
}

func TestStableStoreBoltBackendRefusesAFlippedTerm(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStores(t, dir, LogBackendBolt)
	if err != nil {
		t.Fatal(err)
	}
	fillStores(t, st, 7)
	st.close()
	path := filepath.Join(dir, raftDirName, raftDBName)
	editBolt(t, path, "conf", "CurrentTerm", func(b []byte) []byte { b[7] ^= 0x01; return b })
	st, err = openTestStores(t, dir, LogBackendBolt)
	if err == nil {
		st.close()
	}
	wantCorrupt(t, err, path, "CurrentTerm (6)")
}

// A data dir written before the checksums existed opens, gets them, and is
// protected from then on.
func TestStableStoreOldDataOpensAndIsProtectedAfter(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, raftDirName, walDirName)
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(walDir, wal.WithSegmentSize(4096)) // as an older version did
	if err != nil {
		t.Fatal(err)
	}
	old := &stores{logs: w, stable: w, closer: w}
	fillStores(t, old, 4)
	w.Close()
	st, err := openTestStores(t, dir, LogBackendWAL)
	if err != nil {
		t.Fatalf("an older data dir: %v", err)
	}
	wantStable(t, st, 4, "n2")
	if last, _ := st.logs.LastIndex(); last != 40 {
		t.Fatalf("last index %d", last)
	}
	st.close()
	// The records were written, the segment list's too.
	for _, k := range []string{walStateSumKey, sumFormatKey, sumKeyPrefix + "CurrentTerm", sumKeyPrefix + "LastVoteCand"} {
		editBolt(t, walMetaPath(dir), metadb.StableBucket, k, func(b []byte) []byte {
			if len(b) == 0 {
				t.Errorf("no %s after the first start", k)
			}
			return b
		})
	}
	editBolt(t, walMetaPath(dir), metadb.StableBucket, "LastVoteTerm", flipBit)
	st, err = openTestStores(t, dir, LogBackendWAL)
	if err == nil {
		st.close()
	}
	wantCorrupt(t, err, walMetaPath(dir), "LastVoteTerm (5)")
}

// A crash between a checksum record and its value leaves either value
// acceptable; the next start keeps only the one found.
func TestStableStoreAcceptsAWriteCutShort(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStores(t, dir, LogBackendWAL)
	if err != nil {
		t.Fatal(err)
	}
	fillStores(t, st, 7)
	st.close()
	// The record of term 8 written, the term not yet.
	editBolt(t, walMetaPath(dir), metadb.StableBucket, sumKeyPrefix+"CurrentTerm", func([]byte) []byte {
		return encodeSums([]uint32{fingerprintUint64("CurrentTerm", 7), fingerprintUint64("CurrentTerm", 8)})
	})
	st, err = openTestStores(t, dir, LogBackendWAL)
	if err != nil {
		t.Fatalf("a write cut short: %v", err)
	}
	wantStable(t, st, 7, "n2")
	st.close()
	// Only 7's fingerprint is kept: 8 (7 with a bit flipped... or not) is
	// no longer accepted.
	editBolt(t, walMetaPath(dir), metadb.StableBucket, "CurrentTerm", func(b []byte) []byte {
		binary.LittleEndian.PutUint64(b, 8)
		return b
	})
	st, err = openTestStores(t, dir, LogBackendWAL)
	if err == nil {
		st.close()
	}
	wantCorrupt(t, err, walMetaPath(dir), "CurrentTerm (8)")
}

// At run time a value that no longer matches is an error, not a value.
func TestCheckedStableRefusesAtRunTime(t *testing.T) {
	inner := raft.NewInmemStore()
	cs, err := openCheckedStable(inner, "mem")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SetUint64([]byte("LastVoteTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := cs.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	if v, err := cs.GetUint64([]byte("LastVoteTerm")); err != nil || v != 3 {
		t.Fatalf("%d %v", v, err)
	}
	// Written past the checksums (an older version, or rot).
	inner.SetUint64([]byte("LastVoteTerm"), 2)
	inner.Set([]byte("LastVoteCand"), []byte("n1"))
	if _, err := cs.GetUint64([]byte("LastVoteTerm")); !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("a changed vote term: %v", err)
	}
	if _, err := cs.Get([]byte("LastVoteCand")); !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("a changed vote: %v", err)
	}
	// A key never written is fine.
	if v, err := cs.Get([]byte("other")); err != nil && !isNotFound(err) || v != nil {
		t.Fatalf("%q %v", v, err)
	}
}

func TestSumRecord(t *testing.T) {
	for _, sums := range [][]uint32{nil, {1}, {1, 0xffffffff}} {
		got, err := decodeSums(encodeSums(sums))
		if err != nil || len(got) != len(sums) {
			t.Fatalf("%v: %v %v", sums, got, err)
		}
	}
	b := encodeSums([]uint32{5, 6})
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x20
		if _, err := decodeSums(c); err == nil {
			t.Fatalf("a flipped byte %d passes", i)
		}
	}
	if got := nextSums([]uint32{1, 2, 3, 4}, 2); len(got) != 4 || got[3] != 2 {
		t.Fatalf("%v", got)
	}
}

// BenchmarkStableSetUint64 is the cost of a term or vote write, as raft
// makes at each election, with and without the checksum records (one
// fsync'ed bolt commit without, three with).
func BenchmarkStableSetUint64(b *testing.B) {
	for _, checked := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "checked"}[checked], func(b *testing.B) {
			w, err := wal.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			var st raft.StableStore = w
			if checked {
				if st, err = openCheckedStable(w, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if err := st.SetUint64([]byte("CurrentTerm"), uint64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A store another process holds is in use, not damaged: the error must not
// send the operator to empty the data directory.
func TestStableStoreInUseIsNotCalledCorrupt(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStores(t, dir, LogBackendWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	_, err = verifyWALMeta(filepath.Dir(walMetaPath(dir)))
	if err == nil || errors.Is(err, ErrCorruptStore) || strings.Contains(err.Error(), "cannot be trusted") {
		t.Fatalf("a store in use: %v", err)
	}
}
