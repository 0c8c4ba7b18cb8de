package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP server of every node (/mcp) and of `spine mcp`, driven by the
// SDK's own client.

// mcpBearer adds a bearer token to every request, as an MCP client
// configured with an Authorization header does.
type mcpBearer struct{ token string }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpLog is a process's stderr, read while it is written.
type mcpLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *mcpLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *mcpLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mcpConnect opens an MCP session with a node's /mcp under token.
func mcpConnect(t *testing.T, nodeURL, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: nodeURL + "/mcp",
		HTTPClient: &http.Client{Transport: mcpBearer{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "systemtest", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP session with %s/mcp: %v", nodeURL, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls a tool that must succeed and decodes its structured answer
// into out.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, tc.Text)
			}
		}
		t.Fatalf("%s: tool error: %s", name, strings.Join(msg, "\n"))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, b, err)
	}
}

func mcpToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

type mcpJob struct {
	ID     string         `json:"id"`
	Status string         `json:"status"`
	Result map[string]any `json:"result"`
}

// An agent works as a claw through a follower's /mcp: head enqueues a job,
// the claw claims it, the leader is killed, and the claw heartbeats and
// completes it through the same session, which kept the lease. The job
// reads done, with the result, on the new leader.
func TestMCPClaimSurvivesLeaderKill(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, followers := apiRoles(t, c)
	f := followers[0]

	apiWantError(t, apiDo(t, "POST", f.URL+"/mcp", apiBad, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`), 401, "unauthorized")
	apiWantError(t, apiDo(t, "POST", f.URL+"/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`), 401, "unauthorized")

	head, claw := mcpConnect(t, followers[1].URL, apiHead), mcpConnect(t, f.URL, apiLeft)
	if tools := mcpToolNames(t, claw); !slices.Contains(tools, "claim") || !slices.Contains(tools, "complete") || slices.Contains(tools, "enqueue") {
		t.Fatalf("the claw's tools: %v", tools)
	}
	if tools := mcpToolNames(t, head); !slices.Contains(tools, "enqueue") || slices.Contains(tools, "claim") {
		t.Fatalf("head's tools: %v", tools)
	}

	var enq struct {
		Job mcpJob `json:"job"`
	}
	mcpCall(t, head, "enqueue", map[string]any{"stream": "mcp", "payload": map[string]any{"task": "summarise", "doc": 7}}, &enq)
	if enq.Job.ID == "" || enq.Job.Status != "queued" {
		t.Fatalf("enqueue: %+v", enq)
	}
	var cl struct {
		Claimed bool `json:"claimed"`
		Jobs    []struct {
			JobID      string         `json:"job_id"`
			LeaseToken string         `json:"lease_token"`
			Payload    map[string]any `json:"payload"`
		} `json:"jobs"`
	}
	mcpCall(t, claw, "claim", map[string]any{"streams": []string{"mcp"}, "wait_seconds": 10}, &cl)
	if !cl.Claimed || len(cl.Jobs) != 1 || cl.Jobs[0].JobID != enq.Job.ID || cl.Jobs[0].LeaseToken == "" || cl.Jobs[0].Payload["doc"] != float64(7) {
		t.Fatalf("claim: %+v", cl)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// Through the same session, naming only the job: the session supplies
	// the lease; the follower forwards to whichever node leads now.
	var hb struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	mcpCall(t, claw, "heartbeat", map[string]any{"job_id": enq.Job.ID, "progress": map[string]any{"pct": 90}}, &hb)
	if hb.LeaseExpiresAt.IsZero() {
		t.Fatalf("heartbeat after the leader's kill: %+v", hb)
	}
	var done struct {
		Status string `json:"status"`
	}
	mcpCall(t, claw, "complete", map[string]any{"job_id": enq.Job.ID, "result": map[string]any{"summary": "summarised doc 7"}}, &done)
	if done.Status != "done" {
		t.Fatalf("complete: %+v", done)
	}

	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if nl == leader {
		t.Fatal("the killed node leads")
	}
	var j struct {
		Status   string         `json:"status"`
		Result   map[string]any `json:"result"`
		WorkerID string         `json:"workerId"`
	}
	apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/jobs/"+enq.Job.ID, apiHead, nil), 200), &j)
	if j.Status != "done" || j.Result["summary"] != "summarised doc 7" {
		t.Fatalf("the job on the new leader %s: %+v", nl.ID, j)
	}
	// The head session, on the other survivor, reads it done too.
	var got mcpJob
	mcpCall(t, head, "get_job", map[string]any{"job_id": enq.Job.ID}, &got)
	if got.Status != "done" {
		t.Fatalf("get_job through head's session: %+v", got)
	}

	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// `spine mcp` serves the tools over stdio: the SDK's client runs the built
// binary, lists head's tools and enqueues and reads jobs through it.
func TestMCPStdioCommand(t *testing.T) {
	c := startCluster(t, 3, nil)
	if _, err := c.WaitLeader(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	apiDecode(t, apiWant(t, apiDo(t, "POST", c.Nodes[1].URL+"/jobs", apiHead, map[string]any{"payload": map[string]any{"n": 1}}), 201), &created)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One address: the command learns the others itself.
	cmd := exec.Command(binary, "mcp", "--addr", c.Nodes[0].URL, "--token", apiHead)
	cmd.Dir = t.TempDir()
	stderr := &mcpLog{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "systemtest", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("spine mcp: %v\n%s", err, stderr.String())
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			cs.Close() // ends the process
		}
		if t.Failed() {
			t.Logf("spine mcp's stderr:\n%s", stderr.String())
		}
	})
	tools := mcpToolNames(t, cs)
	for _, want := range []string{"enqueue", "list_jobs", "get_job", "redrive", "requeue", "cancel", "cluster_status", "list_streams"} {
		if !slices.Contains(tools, want) {
			t.Errorf("tools %v lack %s", tools, want)
		}
	}
	var j mcpJob
	mcpCall(t, cs, "get_job", map[string]any{"job_id": created.ID}, &j)
	if j.ID != created.ID || j.Status != "queued" {
		t.Fatalf("get_job: %+v", j)
	}
	var enq struct {
		Job mcpJob `json:"job"`
	}
	mcpCall(t, cs, "enqueue", map[string]any{"stream": "stdio", "payload": map[string]any{"n": 2}}, &enq)
	apiWant(t, apiDo(t, "GET", c.Nodes[2].URL+"/jobs/"+enq.Job.ID, apiHead, nil), 200)
	var st struct {
		Nodes []struct {
			HTTPAddr string `json:"http_addr"`
		} `json:"nodes"`
	}
	mcpCall(t, cs, "cluster_status", nil, &st)
	if len(st.Nodes) != 3 {
		t.Fatalf("cluster_status: %+v", st)
	}
	closed = true
	if err := cs.Close(); err != nil {
		t.Errorf("spine mcp did not exit cleanly when its stdin closed: %v", err)
	}
	for _, n := range c.Nodes {
		if !strings.Contains(stderr.String(), n.URL) {
			t.Errorf("spine mcp does not use %s: %s", n.URL, stderr.String())
		}
	}
}

// The node that served an agent's /mcp session dies: the agent opens a
// session on another node, calls held_jobs with the worker_id its claim
// answered, and finishes the job naming only its id; the lease came from
// the replicated state, not from the dead node's memory.
func TestMCPSessionMovesToAnotherNode(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, followers := apiRoles(t, c)
	var j apiJob
	apiDecode(t, apiWant(t, apiDo(t, "POST", leader.URL+"/jobs", apiHead, map[string]any{"stream": "moving", "payload": map[string]int{"doc": 9}}), http.StatusCreated), &j)

	first := mcpConnect(t, followers[0].URL, apiLeft)
	var cl struct {
		Claimed  bool   `json:"claimed"`
		WorkerID string `json:"worker_id"`
		Jobs     []struct {
			JobID      string `json:"job_id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	mcpCall(t, first, "claim", map[string]any{"streams": []string{"moving"}, "wait_seconds": 10}, &cl)
	if !cl.Claimed || len(cl.Jobs) != 1 || cl.Jobs[0].JobID != j.ID || cl.WorkerID == "" {
		t.Fatalf("claim: %+v", cl)
	}
	if err := c.Kill(followers[0]); err != nil {
		t.Fatal(err)
	}

	second := mcpConnect(t, followers[1].URL, apiLeft)
	var none struct {
		Jobs []struct{} `json:"jobs"`
	}
	mcpCall(t, second, "held_jobs", nil, &none)
	if len(none.Jobs) != 0 {
		t.Fatalf("a fresh session holds %+v", none)
	}
	var held struct {
		WorkerID string `json:"worker_id"`
		Jobs     []struct {
			JobID      string `json:"job_id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	mcpCall(t, second, "held_jobs", map[string]any{"worker_id": cl.WorkerID}, &held)
	if held.WorkerID != cl.WorkerID || len(held.Jobs) != 1 || held.Jobs[0].JobID != j.ID || held.Jobs[0].LeaseToken != cl.Jobs[0].LeaseToken {
		t.Fatalf("held_jobs of %s on another node: %+v", cl.WorkerID, held)
	}
	var hb struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	mcpCall(t, second, "heartbeat", map[string]any{"job_id": j.ID}, &hb)
	var done struct {
		Status string `json:"status"`
	}
	mcpCall(t, second, "complete", map[string]any{"job_id": j.ID, "result": map[string]any{"summary": "moved and done"}}, &done)
	if hb.LeaseExpiresAt.IsZero() || done.Status != "done" {
		t.Fatalf("heartbeat %+v, complete %+v", hb, done)
	}
	var got mcpJob
	apiDecode(t, apiWant(t, apiDo(t, "GET", leader.URL+"/jobs/"+j.ID+"?consistent", apiHead, nil), http.StatusOK), &got)
	if got.Status != "done" || got.Result["summary"] != "moved and done" {
		t.Fatalf("the job: %+v", got)
	}
}
