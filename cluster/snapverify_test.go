package cluster

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// writeSnapshot writes a snapshot of size bytes through store (a
// checkedSnapshots, or raft's own store for an older version's) and
// returns its directory.
func writeSnapshot(t testing.TB, store raft.SnapshotStore, base string, index uint64, size int) string {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "a1"}, {Suffrage: raft.Voter, ID: "n2", Address: "a2"}}}
	sink, err := store.Create(raft.SnapshotVersionMax, index, 3, cfg, 2, trans)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("state of the queue "), 1000)
	for left := size; left > 0; {
		n := min(left, len(chunk))
		if _, err := sink.Write(chunk[:n]); err != nil {
			t.Fatal(err)
		}
		left -= n
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(base, snapDirName, sink.ID())
}

func newCheckedSnapshots(t testing.TB, base string) *checkedSnapshots {
	t.Helper()
	fss, err := raft.NewFileSnapshotStoreWithLogger(base, DefaultSnapshotRetain, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return &checkedSnapshots{FileSnapshotStore: fss, dir: filepath.Join(base, snapDirName)}
}

func TestVerifySnapshotsPassesIntactSnapshots(t *testing.T) {
	base := t.TempDir()
	s := newCheckedSnapshots(t, base)
	writeSnapshot(t, s, base, 10, 5000)
	dir := writeSnapshot(t, s, base, 20, 70000)
	if _, err := os.Stat(filepath.Join(dir, snapCheckName)); err != nil {
		t.Fatalf("no check file: %v", err)
	}
	if err := verifySnapshots(filepath.Join(base, snapDirName)); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := s.Open(filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, rc)
	rc.Close()
	if meta.Index != 20 || n != 70000 {
		t.Fatalf("index %d, %d bytes", meta.Index, n)
	}
	// A new node: no directory at all.
	if err := verifySnapshots(filepath.Join(t.TempDir(), "none")); err != nil {
		t.Fatal(err)
	}
}

// editFile rewrites a file with edit applied.
func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// flipIn flips the low bit of the last byte of the first match of re (a
// last digit stays a digit, and the JSON still parses).
func flipIn(re string) func([]byte) []byte {
	return func(b []byte) []byte {
		loc := regexp.MustCompile(re).FindIndex(b)
		if loc == nil {
			panic("no " + re)
		}
		b[loc[1]-1] ^= 0x01
		return b
	}
}

func TestVerifySnapshotsRefusesAFlippedByte(t *testing.T) {
	cases := []struct {
		name, file string
		edit       func([]byte) []byte
		words      []string
	}{
		{"state", "state.bin", func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }, []string{"CRC-64"}},
		{"state cut short", "state.bin", func(b []byte) []byte { return b[:len(b)-1] }, []string{"bytes, but"}},
		{"state gone", "state.bin", nil, []string{"no such file"}},
		{"index", "meta.json", flipIn(`"Index":\d+`), []string{"its index is"}},
		{"term", "meta.json", flipIn(`"Term":\d+`), []string{"its term is"}},
		{"membership", "meta.json", flipIn(`"ID":"n\d`), []string{"configuration"}},
		{"configuration index", "meta.json", flipIn(`"ConfigurationIndex":\d+`), []string{"configuration index"}},
		{"size", "meta.json", flipIn(`"Size":\d+`), []string{"size"}},
		{"state CRC", "meta.json", flipIn(`"CRC":"[A-Za-z0-9+/]`), nil}, // a CRC-64 that differs, or base64 that does not parse
		{"version", "meta.json", flipIn(`"Version":\d+`), []string{"version"}},
		{"meta unparsable", "meta.json", func(b []byte) []byte { b[0] ^= 0x01; return b }, []string{"does not parse"}},
		{"meta gone", "meta.json", nil, []string{"no such file"}},
		{"check file", snapCheckName, flipIn(`"index":\d+`), []string{"own checksum"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			s := newCheckedSnapshots(t, base)
			writeSnapshot(t, s, base, 10, 5000)
			dir := writeSnapshot(t, s, base, 1234, 70000)
			path := filepath.Join(dir, tc.file)
			if tc.edit == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				editFile(t, path, tc.edit)
			}
			err := verifySnapshots(filepath.Join(base, snapDirName))
			wantCorrupt(t, err, path, tc.words...)
		})
	}
}

// Snapshots written before the check files existed still open; their state
// is still checked against meta.json's CRC-64.
func TestVerifySnapshotsAcceptsOlderSnapshots(t *testing.T) {
	base := t.TempDir()
	fss, err := raft.NewFileSnapshotStoreWithLogger(base, DefaultSnapshotRetain, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	dir := writeSnapshot(t, fss, base, 10, 5000)
	if err := verifySnapshots(filepath.Join(base, snapDirName)); err != nil {
		t.Fatalf("an older snapshot: %v", err)
	}
	s := newCheckedSnapshots(t, base)
	if _, rc, err := s.Open(filepath.Base(dir)); err != nil {
		t.Fatal(err)
	} else {
		rc.Close()
	}
	editFile(t, filepath.Join(dir, "state.bin"), func(b []byte) []byte { b[100] ^= 0x01; return b })
	wantCorrupt(t, verifySnapshots(filepath.Join(base, snapDirName)), filepath.Join(dir, "state.bin"))
}

// A node's stores are not opened over a damaged snapshot; an unfinished
// one (.tmp) is left to raft, which ignores it.
func TestOpenStoresRefusesADamagedSnapshot(t *testing.T) {
	dataDir := t.TempDir()
	st, err := openTestStores(t, dataDir, LogBackendWAL)
	if err != nil {
		t.Fatal(err)
	}
	raftDir := filepath.Join(dataDir, raftDirName)
	dir := writeSnapshot(t, st.snaps, raftDir, 10, 5000)
	st.close()
	if err := os.MkdirAll(filepath.Join(raftDir, snapDirName, "3-11-99.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err = openTestStores(t, dataDir, LogBackendWAL)
	if err != nil {
		t.Fatal(err)
	}
	st.close()
	editFile(t, filepath.Join(dir, "meta.json"), flipIn(`"Index":\d+`))
	st, err = openTestStores(t, dataDir, LogBackendWAL)
	if err == nil {
		st.close()
	}
	wantCorrupt(t, err, filepath.Join(dir, "meta.json"), "its index is")
}

// A sink cancelled leaves nothing; Open refuses a meta.json that no longer
// matches the check file.
func TestCheckedSnapshotsOpenAndCancel(t *testing.T) {
	base := t.TempDir()
	s := newCheckedSnapshots(t, base)
	_, trans := raft.NewInmemTransport("")
	sink, err := s.Create(raft.SnapshotVersionMax, 5, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("partial"))
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("a cancelled snapshot is listed: %v", list)
	}
	dir := writeSnapshot(t, s, base, 10, 5000)
	editFile(t, filepath.Join(dir, "meta.json"), flipIn(`"Term":\d+`))
	if _, _, err := s.Open(filepath.Base(dir)); !errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), "meta.json") {
		t.Fatalf("Open of a snapshot whose meta.json changed: %v", err)
	}
}

// BenchmarkVerifySnapshot measures the start-up check of a 100 MB
// snapshot: MB/s read and checked.
func BenchmarkVerifySnapshot(b *testing.B) {
	base := b.TempDir()
	s := newCheckedSnapshots(b, base)
	const size = 100 << 20
	dir := writeSnapshot(b, s, base, 10, size)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if err := verifySnapshot(dir); err != nil {
			b.Fatal(err)
		}
	}
}
