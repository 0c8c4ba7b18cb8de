package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goTerms are what a refusal must never say: the caller sent JSON, not Go.
var goTerms = []string{"Go ", "struct", "map[", "interface {}", "jsonrpc2", "mcpserver.", "validating root", "/properties/"}

// Every numeric argument of every tool has a range: a value outside it, a
// value of the wrong kind, or arguments that are not an object are refused
// as a tool error that names the argument and what it takes, in the tool's
// terms, and nothing is done.
func TestArgumentsOutsideTheirRangesAreRefused(t *testing.T) {
	url := startAPI(t)
	head, claw := session(t, url, headTok), session(t, url, clawTok)
	var enq struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	call(t, head, "enqueue", map[string]any{"payload": map[string]any{"n": 1}}, &enq)

	huge := json.RawMessage("9223372036854775807")
	for _, c := range []struct {
		cs   *mcp.ClientSession
		tool string
		args any
		says string
	}{
		{claw, "claim", map[string]any{"wait_seconds": huge}, "wait_seconds must be an integer from 0 to 30, not 9223372036854775807"},
		{claw, "claim", map[string]any{"wait_seconds": json.RawMessage("1e300")}, "wait_seconds must be an integer from 0 to 30, not 1e300"},
		{claw, "claim", map[string]any{"wait_seconds": -5}, "wait_seconds must be an integer from 0 to 30, not -5"},
		{claw, "claim", map[string]any{"wait_seconds": 31}, "wait_seconds must be an integer from 0 to 30"},
		{claw, "claim", map[string]any{"wait_seconds": 2.5}, "wait_seconds must be an integer from 0 to 30, not 2.5"},
		{claw, "claim", map[string]any{"wait_seconds": "5"}, `wait_seconds must be an integer from 0 to 30, not "5"`},
		{claw, "claim", map[string]any{"max_jobs": 0}, "max_jobs must be an integer from 1 to 100, not 0"},
		{claw, "claim", map[string]any{"max_jobs": 101}, "max_jobs must be an integer from 1 to 100"},
		{claw, "claim", map[string]any{"streams": "default"}, "streams must be a list of strings"},
		{claw, "claim", map[string]any{"streams": []any{1}}, "streams must be a list of strings"},
		{claw, "claim", []any{1}, "arguments must be a JSON object of named arguments (streams, wait_seconds, max_jobs, capabilities, worker_id), not a list"},
		{claw, "claim", "x", "arguments must be a JSON object of named arguments"},
		{claw, "claim", map[string]any{"stream": "default"}, `unknown argument "stream"; claim takes streams, wait_seconds`},
		{claw, "peek", map[string]any{"limit": -1}, "limit must be an integer from 1 to 100, not -1"},
		{claw, "peek", map[string]any{"limit": 0}, "limit must be an integer from 1 to 100, not 0"},
		{claw, "peek", map[string]any{"limit": 101}, "limit must be an integer from 1 to 100"},
		{claw, "release", map[string]any{"job_id": enq.Job.ID, "cooldown_ms": -1}, "cooldown_ms must be an integer from 0 to 86400000"},
		{claw, "release", map[string]any{"job_id": enq.Job.ID, "cooldown_ms": 86400001}, "cooldown_ms must be an integer from 0 to 86400000"},
		{claw, "heartbeat", map[string]any{}, "job_id is required"},
		{claw, "heartbeat", map[string]any{"job_id": enq.Job.ID, "progress": []any{}}, "progress must be a JSON object"},
		{claw, "fail", map[string]any{"job_id": enq.Job.ID, "message": "m", "retryable": "yes"}, "retryable must be true or false"},
		{claw, "list_streams", map[string]any{"x": 1}, `unknown argument "x"; list_streams takes no arguments`},
		{head, "enqueue", map[string]any{"payload": 1, "priority": 101}, "priority must be an integer from -100 to 100"},
		{head, "enqueue", map[string]any{"payload": 1, "priority": -101}, "priority must be an integer from -100 to 100"},
		{head, "enqueue", map[string]any{"payload": 1, "delay_seconds": -1}, "delay_seconds must be an integer from 0 to 31536000"},
		{head, "enqueue", map[string]any{"payload": 1, "delay_seconds": huge}, "delay_seconds must be an integer from 0 to 31536000"},
		{head, "enqueue", map[string]any{"payload": 1, "max_attempts": 0}, "max_attempts must be an integer from 1 to 1000"},
		{head, "enqueue", map[string]any{"payload": 1, "lease_seconds": 604801}, "lease_seconds must be an integer from 1 to 604800"},
		{head, "enqueue", map[string]any{"payload": 1, "concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit must be an integer from 1 to 10000"},
		{head, "enqueue", map[string]any{"payload": 1, "backoff_seconds": -1}, "backoff_seconds must be an integer from 0 to 31536000"},
		{head, "enqueue", map[string]any{"payload": 1, "backoff_max_seconds": 31536001}, "backoff_max_seconds must be an integer from 0 to 31536000"},
		{head, "enqueue", map[string]any{"payload": 1, "rate_key": "k", "rate_limit": 0, "rate_period_ms": 1000}, "rate_limit must be an integer from 1 to 1000000"},
		{head, "enqueue", map[string]any{"payload": 1, "rate_key": "k", "rate_limit": 1, "rate_period_ms": 604800001}, "rate_period_ms must be an integer from 1 to 604800000"},
		{head, "enqueue", map[string]any{}, "payload is required"},
		{head, "list_jobs", map[string]any{"limit": 0}, "limit must be an integer from 1 to 1000, not 0"},
		{head, "list_jobs", map[string]any{"limit": 1001}, "limit must be an integer from 1 to 1000"},
	} {
		res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Errorf("%s %v: protocol error %v, want a tool error", c.tool, c.args, err)
			continue
		}
		msg := text(res)
		if !res.IsError || !strings.Contains(msg, c.tool+" refused: "+c.says) {
			t.Errorf("%s %v: %v %q, want a tool error saying %q", c.tool, c.args, res.IsError, msg, c.says)
		}
		for _, g := range goTerms {
			if strings.Contains(msg, g) {
				t.Errorf("%s %v: the refusal speaks Go (%q): %s", c.tool, c.args, g, msg)
			}
		}
	}
	// Nothing was claimed, released or enqueued.
	var jobs struct {
		Jobs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	call(t, head, "list_jobs", nil, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != enq.Job.ID || jobs.Jobs[0].Status != "queued" {
		t.Fatalf("after the refusals: %+v, want only job %s, queued", jobs.Jobs, enq.Job.ID)
	}
	// The ends of each range are taken.
	call(t, claw, "peek", map[string]any{"limit": 100}, nil)
	call(t, head, "list_jobs", map[string]any{"limit": 1000}, nil)
	var cl struct {
		Claimed bool `json:"claimed"`
	}
	call(t, claw, "claim", map[string]any{"wait_seconds": 0, "max_jobs": 100}, &cl)
	if !cl.Claimed {
		t.Fatal("claim with wait_seconds 0 and max_jobs 100 took nothing")
	}
}

// The JSON schema of each tool shows the ranges of its integer arguments.
func TestSchemasShowRanges(t *testing.T) {
	url := startAPI(t)
	want := map[string]map[string][2]float64{
		"claim":   {"wait_seconds": {0, 30}, "max_jobs": {1, 100}},
		"peek":    {"limit": {1, 100}},
		"release": {"cooldown_ms": {0, 86400000}},
		"enqueue": {"priority": {-100, 100}, "delay_seconds": {0, 31536000}, "max_attempts": {1, 1000}, "lease_seconds": {1, 604800}, "concurrency_limit": {1, 10000},
			"rate_limit": {1, 1000000}, "rate_period_ms": {1, 604800000}, "rate_burst": {0, 1000000}},
		"list_jobs": {"limit": {1, 1000}},
	}
	for _, tok := range []string{clawTok, headTok} {
		for tool, err := range session(t, url, tok).Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tool.InputSchema)
			var s struct {
				Properties map[string]struct {
					Minimum *float64 `json:"minimum"`
					Maximum *float64 `json:"maximum"`
					Type    any      `json:"type"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			for name, p := range s.Properties {
				isInt := strings.Contains(string(must(json.Marshal(p.Type))), "integer")
				r, ok := want[tool.Name][name]
				switch {
				case ok && (p.Minimum == nil || p.Maximum == nil || *p.Minimum != r[0] || *p.Maximum != r[1]):
					t.Errorf("%s.%s: minimum %v maximum %v, want %v", tool.Name, name, p.Minimum, p.Maximum, r)
				case isInt && (p.Minimum == nil || p.Maximum == nil):
					t.Errorf("%s.%s is an integer without a range", tool.Name, name)
				}
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
