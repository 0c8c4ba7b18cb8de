package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/spine-queue/spine/api"
)

// One fail body works on both APIs: the worker contract's body, posted to
// the v0 fail, fences with its lease_token and decides by
// error.retryable; the v0 body's requeue is accepted by the worker fail.
// The worker fail's answer says where it left the job, and a repeat says
// the same.
func TestOneFailBodyForBothAPIs(t *testing.T) {
	e := newEnv(t)
	claimed := func(stream string) map[string]any {
		t.Helper()
		id := e.create(map[string]any{"stream": stream, "maxAttempts": 2})["id"].(string)
		a := e.workerClaim(leftTok, fmt.Sprintf(`{"worker_id":"w","streams":[%q]}`, stream))
		if a["job_id"] != id {
			t.Fatalf("claimed %v, want %s", a, id)
		}
		return a
	}
	body := func(a map[string]any, retryable bool) map[string]any {
		return map[string]any{"worker_id": "w", "job_id": a["job_id"], "attempt_id": a["attempt_id"], "lease_token": a["lease_token"],
			"error": map[string]any{"message": "no", "retryable": retryable}}
	}

	// The worker body on the v0 route: retryable false fails the job.
	a := claimed("v0-not-retryable")
	if j := e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, body(a, false)).json(t); j["status"] != "failed" {
		t.Fatalf("v0 fail with the worker body (not retryable): %v", j)
	}
	a = claimed("v0-retryable")
	wrong := body(a, true)
	wrong["lease_token"] = "not-the-token"
	e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, wrong).apiErr(t, http.StatusConflict, api.CodeStaleLease)
	wrong = body(a, true)
	wrong["job_id"] = "another-job"
	e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, wrong).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	wrong = body(a, true)
	wrong["leaseToken"] = "differs"
	e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, wrong).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if j := e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, body(a, true)).json(t); j["status"] != "queued" {
		t.Fatalf("v0 fail with the worker body (retryable): %v", j)
	}
	// The v0 default stays: an error without retryable requeues.
	a = claimed("v0-plain")
	if j := e.do("POST", fmt.Sprintf("/jobs/%s/fail", a["job_id"]), leftTok, map[string]any{"leaseToken": a["lease_token"], "error": "boom"}).json(t); j["status"] != "queued" {
		t.Fatalf("v0 fail with a plain error: %v", j)
	}

	// The worker fail: its status, the same on a repeat; requeue decides
	// over retryable.
	a = claimed("worker")
	b := body(a, true)
	b["requeue"] = false
	for range 2 {
		if ack := e.do("POST", "/internal/worker/fail", leftTok, b).json(t); ack["status"] != "failed" || ack["dlq"] != true {
			t.Fatalf("worker fail with requeue false: %v", ack)
		}
	}
	a = claimed("worker-dead")
	e.do("POST", "/internal/worker/fail", leftTok, body(a, true)).json(t)
	a = e.workerClaim(leftTok, `{"worker_id":"w","streams":["worker-dead"]}`)
	for range 2 {
		if ack := e.do("POST", "/internal/worker/fail", leftTok, body(a, true)).json(t); ack["status"] != "dead" || ack["dlq"] != true {
			t.Fatalf("a retryable fail of the last attempt: %v", ack)
		}
	}
}
