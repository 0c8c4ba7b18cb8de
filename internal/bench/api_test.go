package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// The load generator's client sends the claw's calls as the worker
// contract wants them: the claim's index comes back with the claim and goes
// out with the heartbeats; a refusal is an error carrying the API's code; a
// call on a finished phase is not sent.
func TestAPIClaimHeartbeatAndErrors(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "path min-index auth"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("X-Spine-Min-Index")+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/internal/worker/claim":
			w.Header().Set("X-Spine-Index", "42")
			_, _ = io.WriteString(w, `{"claimed":true,"job_id":"j1","attempt_id":"a1","lease_token":"t1","stream":"s","message_id":"m"}`)
		case "/internal/worker/heartbeat":
			if string(body) != `{"worker_id":"w","job_id":"j1","lease_token":"t1"}` {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":"bad_request","message":"body"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"ok":false,"error":{"code":"lease_mismatch","message":"old token"}}`)
		}
	}))
	defer srv.Close()
	a := newAPI([]string{srv.URL}, "h", "c", 4, 5*time.Second)
	defer a.close()
	ctx := context.Background()

	c, err := a.claim(ctx, 0, "w", "s", 100*time.Millisecond)
	if err != nil || c.index != 42 || c.JobID != "j1" {
		t.Fatalf("claim: %+v %v, want job j1 at index 42", c, err)
	}
	if err := a.heartbeat(ctx, 0, "w", c); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	_, err = a.complete(ctx, 0, "w", c)
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusConflict || he.Code != "lease_mismatch" {
		t.Fatalf("refused complete: %v, want a 409 lease_mismatch", err)
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	want := []string{"/internal/worker/claim  Bearer c", "/internal/worker/heartbeat 42 Bearer c", "/internal/worker/complete  Bearer c"}
	if len(got) != len(want) {
		t.Fatalf("server saw %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("request %d: %q, want %q", i, got[i], want[i])
		}
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.heartbeat(done, 0, "w", c); !errors.Is(err, context.Canceled) {
		t.Fatalf("heartbeat on a cancelled phase: %v", err)
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != len(want) {
		t.Fatalf("a call on a cancelled phase was sent (%d requests)", n)
	}
}
