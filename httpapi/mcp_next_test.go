package httpapi

import (
	"net/http/httptest"
	"testing"
)

// An agent's complete with claim_next ends its job and hands it the next
// in the same call; the session keeps the new lease, so the next complete
// needs only the job_id; with nothing left, claimed says so.
func TestMCPCompleteClaimsNext(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	head, claw := mcpSession(t, ts.URL, headTok), mcpSession(t, ts.URL, leftTok)
	first := mcpEnqueueClaim(t, head, claw, "")
	second := e.create(map[string]interface{}{})["id"].(string)

	type completed struct {
		Status  string `json:"status"`
		Claimed *struct {
			Claimed bool `json:"claimed"`
			Jobs    []struct {
				JobID string `json:"job_id"`
			} `json:"jobs"`
		} `json:"claimed"`
		Next string `json:"next"`
	}
	var done completed
	mcpCall(t, claw, "complete", map[string]any{"job_id": first, "result": map[string]any{"summary": "ok"}, "claim_next": true}, &done)
	if done.Status != "done" || done.Claimed == nil || !done.Claimed.Claimed || len(done.Claimed.Jobs) != 1 || done.Claimed.Jobs[0].JobID != second {
		t.Fatalf("complete with claim_next: %+v", done)
	}
	if j := e.job(second); j.Lease == nil {
		t.Fatalf("the next job is not running: %s", j.State)
	}
	done = completed{}
	mcpCall(t, claw, "complete", map[string]any{"job_id": second, "result": map[string]any{"summary": "ok"}, "claim_next": true, "next_wait_seconds": 0}, &done)
	if done.Status != "done" || done.Claimed == nil || done.Claimed.Claimed || e.job(second).State != "done" {
		t.Fatalf("complete of the next job, nothing left: %+v (%s)", done, e.job(second).State)
	}
}
