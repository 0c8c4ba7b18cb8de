package cluster

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
)

// recordingFile is a WritableFile in memory that remembers which bytes were
// written with zeros by the wrapper and which with data.
type recordingFile struct {
	failZeros bool // zero fills fail, as on a full disk
	fillTries int
	buf       []byte
	isData    []bool // byte i last written by an append (not a zero fill)
	zeroed    []bool // byte i written with zeros at least once
	zeros     int64  // bytes written with zeros
}

func (r *recordingFile) WriteAt(p []byte, off int64) (int, error) {
	if need := int(off) + len(p); need > len(r.buf) {
		r.buf = append(r.buf, make([]byte, need-len(r.buf))...)
		r.isData = append(r.isData, make([]bool, need-len(r.isData))...)
		r.zeroed = append(r.zeroed, make([]bool, need-len(r.zeroed))...)
	}
	copy(r.buf[off:], p)
	fill := len(p) > 0 && &p[0] == &zeroChunk[0]
	if fill {
		r.fillTries++
	}
	if fill && r.failZeros {
		return 0, errors.New("no space left on device")
	}
	if fill {
		r.zeros += int64(len(p))
	}
	for i := range p {
		r.isData[int(off)+i] = !fill
		if fill {
			r.zeroed[int(off)+i] = true
		}
	}
	return len(p), nil
}
func (r *recordingFile) ReadAt(p []byte, off int64) (int, error) { return copy(p, r.buf[off:]), nil }
func (r *recordingFile) Close() error                            { return nil }
func (r *recordingFile) Sync() error                             { return nil }

// TestZeroAheadNeverOverwritesData appends frames of random sizes, as
// raft-wal does, to a new segment and to a reopened one (whole commits, then a
// torn write past them), and checks after each append that every byte written
// before it still holds its data, that the append landed on bytes already
// written with zeros, that past the log's end there are only zeros, and that
// nothing is written past the preallocated size or filled twice.
func TestZeroAheadNeverOverwritesData(t *testing.T) {
	const size = 3*zeroAheadChunk + 12345
	for _, tc := range []struct {
		name       string
		kept, torn int // bytes of whole commits, then of a torn write, already in the file
	}{
		{"new segment", 0, 0},
		{"reopened tail", 1234567, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			rec := &recordingFile{}
			var want []byte
			if tc.kept > 0 {
				// What a previous run left: raft-wal's own writes, then garbage.
				old := make([]byte, tc.kept+tc.torn)
				for i := range old {
					old[i] = byte(1 + rng.IntN(255))
				}
				rec.WriteAt(old, 0)
				for i := range rec.isData {
					rec.zeroed[i] = true // counts as written before
				}
				want = append(want, old[:tc.kept]...)
			}
			f := &zeroAheadFile{WritableFile: rec, size: size}
			off := int64(tc.kept)
			for off < size-1 {
				n := min(int64(1+rng.IntN(9000)), size-off)
				if rng.IntN(50) == 0 {
					n = min(int64(zeroAheadChunk+rng.IntN(5000)), size-off) // an append larger than a chunk
				}
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(1 + rng.IntN(255)) // never zero, so a zero fill over data shows
				}
				if _, err := f.WriteAt(p, off); err != nil {
					t.Fatal(err)
				}
				want = append(want, p...)
				off += n

				if len(rec.buf) > size {
					t.Fatalf("wrote %d bytes into a %d-byte segment", len(rec.buf), size)
				}
				if !bytes.Equal(rec.buf[:off], want) {
					t.Fatalf("after appending up to %d: data already written was changed", off)
				}
				for i := off - n; i < off; i++ {
					if !rec.isData[i] {
						t.Fatalf("byte %d of an append was last written by a zero fill", i)
					}
					if !rec.zeroed[i] {
						t.Fatalf("byte %d was appended where no zeros had been written", i)
					}
				}
				for i := off; i < int64(len(rec.buf)) && i < off+8192; i++ {
					if rec.buf[i] != 0 || !rec.zeroed[i] {
						t.Fatalf("byte %d past the end of the log is not a written zero", i)
					}
				}
			}
			for i := range rec.buf {
				if !rec.isData[i] || !rec.zeroed[i] {
					t.Fatalf("byte %d: data %v, zero-filled first %v", i, rec.isData[i], rec.zeroed[i])
				}
			}
			if most := int64(size - tc.kept); rec.zeros > most {
				t.Errorf("%d bytes of zeros written past the first %d of a %d-byte segment: a range was filled twice", rec.zeros, tc.kept, size)
			}
		})
	}
}

// TestZeroAheadFailedFillKeepsAppending: zeros that cannot be written do not
// fail the append, which is written as raft-wal would write it, and no zero
// fill is tried again.
func TestZeroAheadFailedFillKeepsAppending(t *testing.T) {
	rec := &recordingFile{failZeros: true}
	f := &zeroAheadFile{WritableFile: rec, size: 4 * zeroAheadChunk}
	var want []byte
	for i := 0; i < 3*zeroAheadChunk/1000; i++ {
		p := bytes.Repeat([]byte{byte(1 + i%255)}, 1000)
		if n, err := f.WriteAt(p, int64(len(want))); err != nil || n != len(p) {
			t.Fatalf("append %d: %d bytes, %v", i, n, err)
		}
		want = append(want, p...)
	}
	if !bytes.Equal(rec.buf, want) {
		t.Fatal("the appends did not land as written")
	}
	if rec.fillTries != 1 {
		t.Errorf("%d zero fills tried, want 1: after a failure there is no point trying again", rec.fillTries)
	}
}

// TestZeroAheadWALRoundTrip runs raft-wal on the zero-ahead file system over
// several segment rotations and two reopens: every entry reads back as stored,
// and the segment files are the same sizes as with raft-wal's own file
// system (the zeros stay inside the preallocated space).
func TestZeroAheadWALRoundTrip(t *testing.T) {
	const segSize = 2*zeroAheadChunk + 4096
	payload := func(i uint64) []byte {
		p := make([]byte, 100+int(i%3000))
		r := rand.New(rand.NewPCG(i, i))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		return p
	}
	// fill stores ~13 MB of entries in batches of 1-16 (six or more
	// segments) and returns the last index and the segments' sizes.
	fill := func(w *wal.WAL, dir string) (uint64, map[string]int64) {
		rng := rand.New(rand.NewPCG(3, 4))
		idx := uint64(1)
		for idx < 8000 {
			batch := make([]*raft.Log, 1+rng.IntN(16))
			for j := range batch {
				batch[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: payload(idx)}
				idx++
			}
			if err := w.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
		sizes := map[string]int64{}
		for _, s := range segs {
			fi, err := os.Stat(s)
			if err != nil {
				t.Fatal(err)
			}
			sizes[filepath.Base(s)] = fi.Size()
		}
		return idx - 1, sizes
	}

	// On, whatever file system the test's temporary directory is on.
	zeroing := &zeroAheadFS{FS: walfs.New(), on: true}

	plainDir := t.TempDir()
	plain, err := wal.Open(plainDir, wal.WithSegmentSize(segSize))
	if err != nil {
		t.Fatal(err)
	}
	_, wantSizes := fill(plain, plainDir)

	dir := t.TempDir()
	w, err := openWALWith(dir, hclog.NewNullLogger(), segSize, zeroing)
	if err != nil {
		t.Fatal(err)
	}
	last, sizes := fill(w, dir)
	if len(sizes) < 4 {
		t.Fatalf("%d segments: the test did not rotate enough to mean anything", len(sizes))
	}
	if !maps.Equal(sizes, wantSizes) {
		t.Errorf("segments %v, raft-wal's own file system makes %v", sizes, wantSizes)
	}

	w, err = openWALWith(dir, hclog.NewNullLogger(), segSize, zeroing)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.Equal(l.Data, payload(i)) {
			t.Fatalf("entry %d reads back different data", i)
		}
	}
	// The reopened tail (zeroed ahead from where the log ends) takes appends
	// past a zero chunk and a rotation, and all of it reads back after
	// another reopen.
	for i := last + 1; i <= last+2000; i++ {
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: payload(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openWALWith(dir, hclog.NewNullLogger(), segSize, zeroing)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := uint64(1); i <= last+2000; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d after the second reopen: %v", i, err)
		}
		if !bytes.Equal(l.Data, payload(i)) {
			t.Fatalf("entry %d reads back different data after the second reopen", i)
		}
	}
}
