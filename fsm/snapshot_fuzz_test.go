package fsm

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// snapshotSeeds returns real snapshots of every version this build reads:
// a version 1 (msgpack records) built by hand as the old builds wrote it,
// and versions 2 to 5 written by state machines holding what each version
// adds.
func snapshotSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	ref := LeaseRef{JobID: "j2", AttemptID: "a1", Token: "k1"}
	jobs := [][]byte{
		MustEncode(CmdCreate, &CreateCommand{Now: 1, ID: "j1", Stream: "s", Payload: []byte(`{"n":1}`), IdempotencyKey: "i1", Actor: head}),
		MustEncode(CmdCreate, &CreateCommand{Now: 2, ID: "j2", Payload: []byte(`{}`), Target: "left_claw", Actor: head}),
		MustEncode(CmdClaim, &ClaimCommand{Now: 3, JobID: "j2", Targets: []string{"left_claw"}, Actor: left, AttemptID: "a1", LeaseToken: "k1", LeaseNanos: lease}),
		MustEncode(CmdComment, &CommentCommand{Now: 4, JobID: "j2", Actor: left, Text: "half way"}),
		MustEncode(CmdFail, &FailCommand{Now: 5, Ref: ref, Actor: left, Error: JobError{Code: "E", Message: "m"}}),
		MustEncode(CmdBlobChunk, &BlobChunkCommand{BlobID: "b", Data: []byte("xyz")}),
		MustEncode(CmdBlobCommit, &BlobCommitCommand{Now: 6, BlobID: "b", Size: 3, ContentType: "text/plain", Chunks: 1}),
	}
	devq := [][]byte{
		MustEncode(CmdRegistrySet, &RegistrySetCommand{Now: 7, Actor: head, Registry: Registry{Classes: DefaultTaskClasses,
			Tools: []Tool{{Name: "run", TaskClass: "FAST_SCRIPT"}}, Scripts: []Script{{Path: "a.sh", Name: "a", Tags: []string{"x"}}}}}),
		MustEncode(CmdSessionCreate, &SessionCreateCommand{Now: 8, ID: "ses1", Name: "s1", Actor: head}),
		MustEncode(CmdStreamCreate, &StreamCreateCommand{Now: 9, ID: "str1", Name: "a", Session: "s1", Actor: head}),
		MustEncode(CmdTaskCreate, &TaskCreateCommand{Now: 10, ID: "t1", Stream: "a", ToolName: "run", Timeout: 30, Payload: []byte(`{}`), Actor: head}),
	}
	cp := [][]byte{
		MustEncode(CmdGatewayRegister, &GatewayRegisterCommand{Now: 11, ID: "g1", Address: "http://g1", Metadata: map[string]string{"zone": "a"}, Capacity: 2, Actor: head}),
		MustEncode(CmdWorkerRegister, &WorkerRegisterCommand{Now: 12, ID: "w1", Gateway: "g1", Capabilities: []string{"gpu"}, Capacity: 1, Actor: head}),
		MustEncode(CmdRoute, &RouteCommand{Now: 13, JobID: "j1", Spec: RouteSpec{Capabilities: []string{"gpu"}, Key: "d1"}, Actor: head}),
	}
	feed := [][]byte{
		MustEncode(CmdFeedOn, &FeedOnCommand{Now: 14}),
		MustEncode(CmdCreate, &CreateCommand{Now: 15, ID: "j3", Payload: []byte(`3`), Actor: head}),
		MustEncode(CmdClaim, &ClaimCommand{Now: 16, Actor: left, AttemptID: "a2", LeaseToken: "k2", LeaseNanos: lease}),
	}
	var out [][]byte
	var log [][]byte
	for _, part := range [][][]byte{jobs, devq, cp, feed} {
		log = append(log, part...)
		f, _ := New(Config{})
		for i, e := range log {
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e})
		}
		s, _ := f.Snapshot()
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			tb.Fatal(err)
		}
		out = append(out, sink.Bytes())
	}
	out = append(out, snapshotV1(tb))
	return out
}

// snapshotV1 is a version 1 snapshot: msgpack header, msgpack records and
// the trailer.
func snapshotV1(tb testing.TB) []byte {
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	mp := codec.NewEncoder(bw, msgpackHandle)
	put := func(t byte, v interface{}) {
		bw.WriteByte(t)
		if err := mp.Encode(v); err != nil {
			tb.Fatal(err)
		}
	}
	put(snapHeader, snapHeaderRecord{Version: 1, Index: 3})
	put(snapJob, &jobV1{Job: Job{ID: "old", Stream: DefaultStream, Payload: []byte(`1`), State: StateQueued, MaxAttempts: 3,
		CreatedAt: 1, UpdatedAt: 1, CreateIndex: 1, QueueIndex: 1, ModifyIndex: 1},
		History: []Event{{Seq: 1, At: 1, Type: EventCreated, Actor: "head", To: StateQueued.Code()}}})
	put(snapBlob, &Blob{ID: "b", Size: 2, Chunks: 1, CreatedAt: 2})
	put(snapChunk, &BlobChunk{BlobID: "b", Data: []byte("hi")})
	put(snapEnd, snapEndRecord{Jobs: 1, Blobs: 1, Chunks: 1})
	bw.Flush()
	return b.Bytes()
}

// snapAllocBound is the most restoring a snapshot of n bytes may allocate:
// the 1 MiB read buffer, room for a small record, and a generous multiple
// of the input. A length prefix must not make it allocate what the input
// does not hold.
func snapAllocBound(n int) uint64 { return 4<<20 + 512*uint64(n) }

// FuzzReadSnapshot: a snapshot comes from a peer (raft's InstallSnapshot)
// or a backup file. Any bytes restore or are refused with an error, never
// a panic; restoring allocates in proportion to the input, whatever its
// length prefixes say; and a state that restores is consistent, writes a
// snapshot that restores to the same state (write(read(x)) is a fixed
// point after one round).
func FuzzReadSnapshot(f *testing.F) {
	for _, raw := range snapshotSeeds(f) {
		f.Add(raw)
	}
	f.Add([]byte{})
	f.Add([]byte{snapHeader})
	f.Add([]byte{snapHeader, 0x82, 0xa7, 'V', 'e', 'r', 's', 'i', 'o', 'n', 0x09, 0xa5, 'I', 'n', 'd', 'e', 'x', 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := readSnapshot(bytes.NewReader(data))
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, snapAllocBound(len(data)); got > bound {
			t.Fatalf("reading a %d-byte snapshot allocated %d bytes (bound %d)", len(data), got, bound)
		}
		if err != nil {
			return
		}
		f1, _ := New(Config{})
		if err := f1.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("readSnapshot accepts it, Restore refuses it: %v", err)
		}
		checkIndexes(t, f1)
		first := writeSnapshot(t, f1)
		f2, _ := New(Config{})
		if err := f2.Restore(io.NopCloser(bytes.NewReader(first))); err != nil {
			t.Fatalf("a restored state's own snapshot does not restore: %v", err)
		}
		checkIndexes(t, f2)
		if second := writeSnapshot(t, f2); !bytes.Equal(first, second) {
			t.Fatalf("write(read(x)) is not a fixed point:\n%q\n%q", first, second)
		}
	})
}

func writeSnapshot(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, _ := f.Snapshot()
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// The seeds are what they claim: one restorable snapshot of each version.
func TestSnapshotFuzzSeeds(t *testing.T) {
	want := []int{2, 3, 4, 5, 1}
	for i, raw := range snapshotSeeds(t) {
		_, h, err := readSnapshot(bytes.NewReader(raw))
		if err != nil || h.Version != want[i] {
			t.Fatalf("seed %d: version %d, %v; want version %d", i, h.Version, err, want[i])
		}
	}
}
