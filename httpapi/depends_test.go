package httpapi

import (
	"net/http"
	"testing"

	"github.com/spine-queue/spine/api"
)

// onDependencyFailure: "run" makes a fan-in run once its parts have all
// ended, a failed part included, and shows on the job; a bad value, or the
// policy without dependencies, is refused and creates nothing.
func TestOnDependencyFailureRun(t *testing.T) {
	e := newEnv(t)
	p1 := e.create(map[string]any{"stream": "parts"})["id"].(string)
	p2 := e.create(map[string]any{"stream": "parts"})["id"].(string)
	report := e.create(map[string]any{"stream": "report", "dependsOn": []string{p1, p2}, "onDependencyFailure": "run"})
	if report["onDependencyFailure"] != "run" || report["waitingOn"] != float64(2) {
		t.Fatalf("the fan-in: %v", report)
	}
	strict := e.create(map[string]any{"stream": "report", "dependsOn": []string{p1}, "onDependencyFailure": "fail"})
	if _, ok := strict["onDependencyFailure"]; ok {
		t.Fatalf("a job that fails with its dependencies shows %v", strict["onDependencyFailure"])
	}
	for _, bad := range []map[string]any{
		{"payload": 1, "dependsOn": []string{p1}, "onDependencyFailure": "maybe"},
		{"payload": 1, "onDependencyFailure": "run"},
	} {
		e.do("POST", "/jobs", headTok, bad).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}

	a := e.workerClaim(leftTok, `{"worker_id":"w","streams":["parts"]}`)
	if ack := e.do("POST", "/internal/worker/fail", leftTok, map[string]any{"worker_id": "w", "job_id": a["job_id"], "attempt_id": a["attempt_id"],
		"lease_token": a["lease_token"], "error": map[string]any{"message": "broken", "retryable": false}}).json(t); ack["status"] != "failed" {
		t.Fatalf("fail of a part: %v", ack)
	}
	if j := e.do("GET", "/jobs/"+strict["id"].(string), headTok, nil).json(t); j["status"] != "failed" {
		t.Fatalf("the strict dependent: %v", j)
	}
	if c := e.workerClaim(leftTok, `{"worker_id":"w","streams":["report"]}`); c["claimed"] != false {
		t.Fatalf("the fan-in ran before its last part ended: %v", c)
	}
	b := e.workerClaim(leftTok, `{"worker_id":"w","streams":["parts"]}`)
	e.do("POST", "/internal/worker/complete", leftTok, map[string]any{"worker_id": "w", "job_id": b["job_id"], "attempt_id": b["attempt_id"],
		"lease_token": b["lease_token"], "result": map[string]any{}})
	if c := e.workerClaim(leftTok, `{"worker_id":"w","streams":["report"]}`); c["job_id"] != report["id"] {
		t.Fatalf("after every part ended: %v, want the fan-in %s", c, report["id"])
	}
	if a["job_id"] != p1 || b["job_id"] != p2 {
		t.Fatalf("the parts were claimed as %v, %v, want %s, %s", a["job_id"], b["job_id"], p1, p2)
	}
}
