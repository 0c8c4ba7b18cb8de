package cluster

import (
	"bytes"
	"errors"
	"fmt"
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

// readState reads a snapshot's state through Open, and returns the bytes
// it handed out and the error it ended with.
func readState(t *testing.T, s *checkedSnapshots, id string) ([]byte, error) {
	t.Helper()
	_, rc, err := s.Open(id)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out bytes.Buffer
	buf := make([]byte, 7000) // not a divisor of the chunks
	for {
		n, err := rc.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

// Open hands out a state that matches its meta.json whole, and never the
// whole of one that does not: the read that would reach its end returns
// the mismatch, whatever the size and wherever the damage.
func TestOpenChecksTheStateAsItIsRead(t *testing.T) {
	for _, size := range []int{0, 1, 5000, stateChunkLen - 1, stateChunkLen, stateChunkLen + 1, 3 * stateChunkLen, 3*stateChunkLen + 4321} {
		base := t.TempDir()
		s := newCheckedSnapshots(t, base)
		dir := writeSnapshot(t, s, base, 10, size)
		want, err := os.ReadFile(filepath.Join(dir, "state.bin"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readState(t, s, filepath.Base(dir))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: %d bytes (%v)", size, len(got), err)
		}
		if size == 0 {
			continue
		}
		for _, at := range []int{0, size / 2, size - 1} {
			editFile(t, filepath.Join(dir, "state.bin"), func(b []byte) []byte { b[at] ^= 0x01; return b })
			got, err := readState(t, s, filepath.Base(dir))
			if len(got) == size {
				t.Fatalf("size %d, byte %d flipped: every byte handed out", size, at)
			}
			wantCorrupt(t, err, filepath.Join(dir, "state.bin"), "CRC-64")
			editFile(t, filepath.Join(dir, "state.bin"), func(b []byte) []byte { b[at] ^= 0x01; return b })
		}
		editFile(t, filepath.Join(dir, "state.bin"), func(b []byte) []byte { return b[:len(b)-1] })
		if got, err := readState(t, s, filepath.Base(dir)); err == nil || (size > 1 && len(got) == size-1) {
			t.Fatalf("size %d cut short: %d bytes handed out (%v)", size, len(got), err)
		}
	}
}

// snapNode starts a one-node cluster on real stores in dataDir, with f.
func snapNode(t *testing.T, dataDir string, f raft.FSM) (*Node, error) {
	t.Helper()
	cfg := newTCPConfig(t, "s1")
	cfg.DataDir, cfg.Bootstrap, cfg.FSM, cfg.DisableGossip = dataDir, true, f, true
	return New(cfg)
}

// twoSnapshots leaves dataDir holding a stopped one-node cluster that
// kept two snapshots, and returns their directories, the newest last.
func twoSnapshots(t *testing.T, dataDir string) []string {
	t.Helper()
	n, err := snapNode(t, dataDir, &testFSM{})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, []*Node{n})
	for round := range 2 {
		for i := range 20 {
			applyOK(t, n, fmt.Sprintf("r%d-%d", round, i))
		}
		if err := n.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	applyOK(t, n, "after")
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	list, err := newCheckedSnapshots(t, filepath.Join(dataDir, raftDirName)).List()
	if err != nil || len(list) != 2 {
		t.Fatalf("%d snapshots kept (%v)", len(list), err)
	}
	snaps := filepath.Join(dataDir, raftDirName, snapDirName)
	return []string{filepath.Join(snaps, list[1].ID), filepath.Join(snaps, list[0].ID)}
}

// countingFSM is a testFSM that counts its restores and may refuse them.
type countingFSM struct {
	testFSM
	restores int
	refuse   bool
}

func (f *countingFSM) Restore(rc io.ReadCloser) error {
	f.restores++
	if f.refuse {
		rc.Close()
		return errors.New("this state machine refuses every snapshot")
	}
	return f.testFSM.Restore(rc)
}

// A node starts from its newest snapshot, checked as it is restored, and
// refuses to start, naming the file, when the newest's state or the
// older's is damaged; raft never falls back to the older one. The
// newest's meta.json is checked before raft opens it.
func TestStartChecksEverySnapshotKept(t *testing.T) {
	cases := []struct {
		name  string
		which int // 0 the older, 1 the newest
		file  string
		edit  func([]byte) []byte
		words []string
	}{
		{"newest state", 1, "state.bin", func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }, []string{"CRC-64"}},
		{"newest state's end", 1, "state.bin", func(b []byte) []byte { b[len(b)-2] ^= 0x01; return b }, []string{"CRC-64"}},
		{"newest state cut short", 1, "state.bin", func(b []byte) []byte { return b[:len(b)-1] }, []string{"bytes, but"}},
		{"newest meta", 1, "meta.json", flipIn(`"Index":\d+`), []string{"its index is"}},
		{"older state", 0, "state.bin", func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }, []string{"CRC-64"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			dirs := twoSnapshots(t, dataDir)
			f := &countingFSM{}
			if n, err := snapNode(t, dataDir, f); err != nil {
				t.Fatalf("an intact node: %v", err)
			} else if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if f.restores != 1 {
				t.Fatalf("%d restores", f.restores)
			}
			path := filepath.Join(dirs[tc.which], tc.file)
			editFile(t, path, tc.edit)
			f = &countingFSM{}
			n, err := snapNode(t, dataDir, f)
			if err == nil {
				n.Shutdown()
			}
			wantCorrupt(t, err, path, tc.words...)
			if f.restores > 1 {
				t.Fatalf("raft restored %d snapshots: it fell back", f.restores)
			}
		})
	}
}

// A newest snapshot the state machine refuses, intact, refuses the start:
// raft does not fall back to the older one.
func TestStartDoesNotFallBackToAnOlderSnapshot(t *testing.T) {
	dataDir := t.TempDir()
	dirs := twoSnapshots(t, dataDir)
	f := &countingFSM{refuse: true}
	n, err := snapNode(t, dataDir, f)
	if err == nil {
		n.Shutdown()
		t.Fatal("the node started on a snapshot its state machine refused")
	}
	if errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), filepath.Base(dirs[1])) || !strings.Contains(err.Error(), "did not restore") {
		t.Fatalf("want the newest named as not restored, got %v", err)
	}
	if f.restores != 1 {
		t.Fatalf("%d restores: raft fell back", f.restores)
	}
}

// Once the state machine holds a restored snapshot, raft opening one (to
// send it to a follower) before the start has ended is no fall back.
func TestStartLetsRaftOpenSnapshotsOnceOneIsRestored(t *testing.T) {
	restored := false
	st := &snapStart{newest: "b", restored: func() bool { return restored }}
	if err := st.open("b", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	restored = true
	if err := st.open("b", t.TempDir()); err != nil {
		t.Fatalf("an open after the restore: %v", err)
	}
	restored = false
	if err := st.open("a", t.TempDir()); err == nil {
		t.Fatal("a fall back was let through")
	}
}
