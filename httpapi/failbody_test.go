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

// The worker contract's heartbeat, complete and release bodies work as
// they are on the v0 routes: fenced by their lease_token (a stale one is
// refused, one differing from leaseToken too), job_id checked against the
// path; the release's not_for_me keeps the job from that worker only.
func TestWorkerBodiesOnV0Routes(t *testing.T) {
	e := newEnv(t)
	claim := func(worker, stream string) map[string]any {
		t.Helper()
		a := e.workerClaim(leftTok, fmt.Sprintf(`{"worker_id":%q,"streams":[%q]}`, worker, stream))
		if a["claimed"] != true {
			t.Fatalf("%s claimed nothing in %s: %v", worker, stream, a)
		}
		return a
	}
	lease := func(a map[string]any) map[string]any {
		return map[string]any{"worker_id": a["worker_id"], "job_id": a["job_id"], "attempt_id": a["attempt_id"], "lease_token": a["lease_token"],
			"stream": a["stream"], "message_id": a["message_id"]}
	}
	path := func(a map[string]any, verb string) string { return fmt.Sprintf("/jobs/%s/%s", a["job_id"], verb) }

	id := e.create(map[string]any{"stream": "hb"})["id"].(string)
	a := claim("w1", "hb")
	a["worker_id"] = "w1"
	hb := lease(a)
	hb["progress"] = map[string]any{"pct": 50}
	if j := e.do("POST", path(a, "heartbeat"), leftTok, hb).json(t); j["id"] != id || j["status"] != "running" || j["progress"] == nil {
		t.Fatalf("v0 heartbeat with the worker body: %v", j)
	}
	stale := lease(a)
	stale["lease_token"] = "not-the-token"
	e.do("POST", path(a, "heartbeat"), leftTok, stale).apiErr(t, http.StatusConflict, api.CodeStaleLease)
	other := lease(a)
	other["job_id"] = "another-job"
	e.do("POST", path(a, "complete"), leftTok, other).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	both := lease(a)
	both["leaseToken"] = "differs"
	e.do("POST", path(a, "complete"), leftTok, both).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	done := lease(a)
	done["result"] = map[string]any{"summary": "ok"}
	for range 2 { // a repeat answers the same
		if j := e.do("POST", path(a, "complete"), leftTok, done).json(t); j["status"] != "done" {
			t.Fatalf("v0 complete with the worker body: %v", j)
		}
	}

	e.create(map[string]any{"stream": "rel"})
	a = claim("w1", "rel")
	a["worker_id"] = "w1"
	rel := lease(a)
	rel["not_for_me"] = true
	delete(rel, "worker_id")
	e.do("POST", path(a, "release"), leftTok, rel).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	rel["worker_id"] = "w1"
	if j := e.do("POST", path(a, "release"), leftTok, rel).json(t); j["status"] != "queued" || j["attempts"] != float64(0) {
		t.Fatalf("v0 release with the worker body: %v", j)
	}
	if c := e.workerClaim(leftTok, `{"worker_id":"w1","streams":["rel"]}`); c["claimed"] != false {
		t.Fatalf("the worker the job is not for got it back: %v", c)
	}
	if c := e.workerClaim(leftTok, `{"worker_id":"w2","streams":["rel"]}`); c["job_id"] != a["job_id"] {
		t.Fatalf("another worker did not get the released job: %v", c)
	}
}

// A worker that lost its claims' answers gets them back: GET
// /internal/worker/held lists the running jobs its role holds for its
// worker id, with the lease tokens that fence them; another worker's,
// another role's and finished jobs are not listed.
func TestWorkerHeldLists(t *testing.T) {
	e := newEnv(t)
	for range 4 {
		e.create(map[string]any{"stream": "held"})
	}
	a := e.workerClaim(leftTok, `{"worker_id":"w1","streams":["held"],"max_jobs":2}`)
	b := e.workerClaim(leftTok, `{"worker_id":"w2","streams":["held"]}`)
	r := e.workerClaim(rightTok, `{"worker_id":"w3","streams":["held"]}`)
	if a["claimed"] != true || b["claimed"] != true || r["claimed"] != true {
		t.Fatalf("claims: %v %v %v", a, b, r)
	}
	held := func(tok, worker string) []any {
		t.Helper()
		res := e.do("GET", "/internal/worker/held?worker_id="+worker, tok, nil)
		if res.Code != 200 {
			t.Fatalf("held: %d %s", res.Code, res.Body)
		}
		return res.json(t)["jobs"].([]any)
	}
	got := held(leftTok, "w1")
	want := a["jobs"].([]any)
	if len(got) != 2 {
		t.Fatalf("held by left_claw w1: %v, want the 2 it claimed", got)
	}
	for i, g := range got {
		g, w := g.(map[string]any), want[i].(map[string]any)
		if g["job_id"] != w["job_id"] || g["lease_token"] != w["lease_token"] || g["attempt_id"] != w["attempt_id"] || g["lease_ttl_seconds"] != w["lease_ttl_seconds"] {
			t.Fatalf("held job %d: %v, claimed %v", i, g, w)
		}
	}
	// The token from the list finishes the job.
	first := got[0].(map[string]any)
	done := map[string]any{"worker_id": "w1", "job_id": first["job_id"], "attempt_id": first["attempt_id"], "lease_token": first["lease_token"], "result": map[string]any{}}
	if ack := e.do("POST", "/internal/worker/complete", leftTok, done).json(t); ack["ok"] != true {
		t.Fatalf("complete with the held lease: %v", ack)
	}
	if got := held(leftTok, "w1"); len(got) != 1 {
		t.Fatalf("after a complete w1 holds %v", got)
	}
	if got := held(rightTok, "w3"); len(got) != 1 || got[0].(map[string]any)["job_id"] != r["job_id"] {
		t.Fatalf("right_claw's w3 holds %v", got)
	}
	// w1 is left_claw's: right_claw may not look at it.
	e.do("GET", "/internal/worker/held?worker_id=w1", rightTok, nil).apiErr(t, http.StatusForbidden, api.CodeWorkerIDTaken)
	if got := held(leftTok, "nobody"); len(got) != 0 {
		t.Fatalf("an unknown worker holds %v", got)
	}
	e.do("GET", "/internal/worker/held", leftTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	e.do("GET", "/internal/worker/held?worker_id=w1", headTok, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
}
