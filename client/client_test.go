package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var fastRetry = WithRetry(RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, MaxElapsed: 5 * time.Second})

func newTestClient(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addrs, append([]Option{fastRetry, WithToken("secret"), WithTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// closedAddr returns the URL of a server that no longer listens.
func closedAddr() string {
	s := newServer(http.NotFoundHandler())
	s.Close()
	return s.URL
}

func jobJSON(id string, status JobStatus) map[string]any {
	return map[string]any{"id": id, "stream": "default", "payload": map[string]int{"n": 1}, "status": status,
		"attempts": 0, "maxAttempts": 5, "createdAt": "2026-01-02T03:04:05.123456789Z", "createIndex": 7, "modifyIndex": 7}
}

func TestNewRejectsNoAddress(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	c, err := New([]string{" 127.0.0.1:1 ", "http://h:2/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Addrs(), ","); got != "http://127.0.0.1:1,http://h:2" {
		t.Fatalf("addrs = %s", got)
	}
}

func TestRotatesSeedsOnNetworkError(t *testing.T) {
	var hits atomic.Int32
	live := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "Bearer secret" {
			writeErr(w, 401, "unauthorized", "no token")
			return
		}
		switch {
		case r.Method == "GET" && r.URL.Path == "/jobs/j1":
			writeJSON(w, 200, jobJSON("j1", JobStatusQueued))
		case r.Method == "POST" && r.URL.Path == "/jobs/j1/claim":
			j := jobJSON("j1", JobStatusRunning)
			j["leaseToken"] = "tok"
			writeJSON(w, 200, j)
		default:
			writeErr(w, 404, "not_found", "no route")
		}
	}))
	defer live.Close()

	c := newTestClient(t, []string{closedAddr(), live.URL})
	job, err := c.JobGet(context.Background(), "j1")
	if err != nil {
		t.Fatalf("JobGet: %v", err)
	}
	if job.ID != "j1" || job.CreatedAt.Nanosecond() != 123456789 {
		t.Fatalf("job = %+v", job)
	}
	// A claim may be retried after a refused connection: nothing was sent.
	c2 := newTestClient(t, []string{closedAddr(), live.URL})
	job, err = c2.JobClaim(context.Background(), "j1", nil)
	if err != nil {
		t.Fatalf("JobClaim: %v", err)
	}
	if job.LeaseToken != "tok" {
		t.Fatalf("lease token = %q", job.LeaseToken)
	}
	if hits.Load() != 2 {
		t.Fatalf("live server saw %d requests, want 2", hits.Load())
	}
}

func TestAllSeedsDown(t *testing.T) {
	c := newTestClient(t, []string{closedAddr(), closedAddr()})
	_, err := c.JobGet(context.Background(), "j1")
	if err == nil {
		t.Fatal("JobGet succeeded with no server")
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		t.Fatalf("network failure became an APIError: %v", err)
	}
}

func TestCreateRetriesWithSameIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys, bodyKeys []string
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body JobCreateParams
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodyKeys = append(bodyKeys, body.IdempotencyKey)
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			writeErr(w, 503, "outcome_unknown", "leadership lost")
			return
		}
		// The first try did land: the key answers the first job.
		writeJSON(w, 200, jobJSON("j1", JobStatusQueued))
	}))
	defer srv.Close()

	c := newTestClient(t, []string{srv.URL})
	job, err := c.JobCreate(context.Background(), &JobCreateParams{Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatalf("JobCreate: %v", err)
	}
	if !job.Duplicate {
		t.Error("a 200 answer should mark the job Duplicate")
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || bodyKeys[0] != keys[0] || bodyKeys[1] != keys[0] {
		t.Fatalf("idempotency keys = %q (bodies %q), want two equal non-empty", keys, bodyKeys)
	}
}

func TestCreateKeepsCallerKey(t *testing.T) {
	var got string
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Idempotency-Key")
		writeJSON(w, 201, jobJSON("j1", JobStatusQueued))
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL})
	job, err := c.JobCreate(context.Background(), &JobCreateParams{Payload: json.RawMessage(`1`), IdempotencyKey: "k-1"})
	if err != nil || job.Duplicate || got != "k-1" {
		t.Fatalf("job=%+v err=%v key=%q", job, err, got)
	}
}

// Nil params are no body (the server reads {}), never a JSON null,
// which the server refuses.
func TestNilParamsSendNoBody(t *testing.T) {
	var bodies []string
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		writeJSON(w, 200, map[string]any{"id": "t1"})
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL})
	_, _ = c.TaskHeartbeat(context.Background(), "t1", nil)
	_, _ = c.WorkerHeartbeat(context.Background(), nil)
	if len(bodies) != 2 || bodies[0] != "" || bodies[1] != "" {
		t.Fatalf("bodies sent: %q", bodies)
	}
}

func TestClaimNotRetriedAfterOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(*Client) error
	}{
		{"JobClaim", func(c *Client) error { _, err := c.JobClaim(context.Background(), "j1", nil); return err }},
		{"WorkerClaim", func(c *Client) error {
			_, err := c.WorkerClaim(context.Background(), &WorkerClaimParams{WorkerID: "w"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				writeErr(w, 503, "outcome_unknown", "timeout")
			}))
			defer srv.Close()
			err := tc.call(newTestClient(t, []string{srv.URL}))
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
			}
			if hits.Load() != 1 {
				t.Fatalf("server saw %d claims, want 1", hits.Load())
			}
		})
	}
}

func TestClaimRetriedAfterNoLeader(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			writeErr(w, 503, "no_leader", "election")
			return
		}
		writeJSON(w, 200, jobJSON("j1", JobStatusRunning))
	}))
	defer srv.Close()
	if _, err := newTestClient(t, []string{srv.URL}).JobClaim(context.Background(), "j1", nil); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 2 {
		t.Fatalf("hits = %d, want 2", hits.Load())
	}
}

func TestRetryAfterBeyondMaxElapsedStops(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "60")
		writeJSON(w, 503, map[string]any{"error": map[string]string{"code": "no_leader", "message": "x", "leader": "http://old"}})
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL}, WithRetry(RetryPolicy{MaxElapsed: time.Second}))
	start := time.Now()
	_, err := c.JobGet(context.Background(), "j1")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, ErrNoLeader) || apiErr.Leader != "http://old" {
		t.Fatalf("err = %#v", err)
	}
	if hits.Load() != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("hits=%d elapsed=%v", hits.Load(), time.Since(start))
	}
}

func TestErrorMapping(t *testing.T) {
	all := []error{ErrBadRequest, ErrUnauthorized, ErrForbidden, ErrNotOwner, ErrTargetMismatch, ErrNotFound,
		ErrConflict, ErrIllegalTransition, ErrStaleLease, ErrMaxAttempts, ErrTooLarge, ErrNoLeader, ErrOutcomeUnknown}
	cases := []struct {
		status int
		code   string
		want   []error
	}{
		{400, "invalid_json", []error{ErrBadRequest}},
		{400, "invalid_request", []error{ErrBadRequest}},
		{401, "unauthorized", []error{ErrUnauthorized}},
		{403, "forbidden", []error{ErrForbidden}},
		{403, "not_owner", []error{ErrForbidden, ErrNotOwner}},
		{403, "target_mismatch", []error{ErrForbidden, ErrTargetMismatch}},
		{404, "not_found", []error{ErrNotFound}},
		{405, "method_not_allowed", nil},
		{409, "illegal_transition", []error{ErrConflict, ErrIllegalTransition}},
		{409, "stale_lease", []error{ErrConflict, ErrStaleLease}},
		{409, "max_attempts", []error{ErrConflict, ErrMaxAttempts}},
		{413, "too_large", []error{ErrTooLarge}},
		{503, "no_leader", []error{ErrNoLeader}},
		{503, "outcome_unknown", []error{ErrOutcomeUnknown}},
		{500, "internal", nil},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.code), func(t *testing.T) {
			srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeErr(w, tc.status, tc.code, "boom")
			}))
			defer srv.Close()
			c := newTestClient(t, []string{srv.URL}, WithRetry(RetryPolicy{MaxAttempts: 1}))
			_, err := c.JobGet(context.Background(), "j1")
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, not an APIError", err)
			}
			if apiErr.Status != tc.status || apiErr.Code != tc.code || apiErr.Message != "boom" {
				t.Fatalf("apiErr = %+v", apiErr)
			}
			for _, s := range all {
				want := false
				for _, w := range tc.want {
					want = want || w == s
				}
				if errors.Is(err, s) != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v", s, !want, want)
				}
			}
		})
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gateway says no", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := newTestClient(t, []string{srv.URL}).JobGet(context.Background(), "j")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || !strings.Contains(apiErr.Message, "gateway") {
		t.Fatalf("err = %v", err)
	}
}

func TestMaxAttemptsCarriesJob(t *testing.T) {
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 409, map[string]any{"error": map[string]any{"code": "max_attempts", "message": "dead",
			"job": jobJSON("j1", JobStatusDead)}})
	}))
	defer srv.Close()
	_, err := newTestClient(t, []string{srv.URL}).JobClaim(context.Background(), "j1", nil)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Job == nil || apiErr.Job.Status != JobStatusDead {
		t.Fatalf("err = %v", err)
	}
}

// completeServer answers the first complete with outcome_unknown (having
// applied it) and every later one with 409, like a server whose first try
// landed.
func completeServer(t *testing.T, outcome string) (*httptest.Server, *atomic.Int32) {
	var completes atomic.Int32
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jobs/j1/complete":
			if completes.Add(1) == 1 {
				writeErr(w, 503, "outcome_unknown", "lost leadership")
				return
			}
			writeErr(w, 409, "illegal_transition", "job is done")
		case "/jobs/j1/attempts":
			writeJSON(w, 200, map[string]any{"jobId": "j1", "attempts": []map[string]any{
				{"id": "a0", "owner": "left_claw", "outcome": "expired"},
				{"id": "a1", "owner": "left_claw", "outcome": outcome},
			}})
		case "/jobs/j1":
			writeJSON(w, 200, jobJSON("j1", JobStatusDone))
		default:
			writeErr(w, 404, "not_found", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &completes
}

func TestCompleteRetryReReadsAfterUnknownOutcome(t *testing.T) {
	srv, completes := completeServer(t, OutcomeCompleted)
	c := newTestClient(t, []string{srv.URL})
	job, err := c.JobComplete(context.Background(), "j1", &JobCompleteParams{
		Result: json.RawMessage(`{"ok":1}`), LeaseToken: "tok", AttemptID: "a1"})
	if err != nil {
		t.Fatalf("JobComplete: %v", err)
	}
	if job.Status != JobStatusDone || completes.Load() != 2 {
		t.Fatalf("status=%s completes=%d", job.Status, completes.Load())
	}

	// The attempt ended otherwise (e.g. expired): the conflict is real.
	srv2, _ := completeServer(t, OutcomeExpired)
	_, err = newTestClient(t, []string{srv2.URL}).JobComplete(context.Background(), "j1",
		&JobCompleteParams{LeaseToken: "tok", AttemptID: "a1"})
	if !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("err = %v, want ErrIllegalTransition", err)
	}
}

func TestCompleteWithoutFencingNotRetried(t *testing.T) {
	srv, completes := completeServer(t, OutcomeCompleted)
	_, err := newTestClient(t, []string{srv.URL}).JobComplete(context.Background(), "j1", &JobCompleteParams{})
	if !errors.Is(err, ErrOutcomeUnknown) || completes.Load() != 1 {
		t.Fatalf("err=%v completes=%d", err, completes.Load())
	}
}

func TestWritesGoToLearnedLeader(t *testing.T) {
	var leaderWrites, followerWrites atomic.Int32
	leader := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderNode, "n2")
		w.Header().Set(HeaderLeader, "n2")
		if r.Method == "POST" {
			leaderWrites.Add(1)
		}
		writeJSON(w, 201, jobJSON("j1", JobStatusQueued))
	}))
	defer leader.Close()
	follower := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderNode, "n1")
		w.Header().Set(HeaderLeader, "n2")
		switch {
		case r.URL.Path == "/health":
			writeJSON(w, 200, Health{OK: true, NodeID: "n1", Role: "follower", LeaderID: "n2", LeaderAddr: leader.URL})
		case r.Method == "POST":
			followerWrites.Add(1)
			writeJSON(w, 201, jobJSON("j1", JobStatusQueued))
		default:
			writeJSON(w, 200, jobJSON("j1", JobStatusQueued))
		}
	}))
	defer follower.Close()

	c := newTestClient(t, []string{follower.URL})
	ctx := context.Background()
	if _, err := c.JobGet(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.JobCreate(ctx, &JobCreateParams{Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Leader() != leader.URL || leaderWrites.Load() != 3 || followerWrites.Load() != 0 {
		t.Fatalf("leader=%q leaderWrites=%d followerWrites=%d", c.Leader(), leaderWrites.Load(), followerWrites.Load())
	}

	// The leader goes away: writes fall back to the seeds.
	leader.Close()
	if _, err := c.JobCreate(ctx, &JobCreateParams{Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if followerWrites.Load() != 1 {
		t.Fatalf("followerWrites = %d, want 1", followerWrites.Load())
	}
}

func TestJobListQuery(t *testing.T) {
	var q string
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q = r.URL.RawQuery
		io.WriteString(w, `{"jobs":[{"id":"a","status":"queued"}],"nextCursor":null}`)
	}))
	defer srv.Close()
	res, err := newTestClient(t, []string{srv.URL}).JobList(context.Background(),
		&JobListParams{Status: JobStatusQueued, Stream: "s", Limit: 10, Cursor: "c", Stale: true})
	if err != nil {
		t.Fatal(err)
	}
	if q != "cursor=c&limit=10&stale=true&status=queued&stream=s" || len(res.Jobs) != 1 || res.NextCursor != "" {
		t.Fatalf("q=%q res=%+v", q, res)
	}
}

func TestJobListConsistentQuery(t *testing.T) {
	var q string
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q = r.URL.RawQuery
		io.WriteString(w, `{"jobs":[],"nextCursor":null}`)
	}))
	defer srv.Close()
	if _, err := newTestClient(t, []string{srv.URL}).JobList(context.Background(), &JobListParams{Stream: "s", Consistent: true}); err != nil {
		t.Fatal(err)
	}
	if q != "consistent=true&stream=s" {
		t.Fatalf("q=%q", q)
	}
}

func TestBlobPutGet(t *testing.T) {
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			f, h, err := r.FormFile("file")
			if err != nil {
				writeErr(w, 400, "invalid_request", err.Error())
				return
			}
			b, _ := io.ReadAll(f)
			writeJSON(w, 201, Blob{ID: "sha-" + string(b), Size: int64(len(b)), ContentType: h.Header.Get("Content-Type")})
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	c := newTestClient(t, []string{srv.URL})
	b, err := c.BlobPut(context.Background(), "greeting.txt", strings.NewReader("hello"))
	if err != nil || b.ID != "sha-hello" || b.Size != 5 || !strings.HasPrefix(b.ContentType, "text/plain") {
		t.Fatalf("blob=%+v err=%v", b, err)
	}
	rc, ct, err := c.BlobGet(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	if string(data) != "hello" || ct != "text/plain" {
		t.Fatalf("data=%q ct=%q", data, ct)
	}
}

func TestJobErrorDecodesString(t *testing.T) {
	var j Job
	if err := json.Unmarshal([]byte(`{"id":"x","error":"oops"}`), &j); err != nil || j.Error.Message != "oops" {
		t.Fatalf("j=%+v err=%v", j, err)
	}
	if err := json.Unmarshal([]byte(`{"id":"x","error":{"code":"c","message":"m","retryable":true}}`), &j); err != nil ||
		j.Error.Code != "c" || !j.Error.Retryable {
		t.Fatalf("j=%+v err=%v", j, err)
	}
}

// newServer is httptest.NewServer for a fake node that, like a node of a
// version before the mux, refuses its upgrade: these tests see every
// request over plain HTTP. The mux itself is tested in api/wire and on
// real clusters in systemtest.
func newServer(h http.Handler) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mux" && r.Header.Get("Upgrade") != "" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// A complete with the lease token alone is retried after an unknown
// outcome: the server answers the repeat as the first.
func TestCompleteWithLeaseTokenAloneRetried(t *testing.T) {
	var completes atomic.Int32
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if completes.Add(1) == 1 {
			writeErr(w, 503, "outcome_unknown", "lost leadership")
			return
		}
		writeJSON(w, 200, jobJSON("j1", JobStatusDone))
	}))
	t.Cleanup(srv.Close)
	job, err := newTestClient(t, []string{srv.URL}).JobComplete(context.Background(), "j1", &JobCompleteParams{LeaseToken: "tok"})
	if err != nil || job.Status != JobStatusDone || completes.Load() != 2 {
		t.Fatalf("JobComplete: %v, completes=%d", err, completes.Load())
	}
	// A release is not answered as a repeat: without the attempt id it is
	// not retried.
	completes.Store(0)
	_, err = newTestClient(t, []string{srv.URL}).JobRelease(context.Background(), "j1", &JobReleaseParams{LeaseToken: "tok"})
	if !errors.Is(err, ErrOutcomeUnknown) || completes.Load() != 1 {
		t.Fatalf("JobRelease: %v, calls=%d", err, completes.Load())
	}
}
