package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// The Go Worker with several slots, across a leader kill: it claims for
// its free slots in batches and never runs more jobs than it has slots;
// every job ends done, each completed once (one completed event); and when
// the worker is stopped while a handler gives up, that job is released,
// back in the queue without an attempt used.
func TestGoWorkerSlotsAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "4", "REAPER_INTERVAL_MS": "200", "SPINE_LEASE_GRACE_MS": "500"})
	leader, fs := apiRoles(t, c)
	const stream, slots, total = "slots", 4, 24
	ids := apiCreateJobs(t, fs, stream, total)
	cl, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	var mu sync.Mutex
	handled := map[string]bool{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := client.NewWorker(cl, client.WorkerConfig{WorkerID: "slots-1", Streams: []string{stream}, Concurrency: slots, MaxWait: 2 * time.Second,
		Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-time.After(150 * time.Millisecond):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			mu.Lock()
			handled[claim.JobID] = true
			mu.Unlock()
			return json.RawMessage(`{"summary":"ok"}`), nil
		}})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	apiEventually(t, 30*time.Second, "a quarter of the jobs to be handled", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(handled) < total/4 {
			return fmt.Errorf("%d handled", len(handled))
		}
		return nil
	})
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apiDoneOnce(t, nl.URL, stream, ids, 60*time.Second)
	if m := most.Load(); m > slots {
		t.Fatalf("%d handlers ran at once with %d slots", m, slots)
	}

	// A job whose handler gives up on shutdown is released.
	var last api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", nl.URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": "slow", "maxAttempts": 1}), http.StatusCreated), &last)
	apiEventually(t, 30*time.Second, "the last job to run", func() error {
		if running.Load() == 0 {
			return fmt.Errorf("no handler running")
		}
		return nil
	})
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/jobs/"+last.ID+"?consistent", apiHead, nil), http.StatusOK), &last)
	if last.Status != api.JobStatusQueued || last.Attempts != 0 {
		t.Fatalf("a job stopped by the worker's shutdown: %s with %d attempts (want queued, 0)", last.Status, last.Attempts)
	}
}

// A worker that lost its claim's answer across a leader kill: it reads
// its lease back from another node (GET /internal/worker/held), then
// heartbeats and completes the job through the v0 routes with the worker
// contract's own bodies, as they are.
func TestHeldLeaseAndWorkerBodiesAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": "lost-answer", "payload": 1}), http.StatusCreated), &j)
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "forgetful", Streams: []string{"lost-answer"}}), http.StatusOK), &wc)
	if wc.JobID != j.ID {
		t.Fatalf("claimed %+v, want %s", wc, j.ID)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	var held api.WorkerHeld
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[1].URL+"/internal/worker/held?worker_id=forgetful", apiLeft, nil), http.StatusOK), &held)
	if len(held.Jobs) != 1 || held.Jobs[0].JobID != j.ID || held.Jobs[0].LeaseToken != wc.LeaseToken || held.Jobs[0].AttemptID != wc.AttemptID {
		t.Fatalf("held after the leader's kill: %+v, claimed %+v", held, wc)
	}
	h := held.Jobs[0]
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+j.ID+"/heartbeat", apiLeft, api.WorkerHeartbeatRequest{WorkerID: "forgetful", JobID: h.JobID,
		LeaseToken: h.LeaseToken, AttemptID: h.AttemptID, Stream: h.Stream, MessageID: h.MessageID, Progress: []byte(`{"pct":50}`)}), http.StatusOK)
	var done api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs/"+j.ID+"/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "forgetful", JobID: h.JobID,
		AttemptID: h.AttemptID, LeaseToken: h.LeaseToken, Stream: h.Stream, MessageID: h.MessageID, Result: []byte(`{"summary":"ok"}`)}), http.StatusOK), &done)
	if done.Status != api.JobStatusDone {
		t.Fatalf("complete with the worker body on the v0 route: %+v", done)
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[1].URL+"/internal/worker/held?worker_id=forgetful", apiLeft, nil), http.StatusOK), &held)
	if len(held.Jobs) != 0 {
		t.Fatalf("held after the complete: %+v", held)
	}
}

// A Go worker that cannot do a job returns a *client.Release (not for
// it): the job goes to the worker that can, across a leader kill, done in
// its first counted attempt, and the first worker is never handed it
// again.
func TestGoWorkerReleasesJobNotForIt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	var gpuJob api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": "mixed", "payload": map[string]string{"needs": "gpu"}}), http.StatusCreated), &gpuJob)
	cl, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ worker, job string }
	seenc := make(chan seen, 100)
	start := func(ctx context.Context, id string, gpu bool) {
		w := client.NewWorker(cl, client.WorkerConfig{WorkerID: id, Streams: []string{"mixed"}, MaxWait: time.Second,
			Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
				seenc <- seen{id, claim.JobID}
				if !gpu && strings.Contains(string(claim.Payload), "gpu") {
					return nil, &client.Release{Reason: "needs a GPU", NotForMe: true}
				}
				return json.RawMessage(`{"summary":"done on ` + id + `"}`), nil
			}})
		go func() { _ = w.Run(ctx) }()
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start(ctx, "cpu-1", false)
	select {
	case s := <-seenc:
		if s.worker != "cpu-1" || s.job != gpuJob.ID {
			t.Fatalf("first handled %+v", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the CPU worker never got the job")
	}
	apiEventually(t, 30*time.Second, "the release", func() error {
		var j api.Job
		if err := apiGet(fs[0].URL+"/jobs/"+gpuJob.ID+"?consistent", apiHead, &j); err != nil {
			return err
		}
		if j.Status != api.JobStatusQueued || len(j.NotFor) != 1 || j.NotFor[0] != "cpu-1" {
			return fmt.Errorf("%s, not for %v", j.Status, j.NotFor)
		}
		return nil
	})
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	start(ctx, "gpu-1", true)
	var j api.Job
	apiEventually(t, 60*time.Second, "the GPU worker to do the job", func() error {
		if err := apiGet(fs[1].URL+"/jobs/"+gpuJob.ID+"?consistent", apiHead, &j); err != nil {
			return err
		}
		if j.Status != api.JobStatusDone {
			return fmt.Errorf("%s", j.Status)
		}
		return nil
	})
	var result map[string]string
	if err := json.Unmarshal(j.Result, &result); err != nil || result["summary"] != "done on gpu-1" || j.Attempts != 1 {
		t.Fatalf("the job: %s, %d attempts (want 1: the release used none)", j.Result, j.Attempts)
	}
	stop()
	n := 0
	for drained := false; !drained; {
		select {
		case s := <-seenc:
			if s.worker == "cpu-1" && s.job == gpuJob.ID {
				n++
			}
		default:
			drained = true
		}
	}
	if n != 0 {
		t.Fatalf("the CPU worker was handed the job %d more times", n)
	}
}

// A Go worker restarted after a crash resumes the jobs it held, across a
// leader kill: a process claimed two jobs as "resumer", saved a checkpoint
// on one and died; the leader is killed; a Worker with the same id and
// ResumeHeld runs the first again at once, with its checkpoint, in the
// same attempt (long before its 5-minute lease runs out), releases the
// one it has no slot for, and then does that one too.
func TestGoWorkerResumesHeldJobsAfterRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	var ids []string
	for i := range 2 {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": "resume", "payload": i}), http.StatusCreated), &j)
		ids = append(ids, j.ID)
	}
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "resumer", Streams: []string{"resume"}, MaxJobs: 2}), http.StatusOK), &wc)
	if len(wc.Jobs) != 2 || wc.Jobs[0].JobID != ids[0] {
		t.Fatalf("the first process's claim: %+v", wc)
	}
	first := wc.Jobs[0]
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/internal/worker/heartbeat", apiLeft, api.WorkerHeartbeatRequest{WorkerID: "resumer", JobID: first.JobID,
		LeaseToken: first.LeaseToken, Checkpoint: []byte(`{"page":7}`)}), http.StatusOK)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}

	cl, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkpoints := make(chan string, 4)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := client.NewWorker(cl, client.WorkerConfig{WorkerID: "resumer", Streams: []string{"resume"}, Concurrency: 1, ResumeHeld: true, MaxWait: time.Second,
		Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
			checkpoints <- claim.JobID + " " + string(claim.Checkpoint)
			return json.RawMessage(`{"summary":"ok"}`), nil
		}})
	go func() { _ = w.Run(ctx) }()
	select {
	case got := <-checkpoints:
		if got != ids[0]+` {"page":7}` {
			t.Fatalf("the first job run after the restart: %q", got)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the held job was not resumed")
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		apiEventually(t, 60*time.Second, "job "+id+" done", func() error {
			var j api.Job
			if err := apiGet(nl.URL+"/jobs/"+id+"?consistent", apiHead, &j); err != nil {
				return err
			}
			if j.Status != api.JobStatusDone {
				return fmt.Errorf("%s", j.Status)
			}
			if j.Attempts != 1 {
				t.Fatalf("job %s done after %d attempts, want 1 (resumed, or released without using one)", id, j.Attempts)
			}
			return nil
		})
	}
}
