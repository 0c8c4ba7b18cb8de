package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

// node is where a request goes.
type node struct{ id, url string }

// pool is the set of live jobs the clients work on, with the state each was
// last seen in (a hint for choosing operations, not a check).
type pool struct {
	mu     sync.Mutex
	ids    []string
	pos    map[string]int
	status map[string]string
}

func newPool() *pool { return &pool{pos: map[string]int{}, status: map[string]string{}} }

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids)
}

// see records a job's state; a done job leaves the pool, any other joins it.
func (p *pool) see(id, status string) {
	if id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == string(client.JobStatusDone) {
		if i, ok := p.pos[id]; ok {
			last := p.ids[len(p.ids)-1]
			p.ids[i], p.pos[last] = last, i
			p.ids = p.ids[:len(p.ids)-1]
			delete(p.pos, id)
			delete(p.status, id)
		}
		return
	}
	if _, ok := p.pos[id]; !ok {
		p.pos[id] = len(p.ids)
		p.ids = append(p.ids, id)
	}
	if status != "" {
		p.status[id] = status
	}
}

// pick returns a random job, most of the time one last seen in one of the
// preferred states if there is any ("" when the pool is empty).
func (p *pool) pick(rng *rand.Rand, prefer ...string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ids) == 0 {
		return ""
	}
	if len(prefer) > 0 && rng.IntN(10) < 7 {
		var cand []string
		for _, id := range p.ids {
			for _, s := range prefer {
				if p.status[id] == s {
					cand = append(cand, id)
					break
				}
			}
		}
		if len(cand) > 0 {
			return cand[rng.IntN(len(cand))]
		}
	}
	return p.ids[rng.IntN(len(p.ids))]
}

// lease is a claim a client holds (or held).
type lease struct {
	job, token, attempt string
	label               string
	index               uint64 // X-Spine-Index of the claim's answer
	worker              bool   // granted by a worker claim-next
}

// capture receives the status and headers of a request's answer: the
// transport fills in the one it finds in the request's context.
//
// wrote is set once net/http has written the request on a connection
// (httptrace WroteRequest). net/http replays a POST that carries an
// Idempotency-Key (a create) on a new connection when the one it was
// written on breaks, and then reports the new connection's dial error: a
// dial error proves nothing was sent only when nothing was written before.
// The multiplexed transport does not trace; its dial errors are its first.
type capture struct {
	status int
	header http.Header
	wrote  atomic.Bool
	// writes counts the writes (POSTs) sent: more than one means the Go
	// client repeated the call.
	writes atomic.Int32
}

// withTrace returns ctx with a trace that sets cp.wrote.
func withTrace(ctx context.Context, cp *capture) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { cp.wrote.Store(true) },
	})
}

// classifyError is classifyTransport, knowing whether the request was
// written on a connection before the error (see capture).
func classifyError(err error, cp *capture) (Outcome, string) {
	o, code := classifyTransport(err)
	if o == Refused && cp != nil && cp.wrote.Load() {
		return Unknown, "written, then " + lastPart(err)
	}
	return o, code
}

type captureKey struct{}

type captureTransport struct{ inner http.RoundTripper }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c, ok := req.Context().Value(captureKey{}).(*capture); ok && req.Method == http.MethodPost {
		c.writes.Add(1)
	}
	resp, err := t.inner.RoundTrip(req)
	if err == nil {
		if c, ok := req.Context().Value(captureKey{}).(*capture); ok {
			c.status, c.header = resp.StatusCode, resp.Header.Clone()
		}
	}
	return resp, err
}

// newHTTP returns the HTTP client the workload's requests share: over one
// multiplexed connection per node (as the Go client does by default) or
// over plain HTTP. Redirects are not followed: a node must answer.
func newHTTP(mux bool) (*http.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	var rt http.RoundTripper = tr
	closeFn := tr.CloseIdleConnections
	if mux {
		wt := wire.NewTransport(tr)
		rt, closeFn = wt, wt.CloseIdleConnections
	}
	return &http.Client{Transport: captureTransport{rt},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, closeFn
}

// loadClient is one client goroutine of the workload.
type loadClient struct {
	r        *runner
	id       int
	rng      *rand.Rand
	token    string // claw token of the claims and lease calls
	workerID string
	http     *http.Client

	held []*lease // leases this client holds
	old  []*lease // leases it knows to be over, for fencing checks

	pendingKey string // a create whose outcome is unknown: retried with this key
	pendingMax int
	creates    int
	maxIndex   uint64 // highest X-Spine-Index seen
}

const (
	maxHeld = 3
	maxOld  = 6
)

// run does operations until load ends (bounded by time, and by count as a
// backstop). Requests run under ctx, not load: the end of the load lets the
// operations in flight finish (each is bounded by its timeout) instead of
// cutting them off into unknown outcomes.
func (lc *loadClient) run(ctx, load context.Context) {
	maxOps := int(lc.r.cfg.Timeout/time.Millisecond) + 1000
	for i := 0; i < maxOps && load.Err() == nil && ctx.Err() == nil; i++ {
		select {
		case d := <-lc.r.stalled[lc.id]:
			// A worker stalled past its leases (PauseWorker): what it
			// held was reaped meanwhile; it goes on as if nothing happened.
			if !testcluster.SleepCtx(ctx, d) {
				return
			}
		default:
		}
		lc.step(ctx)
		if !testcluster.SleepCtx(load, time.Duration(lc.rng.Int64N(int64(lc.r.cfg.Think)+1))) {
			return
		}
	}
}

// step does one random operation.
func (lc *loadClient) step(ctx context.Context) {
	poolN := lc.r.pool.size()
	w := map[string]int{"get": 10, "redrive": 4}
	if lc.pendingKey != "" {
		w["create"] = 30
	} else if poolN < lc.r.cfg.Jobs {
		w["create"] = 20
	}
	if len(lc.held) < maxHeld {
		w["claim"], w["wclaim"] = 14, 8
	}
	if len(lc.held) > 0 {
		w["heartbeat"], w["complete"], w["fail"], w["release"] = 12, 10, 6, 5
	}
	if len(lc.old) > 0 {
		w["stale"] = 3
	}
	if poolN == 0 {
		w["get"], w["redrive"], w["claim"] = 0, 0, 0
	}
	// A fixed order keeps the choice a function of the seed.
	order := []string{"create", "claim", "wclaim", "heartbeat", "complete", "fail", "release", "stale", "redrive", "get"}
	total := 0
	for _, k := range order {
		total += w[k]
	}
	if total == 0 {
		return
	}
	x := lc.rng.IntN(total)
	choice := ""
	for _, k := range order {
		if x < w[k] {
			choice = k
			break
		}
		x -= w[k]
	}
	n := lc.r.nodes[lc.rng.IntN(len(lc.r.nodes))]
	switch choice {
	case "create":
		lc.create(ctx, n)
	case "claim":
		lc.claim(ctx, n)
	case "wclaim":
		lc.workerClaim(ctx, n)
	case "heartbeat":
		lc.heartbeat(ctx, n, lc.rng.IntN(len(lc.held)), false)
	case "complete":
		lc.complete(ctx, n, lc.rng.IntN(len(lc.held)), false)
	case "fail":
		lc.fail(ctx, n, lc.rng.IntN(len(lc.held)), false)
	case "release":
		lc.release(ctx, n, lc.rng.IntN(len(lc.held)), false)
	case "stale":
		i := lc.rng.IntN(len(lc.old))
		switch lc.rng.IntN(4) {
		case 0:
			lc.heartbeat(ctx, n, i, true)
		case 1:
			lc.complete(ctx, n, i, true)
		case 2:
			lc.fail(ctx, n, i, true)
		default:
			lc.release(ctx, n, i, true)
		}
	case "redrive":
		lc.redrive(ctx, n)
	case "get":
		lc.get(ctx, n)
	}
}

// api is a Go client for one node that makes exactly one try per call, so
// that each operation is one request to the node chosen for it.
func (lc *loadClient) api(n node, token string) *client.Client {
	c, err := client.New([]string{n.url}, client.WithToken(token), client.WithHTTPClient(lc.http),
		client.WithTimeout(lc.r.cfg.RequestTimeout), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		panic(err) // the harness's URLs cannot be bad
	}
	return c
}

// begin starts an operation; its context carries a capture for the answer.
func (lc *loadClient) begin(ctx context.Context, kind OpKind, n node, job, args string) (*Op, context.Context, *capture, context.CancelFunc) {
	cp := &capture{}
	cctx, cancel := context.WithTimeout(withTrace(context.WithValue(ctx, captureKey{}, cp), cp), lc.r.cfg.RequestTimeout+lc.r.cfg.MaxWait+time.Second)
	return &Op{Client: lc.id, Kind: kind, Node: n.id, JobID: job, Args: args, Start: time.Now()}, cctx, cp, cancel
}

// finish classifies a Go client call's result and records the operation.
func (lc *loadClient) finish(op *Op, cp *capture, err error) {
	op.End = time.Now()
	op.Status = cp.status
	if cp.header != nil {
		op.Index, _ = strconv.ParseUint(cp.header.Get(client.HeaderIndex), 10, 64)
		lc.maxIndex = max(lc.maxIndex, op.Index)
	}
	op.Outcome, op.Code = OK, ""
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) {
			op.Status, op.Code = ae.Status, ae.Code
			op.Outcome = classifyStatus(ae.Status, ae.Code)
			if ae.Job != nil {
				op.View = viewOf(ae.Job)
			}
		} else {
			op.Status = 0
			op.Outcome, op.Code = classifyError(err, cp)
		}
	}
	if op.Outcome == OK {
		lc.r.pool.see(op.JobID, viewStatus(op.View))
	} else if op.View != nil {
		lc.r.pool.see(op.JobID, op.View.Status)
	}
	lc.r.hist.add(op)
}

func viewStatus(v *JobView) string {
	if v == nil {
		return ""
	}
	return v.Status
}

// classifyStatus: what a non-2xx status says about the operation.
func classifyStatus(status int, code string) Outcome {
	switch {
	case status/100 == 2:
		return OK
	case status == http.StatusServiceUnavailable && code == client.CodeNoLeader:
		return Refused
	case status >= 500:
		return Unknown // outcome_unknown, or a 5xx that proves nothing
	default:
		return Refused
	}
}

// classifyTransport: a request without an answer is unknown, unless it
// certainly never left this process.
func classifyTransport(err error) (Outcome, string) {
	var op *net.OpError
	if errors.Is(err, wire.ErrNotSent) || errors.As(err, &op) && op.Op == "dial" {
		return Refused, "not sent (" + lastPart(err) + ")"
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return Unknown, "timeout"
	}
	return Unknown, lastPart(err)
}

// lastPart is the innermost message of an error chain, for history lines.
func lastPart(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// raw sends a request the Go client has no call for (a consistent read, a
// heartbeat with X-Spine-Min-Index) and records it like finish.
func (lc *loadClient) raw(ctx context.Context, op *Op, n node, method, path, token string, body any, minIndex uint64) (json.RawMessage, bool) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, lc.r.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, n.url+path, rd)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if minIndex > 0 {
		req.Header.Set(api.HeaderMinIndex, strconv.FormatUint(minIndex, 10))
	}
	resp, err := lc.http.Do(req)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	op.End = time.Now()
	if err != nil {
		cp, _ := ctx.Value(captureKey{}).(*capture)
		op.Outcome, op.Code = classifyError(err, cp)
		if resp != nil {
			op.Status, op.Outcome = resp.StatusCode, Unknown // the answer was cut off
		}
		lc.r.hist.add(op)
		return nil, false
	}
	op.Status = resp.StatusCode
	op.Index, _ = strconv.ParseUint(resp.Header.Get(client.HeaderIndex), 10, 64)
	lc.maxIndex = max(lc.maxIndex, op.Index)
	if resp.StatusCode/100 == 2 {
		op.Outcome = OK
		lc.r.hist.add(op)
		return data, true
	}
	var eb api.ErrorBody
	_ = json.Unmarshal(data, &eb)
	op.Code = eb.Error.Code
	op.Outcome = classifyStatus(resp.StatusCode, op.Code)
	if eb.Error.Job != nil {
		op.View = viewOf(eb.Error.Job)
		lc.r.pool.see(op.JobID, op.View.Status)
	}
	lc.r.hist.add(op)
	return nil, false
}

// rawJob decodes a job answer into the operation's view.
func (lc *loadClient) rawJob(op *Op, data json.RawMessage) *client.Job {
	var j client.Job
	if err := json.Unmarshal(data, &j); err != nil || j.ID == "" {
		return nil
	}
	op.View = viewOf(&j)
	lc.r.pool.see(op.JobID, string(j.Status))
	return &j
}

// ---- operations ----
