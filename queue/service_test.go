package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

var (
	head = fsm.Actor{Role: fsm.HeadRole}
	claw = fsm.Actor{Role: "left_claw", WorkerID: "w1"}
)

// clock is a leader clock the test moves.
type clock struct{ offset atomic.Int64 }

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func (c *clock) now() time.Time      { return epoch.Add(time.Duration(c.offset.Load())) }
func (c *clock) add(d time.Duration) { c.offset.Add(int64(d)) }
func ptr[T any](v T) *T              { return &v }
func payload(i int) json.RawMessage  { return json.RawMessage(fmt.Sprint(i)) }
func service(n *memcluster.Node, cl *clock, cfg queue.Config) *queue.Service {
	cfg.Now = cl.now
	return queue.New(cfg, n.Raft, n.FSM)
}

// The queue's operations on a real three-node cluster: a job goes from
// create through a long-poll claim, heartbeats and complete, and every node
// ends with the same state.
func TestLifecycleThroughTheService(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{Lease: time.Minute, LeaseRenewFraction: 0.5})
	ctx := context.Background()

	// A claim parked on an empty stream wakes when the job is committed.
	type claimed struct {
		j   *fsm.Job
		err error
	}
	got := make(chan claimed, 1)
	go func() {
		j, _, err := svc.ClaimNext(ctx, queue.ClaimNextInput{Streams: []string{"s"}, Actor: claw, Wait: 10 * time.Second})
		got <- claimed{j, err}
	}()
	waitFor(t, "the claim to park", func() bool { return svc.Stats().ClaimWaiters == 1 })

	j, created, idx, err := svc.Create(ctx, queue.CreateInput{Payload: payload(1), Stream: ptr("s"), IdempotencyKey: "k1", Actor: head})
	if err != nil || !created || idx == 0 {
		t.Fatalf("create: %v created=%v index=%d", err, created, idx)
	}
	again, created, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(2), Stream: ptr("s"), IdempotencyKey: "k1", Actor: head})
	if err != nil || created || again.ID != j.ID {
		t.Fatalf("a repeated key made %v (created=%v, err %v), want job %s again", again, created, err, j.ID)
	}
	c1 := <-got
	if c1.err != nil || c1.j == nil || c1.j.ID != j.ID || c1.j.State != fsm.StateRunning {
		t.Fatalf("parked claim got %+v, %v; want job %s running", c1.j, c1.err, j.ID)
	}
	ref := fsm.LeaseRef{JobID: j.ID, AttemptID: c1.j.Lease.AttemptID, Token: c1.j.Lease.Token}

	// A heartbeat soon after the claim is answered from the committed
	// lease: no entry.
	before := leader.Raft.AppliedIndex()
	if _, _, err := svc.Heartbeat(ctx, queue.HeartbeatInput{Ref: ref, Actor: claw}); err != nil {
		t.Fatal(err)
	}
	if after := leader.Raft.AppliedIndex(); after != before || svc.Stats().LocalHeartbeats != 1 {
		t.Fatalf("early heartbeat: applied %d -> %d, %d local heartbeats; want no entry and 1", before, after, svc.Stats().LocalHeartbeats)
	}
	// Past the renew fraction it is written and moves the expiry.
	cl.add(40 * time.Second)
	res, _, err := svc.Heartbeat(ctx, queue.HeartbeatInput{Ref: ref, Actor: claw})
	if err != nil || res.Job.Lease.ExpiresAt != cl.now().Add(time.Minute).UnixNano() {
		t.Fatalf("due heartbeat: %v %+v", err, res)
	}

	// A wrong token is refused, with the job's current state.
	_, _, err = svc.Complete(ctx, queue.CompleteInput{Ref: fsm.LeaseRef{JobID: j.ID, AttemptID: ref.AttemptID, Token: "nope"}, Actor: claw})
	var refusal *queue.Refusal
	if !errors.As(err, &refusal) || !errors.Is(err, fsm.ErrStaleLease) || refusal.Job == nil || refusal.Job.State != fsm.StateRunning {
		t.Fatalf("complete with a stale token: %v, want a stale-lease refusal carrying the running job", err)
	}
	res, _, err = svc.Complete(ctx, queue.CompleteInput{Ref: ref, Actor: claw, Result: json.RawMessage(`"ok"`)})
	if err != nil || res.Job.State != fsm.StateDone {
		t.Fatalf("complete: %v %+v", err, res)
	}
	// The same complete again is a duplicate, not a second completion.
	res, _, err = svc.Complete(ctx, queue.CompleteInput{Ref: ref, Actor: claw, Result: json.RawMessage(`"ok"`)})
	if err != nil || !res.Duplicate {
		t.Fatalf("repeated complete: %v %+v, want a duplicate", err, res)
	}
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// Bad input is refused before anything is proposed.
func TestInputIsCheckedBeforeProposing(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	svc := service(leader, &clock{}, queue.Config{})
	ctx := context.Background()
	before := leader.Raft.AppliedIndex()
	for name, in := range map[string]queue.CreateInput{
		"no payload":      {Actor: head},
		"null payload":    {Payload: json.RawMessage("null"), Actor: head},
		"zero attempts":   {Payload: payload(1), MaxAttempts: ptr(0), Actor: head},
		"empty stream":    {Payload: payload(1), Stream: ptr(""), Actor: head},
		"bad target":      {Payload: payload(1), Target: "a b", Actor: head},
		"zero lease":      {Payload: payload(1), LeaseSeconds: ptr(int64(0)), Actor: head},
		"key over 256 B":  {Payload: payload(1), IdempotencyKey: string(make([]byte, 257)), Actor: head},
		"task class long": {Payload: payload(1), TaskClass: string(make([]byte, 129)), Actor: head},
	} {
		var ie *queue.InputError
		if _, _, _, err := svc.Create(ctx, in); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an input error", name, err)
		}
	}
	for name, in := range map[string]queue.ClaimNextInput{
		"a role's name": {Streams: []string{"s"}, Actor: fsm.Actor{Role: "left_claw", WorkerID: "right_claw"}},
		"bad stream":    {Streams: []string{"-x"}, Actor: claw},
		"many streams":  {Streams: make([]string, queue.MaxClaimStreams+1), Actor: claw},
	} {
		var ie *queue.InputError
		if _, _, err := svc.ClaimNext(ctx, in); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an input error", name, err)
		}
	}
	var tl *queue.TooLargeError
	if _, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: json.RawMessage(`"` + string(make([]byte, queue.MaxEntryBytes)) + `"`), Actor: head}); !errors.As(err, &tl) {
		t.Errorf("an entry over MaxEntryBytes: %v, want too large", err)
	}
	if after := leader.Raft.AppliedIndex(); after != before {
		t.Fatalf("refused input moved the applied index %d -> %d", before, after)
	}
}

// Drain ends the claims waiting for work: each answers that nothing was
// claimed, at once, as a stopping node's must.
func TestDrainAnswersWaitingClaims(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	svc := service(c.Leader(5*time.Second), &clock{}, queue.Config{})
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func(i int) {
			j, _, err := svc.ClaimNext(context.Background(), queue.ClaimNextInput{
				Actor: fsm.Actor{Role: "left_claw", WorkerID: fmt.Sprint("w", i)}, Wait: 30 * time.Second})
			if err == nil && j != nil {
				err = fmt.Errorf("claimed %s from an empty queue", j.ID)
			}
			done <- err
		}(i)
	}
	waitFor(t, "three claims to park", func() bool { return svc.Stats().ClaimWaiters == 3 })
	svc.Drain()
	for i := 0; i < 3; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting claim did not end when the service drained")
		}
	}
}

// The reaper returns an expired lease's job to its queue, on whichever
// node leads; the purger deletes done jobs past retention.
func TestSweepsOnTheLeader(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{Lease: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		if _, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: payload(i), Actor: head}); err != nil {
			t.Fatal(err)
		}
	}
	lost, _, err := svc.ClaimNext(ctx, queue.ClaimNextInput{Actor: claw})
	if err != nil || lost == nil {
		t.Fatalf("claim: %v %v", lost, err)
	}
	kept, _, err := svc.ClaimNext(ctx, queue.ClaimNextInput{Actor: claw})
	if err != nil || kept == nil {
		t.Fatalf("claim: %v %v", kept, err)
	}
	if _, _, err := svc.Complete(ctx, queue.CompleteInput{Actor: claw,
		Ref: fsm.LeaseRef{JobID: kept.ID, AttemptID: kept.Lease.AttemptID, Token: kept.Lease.Token}}); err != nil {
		t.Fatal(err)
	}
	go svc.Reaper(20*time.Millisecond, 0)(ctx)
	go svc.Purger(15 * time.Second)(ctx) // sweeps every 1.5 s
	cl.add(11 * time.Second)             // past the lease, not past retention
	waitFor(t, "the reaper to requeue the expired job", func() bool {
		j, _ := leader.FSM.Read().Job(lost.ID)
		return j.State == fsm.StateQueued
	})
	if _, err := leader.FSM.Read().Job(kept.ID); err != nil {
		t.Fatalf("a done job within retention was purged: %v", err)
	}
	cl.add(10 * time.Second)
	waitFor(t, "the purger to delete the done job", func() bool {
		_, err := leader.FSM.Read().Job(kept.ID)
		return errors.Is(err, fsm.ErrNotFound)
	})
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// Reads: a follower sends default and consistent reads to the leader and
// answers stale ones itself; a leader runs a default read once, tentatively.
func TestReadConsistency(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	var follower *memcluster.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	fsvc := service(follower, &clock{}, queue.Config{})
	lsvc := service(leader, &clock{}, queue.Config{})
	ctx := context.Background()
	noop := func(uint64, bool) error { return nil }
	for _, level := range []queue.Consistency{queue.ReadDefault, queue.ReadConsistent} {
		if _, err := fsvc.Read(ctx, level, noop); !errors.Is(err, queue.ErrNotLeader) {
			t.Errorf("follower read at %d: %v, want ErrNotLeader", level, err)
		}
	}
	if _, err := fsvc.Read(ctx, queue.ReadStale, func(_ uint64, tentative bool) error {
		if tentative {
			return errors.New("a stale read is final")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	stands, err := lsvc.Read(ctx, queue.ReadDefault, func(idx uint64, tentative bool) error {
		runs++
		if !tentative || idx == 0 {
			return fmt.Errorf("default read on the leader: tentative=%v index=%d", tentative, idx)
		}
		return nil
	})
	if err != nil || runs != 1 || !stands {
		t.Fatalf("%v, %d runs, stands %v", err, runs, stands)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The developer queue on a real cluster: a task claimed and never finished
// is auto-failed by the leader's reaper at twice its timeout, with the
// seed's message; the task purger deletes it past retention; every node
// ends with the same state.
func TestTaskAutoFailAndPurgeOnTheLeader(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := svc.SetRegistry(ctx, fsm.Registry{Tools: []fsm.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT", Timeout: 2}}}, head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSession(ctx, "s", "", head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateStream(ctx, "auth", "s", "do it", head); err != nil {
		t.Fatal(err)
	}
	tk, _, _, err := svc.Enqueue(ctx, queue.EnqueueInput{Stream: "auth", ToolName: "run-bash", Payload: json.RawMessage(`{}`), Actor: head})
	if err != nil {
		t.Fatal(err)
	}
	j, st, _, err := svc.ClaimTask(ctx, queue.RoleCaller(claw.Role), "auth", claw.WorkerID, 0, "")
	if err != nil || j == nil || j.ID != tk.ID || st.Instructions != "do it" {
		t.Fatalf("claim: %v %v %v", j, st, err)
	}
	go svc.Reaper(10*time.Millisecond, 0)(ctx)
	go svc.TaskPurger(20 * time.Millisecond)(ctx)
	cl.add(3 * time.Second) // stale, not yet twice the timeout
	if jobs, _, _ := svc.Tasks(queue.RoleCaller(fsm.HeadRole), queue.TaskFilter{Stale: true}); len(jobs) != 1 {
		t.Fatalf("%d stale tasks, want 1", len(jobs))
	}
	cl.add(2 * time.Second)
	waitFor(t, "the reaper to auto-fail the task", func() bool {
		j, _ := leader.FSM.Read().Job(tk.ID)
		return j.State == fsm.StateFailed
	})
	j, _ = leader.FSM.Read().Job(tk.ID)
	if j.Error == nil || j.Error.Code != fsm.AutoFailCode || j.Error.Message != "Auto-failed: task exceeded 2x timeout (2s) with no complete/fail reported. Likely worker crash or disconnect." {
		t.Fatalf("auto-fail error: %+v", j.Error)
	}
	cl.add(73 * time.Hour)
	waitFor(t, "the task purger to delete the failed task", func() bool {
		_, err := leader.FSM.Read().Job(tk.ID)
		return errors.Is(err, fsm.ErrNotFound)
	})
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A keyed claim whose answer was lost (its leader stopped right after the
// claim committed) repeated on the next leader answers the same task and
// lease, not a second task; the other task stays queued.
func TestKeyedClaimRepeatedOnTheNextLeader(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	ctx := context.Background()
	svc := service(leader, cl, queue.Config{})
	if _, err := svc.SetRegistry(ctx, fsm.Registry{Tools: []fsm.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}}, head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSession(ctx, "s", "", head); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateStream(ctx, "auth", "s", "", head); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		tk, _, _, err := svc.Enqueue(ctx, queue.EnqueueInput{Stream: "auth", ToolName: "run-bash", Payload: json.RawMessage(`{}`), Actor: head})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	first, _, _, err := svc.ClaimTask(ctx, queue.RoleCaller(claw.Role), "auth", claw.WorkerID, 0, "claim-0001")
	if err != nil || first == nil || first.ID != ids[0] {
		t.Fatalf("keyed claim: %v %v", first, err)
	}
	c.Stop(leader)
	next := c.Leader(10 * time.Second)
	svc2 := service(next, cl, queue.Config{})
	again, _, _, err := svc2.ClaimTask(ctx, queue.RoleCaller(claw.Role), "auth", claw.WorkerID, time.Second, "claim-0001")
	if err != nil || again == nil || again.ID != first.ID || again.Lease.Token != first.Lease.Token || again.Attempts != 1 {
		t.Fatalf("repeated keyed claim on the next leader: %+v %v, first %+v", again, err, first)
	}
	if j, _ := next.FSM.Read().Job(ids[1]); j.State != fsm.StateQueued {
		t.Fatalf("the repeat took the other task: %s", j.State)
	}
	other := fsm.Actor{Role: claw.Role, WorkerID: "w2"}
	if _, _, _, err := svc2.ClaimTask(ctx, queue.RoleCaller(other.Role), "auth", other.WorkerID, 0, "claim-0001"); err == nil {
		t.Fatal("another worker's claim with a key in use was not refused")
	}
	if _, _, _, err := svc2.ClaimTask(ctx, queue.RoleCaller(claw.Role), "auth", claw.WorkerID, 0, "short"); err == nil {
		t.Fatal("a malformed claim id was accepted")
	}
	c.Restart(leader)
	if err := c.CheckConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// ValidName accepts exactly the documented names.
func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "w-1": true, "gpu:a100": true, "x.y_z": true, strings.Repeat("a", 128): true,
		"": false, "-a": false, "_a": false, ".a": false, "a b": false, "a/b": false, "é": false,
		strings.Repeat("a", 129): false, "a\x00": false,
	} {
		if got := queue.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v", name, got)
		}
	}
}
