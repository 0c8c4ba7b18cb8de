package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
	_, _, err = a.complete(ctx, 0, "w", c, "s", false)
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

// An async heartbeat that the job's complete overtakes (409 after the
// complete succeeded) is counted as overtaken, not as an error; a 409 for a
// job whose complete failed, and any other failure, is an error; an
// answered heartbeat is timed.
func TestAsyncHeartbeatJudgement(t *testing.T) {
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch s := int(status.Load()); s {
		case http.StatusOK:
			_, _ = io.WriteString(w, `{"ok":true}`)
		default:
			w.WriteHeader(s)
			_, _ = io.WriteString(w, `{"ok":false,"error":{"code":"x","message":"refused"}}`)
		}
	}))
	defer srv.Close()
	r := &runner{cfg: Config{Addrs: []string{srv.URL}, MaxErrors: 100}}
	r.a = newAPI(r.cfg.Addrs, "h", "c", 4, 5*time.Second)
	defer r.a.close()
	c := &claim{Claimed: true, JobID: "j1", AttemptID: "a1", LeaseToken: "t1"}
	for _, tc := range []struct {
		status     int
		completeOK bool
		overtaken  int64
		errs       int64
		timed      int
	}{
		{http.StatusOK, true, 0, 0, 1},
		{http.StatusConflict, true, 1, 0, 0},
		{http.StatusConflict, false, 0, 1, 0},
		{http.StatusServiceUnavailable, true, 0, 1, 0},
	} {
		status.Store(int32(tc.status))
		var st workStats
		completed := make(chan bool, 1)
		completed <- tc.completeOK
		r.asyncHeartbeat(context.Background(), func() {}, 0, "w", c, completed, &st)
		if got := st.hbOvertaken.Load(); got != tc.overtaken {
			t.Errorf("status %d, complete ok %v: %d overtaken, want %d", tc.status, tc.completeOK, got, tc.overtaken)
		}
		if got := st.errN.Load(); got != tc.errs {
			t.Errorf("status %d, complete ok %v: %d errors, want %d", tc.status, tc.completeOK, got, tc.errs)
		}
		if got := st.hbL.summary().N; got != tc.timed {
			t.Errorf("status %d: %d heartbeats timed, want %d", tc.status, got, tc.timed)
		}
	}
}

// A complete asks for the next job until the cluster refuses the field, as
// a build without it does (the request changes nothing there): then every
// complete in flight is sent again without it, and later ones never ask.
func TestAPICompleteNextFallsBackOnAnOldBuild(t *testing.T) {
	for _, old := range []bool{false, true} {
		var asked, plain atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			if !strings.Contains(string(body), `"next"`) {
				plain.Add(1)
				_, _ = io.WriteString(w, `{"ok":true,"ack":true}`)
				return
			}
			asked.Add(1)
			if old {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":"invalid_request","message":"unknown field \"next\"; the fields are documented in docs/api.md"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true,"ack":true,"next":{"claimed":true,"job_id":"j2","attempt_id":"a2","lease_token":"t2"}}`)
		}))
		a := newAPI([]string{srv.URL}, "h", "c", 8, 5*time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				_, next, err := a.complete(context.Background(), 0, "w", &claim{JobID: "j1", AttemptID: "a1", LeaseToken: "t1"}, "s", true)
				if err != nil || old != (next == nil) || !old && next.JobID != "j2" {
					t.Errorf("old=%v: next %+v, err %v", old, next, err)
				}
			})
		}
		wg.Wait()
		if _, next, err := a.complete(context.Background(), 0, "w", &claim{JobID: "j1", AttemptID: "a1", LeaseToken: "t1"}, "s", true); err != nil || old != (next == nil) {
			t.Fatalf("old=%v: a later complete: next %+v, err %v", old, next, err)
		}
		if want := map[bool]int32{false: 0, true: 5}[old]; plain.Load() != want || old && asked.Load() > 4 {
			t.Fatalf("old=%v: %d plain completes (want %d), %d asking", old, plain.Load(), want, asked.Load())
		}
		a.close()
		srv.Close()
	}
}
