package systemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// cpStep takes a step of the task API, retrying while the cluster has no
// leader or is still checking that every node applies the step (a fresh
// cluster's first seconds); any other answer is returned.
func cpStep(t *testing.T, base, id, verb string, body api.TaskStepRequest) *apiResp {
	t.Helper()
	var r *apiResp
	apiEventually(t, 30*time.Second, verb+" "+id, func() error {
		var err error
		r, err = apiRequest("POST", base+"/v1/tasks/"+id+"/"+verb, apiLeft, body)
		if err != nil {
			return err
		}
		if r.Status == http.StatusServiceUnavailable {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	return r
}

func cpTask(t *testing.T, base, id string) api.ControlTask {
	t.Helper()
	var task api.ControlTask
	apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/v1/tasks/"+id+"?consistent", apiHead, nil), 200), &task)
	return task
}

func cpWantRefused(t *testing.T, r *apiResp, from, to string) {
	t.Helper()
	apiWantError(t, r, 409, api.CodeIllegalTransition)
	var eb api.ErrorBody
	apiDecode(t, r, &eb)
	if eb.Error.From != from || eb.Error.To != to {
		t.Fatalf("refusal names %s → %s, want %s → %s: %s", eb.Error.From, eb.Error.To, from, to, r)
	}
}

func cpClaim(t *testing.T, base, agent, stream string) *api.ControlTask {
	t.Helper()
	var a api.ControlTaskClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/v1/tasks/claim", apiLeft,
		api.ControlTaskClaimRequest{AgentID: agent, Streams: []string{stream}}), 200), &a)
	if !a.Claimed || a.Task.State != api.StateClaimed || a.Task.LeaseToken == "" || a.Task.AgentID != agent {
		t.Fatalf("claim: %+v", a)
	}
	return a.Task
}

// The seed's task state machine on three processes: a claim is claimed,
// an explicit start makes it running, complete before start and release
// after success are 409 illegal_transition naming from and to and change
// nothing; a start repeated after the leader's death is answered as a
// repeat; the same job reads as its canonical status through the v0 API.
func TestTaskStateMachineOnThreeNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	stream := wName("tsm")
	id := wCreate(t, fs[0].URL, stream, map[string]int{"n": 1}, map[string]interface{}{"maxAttempts": 3}).ID
	task := cpClaim(t, fs[1].URL, "agent-1", stream)
	if task.ID != id || task.Status != api.JobStatusRunning {
		t.Fatalf("claimed %+v, want %s", task, id)
	}
	lease := api.TaskStepRequest{AgentID: "agent-1", AttemptID: task.AttemptID, LeaseToken: task.LeaseToken}
	done := lease
	done.Result = json.RawMessage(`{"summary":"ok"}`)

	cpWantRefused(t, cpStep(t, fs[0].URL, id, "complete", done), api.StateClaimed, api.StateSucceeded)
	if now := cpTask(t, fs[1].URL, id); now.State != api.StateClaimed || now.ModifyIndex != task.ModifyIndex {
		t.Fatalf("a refused complete changed the task: %+v", now)
	}
	var ans api.TaskStepAnswer
	apiDecode(t, apiWant(t, cpStep(t, fs[0].URL, id, "start", lease), 200), &ans)
	if ans.Task.State != api.StateRunning || ans.Task.RunningAt.IsZero() || ans.Duplicate {
		t.Fatalf("start: %+v", ans)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	apiDecode(t, apiWant(t, cpStep(t, fs[1].URL, id, "start", lease), 200), &ans)
	if !ans.Duplicate || ans.Task.State != api.StateRunning {
		t.Fatalf("start repeated after the failover: %+v", ans)
	}
	apiDecode(t, apiWant(t, cpStep(t, fs[0].URL, id, "complete", done), 200), &ans)
	if ans.Task.State != api.StateSucceeded || string(ans.Task.Result) != `{"summary":"ok"}` {
		t.Fatalf("complete: %+v", ans)
	}
	cpWantRefused(t, cpStep(t, fs[1].URL, id, "release", lease), api.StateSucceeded, api.StateReleased)
	if j := wGetJob(t, fs[1].URL, id); j.Status != "done" {
		t.Fatalf("the succeeded task's job is %s", j.Status)
	}

	// claimed → released → claimed (the release gives the attempt back),
	// then claimed → failed, final without requeue.
	id2 := wCreate(t, fs[0].URL, stream, map[string]int{"n": 2}, map[string]interface{}{"maxAttempts": 1}).ID
	t2 := cpClaim(t, fs[0].URL, "agent-2", stream)
	apiDecode(t, apiWant(t, cpStep(t, fs[1].URL, id2, "release", api.TaskStepRequest{LeaseToken: t2.LeaseToken, Reason: "not for me"}), 200), &ans)
	if t2.ID != id2 || ans.Task.State != api.StateReleased || ans.Task.Status != api.JobStatusQueued {
		t.Fatalf("release: %+v", ans)
	}
	t3 := cpClaim(t, fs[1].URL, "agent-3", stream)
	if t3.ID != id2 || t3.Attempt != 1 {
		t.Fatalf("released → claimed: %+v", t3)
	}
	apiDecode(t, apiWant(t, cpStep(t, fs[0].URL, id2, "fail", api.TaskStepRequest{LeaseToken: t3.LeaseToken,
		Error: &api.JobError{Code: "no_gpu", Message: "needs a GPU"}}), 200), &ans)
	if ans.Task.State != api.StateFailed || ans.Task.Status != api.JobStatusFailed {
		t.Fatalf("fail: %+v", ans)
	}
	cpWantRefused(t, cpStep(t, fs[0].URL, id2, "start", api.TaskStepRequest{LeaseToken: t3.LeaseToken}), api.StateFailed, api.StateRunning)
	// Bad input is refused before anything is proposed.
	apiWantError(t, apiDo(t, "POST", fs[0].URL+"/v1/tasks/"+id2+"/start", apiLeft, api.TaskStepRequest{}), 400, api.CodeInvalidRequest)
	apiWantError(t, apiDo(t, "POST", fs[0].URL+"/v1/tasks/claim", apiLeft, api.ControlTaskClaimRequest{}), 400, api.CodeInvalidRequest)
}

// The health-aware reaper on three processes: a task whose worker is
// alive (its registry heartbeats go on) but silent on the task past the
// lease goes back (released) while it has attempts left, and ends
// failed_timeout on its last, also when the leader that granted the
// leases died in between.
func TestTaskTimesOutWhileItsWorkerIsAlive(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "3", "REAPER_INTERVAL_MS": "200", "SPINE_LEASE_GRACE_MS": "500"})
	leader, fs := apiRoles(t, c)
	gw, agent := wName("tgw"), wName("silent")
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/gateways", apiHead, api.GatewayRegisterRequest{ID: gw, Address: "http://10.3.3.3:7000", Capacity: 4}), 201)
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/v1/workers", apiHead, api.WorkerRegisterRequest{ID: agent, Gateway: gw, Capacity: 2}), 201)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := client.New(c.URLs(), client.WithToken(apiLeft))
	if err != nil {
		t.Fatal(err)
	}
	go func() { // the worker and its gateway stay alive throughout
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			_, _ = cl.RegisteredWorkerHeartbeat(ctx, agent)
			_, _ = cl.GatewayHeartbeat(ctx, gw)
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	stream := wName("tto")
	retry := wCreate(t, fs[0].URL, stream, map[string]int{"n": 1}, map[string]interface{}{"maxAttempts": 2}).ID
	last := wCreate(t, fs[0].URL, stream, map[string]int{"n": 2}, map[string]interface{}{"maxAttempts": 1}).ID
	for _, id := range []string{retry, last} {
		task := cpClaim(t, fs[1].URL, agent, stream)
		if task.ID != id {
			t.Fatalf("claimed %s, want %s", task.ID, id)
		}
		apiWant(t, cpStep(t, fs[0].URL, id, "start", api.TaskStepRequest{AgentID: agent, LeaseToken: task.LeaseToken}), 200)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "both leases timed out", func() error {
		for id, want := range map[string]string{retry: api.StateReleased, last: api.StateFailedTimeout} {
			r, err := apiRequest("GET", fs[1].URL+"/v1/tasks/"+id+"?consistent", apiHead, nil)
			if err != nil {
				return err
			}
			var task api.ControlTask
			if err := json.Unmarshal(r.Body, &task); err != nil || task.State != want {
				return fmt.Errorf("%s is %s (%s), want %s", id, task.State, r, want)
			}
		}
		return nil
	})
	var w api.Worker
	apiDecode(t, apiDo(t, "GET", fs[0].URL+"/v1/workers/"+agent+"?consistent", apiHead, nil), &w)
	if w.Health != api.HealthHealthy {
		t.Fatalf("the silent worker is %s: the timeout came from its health, not its silence on the task", w.Health)
	}
	if j := wGetJob(t, fs[0].URL, last); j.Status != "dead" {
		t.Fatalf("the timed-out task's job is %s, want dead (redrivable)", j.Status)
	}
}

// The event feed on three processes: a client following GET /v1/events
// on the leader while jobs flow, the leader killed under it, resumes on
// another node with Last-Event-ID and receives every event exactly once:
// its events are, job by job, the jobs' replicated histories (heartbeats
// aside), and, seq for seq, what a fresh reader of a survivor reads.
func TestEventStreamResumesOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	apiEventually(t, 20*time.Second, "the feed on", func() error {
		var st api.SystemState
		r, err := apiRequest("GET", leader.URL+"/v1/state", apiHead, nil)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(r.Body, &st); err != nil || !st.Events.On {
			return fmt.Errorf("feed: %+v (%v)", st.Events, err)
		}
		return nil
	})
	stream := wName("feed")
	urls := []string{leader.URL, fs[0].URL, fs[1].URL} // the stream starts on the leader
	follower, err := client.New(urls, client.WithToken(apiHead))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		got []*client.Event
	)
	followed := make(chan error, 1)
	go func() {
		followed <- follower.Events(ctx, &client.EventsParams{FromOldest: true, Kinds: []string{"job"}, Stream: stream},
			func(e *client.Event) error {
				mu.Lock()
				got = append(got, e)
				mu.Unlock()
				return nil
			})
	}()

	// Jobs flow through the survivors' client while the leader dies.
	work, err := client.New([]string{fs[0].URL, fs[1].URL}, client.WithToken(apiLeft))
	if err != nil {
		t.Fatal(err)
	}
	head, err := client.New([]string{fs[0].URL, fs[1].URL}, client.WithToken(apiHead))
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 30
	var ids []string
	for i := range jobs {
		if i == jobs/3 {
			// The follower, reading from the leader, has seen the first
			// jobs' four events each (created, claimed, started, completed)
			// when the leader dies under it.
			apiEventually(t, 20*time.Second, "the first events followed", func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(got) < 4*i {
					return fmt.Errorf("%d events", len(got))
				}
				return nil
			})
			if err := c.Kill(leader); err != nil {
				t.Fatal(err)
			}
		}
		j, err := head.JobCreate(ctx, &client.JobCreateParams{Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Stream: stream})
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		ids = append(ids, j.ID)
		task, err := work.ControlTaskClaim(ctx, &client.ControlTaskClaimParams{AgentID: "feeder", Streams: []string{stream},
			MaxWaitMS: 5000, ClaimID: fmt.Sprintf("feed-claim-%s-%d", stream, i)})
		if err != nil || task == nil || task.ID != j.ID {
			t.Fatalf("claim %d: %+v %v", i, task, err)
		}
		lease := &client.TaskStepParams{AgentID: "feeder", AttemptID: task.AttemptID, LeaseToken: task.LeaseToken}
		if _, err := work.ControlTaskStep(ctx, j.ID, client.StepStart, lease); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		lease.Result = json.RawMessage(`{"summary":"fed"}`)
		if _, err := work.ControlTaskStep(ctx, j.ID, client.StepComplete, lease); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}

	// What the jobs' histories say happened, in order.
	want := map[string][]string{}
	total := 0
	for _, id := range ids {
		evs, err := head.JobEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type != "heartbeat" {
				want[id] = append(want[id], e.Type)
				total++
			}
		}
	}
	apiEventually(t, 30*time.Second, "every event delivered", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < total {
			return fmt.Errorf("%d of %d events", len(got), total)
		}
		return nil
	})
	cancel()
	if err := <-followed; !errors.Is(err, context.Canceled) {
		t.Fatalf("the follower stopped: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	perJob := map[string][]string{}
	for i, e := range got {
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Fatalf("event %d (seq %d) after seq %d", i, e.Seq, got[i-1].Seq)
		}
		perJob[e.ID] = append(perJob[e.ID], e.Type)
	}
	for _, id := range ids {
		if !slices.Equal(perJob[id], want[id]) {
			t.Fatalf("job %s: events %v, history %v", id, perJob[id], want[id])
		}
	}
	if len(got) != total {
		t.Fatalf("%d events for %d in the histories", len(got), total)
	}
	// A fresh reader of a survivor reads the same seqs.
	fresh, err := client.New([]string{fs[1].URL}, client.WithToken(apiHead))
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	var again []uint64
	err = fresh.Events(rctx, &client.EventsParams{FromOldest: true, Kinds: []string{"job"}, Stream: stream}, func(e *client.Event) error {
		again = append(again, e.Seq)
		if len(again) == len(got) {
			return errors.New("done")
		}
		return nil
	})
	if err == nil || err.Error() != "done" {
		t.Fatalf("fresh reader: %v after %d events", err, len(again))
	}
	for i := range again {
		if again[i] != got[i].Seq {
			t.Fatalf("event %d: seq %d on a survivor, %d through the failover", i, again[i], got[i].Seq)
		}
	}
	// And through the CLI (its node list still names the dead leader).
	code, out, errOut := devCLI(t, c, t.TempDir(), t.TempDir(), apiHead, "events", "--from-oldest", "--kind", "job", "--stream", stream,
		"--limit", strconv.Itoa(len(got)))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(got) {
		t.Fatalf("spine events: exit %d, %d lines for %d events\n%s", code, len(lines), len(got), errOut)
	}
	for i, l := range lines {
		var e client.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq != got[i].Seq || e.ID != got[i].ID || e.Type != got[i].Type {
			t.Fatalf("spine events line %d: %s (%v), want seq %d", i, l, err, got[i].Seq)
		}
	}
}
