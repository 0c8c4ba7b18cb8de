package cluster

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// writeWAL writes batches of entries to a raft-wal log in dir with small
// segments, closes it, and returns its segment files, oldest first, and
// the payload of every entry.
func writeWAL(t *testing.T, dir string, batches, per int) []string {
	t.Helper()
	w, err := openWAL(dir, testLogger(t, "wal"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	idx := uint64(1)
	for range batches {
		var logs []*raft.Log
		for range per {
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte('a' + idx%26)}, 300)})
			idx++
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	sort.Strings(names)
	if len(names) < 3 {
		t.Fatalf("only %d segments", len(names))
	}
	return names
}

// flip changes one byte of the first entry payload found at or after from
// in file.
func flip(t *testing.T, file string, from int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < len(b); i++ {
		if b[i] >= 'a' && b[i] <= 'z' {
			b[i] ^= 0x01
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no payload byte in %s after %d", file, from)
}

func TestVerifyWALFindsAFlippedByte(t *testing.T) {
	dir := t.TempDir()
	names := writeWAL(t, dir, 12, 4)
	if err := verifyWAL(dir); err != nil {
		t.Fatalf("an intact log: %v", err)
	}
	// A byte of a sealed segment: refused, naming the file.
	flip(t, names[0], walFileHeader)
	err := verifyWAL(dir)
	if !errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), filepath.Base(names[0])) {
		t.Fatalf("a flipped byte in %s: %v", names[0], err)
	}
	// And openWAL refuses to open it.
	if _, err := openWAL(dir, testLogger(t, "wal"), 4096); !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("openWAL of a corrupt log: %v", err)
	}
}

func TestVerifyWALTail(t *testing.T) {
	// A flipped byte in an early batch of the tail segment, with batches
	// after it, is damage.
	dir := t.TempDir()
	names := writeWAL(t, dir, 12, 4)
	tail := names[len(names)-1]
	if err := verifyWAL(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(tail)
	commits := 0
	for i := walFileHeader; i+8 <= len(b); i += 8 {
		if b[i] == walCommit && b[i+1] == 0 && b[i+2] == 0 && b[i+3] == 0 {
			commits++
		}
	}
	if commits < 2 {
		t.Skipf("the tail segment holds %d batches; the test needs two", commits)
	}
	flip(t, tail, walFileHeader)
	if err := verifyWAL(dir); !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("an early batch of the tail damaged: %v", err)
	}
}

func TestVerifyWALLeavesATornLastWriteToRaftWAL(t *testing.T) {
	dir := t.TempDir()
	names := writeWAL(t, dir, 12, 4)
	tail := names[len(names)-1]
	b, _ := os.ReadFile(tail)
	// The last commit frame: damage a payload byte after the one before it.
	last, prev := -1, walFileHeader
	for i := walFileHeader; i+8 <= len(b); i += 8 {
		if b[i] == walCommit && b[i+1] == 0 && b[i+2] == 0 && b[i+3] == 0 {
			prev, last = last, i
		}
	}
	if last < 0 {
		t.Skip("no commit in the tail")
	}
	if prev < 0 {
		prev = walFileHeader
	}
	flip(t, tail, prev+8)
	if err := verifyWAL(dir); err != nil {
		t.Fatalf("a damaged last batch of the tail (a torn write) is raft-wal's to drop: %v", err)
	}
}

// BenchmarkVerifyWAL measures the start-up check of a log: MB/s read and
// checked.
func BenchmarkVerifyWAL(b *testing.B) {
	dir := b.TempDir()
	w, err := openWAL(dir, testLogger(b, "wal"), 0)
	if err != nil {
		b.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 400)
	idx := uint64(1)
	for range 1000 {
		var logs []*raft.Log
		for range 64 {
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: payload})
			idx++
		}
		if err := w.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	var size int64
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, n := range names {
		st, _ := os.Stat(n)
		size += st.Size()
	}
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if err := verifyWAL(dir); err != nil {
			b.Fatal(err)
		}
	}
}
