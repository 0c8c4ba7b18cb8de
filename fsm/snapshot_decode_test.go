package fsm

import (
	"bytes"
	"fmt"
	"github.com/spine-queue/spine/internal/gcpace"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// bigSnapshot is the snapshot of a state of many blocks' worth of records
// (snapshot_decode.go): n jobs of 4 KiB payloads, with the feed on, and a
// blob whose one chunk is longer than a block.
func bigSnapshot(t *testing.T, n int) (*FSM, []byte) {
	t.Helper()
	f, _ := New(Config{})
	payload := []byte(`"` + strings.Repeat("p", 4094) + `"`)
	rng := rand.New(rand.NewPCG(5, 6))
	log := [][]byte{MustEncode(CmdFeedOn, &FeedOnCommand{Now: 1}), MustEncode(CmdLevel, &LevelCommand{Now: 1, Level: LatestLevel})}
	for i := range n {
		log = append(log, MustEncode(CmdCreate, &CreateCommand{Now: int64(2 + i), ID: fmt.Sprintf("%016x", rng.Uint64()),
			Payload: payload, Actor: head}))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*decodeBlockLen/2/16)
	log = append(log, MustEncode(CmdBlobChunk, &BlobChunkCommand{BlobID: "big", Data: big}),
		MustEncode(CmdBlobCommit, &BlobCommitCommand{Now: int64(n + 2), BlobID: "big", Size: int64(len(big)), ContentType: "text/plain", Chunks: 1}))
	for i, d := range log {
		f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
	}
	raw := writeSnapshot(t, f)
	if len(raw) < 8*decodeBlockLen {
		t.Fatalf("a snapshot of %d bytes: fewer than 8 blocks", len(raw))
	}
	return f, raw
}

// choppyReader hands out its bytes a few at a time, as a pipe or a socket
// may: every record's type, length and body get cut somewhere.
type choppyReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *choppyReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rng.IntN(9000))], r.b)
	r.b = r.b[n:]
	return n, nil
}

// A snapshot of many blocks, decoded on every core, restores to the state
// written (its own snapshot is the same bytes) with the jobs built in bulk
// (which they would not be, were any two blocks restored out of order),
// however the reader cuts the stream, and a record longer than a block
// with it.
func TestRestoreOfManyBlocksIsTheStateWritten(t *testing.T) {
	_, raw := bigSnapshot(t, 3000)
	for name, r := range map[string]func() io.Reader{
		"whole reads":  func() io.Reader { return bytes.NewReader(raw) },
		"choppy reads": func() io.Reader { return &choppyReader{raw, rand.New(rand.NewPCG(1, 1))} },
	} {
		before := bulkBuilds.Load()
		g, _ := New(Config{})
		if err := g.Restore(io.NopCloser(r())); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bulkBuilds.Load() == before {
			t.Fatalf("%s: the jobs were not built in bulk", name)
		}
		checkIndexes(t, g)
		if got := writeSnapshot(t, g); !bytes.Equal(got, raw) {
			t.Fatalf("%s: the restored state's snapshot differs from the one restored", name)
		}
	}
}

// A record that does not decode, or is refused, or a stream cut short,
// anywhere in a big snapshot fails the restore with an error and leaves
// the state as it was: the records of the blocks before it, decoded and
// stored already, go nowhere.
func TestACorruptRecordMidwayFailsTheRestoreAndChangesNothing(t *testing.T) {
	_, raw := bigSnapshot(t, 3000)
	head, recs, tail := snapshotRecords(t, raw)
	var jobs []int
	for i, r := range recs {
		if r[0] == snapJob {
			jobs = append(jobs, i)
		}
	}
	mid := jobs[len(jobs)/2]
	with := func(r []byte) []byte {
		out := append([][]byte(nil), recs...)
		out[mid] = r
		return join(head, out, tail)
	}
	job := recs[mid]
	badBody := append([]byte(nil), job...)
	badBody[len(badBody)-1] = 0x80 // a varint cut short at the record's end
	for _, tc := range []struct {
		name, raw, err string
	}{
		{"a body that does not decode", string(with(badBody)), "restore record"},
		{"an unknown record type", string(with(append([]byte{250}, job[1:]...))), "unknown record type"},
		{"a record longer than any", string(with([]byte{snapJob, 0xff, 0xff, 0xff, 0xff, 0x7f})), "record of"},
		{"a job twice", string(join(head, append(append(append([][]byte(nil), recs[:mid+1]...), job), recs[mid+1:]...), tail)), "appears twice"},
		{"a stream cut in a record", string(raw[:len(join(head, recs[:mid], nil))+len(job)/2]), "truncated"},
		{"a stream cut between records", string(join(head, recs[:mid], nil)), "truncated"},
	} {
		f, _ := New(Config{})
		for i, d := range mixedLog(200) {
			f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: d})
		}
		was, applied := writeSnapshot(t, f), f.AppliedIndex()
		err := f.Restore(io.NopCloser(bytes.NewReader([]byte(tc.raw))))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Fatalf("%s: restore says %v, want an error of %q", tc.name, err, tc.err)
		}
		if !bytes.Equal(writeSnapshot(t, f), was) || f.AppliedIndex() != applied {
			t.Fatalf("%s: a failed restore changed the state", tc.name)
		}
		checkIndexes(t, f)
	}
}

// gcSettings are the collector's GOGC and memory limit.
func gcSettings() (percent int64, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), s[1].Value.Uint64()
}

// watchGC reads its bytes and notes the collector's settings half way.
type watchGC struct {
	r        io.Reader
	left     int
	percent  int64
	limit    uint64
	watching bool
}

func (w *watchGC) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if w.left -= n; w.left <= 0 && !w.watching {
		w.watching = true
		w.percent, w.limit = gcSettings()
	}
	return n, err
}

// While a restore reads, the collector is paced by a memory limit that
// grows with the bytes read, not by GOGC (internal/gcpace); a limit the
// operator set stays the most; once the restore ends, well or not, GOGC
// and the limit are what they were.
func TestRestorePacesTheCollectorAndSetsItBack(t *testing.T) {
	_, raw := bigSnapshot(t, 3000)
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	for _, set := range []int64{1 << 40, 64 << 20} {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(set))
		for _, broken := range []bool{false, true} {
			in := raw
			if broken {
				in = raw[:len(raw)-100]
			}
			w := &watchGC{r: bytes.NewReader(in), left: len(raw) / 2}
			g, _ := New(Config{})
			err := g.Restore(io.NopCloser(w))
			if (err != nil) != broken {
				t.Fatalf("limit %d, broken %v: %v", set, broken, err)
			}
			if w.percent != -1 || w.limit > uint64(set) || set > 1<<30 && w.limit < uint64(gcpace.RestoreRatio*len(raw)/2) {
				t.Fatalf("limit %d: half way through the restore GOGC is %d and the limit %d", set, w.percent, w.limit)
			}
			if p, l := gcSettings(); p != 150 || l != uint64(set) {
				t.Fatalf("limit %d, broken %v: after the restore GOGC is %d and the limit %d", set, broken, p, l)
			}
		}
	}
}
