package snapfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveVia sends b through a Saver into a new file in pieces of step bytes
// and returns what Close said and the file's bytes.
func saveVia(t *testing.T, b []byte, step int, abort error) (*Meta, int64, []byte, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "backup.snap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewSaver(f)
	var werr error
	for off := 0; off < len(b) && werr == nil; off += step {
		_, werr = s.Write(b[off:min(off+step, len(b))])
	}
	if abort == nil {
		abort = werr
	}
	meta, n, err := s.Close(abort)
	got, rerr := os.ReadFile(f.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return meta, n, got, err
}

// A Saver writes the archive to its file as it arrives, and Close returns
// its meta once checked: the file holds the archive byte for byte, and is
// larger than a writeback chunk so the writeback ahead runs.
func TestSaverWritesAndChecks(t *testing.T) {
	state := strings.Repeat("spine state ", (writebackChunk+writebackChunk/2)/12)
	good := archive(t, state)
	for _, step := range []int{1 << 20, 32<<10 + 7} {
		meta, n, got, err := saveVia(t, good, step, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if meta.Index != 42 || meta.Size != int64(len(state)) || n != int64(len(good)) || !bytes.Equal(got, good) {
			t.Fatalf("step %d: meta %+v, %d bytes written, file of %d bytes (want %d)", step, meta, n, len(got), len(good))
		}
	}
}

// A damaged archive is refused by Close (a Write may refuse it first),
// and a download that broke is reported as its own error, not as a check.
func TestSaverRefusesDamage(t *testing.T) {
	state := strings.Repeat("x", 300_000)
	good := archive(t, state)
	bad := append([]byte(nil), good...)
	bad[bytes.Index(bad, []byte(state))+1234] ^= 1
	if _, _, _, err := saveVia(t, bad, 4096, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged archive: err = %v, want ErrCorrupt", err)
	}
	if _, _, _, err := saveVia(t, good[:len(good)/2], 4096, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("archive cut short: err = %v, want ErrCorrupt", err)
	}
	broke := errors.New("connection reset")
	if _, _, _, err := saveVia(t, good[:len(good)/2], 4096, broke); !errors.Is(err, broke) {
		t.Fatalf("broken download: err = %v, want %v", err, broke)
	}
	if _, _, _, err := saveVia(t, nil, 1, io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("nothing received: err = %v", err)
	}
}
