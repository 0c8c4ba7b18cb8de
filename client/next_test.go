package client

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"
)

// nextServer hands out jobs j1..jn: the first by a claim, each next one by
// the complete of the one before when it asks for it ("next"); unless
// old, which refuses "next" as an unknown field, as a build without it
// does.
type nextServer struct {
	n, handed int
	old       bool
	mu        sync.Mutex
	claims    int
	completes []map[string]any
	done      chan struct{}
}

func (s *nextServer) job() map[string]any {
	s.handed++
	id := "j" + string(rune('0'+s.handed))
	return map[string]any{"claimed": true, "job_id": id, "attempt_id": "a" + id, "lease_token": "t" + id,
		"stream": "default", "lease_ttl_seconds": 30, "heartbeat_interval_seconds": 10, "attempt": 1, "max_attempts": 3}
}

func (s *nextServer) start(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/worker/claim", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.claims++
		if s.handed < s.n {
			j := s.job()
			s.mu.Unlock()
			writeJSON(w, 200, j)
			return
		}
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(50 * time.Millisecond):
		}
		writeJSON(w, 200, map[string]any{"claimed": false})
	})
	mux.HandleFunc("POST /internal/worker/complete", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, asked := body["next"]; asked && s.old {
			writeErr(w, 400, "invalid_request", `unknown field "next"; the fields are documented in docs/api.md`)
			return
		}
		s.completes = append(s.completes, body)
		ack := map[string]any{"ok": true, "ack": true}
		if _, asked := body["next"]; asked {
			if s.handed < s.n {
				ack["next"] = s.job()
			} else {
				ack["next"] = map[string]any{"claimed": false}
			}
		}
		if len(s.completes) == s.n {
			close(s.done)
		}
		writeJSON(w, 200, ack)
	})
	srv := newServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The Worker's complete asks for the slot's next job and runs it without
// a claim in between; against a build that refuses "next", it completes
// without it and claims as before.
func TestWorkerTakesTheNextJobFromItsComplete(t *testing.T) {
	for _, old := range []bool{false, true} {
		s := &nextServer{n: 3, old: old, done: make(chan struct{})}
		c, err := New([]string{s.start(t)}, WithToken("t"))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var ran []string
		ctx, cancel := context.WithCancel(context.Background())
		w := NewWorker(c, WorkerConfig{WorkerID: "w1", MaxWait: 50 * time.Millisecond,
			Handler: func(ctx context.Context, claim *WorkerClaim) (json.RawMessage, error) {
				mu.Lock()
				ran = append(ran, claim.JobID)
				mu.Unlock()
				return json.RawMessage(`{"ok":true}`), nil
			}})
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("old=%v: %d of 3 completes", old, len(s.completes))
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		claims, completes := s.claims, s.completes
		s.mu.Unlock()
		if len(ran) != 3 || ran[0] != "j1" || ran[1] != "j2" || ran[2] != "j3" {
			t.Fatalf("old=%v: ran %v", old, ran)
		}
		for i, b := range completes {
			if _, asked := b["next"]; asked == old {
				t.Fatalf("old=%v: complete %d asked for next: %v", old, i, asked)
			}
		}
		// With next the first claim is the only one before the last job
		// (the loop claims again once the queue is empty); without it,
		// one claim per job.
		if !old && claims > 2 || old && claims < 3 {
			t.Fatalf("old=%v: %d claims for 3 jobs", old, claims)
		}
	}
}
