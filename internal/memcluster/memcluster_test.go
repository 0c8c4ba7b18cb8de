package memcluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

var (
	head = fsm.Actor{Role: fsm.HeadRole}
	claw = fsm.Actor{Role: "left_claw", WorkerID: "w1"}
)

const now = int64(1_800_000_000e9)

func create(t *testing.T, c *Cluster, i int) string {
	t.Helper()
	id := fmt.Sprintf("job-%d", i)
	cmd := &fsm.CreateCommand{Now: now, ID: id, Stream: "s", Payload: []byte(`{}`), Actor: head, IdempotencyKey: "k-" + id}
	res, _, err := c.Apply(fsm.CmdCreate, cmd)
	for try := 0; errors.Is(err, cluster.ErrOutcomeUnknown) && try < 5; try++ {
		// As a client does: the same idempotency key, so never two jobs.
		res, _, err = c.Apply(fsm.CmdCreate, cmd)
	}
	if err != nil || res.Err != nil {
		t.Fatalf("create %s: %v %v", id, err, res)
	}
	return id
}

func claimNext(t *testing.T, c *Cluster, n int) (*fsm.Result, error) {
	t.Helper()
	res, _, err := c.Apply(fsm.CmdClaim, &fsm.ClaimCommand{Now: now + 1, Streams: []string{"s"}, Actor: claw,
		AttemptID: fmt.Sprintf("a-%d", n), LeaseToken: fmt.Sprintf("t-%d", n), LeaseNanos: 60e9})
	return res, err
}

func jobOn(n *Node, id string) *fsm.Job {
	j, _ := n.FSM.Read().Job(id)
	return j
}

// A leader cut off in a minority keeps no write: the majority elects a new
// leader and goes on; after healing every node holds the same queue.
func TestLeaderInMinorityLosesNothingAcknowledged(t *testing.T) {
	c := Start(t, Options{})
	var ids []string
	for i := range 10 {
		ids = append(ids, create(t, c, i))
	}
	old := c.Leader(5 * time.Second)
	var rest []*Node
	for _, n := range c.Nodes {
		if n != old {
			rest = append(rest, n)
		}
	}
	c.Partition([]*Node{old}, rest)
	c.LeaderAmong(rest, 10*time.Second)

	// A write handed to the isolated leader never commits.
	data := fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{Now: now, ID: "lost", Stream: "s", Payload: []byte(`{}`), Actor: head})
	ctx := t.Context()
	if _, _, err := old.Raft.Apply(ctx, data); err == nil {
		t.Fatal("a leader cut off from its quorum acknowledged a write")
	} else if !errors.Is(err, cluster.ErrNotLeader) && !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("isolated leader's write: %v", err)
	}

	// The majority goes on: claims, completes and more creates.
	for i := 10; i < 20; i++ {
		ids = append(ids, create(t, c, i))
	}
	var done []string
	for i := range 5 {
		res, err := claimNext(t, c, i)
		if err != nil || !res.Claimed {
			t.Fatalf("claim %d: %v %+v", i, err, res)
		}
		j := res.Job
		r, _, err := c.Apply(fsm.CmdComplete, &fsm.CompleteCommand{Now: now + 2, Actor: claw, Result: []byte(`1`),
			Ref: fsm.LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}})
		if err != nil || r.Err != nil {
			t.Fatalf("complete %s: %v %+v", j.ID, err, r)
		}
		done = append(done, j.ID)
	}
	if l := c.Leader(10 * time.Second); l == old {
		t.Fatal("the isolated node still leads")
	}

	c.Heal()
	if err := c.CheckConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		for _, id := range ids {
			if jobOn(n, id) == nil {
				t.Fatalf("%s lacks acknowledged job %s", n.ID, id)
			}
		}
		for _, id := range done {
			if j := jobOn(n, id); j.State != fsm.StateDone {
				t.Fatalf("%s: completed job %s is %s", n.ID, id, j.State)
			}
		}
		if jobOn(n, "lost") != nil {
			t.Fatalf("%s holds the write the isolated leader never committed", n.ID)
		}
	}
}

// A node stopped while the others write on, and compact their logs past
// what it has, comes back through a snapshot and converges.
func TestRestartedNodeCatchesUpBySnapshot(t *testing.T) {
	c := Start(t, Options{SnapshotThreshold: 16, TrailingLogs: 4})
	for i := range 5 {
		create(t, c, i)
	}
	leader := c.Leader(5 * time.Second)
	var down *Node
	for _, n := range c.Nodes {
		if n != leader {
			down = n
			break
		}
	}
	c.Stop(down)
	for i := 5; i < 120; i++ {
		create(t, c, i)
		if i%3 == 0 {
			if _, err := claimNext(t, c, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Restart(down)
	if err := c.CheckConverged(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if jobOn(down, "job-119") == nil {
		t.Fatal("the restarted node lacks the last job")
	}
}

// Leadership moves around under writes (the leader is cut off again and
// again); the replicas agree on every job at the end.
func TestRollingLeaderIsolation(t *testing.T) {
	c := Start(t, Options{Nodes: 5})
	n := 0
	for round := range 4 {
		old := c.Leader(5 * time.Second)
		var rest []*Node
		for _, x := range c.Nodes {
			if x != old {
				rest = append(rest, x)
			}
		}
		c.Partition([]*Node{old}, rest)
		c.LeaderAmong(rest, 10*time.Second)
		for range 10 {
			create(t, c, n)
			n++
		}
		if _, err := claimNext(t, c, round); err != nil {
			t.Fatal(err)
		}
		c.Heal()
	}
	if err := c.CheckConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// The convergence check fails when one replica's state differs.
func TestCheckConvergedSeesADivergedReplica(t *testing.T) {
	c := Start(t, Options{})
	create(t, c, 1)
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Apply a command to one replica's state machine alone, as a diverged
	// log would (at an index past the others', so the applied indexes
	// still line up once they move on).
	victim := c.Nodes[2]
	idx := victim.Raft.AppliedIndex()
	victim.FSM.Apply(rawCommand(idx, fsm.MustEncode(fsm.CmdComment, &fsm.CommentCommand{Now: now, JobID: "job-1", Actor: head, Text: "stray"})))
	err := c.CheckConverged(5 * time.Second)
	if err == nil {
		t.Fatal("a replica with a stray command passed the check")
	}
	t.Log(err)
}

func rawCommand(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}
