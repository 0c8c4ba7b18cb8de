package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// A checkpoint saved before a leader kill is handed to the next attempt
// after it: the first attempt reports progress and saves a checkpoint
// through a follower, the leader dies, the attempt fails with requeue
// through the new leader; a Go client Worker then claims the job, finds
// the checkpoint in its claim, reports progress of its own and completes.
func TestCheckpointAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "long"
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]int{"pages": 18}, "maxAttempts": 3}), http.StatusCreated), &j)
	var wc api.WorkerClaim
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "first", Streams: []string{stream}}), http.StatusOK), &wc)
	if !wc.Claimed || wc.JobID != j.ID || wc.Checkpoint != nil {
		t.Fatalf("first claim %+v", wc)
	}
	hb := api.WorkerHeartbeatRequest{WorkerID: "first", JobID: j.ID, LeaseToken: wc.LeaseToken,
		Progress: json.RawMessage(`{"pct":40}`), Checkpoint: json.RawMessage(`{"page":7}`)}
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/heartbeat", apiLeft, hb), http.StatusOK)
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+j.ID+"?consistent", apiHead, nil), http.StatusOK), &j)
	if string(j.Progress) != `{"pct":40}` || string(j.Checkpoint) != `{"page":7}` {
		t.Fatalf("job after the report: progress %s checkpoint %s", j.Progress, j.Checkpoint)
	}
	big := api.WorkerHeartbeatRequest{WorkerID: "first", JobID: j.ID, LeaseToken: wc.LeaseToken, Progress: json.RawMessage(fmt.Sprintf(`"%0*d"`, 5000, 0))}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/heartbeat", apiLeft, big), http.StatusRequestEntityTooLarge, "too_large")

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apiWant(t, apiDo(t, "POST", nl.URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "first", JobID: j.ID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Code: "oom", Message: "out of memory", Retryable: true}}), http.StatusOK)

	cl, err := client.New(c.URLs(), client.WithToken(apiRight), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := client.NewWorker(cl, client.WorkerConfig{WorkerID: "second", Streams: []string{stream}, MaxWait: 2 * time.Second,
		Handler: func(ctx context.Context, claim *client.WorkerClaim) (json.RawMessage, error) {
			got <- string(claim.Checkpoint)
			if err := client.ReportProgress(ctx, map[string]int{"pct": 100}); err != nil {
				return nil, err
			}
			if err := client.SaveCheckpoint(ctx, map[string]int{"page": 18}); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"summary":"18 pages"}`), nil
		}})
	go func() { _ = w.Run(ctx) }()
	select {
	case cp := <-got:
		if cp != `{"page":7}` {
			t.Fatalf("the second attempt got checkpoint %q, want {\"page\":7}", cp)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no second attempt")
	}
	apiEventually(t, 30*time.Second, "the job to complete", func() error {
		if err := apiGet(nl.URL+"/jobs/"+j.ID+"?consistent", apiHead, &j); err != nil {
			return err
		}
		if j.Status != api.JobStatusDone {
			return fmt.Errorf("status %s", j.Status)
		}
		return nil
	})
	if j.Attempts != 2 || string(j.Checkpoint) != `{"page":18}` {
		t.Fatalf("done job: attempts %d, checkpoint %s", j.Attempts, j.Checkpoint)
	}
	if err := client.ReportProgress(context.Background(), 1); err != client.ErrNotAWorkerJob {
		t.Fatalf("ReportProgress outside a handler: %v", err)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
