package mcpserver_test

import (
	"testing"
)

// enqueue's rate limit: jobs of a key over its rate stay queued; the claim
// tool takes the next job it may (here, none) and a job names its key.
func TestEnqueueWithARateLimit(t *testing.T) {
	url := startAPI(t)
	head, claw := session(t, url, headTok), session(t, url, clawTok)
	rate := map[string]any{"rate_key": "vendor", "rate_limit": 1, "rate_period_ms": 3600000}
	var ids []string
	for i := range 2 {
		args := map[string]any{"stream": "rated", "payload": map[string]any{"n": i}}
		for k, v := range rate {
			args[k] = v
		}
		var out struct {
			Job struct {
				ID      string `json:"id"`
				RateKey string `json:"rate_key"`
			} `json:"job"`
		}
		call(t, head, "enqueue", args, &out)
		if out.Job.RateKey != "vendor" {
			t.Fatalf("enqueue answered %+v", out)
		}
		ids = append(ids, out.Job.ID)
	}
	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"rated"}, "wait_seconds": 0}, &cl)
	if !cl.Claimed || cl.Jobs[0].JobID != ids[0] {
		t.Fatalf("first claim = %+v", cl)
	}
	cl = claimOut{}
	call(t, claw, "claim", map[string]any{"streams": []string{"rated"}, "wait_seconds": 0}, &cl)
	if cl.Claimed {
		t.Fatalf("claimed %+v past the rate", cl)
	}
	if msg := callErr(t, head, "enqueue", map[string]any{"payload": 1, "rate_key": "vendor"}); msg == "" {
		t.Error("a rate key without a limit was taken")
	}
}
