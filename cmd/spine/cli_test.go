package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/fsm"
)

// cliRun runs "spine <group> <args…>" against env vars env and stdin.
func cliRun(t *testing.T, env map[string]string, stdin string, group string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cliEnv{ctx: context.Background(), stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return env[k] }}
	code = runCLI(e, append([]string{group}, args...))
	return code, out.String(), errb.String()
}

// fakeAPI records requests and answers from a route table.
type fakeAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	req []recorded
}

type recorded struct {
	method, path, query, auth string
	body                      map[string]any
}

func newFakeAPI(t *testing.T, routes map[string]func(w http.ResponseWriter, r *http.Request)) *fakeAPI {
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorded{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization")}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			json.NewDecoder(r.Body).Decode(&rec.body)
		}
		f.mu.Lock()
		f.req = append(f.req, rec)
		f.mu.Unlock()
		if h, ok := routes[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		apiError(w, 404, "not_found", "no such thing: "+r.URL.Path)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.req[len(f.req)-1]
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
}

func answer(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const sampleJob = `{"id":"j1","stream":"default","payload":{"n":1},"status":"queued","attempts":0,"maxAttempts":5,"createdAt":"2026-01-02T03:04:05Z","createIndex":3,"modifyIndex":3}`

func TestExitCodes(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{&client.APIError{Status: 404, Code: "not_found"}, exitNotFound},
		{&client.APIError{Status: 409, Code: "illegal_transition"}, exitConflict},
		{&client.APIError{Status: 409, Code: "stale_lease"}, exitConflict},
		{&client.APIError{Status: 409, Code: "max_attempts"}, exitConflict},
		{&client.APIError{Status: 403, Code: "not_owner"}, exitConflict},
		{&client.APIError{Status: 403, Code: "target_mismatch"}, exitConflict},
		{&client.APIError{Status: 403, Code: "forbidden"}, exitAuth},
		{&client.APIError{Status: 401, Code: "unauthorized"}, exitAuth},
		{&client.APIError{Status: 503, Code: "no_leader"}, exitUnavailable},
		{&client.APIError{Status: 503, Code: "outcome_unknown"}, exitUnavailable},
		{&client.APIError{Status: 502}, exitUnavailable},
		{&client.APIError{Status: 400, Code: "invalid_request"}, exitUsage},
		{&client.APIError{Status: 413, Code: "too_large"}, exitError},
		{&client.APIError{Status: 500, Code: "internal"}, exitError},
		{fmt.Errorf("wrapped: %w", &url.Error{Op: "Get", URL: "http://x", Err: errors.New("connection refused")}), exitUnavailable},
		{context.DeadlineExceeded, exitUnavailable},
		{errors.New("something else"), exitError},
	}
	for _, tc := range cases {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestAddrResolution(t *testing.T) {
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{nil, "", defaultAddr},
		{nil, "http://a:1, b:2", "http://a:1,http://b:2"},
		{[]string{"--addr", "http://x:1,http://y:2", "--addr=z:3"}, "http://a:1", "http://x:1,http://y:2,http://z:3"},
	}
	for _, tc := range cases {
		env := &cliEnv{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard,
			getenv: func(k string) string {
				if k == "SPINE_ADDRS" {
					return tc.env
				}
				return ""
			}}
		g := &clientFlags{}
		fs := pflag.NewFlagSet("spine", pflag.ContinueOnError)
		g.register(fs)
		if err := fs.Parse(append(tc.args, "j1")); err != nil {
			t.Fatalf("parse %v: %v", tc.args, err)
		}
		c := &command{env: env, g: g}
		cl, err := c.client()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cl.Addrs(), ","); got != tc.want {
			t.Errorf("args %v env %q: addrs %s, want %s", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestJobsCreate(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /jobs": answer(201, sampleJob),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-tok"}
	code, out, errOut := cliRun(t, env, "", "jobs", "create", "--payload", `{"n":1}`, "--stream", "high",
		"--target", "left_claw", "--max-attempts", "3", "--idempotency-key", "k1")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var job client.Job
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.ID != "j1" {
		t.Fatalf("stdout %q: %v", out, err)
	}
	r := f.last()
	if r.auth != "Bearer head-tok" || r.body["stream"] != "high" || r.body["target"] != "left_claw" ||
		r.body["maxAttempts"] != float64(3) || r.body["idempotencyKey"] != "k1" {
		t.Fatalf("request = %+v", r)
	}

	// Payload from stdin; --token beats SPINE_TOKEN.
	code, _, errOut = cliRun(t, env, `{"from":"stdin"}`, "jobs", "create", "--token", "other", "-")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if r := f.last(); r.auth != "Bearer other" || fmt.Sprint(r.body["payload"]) != "map[from:stdin]" {
		t.Fatalf("request = %+v", r)
	}

	// Usage errors never reach the server.
	for _, args := range [][]string{
		{"create"},
		{"create", "--payload", "{not json"},
		{"create", "--payload", "1", "--payload-file", "x"},
		{"create", "--bogus"},
	} {
		if code, _, errOut := cliRun(t, env, "", "jobs", args...); code != exitUsage || !strings.HasPrefix(errOut, "spine: ") {
			t.Errorf("%v: exit %d stderr %q, want 2", args, code, errOut)
		}
	}
}

func TestJobsErrorsMapToExitCodes(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /jobs/j1/claim":    func(w http.ResponseWriter, r *http.Request) { apiError(w, 503, "outcome_unknown", "timed out") },
		"POST /jobs/j1/complete": func(w http.ResponseWriter, r *http.Request) { apiError(w, 409, "illegal_transition", "job is queued") },
		"GET /jobs/j2":           func(w http.ResponseWriter, r *http.Request) { apiError(w, 401, "unauthorized", "no token") },
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"get", "nope"}, exitNotFound, "no such thing"},
		{[]string{"claim", "j1"}, exitUnavailable, "timed out"},
		{[]string{"complete", "j1", "--result", `{"x":1}`}, exitConflict, "job is queued"},
		{[]string{"get", "j2"}, exitAuth, "no token"},
	}
	for _, tc := range cases {
		code, out, errOut := cliRun(t, env, "", "jobs", tc.args...)
		if code != tc.code || out != "" || !strings.HasPrefix(errOut, "spine: ") || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d stdout %q stderr %q; want exit %d", tc.args, code, out, errOut, tc.code)
		}
	}
}

func TestJobsTableOutput(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /jobs":    answer(200, `{"jobs":[`+sampleJob+`],"nextCursor":"c2"}`),
		"GET /jobs/j1": answer(200, sampleJob),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, out, errOut := cliRun(t, env, "", "jobs", "list", "--status", "queued", "--limit", "5", "--output", "table")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if q := f.last().query; q != "limit=5&status=queued" {
		t.Errorf("query = %q", q)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "STATUS") ||
		!strings.HasPrefix(lines[1], "j1 ") || !strings.Contains(lines[1], "queued") || !strings.Contains(lines[1], "0/5") ||
		!strings.Contains(out, "--cursor c2") {
		t.Fatalf("table:\n%s", out)
	}
	// Flags may follow the positional argument.
	code, out, _ = cliRun(t, env, "", "jobs", "get", "j1", "--output", "table")
	if code != exitOK || !strings.Contains(out, "STATUS") || !strings.Contains(out, "PAYLOAD") || !strings.Contains(out, `{"n":1}`) {
		t.Fatalf("exit %d table:\n%s", code, out)
	}
}

func TestJobsFailAndLeaseFlags(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /jobs/j1/fail": answer(200, sampleJob),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, _, errOut := cliRun(t, env, "", "jobs", "fail", "j1", "--message", "boom", "--code", "E1",
		"--requeue=false", "--lease-token", "tok", "--attempt-id", "a1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b := f.last().body
	e, _ := b["error"].(map[string]any)
	if b["requeue"] != false || b["leaseToken"] != "tok" || b["attemptId"] != "a1" || e["message"] != "boom" || e["code"] != "E1" {
		t.Fatalf("body = %v", b)
	}
}

func TestClusterVerbs(t *testing.T) {
	status := `{"leader":{"id":"n1","http_addr":"http://127.0.0.1:1"},"nodes":[{"id":"n1","raft_addr":"127.0.0.1:2","http_addr":"http://127.0.0.1:1","gossip_addr":"127.0.0.1:3","suffrage":"voter","alive":true}],"term":4,"commit_index":9,"applied_index":9,"node_id":"n1","state":"Leader"}`
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /cluster/status":           answer(200, status),
		"POST /cluster/join":            answer(200, status),
		"POST /cluster/remove":          answer(200, status),
		"POST /cluster/transfer-leader": answer(200, status),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, out, _ := cliRun(t, env, "", "cluster", "status", "--output", "table")
	if code != exitOK || !strings.Contains(out, "voter") || !strings.Contains(out, "TERM") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, _, errOut := cliRun(t, env, "", "cluster", "join", "--node-id", "n2", "--raft-addr", "127.0.0.1:5",
		"--http-addr", "http://127.0.0.1:6", "--gossip-addr", "127.0.0.1:7")
	if b := f.last().body; code != exitOK || b["node_id"] != "n2" || b["raft_addr"] != "127.0.0.1:5" ||
		b["http_addr"] != "http://127.0.0.1:6" || b["gossip_addr"] != "127.0.0.1:7" {
		t.Fatalf("exit %d %s body %v", code, errOut, b)
	}
	if code, _, _ := cliRun(t, env, "", "cluster", "remove", "--node-id", "n2"); code != exitOK || f.last().body["node_id"] != "n2" {
		t.Fatalf("remove: exit %d body %v", code, f.last().body)
	}
	if code, _, _ := cliRun(t, env, "", "cluster", "transfer-leader", "--to", "n3", "--wait", "0"); code != exitOK || f.last().body["to"] != "n3" {
		t.Fatalf("transfer: exit %d body %v", code, f.last().body)
	}
	if code, _, _ := cliRun(t, env, "", "cluster", "remove"); code != exitUsage {
		t.Fatalf("remove without --node-id: exit %d", code)
	}
}

func TestBlobsPutGet(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /blobs": func(w http.ResponseWriter, r *http.Request) {
			file, _, err := r.FormFile("file")
			if err != nil {
				apiError(w, 400, "invalid_request", err.Error())
				return
			}
			b, _ := io.ReadAll(file)
			answer(201, fmt.Sprintf(`{"id":"abc","size":%d,"contentType":"text/plain"}`, len(b)))(w, r)
		},
		"GET /blobs/abc": func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "bytes!") },
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	code, out, errOut := cliRun(t, env, "hello", "blobs", "put", "-")
	if code != exitOK || !strings.Contains(out, `"size": 5`) {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
	code, out, _ = cliRun(t, env, "", "blobs", "get", "abc")
	if code != exitOK || out != "bytes!" {
		t.Fatalf("exit %d out %q", code, out)
	}
}

func TestHelpAndUsage(t *testing.T) {
	code, out, _ := cliRun(t, nil, "", "jobs", "create", "--help")
	for _, want := range []string{"spine jobs create [-] [flags]", "-payload", "-payload-file", "-stream", "-target",
		"-max-attempts", "-idempotency-key", "-addr", "-token", "-output"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	if code != exitOK {
		t.Errorf("--help exit %d", code)
	}
	if code, out, _ := cliRun(t, nil, "", "cluster", "--help"); code != exitOK || !strings.Contains(out, "transfer-leader") {
		t.Errorf("cluster --help: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{}, {"frobnicate"}, {"get"}, {"get", "a", "b"}, {"list", "--output", "yaml"}} {
		if code, _, errOut := cliRun(t, nil, "", "jobs", args...); code != exitUsage || !strings.HasPrefix(errOut, "spine: ") {
			t.Errorf("jobs %v: exit %d stderr %q", args, code, errOut)
		}
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	code, _, errOut := cliRun(t, map[string]string{"SPINE_ADDRS": s.URL}, "", "jobs", "claim", "j1", "--retry-for", "0")
	if code != exitUnavailable {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}

func TestJobsRedrive(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /dlq/j1/redrive": answer(200, sampleJob),
		"POST /dlq/j2/redrive": answer(409, `{"error":{"code":"illegal_transition","message":"job j2 is queued"}}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL}
	if code, out, errOut := cliRun(t, env, "", "jobs", "redrive", "j1"); code != exitOK || !strings.Contains(out, `"id": "j1"`) {
		t.Fatalf("exit %d %s\n%s", code, errOut, out)
	}
	if code, _, errOut := cliRun(t, env, "", "jobs", "redrive", "j2"); code != exitConflict || !strings.Contains(errOut, "illegal_transition") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, _ := cliRun(t, env, "", "jobs", "redrive"); code != exitUsage {
		t.Fatalf("redrive without an id: exit %d", code)
	}
}

func TestClusterTableShowsStateHashes(t *testing.T) {
	two := 2
	st := &client.ClusterStatus{NodeID: "n1", State: "Leader", HashIndex: 42, StateHash: strings.Repeat("ab", 32), HashChecks: 7, Level: 2,
		Nodes: []*client.ClusterNode{{ID: "n1", HashIndex: 42, StateHash: strings.Repeat("ab", 32), SupportedLevel: &two}, {ID: "n2"}}}
	var b strings.Builder
	clusterTable(&b, st)
	out := b.String()
	for _, want := range []string{"STATE HASH\t@42 abababababab\tchecked 7\tmismatches 0", "LEVEL\t2\n", "n1\t", "@42 abababababab\tup to 2\n", "n2\t-\tfalse\t\t-\t-\t-\t-\t-\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster table lacks %q:\n%s", want, out)
		}
	}
}

// spine version says which release and build it is, and what its state
// machine applies (what decides whether it can join a cluster mid-upgrade).
func TestVersion(t *testing.T) {
	code, out, _ := cliRun(t, nil, "", "version", "--json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if b.Version != currentVersion() || b.Go == "" || b.Commands != int(fsm.LatestCommand()) || b.Level != fsm.LatestLevel || b.Snapshots != fsm.SnapshotVersion {
		t.Fatalf("version: %+v", b)
	}
	if code, out, _ := cliRun(t, nil, "", "version"); code != 0 || !strings.HasPrefix(out, "spine "+currentVersion()+"\n") ||
		!strings.Contains(out, fmt.Sprintf("applies commands up to %d, cluster level up to %d,", fsm.LatestCommand(), fsm.LatestLevel)) {
		t.Fatalf("exit %d: %s", code, out)
	}
}
