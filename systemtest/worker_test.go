package systemtest

// System tests of the worker contract v1 (POST /internal/worker/*, GET /dlq,
// POST /dlq/:id/redrive) on real three-process clusters, and the long-poll
// wake-latency benchmark. Helpers are prefixed with w (the package is shared).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/internal/testcluster"
)

// ---- HTTP helpers --------------------------------------------------------

// wHTTP has no client timeout: every call carries a context deadline, and
// long polls must be able to outlive any fixed timeout.
var wHTTP = &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}}

const wCallTimeout = 20 * time.Second

type wResp struct {
	Status int
	Body   []byte
	Header http.Header
}

func (r *wResp) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// wDo sends one request with the token, a JSON body (nil: none) and
// headers given as name, value pairs.
func wDo(ctx context.Context, base, token, method, path string, body interface{}, hdr ...string) (*wResp, error) {
	return wDoVia(ctx, wHTTP, base, token, method, path, body, hdr...)
}

// wDoFunc is wDo, or wDoVia with a given client.
type wDoFunc func(ctx context.Context, base, token, method, path string, body interface{}, hdr ...string) (*wResp, error)

// wDoVia is wDo through hc.
func wDoVia(ctx context.Context, hc *http.Client, base, token, method, path string, body interface{}, hdr ...string) (*wResp, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &wResp{Status: resp.StatusCode, Body: data, Header: resp.Header}, nil
}

// wCall is wDo with a deadline, failing the test on a transport error.
func wCall(t testing.TB, base, token, method, path string, body interface{}) *wResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wCallTimeout)
	defer cancel()
	r, err := wDo(ctx, base, token, method, path, body)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	return r
}

// wDecode decodes a 2xx JSON answer (or the wanted status) into v.
func wDecode(t testing.TB, r *wResp, want int, v interface{}) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status: want %d, got %s", want, r)
	}
	if v != nil {
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("decode %s: %v", r, err)
		}
	}
}

type wClaimAnswer struct {
	Claimed           bool            `json:"claimed"`
	JobID             string          `json:"job_id"`
	AttemptID         string          `json:"attempt_id"`
	LeaseToken        string          `json:"lease_token"`
	Stream            string          `json:"stream"`
	MessageID         string          `json:"message_id"`
	Payload           json.RawMessage `json:"payload"`
	LeaseTTLSeconds   float64         `json:"lease_ttl_seconds"`
	HeartbeatInterval float64         `json:"heartbeat_interval_seconds"`
	Attempt           int             `json:"attempt"`
	MaxAttempts       int             `json:"max_attempts"`
}

type wErrDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type wAck struct {
	OK             bool        `json:"ok"`
	Ack            bool        `json:"ack"`
	Requeued       bool        `json:"requeued"`
	DLQ            bool        `json:"dlq"`
	LeaseExpiresAt string      `json:"lease_expires_at"`
	Error          *wErrDetail `json:"error"`
}

type wJobError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Stack     string `json:"stack"`
	Retryable bool   `json:"retryable"`
}

type wJob struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Target         *string         `json:"target"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	ClaimedBy      string          `json:"claimedBy"`
	WorkerID       string          `json:"workerId"`
	AttemptID      string          `json:"attemptId"`
	LeaseToken     string          `json:"leaseToken"`
	LeaseExpiresAt string          `json:"leaseExpiresAt"`
	Result         json.RawMessage `json:"result"`
	Error          *wJobError      `json:"error"`
}

type wEvent struct {
	Seq       int    `json:"seq"`
	Type      string `json:"type"`
	Actor     string `json:"actor"`
	From      string `json:"from"`
	To        string `json:"to"`
	AttemptID string `json:"attemptId"`
	WorkerID  string `json:"workerId"`
	Text      string `json:"text"`
}

type wAttempt struct {
	ID        string     `json:"id"`
	Owner     string     `json:"owner"`
	WorkerID  string     `json:"workerId"`
	StartedAt string     `json:"startedAt"`
	EndedAt   string     `json:"endedAt"`
	Outcome   string     `json:"outcome"`
	Error     *wJobError `json:"error"`
}

var wSeq atomic.Int64

// wName is a stream (or worker) name unique within the test binary, so
// subtests sharing a cluster never see each other's jobs.
func wName(prefix string) string {
	return fmt.Sprintf("w%s-%d", prefix, wSeq.Add(1))
}

// wCreate creates a job through base as head; extra fields are merged in.
func wCreate(t testing.TB, base, stream string, payload interface{}, extra map[string]interface{}) wJob {
	t.Helper()
	body := map[string]interface{}{"payload": payload, "stream": stream}
	for k, v := range extra {
		body[k] = v
	}
	var j wJob
	wDecode(t, wCall(t, base, testcluster.HeadToken, "POST", "/jobs", body), http.StatusCreated, &j)
	if j.ID == "" || j.Status != "queued" || j.Stream != stream {
		t.Fatalf("created job: %+v", j)
	}
	return j
}

func wClaimBody(worker string, streams []string, maxWaitMS int) map[string]interface{} {
	return map[string]interface{}{"worker_id": worker, "streams": streams, "max_wait_ms": maxWaitMS}
}

// wClaim claims through base and fails the test unless it answers 200.
func wClaim(t testing.TB, base, token, worker string, streams []string, maxWaitMS int) wClaimAnswer {
	t.Helper()
	var a wClaimAnswer
	wDecode(t, wCall(t, base, token, "POST", "/internal/worker/claim", wClaimBody(worker, streams, maxWaitMS)), http.StatusOK, &a)
	if a.Claimed && (a.JobID == "" || a.AttemptID == "" || a.LeaseToken == "") {
		t.Fatalf("claimed answer without ids: %+v", a)
	}
	return a
}

func wMustClaim(t testing.TB, base, token, worker string, streams []string) wClaimAnswer {
	t.Helper()
	a := wClaim(t, base, token, worker, streams, 0)
	if !a.Claimed {
		t.Fatalf("worker %s found nothing to claim in %v", worker, streams)
	}
	return a
}

func wRef(worker string, a wClaimAnswer) map[string]interface{} {
	return map[string]interface{}{"worker_id": worker, "job_id": a.JobID, "attempt_id": a.AttemptID,
		"lease_token": a.LeaseToken, "stream": a.Stream, "message_id": a.MessageID}
}

func wWith(m map[string]interface{}, k string, v interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

func wComplete(t testing.TB, base, token, worker string, a wClaimAnswer, result interface{}) *wResp {
	t.Helper()
	return wCall(t, base, token, "POST", "/internal/worker/complete", wWith(wRef(worker, a), "result", result))
}

func wFail(t testing.TB, base, token, worker string, a wClaimAnswer, jerr wJobError) *wResp {
	t.Helper()
	return wCall(t, base, token, "POST", "/internal/worker/fail", wWith(wRef(worker, a), "error", jerr))
}

func wAckOf(t testing.TB, r *wResp, want int) wAck {
	t.Helper()
	var a wAck
	wDecode(t, r, want, &a)
	return a
}

// wRefused checks a fenced-off worker call: 409 {ok:false, error:{code:stale_lease}}.
func wRefused(t testing.TB, what string, r *wResp) {
	t.Helper()
	var a wAck
	if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != http.StatusConflict || a.OK || a.Error == nil {
		t.Fatalf("%s: want 409 ok:false with an error, got %s", what, r)
	}
	if a.Error.Code != "stale_lease" {
		t.Fatalf("%s: want error code stale_lease, got %s", what, r)
	}
}

func wGetJob(t testing.TB, base, id string) wJob {
	t.Helper()
	var j wJob
	wDecode(t, wCall(t, base, testcluster.HeadToken, "GET", "/jobs/"+id, nil), http.StatusOK, &j)
	return j
}

func wEvents(t testing.TB, base, id string) []wEvent {
	t.Helper()
	var out struct {
		Events []wEvent `json:"events"`
	}
	wDecode(t, wCall(t, base, testcluster.HeadToken, "GET", "/jobs/"+id+"/events", nil), http.StatusOK, &out)
	return out.Events
}

func wCountEvents(evs []wEvent, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func wAttempts(t testing.TB, base, id string) []wAttempt {
	t.Helper()
	var out struct {
		JobID    string     `json:"jobId"`
		Attempts []wAttempt `json:"attempts"`
	}
	wDecode(t, wCall(t, base, testcluster.HeadToken, "GET", "/jobs/"+id+"/attempts", nil), http.StatusOK, &out)
	if out.JobID != id {
		t.Fatalf("attempts of %s answered for %q", id, out.JobID)
	}
	return out.Attempts
}

func wDLQ(t testing.TB, base, query string) map[string]wJob {
	t.Helper()
	var out struct {
		Jobs []wJob `json:"jobs"`
	}
	wDecode(t, wCall(t, base, testcluster.HeadToken, "GET", "/dlq?limit=1000"+query, nil), http.StatusOK, &out)
	m := map[string]wJob{}
	for _, j := range out.Jobs {
		m[j.ID] = j
	}
	return m
}

// wSameAnswer reports whether a repeated complete/fail got the first answer:
// same status and the same contract fields (ok, ack, requeued, dlq, error).
// The informative "duplicate" flag is the one field that may differ.
func wSameAnswer(first, again *wResp) bool {
	strip := func(r *wResp) map[string]interface{} {
		var m map[string]interface{}
		if json.Unmarshal(r.Body, &m) != nil {
			return nil
		}
		delete(m, "duplicate")
		return m
	}
	a, b := strip(first), strip(again)
	return first.Status == again.Status && a != nil && reflect.DeepEqual(a, b)
}

// wJSONEqual compares two JSON documents by value.
func wJSONEqual(a, b []byte) bool {
	var x, y interface{}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// wRoles returns the leader and the followers of c.
func wRoles(t testing.TB, c *testcluster.Cluster) (leader *testcluster.Node, followers []*testcluster.Node) {
	t.Helper()
	l, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n != l && n.Running() {
			followers = append(followers, n)
		}
	}
	return l, followers
}

// wClaimAsync starts a long-poll claim in a goroutine. sent is closed once
// the request has been written to the connection; the answer (or error)
// arrives on the returned channel with the time it arrived.
type wAsyncClaim struct {
	Resp *wResp
	Err  error
	At   time.Time
}

func wClaimAsync(ctx context.Context, base, token, worker string, streams []string, maxWaitMS int) (sent <-chan struct{}, done <-chan wAsyncClaim) {
	s := make(chan struct{})
	d := make(chan wAsyncClaim, 1)
	var once sync.Once
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(s) }) },
	})
	go func() {
		r, err := wDo(ctx, base, token, "POST", "/internal/worker/claim", wClaimBody(worker, streams, maxWaitMS))
		d <- wAsyncClaim{Resp: r, Err: err, At: time.Now()}
	}()
	return s, d
}

// wWaiters waits until the leader reports exactly n worker claims parked in
// a long poll (GET /health "claim_waiters"; forwarded claims wait on the
// leader). It orders a scenario without sleeping: "the job arrives while
// the claim waits", or "the departed claim has left the leader".
func wWaiters(t testing.TB, c *testcluster.Cluster, n int64) {
	t.Helper()
	err := testcluster.Eventually(10*time.Second, 5*time.Millisecond, func() error {
		l := c.Leader()
		if l == nil {
			return fmt.Errorf("no leader")
		}
		h, err := c.Health(l)
		if err != nil {
			return err
		}
		if h.ClaimWaiters != n {
			return fmt.Errorf("leader %s has %d claims waiting, want %d", l.ID, h.ClaimWaiters, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func wAwait(t testing.TB, what string, ch <-chan wAsyncClaim, within time.Duration) wAsyncClaim {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("%s: no answer within %v", what, within)
	}
	return wAsyncClaim{}
}

func wAwaitSent(t testing.TB, sent <-chan struct{}) {
	t.Helper()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll claim was not sent within 10s")
	}
}

// ---- Tests on one shared cluster (no node is killed) ---------------------

func TestWorkerContract(t *testing.T) {
	t.Parallel()
	// Immediate retries: its cases claim a requeued job straight back.
	c := startCluster(t, 3, map[string]string{"REAPER_INTERVAL_MS": "100", "SPINE_RETRY_BACKOFF": "off"})
	leader, followers := wRoles(t, c)
	L, F1, F2 := leader.URL, followers[0].URL, followers[1].URL
	nodes := []string{L, F1, F2}
	head, left, right := testcluster.HeadToken, testcluster.LeftToken, testcluster.RightToken

	t.Run("PriorityOrderFIFOAndTargets", func(t *testing.T) {
		hi, lo := wName("hi"), wName("lo")
		lo1 := wCreate(t, F1, lo, map[string]int{"n": 1}, nil)
		lo2 := wCreate(t, F2, lo, map[string]int{"n": 2}, nil)
		hi1 := wCreate(t, L, hi, map[string]int{"n": 3}, nil)
		hiRight := wCreate(t, F1, hi, "for right", map[string]interface{}{"target": "right_claw"})
		hi2 := wCreate(t, F2, hi, map[string]int{"n": 4}, nil)
		special := wName("special")
		hiSpecial := wCreate(t, L, hi, "for one worker", map[string]interface{}{"target": special})

		streams := []string{hi, lo}
		want := []wJob{hi1, hi2, lo1, lo2}
		for i, wj := range want {
			a := wClaim(t, nodes[i%3], left, "wp-left", streams, 0)
			if !a.Claimed || a.JobID != wj.ID {
				t.Fatalf("claim %d: want job %s (stream %s), got %+v", i, wj.ID, wj.Stream, a)
			}
			if a.Stream != wj.Stream || !wJSONEqual(a.Payload, wj.Payload) {
				t.Fatalf("claim %d: stream/payload %s %s, want %s %s", i, a.Stream, a.Payload, wj.Stream, wj.Payload)
			}
			if a.MessageID == "" || a.Attempt != 1 || a.MaxAttempts != 5 {
				t.Fatalf("claim %d: message id / attempt: %+v", i, a)
			}
			if a.LeaseTTLSeconds != 300 || a.HeartbeatInterval != 100 {
				t.Fatalf("claim %d: lease %vs heartbeat %vs, want LEASE_SECONDS 300 and a third of it", i, a.LeaseTTLSeconds, a.HeartbeatInterval)
			}
		}
		if a := wClaim(t, F1, left, "wp-left", streams, 0); a.Claimed {
			t.Fatalf("left claw took %s, which is targeted elsewhere", a.JobID)
		}
		if a := wClaim(t, F2, right, "wp-right", streams, 0); !a.Claimed || a.JobID != hiRight.ID {
			t.Fatalf("right claw: want its targeted job %s, got %+v", hiRight.ID, a)
		}
		if a := wClaim(t, L, right, special, streams, 0); !a.Claimed || a.JobID != hiSpecial.ID {
			t.Fatalf("worker %s: want the job targeted at it %s, got %+v", special, hiSpecial.ID, a)
		}
		if a := wClaim(t, L, right, special, streams, 0); a.Claimed {
			t.Fatalf("streams should be empty, claimed %+v", a)
		}
	})

	t.Run("BadClaims", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			body  interface{}
			want  int
		}{
			{left, map[string]interface{}{"streams": []string{"x"}}, http.StatusBadRequest},                           // no worker_id
			{left, wClaimBody("w", []string{"bad stream"}, 0), http.StatusBadRequest},                                 // bad name
			{left, wClaimBody("w", []string{"x"}, -1), http.StatusBadRequest},                                         // negative wait
			{head, wClaimBody("w", []string{"x"}, 0), http.StatusForbidden},                                           // head is no worker
			{"nope", wClaimBody("w", []string{"x"}, 0), http.StatusUnauthorized},                                      // bad token
			{left, map[string]interface{}{"worker_id": "w", "streams": "x", "max_wait_ms": 0}, http.StatusBadRequest}, // wrong type
		} {
			if r := wCall(t, F1, tc.token, "POST", "/internal/worker/claim", tc.body); r.Status != tc.want {
				t.Errorf("claim %v: want %d, got %s", tc.body, tc.want, r)
			}
		}
		if r := wCall(t, F1, left, "GET", "/dlq", nil); r.Status != http.StatusForbidden {
			t.Errorf("GET /dlq as a claw: want 403, got %s", r)
		}
	})

	t.Run("RacingWorkersClaimEachJobOnce", func(t *testing.T) {
		const jobs, workers = 200, 12
		stream := wName("race")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// pollCtx ends the long polls once every job is claimed; completes
		// still run under ctx.
		pollCtx, endPolls := context.WithCancel(ctx)
		defer endPolls()
		var (
			mu      sync.Mutex
			claims  = map[string][]string{} // job id -> workers that claimed it
			created = map[string]bool{}
			errs    []string
			total   atomic.Int64
		)
		report := func(format string, args ...interface{}) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf(format, args...))
			mu.Unlock()
			cancel()
		}
		var wg sync.WaitGroup
		// Workers start first: most claims long-poll and race for each new job.
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				base, token := nodes[i%3], left
				if i%2 == 1 {
					token = right
				}
				worker := fmt.Sprintf("wr-%d", i)
				for pollCtx.Err() == nil && total.Load() < jobs {
					r, err := wDo(pollCtx, base, token, "POST", "/internal/worker/claim", wClaimBody(worker, []string{stream}, 1000))
					if err != nil {
						if pollCtx.Err() == nil {
							report("%s claim: %v", worker, err)
						}
						return
					}
					var a wClaimAnswer
					if r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
						report("%s claim: %s", worker, r)
						return
					}
					if !a.Claimed {
						continue
					}
					mu.Lock()
					claims[a.JobID] = append(claims[a.JobID], worker)
					mu.Unlock()
					total.Add(1)
					cr, err := wDo(ctx, base, token, "POST", "/internal/worker/complete", wWith(wRef(worker, a), "result", worker))
					if err != nil || cr.Status != http.StatusOK {
						report("%s complete %s: %v %v", worker, a.JobID, cr, err)
						return
					}
				}
				if total.Load() >= jobs {
					endPolls() // wake the other long polls
				}
			}(i)
		}
		var cwg sync.WaitGroup
		for p := 0; p < 4; p++ {
			cwg.Add(1)
			go func(p int) {
				defer cwg.Done()
				for k := p; k < jobs && ctx.Err() == nil; k += 4 {
					r, err := wDo(ctx, nodes[k%3], head, "POST", "/jobs", map[string]interface{}{"payload": k, "stream": stream})
					var j wJob
					if err != nil || r.Status != http.StatusCreated || json.Unmarshal(r.Body, &j) != nil {
						report("create %d: %v %v", k, r, err)
						return
					}
					mu.Lock()
					created[j.ID] = true
					mu.Unlock()
				}
			}(p)
		}
		cwg.Wait()
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("errors: %v", errs)
		}
		if len(created) != jobs {
			t.Fatalf("created %d jobs, want %d", len(created), jobs)
		}
		for id, ws := range claims {
			if len(ws) != 1 {
				t.Errorf("job %s claimed %d times, by %v", id, len(ws), ws)
			}
			if !created[id] {
				t.Errorf("claimed job %s that this test did not create", id)
			}
		}
		if len(claims) != jobs {
			t.Fatalf("%d distinct jobs claimed, want %d", len(claims), jobs)
		}
		if a := wClaim(t, F2, left, "wr-after", []string{stream}, 0); a.Claimed {
			t.Fatalf("stream should be drained, claimed %+v", a)
		}
		// Each job was completed once, by the one worker that claimed it.
		for id, ws := range claims {
			j := wGetJob(t, L, id)
			var res string
			if j.Status != "done" || json.Unmarshal(j.Result, &res) != nil || res != ws[0] {
				t.Fatalf("job %s: status %s result %s, want done by %s", id, j.Status, j.Result, ws[0])
			}
		}
	})

	t.Run("IdempotentComplete", func(t *testing.T) {
		stream := wName("idc")
		j := wCreate(t, L, stream, "x", nil)
		a := wMustClaim(t, F1, left, "wi-1", []string{stream})
		first := wComplete(t, F1, left, "wi-1", a, map[string]int{"v": 1})
		if ack := wAckOf(t, first, http.StatusOK); !ack.OK || !ack.Ack {
			t.Fatalf("complete: %s", first)
		}
		for _, base := range []string{F1, L, F2} {
			again := wComplete(t, base, left, "wi-1", a, map[string]int{"v": 2})
			if !wSameAnswer(first, again) || !strings.Contains(string(again.Body), `"duplicate":true`) {
				t.Fatalf("repeat through %s: %s, want the first answer %s", base, again, first)
			}
		}
		got := wGetJob(t, F2, j.ID)
		if got.Status != "done" || !wJSONEqual(got.Result, []byte(`{"v":1}`)) {
			t.Fatalf("job after repeats: %s %s, want done with the first result", got.Status, got.Result)
		}
		if n := wCountEvents(wEvents(t, F1, j.ID), "completed"); n != 1 {
			t.Fatalf("%d completed events, want 1", n)
		}
		// A made-up token for the same attempt is not a repeat.
		forged := a
		forged.LeaseToken = "forged"
		wRefused(t, "complete with a wrong token", wComplete(t, L, left, "wi-1", forged, nil))
	})

	t.Run("IdempotentFail", func(t *testing.T) {
		for _, tc := range []struct {
			retryable bool
			status    string
		}{{true, "queued"}, {false, "failed"}} {
			stream := wName("idf")
			tc := struct {
				job       wJob
				retryable bool
				status    string
			}{wCreate(t, L, stream, "x", map[string]interface{}{"maxAttempts": 3}), tc.retryable, tc.status}
			a := wMustClaim(t, F2, right, "wif", []string{stream})
			if a.JobID != tc.job.ID {
				t.Fatalf("claimed %s, want %s", a.JobID, tc.job.ID)
			}
			jerr := wJobError{Code: "E_IDEM", Message: "once", Retryable: tc.retryable}
			first := wFail(t, F2, right, "wif", a, jerr)
			ack := wAckOf(t, first, http.StatusOK)
			if !ack.OK || !ack.Ack || ack.Requeued != tc.retryable || ack.DLQ == tc.retryable {
				t.Fatalf("fail retryable=%v: %s", tc.retryable, first)
			}
			if tc.retryable {
				// The requeued job is taken again before the repeat arrives.
				if b := wMustClaim(t, L, left, "wif-2", []string{stream}); b.JobID != tc.job.ID || b.Attempt != 2 {
					t.Fatalf("reclaim: %+v", b)
				}
			}
			for _, base := range []string{F2, L, F1} {
				again := wFail(t, base, right, "wif", a, wJobError{Code: "E_OTHER", Message: "twice", Retryable: !tc.retryable})
				if !wSameAnswer(first, again) || !strings.Contains(string(again.Body), `"duplicate":true`) {
					t.Fatalf("repeat through %s: %s, want the first answer %s", base, again, first)
				}
			}
			evs := wEvents(t, L, tc.job.ID)
			if n := wCountEvents(evs, "failed"); n != 1 {
				t.Fatalf("%d failed events, want 1: %+v", n, evs)
			}
			got := wGetJob(t, L, tc.job.ID)
			want := tc.status
			if tc.retryable {
				want = "running" // the second claim holds it
			}
			if got.Status != want || got.Error == nil || got.Error.Code != "E_IDEM" {
				t.Fatalf("job: %s %+v, want %s with the first error", got.Status, got.Error, want)
			}
		}
	})

	t.Run("FailRetryableRequeuesNonRetryableDeadLetters", func(t *testing.T) {
		stream := wName("fail")
		rj := wCreate(t, L, stream, "r", nil)
		nj := wCreate(t, L, stream, "n", nil)
		ra := wMustClaim(t, F1, left, "wf", []string{stream})
		na := wMustClaim(t, F1, left, "wf", []string{stream})
		if ra.JobID != rj.ID || na.JobID != nj.ID {
			t.Fatal("claims out of order")
		}
		ack := wAckOf(t, wFail(t, F1, left, "wf", ra, wJobError{Code: "E_TMP", Message: "try again", Retryable: true}), http.StatusOK)
		if !ack.OK || !ack.Requeued || ack.DLQ {
			t.Fatalf("retryable fail: %+v", ack)
		}
		if got := wGetJob(t, F2, rj.ID); got.Status != "queued" || got.Attempts != 1 || got.Error == nil || got.Error.Code != "E_TMP" {
			t.Fatalf("requeued job: %+v", got)
		}
		ack = wAckOf(t, wFail(t, F2, left, "wf", na, wJobError{Code: "E_BAD", Message: "bad input", Stack: "at x", Retryable: false}), http.StatusOK)
		if !ack.OK || ack.Requeued || !ack.DLQ {
			t.Fatalf("non-retryable fail: %+v", ack)
		}
		if got := wGetJob(t, L, nj.ID); got.Status != "failed" {
			t.Fatalf("non-retryable job: %+v", got)
		}
		dlq := wDLQ(t, F1, "&stream="+stream)
		d, ok := dlq[nj.ID]
		if !ok || len(dlq) != 1 {
			t.Fatalf("dlq of %s: %v, want only %s", stream, dlq, nj.ID)
		}
		if d.Status != "failed" || d.Error == nil || d.Error.Code != "E_BAD" || d.Error.Message != "bad input" || d.Error.Stack != "at x" {
			t.Fatalf("dlq entry: %+v %+v", d, d.Error)
		}
		if _, ok := wDLQ(t, F2, "")[nj.ID]; !ok {
			t.Fatal("unfiltered dlq misses the failed job")
		}
		if _, ok := wDLQ(t, L, "&stream="+wName("elsewhere"))[nj.ID]; ok {
			t.Fatal("dlq filtered by another stream shows the job")
		}
	})

	t.Run("RetryableAtLastAttemptDeadLetters", func(t *testing.T) {
		stream := wName("last")
		j := wCreate(t, L, stream, "x", map[string]interface{}{"maxAttempts": 2})
		for attempt := 1; attempt <= 2; attempt++ {
			a := wMustClaim(t, nodes[attempt%3], right, "wl", []string{stream})
			if a.JobID != j.ID || a.Attempt != attempt || a.MaxAttempts != 2 {
				t.Fatalf("claim %d: %+v", attempt, a)
			}
			ack := wAckOf(t, wFail(t, F1, right, "wl", a, wJobError{Code: "E_TMP", Message: fmt.Sprint("try ", attempt), Retryable: true}), http.StatusOK)
			last := attempt == 2
			if !ack.OK || ack.Requeued == last || ack.DLQ != last {
				t.Fatalf("fail %d: %+v", attempt, ack)
			}
		}
		if got := wGetJob(t, F2, j.ID); got.Status != "dead" || got.Attempts != 2 {
			t.Fatalf("job: %+v", got)
		}
		d, ok := wDLQ(t, F2, "&stream="+stream)[j.ID]
		if !ok || d.Status != "dead" || d.Error == nil || d.Error.Message != "try 2" {
			t.Fatalf("dlq: %v %+v", ok, d)
		}
		if a := wClaim(t, L, right, "wl", []string{stream}, 0); a.Claimed {
			t.Fatalf("dead job claimed: %+v", a)
		}
	})

	t.Run("RedriveResetsAttempts", func(t *testing.T) {
		stream := wName("redrive")
		j := wCreate(t, L, stream, "x", map[string]interface{}{"maxAttempts": 1})
		a := wMustClaim(t, F1, left, "wd", []string{stream})
		wAckOf(t, wFail(t, F1, left, "wd", a, wJobError{Message: "no", Retryable: true}), http.StatusOK)
		if got := wGetJob(t, L, j.ID); got.Status != "dead" || got.Attempts != 1 {
			t.Fatalf("before redrive: %+v", got)
		}
		var red wJob
		wDecode(t, wCall(t, F2, head, "POST", "/dlq/"+j.ID+"/redrive", nil), http.StatusOK, &red)
		if red.ID != j.ID || red.Status != "queued" || red.Attempts != 0 {
			t.Fatalf("redrive answer: %+v", red)
		}
		if _, ok := wDLQ(t, F1, "&stream="+stream)[j.ID]; ok {
			t.Fatal("redriven job still listed in the dlq")
		}
		b := wMustClaim(t, F2, right, "wd-2", []string{stream})
		if b.JobID != j.ID || b.Attempt != 1 || b.AttemptID == a.AttemptID || b.LeaseToken == a.LeaseToken {
			t.Fatalf("claim after redrive: %+v", b)
		}
		if n := wCountEvents(wEvents(t, L, j.ID), "redriven"); n != 1 {
			t.Fatalf("%d redriven events", n)
		}
		// Only failed and dead jobs can be redriven; redrive is head's.
		if r := wCall(t, L, head, "POST", "/dlq/"+j.ID+"/redrive", nil); r.Status != http.StatusConflict {
			t.Fatalf("redrive of a running job: %s", r)
		}
		if r := wCall(t, L, head, "POST", "/dlq/"+"00000000-0000-0000-0000-000000000000"+"/redrive", nil); r.Status != http.StatusNotFound {
			t.Fatalf("redrive of an unknown job: %s", r)
		}
		if r := wCall(t, L, left, "POST", "/dlq/"+j.ID+"/redrive", nil); r.Status != http.StatusForbidden {
			t.Fatalf("redrive by a claw: %s", r)
		}
	})

	t.Run("LongPollReturnsJobCreatedWhileWaiting", func(t *testing.T) {
		stream := wName("lp")
		const maxWait = 20000
		start := time.Now()
		sent, done := wClaimAsync(context.Background(), L, left, "wlp", []string{stream}, maxWait)
		wAwaitSent(t, sent)
		wWaiters(t, c, 1) // the job comes while the claim waits
		var j wJob
		createSent := time.Now()
		wDecode(t, wCall(t, F2, head, "POST", "/jobs", map[string]interface{}{"payload": "late", "stream": stream}), http.StatusCreated, &j)
		createAck := time.Now()
		r := wAwait(t, "long poll", done, 15*time.Second)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		var a wClaimAnswer
		wDecode(t, r.Resp, http.StatusOK, &a)
		if !a.Claimed || a.JobID != j.ID {
			t.Fatalf("long poll answered %+v, want job %s", a, j.ID)
		}
		if r.At.Before(createSent) {
			t.Fatalf("claim answered before the job was created")
		}
		if total := r.At.Sub(start); total > 5*time.Second {
			t.Fatalf("claim answered after %v: not woken by the commit (max_wait %dms)", total, maxWait)
		}
		// Woken by the commit, not by a timer: well within a second of the ack.
		if lag := r.At.Sub(createAck); lag > time.Second {
			t.Fatalf("claim answered %v after the create was acknowledged", lag)
		}
		t.Logf("long poll on the leader: create sent->answer %v, create ack->answer %v", r.At.Sub(createSent), r.At.Sub(createAck))
	})

	t.Run("LongPollTimesOut", func(t *testing.T) {
		stream := wName("lpt")
		for _, base := range []string{L, F1} {
			start := time.Now()
			a := wClaim(t, base, right, "wlt", []string{stream}, 600)
			el := time.Since(start)
			if a.Claimed {
				t.Fatalf("claimed %+v from an empty stream", a)
			}
			if el < 550*time.Millisecond || el > 5*time.Second {
				t.Fatalf("empty long poll of 600ms answered after %v", el)
			}
		}
		start := time.Now()
		if a := wClaim(t, F2, right, "wlt", []string{stream}, 0); a.Claimed || time.Since(start) > 3*time.Second {
			t.Fatalf("max_wait_ms 0: %+v after %v", a, time.Since(start))
		}
	})

	t.Run("LongPollOnFollowerWakesOnCommitThroughAnotherNode", func(t *testing.T) {
		stream, other := wName("lpf"), wName("lpf-other")
		start := time.Now()
		sent, done := wClaimAsync(context.Background(), F1, right, "wlf", []string{stream}, 20000)
		wAwaitSent(t, sent)
		wWaiters(t, c, 1)
		// A job in another stream must not wake it with the wrong job.
		wCreate(t, L, other, "not this", nil)
		var j wJob
		createSent := time.Now()
		wDecode(t, wCall(t, F2, head, "POST", "/jobs", map[string]interface{}{"payload": "this", "stream": stream}), http.StatusCreated, &j)
		createAck := time.Now()
		r := wAwait(t, "long poll on a follower", done, 15*time.Second)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		var a wClaimAnswer
		wDecode(t, r.Resp, http.StatusOK, &a)
		if !a.Claimed || a.JobID != j.ID || a.Stream != stream {
			t.Fatalf("answered %+v, want %s", a, j.ID)
		}
		if total := r.At.Sub(start); total > 5*time.Second {
			t.Fatalf("answered after %v", total)
		}
		if lag := r.At.Sub(createAck); lag > time.Second {
			t.Fatalf("claim answered %v after the create was acknowledged", lag)
		}
		if got := wGetJob(t, F1, j.ID); got.Status != "running" || got.WorkerID != "wlf" {
			t.Fatalf("job after the follower's claim: %+v", got)
		}
		t.Logf("long poll on a follower: create sent->answer %v, create ack->answer %v", r.At.Sub(createSent), r.At.Sub(createAck))
	})

	t.Run("DisconnectedWaiterClaimsNothing", func(t *testing.T) {
		for _, base := range []string{L, F1} {
			stream := wName("gone")
			ctx, cancel := context.WithCancel(context.Background())
			sent, done := wClaimAsync(ctx, base, left, "wgone", []string{stream}, 20000)
			wAwaitSent(t, sent)
			wWaiters(t, c, 1)
			cancel()
			if r := wAwait(t, "cancelled claim", done, 10*time.Second); r.Err == nil {
				t.Fatalf("cancelled claim answered %s", r.Resp)
			}
			// The disconnect has travelled (follower -> leader) and the claim has
			// left the leader before the job exists.
			wWaiters(t, c, 0)
			j := wCreate(t, F2, stream, "for someone present", nil)
			a := wClaim(t, F2, right, "wpresent", []string{stream}, 5000)
			if !a.Claimed || a.JobID != j.ID || a.Attempt != 1 {
				t.Fatalf("through %s: present worker got %+v, want %s at attempt 1", base, a, j.ID)
			}
			for _, e := range wEvents(t, L, j.ID) {
				if e.WorkerID == "wgone" {
					t.Fatalf("through %s: the departed worker touched the job: %+v", base, e)
				}
			}
		}
	})

	t.Run("AttemptsShowWorkersAndOutcomes", func(t *testing.T) {
		stream := wName("att")
		j := wCreate(t, L, stream, "x", map[string]interface{}{"maxAttempts": 3})
		a1 := wMustClaim(t, F1, left, "wa-1", []string{stream})
		if at := wAttempts(t, F2, j.ID); len(at) != 1 || at[0].Outcome != "running" || at[0].ID != a1.AttemptID || at[0].WorkerID != "wa-1" {
			t.Fatalf("attempts while running: %+v", at)
		}
		wAckOf(t, wFail(t, F1, left, "wa-1", a1, wJobError{Code: "E1", Message: "first", Retryable: true}), http.StatusOK)
		a2 := wMustClaim(t, F2, right, "wa-2", []string{stream})
		hb := wAckOf(t, wCall(t, F2, right, "POST", "/internal/worker/heartbeat", wRef("wa-2", a2)), http.StatusOK)
		if !hb.OK || hb.LeaseExpiresAt == "" {
			t.Fatalf("heartbeat: %+v", hb)
		}
		wAckOf(t, wComplete(t, L, right, "wa-2", a2, "ok"), http.StatusOK)
		at := wAttempts(t, F1, j.ID)
		if len(at) != 2 {
			t.Fatalf("attempts: %+v", at)
		}
		want := []struct{ id, owner, worker, outcome string }{
			{a1.AttemptID, "left_claw", "wa-1", "failed"}, {a2.AttemptID, "right_claw", "wa-2", "completed"}}
		for i, w := range want {
			g := at[i]
			if g.ID != w.id || g.Owner != w.owner || g.WorkerID != w.worker || g.Outcome != w.outcome || g.StartedAt == "" || g.EndedAt == "" {
				t.Fatalf("attempt %d: %+v, want %+v", i, g, w)
			}
		}
		if at[0].Error == nil || at[0].Error.Code != "E1" || at[1].Error != nil {
			t.Fatalf("attempt errors: %+v %+v", at[0].Error, at[1].Error)
		}
		// A heartbeat of the finished attempt is fenced off.
		wRefused(t, "heartbeat after complete", wCall(t, F1, right, "POST", "/internal/worker/heartbeat", wRef("wa-2", a2)))
	})

	t.Run("V0AndV1ViewsAgree", func(t *testing.T) {
		stream := wName("views")
		j := wCreate(t, L, stream, "x", nil)
		a := wMustClaim(t, F1, left, "wv", []string{stream})
		for _, tok := range []string{head, left} {
			var g wJob
			wDecode(t, wCall(t, F2, tok, "GET", "/jobs/"+j.ID, nil), http.StatusOK, &g)
			if g.Status != "running" || g.ClaimedBy != "left_claw" || g.WorkerID != "wv" || g.AttemptID != a.AttemptID || g.Attempts != 1 || g.LeaseExpiresAt == "" {
				t.Fatalf("v0 view of a v1 claim: %+v", g)
			}
			if g.LeaseToken != "" {
				t.Fatal("v0 view leaks the lease token")
			}
		}
		hb := wAckOf(t, wCall(t, L, left, "POST", "/internal/worker/heartbeat", wRef("wv", a)), http.StatusOK)
		if g := wGetJob(t, F1, j.ID); g.LeaseExpiresAt != hb.LeaseExpiresAt {
			t.Fatalf("v0 lease %s, v1 heartbeat said %s", g.LeaseExpiresAt, hb.LeaseExpiresAt)
		}
		// The v0 list sees it running too.
		var list struct {
			Jobs []wJob `json:"jobs"`
		}
		wDecode(t, wCall(t, F2, head, "GET", "/jobs?status=running&stream="+stream, nil), http.StatusOK, &list)
		if len(list.Jobs) != 1 || list.Jobs[0].ID != j.ID {
			t.Fatalf("v0 list of running jobs: %+v", list.Jobs)
		}
		// Head overrides through v0; the worker's v1 complete is then fenced off.
		var done wJob
		wDecode(t, wCall(t, F2, head, "POST", "/jobs/"+j.ID+"/complete", map[string]interface{}{"result": "by head"}), http.StatusOK, &done)
		if done.Status != "done" {
			t.Fatalf("v0 complete by head: %+v", done)
		}
		// The worker's late complete is fenced off: head's override ended its
		// attempt, so it is not a repeat of the worker's own complete.
		late := wComplete(t, F1, left, "wv", a, "late")
		if late.Status != http.StatusConflict {
			t.Fatalf("v1 complete after head's v0 complete answered %s, want 409 stale_lease", late)
		}
		if g := wGetJob(t, L, j.ID); !wJSONEqual(g.Result, []byte(`"by head"`)) || g.Status != "done" {
			t.Fatalf("result %s (%s), want head's", g.Result, g.Status)
		}
		if n := wCountEvents(wEvents(t, L, j.ID), "completed"); n != 1 {
			t.Fatalf("%d completed events, want 1", n)
		}

		// The other way round: a v0 claim is completed through v1.
		k := wCreate(t, L, stream, "y", nil)
		var c0 wJob
		wDecode(t, wCall(t, F1, right, "POST", "/jobs/"+k.ID+"/claim", map[string]interface{}{"workerId": "wv0"}), http.StatusOK, &c0)
		if c0.LeaseToken == "" || c0.AttemptID == "" {
			t.Fatalf("v0 claim: %+v", c0)
		}
		v1 := wClaimAnswer{JobID: k.ID, AttemptID: c0.AttemptID, LeaseToken: c0.LeaseToken, Stream: stream}
		if ack := wAckOf(t, wComplete(t, F2, right, "wv0", v1, "via v1"), http.StatusOK); !ack.OK || !ack.Ack {
			t.Fatalf("v1 complete of a v0 claim: %+v", ack)
		}
		if g := wGetJob(t, F2, k.ID); g.Status != "done" || !wJSONEqual(g.Result, []byte(`"via v1"`)) {
			t.Fatalf("after v1 complete: %+v", g)
		}
	})
}

// ---- Short leases: fencing after a reap, and a leader kill ---------------

func TestWorkerShortLease(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "1", "REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0"})
	leader, followers := wRoles(t, c)
	L, F1, F2 := leader.URL, followers[0].URL, followers[1].URL
	left, right := testcluster.LeftToken, testcluster.RightToken

	t.Run("FencingAfterReap", func(t *testing.T) {
		stream := wName("fence")
		j := wCreate(t, L, stream, "x", nil)
		old := wMustClaim(t, F1, left, "wold", []string{stream})
		if old.LeaseTTLSeconds != 1 || old.HeartbeatInterval < 0.33 || old.HeartbeatInterval > 0.34 {
			t.Fatalf("lease %vs heartbeat %vs, want LEASE_SECONDS=1 and a third of it", old.LeaseTTLSeconds, old.HeartbeatInterval)
		}
		if err := testcluster.Eventually(15*time.Second, 50*time.Millisecond, func() error {
			if n := wCountEvents(wEvents(t, L, j.ID), "reaped"); n != 1 {
				return fmt.Errorf("%d reaped events", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Reaped and queued: the old worker holds nothing.
		wRefused(t, "old heartbeat while queued", wCall(t, F2, left, "POST", "/internal/worker/heartbeat", wRef("wold", old)))
		nw := wClaim(t, F2, right, "wnew", []string{stream}, 5000)
		if !nw.Claimed || nw.JobID != j.ID || nw.Attempt != 2 || nw.AttemptID == old.AttemptID || nw.LeaseToken == old.LeaseToken {
			t.Fatalf("new claim: %+v", nw)
		}
		// Running under the new lease (1s: these calls are quick).
		wRefused(t, "old complete", wComplete(t, F1, left, "wold", old, "old"))
		wRefused(t, "old fail", wFail(t, L, left, "wold", old, wJobError{Message: "old", Retryable: false}))
		wRefused(t, "old heartbeat", wCall(t, L, left, "POST", "/internal/worker/heartbeat", wRef("wold", old)))
		if ack := wAckOf(t, wComplete(t, F2, right, "wnew", nw, "new"), http.StatusOK); !ack.OK || !ack.Ack {
			t.Fatalf("new complete: %+v", ack)
		}
		g := wGetJob(t, F1, j.ID)
		if g.Status != "done" || !wJSONEqual(g.Result, []byte(`"new"`)) {
			t.Fatalf("job: %s %s, want done with the new worker's result", g.Status, g.Result)
		}
		evs := wEvents(t, F1, j.ID)
		if wCountEvents(evs, "completed") != 1 || wCountEvents(evs, "failed") != 0 {
			t.Fatalf("events: %+v", evs)
		}
		at := wAttempts(t, L, j.ID)
		if len(at) != 2 || at[0].WorkerID != "wold" || at[0].Outcome != "expired" || at[1].WorkerID != "wnew" || at[1].Outcome != "completed" {
			t.Fatalf("attempts: %+v", at)
		}
	})

	t.Run("LeaderKillDuringLongPolls", func(t *testing.T) {
		wLeaderKill(t, c, leader, []string{L, F1, F2}, wDo)
	})
}

// The same leader kill with every claim, complete and create sent over the
// nodes' multiplexed connections (spine-mux/1, as the Go client sends them):
// requests in flight on the killed leader's connection, and on the
// followers' relays to it, end as over HTTP, never in a second completion.
func TestWorkerLeaderKillOverMux(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"LEASE_SECONDS": "1", "REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0"})
	leader, followers := wRoles(t, c)
	tr := wire.NewTransport(&http.Transport{})
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	muxDo := func(ctx context.Context, base, token, method, path string, body interface{}, hdr ...string) (*wResp, error) {
		return wDoVia(ctx, hc, base, token, method, path, body, hdr...)
	}
	wLeaderKill(t, c, leader, []string{leader.URL, followers[0].URL, followers[1].URL}, muxDo)
	// The load went over the mux: each survivor still serves the test's
	// connection (the fallback to HTTP would have left none).
	for _, f := range followers {
		var h struct {
			MuxConnections *int64 `json:"mux_connections"`
		}
		wGetRetrying(t, f.URL, "/health", &h)
		if h.MuxConnections == nil || *h.MuxConnections < 1 {
			t.Errorf("%s serves %v mux connections, want the test's", f.ID, h.MuxConnections)
		}
	}
}

// wLeaderKill runs workers that long-poll and complete through every node
// with retries while jobs are created, SIGKILLs the leader midway, and checks
// that every job ends done exactly once and no claim was handed out twice.
func wLeaderKill(t *testing.T, c *testcluster.Cluster, leader *testcluster.Node, addrs []string, do wDoFunc) {
	const jobs, workers, killAt = 120, 9, 40
	head, left, right := testcluster.HeadToken, testcluster.LeftToken, testcluster.RightToken
	stream := wName("kill")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stop := make(chan struct{})

	type claimRec struct{ worker, jobID, attemptID string }
	var (
		mu        sync.Mutex
		claimed   []claimRec
		completed = map[string]int{} // job -> acknowledged completes (ok:true)
		fenced    atomic.Int64
		claimErrs atomic.Int64
	)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			token := left
			if i%2 == 1 {
				token = right
			}
			worker := fmt.Sprintf("wk-%d", i)
			addr := i % len(addrs)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, 8*time.Second)
				r, err := do(rctx, addrs[addr], token, "POST", "/internal/worker/claim", wClaimBody(worker, []string{stream}, 1500))
				rcancel()
				var a wClaimAnswer
				if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &a) != nil {
					// Node down, no leader, outcome unknown: a job this claim took is
					// reaped after its 1s lease and claimed again.
					claimErrs.Add(1)
					addr = (addr + 1) % len(addrs)
					if ctx.Err() != nil {
						return
					}
					continue
				}
				if !a.Claimed {
					continue
				}
				mu.Lock()
				claimed = append(claimed, claimRec{worker, a.JobID, a.AttemptID})
				mu.Unlock()
				// Complete, retrying the same attempt across nodes until a definite answer.
				for try := 0; ; try++ {
					rctx, rcancel := context.WithTimeout(ctx, 8*time.Second)
					cr, err := do(rctx, addrs[addr], token, "POST", "/internal/worker/complete", wWith(wRef(worker, a), "result", worker))
					rcancel()
					if err == nil && cr.Status == http.StatusOK {
						mu.Lock()
						completed[a.JobID]++
						mu.Unlock()
						break
					}
					if err == nil && cr.Status == http.StatusConflict {
						fenced.Add(1) // lease lost to the reaper; someone else completes it
						break
					}
					addr = (addr + 1) % len(addrs)
					if ctx.Err() != nil || try > 50 {
						break
					}
				}
			}
		}(i)
	}

	// Create jobs with idempotency keys, retrying across nodes; kill the
	// leader once killAt jobs exist.
	ids := map[string]bool{}
	addr := 0
	killed := false
	for k := 0; k < jobs; k++ {
		if k == killAt {
			if err := c.Kill(leader); err != nil {
				t.Fatal(err)
			}
			killed = true
			t.Logf("killed leader %s after %d creates", leader.ID, k)
		}
		key := fmt.Sprintf("%s-%d", stream, k)
		var j wJob
		err := testcluster.Eventually(30*time.Second, 50*time.Millisecond, func() error {
			rctx, rcancel := context.WithTimeout(ctx, 8*time.Second)
			defer rcancel()
			r, err := do(rctx, addrs[addr], head, "POST", "/jobs", map[string]interface{}{"payload": k, "stream": stream, "idempotencyKey": key})
			if err == nil && (r.Status == http.StatusCreated || r.Status == http.StatusOK) {
				return json.Unmarshal(r.Body, &j)
			}
			addr = (addr + 1) % len(addrs)
			if err != nil {
				return err
			}
			return errors.New(r.String())
		})
		if err != nil {
			t.Fatalf("create %d: %v", k, err)
		}
		ids[j.ID] = true
	}
	if !killed || len(ids) != jobs {
		t.Fatalf("killed=%v, %d distinct jobs of %d", killed, len(ids), jobs)
	}
	var live []string
	for _, a := range addrs {
		if a != leader.URL {
			live = append(live, a)
		}
	}
	// Every job ends done.
	err := testcluster.Eventually(45*time.Second, 200*time.Millisecond, func() error {
		var out struct {
			Jobs []wJob `json:"jobs"`
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		r, err := wDo(rctx, live[0], head, "GET", "/jobs?limit=1000&stream="+stream, nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &out) != nil {
			return errors.New(r.String())
		}
		notDone := 0
		for _, j := range out.Jobs {
			if j.Status != "done" {
				notDone++
			}
		}
		if len(out.Jobs) != jobs || notDone > 0 {
			return fmt.Errorf("%d jobs in the stream, %d not done", len(out.Jobs), notDone)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d claims answered, %d claim errors, %d completes fenced off", len(claimed), claimErrs.Load(), fenced.Load())

	// No attempt was handed to two workers; each job completed exactly once.
	seen := map[string]string{}
	for _, cr := range claimed {
		if w, dup := seen[cr.attemptID]; dup {
			t.Fatalf("attempt %s handed to %s and %s", cr.attemptID, w, cr.worker)
		}
		seen[cr.attemptID] = cr.worker
	}
	byJob := map[string][]claimRec{}
	for _, cr := range claimed {
		byJob[cr.jobID] = append(byJob[cr.jobID], cr)
	}
	sortedIDs := make([]string, 0, len(ids))
	for id := range ids {
		sortedIDs = append(sortedIDs, id)
	}
	sort.Strings(sortedIDs)
	for _, id := range sortedIDs {
		if n := completed[id]; n != 1 {
			t.Errorf("job %s: %d acknowledged completes, want 1", id, n)
		}
		var evs struct {
			Events []wEvent `json:"events"`
		}
		wGetRetrying(t, live[0], "/jobs/"+id+"/events", &evs)
		if n := wCountEvents(evs.Events, "completed"); n != 1 {
			t.Errorf("job %s: %d completed events, want 1", id, n)
		}
		var ats struct {
			Attempts []wAttempt `json:"attempts"`
		}
		wGetRetrying(t, live[1], "/jobs/"+id+"/attempts", &ats)
		at := ats.Attempts
		running, completedAt := 0, 0
		byID := map[string]wAttempt{}
		for _, x := range at {
			byID[x.ID] = x
			switch x.Outcome {
			case "running":
				running++
			case "completed":
				completedAt++
			}
		}
		if running != 0 || completedAt != 1 {
			t.Errorf("job %s attempts: %+v", id, at)
		}
		// Every claim a worker was answered is an attempt of the job, owned by that worker.
		for _, cr := range byJob[id] {
			if x, ok := byID[cr.attemptID]; !ok || x.WorkerID != cr.worker {
				t.Errorf("job %s: claim answer %+v is not its attempt %+v", id, cr, x)
			}
		}
	}
}

// wGetRetrying reads path as head, retrying 503s (an election settling
// after the kill: the API answers 503 no_leader with Retry-After) for a while.
func wGetRetrying(t testing.TB, base, path string, v interface{}) {
	t.Helper()
	var last *wResp
	err := testcluster.Eventually(20*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := wDo(ctx, base, testcluster.HeadToken, "GET", path, nil)
		if err != nil {
			return err
		}
		last = r
		if r.Status == http.StatusServiceUnavailable {
			return errors.New(r.String())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	wDecode(t, last, http.StatusOK, v)
}

// ---- Benchmark -----------------------------------------------------------

// wStartCluster is startCluster for any testing.TB.
func wStartCluster(tb testing.TB, env map[string]string) *testcluster.Cluster {
	tb.Helper()
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: tb.TempDir(), Nodes: 3, Env: env, Logf: tb.Logf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopCluster(tb, c) })
	return c
}

func wPercentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkLongPollWake measures how fast a long-polling worker (on a
// follower) gets a job created through the other follower: from the
// create's acknowledgement (committed) to the claim's answer, and from the
// create being sent to the claim's answer. Each iteration waits until the
// claim is parked on the leader before creating, so only the wake is measured.
func BenchmarkLongPollWake(b *testing.B) {
	c := wStartCluster(b, nil)
	_, followers := wRoles(b, c)
	W, C := followers[0].URL, followers[1].URL
	stream := wName("bench")
	// Warm both connections.
	wCreate(b, C, stream, "warm", nil)
	wClaim(b, W, testcluster.LeftToken, "wb", []string{stream}, 0)

	var ackToAnswer, sentToAnswer []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sent, done := wClaimAsync(context.Background(), W, testcluster.LeftToken, "wb", []string{stream}, 10000)
		wAwaitSent(b, sent)
		wWaiters(b, c, 1)
		t0 := time.Now()
		r := wCall(b, C, testcluster.HeadToken, "POST", "/jobs", map[string]interface{}{"payload": i, "stream": stream})
		t1 := time.Now()
		if r.Status != http.StatusCreated {
			b.Fatalf("create: %s", r)
		}
		res := wAwait(b, "bench long poll", done, 15*time.Second)
		if res.Err != nil || res.Resp.Status != http.StatusOK || !strings.Contains(string(res.Resp.Body), `"claimed":true`) {
			b.Fatalf("claim: %v %v", res.Resp, res.Err)
		}
		ackToAnswer = append(ackToAnswer, res.At.Sub(t1))
		sentToAnswer = append(sentToAnswer, res.At.Sub(t0))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 {
		v, _ := strconv.ParseFloat(fmt.Sprintf("%.3f", float64(d)/1e6), 64)
		return v
	}
	b.ReportMetric(ms(wPercentile(ackToAnswer, 0.5)), "ack->claim-p50-ms")
	b.ReportMetric(ms(wPercentile(ackToAnswer, 0.99)), "ack->claim-p99-ms")
	b.ReportMetric(ms(wPercentile(sentToAnswer, 0.5)), "sent->claim-p50-ms")
	b.ReportMetric(ms(wPercentile(sentToAnswer, 0.99)), "sent->claim-p99-ms")
}
