package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/spine-queue/spine/api"
)

// Fuzz targets for what every node reads from its callers: the JSON
// bodies of the write routes, the web UI's forms, query parameters and
// the event stream's Last-Event-ID, the UI's session cookie, and the purge
// retention. Requests go through the real handler on a server over a fake
// cluster (fake_test.go), each input on a fresh one so a failure replays.
// `make fuzz` runs each for a fixed time; `make test` runs their seeds.

// fuzzEnv is a server holding a little of everything, as the fuzzed
// requests find it: a registry, a session "s1" and its stream "a", a
// queued job, a running job leased to left_claw, a queued task, a gateway
// "g1" with a worker "w1", and the event feed on.
type fuzzEnv struct {
	*env
	ids map[string]string // placeholder → value, for bodies and paths
}

func newFuzzEnv(t *testing.T) *fuzzEnv {
	t.Helper()
	quiet := func(c *envConfig) {
		c.Config.Logger = hclog.NewNullLogger()
		c.Queue.Logger = hclog.NewNullLogger()
	}
	e := &fuzzEnv{env: newEnv(t, quiet), ids: map[string]string{}}
	must := func(method, path, token string, body interface{}, want int) map[string]interface{} {
		t.Helper()
		r := e.do(method, path, token, body)
		if r.Code != want {
			t.Fatalf("setup %s %s: %d %s", method, path, r.Code, r.Body)
		}
		return r.json(t)
	}
	must("PUT", "/api/registry", headTok, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}, PurgeOlderThanDays: 3}, 200)
	must("POST", "/api/sessions", headTok, api.SessionCreateRequest{Name: "s1"}, 201)
	must("POST", "/api/streams", headTok, api.StreamCreateRequest{Name: "a", Session: "s1"}, 201)
	e.ids["$JOB1"] = must("POST", "/jobs", headTok, map[string]interface{}{"payload": 1}, 201)["id"].(string)
	e.ids["$JOB2"] = must("POST", "/jobs", headTok, map[string]interface{}{"payload": 2, "maxAttempts": 2}, 201)["id"].(string)
	c := must("POST", "/jobs/"+e.ids["$JOB2"]+"/claim", leftTok, "{}", 200)
	e.ids["$TOKEN"], e.ids["$ATTEMPT"] = c["leaseToken"].(string), c["attemptId"].(string)
	e.ids["$TASK"] = must("POST", "/api/tasks", headTok, api.EnqueueRequest{ToolName: "run-bash", Stream: "a", Payload: json.RawMessage(`{}`)}, 201)["id"].(string)
	must("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "g1", Address: "http://g1", Capacity: 2}, 201)
	must("POST", "/v1/workers", headTok, api.WorkerRegisterRequest{ID: "w1", Gateway: "g1", Capacity: 1}, 201)
	if on, err := e.srv.queue.StartFeed(context.Background()); !on || err != nil {
		t.Fatalf("feed: %v %v", on, err)
	}
	return e
}

// expand replaces the placeholders in s with this server's ids.
func (e *fuzzEnv) expand(s string) string {
	for k, v := range e.ids {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// pathIDs are what a route's {id} may be.
var pathIDs = []string{"$JOB1", "$JOB2", "$TASK", "missing", "s1", "a", "g1", "w1", "", "%2e%2e", "x%00y"}

// state is what a request may change: the state machine's records (its
// snapshot without the header, which names the applied index and the
// running hash of every command, refused ones too) and what the fake
// cluster was asked to do.
func (e *fuzzEnv) state(t *testing.T) string {
	t.Helper()
	s, err := e.fc.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink snapSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	b := sink.Bytes()
	d := codec.NewDecoderBytes(b[1:], &codec.MsgpackHandle{})
	var hdr map[string]interface{}
	if err := d.Decode(&hdr); err != nil {
		t.Fatal(err)
	}
	e.fc.mu.Lock()
	defer e.fc.mu.Unlock()
	return fmt.Sprintf("%x|%v|%v|%v|%v", sha256.Sum256(b[1+d.NumBytesRead():]), e.fc.seen, e.fc.joined, e.fc.removed, e.fc.transferTo)
}

type snapSink struct{ bytes.Buffer }

func (*snapSink) ID() string    { return "fuzz" }
func (*snapSink) Cancel() error { return nil }
func (*snapSink) Close() error  { return nil }

// fuzzDo serves one request with a deadline (a long poll or the event
// stream waits for it); ok is false when the deadline cut it short.
func (e *fuzzEnv) fuzzDo(req *http.Request, wait time.Duration) (rec *httptest.ResponseRecorder, ok bool) {
	ctx, cancel := context.WithTimeout(req.Context(), wait)
	defer cancel()
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req.WithContext(ctx))
	return rec, ctx.Err() == nil
}

// checkAnswer: an API answer is JSON, never an internal error; an answer
// refusing the request (4xx) changed nothing.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, before, after string) {
	t.Helper()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s: %d answered %q, not JSON: %q", what, rec.Code, ct, rec.Body)
	}
	if rec.Code >= 400 && rec.Code < 500 && before != after {
		t.Fatalf("%s: %d changed the state: %s", what, rec.Code, rec.Body)
	}
}

// writeRoutes are the routes that take a body, with the role that calls
// them (an input may use another). Inputs name a route by its index here
// (as readRoutes, uiForms and pathIDs): add new ones at the end, so the
// corpus in testdata/fuzz keeps its meaning.
var writeRoutes = []struct{ method, path, token string }{
	{"POST", "/jobs", headTok},
	{"POST", "/jobs/{id}/claim", leftTok},
	{"POST", "/jobs/{id}/heartbeat", leftTok},
	{"POST", "/jobs/{id}/complete", leftTok},
	{"POST", "/jobs/{id}/fail", leftTok},
	{"POST", "/jobs/{id}/release", leftTok},
	{"POST", "/jobs/{id}/comment", headTok},
	{"POST", "/internal/worker/claim", leftTok},
	{"POST", "/internal/worker/heartbeat", leftTok},
	{"POST", "/internal/worker/complete", leftTok},
	{"POST", "/internal/worker/fail", leftTok},
	{"POST", "/dlq/{id}/redrive", headTok},
	{"POST", "/api/sessions", headTok},
	{"POST", "/api/sessions/{id}/end", headTok},
	{"POST", "/api/streams", headTok},
	{"POST", "/api/streams/{id}/end", headTok},
	{"POST", "/api/tasks", headTok},
	{"POST", "/api/tasks/{id}/requeue", headTok},
	{"POST", "/api/tasks/{id}/complete", leftTok},
	{"POST", "/api/tasks/{id}/fail", leftTok},
	{"POST", "/api/tasks/{id}/heartbeat", leftTok},
	{"POST", "/api/claim", leftTok},
	{"PUT", "/api/registry", headTok},
	{"POST", "/api/purge", headTok},
	{"POST", "/v1/gateways", headTok},
	{"DELETE", "/v1/gateways/{id}", headTok},
	{"POST", "/v1/gateways/{id}/heartbeat", headTok},
	{"POST", "/v1/workers", headTok},
	{"DELETE", "/v1/workers/{id}", headTok},
	{"POST", "/v1/workers/{id}/heartbeat", leftTok},
	{"POST", "/v1/tasks/route", headTok},
	{"POST", "/v1/tasks/claim", leftTok},
	{"POST", "/v1/tasks/{id}/start", leftTok},
	{"POST", "/v1/tasks/{id}/heartbeat", leftTok},
	{"POST", "/v1/tasks/{id}/complete", leftTok},
	{"POST", "/v1/tasks/{id}/fail", leftTok},
	{"POST", "/v1/tasks/{id}/release", leftTok},
	{"POST", "/cluster/join", headTok},
	{"POST", "/cluster/remove", headTok},
	{"POST", "/cluster/transfer-leader", headTok},
}

func routeIndex(method, path string) uint8 {
	for i, r := range writeRoutes {
		if r.method == method && r.path == path {
			return uint8(i)
		}
	}
	panic("no route " + method + " " + path)
}

var tokens = []string{"", headTok, leftTok, rightTok, "wrong"}

// FuzzWriteBodies: any body (and Content-Type, and role) on any write
// route is answered in JSON, never with an internal error or a panic, and
// a refusal (4xx) leaves the state as it was. Bodies may name the
// server's ids ($JOB1, $JOB2, $TASK) and the running job's lease ($TOKEN,
// $ATTEMPT).
func FuzzWriteBodies(f *testing.F) {
	add := func(method, path string, id uint8, body string) {
		f.Add(routeIndex(method, path), id, uint8(0), "application/json", body)
	}
	add("POST", "/jobs", 0, `{"payload":{"n":1},"maxAttempts":3,"stream":"s","leaseSeconds":30,"taskClass":"LLM_LITE","idempotencyKey":"k"}`)
	add("POST", "/jobs", 0, `{"payload":1,"maxAttempts":0,"stream":"","leaseSeconds":-1}`)
	add("POST", "/jobs", 0, `{"payload":null} {}`)
	add("POST", "/jobs/{id}/claim", 0, `{"workerId":"w1"}`)
	add("POST", "/jobs/{id}/heartbeat", 1, `{"leaseToken":"$TOKEN","attemptId":"$ATTEMPT"}`)
	add("POST", "/jobs/{id}/complete", 1, `{"leaseToken":"$TOKEN","attemptId":"$ATTEMPT","result":{"ok":true},"stdout":"o"}`)
	add("POST", "/jobs/{id}/complete", 1, `{"leaseToken":"wrong","result":1}`)
	add("POST", "/jobs/{id}/fail", 1, `{"leaseToken":"$TOKEN","error":"disk full","requeue":false}`)
	add("POST", "/jobs/{id}/fail", 1, `{"leaseToken":"$TOKEN","error":{"code":"E","message":"m","retryable":true}}`)
	add("POST", "/jobs/{id}/fail", 1, `{"error":[1]}`)
	add("POST", "/jobs/{id}/release", 1, `{"leaseToken":"$TOKEN","reason":"later"}`)
	add("POST", "/jobs/{id}/comment", 0, `{"text":"hello"}`)
	add("POST", "/internal/worker/claim", 0, `{"worker_id":"w1","streams":["default"],"max_wait_ms":0}`)
	add("POST", "/internal/worker/complete", 0, `{"worker_id":"w1","job_id":"$JOB2","lease_token":"$TOKEN","attempt_id":"$ATTEMPT","result":{}}`)
	add("POST", "/internal/worker/fail", 0, `{"worker_id":"w1","job_id":"$JOB2","lease_token":"$TOKEN","attempt_id":"$ATTEMPT","error":{"message":"x","retryable":true}}`)
	add("POST", "/dlq/{id}/redrive", 0, `{}`)
	add("POST", "/api/sessions", 0, `{"name":"s2","description":"d"}`)
	add("POST", "/api/sessions/{id}/end", 4, ``)
	add("POST", "/api/streams", 0, `{"name":"b","session":"s1","instructions":"do"}`)
	add("POST", "/api/streams/{id}/end", 5, `{}`)
	add("POST", "/api/tasks", 0, `{"tool_name":"run-bash","stream":"a","payload":{"x":1},"timeout":5,"idempotency_key":"k"}`)
	add("POST", "/api/tasks/{id}/requeue", 2, `{}`)
	add("POST", "/api/tasks/{id}/complete", 2, `{"result":{"summary":"s"},"stdout":"o"}`)
	add("POST", "/api/tasks/{id}/fail", 2, `{"error":"e","lease_token":"x"}`)
	add("POST", "/api/claim", 0, `{"stream":"a","claim_id":"claim-key-1"}`)
	add("PUT", "/api/registry", 0, `{"project":{"name":"p"},"task_classes":[{"name":"X","timeout":1}],"tools":[{"name":"t","task_class":"X"}],"purge_older_than_days":1}`)
	add("POST", "/api/purge", 0, `{"older_than":"3d"}`)
	add("POST", "/api/purge", 0, `{"older_than":"9999999999d"}`)
	add("POST", "/v1/gateways", 0, `{"id":"g2","address":"http://g2","metadata":{"zone":"eu"},"capacity":4}`)
	add("DELETE", "/v1/gateways/{id}", 6, ``)
	add("POST", "/v1/gateways/{id}/heartbeat", 6, `{}`)
	add("POST", "/v1/workers", 0, `{"id":"w2","gateway":"g1","capabilities":["gpu"],"capacity":1}`)
	add("POST", "/v1/workers/{id}/heartbeat", 7, `{}`)
	add("POST", "/v1/tasks/route", 0, `{"job_id":"$JOB1","capabilities":["gpu"],"labels":{"zone":"eu"},"idempotency_key":"r"}`)
	add("POST", "/v1/tasks/claim", 0, `{"agent_id":"w1","streams":["a"],"max_wait_ms":0,"claim_id":"claim-key-2"}`)
	add("POST", "/v1/tasks/{id}/start", 1, `{"lease_token":"$TOKEN","attempt_id":"$ATTEMPT"}`)
	add("POST", "/v1/tasks/{id}/complete", 1, `{"lease_token":"$TOKEN","attempt_id":"$ATTEMPT","result":{"summary":"s"}}`)
	add("POST", "/cluster/join", 0, `{"node_id":"n9","raft_addr":"127.0.0.1:1","http_addr":"http://127.0.0.1:2"}`)
	add("POST", "/cluster/remove", 0, `{"node_id":"n9"}`)
	add("POST", "/cluster/transfer-leader", 0, `{"to":"n2"}`)
	// Bodies that are not one JSON object of text: refused on every route.
	for _, body := range []string{`null`, ` null `, `[]`, `"x"`, `1`, `true`, "{\"payload\":\"\xff\"}", `{"payload":"\ud800"}`, "\xef\xbb\xbf{}"} {
		add("POST", "/jobs", 0, body)
		add("PUT", "/api/registry", 0, body)
		add("POST", "/jobs/{id}/complete", 1, body)
		add("POST", "/cluster/transfer-leader", 0, body)
		add("POST", "/v1/gateways/{id}/heartbeat", 6, body)
	}
	add("PUT", "/api/registry", 0, ``)
	add("POST", "/jobs", 0, `{"payload":1,"runAt":"tomorrow"}`)
	add("POST", "/jobs", 0, `{"payload":1,"runAt":17e9}`)
	add("POST", "/jobs", 0, `{"payload":1,"runAt":"2026-02-30T00:00:00Z"}`)
	add("POST", "/cluster/remove", 0, `{"node_id":"n\u0000"}`)
	add("POST", "/v1/workers/{id}/heartbeat", 7, `{bad`)
	f.Add(uint8(0), uint8(0), uint8(0), "text/plain", `{"payload":1}`)
	f.Add(uint8(0), uint8(0), uint8(2), "application/merge-patch+json; charset=utf-8", `{"payload":1}`)
	f.Add(uint8(3), uint8(1), uint8(3), "application/json;", `{"leaseToken":"$TOKEN"}`)
	f.Fuzz(func(t *testing.T, route, id, role uint8, contentType, body string) {
		e := newFuzzEnv(t)
		rt := writeRoutes[int(route)%len(writeRoutes)]
		token := rt.token
		if role != 0 {
			token = tokens[int(role)%len(tokens)]
		}
		path := strings.ReplaceAll(rt.path, "{id}", e.expand(pathIDs[int(id)%len(pathIDs)]))
		req := httptest.NewRequest(rt.method, "http://n1.test"+path, strings.NewReader(e.expand(body)))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		before := e.state(t)
		rec, done := e.fuzzDo(req, 100*time.Millisecond)
		if !done {
			return // a long poll that found nothing: no answer to check
		}
		after := e.state(t)
		checkAnswer(t, rt.method+" "+path+" "+body, rec, before, after)
		// A body that is not one JSON object of UTF-8 text is refused,
		// whatever the route, and changes nothing.
		if notAnObject(e.expand(body)) && (rec.Code < 400 || rec.Code >= 500 || before != after) {
			t.Fatalf("%s %s %q: %d (changed: %v) %s", rt.method, path, body, rec.Code, before != after, rec.Body)
		}
	})
}

// notAnObject reports whether a body is something every route refuses:
// not empty, and not one JSON object of UTF-8 text without escaped lone
// surrogates.
func notAnObject(body string) bool {
	b := trimJSONSpace([]byte(body))
	if len(b) == 0 {
		return false
	}
	off, _ := badText(b)
	return off >= 0 || !json.Valid(b) || b[0] != '{'
}

// FuzzDecode: the shared decoder takes any body into any request type and
// either decodes one JSON object of UTF-8 text or refuses it with a 4xx
// whose message is in the API's terms: never Go's types, struct paths,
// time layouts or encoding/json's own prefix.
func FuzzDecode(f *testing.F) {
	for _, b := range []string{``, `{}`, `null`, `[]`, `"x"`, `1`, `true`, `{"payload":1}`, `{"payload":1,"runAt":"tomorrow"}`,
		`{"payload":1,"runAt":5}`, `{"payload":1,"maxAttempts":"3"}`, `{"payload":1,"maxAttempts":1e99}`, `{"error":[1]}`,
		"{\"payload\":\"\xff\"}", `{"payload":"\udc00"}`, `{"payload":"\ud83d\ude00"}`, `{"payload":1}{}`, `{"payload":`,
		`{"tools":[{"name":1}]}`, `{"tools":{}}`, `{"project":[]}`, `{"node_id":"n1"}`, `{"x":1}`} {
		for typ := range decodeTargets {
			f.Add(uint8(typ), b)
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, body string) {
		v := decodeTargets[int(typ)%len(decodeTargets)]()
		err := decode(&call{body: []byte(body), contentType: "application/json"}, v)
		if err == nil {
			if notAnObject(body) {
				t.Fatalf("%T took %q", v, body)
			}
			return
		}
		ae, ok := err.(*apiError)
		if !ok || ae.Status < 400 || ae.Status >= 500 {
			t.Fatalf("%T %q: refused with %T %v", v, body, err, err)
		}
		for _, goTerm := range []string{"Go struct field", "json: ", "2006-01-02", "time.Time", "api.Job", "api.Reg", "httpapi.", "struct {", "int64", "float64", "map[", "[]string", "json.RawMessage", "UnmarshalJSON"} {
			if strings.Contains(ae.Message, goTerm) {
				t.Fatalf("%T %q: the refusal says %q: %s", v, body, goTerm, ae.Message)
			}
		}
	})
}

// decodeTargets are request types the routes decode, with their own
// decoding (JobCreateRequest, JobError) among them.
var decodeTargets = []func() interface{}{
	func() interface{} { return &api.JobCreateRequest{} },
	func() interface{} { return &api.JobFailRequest{} },
	func() interface{} { return &api.JobCompleteRequest{} },
	func() interface{} { return &api.Registry{} },
	func() interface{} { return &api.WorkerClaimRequest{} },
	func() interface{} { return &api.ClusterRemoveRequest{} },
	func() interface{} { return &api.GatewayRegisterRequest{} },
	func() interface{} { return &struct{}{} },
}

// readRoutes are GET routes whose query string the caller chooses.
var readRoutes = []string{
	"/jobs", "/dlq", "/jobs/$JOB1", "/api/tasks", "/api/sessions", "/api/streams", "/api/streams/a", "/api/status",
	"/api/tools", "/api/scripts", "/api/registry", "/api/peek", "/v1/gateways", "/v1/workers", "/v1/state",
	"/v1/agents", "/v1/tasks/next", "/v1/tasks/$TASK", "/v1/events", "/cluster/status", "/health",
	"/ui/tasks", "/ui/", "/ui/events", "/ui/enqueue", "/ui/cluster",
}

// FuzzQueryParams: any query string (cursors, limits, filters, the
// consistency options) and any Last-Event-ID on a read route is answered
// in JSON (the event stream in its own format, the UI's pages in HTML),
// never with an internal error or a panic, and a read changes nothing.
func FuzzQueryParams(f *testing.F) {
	for i, q := range []string{"status=queued&limit=5&cursor=1", "limit=0", "limit=1001&cursor=-1", "cursor=18446744073709551616",
		"stale", "stale=false&consistent", "stream=a&status=DONE&stale=true", "after=0", "for=w1", "worker_id=w1&gateway=g1",
		"%zz&a=%", "limit=1&cursor=99999999999999999999", ""} {
		f.Add(uint8(i), q, "")
	}
	f.Add(uint8(18), "after=0", "3")
	f.Add(uint8(18), "", "18446744073709551615")
	f.Add(uint8(18), "after=x", "-1")
	f.Add(uint8(21), "state=dead&after=18446744073709551615&stream=a", "")
	f.Add(uint8(21), "after=-1", "")
	f.Add(uint8(22), "stream=%00", "")
	f.Add(uint8(23), "", "7")
	f.Fuzz(func(t *testing.T, route uint8, query, lastEventID string) {
		e := newFuzzEnv(t)
		path := e.expand(readRoutes[int(route)%len(readRoutes)])
		req := httptest.NewRequest("GET", "http://n1.test"+path, nil)
		req.URL.RawQuery = e.expand(query)
		ui := strings.HasPrefix(path, "/ui/")
		if ui {
			ck := uiLogin(t, e.env, headTok)
			req.Header.Set("Cookie", ck.Name+"="+ck.Value)
		} else {
			req.Header.Set("Authorization", "Bearer "+headTok)
		}
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		before := e.state(t)
		rec, done := e.fuzzDo(req, 50*time.Millisecond)
		after := e.state(t)
		if before != after {
			t.Fatalf("GET %s?%s changed the state", path, query)
		}
		if strings.HasSuffix(path, "/events") && rec.Code == http.StatusOK {
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("event stream answered %q", ct)
			}
			return
		}
		if !done {
			return // a long poll that found nothing
		}
		if ui {
			if ct := rec.Header().Get("Content-Type"); rec.Code >= 500 || !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("GET %s?%s: %d %q %s", path, query, rec.Code, ct, rec.Body)
			}
			return
		}
		checkAnswer(t, "GET "+path+"?"+query, rec, before, after)
	})
}

// uiForms are the web UI's form posts.
var uiForms = []string{
	"/ui/sessions", "/ui/sessions/s1/end", "/ui/streams", "/ui/streams/a/end", "/ui/enqueue",
	"/ui/tasks/$JOB1/redrive", "/ui/tasks/$TASK/requeue", "/ui/tasks/missing/requeue", "/ui/logout",
}

// FuzzUIForms: any form body on any of the UI's form posts, from a head
// session (the form may carry the session's CSRF token as $CSRF), is
// answered with a page or a redirect, never an internal error or a panic,
// and a refusal (4xx) changes nothing.
func FuzzUIForms(f *testing.F) {
	for i, form := range []string{"csrf=$CSRF&name=s2&description=d", "csrf=$CSRF", "csrf=$CSRF&name=b&session=s1&instructions=x",
		"csrf=$CSRF", "csrf=$CSRF&tool=run-bash&stream=a&payload=%7B%7D&timeout=30&key=k",
		"csrf=$CSRF&back=/ui/tasks", "csrf=$CSRF&back=//evil.test", "csrf=wrong", "csrf=$CSRF"} {
		f.Add(uint8(i), form)
	}
	f.Add(uint8(4), "csrf=$CSRF&tool=run-bash&stream=a&payload=%7B&timeout=-1")
	f.Add(uint8(0), "csrf=$CSRF;name=x&%zz")
	f.Fuzz(func(t *testing.T, route uint8, form string) {
		e := newFuzzEnv(t)
		ck := uiLogin(t, e.env, headTok)
		page := e.page("GET", "/ui/enqueue", ck, "")
		m := csrfRE.FindSubmatch(page.Body)
		if m == nil {
			t.Fatalf("no CSRF token on the enqueue page: %s", page.Body)
		}
		e.ids["$CSRF"] = string(m[1])
		path := e.expand(uiForms[int(route)%len(uiForms)])
		req := httptest.NewRequest("POST", "http://n1.test"+path, strings.NewReader(e.expand(form)))
		req.Header.Set("Cookie", ck.Name+"="+ck.Value)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		before := e.state(t)
		rec, _ := e.fuzzDo(req, time.Second)
		after := e.state(t)
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, form, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && before != after {
			t.Fatalf("POST %s %q: %d changed the state", path, form, rec.Code)
		}
		if loc := rec.Header().Get("Location"); rec.Code == http.StatusSeeOther && (!strings.HasPrefix(loc, "/ui/") || strings.HasPrefix(loc, "//")) {
			t.Fatalf("POST %s %q redirects off the UI to %q", path, form, loc)
		}
	})
}

// FuzzUISession: a session cookie is accepted only as a node minted it:
// any other value is refused, never a panic, and no value gives a role
// its token's session did not have.
func FuzzUISession(f *testing.F) {
	exp := time.Now().Add(time.Hour)
	for _, tok := range []string{headTok, leftTok} {
		if v, err := newSession(roleOf(tok), sha256.Sum256([]byte(tok)), exp, ""); err == nil {
			f.Add(v)
			enc, mac, _ := strings.Cut(v, ".")
			raw, _ := base64.RawURLEncoding.DecodeString(enc)
			f.Add(base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), roleOf(tok), RoleHead, 1))) + "." + mac)
		}
	}
	f.Add("")
	f.Add(".")
	f.Add("aGVhZHwxfDE.x")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte("head|99999999999999999999|n")) + ".m")
	f.Fuzz(func(t *testing.T, value string) {
		e := newEnv(t, func(c *envConfig) { c.Config.Logger = hclog.NewNullLogger(); c.Queue.Logger = hclog.NewNullLogger() })
		req := httptest.NewRequest("GET", "/ui/", nil)
		req.Header.Set("Cookie", sessionCookie+"="+value)
		sess, err := e.srv.session(req, time.Now())
		if err != nil {
			return
		}
		ck, _ := req.Cookie(sessionCookie)
		enc, mac, _ := strings.Cut(ck.Value, ".")
		raw, _ := base64.RawURLEncoding.DecodeString(enc)
		parts := strings.Split(string(raw), "|")
		tok := map[string]string{RoleHead: headTok, RoleLeftClaw: leftTok, RoleRightClaw: rightTok}[sess.role]
		if len(parts) != 3 || parts[0] != sess.role || tok == "" || mac != sessionMAC(sha256.Sum256([]byte(tok)), "session", string(raw)) {
			t.Fatalf("cookie %q accepted as %s", value, sess.role)
		}
	})
}

func roleOf(tok string) string {
	return map[string]string{headTok: RoleHead, leftTok: RoleLeftClaw, rightTok: RoleRightClaw}[tok]
}

// A retention of more days than a Duration holds is refused, not wrapped
// to a negative age that purges every finished task (found by
// FuzzParseAge).
func TestPurgeRetentionOverflowRefused(t *testing.T) {
	e := newFuzzEnv(t)
	// 9223372036854775807 days wrapped to -24h: a purge of everything
	// finished before tomorrow.
	for _, v := range []string{"106752d", "9223372036854775807d"} {
		if r := e.do("POST", "/api/purge", headTok, `{"older_than":"`+v+`"}`); r.Code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", v, r.Code, r.Body)
		}
	}
	if r := e.do("POST", "/api/purge", headTok, `{"older_than":"106751d"}`); r.Code != http.StatusOK {
		t.Fatalf("106751d: %d %s", r.Code, r.Body)
	}
}

// FuzzParseAge: a purge retention ("3d", "12h", "30m", "45s") parses to
// the duration it names or is refused, never a negative one (which would
// purge tasks finished in the future, that is all of them).
func FuzzParseAge(f *testing.F) {
	for _, v := range []string{"3d", "0d", "12h", "30m", "45s", "1h30m", "-1d", "-1h", "d", "", "1.5d", "9223372036854775807d", "106752d", "2562047h"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := ParseAge(v)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("%q parses to %v", v, d)
		}
		if n, ok := strings.CutSuffix(v, "d"); ok {
			if days, err := strconv.ParseInt(n, 10, 64); err == nil && d/(24*time.Hour) != time.Duration(days) {
				t.Fatalf("%q parses to %v", v, d)
			}
		}
	})
}
