package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
)

// routeWith is a route's path with its parameters filled in from the fuzz
// environment: jobs are the running one, streams "a", sessions "s1".
func (e *fuzzEnv) routeWith(pattern string) string {
	p := strings.NewReplacer("{id}", e.ids["$JOB2"], "{name}", "a", "{op}", "install").Replace(pattern)
	switch {
	case strings.HasPrefix(pattern, "/api/tasks/"), strings.HasPrefix(pattern, "/v1/tasks/{"):
		p = strings.Replace(p, e.ids["$JOB2"], e.ids["$TASK"], 1)
	case strings.HasPrefix(pattern, "/api/sessions/"):
		p = strings.Replace(p, "/a/", "/s1/", 1)
	case strings.HasPrefix(pattern, "/v1/gateways/"):
		p = strings.Replace(p, e.ids["$JOB2"], "g1", 1)
	case strings.HasPrefix(pattern, "/v1/workers/"):
		p = strings.Replace(p, e.ids["$JOB2"], "w1", 1)
	}
	return p
}

// rawBodyRoutes take a body that is not JSON.
var rawBodyRoutes = map[string]bool{"POST /blobs": true, "PUT /v1/snapshot": true}

// Every route that takes a body refuses one that is not a JSON object
// (null, an array, a string, a number, true), malformed JSON and a body of
// another media type, in the API's JSON, and nothing changes: the registry
// is still there, the job still runs, the leader was not asked to move.
func TestNonObjectBodiesRefusedOnEveryRoute(t *testing.T) {
	e := newFuzzEnv(t)
	before := e.state(t)
	checked := 0
	for _, rt := range e.srv.routeList {
		method, pattern, _ := strings.Cut(rt, " ")
		if method == "GET" || rawBodyRoutes[rt] {
			continue
		}
		path := e.routeWith(pattern)
		cases := []struct{ ctype, body, code, says string }{
			{"application/json", `null`, api.CodeInvalidRequest, "not null"},
			{"application/json", ` [{"payload":1}]`, api.CodeInvalidRequest, "not an array"},
			{"application/json", `"x"`, api.CodeInvalidRequest, "not a string"},
			{"application/json", `1`, api.CodeInvalidRequest, "not a number"},
			{"application/json", `true`, api.CodeInvalidRequest, "not true or false"},
			{"application/json", `{bad`, api.CodeInvalidJSON, "malformed JSON"},
			{"", `nul`, api.CodeInvalidJSON, "malformed JSON"},
			{"text/plain", `{}`, api.CodeUnsupportedMediaType, "Content-Type: application/json"},
		}
		for _, c := range cases {
			r := e.do(method, path, headTok, c.body, "Content-Type", c.ctype)
			if r.Code == http.StatusForbidden {
				r = e.do(method, path, leftTok, c.body, "Content-Type", c.ctype)
			}
			want := http.StatusBadRequest
			if c.code == api.CodeUnsupportedMediaType {
				want = http.StatusUnsupportedMediaType
			}
			if r.Code != want {
				t.Errorf("%s %s %q (%s): %d %s", method, path, c.body, c.ctype, r.Code, r.Body)
				continue
			}
			er := r.apiErr(t, want, c.code)
			if msg := er["message"].(string); !strings.Contains(msg, c.says) {
				t.Errorf("%s %s %q: message %q does not say %q", method, path, c.body, msg, c.says)
			}
			checked++
		}
	}
	if checked < 8*40 {
		t.Fatalf("only %d refusals checked: routes missing?", checked)
	}
	if after := e.state(t); after != before {
		t.Fatal("a refused body changed the state")
	}
	if j := e.job(e.ids["$JOB2"]); j.State != "running" {
		t.Fatalf("the running job is now %s", j.State)
	}
}

// An empty body is an empty object where every field is optional, but PUT
// /api/registry, which replaces the registry whole, refuses one rather
// than wipe it; {} says so explicitly.
func TestEmptyBodies(t *testing.T) {
	e := newFuzzEnv(t)
	before := e.state(t)
	for _, body := range []string{"", "  \n"} {
		er := e.do("PUT", "/api/registry", headTok, body).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, "the body is required") || !strings.Contains(msg, "{}") {
			t.Errorf("empty registry body: %q", msg)
		}
	}
	if e.state(t) != before {
		t.Fatal("a refused registry changed the state")
	}
	reg := e.do("GET", "/api/registry", headTok, nil).json(t)
	if tools := reg["tools"].([]interface{}); len(tools) != 1 {
		t.Fatalf("the registry lost its tools: %v", reg)
	}
	// A body-less heartbeat, stream end or transfer is fine.
	if r := e.do("POST", "/v1/gateways/g1/heartbeat", headTok, nil); r.Code != http.StatusOK {
		t.Fatalf("heartbeat without a body: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/v1/workers/w1/heartbeat", headTok, "{}"); r.Code != http.StatusOK {
		t.Fatalf("heartbeat with {}: %d %s", r.Code, r.Body)
	}
	if r := e.do("POST", "/cluster/transfer-leader", headTok, nil); r.Code != http.StatusOK || len(e.fc.transferTo) != 1 {
		t.Fatalf("transfer without a body: %d %s", r.Code, r.Body)
	}
	// A route without fields names it when given one.
	er := e.do("POST", "/v1/gateways/g1/heartbeat", headTok, `{"health":"healthy"}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if msg := er["message"].(string); !strings.Contains(msg, "takes no fields") {
		t.Errorf("a field on a heartbeat: %q", msg)
	}
}

// A body that is not UTF-8, or escapes a lone surrogate, is refused
// naming the field that holds it (a decoder would have stored U+FFFD).
func TestBodiesMustBeUTF8(t *testing.T) {
	e := newFuzzEnv(t)
	before := e.state(t)
	for _, c := range []struct{ path, body, says string }{
		{"/jobs", "{\"payload\":{\"a\":[\"x\",\"\xff\"]}}", `field "payload.a[1]" holds not valid UTF-8`},
		{"/jobs", "{\"payload\":1,\"stream\":\"s\xc3\"}", `field "stream" holds not valid UTF-8`},
		{"/jobs", "{\"pay\xe2\x82load\":1}", "a field name of the body holds not valid UTF-8"},
		{"/jobs", "{\"payload\":{\"k\xf0\":1}}", `a field name in "payload" holds not valid UTF-8`},
		{"/jobs", `{"payload":"\ud800"}`, `field "payload" holds a \u escape of a lone UTF-16 surrogate`},
		{"/jobs", `{"payload":1,"target":"\udc00\ud83d"}`, `field "target" holds a \u escape`},
		{"/jobs", "{\"payload\":1,\"x\":\xff", "the body holds not valid UTF-8 at byte 18"},
		{"/api/sessions", "{\"name\":\"s\xff\"}", `field "name" holds not valid UTF-8`},
	} {
		er := e.do("POST", c.path, headTok, c.body).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%q: message %q does not say %q", c.body, msg, c.says)
		}
	}
	if e.state(t) != before {
		t.Fatal("a refused body changed the state")
	}
	// A surrogate pair, and a backslash before "ud800", are text.
	for _, body := range []string{`{"payload":"\ud83d\ude00"}`, `{"payload":"\\ud800"}`, "{\"payload\":\"é€😀\"}"} {
		if r := e.do("POST", "/jobs", headTok, body); r.Code != http.StatusCreated {
			t.Errorf("%s: %d %s", body, r.Code, r.Body)
		}
	}
}

// The consistency options take the values docs/api.md gives them; any
// other is refused, as is a query string that does not parse.
func TestQueryOptionsRefuseOtherValues(t *testing.T) {
	e := newFuzzEnv(t)
	for _, q := range []string{"consistent", "consistent=", "consistent=true", "consistent=false", "stale", "stale=true", "stale=false", "stale&consistent"} {
		if r := e.do("GET", "/jobs?"+q, headTok, nil); r.Code != http.StatusOK {
			t.Errorf("?%s: %d %s", q, r.Code, r.Body)
		}
	}
	for _, c := range []struct{ path, says string }{
		{"/jobs?consistent=maybe", `?consistent must be given alone (?consistent), or as consistent=true or consistent=false, not "maybe"`},
		{"/jobs?consistent&consistent=1", `not "1"`},
		{"/v1/state?stale=maybe", `?stale must be given alone`},
		{"/api/tasks?stale=maybe", "stale must be true or false"},
		{"/jobs?limit=%zz", `"%zz" is not a valid %-escape`},
		{"/jobs?limit=1;cursor=2", "separated by &, not ;"},
	} {
		er := e.do("GET", c.path, headTok, nil).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: message %q does not say %q", c.path, msg, c.says)
		}
	}
	// The filter of GET /api/tasks stays a filter.
	if r := e.do("GET", "/api/tasks?stale=true", headTok, nil); r.Code != http.StatusOK {
		t.Errorf("/api/tasks?stale=true: %d %s", r.Code, r.Body)
	}
}

// A node id in a cluster request follows the --node-id rule: a huge one
// or one with a NUL is refused without being echoed, and the cluster is
// not asked to do anything.
func TestClusterNodeIDsChecked(t *testing.T) {
	e := newFuzzEnv(t)
	huge := strings.Repeat("n", 100<<10)
	for _, c := range []struct{ path, body string }{
		{"/cluster/remove", `{"node_id":"` + huge + `"}`},
		{"/cluster/remove", `{"node_id":"n\u00002"}`},
		{"/cluster/remove", `{"node_id":"-n2"}`},
		{"/cluster/remove", `{"node_id":"n 2"}`},
		{"/cluster/join", `{"node_id":"n\u00009","raft_addr":"127.0.0.1:1"}`},
		{"/cluster/transfer-leader", `{"to":"` + huge + `"}`},
	} {
		r := e.do("POST", c.path, headTok, c.body)
		er := r.apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, "letters, digits") || len(r.Body) > 512 {
			t.Errorf("%s %.40s: %s", c.path, c.body, r.Body)
		}
	}
	if len(e.fc.removed)+len(e.fc.joined)+len(e.fc.transferTo) != 0 {
		t.Fatalf("the cluster was asked: removed %q joined %v transfer %q", e.fc.removed, e.fc.joined, e.fc.transferTo)
	}
	if r := e.do("POST", "/cluster/remove", headTok, `{"node_id":"spine-2.example.com"}`); r.Code != http.StatusOK {
		t.Fatalf("a host name as node id: %d %s", r.Code, r.Body)
	}
}

// Refusals speak the API's terms: a runAt that is not a time names the
// field and the form it takes (not Go's layout), a value of the wrong
// type names JSON's types.
func TestRefusalsSpeakTheAPIsTerms(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ body, says string }{
		{`{"payload":1,"runAt":"tomorrow"}`, `runAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not "tomorrow"`},
		{`{"payload":1,"runAt":5}`, `runAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not 5`},
		{`{"payload":1,"runAt":"2026-13-01T00:00:00Z"}`, `runAt must be an RFC 3339 time`},
		{`{"payload":1,"requires":[true]}`, `field "requires" must be a string, not true or false`},
		{`{"payload":1,"maxAttempts":1e99}`, `field "maxAttempts" must be a whole number, not the number 1e99`},
	} {
		r := e.do("POST", "/jobs", headTok, c.body)
		er := r.apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: message %q does not say %q", c.body, msg, c.says)
		}
		for _, goTerm := range []string{"2006-01-02", "time.Time", "UnmarshalJSON", "Go struct", "json:", "int64", "bool"} {
			if strings.Contains(string(r.Body), goTerm) {
				t.Errorf("%s: the answer says %q: %s", c.body, goTerm, r.Body)
			}
		}
	}
	// A syntax error says where.
	er := e.do("POST", "/jobs", headTok, `{"payload":1,}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidJSON)
	if msg := er["message"].(string); !strings.Contains(msg, "at byte 14") {
		t.Errorf("syntax error: %q", msg)
	}
	// A runAt in the right form is taken.
	if r := e.do("POST", "/jobs", headTok, `{"payload":1,"runAt":"2026-01-02T15:04:05Z"}`); r.Code != http.StatusCreated {
		t.Fatalf("runAt: %d %s", r.Code, r.Body)
	}
}

// A 500 says nothing of what went wrong inside (it is logged): no Go
// error text, no addresses.
func TestInternalErrorsSayNothingInside(t *testing.T) {
	e := newEnv(t)
	e.fc.mu.Lock()
	e.fc.statusErr = &internalLeak{}
	e.fc.mu.Unlock()
	r := e.do("GET", "/cluster/status", headTok, nil)
	er := r.apiErr(t, http.StatusInternalServerError, api.CodeInternal)
	if msg := er["message"].(string); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "dial") {
		t.Fatalf("the 500 echoes the error: %q", msg)
	}
}

type internalLeak struct{}

func (*internalLeak) Error() string { return "dial tcp 127.0.0.1:36726: *raft.NetworkTransport closed" }
