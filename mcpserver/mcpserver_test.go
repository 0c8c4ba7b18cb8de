package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/httpapi"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/mcpserver"
	"github.com/spine-queue/spine/queue"
)

const (
	headTok  = "head-token"
	clawTok  = "left-token"
	rightTok = "right-token"
	skill    = "# Spine skill\nClaim, heartbeat, complete.\n"
)

// startAPI serves the real API of a one-node in-process cluster over
// httptest and returns its URL.
func startAPI(t *testing.T) string {
	t.Helper()
	c := memcluster.Start(t, memcluster.Options{Nodes: 1})
	n := c.Leader(10 * time.Second)
	svc := queue.New(queue.Config{Logger: hclog.NewNullLogger()}, n.Raft, n.FSM)
	tokens := &httpapi.Tokens{}
	tokens.Add(httpapi.RoleHead, headTok)
	tokens.Add(httpapi.RoleLeftClaw, clawTok)
	tokens.Add(httpapi.RoleRightClaw, rightTok)
	api, err := httpapi.New(httpapi.Config{Tokens: tokens, SkillMD: []byte(skill)}, n.Raft, svc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		ts.Close()
		api.Close()
	})
	return ts.URL
}

func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New([]string{url}, client.WithToken(token), client.WithRetry(client.RetryPolicy{MaxElapsed: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// session connects an SDK client to a new server for token, over an
// in-memory transport, its role found from the token.
func session(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	return sessionAs(t, url, token, "")
}

// sessionAs is session with the worker id worker ("": w-ROLE).
func sessionAs(t *testing.T, url, token, worker string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, url, token)
	role, err := mcpserver.RoleOf(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if worker == "" {
		worker = "w-" + string(role)
	}
	return connect(t, mcpserver.Config{Backend: c, Role: role, WorkerID: worker})
}

// connect connects an SDK client to a new server of cfg, over an in-memory
// transport.
func connect(t *testing.T, cfg mcpserver.Config) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls a tool that must succeed and decodes its structured answer
// into out (if not nil).
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
}

// callErr calls a tool that must answer a tool error (not a protocol error)
// and returns its text.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s succeeded, want a tool error: %s", name, text(res))
	}
	t.Logf("%s: tool error: %s", name, text(res))
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tool.Name)
		}
	}
	slices.Sort(names)
	return names
}

func TestToolsPerRole(t *testing.T) {
	url := startAPI(t)
	common := []string{"comment", "get_job", "list_streams", "peek"}
	claw := slices.Sorted(slices.Values(append([]string{"claim", "complete", "fail", "heartbeat", "held_jobs", "release"}, common...)))
	head := slices.Sorted(slices.Values(append([]string{"cancel", "cluster_status", "enqueue", "list_jobs", "redrive", "requeue",
		"create_schedule", "delete_schedule", "get_schedule", "list_schedules", "pause_schedule", "resume_schedule", "trigger_schedule",
		"token_create", "token_list", "token_revoke"}, common...)))
	if got := toolNames(t, session(t, url, clawTok)); !slices.Equal(got, claw) {
		t.Errorf("claw tools = %v, want %v", got, claw)
	}
	if got := toolNames(t, session(t, url, rightTok)); !slices.Equal(got, claw) {
		t.Errorf("right claw tools = %v, want %v", got, claw)
	}
	if got := toolNames(t, session(t, url, headTok)); !slices.Equal(got, head) {
		t.Errorf("head tools = %v, want %v", got, head)
	}
	if _, err := mcpserver.RoleOf(context.Background(), newClient(t, url, "nobody")); err == nil {
		t.Error("RoleOf accepted a token no role has")
	}
}

type jobOut struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"`
	WorkerID string         `json:"worker_id"`
	Progress map[string]any `json:"progress"`
	Result   map[string]any `json:"result"`
	Comments []struct {
		Text string `json:"text"`
	} `json:"comments"`
	History []struct {
		Type string `json:"type"`
	} `json:"history"`
}

type claimOut struct {
	Claimed  bool   `json:"claimed"`
	WorkerID string `json:"worker_id"`
	Jobs     []struct {
		JobID        string         `json:"job_id"`
		Stream       string         `json:"stream"`
		Payload      map[string]any `json:"payload"`
		AttemptID    string         `json:"attempt_id"`
		LeaseToken   string         `json:"lease_token"`
		Instructions string         `json:"instructions"`
	} `json:"jobs"`
	Elsewhere []struct {
		Name   string `json:"name"`
		Queued int    `json:"queued"`
	} `json:"elsewhere"`
	Next string `json:"next"`
}

type heldOut struct {
	WorkerID string `json:"worker_id"`
	Jobs     []struct {
		JobID      string `json:"job_id"`
		LeaseToken string `json:"lease_token"`
	} `json:"jobs"`
}

func enqueue(t *testing.T, head *mcp.ClientSession, stream string, payload map[string]any) string {
	t.Helper()
	var out struct {
		Job            jobOut `json:"job"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	call(t, head, "enqueue", map[string]any{"stream": stream, "payload": payload}, &out)
	if out.Job.ID == "" || out.Job.Status != "queued" || out.IdempotencyKey == "" {
		t.Fatalf("enqueue answered %+v", out)
	}
	return out.Job.ID
}

// A claw claims, heartbeats with progress and completes, naming only the
// job: the session keeps the lease; the job reads done with the result.
func TestClaimHeartbeatCompleteKeepTheLeaseInTheSession(t *testing.T) {
	url := startAPI(t)
	head, claw := session(t, url, headTok), session(t, url, clawTok)
	id := enqueue(t, head, "work", map[string]any{"task": "summarise"})

	var peek struct {
		Jobs []jobOut `json:"jobs"`
	}
	call(t, claw, "peek", map[string]any{"stream": "work"}, &peek)
	if len(peek.Jobs) != 1 || peek.Jobs[0].ID != id || peek.Jobs[0].Status != "queued" {
		t.Fatalf("peek = %+v, want the queued job %s", peek, id)
	}
	var streams struct {
		Streams []struct {
			Name   string `json:"name"`
			Queued int    `json:"queued"`
		} `json:"streams"`
	}
	call(t, claw, "list_streams", nil, &streams)
	if !slices.ContainsFunc(streams.Streams, func(s struct {
		Name   string `json:"name"`
		Queued int    `json:"queued"`
	}) bool {
		return s.Name == "work" && s.Queued == 1
	}) {
		t.Fatalf("list_streams = %+v, want work with 1 queued", streams)
	}

	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 0}, &cl)
	if !cl.Claimed || len(cl.Jobs) != 1 || cl.Jobs[0].JobID != id || cl.Jobs[0].LeaseToken == "" || cl.Jobs[0].AttemptID == "" ||
		cl.Jobs[0].Payload["task"] != "summarise" || cl.WorkerID != "w-claw" {
		t.Fatalf("claim = %+v", cl)
	}
	var held struct {
		Jobs []struct {
			JobID      string `json:"job_id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	call(t, claw, "held_jobs", nil, &held)
	if len(held.Jobs) != 1 || held.Jobs[0].JobID != id || held.Jobs[0].LeaseToken != cl.Jobs[0].LeaseToken {
		t.Fatalf("held_jobs = %+v", held)
	}

	var hb struct {
		LeaseExpiresAt  time.Time `json:"lease_expires_at"`
		CancelRequested bool      `json:"cancel_requested"`
	}
	call(t, claw, "heartbeat", map[string]any{"job_id": id, "progress": map[string]any{"pct": 40}}, &hb)
	if hb.LeaseExpiresAt.IsZero() || hb.CancelRequested {
		t.Fatalf("heartbeat = %+v", hb)
	}
	var j jobOut
	call(t, claw, "get_job", map[string]any{"job_id": id}, &j)
	if j.Status != "running" || j.WorkerID != "w-claw" || j.Progress["pct"] != float64(40) {
		t.Fatalf("running job = %+v", j)
	}
	call(t, claw, "comment", map[string]any{"job_id": id, "text": "halfway"}, &j)
	if len(j.Comments) != 1 || j.Comments[0].Text != "halfway" {
		t.Fatalf("comment: job = %+v", j)
	}

	var done struct {
		Status string `json:"status"`
		Next   string `json:"next"`
	}
	call(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "summarised", "words": 120}}, &done)
	if done.Status != "done" || !strings.Contains(done.Next, "claim") {
		t.Fatalf("complete = %+v", done)
	}
	call(t, head, "get_job", map[string]any{"job_id": id, "history": true}, &j)
	if j.Status != "done" || j.Result["summary"] != "summarised" || len(j.History) < 3 {
		t.Fatalf("finished job = %+v", j)
	}
	call(t, claw, "held_jobs", nil, &held)
	if len(held.Jobs) != 0 {
		t.Fatalf("held_jobs after complete = %+v", held)
	}
	// The lease is gone from the session: a second complete says so.
	if msg := callErr(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "again"}}); !strings.Contains(msg, "holds no lease") {
		t.Fatalf("complete of a finished job: %q", msg)
	}
}

// A lease that ended (head released the job, another claw took it) is
// refused with a text that says to drop the job and claim again, and the
// session forgets it; the claw that holds it now completes it.
func TestStaleLeaseSaysWhatToDo(t *testing.T) {
	url := startAPI(t)
	head, claw, other := session(t, url, headTok), session(t, url, clawTok), sessionAs(t, url, rightTok, "w-right")
	id := enqueue(t, head, "work", map[string]any{"n": 1})
	var first claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 0}, &first)
	if !first.Claimed {
		t.Fatalf("claim = %+v", first)
	}
	// Head takes the job back (the v0 API lets head end any attempt).
	if _, err := newClient(t, url, headTok).JobRelease(context.Background(), id, &client.JobReleaseParams{Reason: "reassign"}); err != nil {
		t.Fatal(err)
	}
	var second claimOut
	call(t, other, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 5}, &second)
	if !second.Claimed || second.Jobs[0].JobID != id || second.Jobs[0].LeaseToken == first.Jobs[0].LeaseToken {
		t.Fatalf("second claim = %+v", second)
	}

	msg := callErr(t, claw, "heartbeat", map[string]any{"job_id": id})
	for _, want := range []string{"your lease on job " + id + " ended", "another worker may hold it", "claim"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stale heartbeat: %q lacks %q", msg, want)
		}
	}
	if msg := callErr(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "late"}}); !strings.Contains(msg, "holds no lease") {
		t.Errorf("complete after the stale heartbeat: %q, want the session to have dropped the lease", msg)
	}
	// The old lease given explicitly is still fenced off.
	msg = callErr(t, claw, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "late"},
		"lease_token": first.Jobs[0].LeaseToken, "attempt_id": first.Jobs[0].AttemptID})
	if !strings.Contains(msg, "ended") || !strings.Contains(msg, "claim") {
		t.Errorf("complete with the old lease: %q", msg)
	}
	call(t, other, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "done by the other"}}, nil)
	var j jobOut
	call(t, head, "get_job", map[string]any{"job_id": id}, &j)
	if j.Status != "done" || j.Result["summary"] != "done by the other" {
		t.Fatalf("job = %+v", j)
	}

	if msg := callErr(t, claw, "get_job", map[string]any{"job_id": "no-such-job"}); !strings.Contains(msg, "no job no-such-job is visible") {
		t.Errorf("get_job of an unknown id: %q", msg)
	}
	if msg := callErr(t, claw, "heartbeat", map[string]any{"job_id": "no-such-job"}); !strings.Contains(msg, "holds no lease") {
		t.Errorf("heartbeat of a job never claimed: %q", msg)
	}
}

// A job claimed in one session is finished from another with the lease its
// claim showed (the attempt id is looked up when only the token is given).
func TestExplicitLeaseFromAnotherSession(t *testing.T) {
	url := startAPI(t)
	head := session(t, url, headTok)
	id := enqueue(t, head, "work", map[string]any{"n": 2})
	var cl claimOut
	call(t, session(t, url, clawTok), "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 0}, &cl)
	later := session(t, url, clawTok)
	call(t, later, "heartbeat", map[string]any{"job_id": id, "lease_token": cl.Jobs[0].LeaseToken}, nil)
	var f struct {
		Requeued   bool `json:"requeued"`
		DeadLetter bool `json:"dead_letter"`
	}
	call(t, later, "fail", map[string]any{"job_id": id, "message": "no network", "retryable": true, "lease_token": cl.Jobs[0].LeaseToken}, &f)
	if !f.Requeued || f.DeadLetter {
		t.Fatalf("fail = %+v", f)
	}
	// Requeued: a claim takes it again; release gives it back with a cooldown.
	call(t, later, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 5}, &cl)
	if !cl.Claimed || cl.Jobs[0].JobID != id {
		t.Fatalf("claim after the fail = %+v", cl)
	}
	var rel struct {
		Status string `json:"status"`
	}
	call(t, later, "release", map[string]any{"job_id": id, "reason": "needs a GPU", "cooldown_ms": 60000}, &rel)
	if rel.Status != "queued" {
		t.Fatalf("release = %+v", rel)
	}
	call(t, later, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 0}, &cl)
	if cl.Claimed {
		t.Fatalf("claimed a job in its cooldown: %+v", cl)
	}
	if !strings.Contains(cl.Next, "call claim again") {
		t.Errorf("nothing claimed: next = %q", cl.Next)
	}
}

// A claim that finds nothing in its streams says where work waits.
func TestNothingClaimedNamesStreamsWithWork(t *testing.T) {
	url := startAPI(t)
	head, claw := session(t, url, headTok), session(t, url, clawTok)
	enqueue(t, head, "busy", map[string]any{"n": 1})
	enqueue(t, head, "busy", map[string]any{"n": 2})
	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"idle"}, "wait_seconds": 0}, &cl)
	if cl.Claimed || len(cl.Elsewhere) != 1 || cl.Elsewhere[0].Name != "busy" || cl.Elsewhere[0].Queued != 2 {
		t.Fatalf("claim of an empty stream = %+v", cl)
	}
	if !strings.Contains(cl.Next, "busy (2 queued)") {
		t.Errorf("next = %q, want it to name busy", cl.Next)
	}
}

// Head's tools: a failed job is redriven and requeued, a queued one is
// cancelled, the cluster's status names the leader; a claw may not use
// head's routes even by name.
func TestHeadTools(t *testing.T) {
	url := startAPI(t)
	head, claw := session(t, url, headTok), session(t, url, clawTok)
	id := enqueue(t, head, "work", map[string]any{"n": 3})
	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"work"}, "wait_seconds": 0}, &cl)
	call(t, claw, "fail", map[string]any{"job_id": id, "message": "bad input", "retryable": false, "code": "bad_input"}, nil)

	var list struct {
		Jobs []jobOut `json:"jobs"`
	}
	call(t, head, "list_jobs", map[string]any{"status": "failed"}, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != id {
		t.Fatalf("failed jobs = %+v", list)
	}
	var rq struct {
		Job  jobOut `json:"job"`
		From string `json:"from"`
	}
	call(t, head, "requeue", map[string]any{"job_id": id}, &rq)
	if rq.Job.ID == "" || rq.Job.ID == id || rq.Job.Status != "queued" || rq.From != id {
		t.Fatalf("requeue = %+v", rq)
	}
	first := rq.Job.ID
	call(t, head, "requeue", map[string]any{"job_id": id}, &rq) // a repeat, say after a lost answer
	if rq.Job.ID != first {
		t.Fatalf("a repeated requeue made another copy %s (first %s)", rq.Job.ID, first)
	}
	var j jobOut
	call(t, head, "redrive", map[string]any{"job_id": id}, &j)
	if j.ID != id || j.Status != "queued" {
		t.Fatalf("redrive = %+v", j)
	}
	if msg := callErr(t, head, "redrive", map[string]any{"job_id": id}); !strings.Contains(msg, "queued") {
		t.Errorf("redrive of a queued job: %q", msg)
	}
	call(t, head, "cancel", map[string]any{"job_id": rq.Job.ID, "reason": "superseded"}, &j)
	if j.Status != "cancelled" {
		t.Fatalf("cancel = %+v", j)
	}
	var st struct {
		LeaderID string `json:"leader_id"`
		Nodes    []struct {
			ID     string `json:"id"`
			Leader bool   `json:"leader"`
		} `json:"nodes"`
	}
	call(t, head, "cluster_status", nil, &st)
	if st.LeaderID == "" || len(st.Nodes) != 1 || !st.Nodes[0].Leader {
		t.Fatalf("cluster_status = %+v", st)
	}
	if msg := callErr(t, head, "enqueue", map[string]any{"payload": nil}); !strings.Contains(msg, "payload") {
		t.Errorf("enqueue without a payload: %q", msg)
	}
	if msg := callErr(t, head, "list_jobs", map[string]any{"status": "bogus"}); !strings.Contains(msg, "Fix the arguments") {
		t.Errorf("list_jobs with a bad status: %q", msg)
	}
	// Arguments are checked against the schema before any call.
	if msg := callErr(t, claw, "claim", map[string]any{"stream": "work"}); !strings.Contains(msg, "stream") {
		t.Errorf("claim with a misspelt argument: %q", msg)
	}
}

// The skill file and a stream's instructions are resources; a stream
// without instructions says so.
func TestResources(t *testing.T) {
	url := startAPI(t)
	ctx := context.Background()
	hc := newClient(t, url, headTok)
	if _, err := hc.SessionCreate(ctx, &client.SessionCreateParams{Name: "api-v2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.StreamCreate(ctx, &client.StreamCreateParams{Name: "auth", Session: "api-v2", Instructions: "JWT per PRD 4.2. Done when tests pass."}); err != nil {
		t.Fatal(err)
	}
	claw := session(t, url, clawTok)
	read := func(uri string) string {
		t.Helper()
		res, err := claw.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 || res.Contents[0].URI != uri {
			t.Fatalf("read %s: %+v", uri, res.Contents)
		}
		return res.Contents[0].Text
	}
	if got := read(mcpserver.SkillURI); got != skill {
		t.Errorf("skill = %q, want %q", got, skill)
	}
	if got := read(mcpserver.InstructionsURI("auth")); got != "JWT per PRD 4.2. Done when tests pass." {
		t.Errorf("instructions of auth = %q", got)
	}
	if got := read(mcpserver.InstructionsURI("plain")); !strings.Contains(got, "Stream plain has no instructions") {
		t.Errorf("instructions of a stream without any = %q", got)
	}
	var templates []string
	for rt, err := range claw.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, rt.URITemplate)
	}
	if !slices.Equal(templates, []string{mcpserver.InstructionsTemplate}) {
		t.Errorf("templates = %v", templates)
	}

	// A claim hands out the stream's instructions with the job.
	head := session(t, url, headTok)
	enqueue(t, head, "auth", map[string]any{"task": "login"})
	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"auth"}, "wait_seconds": 0}, &cl)
	if !cl.Claimed || cl.Jobs[0].Instructions != "JWT per PRD 4.2. Done when tests pass." {
		t.Fatalf("claim in auth = %+v", cl)
	}
}

// A cluster that cannot be reached is a tool error naming the addresses
// tried and what to do.
func TestUnreachableClusterNamesTheNodes(t *testing.T) {
	ln := httptest.NewServer(nil)
	addr := ln.URL
	ln.Close() // nothing listens there now
	c, err := client.New([]string{addr}, client.WithToken(clawTok), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{Backend: c, Role: mcpserver.RoleClaw})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cs.Close()
		ss.Wait()
	}()
	msg := callErr(t, cs, "list_streams", nil)
	for _, want := range []string{"could not reach the cluster", addr, "Nothing was changed", "call again", "other nodes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if msg := callErr(t, cs, "claim", map[string]any{"wait_seconds": 0}); !strings.Contains(msg, addr) {
		t.Errorf("claim: %q", msg)
	}
}

// A job released with not_for_me is never handed to that session's worker
// again; another session's worker gets it at once.
func TestReleaseNotForMe(t *testing.T) {
	url := startAPI(t)
	head, claw, other := session(t, url, headTok), session(t, url, clawTok), session(t, url, clawTok)
	id := enqueue(t, head, "gpu-ish", map[string]any{"n": 1})
	var cl claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"gpu-ish"}, "wait_seconds": 5, "worker_id": "w-cpu"}, &cl)
	if !cl.Claimed || cl.Jobs[0].JobID != id {
		t.Fatalf("claim = %+v", cl)
	}
	var rel struct {
		Status string `json:"status"`
		Next   string `json:"next"`
	}
	call(t, claw, "release", map[string]any{"job_id": id, "reason": "needs a GPU", "not_for_me": true}, &rel)
	if rel.Status != "queued" || !strings.Contains(rel.Next, "not be handed it again") {
		t.Fatalf("release = %+v", rel)
	}
	var again claimOut
	call(t, claw, "claim", map[string]any{"streams": []string{"gpu-ish"}, "wait_seconds": 0, "worker_id": "w-cpu"}, &again)
	if again.Claimed {
		t.Fatalf("handed back to the worker that released it: %+v", again)
	}
	var theirs claimOut
	call(t, other, "claim", map[string]any{"streams": []string{"gpu-ish"}, "wait_seconds": 5, "worker_id": "w-gpu"}, &theirs)
	if !theirs.Claimed || theirs.Jobs[0].JobID != id {
		t.Fatalf("another worker's claim = %+v", theirs)
	}
}

// held_jobs reads the leases from the cluster: a new session takes over an
// earlier one's worker and finishes its job naming only the id; the
// earlier session, asked again, forgets the lease the cluster no longer
// lists.
func TestHeldJobsTakesOverAWorker(t *testing.T) {
	url := startAPI(t)
	head := session(t, url, headTok)
	id := enqueue(t, head, "held", map[string]any{"n": 3})
	before := sessionAs(t, url, clawTok, "agent-1")
	var cl claimOut
	call(t, before, "claim", map[string]any{"streams": []string{"held"}, "wait_seconds": 0}, &cl)
	if !cl.Claimed || cl.WorkerID != "agent-1" {
		t.Fatalf("claim = %+v", cl)
	}
	after := sessionAs(t, url, clawTok, "agent-2")
	var h heldOut
	call(t, after, "held_jobs", nil, &h)
	if h.WorkerID != "agent-2" || len(h.Jobs) != 0 {
		t.Fatalf("a new worker holds %+v", h)
	}
	if msg := callErr(t, after, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "x"}}); !strings.Contains(msg, "held_jobs") {
		t.Errorf("complete without a lease: %q", msg)
	}
	call(t, after, "held_jobs", map[string]any{"worker_id": "agent-1"}, &h)
	if h.WorkerID != "agent-1" || len(h.Jobs) != 1 || h.Jobs[0].JobID != id || h.Jobs[0].LeaseToken != cl.Jobs[0].LeaseToken {
		t.Fatalf("held_jobs of agent-1 = %+v", h)
	}
	var done struct {
		Status string `json:"status"`
	}
	call(t, after, "complete", map[string]any{"job_id": id, "result": map[string]any{"summary": "taken over"}}, &done)
	if done.Status != "done" {
		t.Fatalf("complete = %+v", done)
	}
	call(t, before, "held_jobs", nil, &h)
	if len(h.Jobs) != 0 {
		t.Fatalf("the earlier session still holds %+v", h)
	}
}
