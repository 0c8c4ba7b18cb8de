package httpapi

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	// next_max_jobs: several next jobs, each under its own lease, each
	// completed by its job_id alone.
	third, fourth := e.create(map[string]interface{}{})["id"].(string), e.create(map[string]interface{}{})["id"].(string)
	done = completed{}
	mcpCall(t, claw, "complete", map[string]any{"job_id": second, "result": map[string]any{"summary": "ok"}, "claim_next": true, "next_max_jobs": 5}, &done)
	if done.Status != "done" || done.Claimed == nil || !done.Claimed.Claimed || len(done.Claimed.Jobs) != 2 ||
		done.Claimed.Jobs[0].JobID != third || done.Claimed.Jobs[1].JobID != fourth {
		t.Fatalf("complete with claim_next and next_max_jobs 5, two queued: %+v", done)
	}
	mcpCall(t, claw, "complete", map[string]any{"job_id": third, "result": map[string]any{"summary": "ok"}}, &done)
	done = completed{}
	mcpCall(t, claw, "complete", map[string]any{"job_id": fourth, "result": map[string]any{"summary": "ok"}, "claim_next": true, "next_wait_seconds": 0}, &done)
	if done.Status != "done" || done.Claimed == nil || done.Claimed.Claimed || e.job(fourth).State != "done" || e.job(third).State != "done" {
		t.Fatalf("complete of the last job, nothing left: %+v (%s, %s)", done, e.job(third).State, e.job(fourth).State)
	}
	// Out of range: refused before anything is done, the job still running.
	fifth := mcpEnqueueClaim(t, head, claw, "")
	res, err := claw.CallTool(context.Background(), &mcp.CallToolParams{Name: "complete",
		Arguments: map[string]any{"job_id": fifth, "result": map[string]any{"summary": "ok"}, "claim_next": true, "next_max_jobs": 101}})
	if err == nil && !res.IsError {
		t.Fatalf("next_max_jobs 101 was taken: %+v", res.StructuredContent)
	}
	if j := e.job(fifth); j.State != "running" {
		t.Fatalf("a refused complete left the job %s", j.State)
	}
}
