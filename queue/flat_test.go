package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// flatService is a service with scan bound maxScan on a one-node cluster.
func flatService(t *testing.T, maxScan int) (*queue.Service, *memcluster.Node) {
	t.Helper()
	c := memcluster.Start(t, memcluster.Options{Nodes: 1})
	n := c.Leader(5 * time.Second)
	return service(n, &clock{}, queue.Config{MaxScan: maxScan}), n
}

func createN(t *testing.T, svc *queue.Service, stream string, n int) []*fsm.Job {
	t.Helper()
	var out []*fsm.Job
	for i := range n {
		j, _, _, err := svc.Create(context.Background(), queue.CreateInput{Payload: payload(i), Stream: ptr(stream), Actor: head})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

func jobIDs(jobs []*fsm.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	sort.Strings(out)
	return out
}

// The system state and the agents view are exact with more running jobs
// than a list may scan for one page: every agent's jobs, and each
// stream's running and queued counts.
func TestSystemStateIsExactPastTheScanBound(t *testing.T) {
	const bound = 10
	svc, _ := flatService(t, bound)
	ctx := context.Background()
	createN(t, svc, "s", 30)
	createN(t, svc, "t", 5)
	want := map[string][]string{}
	for i := range 3 * bound {
		a := fsm.Actor{Role: fsm.RoleLeftClaw, WorkerID: fmt.Sprintf("w%d", i%3)}
		j, _, err := svc.ClaimNext(ctx, queue.ClaimNextInput{Streams: []string{"s", "t"}, Actor: a})
		if err != nil || j == nil {
			t.Fatalf("claim %d: %v %v", i, j, err)
		}
		want[a.WorkerID] = append(want[a.WorkerID], j.ID)
	}
	// The bound is in force for a page of jobs: a filter that matches none
	// of the first jobs stops there, with a cursor.
	if jobs, next, err := svc.List(queue.RoleCaller(fsm.HeadRole), fsm.ListFilter{Stream: "t"}); err != nil || len(jobs) != 0 || next == 0 {
		t.Fatalf("jobs of t under a scan bound of %d: %d jobs, cursor %d, %v; want a short page with a cursor", bound, len(jobs), next, err)
	}
	for _, role := range []string{fsm.HeadRole, fsm.RoleLeftClaw} {
		st := svc.SystemState(queue.RoleCaller(role))
		for name, agents := range map[string][]*queue.Agent{"state": st.Agents, "agents": svc.Agents(queue.RoleCaller(role))} {
			got := map[string][]string{}
			for _, a := range agents {
				got[a.ID] = jobIDs(a.Jobs)
			}
			for w, ids := range want {
				if !slices.Equal(got[w], jobIDs(fsmJobs(ids))) {
					t.Fatalf("%s as %s: %s runs %v, want %v", name, role, w, got[w], ids)
				}
			}
		}
		depth := map[string][2]int{}
		for _, d := range st.Streams {
			depth[d.Stream] = [2]int{d.Queued, d.Running}
		}
		if depth["s"] != [2]int{0, 30} || depth["t"] != [2]int{5, 0} || st.Counts[fsm.StateRunning] != 30 || st.Counts[fsm.StateQueued] != 5 {
			t.Fatalf("as %s: queues %v, counts %v; want s 30 running, t 5 queued", role, depth, st.Counts)
		}
	}
}

// fsmJobs makes jobs of ids (for jobIDs' sorting).
func fsmJobs(ids []string) []*fsm.Job {
	var out []*fsm.Job
	for _, id := range ids {
		out = append(out, &fsm.Job{ID: id})
	}
	return out
}

// The dead letters are paged over the failed and dead jobs alone: none
// among many more jobs than a page may scan is an empty page with no
// cursor; a few are paged with cursors, the last page without; and the
// page's cost is the dead letters', not the other jobs'.
func TestDLQPagesOnlyTheDeadLetters(t *testing.T) {
	svc, n := flatService(t, 50)
	ctx := context.Background()
	jobs := createN(t, svc, "s", 200)
	if dl, next, err := svc.ListDLQ(fsm.ListFilter{}); err != nil || len(dl) != 0 || next != 0 {
		t.Fatalf("no dead letters among 200 jobs: %d, cursor %d, %v; want an empty page and no cursor", len(dl), next, err)
	}
	var want []string
	for i, j := range []*fsm.Job{jobs[10], jobs[90], jobs[150]} {
		c, _, err := svc.ClaimJob(ctx, j.ID, claw, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := svc.Fail(ctx, queue.FailInput{Ref: fsm.LeaseRef{JobID: j.ID, AttemptID: c.Lease.AttemptID, Token: c.Lease.Token},
			Actor: claw, Error: fsm.JobError{Message: "no"}})
		if err != nil || res.Job.State != fsm.StateFailed {
			t.Fatalf("fail %d: %v %v", i, res, err)
		}
		want = append(want, j.ID)
	}
	createN(t, svc, "s", 100)
	var got []string
	var after uint64
	for page := 0; page < 3; page++ {
		before := n.FSM.JobsVisited()
		dl, next, err := svc.ListDLQ(fsm.ListFilter{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if v := n.FSM.JobsVisited() - before; v > 3 {
			t.Fatalf("page %d examined %d jobs for a page of 2 of 3 dead letters", page, v)
		}
		got = append(got, jobIDsInOrder(dl)...)
		if (next == 0) != (page == 1) {
			t.Fatalf("page %d: cursor %d", page, next)
		}
		if next == 0 {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
	if dl, _, err := svc.ListDLQ(fsm.ListFilter{State: fsm.StateDead}); err != nil || len(dl) != 0 {
		t.Fatalf("dead: %d, %v; want none", len(dl), err)
	}
	var bad *queue.InputError
	if _, _, err := svc.ListDLQ(fsm.ListFilter{State: fsm.StateQueued}); !errors.As(err, &bad) {
		t.Fatalf("queued dead letters: %v, want invalid", err)
	}
}

func jobIDsInOrder(jobs []*fsm.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
