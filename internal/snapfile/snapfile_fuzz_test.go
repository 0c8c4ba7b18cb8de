package snapfile

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the backup archive reader: `spine snapshot restore` and
// PUT /v1/snapshot read whatever file an operator hands them. `make fuzz`
// runs each for a fixed time; `make test` runs their seeds.

// sameMeta compares metas, times by instant (a parsed time's location is
// a new value each time).
func sameMeta(a, b *Meta) bool {
	return a.Format == b.Format && a.Index == b.Index && a.Term == b.Term && a.Size == b.Size &&
		a.RaftVersion == b.RaftVersion && a.TakenAt.Equal(b.TakenAt) && a.NodeID == b.NodeID
}

// seedArchive is an archive of state as Write makes it.
func seedArchive(tb testing.TB, state string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	meta := Meta{Index: 42, Term: 3, Size: int64(len(state)), RaftVersion: 1, TakenAt: time.Unix(1_700_000_000, 0).UTC(), NodeID: "n1"}
	if err := Write(&buf, meta, strings.NewReader(state)); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzRead: any bytes are an archive Read accepts or one it refuses with
// ErrCorrupt, never a panic; it copies out no more state than the input
// holds and allocates in proportion to the input; and an archive it
// accepts holds exactly meta.Size bytes of state, and writes back (Write)
// to an archive that reads the same.
func FuzzRead(f *testing.F) {
	f.Add(seedArchive(f, "spine state"))
	f.Add(seedArchive(f, ""))
	good := seedArchive(f, strings.Repeat("x", 700))
	f.Add(good[:len(good)/2])
	f.Add(good[:len(good)-1024])
	// A file the archive does not list, and meta.json twice.
	for _, names := range [][]string{{metaName, "extra"}, {metaName, metaName}, {stateName}, {sumsName}} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, n := range names {
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: 2, Typeflag: tar.TypeReg})
			tw.Write([]byte("{}"))
		}
		tw.Close()
		f.Add(b.Bytes())
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var state bytes.Buffer
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		meta, err := Read(bytes.NewReader(data), &state)
		runtime.ReadMemStats(&after)
		if n, bound := after.TotalAlloc-before.TotalAlloc, 4<<20+64*uint64(len(data)); n > bound {
			t.Fatalf("reading a %d-byte archive allocated %d bytes (bound %d)", len(data), n, bound)
		}
		if state.Len() > len(data) {
			t.Fatalf("a %d-byte archive gave %d bytes of state", len(data), state.Len())
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || meta != nil {
				t.Fatalf("refused with %v (meta %v), not ErrCorrupt", err, meta)
			}
			return
		}
		if meta.Format != Format || int64(state.Len()) != meta.Size {
			t.Fatalf("accepted format %d with %d bytes of state, meta says %d", meta.Format, state.Len(), meta.Size)
		}
		var again bytes.Buffer
		if err := Write(&again, *meta, bytes.NewReader(state.Bytes())); err != nil {
			t.Fatalf("an accepted archive does not write back: %v", err)
		}
		var state2 bytes.Buffer
		meta2, err := Read(&again, &state2)
		if err != nil || !sameMeta(meta, meta2) || !bytes.Equal(state.Bytes(), state2.Bytes()) {
			t.Fatalf("written back: %v\n%+v\n%+v", err, meta, meta2)
		}
	})
}

// FuzzWriteRead: every meta and state Write takes reads back as they were.
func FuzzWriteRead(f *testing.F) {
	f.Add(uint64(42), uint64(3), 1, int64(1_700_000_000e9), "n1", []byte("spine state"))
	f.Add(uint64(0), uint64(0), 0, int64(0), "", []byte{})
	f.Add(^uint64(0), ^uint64(0), -1, int64(-1), "n\x00\xff\"1", bytes.Repeat([]byte{0}, 1500))
	f.Fuzz(func(t *testing.T, index, term uint64, raftVersion int, takenAt int64, node string, state []byte) {
		meta := Meta{Index: index, Term: term, Size: int64(len(state)), RaftVersion: raftVersion,
			TakenAt: time.Unix(0, takenAt).UTC(), NodeID: node}
		var b bytes.Buffer
		if err := Write(&b, meta, bytes.NewReader(state)); err != nil {
			t.Fatalf("write: %v", err)
		}
		var got bytes.Buffer
		back, err := Read(&b, &got)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		meta.Format = Format
		if !bytes.Equal(got.Bytes(), state) {
			t.Fatalf("state: %d bytes back of %d", got.Len(), len(state))
		}
		// JSON carries strings as UTF-8: each invalid byte comes back as
		// U+FFFD.
		var want string
		if js, err := json.Marshal(meta.NodeID); err == nil && json.Unmarshal(js, &want) == nil && back.NodeID == want {
			back.NodeID = meta.NodeID
		}
		if !sameMeta(&meta, back) {
			t.Fatalf("meta:\n%+v\n%+v", meta, *back)
		}
	})
}
