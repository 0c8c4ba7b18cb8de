package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/hashicorp/raft"
)

// A view nobody reads does not keep the state it was published at: once
// the writer is staleViewEntries entries past it, the FSM lets go of it, so
// the job versions replaced since are garbage (on a follower nobody reads
// from, a worked-through queue otherwise stayed in memory twice). The next
// reader sees the latest state.
func TestStaleViewIsReleased(t *testing.T) {
	f, _ := New(Config{})
	var idx uint64
	fill(t, f, 100, &idx)
	first := fmt.Sprintf("%08d-0000-4000-8000-000000000000", 1)
	queued, err := f.Read().Job(first) // publishes a view holding this version
	if err != nil || queued.State != StateQueued {
		t.Fatalf("job %s: %+v, %v", first, queued, err)
	}
	old := weak.Make(queued)
	queued = nil

	idx++
	r := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: MustEncode(CmdClaim, &ClaimCommand{
		Now: int64(idx), Streams: []string{DefaultStream}, Targets: []string{left.Role}, Actor: left,
		AttemptID: "a1", LeaseToken: "t1", LeaseNanos: lease})}).(*Result)
	if !r.Claimed || r.Job.ID != first {
		t.Fatalf("claimed %+v", r)
	}
	fill(t, f, staleViewEntries, &idx) // nobody reads meanwhile
	runtime.GC()
	if old.Value() != nil {
		t.Fatal("the queued version of a claimed job is still held, by a view nobody read for 4,096 entries")
	}

	j, err := f.Read().Job(first)
	if err != nil || j.State != StateRunning || j.Lease == nil || j.Lease.Token != "t1" {
		t.Fatalf("after the view was let go, job %s reads as %+v, %v", first, j, err)
	}
	counts, err := f.Read().Counts()
	if err != nil || counts[StateQueued] != 100+staleViewEntries-1 || counts[StateRunning] != 1 {
		t.Fatalf("counts after the view was let go: %v, %v", counts, err)
	}
}
