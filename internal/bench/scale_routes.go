package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// routeSpec is a request timed at every size: a read, or the developer
// queue's claim without a stream (answered 400 stream_required, naming the
// streams with queued tasks).
type routeSpec struct {
	name, method, path, auth string
	body                     []byte
	want                     int
	code                     string // the error code of a wanted 4xx
}

// scaleReads are the routes timed at every size besides create, claim and
// complete, in the order of the table. The UI's pages go with the session
// cookie of a head login.
func scaleReads() []routeSpec {
	return []routeSpec{
		{name: "GET /jobs (first page)", method: http.MethodGet, path: "/jobs", auth: scaleHead, want: http.StatusOK},
		{name: "GET /streams", method: http.MethodGet, path: "/streams", auth: scaleHead, want: http.StatusOK},
		{name: "GET /v1/state", method: http.MethodGet, path: "/v1/state", auth: scaleHead, want: http.StatusOK},
		{name: "GET /metrics", method: http.MethodGet, path: "/metrics", auth: scaleHead, want: http.StatusOK},
		{name: "GET /health", method: http.MethodGet, path: "/health", want: http.StatusOK},
		{name: "GET /api/status", method: http.MethodGet, path: "/api/status", auth: scaleHead, want: http.StatusOK},
		{name: "GET /api/streams", method: http.MethodGet, path: "/api/streams", auth: scaleHead, want: http.StatusOK},
		{name: "GET /dlq", method: http.MethodGet, path: "/dlq", auth: scaleHead, want: http.StatusOK},
		{name: "POST /api/claim (no stream)", method: http.MethodPost, path: "/api/claim", auth: scaleClaw, body: []byte(`{}`),
			want: http.StatusBadRequest, code: "stream_required"},
		{name: "UI dashboard /ui/", method: http.MethodGet, path: "/ui/", auth: "cookie", want: http.StatusOK},
		{name: "UI /ui/streams", method: http.MethodGet, path: "/ui/streams", auth: "cookie", want: http.StatusOK},
		{name: "UI /ui/cluster", method: http.MethodGet, path: "/ui/cluster", auth: "cookie", want: http.StatusOK},
	}
}

// series collects one route's timings at one size.
type series struct {
	name  string
	d     []time.Duration
	errs  int
	first error
}

func (r *series) note(d time.Duration, err error) {
	if err != nil {
		r.errs++
		if r.first == nil {
			r.first = err
		}
		return
	}
	r.d = append(r.d, d)
}

func (r *series) result() scaleRoute {
	sum := Summarize(r.d)
	out := scaleRoute{Route: r.name, N: sum.N, Errors: r.errs, P50: sum.P50, P99: sum.P99, Max: sum.Max}
	if r.first != nil {
		out.FirstError = r.first.Error()
		if len(out.FirstError) > 300 {
			out.FirstError = out.FirstError[:300] + "…"
		}
	}
	return out
}

// measure times every route on the leader, one request at a time: a
// request each first, untimed, then up to samples each within routeTime.
// Creates and claims are as many, so the queue keeps its size.
func (s *scaleRun) measure(ctx context.Context, sz *scaleSize) error {
	l, err := s.leader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	create, claim, complete := &series{name: "create (POST /jobs)"}, &series{name: "claim (worker)"}, &series{name: "complete (worker)"}
	deadline := time.Now().Add(s.cfg.routeTime)
	for i := -1; i < s.cfg.samples && time.Now().Before(deadline); i++ {
		d, err := s.createOne(ctx, l)
		if i >= 0 {
			create.note(d, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	deadline = time.Now().Add(s.cfg.routeTime)
	for i := -1; i < s.cfg.samples && time.Now().Before(deadline); i++ {
		dc, dp, errC, errP := s.claimComplete(ctx, l, i)
		if i >= 0 {
			claim.note(dc, errC)
			if errC == nil {
				complete.note(dp, errP)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sz.Routes = append(sz.Routes, create.result(), claim.result(), complete.result())
	for _, rt := range scaleReads() {
		r := &series{name: rt.name}
		deadline := time.Now().Add(s.cfg.routeTime)
		for i := -1; i < s.cfg.samples && time.Now().Before(deadline); i++ {
			d, err := s.timeRoute(ctx, l, rt)
			if i >= 0 {
				r.note(d, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		sz.Routes = append(sz.Routes, r.result())
	}
	for _, r := range sz.Routes {
		if r.FirstError != "" {
			s.printf("    %s: %d errors; first: %s\n", r.Route, r.Errors, r.FirstError)
		}
	}
	if sz.QueuedSeen, err = s.queued(ctx, l); err != nil {
		return err
	}
	return nil
}

func (s *scaleRun) createOne(ctx context.Context, node int) (time.Duration, error) {
	id := s.nextID.Add(1)
	body := createBody(nil, s.streamName(int(id)), time.Now().UnixNano(), id, s.cfg.payload)
	t0 := time.Now()
	st, data, err := s.req(ctx, node, http.MethodPost, "/jobs", scaleHead, "", body)
	d := time.Since(t0)
	if err == nil && st != http.StatusCreated {
		err = fmt.Errorf("create: status %d: %.200s", st, data)
	}
	return d, err
}

// claimComplete claims a job of the i-th stream and completes it, timing
// each.
func (s *scaleRun) claimComplete(ctx context.Context, node, i int) (dClaim, dComplete time.Duration, errClaim, errComplete error) {
	const wid = "spine-bench-scale"
	body := fmt.Appendf(nil, `{"worker_id":%q,"streams":[%q],"max_wait_ms":0}`, wid, s.streamName(i+s.cfg.streams))
	t0 := time.Now()
	st, data, err := s.req(ctx, node, http.MethodPost, "/internal/worker/claim", scaleClaw, "", body)
	dClaim = time.Since(t0)
	var c claim
	switch {
	case err != nil:
		return dClaim, 0, err, nil
	case st != http.StatusOK:
		return dClaim, 0, fmt.Errorf("claim: status %d: %.200s", st, data), nil
	}
	if err := json.Unmarshal(data, &c); err != nil || !c.Claimed {
		return dClaim, 0, fmt.Errorf("claim: nothing claimed (%v): %.200s", err, data), nil
	}
	cb := appendRef(make([]byte, 0, 320), wid, &c, true)
	cb = append(cb, `,"result":{"ok":true}}`...)
	t1 := time.Now()
	st, data, err = s.req(ctx, node, http.MethodPost, "/internal/worker/complete", scaleClaw, "", cb)
	dComplete = time.Since(t1)
	if err == nil && st != http.StatusOK {
		err = fmt.Errorf("complete: status %d: %.200s", st, data)
	}
	return dClaim, dComplete, nil, err
}

// timeRoute sends rt once and checks its answer.
func (s *scaleRun) timeRoute(ctx context.Context, node int, rt routeSpec) (time.Duration, error) {
	t0 := time.Now()
	st, data, err := s.req(ctx, node, rt.method, rt.path, rt.auth, "", rt.body)
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	if st != rt.want {
		return d, fmt.Errorf("status %d, want %d: %.200s", st, rt.want, data)
	}
	if rt.code != "" {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Code != rt.code {
			return d, fmt.Errorf("want error code %s: %.200s", rt.code, data)
		}
	}
	return d, nil
}
