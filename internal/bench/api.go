package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	spineapi "github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// api is a lean HTTP client for the hot loop: fasthttp's client, which
// sends and reads on the caller's goroutine over pooled keep-alive
// connections (net/http's Transport hands every request to two more
// goroutines per connection, and on a machine the nodes share that CPU is
// theirs), one pool sized for every producer and worker, no retries (a
// failed request is counted, never hidden), hand-built request bodies.
type api struct {
	nodes      []string // base URLs
	hc         *fasthttp.Client
	head, claw string // "Bearer …"
	reqTimeout time.Duration
	// mux sends authenticated requests over one spine-mux/1 connection per
	// node instead of fasthttp's keep-alive connections (what a node does
	// not accept over the mux still goes over HTTP).
	mux   bool
	muxes wire.Pool
	// next is whether completes ask for the next job: nextAuto until a
	// complete with one was answered (nextOn) or refused as a field the
	// cluster does not know (nextOff).
	next atomic.Int32
}

const (
	nextAuto int32 = iota
	nextOn
	nextOff
)

func newAPI(nodes []string, headToken, clawToken string, conns int, reqTimeout time.Duration) *api {
	hc := &fasthttp.Client{
		Name:                          "spine-bench",
		MaxConnsPerHost:               conns,
		MaxConnWaitTimeout:            reqTimeout,
		MaxIdleConnDuration:           90 * time.Second,
		MaxIdemponentCallAttempts:     1, // no retries
		ReadBufferSize:                8 << 10,
		WriteBufferSize:               8 << 10,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}
	return &api{
		nodes: nodes, hc: hc,
		head: "Bearer " + headToken, claw: "Bearer " + clawToken, reqTimeout: reqTimeout,
		muxes: wire.Pool{Path: wire.MuxPath, Protocol: wire.MuxProtocol},
	}
}

func (a *api) close() {
	a.hc.CloseIdleConnections()
	a.muxes.Close()
}

// httpError is a non-2xx answer.
type httpError struct {
	Status int
	Code   string
	Body   string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Body)
}

// do sends one request and decodes a 2xx JSON answer into out (if not nil).
// Every non-2xx answer and every transport error is returned as an error.
func (a *api) do(ctx context.Context, method, u, auth string, body []byte, timeout time.Duration, out any) (int, error) {
	st, _, err := a.doIndexed(ctx, method, u, auth, body, timeout, out, 0)
	return st, err
}

// doIndexed is do that also sends minIndex as X-Spine-Min-Index (unless 0)
// and returns the answer's X-Spine-Index. The request ends by the earlier
// of ctx's deadline and timeout; a ctx cancelled while it is in flight
// takes effect at the next call.
func (a *api) doIndexed(ctx context.Context, method, u, auth string, body []byte, timeout time.Duration, out any, minIndex uint64) (int, uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if timeout <= 0 {
		timeout = a.reqTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if a.mux && auth != "" {
		st, index, ok, err := a.doMux(ctx, method, u, auth, body, deadline, out, minIndex)
		if ok {
			return st, index, err
		}
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(u)
	req.Header.SetMethod(method)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if minIndex > 0 {
		req.Header.Set(spineapi.HeaderMinIndex, strconv.FormatUint(minIndex, 10))
	}
	if err := a.hc.DoDeadline(req, resp, deadline); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, 0, cerr
		}
		return 0, 0, err
	}
	status, data := resp.StatusCode(), resp.Body()
	if err := decodeAnswer(status, data, out); err != nil {
		return status, 0, err
	}
	index, _ := strconv.ParseUint(string(resp.Header.Peek(spineapi.HeaderIndex)), 10, 64)
	return status, index, nil
}

// doMux is doIndexed over the node's mux connection; ok is false when the
// node does not take one (the caller then uses HTTP).
func (a *api) doMux(ctx context.Context, method, u, auth string, body []byte, deadline time.Time, out any, minIndex uint64) (status int, index uint64, ok bool, err error) {
	base := ""
	for _, n := range a.nodes {
		if strings.HasPrefix(u, n+"/") {
			base = n
			break
		}
	}
	if base == "" {
		return 0, 0, false, nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	c, err := a.muxes.Get(dctx, base, strings.TrimPrefix(auth, "Bearer "))
	if errors.Is(err, wire.ErrUnsupported) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, true, err
	}
	h := http.Header{"Authorization": {auth}}
	if body != nil {
		h["Content-Type"] = []string{"application/json"}
	}
	if minIndex > 0 {
		h[spineapi.HeaderMinIndex] = []string{strconv.FormatUint(minIndex, 10)}
	}
	resp, err := c.RoundTrip(dctx, wire.AppendRequest(nil, method, u[len(base):], h, body))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, 0, true, cerr
		}
		return 0, 0, true, err
	}
	data, _ := io.ReadAll(resp.Body)
	if err := decodeAnswer(resp.StatusCode, data, out); err != nil {
		return resp.StatusCode, 0, true, err
	}
	index, _ = strconv.ParseUint(resp.Header.Get(spineapi.HeaderIndex), 10, 64)
	return resp.StatusCode, index, true, nil
}

var answerOptions = jsonv2.MatchCaseInsensitiveNames(true)

// decodeAnswer turns a non-2xx answer into an *httpError and decodes a 2xx
// one into out (if not nil).
func decodeAnswer(status int, data []byte, out any) error {
	if status < 200 || status > 299 {
		he := &httpError{Status: status, Body: strings.TrimSpace(string(data))}
		var e spineapi.ErrorBody
		if json.Unmarshal(data, &e) == nil {
			he.Code = e.Error.Code
		}
		if len(he.Body) > 300 {
			he.Body = he.Body[:300] + "…"
		}
		return he
	}
	if out != nil {
		// The encoding/json/v2 decoder, matching names as encoding/json
		// does: the same checks (valid JSON, the fields' types) at less
		// CPU, which on a machine the nodes share is theirs.
		if err := jsonv2.Unmarshal(data, out, answerOptions); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
	}
	return nil
}

func (a *api) health(ctx context.Context, node int) (*spineapi.Health, error) {
	var h spineapi.Health
	if _, err := a.do(ctx, http.MethodGet, a.nodes[node]+"/health", "", nil, 5*time.Second, &h); err != nil {
		return nil, fmt.Errorf("%s/health: %w", a.nodes[node], err)
	}
	return &h, nil
}

// counters is what the nodes' /health answers count, summed over the nodes
// (or the difference of two such sums over a phase).
type counters struct {
	cpu              float64 // cpu_seconds
	batches, entries uint64  // log_batches, log_entries (0 from servers that predate them)
	appendSec        float64 // log_append_seconds (likewise)
	localHB          uint64  // local_heartbeats (likewise)
}

// counters sums the counters over every node's /health; perNode holds each
// node's cpu_seconds.
func (a *api) counters(ctx context.Context) (total counters, perNode []float64, err error) {
	perNode = make([]float64, len(a.nodes))
	for i := range a.nodes {
		h, err := a.health(ctx, i)
		if err != nil {
			return counters{}, nil, err
		}
		if h.CPUSeconds == nil {
			return counters{}, nil, fmt.Errorf("%s/health has no cpu_seconds", a.nodes[i])
		}
		perNode[i] = *h.CPUSeconds
		total.cpu += *h.CPUSeconds
		total.batches += h.LogBatches
		total.entries += h.LogEntries
		total.appendSec += h.LogAppendSeconds
		total.localHB += h.LocalHeartbeats
	}
	return total, perNode, nil
}

// createdJob is the part of the create answer the benchmark reads.
type createdJob struct {
	ID          string `json:"id"`
	CreateIndex uint64 `json:"createIndex"`
}

// createBody builds {"payload":{"t":T,"i":I,"pad":"…"},"stream":S} with a
// payload of exactly size bytes when size allows it.
func createBody(buf []byte, stream string, sentNs int64, id int64, size int) []byte {
	buf = buf[:0]
	buf = append(buf, `{"stream":"`...)
	buf = append(buf, stream...)
	buf = append(buf, `","payload":`...)
	start := len(buf)
	buf = append(buf, `{"t":`...)
	buf = strconv.AppendInt(buf, sentNs, 10)
	buf = append(buf, `,"i":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"pad":"`...)
	// pad so that the payload object is size bytes: current + pad + `"}`.
	for n := size - (len(buf) - start) - 2; n > 0; n-- {
		buf = append(buf, 'a'+byte(n%26))
	}
	buf = append(buf, `"}}`...)
	return buf
}

func (a *api) create(ctx context.Context, node int, body []byte) (*createdJob, error) {
	var j createdJob
	st, err := a.do(ctx, http.MethodPost, a.nodes[node]+"/jobs", a.head, body, 0, &j)
	if err != nil {
		return nil, err
	}
	if st != http.StatusCreated || j.ID == "" {
		return nil, fmt.Errorf("create: status %d, id %q", st, j.ID)
	}
	return &j, nil
}

// claim is the worker-contract claim answer.
type claim struct {
	Claimed    bool   `json:"claimed"`
	JobID      string `json:"job_id"`
	AttemptID  string `json:"attempt_id"`
	LeaseToken string `json:"lease_token"`
	Stream     string `json:"stream"`
	MessageID  string `json:"message_id"`
	Payload    struct {
		T int64 `json:"t"`
		I int64 `json:"i"`
	} `json:"payload"`
	Attempt int `json:"attempt"`
	// index is the claim answer's X-Spine-Index; the heartbeats send it
	// as X-Spine-Min-Index, as a claw that reads its own writes does.
	index uint64
}

func (a *api) claim(ctx context.Context, node int, workerID, stream string, wait time.Duration) (*claim, error) {
	body := make([]byte, 0, 128)
	body = append(body, `{"worker_id":"`...)
	body = append(body, workerID...)
	body = append(body, `","streams":["`...)
	body = append(body, stream...)
	body = append(body, `"],"max_wait_ms":`...)
	body = strconv.AppendInt(body, wait.Milliseconds(), 10)
	body = append(body, '}')
	var c claim
	_, idx, err := a.doIndexed(ctx, http.MethodPost, a.nodes[node]+"/internal/worker/claim", a.claw, body, wait+a.reqTimeout, &c, 0)
	if err != nil {
		return nil, err
	}
	c.index = idx
	if c.Claimed && (c.JobID == "" || c.LeaseToken == "" || c.AttemptID == "") {
		return nil, errors.New("claim: claimed:true without job_id/attempt_id/lease_token")
	}
	return &c, nil
}

func appendRef(body []byte, workerID string, c *claim, full bool) []byte {
	body = append(body, `{"worker_id":"`...)
	body = append(body, workerID...)
	body = append(body, `","job_id":"`...)
	body = append(body, c.JobID...)
	body = append(body, `","lease_token":"`...)
	body = append(body, c.LeaseToken...)
	if full {
		body = append(body, `","attempt_id":"`...)
		body = append(body, c.AttemptID...)
		body = append(body, `","stream":"`...)
		body = append(body, c.Stream...)
		body = append(body, `","message_id":"`...)
		body = append(body, c.MessageID...)
	}
	body = append(body, '"')
	return body
}

func (a *api) heartbeat(ctx context.Context, node int, workerID string, c *claim) error {
	body := appendRef(make([]byte, 0, 192), workerID, c, false)
	body = append(body, '}')
	var out struct {
		OK bool `json:"ok"`
	}
	if _, _, err := a.doIndexed(ctx, http.MethodPost, a.nodes[node]+"/internal/worker/heartbeat", a.claw, body, 0, &out, c.index); err != nil {
		return err
	}
	if !out.OK {
		return errors.New("heartbeat: ok:false")
	}
	return nil
}

// complete reports the job done; duplicate is the server's "duplicate" flag
// (a repeated complete of the same attempt). With askNext, unless
// completes go without it (a.next), the complete also claims the worker's
// next job of stream if one is ready: next is that claim's answer (nil
// when not asked).
func (a *api) complete(ctx context.Context, node int, workerID string, c *claim, stream string, askNext bool) (duplicate bool, next *claim, err error) {
	body := appendRef(make([]byte, 0, 384), workerID, c, true)
	body = append(body, `,"result":{"ok":true}`...)
	plain := len(body)
	asked := askNext && a.next.Load() != nextOff
	if asked {
		body = append(body, `,"next":{"streams":["`...)
		body = append(body, stream...)
		body = append(body, `"],"max_wait_ms":0}`...)
	}
	body = append(body, '}')
	var out struct {
		OK, Ack, Duplicate bool
		Next               *claim `json:"next"`
	}
	_, idx, err := a.doIndexed(ctx, http.MethodPost, a.nodes[node]+"/internal/worker/complete", a.claw, body, 0, &out, 0)
	var he *httpError
	if asked && a.next.Load() != nextOn && errors.As(err, &he) && he.Status == http.StatusBadRequest && strings.Contains(he.Body, `next`) {
		// A build without the field refuses the whole request, changing
		// nothing: complete without it from now on.
		a.next.Store(nextOff)
		body = append(body[:plain], '}')
		asked = false
		_, idx, err = a.doIndexed(ctx, http.MethodPost, a.nodes[node]+"/internal/worker/complete", a.claw, body, 0, &out, 0)
	}
	if err != nil {
		return false, nil, err
	}
	if !out.OK || !out.Ack {
		return false, nil, fmt.Errorf("complete: ok:%v ack:%v", out.OK, out.Ack)
	}
	if !asked {
		return out.Duplicate, nil, nil
	}
	if out.Next == nil {
		return out.Duplicate, nil, errors.New("complete: asked for the next job, answered without \"next\"")
	}
	a.next.CompareAndSwap(nextAuto, nextOn)
	out.Next.index = idx
	if out.Next.Claimed && (out.Next.JobID == "" || out.Next.LeaseToken == "" || out.Next.AttemptID == "") {
		return out.Duplicate, nil, errors.New("complete: next claimed:true without job_id/attempt_id/lease_token")
	}
	return out.Duplicate, out.Next, nil
}

// countJobs counts the jobs of stream in status (reads are leader-consistent),
// paging GET /jobs from cursor (the create index before the stream's first
// job). Bounded in pages.
func (a *api) countJobs(ctx context.Context, stream, status string, cursor uint64, maxPages int) (int, error) {
	n := 0
	for page := 0; page < maxPages; page++ {
		q := url.Values{"stream": {stream}, "status": {status}, "limit": {"1000"}}
		if cursor > 0 {
			q.Set("cursor", strconv.FormatUint(cursor, 10))
		}
		var out struct {
			Jobs       []struct{ ID, Status string } `json:"jobs"`
			NextCursor *string                       `json:"nextCursor"`
		}
		node := page % len(a.nodes)
		if _, err := a.do(ctx, http.MethodGet, a.nodes[node]+"/jobs?"+q.Encode(), a.head, nil, 30*time.Second, &out); err != nil {
			return n, fmt.Errorf("list %s jobs of %s: %w", status, stream, err)
		}
		for _, j := range out.Jobs {
			if j.Status == status {
				n++
			}
		}
		if out.NextCursor == nil || *out.NextCursor == "" {
			return n, nil
		}
		c, err := strconv.ParseUint(*out.NextCursor, 10, 64)
		if err != nil {
			return n, fmt.Errorf("bad nextCursor %q", *out.NextCursor)
		}
		cursor = c
	}
	return n, fmt.Errorf("list %s jobs of %s: more than %d pages", status, stream, maxPages)
}
