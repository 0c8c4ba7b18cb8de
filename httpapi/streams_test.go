package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// An operator pauses a stream: producers still create jobs in it, claims
// skip it (a long-polling worker waits), a claim by id is refused with the
// job, GET /streams shows the pause; the resume wakes the waiting worker,
// which gets the oldest job.
func TestStreamPauseAndResume(t *testing.T) {
	e := newEnv(t)
	decodeAs := func(r resp, v any) {
		t.Helper()
		if r.Code != http.StatusOK {
			t.Fatalf("status %d: %s", r.Code, r.Body)
		}
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	first := e.create(map[string]interface{}{"stream": "ml"})["id"].(string)

	e.do("POST", "/streams/ml/pause", leftTok, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	var st api.StreamInfo
	decodeAs(e.do("POST", "/streams/ml/pause", headTok, api.StreamPauseRequest{Reason: "bad model"}), &st)
	if !st.Paused || st.Pause == nil || st.Pause.Reason != "bad model" || st.Pause.PausedBy != "head" || st.Queued != 1 {
		t.Fatalf("pause answer %+v", st)
	}
	second := e.create(map[string]interface{}{"stream": "ml"})["id"].(string)
	other := e.create(map[string]interface{}{"stream": "etl"})["id"].(string)

	er := e.do("POST", "/jobs/"+first+"/claim", leftTok, `{}`).apiErr(t, http.StatusConflict, api.CodeStreamPaused)
	if j, _ := er["job"].(map[string]interface{}); j["id"] != first || j["status"] != "queued" {
		t.Fatalf("error.job = %v", er["job"])
	}
	var wc api.WorkerClaim
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "w1", Streams: []string{"ml", "etl"}}), &wc)
	if !wc.Claimed || wc.JobID != other {
		t.Fatalf("claim over a paused stream: %+v", wc)
	}

	var list api.StreamList
	decodeAs(e.do("GET", "/streams", rightTok, nil), &list)
	byName := map[string]api.StreamInfo{}
	for _, s := range list.Streams {
		byName[s.Name] = s
	}
	if ml := byName["ml"]; !ml.Paused || ml.Queued != 2 || ml.OldestQueuedAt.IsZero() {
		t.Fatalf("GET /streams ml: %+v", ml)
	}
	if etl := byName["etl"]; etl.Paused || etl.Running != 1 {
		t.Fatalf("GET /streams etl: %+v", etl)
	}

	// A worker waits on the paused stream; the resume wakes it.
	got := make(chan api.WorkerClaim, 1)
	go func() {
		var c api.WorkerClaim
		r := e.doCtx(context.Background(), "POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "w2", Streams: []string{"ml"}, MaxWaitMS: 20000})
		_ = json.Unmarshal(r.Body, &c)
		got <- c
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.srv.queue.Stats().ClaimWaiters == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never waited")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var resumed api.StreamInfo
	decodeAs(e.do("POST", "/streams/ml/resume", headTok, nil), &resumed)
	// The woken worker may claim before the answer is read: the two jobs
	// are queued or running, none lost.
	if resumed.Paused || resumed.Pause != nil || resumed.Queued+resumed.Running != 2 || resumed.Queued < 1 {
		t.Fatalf("resume answer %+v", resumed)
	}
	select {
	case c := <-got:
		if !c.Claimed || c.JobID != first {
			t.Fatalf("after the resume the waiting worker got %+v, want %s", c, first)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the resume did not wake the waiting worker")
	}
	decodeAs(e.do("POST", "/internal/worker/claim", leftTok, api.WorkerClaimRequest{WorkerID: "w3", Streams: []string{"ml"}}), &wc)
	if !wc.Claimed || wc.JobID != second {
		t.Fatalf("second claim after the resume: %+v", wc)
	}
	e.do("POST", "/streams/no%20such/pause", headTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	e.do("POST", "/streams/ml/pause", headTok, `{"reson":"x"}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
}

// Cancel through the v0 API: a running job's heartbeat answers cancel,
// its fail ends it cancelled whatever requeue says, listing by status finds
// it, a done job is refused, claws may not cancel.
func TestCancelV0(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{})["id"].(string)
	tok := e.claim(id, leftTok)["leaseToken"].(string)
	e.do("POST", "/jobs/"+id+"/cancel", leftTok, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	if r := e.do("POST", "/jobs/"+id+"/cancel", headTok, `{"reason":"stop"}`); r.Code != 200 || r.json(t)["cancel"] != true {
		t.Fatalf("cancel: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/jobs/"+id+"/heartbeat", leftTok, map[string]string{"leaseToken": tok}); r.Code != 200 || r.json(t)["cancel"] != true || r.json(t)["cancelReason"] != "stop" {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/jobs/"+id+"/fail", leftTok, map[string]any{"leaseToken": tok, "requeue": true, "error": map[string]string{"code": "cancelled", "message": "stopped"}}); r.Code != 200 || r.json(t)["status"] != "cancelled" {
		t.Fatalf("fail: %d %s", r.Code, r.Body)
	}
	if r := e.do("GET", "/jobs?status=cancelled", headTok, nil); r.Code != 200 || len(r.json(t)["jobs"].([]any)) != 1 {
		t.Fatalf("list cancelled: %d %s", r.Code, r.Body)
	}
	done := e.create(map[string]interface{}{})["id"].(string)
	dtok := e.claim(done, leftTok)["leaseToken"].(string)
	if r := e.do("POST", "/jobs/"+done+"/complete", leftTok, map[string]string{"leaseToken": dtok}); r.Code != 200 {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/jobs/"+done+"/cancel", headTok, nil).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)
	e.do("POST", "/jobs/nope/cancel", headTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
}

// An operator sets a stream's job defaults: jobs created in it afterwards
// carry the default key and limit (so at most the limit of them run at
// once), a key named without a limit gets the default limit, jobs of other
// streams are untouched; GET /streams shows the defaults; DELETE clears
// them; bad bodies are refused and change nothing.
func TestStreamDefaults(t *testing.T) {
	e := newEnv(t)
	var st api.StreamInfo
	put := func(tok string, body any) resp { return e.do("PUT", "/streams/ml/defaults", tok, body) }
	put(leftTok, api.StreamDefaults{ConcurrencyLimit: 2}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	for _, bad := range []string{`{}`, `{"concurrencyLimit":-1}`, `{"concurrencyLimit":10001}`, `{"concurrencyKey":"a b"}`,
		`{"concurrencyLimit":2,"setBy":"me"}`, `{"limit":2}`, `[]`} {
		put(headTok, bad).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	e.do("PUT", "/streams/no%20such/defaults", headTok, `{"concurrencyLimit":2}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if r := e.do("GET", "/streams/ml", headTok, nil); r.Code != 200 || r.json(t)["defaults"] != nil {
		t.Fatalf("defaults after refused bodies: %d %s", r.Code, r.Body)
	}

	r := put(headTok, api.StreamDefaults{ConcurrencyKey: "ml-gpus", ConcurrencyLimit: 2})
	if r.Code != 200 || json.Unmarshal(r.Body, &st) != nil {
		t.Fatalf("put defaults: %d %s", r.Code, r.Body)
	}
	if d := st.Defaults; d == nil || d.ConcurrencyKey != "ml-gpus" || d.ConcurrencyLimit != 2 || d.SetBy != "head" || d.SetAt.IsZero() {
		t.Fatalf("defaults in the answer: %+v", st.Defaults)
	}
	var ids []string
	for range 3 {
		j := e.create(map[string]any{"stream": "ml"})
		if j["concurrencyKey"] != "ml-gpus" || j["concurrencyLimit"] != float64(2) {
			t.Fatalf("a job created in ml: %v", j)
		}
		ids = append(ids, j["id"].(string))
	}
	if j := e.create(map[string]any{"stream": "ml", "concurrencyKey": "tenant-1"}); j["concurrencyLimit"] != float64(2) {
		t.Fatalf("a key without a limit: %v", j)
	}
	if j := e.create(map[string]any{"stream": "etl", "concurrencyKey": "tenant-1"}); j["concurrencyLimit"] != float64(1) {
		t.Fatalf("a key without a limit in a stream without defaults: %v", j)
	}
	got := map[string]bool{}
	for i := range 4 {
		c := e.workerClaim(leftTok, fmt.Sprintf(`{"worker_id":"w%d","streams":["ml"]}`, i))
		if c["claimed"] == true {
			got[c["job_id"].(string)] = true
		}
	}
	n := 0
	for _, id := range ids {
		if got[id] {
			n++
		}
	}
	if n != 2 || len(got) != 3 {
		t.Fatalf("claimed %d of the defaulted jobs (want 2) and %d in all (want 3: the tenant job too)", n, len(got))
	}
	var list api.StreamList
	if r := e.do("GET", "/streams", rightTok, nil); r.Code != 200 || json.Unmarshal(r.Body, &list) != nil {
		t.Fatalf("GET /streams: %d %s", r.Code, r.Body)
	}
	for _, s := range list.Streams {
		if (s.Name == "ml") != (s.Defaults != nil) {
			t.Fatalf("GET /streams: %s has defaults %+v", s.Name, s.Defaults)
		}
	}

	e.do("DELETE", "/streams/ml/defaults", leftTok, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	if r := e.do("DELETE", "/streams/ml/defaults", headTok, nil); r.Code != 200 || r.json(t)["defaults"] != nil {
		t.Fatalf("clear: %d %s", r.Code, r.Body)
	}
	if j := e.create(map[string]any{"stream": "ml"}); j["concurrencyKey"] != nil {
		t.Fatalf("after the clear a job got %v", j["concurrencyKey"])
	}
}
