package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// A complete or fail sent again with the lease token alone, after the
// first was applied (as a caller does when the first answer was lost), is
// answered as the first and changes nothing: the token names its attempt.
// A token of no attempt of the job is still refused.
func TestRepeatByLeaseTokenAlone(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))

	// v0: complete.
	id := e.create(map[string]any{})["id"].(string)
	tok := e.claim(id, leftTok)["leaseToken"].(string)
	body := `{"result":{"ok":1},"leaseToken":"` + tok + `"}`
	if r := e.do("POST", "/jobs/"+id+"/complete", leftTok, body); r.Code != http.StatusOK {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
	before := e.job(id).ModifyIndex
	if r := e.do("POST", "/jobs/"+id+"/complete", leftTok, body); r.Code != http.StatusOK || r.json(t)["status"] != "done" {
		t.Fatalf("repeated complete: %d %s", r.Code, r.Body)
	}
	if e.job(id).ModifyIndex != before {
		t.Error("the repeated complete changed the job")
	}
	e.do("POST", "/jobs/"+id+"/complete", leftTok, `{"leaseToken":"not-this-jobs"}`).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)

	// v0: a fail that requeued, repeated after the job was claimed again.
	id = e.create(map[string]any{"maxAttempts": 3})["id"].(string)
	tok = e.claim(id, leftTok)["leaseToken"].(string)
	body = `{"error":"flaky","requeue":true,"leaseToken":"` + tok + `"}`
	if r := e.do("POST", "/jobs/"+id+"/fail", leftTok, body); r.Code != http.StatusOK || r.json(t)["status"] != "queued" {
		t.Fatalf("fail: %d %s", r.Code, r.Body)
	}
	e.claim(id, rightTok)
	before = e.job(id).ModifyIndex
	if r := e.do("POST", "/jobs/"+id+"/fail", leftTok, body); r.Code != http.StatusOK {
		t.Fatalf("repeated fail: %d %s", r.Code, r.Body)
	}
	if j := e.job(id); j.ModifyIndex != before || j.State != fsm.StateRunning || j.Attempts != 2 {
		t.Errorf("the repeated fail changed the job: %s after %d attempts", j.State, j.Attempts)
	}

	// A control-plane task's complete.
	id = e.create(map[string]any{"stream": "cp"})["id"].(string)
	var claim api.ControlTaskClaim
	r := e.do("POST", "/v1/tasks/claim", leftTok, `{"agent_id":"a1","streams":["cp"],"max_wait_ms":0}`)
	if err := json.Unmarshal(r.Body, &claim); err != nil || !claim.Claimed || claim.Task.ID != id {
		t.Fatalf("task claim: %d %s", r.Code, r.Body)
	}
	step := `{"agent_id":"a1","lease_token":"` + claim.Task.LeaseToken + `"}`
	if r := e.do("POST", "/v1/tasks/"+id+"/start", leftTok, step); r.Code != http.StatusOK {
		t.Fatalf("start: %d %s", r.Code, r.Body)
	}
	done := `{"agent_id":"a1","lease_token":"` + claim.Task.LeaseToken + `","result":{"summary":"ok"}}`
	for i, wantDup := range []bool{false, true} {
		var ans api.TaskStepAnswer
		r := e.do("POST", "/v1/tasks/"+id+"/complete", leftTok, done)
		if err := json.Unmarshal(r.Body, &ans); err != nil || r.Code != http.StatusOK || ans.Duplicate != wantDup || ans.Task.State != "succeeded" {
			t.Fatalf("complete %d: %d %s", i+1, r.Code, r.Body)
		}
	}
}
