package systemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// A cancel requested before a leader kill is delivered after it: a Go
// client Worker runs a job whose handler waits for its context; head
// cancels the job through a follower; the leader is killed; the worker's
// next heartbeat, answered by the new leader, says cancel, the handler's
// context ends with ErrJobCancelled, and the worker's fail ends the job
// cancelled (not queued again). A queued job is cancelled at once and never
// handed out; a job whose worker never reports ends cancelled when its
// lease runs out.
func TestCancelAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "3", "REAPER_INTERVAL_MS": "200", "SPINE_LEASE_GRACE_MS": "500"})
	leader, fs := apiRoles(t, c)
	// The silent job has a stream of its own: the Go worker's last long
	// poll on the first may still be waiting on the server when it stops.
	const stream, silentStream = "cancels", "cancels-silent"
	createIn := func(url, stream string) string {
		t.Helper()
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]int{"n": 1}, "maxAttempts": 5}), http.StatusCreated), &j)
		return j.ID
	}
	create := func(url string) string { t.Helper(); return createIn(url, stream) }
	// status reads a job's status for the waits below, to be retried: the
	// kill can set off a second election (a new leader on a loaded machine
	// that misses a follower for its lease steps down), during which a read
	// is answered 503 no_leader.
	status := func(url, id string) (api.JobStatus, error) {
		var j api.Job
		err := apiGet(url+"/jobs/"+id+"?consistent", apiHead, &j)
		return j.Status, err
	}

	// A queued job: cancelled at once.
	queued := create(fs[0].URL)
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+queued+"/cancel", apiHead, map[string]string{"reason": "not needed"}), http.StatusOK), &j)
	if j.Status != api.JobStatusCancelled || j.CancelReason != "not needed" {
		t.Fatalf("cancel of a queued job: %+v", j)
	}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+queued+"/cancel", apiLeft, nil), http.StatusForbidden, "forbidden")

	// A running job under a Go client Worker.
	running := create(fs[0].URL)
	cl, err := client.New(c.URLs(), client.WithToken(apiLeft), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	started, causes := make(chan string, 4), make(chan error, 4)
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := client.NewWorker(cl, client.WorkerConfig{WorkerID: "canceller", Streams: []string{stream}, MaxWait: 2 * time.Second,
		Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
			started <- claim.JobID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}})
	go func() { _ = w.Run(wctx) }()
	select {
	case id := <-started:
		if id != running {
			t.Fatalf("the worker ran %s, want %s", id, running)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never claimed the job")
	}
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+running+"/cancel", apiHead, map[string]string{"reason": "drill"}), http.StatusOK), &j)
	if j.Status != api.JobStatusRunning || !j.Cancel {
		t.Fatalf("cancel of a running job: %+v", j)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, client.ErrJobCancelled) {
			t.Fatalf("the handler's context ended with %v, want ErrJobCancelled", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never learned of the cancel")
	}
	apiEventually(t, 30*time.Second, "the job to end cancelled", func() error {
		if st, err := status(nl.URL, running); err != nil || st != api.JobStatusCancelled {
			return fmt.Errorf("status %q: %v", st, err)
		}
		return nil
	})
	stop()

	// A job whose worker never reports: the lease's end cancels it.
	silent := createIn(nl.URL, silentStream)
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/claim", apiRight, api.WorkerClaimRequest{WorkerID: "silent", Streams: []string{silentStream}}), http.StatusOK), &wc)
	if !wc.Claimed || wc.JobID != silent {
		t.Fatalf("claim %+v, want %s", wc, silent)
	}
	apiWant(t, apiDo(t, "POST", nl.URL+"/jobs/"+silent+"/cancel", apiHead, nil), http.StatusOK)
	var hb api.WorkerHeartbeatResult
	apiDecode(t, apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/heartbeat?consistent", apiRight,
		api.WorkerHeartbeatRequest{WorkerID: "silent", JobID: silent, LeaseToken: wc.LeaseToken}), http.StatusOK), &hb)
	if !hb.Cancel {
		t.Fatalf("heartbeat answer %+v: no cancel", hb)
	}
	apiEventually(t, 30*time.Second, "the silent job to end cancelled", func() error {
		if st, err := status(nl.URL, silent); err != nil || st != api.JobStatusCancelled {
			return fmt.Errorf("status %q: %v", st, err)
		}
		return nil
	})
	// Nothing of the stream was ever handed out again.
	apiDecode(t, apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "late", Streams: []string{stream, silentStream}}), http.StatusOK), &wc)
	if wc.Claimed {
		t.Fatalf("claimed %s after every job was cancelled", wc.JobID)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
