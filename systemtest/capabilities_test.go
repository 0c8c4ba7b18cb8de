package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// Capabilities on three processes, across a leader kill: a worker without
// gpu is never handed the job that requires it (it gets the plain one, then
// nothing, and is not pointed at the job's stream), status lists the job as
// one no live worker can take, and after the leader dies a gpu worker
// claims it through another node and completes it. The CLI creates with
// --requires and shows the unmatched jobs in stream stats.
func TestCapabilitiesAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "caps"
	code, out, errOut := spineCLI(t, c.URLs(), t.TempDir(), []string{"SPINE_TOKEN=" + apiHead},
		"jobs", "create", "--payload", `{"train":"resnet"}`, "--stream", stream, "--requires", "gpu,cuda:12", "--output", "json")
	if code != 0 {
		t.Fatalf("jobs create --requires: exit %d: %s %s", code, out, errOut)
	}
	var gpu api.Job
	if err := json.Unmarshal([]byte(out), &gpu); err != nil || !slices.Equal(gpu.Requires, []string{"cuda:12", "gpu"}) {
		t.Fatalf("created %+v (%v): %s", gpu, err, out)
	}
	var plain api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": 2}), http.StatusCreated), &plain)

	claim := func(url, worker string, caps []string, waitMS int64) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft,
			api.WorkerClaimRequest{WorkerID: worker, Streams: []string{stream}, MaxWaitMS: waitMS, Capabilities: caps}), http.StatusOK), &wc)
		return wc
	}
	wc := claim(fs[0].URL, "cpu-1", nil, 5000)
	if !wc.Claimed || wc.JobID != plain.ID {
		t.Fatalf("the cpu worker's claim: %+v, want the plain job %s", wc, plain.ID)
	}
	// cpu-1 cannot do the plain job either: not for it, for good.
	var ack api.WorkerAck
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[1].URL+"/internal/worker/release", apiLeft, api.WorkerReleaseRequest{WorkerID: "cpu-1",
		JobID: plain.ID, AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Reason: "not my kind of job", NotForMe: true}), http.StatusOK), &ack)
	if !ack.Requeued || ack.Status != api.JobStatusQueued {
		t.Fatalf("release not for me: %+v", ack)
	}
	if wc := claim(fs[0].URL, "cpu-1", []string{"cuda:12"}, 300); wc.Claimed {
		t.Fatalf("a worker with cuda:12 but no gpu got %s", wc.JobID)
	}
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/jobs/"+gpu.ID+"/claim", apiLeft, map[string]any{}), http.StatusConflict, api.CodeMissingCapability)

	// Status: no live worker has gpu and cuda:12 (the cpu worker's
	// cuda:12 alone does not cover it).
	apiEventually(t, 10*time.Second, "the gpu job listed as unmatched", func() error {
		var si api.StreamInfo
		if err := apiGet(fs[1].URL+"/streams/"+stream+"?consistent", apiLeft, &si); err != nil {
			return err
		}
		if len(si.Unmatched) != 1 || si.Unmatched[0].Jobs != 1 || !slices.Equal(si.Unmatched[0].Requires, gpu.Requires) {
			return fmt.Errorf("stream %+v", si)
		}
		return nil
	})
	if code, out, errOut := spineCLI(t, c.URLs(), t.TempDir(), []string{"SPINE_TOKEN=" + apiHead}, "stream", "stats", "--output", "table"); code != 0 || !strings.Contains(out, "1 needing cuda:12+gpu") {
		t.Fatalf("stream stats (exit %d) does not show the unmatched job:\n%s%s", code, out, errOut)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The worker without gpu still never gets it, nor the plain job it
	// gave back; another worker gets the plain job, the gpu worker the
	// gpu job.
	if wc := claim(fs[0].URL, "cpu-1", nil, 300); wc.Claimed {
		t.Fatalf("after the failover the cpu worker got %s", wc.JobID)
	}
	if wc := claim(fs[1].URL, "cpu-2", nil, 10000); !wc.Claimed || wc.JobID != plain.ID {
		t.Fatalf("another cpu worker's claim after the failover: %+v, want %s", wc, plain.ID)
	}
	wc = claim(fs[1].URL, "gpu-1", []string{"gpu", "cuda:12", "lang:python"}, 10000)
	if !wc.Claimed || wc.JobID != gpu.ID {
		t.Fatalf("the gpu worker's claim after the failover: %+v", wc)
	}
	apiWant(t, apiDo(t, "POST", fs[0].URL+"/internal/worker/complete", apiLeft, api.WorkerCompleteRequest{WorkerID: "gpu-1", JobID: gpu.ID,
		AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken, Result: json.RawMessage(`{"summary":"trained"}`)}), http.StatusOK)
	var attempts api.JobAttemptList
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/jobs/"+gpu.ID+"/attempts?consistent", apiHead, nil), http.StatusOK), &attempts)
	if a := attempts.Attempts; len(a) != 1 || a[0].WorkerID != "gpu-1" || a[0].Outcome != api.OutcomeCompleted {
		t.Fatalf("attempts %+v", a)
	}
	var si api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "GET", fs[0].URL+"/streams/"+stream+"?consistent", apiHead, nil), http.StatusOK), &si)
	if len(si.Unmatched) != 0 || si.Done != 1 {
		t.Fatalf("stream after the gpu job: %+v", si)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
}
