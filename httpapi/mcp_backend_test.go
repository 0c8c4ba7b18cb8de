package httpapi

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"

	"github.com/spine-queue/spine/fsm"
)

// routesServed counts the requests each route of e's node served, by
// route pattern (the node's request metrics).
func routesServed(t *testing.T, e *env) map[string]uint64 {
	t.Helper()
	mfs, err := e.srv.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "spine_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					out[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// countingHandler counts the HTTP requests that reach h, by path.
type countingHandler struct {
	h  http.Handler
	mu sync.Mutex
	n  map[string]int
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.URL.Path]++
	c.mu.Unlock()
	c.h.ServeHTTP(w, r)
}

func (c *countingHandler) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for p := range c.n {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// A tool call on the leader runs in the node against the queue: the only
// request the node serves is the /mcp request that carries it; no API
// route runs (the route metrics count none).
func TestMCPCallsQueueNotHTTP(t *testing.T) {
	e := newEnv(t)
	counted := &countingHandler{h: e.h}
	ts := httptest.NewServer(counted)
	defer ts.Close()
	head, claw := mcpSession(t, ts.URL, headTok), mcpSession(t, ts.URL, leftTok)

	id := mcpEnqueueClaim(t, head, claw, "s1")
	var out map[string]any
	mcpCall(t, claw, "heartbeat", map[string]any{"job_id": id, "progress": map[string]any{"pct": 50}}, &out)
	mcpCall(t, claw, "get_job", map[string]any{"job_id": id, "history": true}, &out)
	mcpCall(t, claw, "list_streams", map[string]any{}, &out)
	mcpCall(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "ok"}}, &out)
	mcpCall(t, head, "list_jobs", map[string]any{"status": "done"}, &out)
	mcpCall(t, head, "cluster_status", map[string]any{}, &out)
	if j := e.job(id); j.State != fsm.StateDone {
		t.Fatalf("job after the tool calls: state %s", j.State)
	}
	if p := counted.paths(); len(p) != 1 || p[0] != mcpPath {
		t.Errorf("HTTP requests reached the node at %v, want only %s", p, mcpPath)
	}
	for route, n := range routesServed(t, e) {
		if route != mcpPath && n > 0 {
			t.Errorf("route %s served %d requests during MCP tool calls, want none", route, n)
		}
	}
}

// On a follower a tool call that needs the leader reaches it (under the
// caller's token, through the leader's API) and changes nothing here; a
// read the follower may not answer is the leader's too.
func TestMCPFollowerCallsReachLeader(t *testing.T) {
	leader := newEnv(t)
	lts := httptest.NewServer(leader.h)
	defer lts.Close()
	follower := newEnv(t)
	follower.fc.setFollower("n2", lts.URL)
	fts := httptest.NewServer(follower.h)
	defer fts.Close()
	head, claw := mcpSession(t, fts.URL, headTok), mcpSession(t, fts.URL, leftTok)

	id := mcpEnqueueClaim(t, head, claw, "")
	var out map[string]any
	mcpCall(t, claw, "heartbeat", map[string]any{"job_id": id}, &out)
	mcpCall(t, claw, "get_job", map[string]any{"job_id": id}, &out)
	if out["status"] != "running" {
		t.Fatalf("get_job on the follower = %v, want the leader's running job", out)
	}
	mcpCall(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "ok"}}, &out)

	if j := leader.job(id); j.State != fsm.StateDone {
		t.Fatalf("the leader's job is %s, want done", j.State)
	}
	if _, err := follower.fc.fsm.Read().Job(id); err == nil {
		t.Error("the follower applied the job itself")
	}
	served := routesServed(t, leader)
	for _, route := range []string{"/jobs", "/internal/worker/claim", "/internal/worker/heartbeat", "/jobs/{id}", "/internal/worker/complete"} {
		if served[route] == 0 {
			t.Errorf("the leader served no %s request; served %v", route, served)
		}
	}
}
