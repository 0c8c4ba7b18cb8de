package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A result contract holds across a leader kill during a refused complete:
// a job with a resultSchema is claimed through a follower, a complete
// whose result does not match, sent through that follower, is refused
// with every mismatch, and
// the leader is killed right after the refusal. Once a new leader is up,
// the same lease completes with a matching result (the refusal left the
// lease as it was), and the history shows the refused complete exactly
// once.
func TestResultContractAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "contract"
	schema := json.RawMessage(`{"type":"object","required":["answer","score"],"additionalProperties":false,
		"properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":0,"maximum":10}}}`)
	var j api.Job
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": "q", "resultSchema": schema}),
		http.StatusCreated), &j)
	if len(j.ResultSchema) == 0 {
		t.Fatalf("created job without its schema: %+v", j)
	}

	// A schema outside the subset is refused by any node, naming the keyword.
	apiWantError(t, apiDo(t, "POST", fs[1].URL+"/jobs", apiHead, map[string]any{"payload": 1, "resultSchema": map[string]any{"allOf": []any{}}}),
		http.StatusBadRequest, api.CodeUnsupportedSchema)

	// Claimed through the other follower: the claim shows the contract.
	var wc api.WorkerClaim
	apiEventually(t, 30*time.Second, "claim through a follower", func() error {
		r, err := apiRequest("POST", fs[1].URL+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "agent-1", Streams: []string{stream}, MaxWaitMS: 2000})
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("%s", r)
		}
		if err := json.Unmarshal(r.Body, &wc); err != nil {
			return err
		}
		if !wc.Claimed {
			return fmt.Errorf("nothing claimed yet")
		}
		return nil
	})
	if wc.JobID != j.ID || string(wc.ResultSchema) != string(j.ResultSchema) {
		t.Fatalf("claim %+v, want job %s with its schema %s", wc, j.ID, j.ResultSchema)
	}
	ref := api.WorkerCompleteRequest{WorkerID: "agent-1", JobID: wc.JobID, AttemptID: wc.AttemptID, LeaseToken: wc.LeaseToken}

	// The mismatching complete, through the follower that took the claim.
	bad := ref
	bad.Result = json.RawMessage(`{"answer":7,"score":11,"note":"x"}`)
	r := apiDo(t, "POST", fs[1].URL+"/internal/worker/complete", apiLeft, bad)
	apiWantError(t, r, http.StatusBadRequest, api.CodeResultMismatch)
	var refusal api.WorkerRefusal
	apiDecode(t, r, &refusal)
	want := []api.ResultMismatch{
		{Path: "/answer", Expected: "type string", Got: "type number"},
		{Path: "/note", Expected: "no property not named in properties", Got: "present"},
		{Path: "/score", Expected: "a number <= 10", Got: "11"},
	}
	if refusal.OK || fmt.Sprint(refusal.Error.Mismatches) != fmt.Sprint(want) {
		t.Fatalf("refusal %+v, want mismatches %+v", refusal, want)
	}

	// The leader dies right after the refusal.
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The same lease completes with a matching result, through either
	// survivor (retried while the new leader settles in).
	good := ref
	good.Result = json.RawMessage(`{"answer":"yes","score":9}`)
	apiEventually(t, 30*time.Second, "the matching complete after the failover", func() error {
		r, err := apiRequest("POST", fs[0].URL+"/internal/worker/complete", apiLeft, good)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			if r.Status == http.StatusBadRequest || r.Status == http.StatusConflict || r.Status == http.StatusForbidden {
				t.Fatalf("the matching complete was refused: %s", r)
			}
			return fmt.Errorf("%s", r)
		}
		var ack api.WorkerCompleteAck
		if err := json.Unmarshal(r.Body, &ack); err != nil || !ack.OK {
			return fmt.Errorf("ack %s: %v", r, err)
		}
		return nil
	})

	for _, n := range fs {
		got := apiGetJob(t, n.URL, apiHead, j.ID, "")
		if got.Status != "done" || string(got.Result) != `{"answer":"yes","score":9}` || got.Attempts != 1 {
			t.Fatalf("job on %s: %s attempts %d result %s", n.URL, got.Status, got.Attempts, got.Result)
		}
		refused := 0
		for _, ev := range apiEvents(t, n.URL, apiHead, j.ID) {
			if ev.Type == "complete_refused" {
				refused++
				if ev.AttemptID != wc.AttemptID || ev.WorkerID != "agent-1" || ev.Text == "" {
					t.Fatalf("refusal record %+v", ev)
				}
			}
		}
		if refused != 1 {
			t.Fatalf("history on %s shows %d refused completes, want exactly 1", n.URL, refused)
		}
	}
}
