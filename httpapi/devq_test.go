package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// devqEnv is a server with a registry, a session "api-v2" and a stream
// "auth"; offset moves its clock.
func devqEnv(t *testing.T) (*env, *atomic.Int64) {
	var offset atomic.Int64
	e := newEnv(t, func(c *envConfig) {
		c.Queue.Now = func() time.Time { return testNow.Add(time.Duration(offset.Load())) }
	})
	reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}, {Name: "migrate", TaskClass: "MEDIUM_SCRIPT", Timeout: 1800}},
		PurgeOlderThanDays: 3}
	if r := e.do("PUT", "/api/registry", headTok, reg); r.Code != 200 {
		t.Fatalf("registry: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "api-v2", Description: "v2"}); r.Code != 201 {
		t.Fatalf("session: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: "auth", Session: "api-v2",
		Instructions: "Implement JWT per PRD 4.2"}); r.Code != 201 {
		t.Fatalf("stream: %d %s", r.Code, r.Body)
	}
	return e, &offset
}

func task(t testing.TB, r resp) *api.Task {
	t.Helper()
	var v api.Task
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("not a task: %v: %s", err, r.Body)
	}
	return &v
}

func (e *env) enqueue(tool, stream string, timeout int64) *api.Task {
	e.t.Helper()
	r := e.do("POST", "/api/tasks", headTok, api.EnqueueRequest{ToolName: tool, Stream: stream, Timeout: timeout,
		Payload: json.RawMessage(`{"script_path":"scripts/migrate.sh"}`)})
	if r.Code != 201 {
		e.t.Fatalf("enqueue %s: %d %s", tool, r.Code, r.Body)
	}
	return task(e.t, r)
}

// The worker protocol of seed 004 over HTTP: peek, claim (with the
// stream's instructions), complete with a summary, fail, requeue.
func TestDevQueueWorkerProtocol(t *testing.T) {
	e, _ := devqEnv(t)
	tk := e.enqueue("migrate", "auth", 0)
	if tk.Status != api.TaskQueued || tk.Timeout != 1800 || tk.TaskClass != "MEDIUM_SCRIPT" || tk.Stream.Name != "auth" {
		t.Fatalf("enqueued: %+v", tk)
	}
	// Peek changes nothing.
	for i := 0; i < 2; i++ {
		if p := e.do("GET", "/api/peek?stream=auth", leftTok, nil); p.Code != 200 || task(t, p).ID != tk.ID || task(t, p).Status != api.TaskQueued {
			t.Fatalf("peek: %d %s", p.Code, p.Body)
		}
	}
	// A claim without a stream claims nothing and lists the streams.
	r := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{})
	body := r.apiErr(t, 400, api.CodeStreamRequired)
	if streams, _ := body["streams"].([]interface{}); len(streams) != 1 || !strings.Contains(string(r.Body), `"name":"auth","queued":1`) {
		t.Fatalf("claim without a stream: %s", r.Body)
	}
	// The HTTP answer names the body's field, never the CLI's flag.
	if msg, _ := body["message"].(string); !strings.HasPrefix(msg, "stream is required") || strings.Contains(msg, "--") {
		t.Fatalf("claim without a stream, message: %q", msg)
	}
	e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth", ClaimID: "no"}).apiErr(t, 400, api.CodeInvalidRequest)
	c := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth", ClaimID: "claim-key-1"})
	claimed := task(t, c)
	if c.Code != 200 || claimed.ID != tk.ID || claimed.Status != api.TaskRunning || claimed.Stream.Instructions != "Implement JWT per PRD 4.2" ||
		claimed.LeaseToken == "" || claimed.StartedAt.IsZero() || claimed.Attempts != 1 || claimed.AttemptID != "k_claim-key-1" {
		t.Fatalf("claim: %d %s", c.Code, c.Body)
	}
	// The same claim repeated (its answer lost) answers the same lease.
	if again := task(t, e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth", ClaimID: "claim-key-1"})); again.ID != tk.ID ||
		again.LeaseToken != claimed.LeaseToken || again.Attempts != 1 {
		t.Fatalf("repeated keyed claim: %+v", again)
	}
	if p := e.do("GET", "/api/peek?stream=auth", leftTok, nil); p.Code != 204 {
		t.Fatalf("peek of an empty stream: %d %s", p.Code, p.Body)
	}
	if c := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}); c.Code != 204 {
		t.Fatalf("claim of an empty stream: %d %s", c.Code, c.Body)
	}
	// Complete without a summary is refused and the task stays running.
	for _, bad := range []string{`{"ok":true}`, `{"summary":3}`, `"done"`} {
		r := e.do("POST", "/api/tasks/"+tk.ID+"/complete", leftTok, `{"result":`+bad+`,"lease_token":"`+claimed.LeaseToken+`"}`)
		r.apiErr(t, 400, api.CodeInvalidRequest)
	}
	if g := task(t, e.do("GET", "/api/tasks/"+tk.ID, leftTok, nil)); g.Status != api.TaskRunning {
		t.Fatalf("after refused completes: %s", g.Status)
	}
	done := e.do("POST", "/api/tasks/"+tk.ID+"/complete", leftTok, api.TaskCompleteRequest{LeaseToken: claimed.LeaseToken,
		Result: json.RawMessage(`{"summary":"migrated 12 users","rows":12}`), Stdout: "ok\n", Stderr: "warn\n"})
	if d := task(t, done); done.Code != 200 || d.Status != api.TaskSucceeded || d.Stdout != "ok\n" || d.Stderr != "warn\n" || d.FinishedAt.IsZero() {
		t.Fatalf("complete: %d %s", done.Code, done.Body)
	}
	// The same task is a job of the v0 API too.
	if j := e.do("GET", "/jobs/"+tk.ID, headTok, nil).json(t); j["status"] != "done" || j["stream"] != "auth" {
		t.Fatalf("the task as a job: %v", j)
	}

	// Fail, then requeue: a clone under a new id.
	t2 := e.enqueue("run-bash", "auth", 0)
	c2 := task(t, e.do("POST", "/api/claim", rightTok, api.TaskClaimRequest{Stream: "auth"}))
	e.do("POST", "/api/tasks/"+t2.ID+"/fail", rightTok, api.TaskFailRequest{LeaseToken: c2.LeaseToken}).apiErr(t, 400, api.CodeInvalidRequest)
	f := task(t, e.do("POST", "/api/tasks/"+t2.ID+"/fail", rightTok, api.TaskFailRequest{LeaseToken: c2.LeaseToken,
		Error: "permission denied on users", Stderr: "EACCES"}))
	if f.Status != api.TaskFailed || f.Error != "permission denied on users" || f.Stderr != "EACCES" {
		t.Fatalf("fail: %+v", f)
	}
	rq := e.do("POST", "/api/tasks/"+t2.ID+"/requeue", headTok, nil)
	clone := task(t, rq)
	if rq.Code != 201 || clone.ID == t2.ID || clone.Status != api.TaskQueued || clone.ClonedFrom != t2.ID || clone.ToolName != "run-bash" || clone.Timeout != 30 {
		t.Fatalf("requeue: %d %s", rq.Code, rq.Body)
	}
	e.do("POST", "/api/tasks/"+tk.ID+"/requeue", headTok, nil).apiErr(t, 409, api.CodeIllegalTransition)

	var list api.TaskList
	if err := json.Unmarshal(e.do("GET", "/api/tasks?status=failed&stream=auth", leftTok, nil).Body, &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != t2.ID {
		t.Fatalf("failed tasks: %+v %v", list, err)
	}
}

// Stale at the timeout since the claim, and a heartbeat pushes it back.
func TestDevQueueStale(t *testing.T) {
	e, offset := devqEnv(t)
	tk := e.enqueue("run-bash", "auth", 10)
	c := task(t, e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}))
	stale := func() []*api.Task {
		var l api.TaskList
		if err := json.Unmarshal(e.do("GET", "/api/tasks?stale=true", leftTok, nil).Body, &l); err != nil {
			t.Fatal(err)
		}
		return l.Tasks
	}
	offset.Store(int64(9 * time.Second))
	if s := stale(); len(s) != 0 {
		t.Fatalf("stale before its timeout: %v", s)
	}
	offset.Store(int64(11 * time.Second))
	if s := stale(); len(s) != 1 || s[0].ID != tk.ID || !s[0].Stale {
		t.Fatalf("stale after its timeout: %+v", s)
	}
	hb := e.do("POST", "/api/tasks/"+tk.ID+"/heartbeat", leftTok, api.TaskHeartbeatRequest{LeaseToken: c.LeaseToken})
	if hb.Code != 200 || task(t, hb).Stale {
		t.Fatalf("heartbeat: %d %s", hb.Code, hb.Body)
	}
	if s := stale(); len(s) != 0 {
		t.Fatalf("stale right after a heartbeat: %v", s)
	}
}

func TestDevQueueRefusals(t *testing.T) {
	e, _ := devqEnv(t)
	r := e.do("POST", "/api/tasks", headTok, api.EnqueueRequest{ToolName: "nope", Stream: "auth"})
	if r.apiErr(t, 400, api.CodeInvalidRequest); !strings.Contains(string(r.Body), "known tools: migrate, run-bash") {
		t.Fatalf("unknown tool: %s", r.Body)
	}
	e.do("POST", "/api/tasks", headTok, api.EnqueueRequest{ToolName: "migrate", Stream: "nowhere"}).apiErr(t, 404, api.CodeNotFound)
	e.do("POST", "/api/tasks", headTok, `{"tool_name":"migrate","stream":"auth","payload":{nope}}`).apiErr(t, 400, api.CodeInvalidJSON)
	e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "api-v2"}).apiErr(t, 409, api.CodeAlreadyExists)
	e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "has space"}).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/api/sessions", leftTok, api.SessionCreateRequest{Name: "mine"}).apiErr(t, 403, api.CodeForbidden)
	e.do("POST", "/api/purge", headTok, api.PurgeRequest{OlderThan: "3 days"}).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "x", TaskClass: "HUGE"}}}).apiErr(t, 400, api.CodeInvalidRequest)
	if reg := e.do("GET", "/api/tools", leftTok, nil); !strings.Contains(string(reg.Body), `"migrate"`) {
		t.Fatalf("a refused reload changed the tools: %s", reg.Body)
	}

	// An ended stream: no enqueue (task or v0 job), no peek, no claim; its
	// queued task stays.
	tk := e.enqueue("migrate", "auth", 0)
	if r := e.do("POST", "/api/streams/auth/end", headTok, nil); r.Code != 200 || !strings.Contains(string(r.Body), `"status":"ended"`) {
		t.Fatalf("end: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/api/tasks", headTok, api.EnqueueRequest{ToolName: "migrate", Stream: "auth"}).apiErr(t, 409, api.CodeStreamEnded)
	e.do("POST", "/jobs", headTok, map[string]interface{}{"payload": 1, "stream": "auth"}).apiErr(t, 409, api.CodeStreamEnded)
	e.do("GET", "/api/peek?stream=auth", leftTok, nil).apiErr(t, 409, api.CodeStreamEnded)
	e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}).apiErr(t, 409, api.CodeStreamEnded)
	if g := task(t, e.do("GET", "/api/tasks/"+tk.ID, leftTok, nil)); g.Status != api.TaskQueued {
		t.Fatalf("queued task of an ended stream: %s", g.Status)
	}
	// Ending the session ends the rest; a new stream in it is refused.
	e.do("POST", "/api/sessions/api-v2/end", headTok, nil)
	e.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: "late", Session: "api-v2"}).apiErr(t, 409, api.CodeSessionEnded)
}

func TestDevQueuePurgeAndStatus(t *testing.T) {
	e, offset := devqEnv(t)
	done := e.enqueue("run-bash", "auth", 0)
	queued := e.enqueue("run-bash", "auth", 0)
	c := task(t, e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}))
	e.do("POST", "/api/tasks/"+done.ID+"/complete", leftTok, api.TaskCompleteRequest{LeaseToken: c.LeaseToken, Result: json.RawMessage(`{"summary":"s"}`)})

	var st api.DevStatus
	if err := json.Unmarshal(e.do("GET", "/api/status", leftTok, nil).Body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Tasks[api.TaskSucceeded] != 1 || st.Tasks[api.TaskQueued] != 1 || len(st.Sessions) != 1 || len(st.Streams) != 1 || st.Streams[0].Queued != 1 || st.Tools != 2 {
		t.Fatalf("status: %+v", st)
	}
	offset.Store(int64(2 * time.Second))
	r := e.do("POST", "/api/purge", headTok, api.PurgeRequest{OlderThan: "1s"})
	var pr api.PurgeResult
	if err := json.Unmarshal(r.Body, &pr); err != nil || r.Code != 200 || pr.Purged != 1 {
		t.Fatalf("purge: %d %s", r.Code, r.Body)
	}
	e.do("GET", "/api/tasks/"+done.ID, leftTok, nil).apiErr(t, 404, api.CodeNotFound)
	if g := e.do("GET", "/api/tasks/"+queued.ID, leftTok, nil); g.Code != http.StatusOK {
		t.Fatalf("purge took a queued task: %d %s", g.Code, g.Body)
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"3d": 72 * time.Hour, "12h": 12 * time.Hour, "30m": 30 * time.Minute, "45s": 45 * time.Second, "0s": 0} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "3", "d", "-1d", "3 days", "-5s"} {
		if _, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) accepted", bad)
		}
	}
}

// While a node of the cluster runs a version without the developer queue,
// its writes are refused (503), not written for that node to stop at.
func TestDevQueueWaitsForEveryNode(t *testing.T) {
	e := newEnv(t)
	e.fc.setSupported(0)
	var types []fsm.CommandType
	e.fc.beforeApply = func(t fsm.CommandType) { types = append(types, t) }
	e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s"}).apiErr(t, 503, api.CodeUpgradeInProgress)
	e.do("PUT", "/api/registry", headTok, api.Registry{}).apiErr(t, 503, api.CodeUpgradeInProgress)
	if len(types) != 0 {
		t.Fatalf("proposed %v", types)
	}
}

// On GET /api/tasks, stale is the stale-task filter, not the consistency
// flag: a follower sends the read to the leader as any default read.
func TestDevQueueStaleFilterIsNotAStaleRead(t *testing.T) {
	e, _ := devqEnv(t)
	e.fc.mu.Lock()
	e.fc.leader, e.fc.leaderID, e.fc.leaderAddr = false, "n2", "http://127.0.0.1:1" // unreachable
	e.fc.mu.Unlock()
	r := e.do("GET", "/api/tasks?stale=true", leftTok, nil)
	if r.Code != 503 {
		t.Fatalf("a follower answered the stale-task filter from its own state: %d %s", r.Code, r.Body)
	}
	if r := e.do("GET", "/jobs?stale=true", leftTok, nil); r.Code != 200 {
		t.Fatalf("?stale on /jobs is still a local read: %d %s", r.Code, r.Body)
	}
	// A claim without a stream lists the streams, [] when none has work.
	e.fc.mu.Lock()
	e.fc.leader, e.fc.leaderID = true, "n1"
	e.fc.mu.Unlock()
	if r := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{}); !strings.Contains(string(r.Body), `"streams":[]`) {
		t.Fatalf("claim without a stream, nothing queued: %s", r.Body)
	}
}

// A peek with a wait answers as soon as a task is queued; one parked on a
// follower that stops gracefully, and the developer claim too, answer 204
// at once (not the worker contract's claimed:false).
func TestDevQueuePeekWaitsAndDrains(t *testing.T) {
	e, _ := devqEnv(t)
	done := make(chan resp, 1)
	go func() { done <- e.do("GET", "/api/peek?stream=auth&wait_ms=20000", leftTok, nil) }()
	// Whether the peek looks before or after the enqueue, it sees the task.
	tk := e.enqueue("run-bash", "auth", 0)
	select {
	case r := <-done:
		if r.Code != 200 || task(t, r).ID != tk.ID {
			t.Fatalf("waiting peek: %d %s", r.Code, r.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting peek did not see the task")
	}

	leader, follower, _ := relayPair(t)
	for _, env := range []*env{leader} {
		env.do("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}})
		env.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s"})
		env.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: "idle", Session: "s"})
	}
	answers := make(chan resp, 2)
	go func() { answers <- follower.do("GET", "/api/peek?stream=idle&wait_ms=30000", leftTok, nil) }()
	go func() { answers <- follower.do("POST", "/api/claim", leftTok, `{"stream":"idle","wait_ms":30000}`) }()
	waitUntil(t, "the claim to park on the leader", func() bool { return leader.srv.queue.Stats().ClaimWaiters == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	follower.srv.Shutdown(ctx)
	for i := 0; i < 2; i++ {
		select {
		case r := <-answers:
			if r.Code != http.StatusNoContent {
				t.Fatalf("parked developer long poll answered %d %s, want 204", r.Code, r.Body)
			}
		case <-ctx.Done():
			t.Fatal("a parked long poll was not answered")
		}
	}
}

// A task claim naming no stream lists the streams the caller could take a
// task from now: none out of its token's scope, none whose queued tasks
// all wait on their key's rate.
func TestTaskClaimWithoutStreamListsTakeableStreams(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	if r := e.do("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "migrate", TaskClass: "MEDIUM_SCRIPT"}}}); r.Code != 200 {
		t.Fatalf("registry: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s1"}); r.Code != 201 {
		t.Fatalf("session: %d %s", r.Code, r.Body)
	}
	for _, st := range []string{"auth", "billing", "metered"} {
		if r := e.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: st, Session: "s1"}); r.Code != 201 {
			t.Fatalf("stream %s: %d %s", st, r.Code, r.Body)
		}
	}
	e.enqueue("migrate", "auth", 0)
	e.enqueue("migrate", "billing", 0)
	// Two jobs in metered under a rate of one an hour: the first claim
	// spends the key's one token, the second job waits.
	for range 2 {
		e.create(map[string]any{"stream": "metered", "rateLimit": map[string]any{"key": "meter", "limit": 1, "periodSeconds": 3600}})
	}
	if c := e.workerClaim(leftTok, `{"worker_id":"w1","streams":["metered"]}`); c["claimed"] != true {
		t.Fatalf("claim metered: %v", c)
	}
	listed := func(tok string) string {
		t.Helper()
		body := e.do("POST", "/api/claim", tok, api.TaskClaimRequest{}).apiErr(t, 400, api.CodeStreamRequired)
		var names []string
		for _, s := range body["streams"].([]interface{}) {
			names = append(names, s.(map[string]interface{})["name"].(string))
		}
		return strings.Join(names, ",")
	}
	if got := listed(leftTok); got != "auth,billing" {
		t.Errorf("streams listed to an unscoped claw: %q, want auth,billing", got)
	}
	scoped := e.newToken(api.TokenCreateRequest{Name: "claw-bm", Role: fsm.RoleLeftClaw, Streams: []string{"billing", "metered"}})
	if got := listed(scoped); got != "billing" {
		t.Errorf("streams listed to a claw scoped to billing and metered: %q, want billing", got)
	}
}

// A task takes its stream's defaults as a job created there does: the
// concurrency key and limit, the rate limit and the result contract (from
// cluster level 5; below it, as older builds, none).
func TestTaskTakesStreamDefaults(t *testing.T) {
	for _, level := range []int{fsm.LevelPolicies, fsm.LevelTaskDefaults} {
		e := newEnv(t, atLevel(level))
		if r := e.do("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "migrate", TaskClass: "MEDIUM_SCRIPT"}}}); r.Code != 200 {
			t.Fatalf("registry: %d %s", r.Code, r.Body)
		}
		if r := e.do("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s1"}); r.Code != 201 {
			t.Fatalf("session: %d %s", r.Code, r.Body)
		}
		if r := e.do("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: "auth", Session: "s1"}); r.Code != 201 {
			t.Fatalf("stream: %d %s", r.Code, r.Body)
		}
		if r := e.do("PUT", "/streams/auth/defaults", headTok, `{"concurrencyKey":"repo","concurrencyLimit":1,`+
			`"rateLimit":{"key":"ci","limit":1,"periodSeconds":3600},"resultSchema":{"type":"object","required":["summary"]}}`); r.Code != 200 {
			t.Fatalf("defaults: %d %s", r.Code, r.Body)
		}
		first, second := e.enqueue("migrate", "auth", 0), e.enqueue("migrate", "auth", 0)
		view := func(id string) (j api.Job) {
			decodeAs(e.do("GET", "/jobs/"+id, headTok, nil), &j)
			return j
		}
		j, x := view(first.ID), view(second.ID)
		if level < fsm.LevelTaskDefaults {
			if j.ConcurrencyKey != "" || j.RateLimit != nil || len(j.ResultSchema) != 0 {
				t.Fatalf("level %d: a task took its stream's defaults: %+v", level, j)
			}
			continue
		}
		if j.ConcurrencyKey != "repo" || j.ConcurrencyLimit != 1 || j.RateLimit == nil || j.RateLimit.Key != "ci" ||
			!strings.Contains(string(j.ResultSchema), "summary") || x.ConcurrencyKey != "repo" {
			t.Fatalf("the task lacks its stream's defaults: %+v", j)
		}
		// The key's limit holds the second task back while the first runs,
		// and the first claim spent the rate's one token.
		if r := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}); r.Code != 200 || task(t, r).ID != first.ID {
			t.Fatalf("claim: %d %s", r.Code, r.Body)
		}
		if r := e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}); r.Code != http.StatusNoContent {
			t.Fatalf("a second claim under the rate: %d %s", r.Code, r.Body)
		}
		var rates api.RateList
		if r := e.do("GET", "/rates", headTok, nil); json.Unmarshal(r.Body, &rates) != nil || len(rates.Rates) != 1 || rates.Rates[0].Key != "ci" || rates.Rates[0].Tokens != 0 {
			t.Fatalf("rates: %s", r.Body)
		}
	}
}
