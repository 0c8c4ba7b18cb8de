package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// A registry stored with a retention far past MaxPurgeDays (before the
// bound existed, a million days made the cut-off wrap into the future) is
// read as MaxPurgeDays: the task purger deletes a task finished longer ago
// than that and keeps one that has just finished. A reload with such a
// retention is refused before it is proposed.
func TestTaskPurgerClampsAStoredRetention(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tools := []fsm.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}
	if _, err := svc.SetRegistry(ctx, fsm.Registry{Tools: tools, PurgeDays: 1_000_000}, head); err == nil ||
		!strings.Contains(err.Error(), "purge_older_than_days must be 0 to 3650") {
		t.Fatalf("a reload with a retention of a million days: %v, want it refused", err)
	}
	// As an older version stored it, without the check.
	if _, _, err := svc.Propose(ctx, fsm.CmdRegistrySet, &fsm.RegistrySetCommand{Now: cl.now().UnixNano(),
		Registry: fsm.Registry{Tools: tools, PurgeDays: 1_000_000}, Actor: head}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSession(ctx, "s", "", head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateStream(ctx, "lane", "s", "", head); err != nil {
		t.Fatal(err)
	}
	finish := func() string {
		t.Helper()
		tk, _, _, err := svc.Enqueue(ctx, queue.EnqueueInput{Stream: "lane", ToolName: "run-bash", Payload: json.RawMessage(`{}`), Actor: head})
		if err != nil {
			t.Fatal(err)
		}
		j, _, _, err := svc.ClaimTask(ctx, queue.RoleCaller(claw.Role), "lane", claw.WorkerID, 0, "")
		if err != nil || j == nil || j.ID != tk.ID {
			t.Fatalf("claim: %v %v", j, err)
		}
		ref := fsm.LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}
		if _, _, err := svc.Complete(ctx, queue.CompleteInput{Ref: ref, Actor: claw, Result: json.RawMessage(`{"summary":"ok"}`)}); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	old := finish()
	cl.add((fsm.MaxPurgeDays + 1) * 24 * time.Hour)
	fresh := finish()
	cl.add(time.Second)
	go svc.TaskPurger(10 * time.Millisecond)(ctx)
	waitFor(t, "the task purger to delete the task finished past the retention", func() bool {
		_, err := leader.FSM.Read().Job(old)
		return errors.Is(err, fsm.ErrNotFound)
	})
	// One cut-off deleted the old task: had it been in the future, the
	// fresh one would be gone too.
	if _, err := leader.FSM.Read().Job(fresh); err != nil {
		t.Fatalf("the task finished a second ago was purged: %v", err)
	}
	if got := leader.FSM.Read().Registry().Retention(); got != fsm.MaxPurgeDays {
		t.Fatalf("retention read as %d days, want %d", got, fsm.MaxPurgeDays)
	}
}
