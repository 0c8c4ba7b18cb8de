package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer is a bytes.Buffer safe to write from the command's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// spine mcp speaks MCP on its stdin and stdout: it learns the other nodes,
// finds the token's role (a claw: /cluster/status is forbidden to it),
// serves that role's tools, and ends when the client closes its stdin.
func TestMCPCommandServesStdio(t *testing.T) {
	var api *fakeAPI
	api = newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /cluster/nodes": func(w http.ResponseWriter, r *http.Request) {
			answer(200, fmt.Sprintf(`{"leader":"n1","nodes":[{"id":"n1","http_addr":%q,"alive":true,"leader":true},`+
				`{"id":"n2","http_addr":"http://127.0.0.1:9","alive":false,"leader":false}]}`, api.srv.URL))(w, r)
		},
		"GET /cluster/status": func(w http.ResponseWriter, r *http.Request) {
			apiError(w, 403, "forbidden", "role left_claw may not GET /cluster/status")
		},
		"GET /jobs/j1": answer(200, `{"id":"j1","stream":"default","target":null,"payload":{"x":1},"status":"queued","attempts":0,`+
			`"maxAttempts":5,"comments":[],"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z","createIndex":3,"modifyIndex":3}`),
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	env := &cliEnv{ctx: context.Background(), stdin: inR, stdout: outW, stderr: &stderr,
		getenv: func(k string) string {
			return map[string]string{"SPINE_ADDRS": api.srv.URL, "SPINE_TOKEN": "claw-token"}[k]
		}}
	done := make(chan int, 1)
	go func() {
		code := runCLI(env, []string{"mcp", "--worker-id", "w-7"})
		outW.Close()
		done <- code
	}()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr: %s", err, stderr.String())
	}
	var tools []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool.Name)
	}
	if !slices.Contains(tools, "claim") || slices.Contains(tools, "enqueue") {
		t.Errorf("tools = %v, want a claw's", tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": "j1"}})
	if err != nil || res.IsError {
		t.Fatalf("get_job: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"id":"j1"`) || !strings.Contains(string(b), `"payload":{"x":1}`) {
		t.Errorf("get_job = %s", b)
	}
	if got := api.last().auth; got != "Bearer claw-token" {
		t.Errorf("Authorization = %q", got)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit code %d; stderr: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("spine mcp did not end when its stdin closed")
	}
	if msg := stderr.String(); !strings.Contains(msg, "serving the claw tools") || !strings.Contains(msg, "http://127.0.0.1:9") {
		t.Errorf("stderr = %q, want the role and every node's address", msg)
	}
}

// eofReader is r that closes eof when a Read returns io.EOF.
type eofReader struct {
	r    io.Reader
	once sync.Once
	eof  chan struct{}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

// A client that writes its requests and closes stdin at once (a pipe into
// spine mcp) gets every answer: initialize, tools/list and a tools/call
// whose cluster call is still in flight when stdin ends. Then spine mcp
// exits 0.
func TestMCPCommandAnswersEveryRequestReadBeforeEOF(t *testing.T) {
	stdin := &eofReader{eof: make(chan struct{})}
	var api *fakeAPI
	api = newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /cluster/nodes": func(w http.ResponseWriter, r *http.Request) {
			answer(200, fmt.Sprintf(`{"leader":"n1","nodes":[{"id":"n1","http_addr":%q,"alive":true,"leader":true}]}`, api.srv.URL))(w, r)
		},
		// The tool's cluster call answers only once spine mcp has read the
		// end of its input.
		"GET /jobs/j1": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stdin.eof:
			case <-time.After(10 * time.Second):
			}
			answer(200, sampleJob)(w, r)
		},
	})
	stdin.r = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_job","arguments":{"job_id":"j1"}}}`,
	}, "\n") + "\n")
	var stdout, stderr syncBuffer
	env := &cliEnv{ctx: context.Background(), stdin: stdin, stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string {
			return map[string]string{"SPINE_ADDRS": api.srv.URL, "SPINE_TOKEN": "claw-token"}[k]
		}}
	done := make(chan int, 1)
	go func() { done <- runCLI(env, []string{"mcp", "--role", "claw"}) }()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit code %d; stderr: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("spine mcp did not exit after its stdin ended; stdout: %s", stdout.String())
	}
	answers := map[float64]map[string]any{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		if id, ok := m["id"].(float64); ok {
			answers[id] = m
		}
	}
	for id := 1.0; id <= 3; id++ {
		if answers[id] == nil || answers[id]["result"] == nil {
			t.Errorf("request %v has no answer with a result; stdout:\n%s\nstderr: %s", id, stdout.String(), stderr.String())
		}
	}
	if b, _ := json.Marshal(answers[3]); !strings.Contains(string(b), `"id":"j1"`) {
		t.Errorf("tools/call answer = %s, want job j1", b)
	}
	if b, _ := json.Marshal(answers[2]); !strings.Contains(string(b), `"name":"claim"`) {
		t.Errorf("tools/list answer = %s, want the claw tools", b)
	}
}

func TestMCPCommandRefusesABadRole(t *testing.T) {
	code, _, stderr := cliRun(t, nil, "", "mcp", "--role", "boss")
	if code != exitUsage || !strings.Contains(stderr, "--role must be head or claw") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}
