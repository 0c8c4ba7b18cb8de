package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

// On shutdown a job whose handler gives up is released, not failed: the
// attempt does not count.
func TestWorkerStopsOnCancelAndReleasesInFlightJob(t *testing.T) {
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
	case body := <-f.release:
		if body["job_id"] != "j1" || body["lease_token"] != "tok" || !strings.HasPrefix(body["reason"].(string), "worker shut down") {
			t.Fatalf("release body = %v", body)
		}
	default:
		t.Fatal("in-flight job was not released on shutdown")
	}
	select {
	case body := <-f.fail:
		t.Fatalf("a job released on shutdown was failed too: %v", body)
	default:
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

// A handler that cannot do its job returns a *Release: the worker
// releases the job (not for this worker, with the reason and cooldown)
// rather than failing it.
func TestWorkerHandlerRelease(t *testing.T) {
	f := newFakeWorkerServer(t, 10)
	c := newTestClient(t, []string{f.srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", MaxWait: 50 * time.Millisecond,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			return nil, fmt.Errorf("no GPU here: %w", &Release{Reason: "needs a GPU", NotForMe: true, Cooldown: 2 * time.Second})
		}})
	go w.Run(ctx)
	select {
	case body := <-f.release:
		if body["job_id"] != "j1" || body["lease_token"] != "tok" || body["not_for_me"] != true || body["reason"] != "needs a GPU" || body["cooldown_ms"] != float64(2000) {
			t.Fatalf("release body = %v", body)
		}
	case body := <-f.fail:
		t.Fatalf("the job was failed, not released: %v", body)
	case <-time.After(10 * time.Second):
		t.Fatal("no release within 10s")
	}
}

func TestWorkerRequiresHandler(t *testing.T) {
	c := newTestClient(t, []string{"http://127.0.0.1:1"})
	if err := NewWorker(c, WorkerConfig{WorkerID: "w"}).Run(context.Background()); err == nil {
		t.Fatal("Run without a handler succeeded")
	}
}

// A worker with several slots claims for all its free slots in one round
// trip (max_jobs), and never asks for more jobs than it has free slots:
// the fake server checks, at every claim, that the jobs the worker holds
// plus the jobs it asks for fit in its concurrency.
func TestWorkerClaimsForItsFreeSlots(t *testing.T) {
	const slots, total = 3, 7
	var (
		mu       sync.Mutex
		next     int
		held     int // handed out and not yet completed
		asks     []int
		overflow string
	)
	done := make(chan string, total)
	release := make(chan struct{})
	held0 := make(chan struct{}) // closed once j0's handler holds its slot
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/worker/claim", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MaxJobs   int `json:"max_jobs"`
			MaxWaitMS int `json:"max_wait_ms"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ask := max(body.MaxJobs, 1)
		asks = append(asks, ask)
		if held+ask > slots && overflow == "" {
			overflow = fmt.Sprintf("asked for %d while holding %d of %d slots", ask, held, slots)
		}
		var jobs []map[string]any
		for ; next < total && len(jobs) < ask; next++ {
			jobs = append(jobs, map[string]any{"claimed": true, "job_id": fmt.Sprintf("j%d", next), "attempt_id": "a", "lease_token": "t",
				"lease_ttl_seconds": 30, "heartbeat_interval_seconds": 10, "attempt": 1, "max_attempts": 3})
		}
		held += len(jobs)
		mu.Unlock()
		if len(jobs) == 0 {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Duration(body.MaxWaitMS) * time.Millisecond):
			}
			writeJSON(w, 200, map[string]any{"claimed": false})
			return
		}
		a := maps.Clone(jobs[0])
		if body.MaxJobs > 0 {
			a["jobs"] = jobs
		}
		writeJSON(w, 200, a)
	})
	mux.HandleFunc("POST /internal/worker/complete", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		held--
		mu.Unlock()
		done <- body["job_id"].(string)
		writeJSON(w, 200, map[string]any{"ok": true, "ack": true})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := newTestClient(t, []string{srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var running, most atomic.Int32
	w := NewWorker(c, WorkerConfig{WorkerID: "w-1", Concurrency: slots, MaxWait: 50 * time.Millisecond,
		Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if claim.JobID == "j0" {
				close(held0)
				<-release // the first job holds its slot until all the others have run
			} else {
				<-held0 // so every other job runs beside it, whichever handler starts first
			}
			return json.RawMessage(`{}`), nil
		}})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	seen := map[string]bool{}
	for len(seen) < total-1 {
		select {
		case id := <-done:
			seen[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d jobs done", len(seen), total)
		}
	}
	close(release)
	select {
	case id := <-done:
		seen[id] = true
	case <-time.After(10 * time.Second):
		t.Fatal("the held job was not completed")
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if overflow != "" {
		t.Fatal(overflow)
	}
	if len(seen) != total || asks[0] != slots {
		t.Fatalf("done %v; the first claim asked for %d jobs, want %d", seen, asks[0], slots)
	}
	if m := most.Load(); m < 2 || m > slots {
		t.Fatalf("at most %d handlers ran at once, want 2 to %d", m, slots)
	}
}
