package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A complete refused for its result is a typed error carrying every
// mismatch, on the v0 and the worker-contract completes, and is not
// retried (nothing was completed; the caller fixes the result).
func TestCompleteResultMismatch(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body := map[string]any{"error": map[string]any{"code": "result_mismatch", "message": "complete refused",
			"mismatches": []map[string]any{{"path": "/n", "expected": "type integer", "got": "type string"}, {"path": "", "expected": "x", "got": "y"}}}}
		if r.URL.Path == "/internal/worker/complete" {
			body["ok"] = false
		}
		writeJSON(w, http.StatusBadRequest, body)
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL})
	_, errV0 := c.JobComplete(context.Background(), "j1", &JobCompleteParams{LeaseToken: "t"})
	_, errW := c.WorkerComplete(context.Background(), &WorkerCompleteParams{WorkerID: "w", JobID: "j1", AttemptID: "a", LeaseToken: "t"})
	for _, err := range []error{errV0, errW} {
		ms := ResultMismatches(err)
		if !errors.Is(err, ErrResultMismatch) || !errors.Is(err, ErrBadRequest) || len(ms) != 2 ||
			ms[0] != (ResultMismatch{Path: "/n", Expected: "type integer", Got: "type string"}) {
			t.Fatalf("err %v, mismatches %+v", err, ms)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2 (no retry)", n)
	}
	if ResultMismatches(errors.New("other")) != nil {
		t.Fatal("mismatches of another error")
	}
}

// A Worker whose result breaks the job's contract fails the job, not
// retried, with the mismatches, instead of leaving it to its lease's end.
func TestWorkerFailsAResultThatBreaksTheContract(t *testing.T) {
	f := newFakeWorkerServer(t, 10)
	f.mismatch = true
	c := newTestClient(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", MaxWait: 50 * time.Millisecond,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			return json.RawMessage(`{"n":"x"}`), nil
		}})
	go w.Run(ctx)
	select {
	case body := <-f.fail:
		e, _ := body["error"].(map[string]any)
		if e["code"] != CodeResultMismatch || e["retryable"] != false || !strings.Contains(e["message"].(string), "/n: expected type integer, got type string") {
			t.Fatalf("fail body = %v", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no fail within 10s")
	}
}
