package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport adds a bearer token to every request, as an MCP client
// configured with an Authorization header does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's client to url's /mcp with token.
func mcpSession(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
}

func mcpTools(t *testing.T, cs *mcp.ClientSession) []string {
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

// mcpEnqueueClaim enqueues a job in stream ("": the default) through
// head's session and claims it through claw's, and returns its id.
func mcpEnqueueClaim(t *testing.T, head, claw *mcp.ClientSession, stream string) string {
	t.Helper()
	var enq struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	args, streams := map[string]any{"payload": map[string]any{"n": 1}}, []string{"default"}
	if stream != "" {
		args["stream"], streams = stream, []string{stream}
	}
	mcpCall(t, head, "enqueue", args, &enq)
	var cl struct {
		Claimed bool `json:"claimed"`
		Jobs    []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	mcpCall(t, claw, "claim", map[string]any{"streams": streams, "wait_seconds": 0}, &cl)
	if !cl.Claimed || cl.Jobs[0].JobID != enq.Job.ID {
		t.Fatalf("claim = %+v, want job %s", cl, enq.Job.ID)
	}
	return enq.Job.ID
}

// /mcp authenticates like the API; a session's tools are those of its
// token's role, and its calls go through this node's API under that token.
func TestMCPEndpoint(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.h)
	defer ts.Close()

	e.do("POST", "/mcp", "", `{}`).apiErr(t, http.StatusUnauthorized, "unauthorized")
	e.do("POST", "/mcp", "not-a-token", `{}`).apiErr(t, http.StatusUnauthorized, "unauthorized")
	e.do("GET", "/mcp", leftTok, nil).apiErr(t, http.StatusMethodNotAllowed, "method_not_allowed")

	head, claw := mcpSession(t, ts.URL, headTok), mcpSession(t, ts.URL, leftTok)
	if tools := mcpTools(t, head); !slices.Contains(tools, "enqueue") || slices.Contains(tools, "claim") {
		t.Errorf("head's tools = %v", tools)
	}
	if tools := mcpTools(t, claw); !slices.Contains(tools, "claim") || slices.Contains(tools, "enqueue") {
		t.Errorf("claw's tools = %v", tools)
	}

	id := mcpEnqueueClaim(t, head, claw, "")
	var done struct {
		Status string `json:"status"`
	}
	mcpCall(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "ok"}}, &done)
	if j := e.do("GET", "/jobs/"+id, headTok, nil).json(t); j["status"] != "done" || j["workerId"] == "" {
		t.Fatalf("job after complete = %v", j)
	}

	// A session belongs to the token that opened it.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`
	for _, c := range []struct {
		token string
		want  int
	}{{headTok, http.StatusForbidden}, {"not-a-token", http.StatusUnauthorized}, {leftTok, http.StatusOK}} {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", claw.ID())
		req.Header.Set("Mcp-Protocol-Version", claw.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("the claw's session with token %q: %d, want %d", c.token, resp.StatusCode, c.want)
		}
	}
}
