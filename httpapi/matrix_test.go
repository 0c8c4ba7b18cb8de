package httpapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// The bad-input matrix: every route, as every role, with a malformed
// body, a body of another media type, an oversized body and oversized
// headers. Whatever the route, the answer is never a 5xx, a refusal is the
// API's JSON error, and a refused request changes nothing (the state
// machine applies no entry). The web UI's routes take forms and have their
// own tests. (A refused command may still take a log entry, which the
// state machine refuses: what must not change is the state.)
func TestBadInputMatrix(t *testing.T) {
	e := newEnv(t)
	// A job to aim the {id} routes at, so refusals come from reading the
	// body rather than from a missing job.
	id := e.create(map[string]interface{}{"payload": map[string]int{"n": 1}})["id"].(string)
	routes := servedRoutes(t, e.srv)
	sort.Strings(routes)
	bodies := []struct {
		name, ctype string
		body        string
		hdr         []string
	}{
		{"malformed JSON", "application/json", `{"payload":`, nil},
		{"text/plain", "text/plain", `{"payload":{}}`, nil},
		{"a JSON array", "application/json", `[1,2]`, nil},
		{"an unknown field", "application/json", `{"zzUnknownField":1}`, nil},
		{"oversized body", "application/json", `{"payload":"` + strings.Repeat("x", 2<<20) + `"}`, nil},
		{"oversized headers", "application/json", `{}`, []string{"X-Pad", strings.Repeat("p", MaxHeaderBytes)}},
	}
	tokens := map[string]string{"head": headTok, "left_claw": leftTok, "right_claw": rightTok}
	checked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		if strings.HasPrefix(path, "/ui") || route == "GET /v1/events" || route == "GET /ui/events" {
			continue // forms and streams: their own tests
		}
		path = strings.NewReplacer("{id}", id, "{name}", "nosuch", "{step}", "start").Replace(path)
		for role, tok := range tokens {
			for _, b := range bodies {
				if (method == "GET" || route == "PUT /v1/snapshot") && b.name != "oversized headers" {
					continue // no body read; a backup archive is checked by its own tests
				}
				before := stateOf(e, id)
				hdr := append([]string{"Content-Type", b.ctype}, b.hdr...)
				r := e.do(method, path, tok, b.body, hdr...)
				checked++
				what := route + " as " + role + " with " + b.name
				if r.Code >= 500 {
					t.Errorf("%s: %d %s", what, r.Code, trim(r.Body))
					continue
				}
				if after := stateOf(e, id); after != before && r.Code >= 300 {
					t.Errorf("%s: refused (%d) but the state changed:\n%s\n%s", what, r.Code, before, after)
				}
				if r.Code < 300 {
					// Accepted: never, but an oversized body where the
					// route's limit is higher (a blob).
					if b.name != "oversized body" {
						t.Errorf("%s: accepted (%d) %s", what, r.Code, trim(r.Body))
					}
					continue
				}
				var eb struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(r.Body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
					t.Errorf("%s: %d answer is not the API's JSON error: %s", what, r.Code, trim(r.Body))
				}
				if b.name == "oversized headers" && r.Code != http.StatusRequestHeaderFieldsTooLarge {
					t.Errorf("%s: %d, want 431", what, r.Code)
				}
			}
		}
	}
	if checked < 300 {
		t.Fatalf("the matrix checked only %d requests", checked)
	}
}

// stateOf renders what a request could change: the counts of everything,
// the aimed-at job, the registry and the catalogs.
func stateOf(e *env, id string) string {
	r := e.fc.fsm.Read()
	sum := r.Summary()
	sum.Index = 0
	j, _ := r.Job(id)
	b, _ := json.Marshal([]interface{}{sum, j, r.Registry(), r.Sessions(), r.Streams(""), r.Gateways(), r.Workers("")})
	return string(b)
}

func trim(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
