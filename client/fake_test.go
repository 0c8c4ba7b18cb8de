package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeErr answers an API error.
func writeErr(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// fakeWorkerServer implements the worker contract v1 for one job.
type fakeWorkerServer struct {
	t        *testing.T
	srv      *httptest.Server
	interval float64 // heartbeat_interval_seconds

	mu       sync.Mutex
	handed   bool
	beats    int
	beat     chan struct{} // one send per heartbeat (non-blocking)
	complete chan map[string]any
	fail     chan map[string]any
	release  chan map[string]any
	// mismatch: completes are refused as results that break the job's
	// contract (400 result_mismatch).
	mismatch bool
}

func newFakeWorkerServer(t *testing.T, interval float64) *fakeWorkerServer {
	f := &fakeWorkerServer{t: t, interval: interval,
		beat: make(chan struct{}, 100), complete: make(chan map[string]any, 1), fail: make(chan map[string]any, 1),
		release: make(chan map[string]any, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/worker/claim", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			WorkerID  string `json:"worker_id"`
			MaxWaitMS int    `json:"max_wait_ms"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		handed := f.handed
		f.handed = true
		f.mu.Unlock()
		if !handed {
			writeJSON(w, 200, map[string]any{"claimed": true, "job_id": "j1", "attempt_id": "a1",
				"lease_token": "tok", "stream": "default", "message_id": "m1", "payload": map[string]int{"n": 1},
				"lease_ttl_seconds": 30, "heartbeat_interval_seconds": f.interval, "attempt": 1, "max_attempts": 3})
			return
		}
		// Long poll: nothing more to hand out.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Duration(body.MaxWaitMS) * time.Millisecond):
		}
		writeJSON(w, 200, map[string]any{"claimed": false})
	})
	mux.HandleFunc("POST /internal/worker/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.beats++
		f.mu.Unlock()
		select {
		case f.beat <- struct{}{}:
		default:
		}
		writeJSON(w, 200, map[string]any{"ok": true, "lease_expires_at": time.Now().Add(30 * time.Second)})
	})
	mux.HandleFunc("POST /internal/worker/complete", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.complete <- body
		f.mu.Lock()
		mismatch := f.mismatch
		f.mu.Unlock()
		if mismatch {
			writeJSON(w, 400, map[string]any{"ok": false, "error": map[string]any{"code": "result_mismatch", "message": "refused",
				"mismatches": []map[string]string{{"path": "/n", "expected": "type integer", "got": "type string"}}}})
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "ack": true})
	})
	mux.HandleFunc("POST /internal/worker/fail", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.fail <- body
		writeJSON(w, 200, map[string]any{"ok": true, "ack": true, "requeued": true})
	})
	mux.HandleFunc("POST /internal/worker/release", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.release <- body
		writeJSON(w, 200, map[string]any{"ok": true, "ack": true, "requeued": true, "status": "queued"})
	})
	f.srv = newServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}
