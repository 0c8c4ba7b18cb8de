package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// A misspelt field, a body of another media type, an array, trailing data,
// a number JSON cannot give an integer field, oversized headers: each is
// refused naming what is wrong, in the API's JSON, and changes nothing.
func TestBadBodiesAreRefusedAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	before := e.do("GET", "/jobs", headTok, nil)
	cases := []struct {
		name, path, ctype, body string
		status                  int
		code, says              string
	}{
		{"misspelt field", "/jobs", "application/json", `{"payload":{},"maxAtempts":2}`, 400, "invalid_request", `unknown field "maxAtempts" (did you mean "maxAttempts"?)`},
		{"text/plain", "/jobs", "text/plain", `{"payload":{}}`, 415, "unsupported_media_type", "Content-Type: application/json"},
		{"a form", "/jobs", "application/x-www-form-urlencoded", `{"payload":{}}`, 415, "unsupported_media_type", "must be JSON"},
		{"an array", "/jobs", "application/json", `[{"payload":{}}]`, 400, "invalid_request", "must be a JSON object ({\"field\": value, ...}), not an array"},
		{"trailing data", "/jobs", "application/json", `{"payload":{}} {"payload":{}}`, 400, "invalid_json", "nothing after it"},
		{"a string for a number", "/jobs", "application/json", `{"payload":{},"maxAttempts":"3"}`, 400, "invalid_request", `field "maxAttempts" must be a whole number, not a string`},
		{"exponent for an integer", "/internal/worker/claim", "application/json", `{"worker_id":"w","max_wait_ms":1e12}`, 400, "invalid_request", "waits are capped at 30000"},
	}
	for _, c := range cases {
		tok := headTok
		if strings.HasPrefix(c.path, "/internal/") {
			tok = leftTok
		}
		r := e.do("POST", c.path, tok, c.body, "Content-Type", c.ctype)
		er := r.apiErr(t, c.status, c.code)
		if msg, _ := er["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: message %q does not say %q", c.name, msg, c.says)
		}
		for _, goName := range []string{"httpapi.", "int64", "api.Job", "struct"} {
			if strings.Contains(string(r.Body), goName) {
				t.Errorf("%s: the answer names Go's types: %s", c.name, r.Body)
			}
		}
	}
	if after := e.do("GET", "/jobs", headTok, nil); !bytes.Equal(after.Body, before.Body) {
		t.Fatalf("refused bodies changed the jobs:\n%s\n%s", before.Body, after.Body)
	}
	// No Content-Type at all is read as JSON.
	req := e.do("POST", "/jobs", headTok, `{"payload":{"n":1}}`, "Content-Type", "")
	if req.Code != http.StatusCreated {
		t.Fatalf("a JSON body without Content-Type: %d %s", req.Code, req.Body)
	}

	// Headers past the limit: 431 in JSON.
	big := strings.Repeat("x", MaxHeaderBytes)
	e.do("GET", "/jobs", headTok, nil, "X-Big", big).apiErr(t, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large")
}

// A claw's refusal never shows a job it may not read: a right claw's claim,
// heartbeat or complete of a job targeted at the left claw answers 404, as
// its read does, with no job in the answer.
func TestRefusalsShowNoJobTheCallerCannotRead(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{"target": "left_claw", "payload": map[string]string{"secret": "s3cr3t"}})["id"].(string)
	e.do("GET", "/jobs/"+id, rightTok, nil).apiErr(t, http.StatusNotFound, "not_found")
	for _, verb := range []string{"claim", "heartbeat", "complete", "fail", "release", "comment"} {
		r := e.do("POST", "/jobs/"+id+"/"+verb, rightTok, `{"text":"x"}`)
		if verb != "comment" {
			r = e.do("POST", "/jobs/"+id+"/"+verb, rightTok, `{}`)
		}
		if r.Code != http.StatusNotFound || bytes.Contains(r.Body, []byte("s3cr3t")) || bytes.Contains(r.Body, []byte(`"job"`)) {
			t.Errorf("right claw's %s of a left-targeted job: %d %s", verb, r.Code, r.Body)
		}
	}
	// The left claw claims it and reads it.
	e.claim(id, leftTok)
	if r := e.do("GET", "/jobs/"+id, leftTok, nil); r.Code != http.StatusOK {
		t.Fatalf("the holder's read: %d %s", r.Code, r.Body)
	}
	// Now running under the left claw, it is still hidden from the right.
	if r := e.do("POST", "/jobs/"+id+"/heartbeat", rightTok, `{}`); r.Code != http.StatusNotFound || bytes.Contains(r.Body, []byte("s3cr3t")) {
		t.Errorf("right claw's heartbeat of the left claw's running job: %d %s", r.Code, r.Body)
	}
}
