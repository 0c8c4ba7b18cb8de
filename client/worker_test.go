package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestWorkerHeartbeatsSlowHandlerAndCompletes(t *testing.T) {
	f := newFakeWorkerServer(t, 0.01)
	c := newTestClient(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", MaxWait: 50 * time.Millisecond,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			// Slow: finish only after the worker has heartbeated three times.
			for range 3 {
				select {
				case <-f.beat:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(10 * time.Second):
					return nil, errors.New("no heartbeat")
				}
			}
			return json.RawMessage(`{"answer":42}`), nil
		}})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()

	select {
	case body := <-f.complete:
		if body["job_id"] != "j1" || body["attempt_id"] != "a1" || body["lease_token"] != "tok" || body["worker_id"] != "w-1" {
			t.Fatalf("complete body = %v", body)
		}
		if res, _ := json.Marshal(body["result"]); string(res) != `{"answer":42}` {
			t.Fatalf("result = %s", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no complete within 10s")
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestWorkerStopsOnCancelAndFailsInFlightJob(t *testing.T) {
	f := newFakeWorkerServer(t, 10)
	c := newTestClient(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())

	started := make(chan struct{})
	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", Concurrency: 2, MaxWait: 20 * time.Second,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()

	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never started")
	}
	cancel() // one slot is in a handler, the other in a 20s long poll
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case body := <-f.fail:
		e, _ := body["error"].(map[string]any)
		if e["code"] != CodeWorkerShutdown || e["retryable"] != true {
			t.Fatalf("fail body = %v", body)
		}
	default:
		t.Fatal("in-flight job was not failed on shutdown")
	}
}

func TestWorkerHandlerJobError(t *testing.T) {
	f := newFakeWorkerServer(t, 10)
	c := newTestClient(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", MaxWait: 50 * time.Millisecond,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			return nil, &JobError{Code: "bad_input", Message: "no", Retryable: false}
		}})
	go w.Run(ctx)
	select {
	case body := <-f.fail:
		e, _ := body["error"].(map[string]any)
		if e["code"] != "bad_input" || e["retryable"] != false {
			t.Fatalf("fail body = %v", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no fail within 10s")
	}
}

func TestWorkerRequiresHandler(t *testing.T) {
	c := newTestClient(t, []string{"http://127.0.0.1:1"})
	if err := NewWorker(c, WorkerConfig{WorkerID: "w"}).Run(context.Background()); err == nil {
		t.Fatal("Run without a handler succeeded")
	}
}
