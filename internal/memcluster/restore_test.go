package memcluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/spine-queue/spine/cluster"
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
	if _, err := rest[0].Raft.RestoreSnapshot(bytes.NewReader(snap), meta.Size, 5*time.Second); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want not the leader", err)
	}
	c.Partition([]*Node{leader}, rest)
	_, err = leader.Raft.RestoreSnapshot(bytes.NewReader(snap), meta.Size, 5*time.Second)
	if !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("restore on a leader cut off from its followers: %v, want outcome unknown", err)
	}
	c.Heal()
	if err := c.CheckConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
