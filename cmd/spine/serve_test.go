package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spine-queue/spine/httpapi"
	"github.com/spine-queue/spine/queue"
)

func TestServeTimerSlackSetting(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, tc := range []struct {
		env, flag string
		want      time.Duration
		bad       bool
	}{
		{want: 5 * time.Millisecond},
		{env: "0", want: 0},
		{env: "2ms", want: 2 * time.Millisecond},
		{env: "2ms", flag: "750us", want: 750 * time.Microsecond},
		{env: "soon", bad: true},
		{env: "-1ms", bad: true},
		{env: "5s", bad: true},
		{env: "5", bad: true},
	} {
		t.Setenv("SPINE_TIMER_SLACK", tc.env)
		args := []string{"--node-id", "n1"}
		if tc.flag != "" {
			args = append(args, "--timer-slack", tc.flag)
		}
		c, err := parseServe(args)
		switch {
		case tc.bad && err == nil:
			t.Errorf("SPINE_TIMER_SLACK=%q accepted as %v", tc.env, c.TimerSlack)
		case tc.bad && !strings.Contains(err.Error(), "SPINE_TIMER_SLACK"):
			t.Errorf("SPINE_TIMER_SLACK=%q: error %q does not name the setting", tc.env, err)
		case !tc.bad && err != nil:
			t.Errorf("SPINE_TIMER_SLACK=%q --timer-slack=%q: %v", tc.env, tc.flag, err)
		case !tc.bad && c.TimerSlack != tc.want:
			t.Errorf("SPINE_TIMER_SLACK=%q --timer-slack=%q: %v, want %v", tc.env, tc.flag, c.TimerSlack, tc.want)
		}
	}
}

func TestServeLeaseRenewFractionSetting(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, tc := range []struct {
		env, flag string
		want      float64
		bad       bool
	}{
		{want: 0.1},
		{env: "0", want: 0},
		{env: "0.25", want: 0.25},
		{env: "0.25", flag: "0.5", want: 0.5},
		{env: "0.6", bad: true},
		{env: "-0.1", bad: true},
		{env: "NaN", bad: true},
		{env: "10%", bad: true},
	} {
		t.Setenv("SPINE_LEASE_RENEW_FRACTION", tc.env)
		args := []string{"--node-id", "n1"}
		if tc.flag != "" {
			args = append(args, "--lease-renew-fraction", tc.flag)
		}
		c, err := parseServe(args)
		switch {
		case tc.bad && err == nil:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q accepted as %v", tc.env, c.LeaseRenewFraction)
		case tc.bad && !strings.Contains(err.Error(), "SPINE_LEASE_RENEW_FRACTION"):
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q: error %q does not name the setting", tc.env, err)
		case !tc.bad && err != nil:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q --lease-renew-fraction=%q: %v", tc.env, tc.flag, err)
		case !tc.bad && c.LeaseRenewFraction != tc.want:
			t.Errorf("SPINE_LEASE_RENEW_FRACTION=%q --lease-renew-fraction=%q: %v, want %v", tc.env, tc.flag, c.LeaseRenewFraction, tc.want)
		}
	}
}

// SPINE_RETRY_BACKOFF is the backoff of jobs created without one: on by
// default, off on request, and a malformed value stops the node with an
// error that names the setting.
func TestServeRetryBackoffSetting(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, tc := range []struct {
		env  string
		want queue.RetryBackoff
		bad  bool
	}{
		{want: queue.RetryBackoff{Base: 1, Max: 300}},
		{env: "off"},
		{env: "0"},
		{env: "5s..1h", want: queue.RetryBackoff{Base: 5, Max: 3600}},
		{env: "30s", want: queue.RetryBackoff{Base: 30}},
		{env: "500ms..5m", bad: true},
		{env: "10s..5s", bad: true},
		{env: "1.5s..5m", bad: true},
		{env: "fast", bad: true},
	} {
		t.Setenv("SPINE_RETRY_BACKOFF", tc.env) // empty: the default
		c, err := parseServe([]string{"--node-id", "n1"})
		switch {
		case tc.bad && err == nil:
			t.Errorf("SPINE_RETRY_BACKOFF=%q accepted as %+v", tc.env, c.RetryBackoff)
		case tc.bad && !strings.Contains(err.Error(), "SPINE_RETRY_BACKOFF"):
			t.Errorf("SPINE_RETRY_BACKOFF=%q: error %q does not name the setting", tc.env, err)
		case !tc.bad && err != nil:
			t.Errorf("SPINE_RETRY_BACKOFF=%q: %v", tc.env, err)
		case !tc.bad && c.RetryBackoff != tc.want:
			t.Errorf("SPINE_RETRY_BACKOFF=%q: %+v, want %+v", tc.env, c.RetryBackoff, tc.want)
		}
	}
}

// A node id is a name (as the cluster routes take it): a host name is
// one; a space, a NUL or 300 bytes are refused at start.
func TestServeNodeIDRule(t *testing.T) {
	t.Setenv("HEAD_TOKEN", "h")
	for _, id := range []string{"n1", "spine-2.example.com", "node_3:a"} {
		if _, err := parseServe([]string{"--node-id", id}); err != nil {
			t.Errorf("--node-id %q: %v", id, err)
		}
	}
	for _, id := range []string{"n 1", "n\x001", "-n1", strings.Repeat("n", 300)} {
		if _, err := parseServe([]string{"--node-id", id}); err == nil || !strings.Contains(err.Error(), "letters, digits") {
			t.Errorf("--node-id %q: %v", id, err)
		}
	}
}

// With --pprof a node serves its profiler and the raft metrics of the last
// intervals, to head tokens only; everything else still reaches the API.
// Raft's metrics reach the Prometheus registry with or without it.
func TestDebugEndpoints(t *testing.T) {
	tokens := &httpapi.Tokens{}
	tokens.Add(httpapi.RoleHead, "h")
	tokens.Add(httpapi.RoleLeftClaw, "l")
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api") })
	reg := prometheus.NewRegistry()
	sink, err := collectMetrics(reg)
	if err != nil || sink == nil {
		t.Fatalf("no metrics sink: %v", err)
	}
	gometrics.MeasureSince([]string{"raft", "commitTime"}, time.Now().Add(-3*time.Millisecond))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	bridged := false
	for _, f := range families {
		if f.GetName() == "spine_raft_commitTime" && len(f.Metric) == 1 && f.Metric[0].GetHistogram().GetSampleCount() == 1 {
			bridged = true
		}
	}
	if !bridged {
		t.Fatalf("raft's commitTime did not reach the Prometheus registry: %v", families)
	}
	h := withPprof(api, tokens, sink)
	get := func(path, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/debug/metrics", "/debug/pprof/"} {
		for _, tok := range []string{"", "l"} {
			if r := get(path, tok); r.Code != http.StatusUnauthorized || !strings.Contains(r.Body.String(), `"unauthorized"`) {
				t.Fatalf("%s with token %q: %d %s", path, tok, r.Code, r.Body)
			}
		}
	}
	r := get("/debug/metrics", "h")
	var m struct {
		Samples []struct {
			Name  string
			Count int
		}
	}
	if err := json.Unmarshal(r.Body.Bytes(), &m); r.Code != http.StatusOK || err != nil {
		t.Fatalf("metrics: %d %v %s", r.Code, err, r.Body)
	}
	found := false
	for _, s := range m.Samples {
		found = found || (s.Name == "spine.raft.commitTime" && s.Count == 1)
	}
	if !found {
		t.Fatalf("metrics have no spine.raft.commitTime sample: %s", r.Body)
	}
	if r := get("/debug/pprof/", "h"); r.Code != http.StatusOK {
		t.Fatalf("pprof index: %d", r.Code)
	}
	if r := get("/jobs", ""); r.Body.String() != "api" {
		t.Fatalf("API route: %d %s", r.Code, r.Body)
	}
}
