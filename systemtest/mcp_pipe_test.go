package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `spine mcp` fed from a pipe that ends right after the requests (printf
// '…' | spine mcp): every request is answered (initialize, tools/list and
// two tool calls, one of which enqueues through the cluster), then it
// exits 0.
func TestMCPStdioAnswersAPipeThatEnds(t *testing.T) {
	c := startCluster(t, 3, nil)
	if _, err := c.WaitLeader(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	stream := wName("mcppipe")
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"enqueue","arguments":{"stream":%q,"payload":{"n":1}}}}`, stream),
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cluster_status","arguments":{}}}`,
	}, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "mcp", "--addr", c.Nodes[0].URL, "--token", apiHead)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(in) // the pipe ends after the last request
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spine mcp: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	type answer struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	got := map[int]answer{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l == "" {
			continue
		}
		var a answer
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		got[a.ID] = a
	}
	for id := 1; id <= 4; id++ {
		if a, ok := got[id]; !ok || a.Result == nil || a.Error != nil {
			t.Errorf("request %d: answer %+v; stdout:\n%s\nstderr:\n%s", id, a, stdout.String(), stderr.String())
		}
	}
	if !strings.Contains(string(got[2].Result), `"name":"enqueue"`) {
		t.Errorf("tools/list: %s", got[2].Result)
	}
	var enq struct {
		StructuredContent struct {
			Job struct {
				ID string `json:"id"`
			} `json:"job"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(got[3].Result, &enq); err != nil || enq.IsError || enq.StructuredContent.Job.ID == "" {
		t.Fatalf("enqueue: %s (%v)", got[3].Result, err)
	}
	apiWant(t, apiDo(t, "GET", c.Nodes[2].URL+"/jobs/"+enq.StructuredContent.Job.ID+"?consistent", apiHead, nil), 200)
}
