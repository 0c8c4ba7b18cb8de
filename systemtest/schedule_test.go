package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A delayed job fires once, across a leader kill: created through a
// follower with a delay, the leader is killed before its time; no claim
// takes it early; once its time has come the new leader promotes it and
// exactly one of several waiting workers gets it. A job with a retry
// backoff failed with requeue shows its next run time and is not handed
// out before it.
func TestDelayedJobFiresOnceAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "delayed"
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 1, "delaySeconds": 4}), http.StatusCreated), &j)
	if j.RunAt.IsZero() || j.Status != api.JobStatusQueued {
		t.Fatalf("delayed job %+v", j)
	}
	due := j.RunAt
	claimOnce := func(url, worker string, waitMS int64) api.WorkerClaim {
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}, MaxWaitMS: waitMS}), http.StatusOK), &wc)
		return wc
	}
	if wc := claimOnce(fs[1].URL, "early", 0); wc.Claimed {
		t.Fatalf("claimed %s before its time", wc.JobID)
	}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+j.ID+"/claim", apiLeft, map[string]any{}), http.StatusConflict, "illegal_transition")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Three workers wait on the stream through the survivors; one gets it.
	var mu sync.Mutex
	var got []api.WorkerClaim
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := apiRequest("POST", fs[i%2].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: fmt.Sprintf("w%d", i), Streams: []string{stream}, MaxWaitMS: 9000})
			if err != nil || r.Status != http.StatusOK {
				return
			}
			var wc api.WorkerClaim
			if jsonErr := json.Unmarshal(r.Body, &wc); jsonErr == nil && wc.Claimed {
				mu.Lock()
				got = append(got, wc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || got[0].JobID != j.ID {
		t.Fatalf("%d workers got the delayed job (%+v), want exactly one", len(got), got)
	}
	if now := time.Now(); now.Before(due) {
		t.Fatalf("handed out at %v, before its time %v", now, due)
	}

	// A retry backoff: failed with requeue, it waits out base seconds.
	var b api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 2, "backoff": map[string]int{"base": 3, "max": 10}}), http.StatusCreated), &b)
	wc := claimOnce(fs[0].URL, "flaky", 5000)
	if !wc.Claimed || wc.JobID != b.ID {
		t.Fatalf("claim of the backoff job: %+v", wc)
	}
	var ack api.WorkerAck
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/fail", apiLeft, api.WorkerFailRequest{WorkerID: "flaky", JobID: b.ID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Error: &api.JobError{Message: "flaky", Retryable: true}}), http.StatusOK), &ack)
	failedAt := time.Now()
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+b.ID+"?consistent", apiHead, nil), http.StatusOK), &b)
	if !ack.Requeued || b.Status != api.JobStatusQueued || b.RunAt.IsZero() || b.Backoff == nil || b.Backoff.Base != 3 {
		t.Fatalf("after the fail: ack %+v, job %+v", ack, b)
	}
	if wait := b.RunAt.Sub(failedAt); wait > 3*time.Second+500*time.Millisecond {
		t.Fatalf("backoff of %v, want at most 3 s", wait)
	}
	wc = claimOnce(fs[0].URL, "again", 15000)
	if !wc.Claimed || wc.JobID != b.ID || time.Now().Before(b.RunAt) {
		t.Fatalf("after the backoff: %+v at %v (runAt %v)", wc, time.Now(), b.RunAt)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
