package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// newToken creates a named token as head and returns its secret.
func (e *env) newToken(req api.TokenCreateRequest) string {
	e.t.Helper()
	r := e.do("POST", "/v1/tokens", headTok, req)
	if r.Code != http.StatusCreated {
		e.t.Fatalf("token create: %d %s", r.Code, r.Body)
	}
	var out api.TokenCreated
	if err := json.Unmarshal(r.Body, &out); err != nil || out.Secret == "" {
		e.t.Fatalf("token create answer: %v %s", err, r.Body)
	}
	return out.Secret
}

// The secret is answered once: the state holds its hash alone, and no
// read shows it again.
func TestTokenSecretShownOnce(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	r := e.do("POST", "/v1/tokens", headTok, api.TokenCreateRequest{Name: "indexer", Role: fsm.RoleLeftClaw,
		Streams: []string{"b", "a"}, WorkerID: "idx-1", ExpiresInSeconds: 3600, Note: "the nightly indexer"})
	if r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	var created api.TokenCreated
	if err := json.Unmarshal(r.Body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Secret, queue.TokenSecretPrefix) || len(created.Secret) < 40 || created.Name != "indexer" ||
		created.Role != fsm.RoleLeftClaw || strings.Join(created.Streams, ",") != "a,b" || created.WorkerID != "idx-1" ||
		!created.ExpiresAt.Equal(testNow.Add(time.Hour)) || created.CreatedBy != "head" {
		t.Fatalf("created %+v", created)
	}
	tk := e.fc.fsm.Read().TokenNamed("indexer")
	if tk == nil || tk.Hash != queue.TokenHash(created.Secret) || strings.Contains(fmt.Sprintf("%+v", *tk), created.Secret) {
		t.Fatalf("stored token %+v", tk)
	}
	for _, path := range []string{"/v1/tokens", "/v1/tokens/indexer"} {
		r := e.do("GET", path, headTok, nil)
		if r.Code != http.StatusOK || strings.Contains(string(r.Body), created.Secret) || strings.Contains(string(r.Body), tk.Hash) ||
			!strings.Contains(string(r.Body), `"indexer"`) {
			t.Fatalf("GET %s: %d %s", path, r.Code, r.Body)
		}
	}
	// The secret works, and says who it is.
	r = e.do("GET", "/v1/whoami", created.Secret, nil)
	var me api.WhoAmI
	if err := json.Unmarshal(r.Body, &me); err != nil || r.Code != http.StatusOK || me.Token != "indexer" || me.Role != fsm.RoleLeftClaw ||
		me.WorkerID != "idx-1" || len(me.Streams) != 2 {
		t.Fatalf("whoami: %d %s", r.Code, r.Body)
	}
	// A claw may not create, list or revoke tokens.
	for _, c := range []struct{ method, path string }{{"POST", "/v1/tokens"}, {"GET", "/v1/tokens"}, {"DELETE", "/v1/tokens/indexer"}} {
		e.do(c.method, c.path, created.Secret, api.TokenCreateRequest{Name: "x", Role: "head"}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	}
}

// A create that is not valid is a 400 (409 for a name in use) in the
// API's terms, and changes nothing.
func TestTokenCreateBadInput(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	e.newToken(api.TokenCreateRequest{Name: "taken", Role: fsm.HeadRole})
	for _, c := range []struct {
		body   any
		status int
		code   string
		says   string
	}{
		{map[string]any{"role": "head"}, 400, api.CodeInvalidRequest, "name"},
		{map[string]any{"name": "a b", "role": "head"}, 400, api.CodeInvalidRequest, "name"},
		{map[string]any{"name": "t1"}, 400, api.CodeInvalidRequest, "role"},
		{map[string]any{"name": "t1", "role": "root"}, 400, api.CodeInvalidRequest, "role"},
		{map[string]any{"name": "t1", "role": "head", "workerId": "w1"}, 400, api.CodeInvalidRequest, "workerId"},
		{map[string]any{"name": "t1", "role": "left_claw", "workerId": "head"}, 400, api.CodeInvalidRequest, "workerId"},
		{map[string]any{"name": "t1", "role": "left_claw", "streams": []string{"ok", "not ok"}}, 400, api.CodeInvalidRequest, "streams"},
		{map[string]any{"name": "t1", "role": "head", "note": strings.Repeat("n", fsm.MaxTokenNote+1)}, 400, api.CodeInvalidRequest, "note"},
		{map[string]any{"name": "t1", "role": "head", "expiresAt": "2001-01-01T00:00:00Z"}, 400, api.CodeInvalidRequest, "expiresAt"},
		{map[string]any{"name": "t1", "role": "head", "expiresInSeconds": -5}, 400, api.CodeInvalidRequest, "expiresInSeconds"},
		{map[string]any{"name": "t1", "role": "head", "expiresInSeconds": 5, "expiresAt": "2999-01-01T00:00:00Z"}, 400, api.CodeInvalidRequest, "expiresAt"},
		{map[string]any{"name": "t1", "role": "head", "secret": "mine"}, 400, api.CodeInvalidRequest, "secret"},
		{map[string]any{"name": "taken", "role": "head"}, 409, api.CodeAlreadyExists, "taken"},
	} {
		before := e.fc.fsm.AppliedIndex()
		r := e.do("POST", "/v1/tokens", headTok, c.body)
		ae := r.apiErr(t, c.status, c.code)
		if msg := ae["message"].(string); !strings.Contains(msg, c.says) || strings.Contains(msg, "fsm.") || strings.Contains(msg, "Command") {
			t.Errorf("%v: message %q", c.body, msg)
		}
		if c.status == 400 && e.fc.fsm.AppliedIndex() != before {
			t.Errorf("%v: refused but an entry was applied", c.body)
		}
	}
	e.do("DELETE", "/v1/tokens/nobody", headTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("GET", "/v1/tokens/nobody", headTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
}

// Below LevelPolicies a token create is refused (503), nothing proposed.
func TestTokenCreateBelowLevel(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelTagged))
	e.fc.setSupported(fsm.LevelTagged)
	e.do("POST", "/v1/tokens", headTok, api.TokenCreateRequest{Name: "t", Role: "head"}).apiErr(t, http.StatusServiceUnavailable, api.CodeUpgradeInProgress)
}

// A revoked token is refused (401) as soon as the revoke applied, and a
// long poll it holds ends; an expired one is refused by the node's clock.
func TestTokenRevokedAndExpiredRefused(t *testing.T) {
	var now atomic.Int64
	now.Store(testNow.UnixNano())
	e := newEnv(t, atLevel(fsm.LatestLevel), func(c *envConfig) {
		c.Queue.Now = func() time.Time { return time.Unix(0, now.Load()) }
	})
	secret := e.newToken(api.TokenCreateRequest{Name: "w", Role: fsm.RoleLeftClaw, WorkerID: "w1"})
	short := e.newToken(api.TokenCreateRequest{Name: "brief", Role: fsm.RoleLeftClaw, ExpiresInSeconds: 60})
	if r := e.do("GET", "/jobs", short, nil); r.Code != http.StatusOK {
		t.Fatalf("fresh token: %d %s", r.Code, r.Body)
	}

	// A long poll held by the token.
	done := make(chan resp, 1)
	go func() {
		done <- e.do("POST", "/internal/worker/claim", secret, api.WorkerClaimRequest{Streams: []string{"empty"}, MaxWaitMS: 25_000})
	}()
	waitFor(t, func() bool { return e.srv.queue.Stats().ClaimWaiters > 0 })
	e.do("DELETE", "/v1/tokens/w", headTok, nil)
	select {
	case r := <-done:
		r.apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's long poll did not end")
	}
	r := e.do("GET", "/jobs", secret, nil)
	r.apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)

	now.Add(int64(61 * time.Second))
	e.do("GET", "/jobs", short, nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	var list api.TokenList
	_ = json.Unmarshal(e.do("GET", "/v1/tokens", headTok, nil).Body, &list)
	if len(list.Tokens) != 1 || !list.Tokens[0].Expired || list.Max != fsm.MaxTokens {
		t.Fatalf("tokens after the revoke and the expiry: %+v", list)
	}
}

// waitFor polls cond until it holds, for at most 20s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A scoped token sees, claims from and creates in its streams alone; a
// bound token is its worker: a claim naming another worker id is refused,
// one naming none is its worker's. Every event it causes names it.
func TestTokenScopesAndBoundWorker(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	mine := e.create(map[string]interface{}{"stream": "a"})["id"].(string)
	other := e.create(map[string]interface{}{"stream": "b", "payload": map[string]string{"s": "other-secret"}})["id"].(string)
	w := e.newToken(api.TokenCreateRequest{Name: "agent-a", Role: fsm.RoleLeftClaw, Streams: []string{"a"}, WorkerID: "wa"})
	producer := e.newToken(api.TokenCreateRequest{Name: "producer-a", Role: fsm.HeadRole, Streams: []string{"a"}})

	for _, path := range []string{"/jobs/" + other, "/jobs/" + other + "/events", "/v1/tasks/" + other} {
		e.do("GET", path, w, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	}
	for _, tok := range []string{w, producer} {
		for _, path := range []string{"/jobs", "/streams", "/v1/state", "/api/status", "/v1/agents"} {
			r := e.do("GET", path, tok, nil)
			if r.Code != http.StatusOK || strings.Contains(string(r.Body), other) || strings.Contains(string(r.Body), `"b"`) {
				t.Errorf("GET %s as a scoped token: %d %s", path, r.Code, trim(r.Body))
			}
		}
	}
	if r := e.do("GET", "/jobs", w, nil); !strings.Contains(string(r.Body), mine) {
		t.Fatalf("the scoped token does not see its own stream's job: %s", r.Body)
	}
	e.do("POST", "/jobs", producer, map[string]any{"stream": "b", "payload": map[string]int{}}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	// A scoped head cannot mint itself an unscoped token, nor call another
	// route about the whole cluster.
	e.do("POST", "/v1/tokens", producer, api.TokenCreateRequest{Name: "escape", Role: fsm.HeadRole}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	e.do("GET", "/metrics", producer, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	e.do("POST", "/api/purge", producer, map[string]any{}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	if r := e.do("POST", "/jobs", producer, map[string]any{"stream": "a", "payload": map[string]int{}}); r.Code != http.StatusCreated {
		t.Fatalf("create in scope: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/internal/worker/claim", w, api.WorkerClaimRequest{Streams: []string{"b"}}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	e.do("GET", "/api/peek?stream=b", w, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	// An empty claim's elsewhere names no stream out of scope.
	e.create(map[string]interface{}{"stream": "c"})
	if r := e.do("POST", "/internal/worker/claim", producer, api.WorkerClaimRequest{WorkerID: "p1", Streams: []string{"a"}}); r.Code != http.StatusForbidden {
		t.Fatalf("head claiming: %d %s", r.Code, r.Body)
	}
	claw := e.newToken(api.TokenCreateRequest{Name: "claw-z", Role: fsm.RoleLeftClaw, Streams: []string{"z"}})
	if r := e.do("POST", "/internal/worker/claim", claw, api.WorkerClaimRequest{WorkerID: "z1"}); r.Code != http.StatusOK ||
		strings.Contains(string(r.Body), `"b"`) || strings.Contains(string(r.Body), `"c"`) || strings.Contains(string(r.Body), `"a"`) {
		t.Fatalf("an empty scoped claim: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/jobs/"+other+"/claim", w, map[string]any{}).apiErr(t, http.StatusNotFound, api.CodeNotFound)

	// Impersonation: a claim naming another worker id is refused.
	e.do("POST", "/internal/worker/claim", w, api.WorkerClaimRequest{WorkerID: "wb", Streams: []string{"a"}}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	// Nor may it register, or heartbeat, another worker.
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gw", Address: "http://10.0.0.9:7000", Capacity: 4})
	e.do("POST", "/v1/workers", w, api.WorkerRegisterRequest{ID: "wb", Gateway: "gw", Capacity: 1}).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	if r := e.do("POST", "/v1/workers", w, api.WorkerRegisterRequest{ID: "wa", Gateway: "gw", Capacity: 1}); r.Code >= 300 {
		t.Fatalf("registering its own worker: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/v1/workers", headTok, api.WorkerRegisterRequest{ID: "wb", Gateway: "gw", Capacity: 1})
	e.do("POST", "/v1/workers/wb/heartbeat", w, nil).apiErr(t, http.StatusForbidden, api.CodeForbidden)
	// Naming none, it claims as its worker (from its scopes).
	r := e.do("POST", "/internal/worker/claim", w, api.WorkerClaimRequest{})
	var c api.WorkerClaim
	if err := json.Unmarshal(r.Body, &c); err != nil || !c.Claimed || c.JobID != mine {
		t.Fatalf("bound claim: %d %s", r.Code, r.Body)
	}
	if j := e.job(mine); j.Lease == nil || j.Lease.WorkerID != "wa" {
		t.Fatalf("lease %+v", j.Lease)
	}
	if r := e.do("POST", "/internal/worker/complete", w, api.WorkerCompleteRequest{JobID: mine, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken,
		Result: json.RawMessage(`{"ok":true}`)}); r.Code != http.StatusOK {
		t.Fatalf("complete: %d %s", r.Code, r.Body)
	}
	var evs api.JobEventList
	_ = json.Unmarshal(e.do("GET", "/jobs/"+mine+"/events", headTok, nil).Body, &evs)
	var tokens []string
	for _, ev := range evs.Events {
		tokens = append(tokens, ev.Type+":"+ev.Token)
	}
	if got := strings.Join(tokens, " "); got != "created: claimed:agent-a completed:agent-a" {
		t.Fatalf("the events' tokens: %s", got)
	}
}

// The read-only operator, on every route of the table: every route that
// changes something is refused (403) and changes nothing; every route
// head may read answers it as head.
func TestReadOnlyTokenOnEveryRoute(t *testing.T) {
	probe := newScene(t, fsm.LatestLevel)
	routes := make([]string, 0, len(probe.e.srv.allowed))
	for r := range probe.e.srv.allowed {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	checked := 0
	for _, route := range routes {
		who := probe.e.srv.allowed[route]
		method, _, _ := strings.Cut(route, " ")
		if who == allowPublic {
			continue
		}
		ui := strings.Contains(route, " /ui/")
		sc := newScene(t, fsm.LatestLevel)
		op := sc.e.newToken(api.TokenCreateRequest{Name: "ops", Role: fsm.OperatorRole})
		var ck *http.Cookie
		csrf := ""
		if ui {
			ck = uiLogin(t, sc.e, op)
			csrf = csrfOf(t, sc.e, ck)
		}
		before, idx := stateOf(sc.e, sc.held), sc.e.fc.fsm.AppliedIndex()
		req := requestFor(route, pose{worker: "lw", job: sc.held, token: sc.heldToken, atmpt: sc.heldAttempt})
		r := sc.send(req, op, ck, csrf)
		checked++
		write := method != http.MethodGet && route != "POST /ui/logout"
		switch {
		case write || who&allowHead == 0:
			if r.Code != http.StatusForbidden || (!ui && apiCode(r) != api.CodeForbidden) {
				t.Errorf("%s as the read-only operator: %d %s, want 403", route, r.Code, trim(r.Body))
			}
			if stateOf(sc.e, sc.held) != before || sc.e.fc.fsm.AppliedIndex() != idx {
				t.Errorf("%s as the read-only operator changed the state", route)
			}
		case r.Code == http.StatusForbidden || r.Code == http.StatusUnauthorized:
			t.Errorf("%s as the read-only operator: %d %s, want head's answer", route, r.Code, trim(r.Body))
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d routes", checked)
	}
}

// A stream-scoped claw token, and a stream-scoped head token, on every
// route each may call: aimed at a job of another stream (one its role
// could read), no answer carries the job, and nothing of it changes.
func TestScopedTokenOnEveryRoute(t *testing.T) {
	for _, role := range []string{fsm.RoleLeftClaw, fsm.HeadRole} {
		t.Run(role, func(t *testing.T) { testScopedOnEveryRoute(t, role) })
	}
}

func testScopedOnEveryRoute(t *testing.T, role string) {
	probe := newScene(t, fsm.LatestLevel)
	routes := make([]string, 0, len(probe.e.srv.allowed))
	for r := range probe.e.srv.allowed {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	const secret = "secret-of-another-stream"
	checked := 0
	for _, route := range routes {
		who := probe.e.srv.allowed[route]
		if !who.permits(queue.RoleCaller(role), "POST") {
			continue
		}
		ui := strings.Contains(route, " /ui/")
		sc := newScene(t, fsm.LatestLevel)
		tok := sc.e.newToken(api.TokenCreateRequest{Name: "scoped", Role: role, Streams: []string{"mine"}})
		var ck *http.Cookie
		csrf := ""
		if ui {
			ck = uiLogin(t, sc.e, tok)
			csrf = csrfOf(t, sc.e, ck)
		}
		// An untargeted job of stream s2 (any claw could read it), and one
		// held under a lease of stream s.
		id := sc.e.create(map[string]interface{}{"stream": "s2", "payload": map[string]string{"s": secret}})["id"].(string)
		for _, p := range []pose{{name: "queued", worker: "lw", job: id}, {name: "held", worker: "rw", job: sc.shared, token: sc.sharedToken, atmpt: sc.sharedAttempt},
			{name: "naming the stream", worker: "lw", job: id}} {
			before, theirs := stateOf(sc.e, id), sc.theirs()
			req := requestFor(route, p)
			if p.name == "naming the stream" {
				req.path += "&stream=s2"
				if req.fields != nil {
					req.fields["stream"], req.fields["streams"] = "s2", []string{"s2"}
				}
			}
			r := sc.send(req, tok, ck, csrf)
			checked++
			for _, s := range []string{secret, sc.sharedToken, heldSecret, forRightSecret} {
				if strings.Contains(string(r.Body), s) {
					t.Errorf("%s as a scoped token (%s): %d answer carries %q: %s", route, p.name, r.Code, s, trim(r.Body))
				}
			}
			// (Naming the stream itself, the caller may be answered about it.)
			if p.job == id && p.name != "naming the stream" && strings.Contains(string(r.Body), `"s2"`) {
				t.Errorf("%s as a scoped token: %d answer names stream s2: %s", route, r.Code, trim(r.Body))
			}
			if stateOf(sc.e, id) != before || sc.theirs() != theirs {
				t.Errorf("%s as a scoped token (%s): %d %s: another stream's job changed", route, p.name, r.Code, trim(r.Body))
			}
			if r.Code >= 500 {
				t.Errorf("%s as a scoped token: %d %s", route, r.Code, trim(r.Body))
			}
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d requests", checked)
	}
}

// The tokens page: head creates a token through its form and sees the
// secret once; the token logs in to the UI as itself (a scoped operator
// sees its streams and no form); revoked, its session ends.
func TestUITokensPage(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	e.create(map[string]interface{}{"stream": "mine"})
	e.create(map[string]interface{}{"stream": "theirs"})
	ck := uiLogin(t, e, headTok)
	csrf := csrfOf(t, e, ck)
	r := e.page("POST", "/ui/tokens", ck, "csrf="+csrf+"&name=watcher&role=operator&streams=mine&note=on+call&expires_hours=24")
	m := regexp.MustCompile(`<code class="secret">([^<]+)</code>`).FindSubmatch(r.Body)
	if r.Code != http.StatusOK || m == nil {
		t.Fatalf("create through the form: %d %s", r.Code, trim(r.Body))
	}
	secret := string(m[1])
	page := e.page("GET", "/ui/tokens", ck, "")
	if page.Code != http.StatusOK || !strings.Contains(string(page.Body), "watcher") || strings.Contains(string(page.Body), secret) {
		t.Fatalf("tokens page: %d %s", page.Code, trim(page.Body))
	}
	// The operator's own session: its stream only, no form that writes.
	op := uiLogin(t, e, secret)
	dash := e.page("GET", "/ui/", op, "")
	if dash.Code != http.StatusOK || !strings.Contains(string(dash.Body), "mine") || strings.Contains(string(dash.Body), "theirs") ||
		strings.Contains(string(dash.Body), `action="/ui/streams/mine/pause"`) {
		t.Fatalf("the operator's dashboard: %d %s", dash.Code, trim(dash.Body))
	}
	if r := e.page("POST", "/ui/tokens/watcher/revoke", op, "csrf="+csrfOf(t, e, op)); r.Code != http.StatusForbidden {
		t.Fatalf("the operator revoking: %d %s", r.Code, trim(r.Body))
	}
	if r := e.page("POST", "/ui/tokens/watcher/revoke", ck, "csrf="+csrf); r.Code != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", r.Code, trim(r.Body))
	}
	if r := e.page("GET", "/ui/", op, ""); r.Code != http.StatusSeeOther {
		t.Fatalf("the revoked token's session: %d %s", r.Code, trim(r.Body))
	}
}

// Over MCP: head creates a token with token_create; a session opened with
// it follows its rules (the operator's writes are refused), lists no
// secret, and ends once the token is revoked (token_revoke).
func TestMCPNamedTokens(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	head := mcpSession(t, ts.URL, headTok)
	var created api.TokenCreated
	mcpCall(t, head, "token_create", map[string]any{"name": "watcher", "role": "operator", "note": "on call"}, &created)
	if created.Secret == "" || created.Role != fsm.OperatorRole {
		t.Fatalf("token_create = %+v", created)
	}
	var list struct{ Tokens []api.Token }
	mcpCall(t, head, "token_list", map[string]any{}, &list)
	if len(list.Tokens) != 1 || list.Tokens[0].Name != "watcher" {
		t.Fatalf("token_list = %+v", list)
	}
	op := mcpSession(t, ts.URL, created.Secret)
	var streams struct{ Streams []any }
	mcpCall(t, op, "list_streams", map[string]any{}, &streams)
	res, err := op.CallTool(context.Background(), &mcp.CallToolParams{Name: "enqueue", Arguments: map[string]any{"stream": "s", "payload": map[string]any{}}})
	if err != nil || !res.IsError {
		t.Fatalf("the operator's enqueue: %v %+v", err, res)
	}
	var revoked api.Token
	mcpCall(t, head, "token_revoke", map[string]any{"name": "watcher"}, &revoked)
	if _, err := op.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_streams", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a revoked token's MCP session still answers")
	}
}

// A token scoped to streams reads the event stream of its streams' jobs
// alone: neither another stream's jobs nor the cluster's gateways and
// workers, which head's unscoped stream shows.
func TestScopedTokenEventStream(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	if on, err := e.srv.queue.StartFeed(context.Background()); !on || err != nil {
		t.Fatal(on, err)
	}
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	scoped := e.newToken(api.TokenCreateRequest{Name: "scoped", Role: fsm.RoleLeftClaw, Streams: []string{"mine"}})
	e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "g1", Address: "http://g1", Capacity: 1})
	other := e.create(map[string]interface{}{"stream": "other"})["id"].(string)
	mine := e.create(map[string]interface{}{"stream": "mine"})["id"].(string)
	_, all := readSSE(t, srv.URL+"/v1/events?after=0", headTok, 3)
	if all[0].name != "gateway" || !strings.Contains(all[1].data, other) || !strings.Contains(all[2].data, mine) {
		t.Fatalf("head's stream: %v", all)
	}
	_, evs := readSSE(t, srv.URL+"/v1/events?after=0", scoped, 1)
	if evs[0].name != "job" || !strings.Contains(evs[0].data, mine) {
		t.Fatalf("the scoped token's first event: %v, want the creation of %s", evs[0], mine)
	}
}
