package memcluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// A backup restored on a leader that cannot reach its followers is
// installed on the leader and then unconfirmed: the answer says the
// outcome is unknown, never that nothing was restored. A restore sent to
// a node that is not the leader restores nothing and says so.
func TestRestoreUnconfirmedIsOutcomeUnknown(t *testing.T) {
	c := Start(t, Options{})
	for i := range 5 {
		create(t, c, i)
	}
	leader := c.Leader(5 * time.Second)
	meta, rc, err := leader.Raft.SaveSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var rest []*Node
	for _, n := range c.Nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	if _, err := rest[0].Raft.RestoreSnapshot(bytes.NewReader(snap), meta.Size, meta.Index, 5*time.Second); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want not the leader", err)
	}
	c.Partition([]*Node{leader}, rest)
	_, err = leader.Raft.RestoreSnapshot(bytes.NewReader(snap), meta.Size, meta.Index, 5*time.Second)
	if !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("restore on a leader cut off from its followers: %v, want outcome unknown", err)
	}
	c.Heal()
	if err := c.CheckConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A backup restored into a cluster whose log is shorter than the backup's
// (a new cluster, say) goes past the backup's index: a job created after
// it gets a create index after every restored job's, so it queues behind
// them and none of them leaves its lane.
func TestRestoreIntoAShorterLogKeepsCreateIndexesUnique(t *testing.T) {
	src := Start(t, Options{})
	for i := range 40 {
		create(t, src, i)
	}
	meta, rc, err := src.Leader(5 * time.Second).Raft.SaveSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	dst := Start(t, Options{})
	leader := dst.Leader(5 * time.Second)
	if _, err := leader.Raft.RestoreSnapshot(bytes.NewReader(snap), meta.Size, meta.Index, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	id := create(t, dst, 1000)
	r := dst.Leader(5 * time.Second).FSM.Read()
	fresh, _ := r.Job(id)
	jobs, _, err := r.List(fsm.ListFilter{State: fsm.StateQueued, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 41 {
		t.Fatalf("%d queued jobs listed after the restore and a create, want 41", len(jobs))
	}
	for _, j := range jobs {
		if j.ID != id && j.CreateIndex >= fresh.CreateIndex {
			t.Fatalf("restored job %s has create index %d, the job created after the restore %d", j.ID, j.CreateIndex, fresh.CreateIndex)
		}
	}
	if err := dst.CheckConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
