package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

func TestNewRequiresToken(t *testing.T) {
	fc := newFakeCluster(t)
	if _, err := New(Config{}, fc, queue.New(queue.Config{}, fc, fc.fsm)); err == nil {
		t.Fatal("New with no tokens succeeded")
	}
	tk := &Tokens{}
	tk.AddCSV(RoleHead, " , ,")
	if _, err := New(Config{Tokens: tk}, fc, queue.New(queue.Config{}, fc, fc.fsm)); err == nil {
		t.Fatal("New with only blank tokens succeeded")
	}
}

func TestTokensConstantTimeRotation(t *testing.T) {
	tk := &Tokens{}
	tk.AddCSV(RoleHead, "alpha-1, beta-2 ,,gamma-3")
	tk.Add(RoleHead, "single")
	tk.AddCSV(RoleLeftClaw, "claw-old,claw-new")
	if tk.Len() != 6 {
		t.Fatalf("Len = %d, want 6", tk.Len())
	}
	for _, c := range []struct{ token, role string }{
		{"alpha-1", RoleHead}, {"beta-2", RoleHead}, {"gamma-3", RoleHead}, {"single", RoleHead},
		{"claw-old", RoleLeftClaw}, {"claw-new", RoleLeftClaw},
		// near misses
		{"", ""}, {"alpha-", ""}, {"alpha-12", ""}, {"Alpha-1", ""}, {" beta-2", ""}, {"beta-2 ", ""},
		{"alpha-1,beta-2", ""}, {"claw-ol", ""}, {"claw-newx", ""}, {"singlE", ""},
	} {
		if got := tk.Role(c.token); got != c.role {
			t.Errorf("Role(%q) = %q, want %q", c.token, got, c.role)
		}
	}
	if !tk.Has(RoleLeftClaw) || tk.Has(RoleRightClaw) {
		t.Error("Has is wrong")
	}

	// Through HTTP every rotation token works and near misses are 401.
	e := newEnv(t, func(c *envConfig) {
		c.Tokens = &Tokens{}
		c.Tokens.AddCSV(RoleHead, "old-head,new-head")
	})
	for _, tok := range []string{"old-head", "new-head"} {
		if r := e.do("GET", "/jobs", tok, nil); r.Code != http.StatusOK {
			t.Errorf("token %s: %d %s", tok, r.Code, r.Body)
		}
	}
	for _, tok := range []string{"old-hea", "new-headd", "old-head,new-head", "OLD-HEAD"} {
		e.do("GET", "/jobs", tok, nil).apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
	}
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name, auth string
	}{
		{"no header", ""},
		{"basic scheme", "Basic aGVhZDpzZWNyZXQ="},
		{"bearer without token", "Bearer "},
		{"bearer only", "Bearer"},
		{"token without scheme", headTok},
		{"unknown token", "Bearer nope"},
		{"near miss", "Bearer " + headTok + "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, rt := range []struct{ method, path string }{
				{"GET", "/jobs"}, {"POST", "/jobs"}, {"GET", "/blobs/abc"}, {"GET", "/cluster/status"},
				{"POST", "/internal/worker/claim"},
			} {
				var hdr []string
				if c.auth != "" {
					hdr = []string{"Authorization", c.auth}
				}
				r := e.do(rt.method, rt.path, "", `{"payload":1}`, hdr...)
				r.apiErr(t, http.StatusUnauthorized, api.CodeUnauthorized)
				if r.Header.Get(api.HeaderNode) != "n1" || r.Header.Get(api.HeaderIndex) == "" {
					t.Errorf("%s %s: no X-Spine headers on 401: %v", rt.method, rt.path, r.Header)
				}
			}
		})
	}
	// The scheme is case-insensitive.
	if r := e.do("GET", "/jobs", "", nil, "Authorization", "bearer "+headTok); r.Code != http.StatusOK {
		t.Errorf("lower-case bearer: %d %s", r.Code, r.Body)
	}
	// Public routes need no token.
	if r := e.do("GET", "/health", "", nil); r.Code != http.StatusOK {
		t.Errorf("health: %d", r.Code)
	}
}

func TestForbiddenPerRole(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		method, path, token string
	}{
		{"POST", "/jobs", leftTok},
		{"POST", "/jobs", rightTok},
		{"POST", "/jobs/x/claim", headTok},
		{"POST", "/internal/worker/claim", headTok},
		{"POST", "/internal/worker/heartbeat", headTok},
		{"POST", "/internal/worker/complete", headTok},
		{"POST", "/internal/worker/fail", headTok},
		{"GET", "/dlq", leftTok},
		{"POST", "/dlq/x/redrive", rightTok},
		{"GET", "/cluster/status", leftTok},
		{"POST", "/cluster/join", leftTok},
		{"POST", "/cluster/remove", rightTok},
		{"POST", "/cluster/transfer-leader", leftTok},
	} {
		t.Run(c.method+" "+c.path+" "+c.token, func(t *testing.T) {
			e.do(c.method, c.path, c.token, "{}").apiErr(t, http.StatusForbidden, api.CodeForbidden)
		})
	}
}

func TestRoutingErrors(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		method, path string
		status       int
		code         string
		allow        string // the 405's Allow header
	}{
		{"GET", "/nope", http.StatusNotFound, api.CodeNotFound, ""},
		{"GET", "/jobs/a/b/c", http.StatusNotFound, api.CodeNotFound, ""},
		{"POST", "/", http.StatusNotFound, api.CodeNotFound, ""},
		{"GET", "/jobs/", http.StatusNotFound, api.CodeNotFound, ""},
		{"DELETE", "/jobs", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "POST, GET"},
		{"PUT", "/jobs/x", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "GET"},
		{"GET", "/jobs/x/claim", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "POST"},
		{"POST", "/health", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "GET"},
		{"GET", "/internal/worker/claim", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "POST"},
		{"DELETE", "/blobs/x", http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "GET"},
	} {
		r := e.do(c.method, c.path, headTok, nil)
		r.apiErr(t, c.status, c.code)
		if got := r.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if r.Header.Get(api.HeaderNode) != "n1" || r.Header.Get(api.HeaderLeader) != "n1" || r.Header.Get(api.HeaderIndex) != "0" {
			t.Errorf("%s %s: missing X-Spine headers: %v", c.method, c.path, r.Header)
		}
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	big := `{"payload":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, c := range []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"malformed", `{"payload":`, nil, 400, api.CodeInvalidJSON},
		{"trailing garbage", `{"payload":1} x`, nil, 400, api.CodeInvalidJSON},
		{"not json", `payload=1`, nil, 400, api.CodeInvalidJSON},
		{"array body", `[1,2]`, nil, 400, api.CodeInvalidRequest},
		{"empty body", ``, nil, 400, api.CodeInvalidRequest},
		{"empty object", `{}`, nil, 400, api.CodeInvalidRequest},
		{"payload null", `{"payload":null}`, nil, 400, api.CodeInvalidRequest},
		{"maxAttempts string", `{"payload":1,"maxAttempts":"x"}`, nil, 400, api.CodeInvalidRequest},
		{"maxAttempts float", `{"payload":1,"maxAttempts":1.5}`, nil, 400, api.CodeInvalidRequest},
		{"maxAttempts 0", `{"payload":1,"maxAttempts":0}`, nil, 400, api.CodeInvalidRequest},
		{"maxAttempts 1001", `{"payload":1,"maxAttempts":1001}`, nil, 400, api.CodeInvalidRequest},
		{"maxAttempts negative", `{"payload":1,"maxAttempts":-1}`, nil, 400, api.CodeInvalidRequest},
		{"stream empty", `{"payload":1,"stream":""}`, nil, 400, api.CodeInvalidRequest},
		{"stream space", `{"payload":1,"stream":"a b"}`, nil, 400, api.CodeInvalidRequest},
		{"stream leading dash", `{"payload":1,"stream":"-a"}`, nil, 400, api.CodeInvalidRequest},
		{"stream too long", `{"payload":1,"stream":"` + strings.Repeat("s", 129) + `"}`, nil, 400, api.CodeInvalidRequest},
		{"stream number", `{"payload":1,"stream":7}`, nil, 400, api.CodeInvalidRequest},
		{"target slash", `{"payload":1,"target":"a/b"}`, nil, 400, api.CodeInvalidRequest},
		{"target unicode", `{"payload":1,"target":"clé"}`, nil, 400, api.CodeInvalidRequest},
		{"leaseSeconds 0", `{"payload":1,"leaseSeconds":0}`, nil, 400, api.CodeInvalidRequest},
		{"leaseSeconds huge", `{"payload":1,"leaseSeconds":604801}`, nil, 400, api.CodeInvalidRequest},
		{"taskClass long", `{"payload":1,"taskClass":"` + strings.Repeat("t", 129) + `"}`, nil, 400, api.CodeInvalidRequest},
		{"key mismatch", `{"payload":1,"idempotencyKey":"a"}`, []string{"Idempotency-Key", "b"}, 400, api.CodeInvalidRequest},
		{"key too long", `{"payload":1}`, []string{"Idempotency-Key", strings.Repeat("k", 257)}, 400, api.CodeInvalidRequest},
		{"body over 1 MiB", big, nil, 413, api.CodeTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("POST", "/jobs", headTok, c.body, c.hdr...).apiErr(t, c.status, c.code)
		})
	}
	if n := e.fc.AppliedIndex(); n != 0 {
		t.Fatalf("refused creates applied %d commands", n)
	}
	// The limits themselves are accepted.
	for _, body := range []string{
		`{"payload":1,"maxAttempts":1}`, `{"payload":1,"maxAttempts":1000}`, `{"payload":0}`, `{"payload":false}`,
		`{"payload":"","target":""}`, `{"payload":[],"stream":"A.b:c-d_e","target":"w-1"}`,
		`{"payload":{},"leaseSeconds":604800,"stream":"` + strings.Repeat("s", 128) + `"}`,
	} {
		if r := e.do("POST", "/jobs", headTok, body); r.Code != http.StatusCreated {
			t.Errorf("%s: %d %s", body, r.Code, r.Body)
		}
	}
}

func TestCreateAndView(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/jobs", headTok, `{"payload":{"any":"json"},"maxAttempts":3,"target":"left_claw","stream":"high","leaseSeconds":60,"taskClass":"LLM_HEAVY"}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	j := r.json(t)
	want := map[string]interface{}{
		"id": "id-1", "stream": "high", "target": "left_claw", "status": "queued", "attempts": 0.0, "maxAttempts": 3.0,
		"leaseSeconds": 60.0, "taskClass": "LLM_HEAVY", "createIndex": 1.0, "modifyIndex": 1.0,
		"createdAt": "2026-01-02T03:04:05.000000006Z", "updatedAt": "2026-01-02T03:04:05.000000006Z",
	}
	for k, v := range want {
		if j[k] != v {
			t.Errorf("%s = %v, want %v", k, j[k], v)
		}
	}
	if p, _ := j["payload"].(map[string]interface{}); p["any"] != "json" {
		t.Errorf("payload = %v", j["payload"])
	}
	if c, ok := j["comments"].([]interface{}); !ok || len(c) != 0 {
		t.Errorf("comments = %v, want []", j["comments"])
	}
	for _, k := range []string{"claimedBy", "workerId", "attemptId", "leaseExpiresAt", "leaseToken", "result", "error", "startedAt", "finishedAt", "idempotencyKey"} {
		if _, ok := j[k]; ok {
			t.Errorf("%s present on a queued job", k)
		}
	}
	if r.Header.Get(api.HeaderIndex) != "1" || r.Header.Get(api.HeaderNode) != "n1" || r.Header.Get(api.HeaderLeader) != "n1" {
		t.Errorf("headers: %v", r.Header)
	}
	// Defaults.
	d := e.create(map[string]interface{}{})
	if d["stream"] != "default" || d["maxAttempts"] != 5.0 || d["target"] != nil {
		t.Errorf("defaults: %v", d)
	}
}

func TestCreateIdempotent(t *testing.T) {
	e := newEnv(t)
	first := e.do("POST", "/jobs", headTok, `{"payload":1}`, "Idempotency-Key", "k1")
	if first.Code != http.StatusCreated {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	id := first.json(t)["id"]
	for _, c := range []struct {
		name string
		body string
		hdr  []string
	}{
		{"header again", `{"payload":2}`, []string{"Idempotency-Key", "k1"}},
		{"field", `{"payload":3,"idempotencyKey":"k1"}`, nil},
		{"both equal", `{"payload":4,"idempotencyKey":"k1"}`, []string{"Idempotency-Key", "k1"}},
	} {
		r := e.do("POST", "/jobs", headTok, c.body, c.hdr...)
		if r.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, r.Code, r.Body)
		}
		j := r.json(t)
		if j["id"] != id || j["payload"] != 1.0 || j["idempotencyKey"] != "k1" {
			t.Errorf("%s: got %v", c.name, j)
		}
		if r.Header.Get(api.HeaderIndex) != "1" {
			t.Errorf("%s: index %q", c.name, r.Header.Get(api.HeaderIndex))
		}
	}
	if n := e.fc.AppliedIndex(); n != 1 {
		t.Errorf("applied %d commands, want 1", n)
	}
	// The state machine's own check answers 200 when the read-side check
	// missed: another create with the same key commits just before this one.
	e2 := newEnv(t)
	once := false
	e2.fc.beforeApply = func(ty fsm.CommandType) {
		if ty != fsm.CmdCreate || once {
			return
		}
		once = true
		e2.fc.index++
		e2.fc.fsm.ApplyBatch([]*raft.Log{{Index: e2.fc.index, Type: raft.LogCommand,
			Data: fsm.MustEncode(fsm.CmdCreate, &fsm.CreateCommand{ID: "racer", Payload: []byte("0"), IdempotencyKey: "k"})}})
	}
	r := e2.do("POST", "/jobs", headTok, `{"payload":1}`, "Idempotency-Key", "k")
	if j := r.json(t); r.Code != http.StatusOK || j["id"] != "racer" {
		t.Fatalf("raced create: %d %s", r.Code, r.Body)
	}
	// Field differs from header: refused, nothing applied.
	e.do("POST", "/jobs", headTok, `{"payload":1,"idempotencyKey":"k2"}`, "Idempotency-Key", "k1").apiErr(t, 400, api.CodeInvalidRequest)
}

func TestListQueryErrors(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/jobs", "/dlq"} {
		for _, q := range []string{
			"status=bogus", "limit=0", "limit=1001", "limit=-1", "limit=x", "limit=1.5", "cursor=x", "cursor=-1",
		} {
			e.do("GET", path+"?"+q, headTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		}
	}
	for _, q := range []string{"status=queued", "status=running", "status=done"} {
		e.do("GET", "/dlq?"+q, headTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
}

func TestListPagingAndVisibility(t *testing.T) {
	e := newEnv(t)
	e.create(map[string]interface{}{"payload": 1})                                    // id-1 untargeted
	e.create(map[string]interface{}{"payload": 2, "target": RoleLeftClaw})            // id-2
	e.create(map[string]interface{}{"payload": 3, "target": RoleRightClaw})           // id-3
	e.create(map[string]interface{}{"payload": 4, "stream": "high"})                  // id-4
	e.create(map[string]interface{}{"payload": 5, "target": "w-9", "stream": "high"}) // id-5
	ids := func(r resp) []string {
		t.Helper()
		if r.Code != http.StatusOK {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
		var out []string
		for _, j := range r.json(t)["jobs"].([]interface{}) {
			out = append(out, j.(map[string]interface{})["id"].(string))
		}
		return out
	}
	for _, c := range []struct {
		token, query string
		want         string
	}{
		{headTok, "", "id-1 id-2 id-3 id-4 id-5"},
		{leftTok, "", "id-1 id-2 id-4"},
		{rightTok, "", "id-1 id-3 id-4"},
		{headTok, "stream=high", "id-4 id-5"},
		{headTok, "target=w-9", "id-5"},
		{leftTok, "target=right_claw", ""},
		{headTok, "status=QUEUED&stream=default", "id-1 id-2 id-3"},
		{headTok, "status=done", ""},
	} {
		if got := strings.Join(ids(e.do("GET", "/jobs?"+c.query, c.token, nil)), " "); got != c.want {
			t.Errorf("%s ?%s = %q, want %q", c.token, c.query, got, c.want)
		}
	}
	// Paging.
	r := e.do("GET", "/jobs?limit=2", headTok, nil)
	if got := strings.Join(ids(r), " "); got != "id-1 id-2" {
		t.Fatalf("page 1 = %q", got)
	}
	next, _ := r.json(t)["nextCursor"].(string)
	if next == "" {
		t.Fatalf("no nextCursor: %s", r.Body)
	}
	r = e.do("GET", "/jobs?limit=3&cursor="+next, headTok, nil)
	if got := strings.Join(ids(r), " "); got != "id-3 id-4 id-5" {
		t.Fatalf("page 2 = %q", got)
	}
	if !bytes.Contains(e.do("GET", "/jobs?limit=100&cursor="+next, headTok, nil).Body, []byte(`"nextCursor":null`)) {
		t.Error("last page has a nextCursor")
	}
	if r.Header.Get(api.HeaderIndex) != "5" {
		t.Errorf("read index %q, want 5", r.Header.Get(api.HeaderIndex))
	}

	// GET /jobs/{id}: invisible jobs are not found for claws.
	e.do("GET", "/jobs/id-3", leftTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("GET", "/jobs/id-3/events", leftTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("GET", "/jobs/id-3/attempts", leftTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("POST", "/jobs/id-3/comment", leftTok, `{"text":"hi"}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("GET", "/jobs/nope", headTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	if r := e.do("GET", "/jobs/id-3", rightTok, nil); r.Code != http.StatusOK {
		t.Errorf("right_claw get id-3: %d", r.Code)
	}
}

// claim claims id with the v0 API and returns the view with its leaseToken.
func (e *env) claim(id, token string) map[string]interface{} {
	e.t.Helper()
	r := e.do("POST", "/jobs/"+id+"/claim", token, "{}")
	if r.Code != http.StatusOK {
		e.t.Fatalf("claim %s: %d %s", id, r.Code, r.Body)
	}
	return r.json(e.t)
}

func TestJobLifecycleV0(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{"maxAttempts": 2})["id"].(string)

	// illegal_transition: complete a queued job.
	e.do("POST", "/jobs/"+id+"/complete", headTok, `{}`).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)

	c := e.claim(id, leftTok)
	if c["status"] != "running" || c["claimedBy"] != RoleLeftClaw || c["attempts"] != 1.0 || c["leaseToken"] == nil ||
		c["attemptId"] == nil || c["leaseExpiresAt"] != "2026-01-02T03:09:05.000000006Z" || c["startedAt"] == nil {
		t.Fatalf("claim view: %v", c)
	}
	tok, att := c["leaseToken"].(string), c["attemptId"].(string)
	// leaseToken appears only in the claim answer.
	g := e.do("GET", "/jobs/"+id, leftTok, nil).json(t)
	if _, ok := g["leaseToken"]; ok {
		t.Error("leaseToken in GET")
	}
	// Claiming a running job is illegal.
	e.do("POST", "/jobs/"+id+"/claim", rightTok, `{}`).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)

	// not_owner: the other claw, without a token.
	for _, op := range []string{"heartbeat", "complete", "fail", "release"} {
		e.do("POST", "/jobs/"+id+"/"+op, rightTok, `{}`).apiErr(t, http.StatusForbidden, api.CodeNotOwner)
	}
	// stale_lease: wrong token or attempt id.
	for _, body := range []string{`{"leaseToken":"wrong"}`, `{"leaseToken":"` + tok + `","attemptId":"wrong"}`, `{"attemptId":"wrong"}`} {
		er := e.do("POST", "/jobs/"+id+"/complete", leftTok, body).apiErr(t, http.StatusConflict, api.CodeStaleLease)
		if er["job"] == nil {
			t.Error("stale_lease without error.job")
		}
	}
	// Wrong JSON types in lease fields.
	e.do("POST", "/jobs/"+id+"/heartbeat", leftTok, `{"leaseToken":5}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/jobs/"+id+"/heartbeat", leftTok, `{`).apiErr(t, 400, api.CodeInvalidJSON)

	// Heartbeat by owner, with the token, and by head.
	for _, c := range []struct{ token, body string }{{leftTok, `{}`}, {leftTok, `{"leaseToken":"` + tok + `","attemptId":"` + att + `"}`}, {headTok, ``}} {
		if r := e.do("POST", "/jobs/"+id+"/heartbeat", c.token, c.body); r.Code != http.StatusOK {
			t.Fatalf("heartbeat %s: %d %s", c.body, r.Code, r.Body)
		}
	}
	// Fail with the string form: requeued (attempt 1 of 2).
	r := e.do("POST", "/jobs/"+id+"/fail", leftTok, `{"error":"boom","stdout":"out"}`)
	if r.Code != http.StatusOK {
		t.Fatalf("fail: %d %s", r.Code, r.Body)
	}
	j := r.json(t)
	if j["status"] != "queued" || j["error"].(map[string]interface{})["message"] != "boom" || j["claimedBy"] != nil {
		t.Fatalf("after fail: %v", j)
	}
	// Fail with the object form: attempt 2 of 2 → dead.
	e.claim(id, rightTok)
	r = e.do("POST", "/jobs/"+id+"/fail", headTok, `{"error":{"code":"E1","message":"m","stack":"s","retryable":true}}`)
	j = r.json(t)
	if r.Code != http.StatusOK || j["status"] != "dead" {
		t.Fatalf("second fail: %d %v", r.Code, j)
	}
	if je := j["error"].(map[string]interface{}); je["code"] != "E1" || je["stack"] != "s" || je["retryable"] != true {
		t.Errorf("error = %v", je)
	}
	if m := e.do("POST", "/jobs/"+id+"/fail", headTok, `{"error":5}`).apiErr(t, 400, api.CodeInvalidRequest); !strings.Contains(fmt.Sprint(m["message"]), "error must be a string or {code, message, stack, retryable}") {
		t.Errorf("a fail with a numeric error: %v", m)
	}
	e.do("POST", "/jobs/"+id+"/fail", headTok, `{"error":{"message":7}}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/jobs/"+id+"/fail", headTok, `{"requeue":"no"}`).apiErr(t, 400, api.CodeInvalidRequest)

	// Dead letters and redrive.
	dl := e.do("GET", "/dlq", headTok, nil).json(t)["jobs"].([]interface{})
	if len(dl) != 1 || dl[0].(map[string]interface{})["id"] != id {
		t.Fatalf("dlq = %v", dl)
	}
	e.do("POST", "/dlq/nope/redrive", headTok, nil).apiErr(t, 404, api.CodeNotFound)
	rd := e.do("POST", "/dlq/"+id+"/redrive", headTok, nil)
	if j := rd.json(t); rd.Code != 200 || j["status"] != "queued" || j["attempts"] != 0.0 {
		t.Fatalf("redrive: %d %v", rd.Code, j)
	}
	e.do("POST", "/dlq/"+id+"/redrive", headTok, nil).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)

	// Release does not count; fail with requeue:false → failed; complete.
	e.claim(id, leftTok)
	if j := e.do("POST", "/jobs/"+id+"/release", leftTok, `{"reason":"later"}`).json(t); j["status"] != "queued" || j["attempts"] != 0.0 {
		t.Fatalf("release: %v", j)
	}
	e.do("POST", "/jobs/"+id+"/release", leftTok, `{"reason":"`+strings.Repeat("r", 64<<10+1)+`"}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.claim(id, leftTok)
	if j := e.do("POST", "/jobs/"+id+"/fail", leftTok, `{"requeue":false}`).json(t); j["status"] != "failed" {
		t.Fatalf("fail requeue:false: %v", j)
	}
	if n := len(e.do("GET", "/dlq?status=failed", headTok, nil).json(t)["jobs"].([]interface{})); n != 1 {
		t.Errorf("dlq failed = %d", n)
	}
	e.do("POST", "/dlq/"+id+"/redrive", headTok, nil)
	c = e.claim(id, leftTok)
	r = e.do("POST", "/jobs/"+id+"/complete", leftTok, `{"result":{"ok":1},"stdout":"o","stderr":"e","leaseToken":"`+c["leaseToken"].(string)+`"}`)
	j = r.json(t)
	if r.Code != 200 || j["status"] != "done" || j["stdout"] != "o" || j["finishedAt"] == nil {
		t.Fatalf("complete: %d %v", r.Code, j)
	}
	if r.Header.Get(api.HeaderIndex) != strconv.FormatUint(e.fc.AppliedIndex(), 10) {
		t.Errorf("X-Spine-Index %q, applied %d", r.Header.Get(api.HeaderIndex), e.fc.AppliedIndex())
	}

	// Comments.
	e.do("POST", "/jobs/"+id+"/comment", leftTok, `{"text":"  "}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/jobs/"+id+"/comment", leftTok, `{"text":1}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/jobs/nope/comment", headTok, `{"text":"x"}`).apiErr(t, 404, api.CodeNotFound)
	j = e.do("POST", "/jobs/"+id+"/comment", rightTok, `{"text":"nice"}`).json(t)
	if cs := j["comments"].([]interface{}); len(cs) != 1 || cs[0].(map[string]interface{})["actor"] != RoleRightClaw {
		t.Errorf("comments = %v", j["comments"])
	}

	// Events and attempts.
	ev := e.do("GET", "/jobs/"+id+"/events", leftTok, nil).json(t)
	var types []string
	for _, x := range ev["events"].([]interface{}) {
		types = append(types, x.(map[string]interface{})["type"].(string))
	}
	if ev["jobId"] != id || strings.Join(types, ",") != "created,claimed,heartbeat,heartbeat,heartbeat,failed,claimed,failed,redriven,claimed,released,claimed,failed,redriven,claimed,completed,comment" {
		t.Errorf("events = %v", types)
	}
	at := e.do("GET", "/jobs/"+id+"/attempts", headTok, nil).json(t)
	var outcomes []string
	for _, x := range at["attempts"].([]interface{}) {
		outcomes = append(outcomes, x.(map[string]interface{})["outcome"].(string))
	}
	if at["jobId"] != id || len(outcomes) != 5 || outcomes[4] != "completed" || outcomes[2] != "released" {
		t.Errorf("attempts = %v", outcomes)
	}
}

func TestClaimErrors(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{"target": RoleRightClaw})["id"].(string)
	// A job targeted at another role is not found, as a read of it is.
	e.do("POST", "/jobs/"+id+"/claim", leftTok, `{}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("POST", "/jobs/nope/claim", leftTok, `{}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("POST", "/jobs/"+id+"/claim", leftTok, `{"workerId":1}`).apiErr(t, 400, api.CodeInvalidRequest)
	// A job targeted at a worker id is claimable by that worker.
	w := e.create(map[string]interface{}{"target": "w-7"})["id"].(string)
	e.do("POST", "/jobs/"+w+"/claim", leftTok, `{"workerId":"w-8"}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	e.do("POST", "/jobs/"+w+"/claim", leftTok, `{}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	if r := e.do("POST", "/jobs/"+w+"/claim", leftTok, `{"workerId":"w-7"}`); r.Code != http.StatusOK || r.json(t)["workerId"] != "w-7" {
		t.Fatalf("claim by the targeted worker: %d %s", r.Code, r.Body)
	}
}

func TestMaxAttempts(t *testing.T) {
	// A queued job never has attempts >= maxAttempts through the public
	// transitions (fail and reap send it to dead first), so the refusal is
	// produced by the fake, as the state machine would produce it.
	e := newEnv(t)
	id := e.create(map[string]interface{}{"maxAttempts": 1})["id"].(string)
	dead := *e.job(id)
	dead.State, dead.Attempts = fsm.StateDead, 1
	e.fc.intercept = func(t fsm.CommandType, _ []byte) (interface{}, bool) {
		if t != fsm.CmdClaim {
			return nil, false
		}
		return &fsm.Result{Job: &dead, Err: &fsm.TransitionError{Kind: fsm.ErrMaxAttempts, JobID: id, State: fsm.StateDead,
			Op: "claim", Msg: "attempts 1 of 1 used; job is dead"}}, true
	}
	er := e.do("POST", "/jobs/"+id+"/claim", leftTok, `{}`).apiErr(t, http.StatusConflict, api.CodeMaxAttempts)
	j, _ := er["job"].(map[string]interface{})
	if j["id"] != id || j["status"] != "dead" {
		t.Fatalf("error.job = %v", er["job"])
	}
}

func TestClusterErrors(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: raft says so", cluster.ErrNotLeader), 503, api.CodeNoLeader},
		{cluster.ErrNoLeader, 503, api.CodeNoLeader},
		{cluster.ErrShutdown, 503, api.CodeNoLeader},
		{fmt.Errorf("%w: leadership lost", cluster.ErrOutcomeUnknown), 503, api.CodeOutcomeUnknown},
		{errors.New("disk on fire"), 500, api.CodeInternal},
	} {
		t.Run(c.code+" "+c.err.Error(), func(t *testing.T) {
			e := newEnv(t)
			e.create(map[string]interface{}{})
			var cl api.WorkerClaim
			if err := json.Unmarshal(e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w"}`).Body, &cl); err != nil || !cl.Claimed {
				t.Fatalf("claim: %v %+v", err, cl)
			}
			queued := e.create(map[string]interface{}{})["id"].(string)
			e.fc.setApplyErr(c.err)
			for _, rt := range []struct{ method, path, token, body string }{
				{"POST", "/jobs", headTok, `{"payload":1}`},
				{"POST", "/jobs/" + queued + "/claim", leftTok, `{}`},
				{"POST", "/internal/worker/complete", leftTok, fmt.Sprintf(`{"worker_id":"w","job_id":%q,"attempt_id":%q,"lease_token":%q}`, cl.JobID, cl.AttemptID, cl.LeaseToken)},
				{"POST", "/dlq/x/redrive", headTok, ``},
			} {
				r := e.do(rt.method, rt.path, rt.token, rt.body)
				er := r.apiErr(t, c.status, c.code)
				if c.status == 503 {
					if (r.Header.Get("Retry-After") == "") != (c.code == api.CodeOutcomeUnknown) {
						t.Errorf("%s: Retry-After %q on %s (want it on no_leader only)", rt.path, r.Header.Get("Retry-After"), c.code)
					}
					if er["leader"] != "http://n1.test:36725" {
						t.Errorf("%s: error.leader = %v", rt.path, er["leader"])
					}
				} else if _, ok := er["leader"]; ok || r.Header.Get("Retry-After") != "" {
					t.Errorf("%s: leader/Retry-After on %d", rt.path, c.status)
				}
			}
		})
	}
	// Membership errors.
	e := newEnv(t)
	e.fc.opErr = fmt.Errorf("remove: %w", cluster.ErrUnknownServer)
	e.do("POST", "/cluster/remove", headTok, `{"node_id":"n9"}`).apiErr(t, 404, api.CodeNotFound)
	e.fc.statusErr = cluster.ErrShutdown
	e.do("GET", "/cluster/status", headTok, nil).apiErr(t, 503, api.CodeNoLeader)
}

func TestHealthSkillAndCluster(t *testing.T) {
	e := newEnv(t, func(c *envConfig) {
		c.CPUSeconds = func() float64 { return 1.5 }
		c.TimerSlack = func() time.Duration { return 5 * time.Millisecond }
	})
	h := e.do("GET", "/health", "", nil).json(t)
	if lc, _ := h["last_contact"].(string); !strings.HasPrefix(lc, "20") {
		t.Errorf("last_contact = %v, want an RFC 3339 time", h["last_contact"])
	}
	if h["ok"] != true || h["node_id"] != "n1" || h["role"] != "leader" || h["leader_id"] != "n1" ||
		h["leader_addr"] != "http://n1.test:36725" || h["cpu_seconds"] != 1.5 || h["applied_index"] != 0.0 ||
		h["log_batches"] != 4.0 || h["log_entries"] != 10.0 || h["log_append_seconds"] != 0.25 || h["log_writes_overlapped"] != 3.0 || h["timer_slack_ns"] != 5e6 {
		t.Errorf("health = %v", h)
	}
	s := e.do("GET", "/skill.md", "", nil)
	if s.Code != 200 || !strings.HasPrefix(s.Header.Get("Content-Type"), "text/markdown") || string(s.Body) != "# Spine skill\n" {
		t.Errorf("skill.md: %d %q %q", s.Code, s.Header.Get("Content-Type"), s.Body)
	}
	st := e.do("GET", "/cluster/status", headTok, nil).json(t)
	if st["node_id"] != "n1" || st["leader"].(map[string]interface{})["http_addr"] != "http://n1.test:36725" ||
		st["nodes"].([]interface{})[0].(map[string]interface{})["suffrage"] != "voter" {
		t.Errorf("status = %v", st)
	}
	e.do("POST", "/cluster/join", headTok, `{"node_id":"n2"}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/cluster/join", headTok, `{"node_id":2}`).apiErr(t, 400, api.CodeInvalidRequest)
	if r := e.do("POST", "/cluster/join", headTok, `{"node_id":"n2","raft_addr":"127.0.0.1:1","http_addr":"http://x","gossip_addr":"127.0.0.1:2"}`); r.Code != 200 {
		t.Errorf("join: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/cluster/remove", headTok, `{}`).apiErr(t, 400, api.CodeInvalidRequest)
	if r := e.do("POST", "/cluster/remove", headTok, `{"node_id":"n2"}`); r.Code != 200 {
		t.Errorf("remove: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/cluster/transfer-leader", headTok, ``); r.Code != 200 {
		t.Errorf("transfer: %d %s", r.Code, r.Body)
	}
	if len(e.fc.joined) != 1 || e.fc.joined[0].GossipAddr != "127.0.0.1:2" || len(e.fc.removed) != 1 || len(e.fc.transferTo) != 1 {
		t.Errorf("cluster calls: %v %v %v", e.fc.joined, e.fc.removed, e.fc.transferTo)
	}

	e.fc.setFollower("n2", "http://n2.test")
	if h := e.do("GET", "/health", "", nil).json(t); h["role"] != "follower" || h["leader_id"] != "n2" {
		t.Errorf("follower health = %v", h)
	}
}

func TestHeadersAndReads(t *testing.T) {
	e := newEnv(t)
	e.create(map[string]interface{}{})
	e.create(map[string]interface{}{})
	for _, q := range []string{"", "?stale", "?stale=true", "?consistent", "?stale=false"} {
		r := e.do("GET", "/jobs/id-1"+q, headTok, nil)
		if r.Code != 200 || r.Header.Get(api.HeaderIndex) != "2" || r.Header.Get(api.HeaderNode) != "n1" || r.Header.Get(api.HeaderLeader) != "n1" {
			t.Errorf("%s: %d %v", q, r.Code, r.Header)
		}
	}
	// A follower serves ?stale locally, with the leader it knows.
	e.fc.setFollower("n2", "http://n2.test")
	r := e.do("GET", "/jobs/id-2?stale", leftTok, nil)
	if r.Code != 200 || r.Header.Get(api.HeaderLeader) != "n2" || r.Header.Get(api.HeaderLeaderAddr) != "http://n2.test" || r.Header.Get(api.HeaderIndex) != "2" {
		t.Errorf("stale read on follower: %d %v", r.Code, r.Header)
	}
}

// multipartBody builds a multipart/form-data body with one part.
func multipartBody(t *testing.T, field, contentType string, data []byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename="f.bin"`, field))
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func TestBlobs(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.Queue.MaxBlobBytes = 600 << 10 })
	data := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes: 2 chunks
	ct, body := multipartBody(t, "file", "image/png", data)
	r := e.do("POST", "/blobs", leftTok, body, "Content-Type", ct)
	if r.Code != http.StatusCreated {
		t.Fatalf("put: %d %s", r.Code, r.Body)
	}
	b := r.json(t)
	if b["size"] != float64(len(data)) || b["contentType"] != "image/png" || len(b["id"].(string)) != 64 {
		t.Fatalf("blob = %v", b)
	}
	if r := e.do("POST", "/blobs", headTok, body, "Content-Type", ct); r.Code != http.StatusOK || r.json(t)["id"] != b["id"] {
		t.Fatalf("second put: %d %s", r.Code, r.Body)
	}
	g := e.do("GET", "/blobs/"+b["id"].(string), rightTok, nil)
	if g.Code != 200 || !bytes.Equal(g.Body, data) || g.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("get: %d %d bytes %q", g.Code, len(g.Body), g.Header.Get("Content-Type"))
	}
	e.do("GET", "/blobs/"+strings.Repeat("0", 64), headTok, nil).apiErr(t, 404, api.CodeNotFound)

	// Content type sniffed when absent.
	ct2, body2 := multipartBody(t, "file", "", []byte("hello"))
	if r := e.do("POST", "/blobs", headTok, body2, "Content-Type", ct2).json(t); r["contentType"] != "text/plain; charset=utf-8" {
		t.Errorf("sniffed = %v", r["contentType"])
	}

	over := bytes.Repeat([]byte{1}, 600<<10+1)
	ctO, bodyO := multipartBody(t, "file", "", over)
	huge := bytes.Repeat([]byte{1}, 2<<20)
	ctH, bodyH := multipartBody(t, "file", "", huge)
	ctN, bodyN := multipartBody(t, "other", "", []byte("x"))
	for _, c := range []struct {
		name   string
		ct     string
		body   []byte
		status int
		code   string
	}{
		{"over MaxBlobBytes", ctO, bodyO, 413, api.CodeTooLarge},
		{"over the body limit", ctH, bodyH, 413, api.CodeTooLarge},
		{"no file field", ctN, bodyN, 400, api.CodeInvalidRequest},
		{"not multipart", "application/json", []byte(`{"file":"x"}`), 400, api.CodeInvalidRequest},
		{"no boundary", "multipart/form-data", bodyN, 400, api.CodeInvalidRequest},
		{"broken multipart", ct, []byte("garbage"), 400, api.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("POST", "/blobs", headTok, c.body, "Content-Type", c.ct).apiErr(t, c.status, c.code)
		})
	}
}

func TestWorkerClaimValidation(t *testing.T) {
	e := newEnv(t)
	many := `"` + strings.Repeat(`s","`, 32) + `s"`
	for _, c := range []struct{ name, body, code string }{
		{"malformed", `{"worker_id":`, api.CodeInvalidJSON},
		{"worker_id missing", `{}`, api.CodeInvalidRequest},
		{"worker_id empty", `{"worker_id":""}`, api.CodeInvalidRequest},
		{"worker_id too long", `{"worker_id":"` + strings.Repeat("w", 129) + `"}`, api.CodeInvalidRequest},
		{"worker_id number", `{"worker_id":1}`, api.CodeInvalidRequest},
		{"too many streams", `{"worker_id":"w","streams":[` + many + `]}`, api.CodeInvalidRequest},
		{"bad stream", `{"worker_id":"w","streams":["ok","not ok"]}`, api.CodeInvalidRequest},
		{"empty stream", `{"worker_id":"w","streams":[""]}`, api.CodeInvalidRequest},
		{"streams string", `{"worker_id":"w","streams":"default"}`, api.CodeInvalidRequest},
		{"negative max_wait_ms", `{"worker_id":"w","max_wait_ms":-1}`, api.CodeInvalidRequest},
		{"max_wait_ms string", `{"worker_id":"w","max_wait_ms":"1"}`, api.CodeInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("POST", "/internal/worker/claim", leftTok, c.body).apiErr(t, 400, c.code)
		})
	}
}

// workerClaim claims through the worker contract without waiting.
func (e *env) workerClaim(token, body string) map[string]interface{} {
	e.t.Helper()
	r := e.do("POST", "/internal/worker/claim", token, body)
	if r.Code != 200 {
		e.t.Fatalf("worker claim: %d %s", r.Code, r.Body)
	}
	return r.json(e.t)
}

func TestWorkerContract(t *testing.T) {
	e := newEnv(t)
	if a := e.workerClaim(leftTok, `{"worker_id":"w-1"}`); a["claimed"] != false || len(a) != 1 {
		t.Fatalf("empty claim = %v", a)
	}
	e.create(map[string]interface{}{"payload": "low", "stream": "low"})                      // id-1
	e.create(map[string]interface{}{"payload": "right", "target": RoleRightClaw})            // id-2
	e.create(map[string]interface{}{"payload": "hi", "stream": "high", "maxAttempts": 2})    // id-3
	e.create(map[string]interface{}{"payload": "mine", "target": "w-1", "leaseSeconds": 30}) // id-4

	a := e.workerClaim(leftTok, `{"worker_id":"w-1","streams":["high","default","low"],"max_wait_ms":0}`)
	if a["claimed"] != true || a["job_id"] != "id-3" || a["stream"] != "high" || a["payload"] != "hi" || a["attempt"] != 1.0 ||
		a["max_attempts"] != 2.0 || a["lease_ttl_seconds"] != 300.0 || a["heartbeat_interval_seconds"] != 100.0 || a["message_id"] != "3" {
		t.Fatalf("claim = %v", a)
	}
	// Targeted at the worker id beats nothing else in default (id-2 is right_claw's).
	b := e.workerClaim(leftTok, `{"worker_id":"w-1"}`)
	if b["job_id"] != "id-4" || b["lease_ttl_seconds"] != 30.0 || b["heartbeat_interval_seconds"] != 10.0 {
		t.Fatalf("claim 2 = %v", b)
	}
	if c := e.workerClaim(leftTok, `{"worker_id":"w-1"}`); c["claimed"] != false {
		t.Fatalf("claim 3 = %v", c)
	}
	if c := e.workerClaim(rightTok, `{"worker_id":"w-2"}`); c["job_id"] != "id-2" {
		t.Fatalf("right claim = %v", c)
	}

	ref := func(a map[string]interface{}, tok string) string {
		return fmt.Sprintf(`"worker_id":"w-1","job_id":%q,"attempt_id":%q,"lease_token":%q,"stream":%q,"message_id":%q`,
			a["job_id"], a["attempt_id"], tok, a["stream"], a["message_id"])
	}
	tokA := a["lease_token"].(string)

	// Heartbeat.
	hb := e.do("POST", "/internal/worker/heartbeat", leftTok, `{`+ref(a, tokA)+`}`)
	if j := hb.json(t); hb.Code != 200 || j["ok"] != true || j["lease_expires_at"] != "2026-01-02T03:09:05.000000006Z" {
		t.Fatalf("heartbeat: %d %s", hb.Code, hb.Body)
	}
	// Validation of the refs.
	for _, body := range []string{`{}`, `{"worker_id":"w-1","job_id":"id-3"}`, `{"worker_id":"w-1","lease_token":"x"}`} {
		e.do("POST", "/internal/worker/heartbeat", leftTok, body).apiErr(t, 400, api.CodeInvalidRequest)
	}
	e.do("POST", "/internal/worker/complete", leftTok, `{"worker_id":"w-1","job_id":"id-3","lease_token":"`+tokA+`"}`).apiErr(t, 400, api.CodeInvalidRequest)
	e.do("POST", "/internal/worker/fail", leftTok, `{`+ref(a, tokA)+`,"error":7}`).apiErr(t, 400, api.CodeInvalidRequest)

	// stale_lease: the worker-contract shape {"ok":false,"error":{...}}.
	for _, path := range []string{"heartbeat", "complete", "fail"} {
		r := e.do("POST", "/internal/worker/"+path, leftTok, `{`+ref(a, "stale")+`}`)
		m := r.json(t)
		er, _ := m["error"].(map[string]interface{})
		if r.Code != http.StatusConflict || m["ok"] != false || er["code"] != api.CodeStaleLease || er["message"] == "" {
			t.Errorf("%s stale: %d %s", path, r.Code, r.Body)
		}
	}
	nf := e.do("POST", "/internal/worker/heartbeat", leftTok, `{"worker_id":"w-1","job_id":"nope","lease_token":"x"}`)
	if nf.Code != 404 || nf.json(t)["ok"] != false {
		t.Errorf("not found: %d %s", nf.Code, nf.Body)
	}

	// Fail retryable → requeued; repeating it answers the same and changes nothing.
	failBody := `{` + ref(a, tokA) + `,"error":{"code":"E","message":"m","retryable":true}}`
	f1 := e.do("POST", "/internal/worker/fail", leftTok, failBody)
	if j := f1.json(t); f1.Code != 200 || j["ok"] != true || j["ack"] != true || j["requeued"] != true || j["dlq"] != false {
		t.Fatalf("fail: %d %s", f1.Code, f1.Body)
	}
	before := e.job("id-3").ModifyIndex
	f2 := e.do("POST", "/internal/worker/fail", leftTok, failBody)
	if j := f2.json(t); f2.Code != 200 || j["requeued"] != true || j["duplicate"] != true {
		t.Fatalf("repeat fail: %d %s", f2.Code, f2.Body)
	}
	if e.job("id-3").ModifyIndex != before {
		t.Error("repeated fail changed the job")
	}
	// Second attempt fails non-retryable → dlq.
	a2 := e.workerClaim(leftTok, `{"worker_id":"w-1","streams":["high"]}`)
	f3 := e.do("POST", "/internal/worker/fail", leftTok, `{`+ref(a2, a2["lease_token"].(string))+`,"error":{"message":"no"}}`)
	if j := f3.json(t); j["requeued"] != false || j["dlq"] != true {
		t.Fatalf("fail 2: %s", f3.Body)
	}

	// Complete, repeated.
	tokB := b["lease_token"].(string)
	cb := `{` + ref(b, tokB) + `,"result":{"r":1}}`
	c1 := e.do("POST", "/internal/worker/complete", leftTok, cb)
	if j := c1.json(t); c1.Code != 200 || j["ok"] != true || j["ack"] != true || j["duplicate"] != false {
		t.Fatalf("complete: %d %s", c1.Code, c1.Body)
	}
	if c2 := e.do("POST", "/internal/worker/complete", leftTok, cb); c2.Code != 200 || c2.json(t)["duplicate"] != true {
		t.Fatalf("repeat complete: %d %s", c2.Code, c2.Body)
	}
	if j := e.job("id-4"); j.State != fsm.StateDone || string(j.Result) != `{"r":1}` {
		t.Errorf("job after complete: %s %s", j.State, j.Result)
	}
	// Completing after done with another token is stale (the worker
	// contract reports a job that is no longer running as stale_lease).
	r := e.do("POST", "/internal/worker/complete", leftTok, `{`+ref(b, "other")+`}`)
	if m := r.json(t); r.Code != 409 || m["ok"] != false || m["error"].(map[string]interface{})["code"] != api.CodeStaleLease {
		t.Errorf("complete after done: %d %s", r.Code, r.Body)
	}
}

func TestWorkerClaimLongPoll(t *testing.T) {
	e := newEnv(t)
	done := make(chan resp, 1)
	go func() {
		done <- e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1","max_wait_ms":2000}`)
	}()
	<-e.st.reads // the claim has its snapshot and watch channels
	select {
	case r := <-done:
		t.Fatalf("claim answered before any job existed: %s", r.Body)
	default:
	}
	id := e.create(map[string]interface{}{"payload": "wake"})["id"]
	r := <-done
	if a := r.json(t); r.Code != 200 || a["claimed"] != true || a["job_id"] != id || a["payload"] != "wake" {
		t.Fatalf("woken claim: %d %s", r.Code, r.Body)
	}
}

func TestWorkerClaimTimesOut(t *testing.T) {
	e := newEnv(t)
	// A job in another stream and one targeted elsewhere do not wake it.
	e.create(map[string]interface{}{"stream": "other"})
	e.create(map[string]interface{}{"target": RoleRightClaw})
	r := e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1","max_wait_ms":50}`)
	// The answer says where work waits: the other stream.
	if r.Code != 200 || string(bytes.TrimSpace(r.Body)) != `{"claimed":false,"elsewhere":[{"name":"other","queued":1}]}` {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
}

func TestWorkerClaimMaxWaitCapped(t *testing.T) {
	// A max_wait_ms so large that it overflows a time.Duration must be
	// capped, not turned into "no wait".
	e := newEnv(t)
	done := make(chan resp, 1)
	go func() {
		done <- e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1","max_wait_ms":10000000000000}`)
	}()
	<-e.st.reads
	e.create(map[string]interface{}{})
	r := <-done
	if a := r.json(t); a["claimed"] != true {
		t.Fatalf("claim with a huge max_wait_ms: %d %s", r.Code, r.Body)
	}
}

func TestWorkerClaimCancelled(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan resp, 1)
	go func() {
		done <- e.doCtx(ctx, "POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1","max_wait_ms":2000}`)
	}()
	<-e.st.reads
	cancel()
	r := <-done
	if r.Code == 200 && bytes.Contains(r.Body, []byte(`"claimed":true`)) {
		t.Fatalf("cancelled claim claimed: %s", r.Body)
	}
	id := e.create(map[string]interface{}{})["id"].(string)
	if j := e.job(id); j.State != fsm.StateQueued || j.Attempts != 0 {
		t.Fatalf("job after a cancelled claim: %s attempts %d", j.State, j.Attempts)
	}

	// The caller leaves while the claim commits: the job is given back.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	e.fc.beforeApply = func(t fsm.CommandType) {
		if t == fsm.CmdClaimNext {
			cancel2()
		}
	}
	r = e.doCtx(ctx2, "POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1"}`)
	if bytes.Contains(r.Body, []byte(`"claimed":true`)) {
		t.Fatalf("departed claim answered: %s", r.Body)
	}
	j := e.job(id)
	if j.State != fsm.StateQueued || j.Attempts != 0 || j.History()[len(j.History())-1].Type != fsm.EventReleased {
		t.Fatalf("job not given back: %s attempts %d last event %s", j.State, j.Attempts, j.History()[len(j.History())-1].Type)
	}
}

// A claim is written as every server of the cluster reads it: in the
// positional form of a claim-next below LevelTagged, tagged from it on.
func TestWorkerClaimWrittenForTheClusterLevel(t *testing.T) {
	for _, c := range []struct {
		level int
		want  fsm.CommandType
	}{{fsm.LevelTagged - 1, fsm.CmdClaimNext}, {fsm.LevelTagged, fsm.CmdClaim}} {
		e := newEnv(t, atLevel(c.level))
		var types []fsm.CommandType
		e.fc.beforeApply = func(t fsm.CommandType) { types = append(types, t) }
		e.create(map[string]interface{}{})
		r := e.do("POST", "/internal/worker/claim", leftTok, `{"worker_id":"w-1"}`)
		if r.Code != http.StatusOK || !bytes.Contains(r.Body, []byte(`"claimed":true`)) {
			t.Fatalf("claim at level %d: %d %s", c.level, r.Code, r.Body)
		}
		if len(types) != 2 || types[1] != c.want {
			t.Fatalf("level %d: commands %v, want create then %v", c.level, types, c.want)
		}
	}
}

// A claim refused with illegal_transition carries the job as the state
// machine holds it, as every refusal does (docs/api.md).
func TestClaimRefusalCarriesTheJob(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{})["id"].(string)
	e.claim(id, leftTok)
	er := e.do("POST", "/jobs/"+id+"/claim", leftTok, `{}`).apiErr(t, http.StatusConflict, api.CodeIllegalTransition)
	j, _ := er["job"].(map[string]interface{})
	if j["id"] != id || j["status"] != "running" {
		t.Fatalf("error.job = %v", er["job"])
	}
}
