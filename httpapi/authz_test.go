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
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The authorization matrix, generated from the route table, so a route is
// covered the day it is added: every route of the API and of the web UI
// has an authorization rule, the API's as documented (x-roles in
// docs/openapi.yaml); every route is called with no token, a wrong one and
// each role's, and answers 401 or 403 exactly where the rule says; and the
// left claw, posing as the right claw (the right claw's worker id as its
// worker or agent id, the right claw's role name as one, the right claw's
// lease token, the ids of the right claw's jobs), never gets an answer
// that carries a job it may not read, never changes one, changes nothing
// when refused, and is answered about a job it may not read exactly as
// about an id that does not exist.

// scene is a cluster state where the right claw holds work the left claw
// must not see or touch.
type scene struct {
	e *env
	// held: targeted at the right claw's worker rw, running under rw's
	// lease. forRight: queued, targeted at the right claw. shared:
	// untargeted (the left claw may read it), running under rw's lease.
	held, heldAttempt, heldToken       string
	forRight                           string
	shared, sharedAttempt, sharedToken string
}

const (
	heldSecret     = "secret-of-the-held-job"
	forRightSecret = "secret-of-the-right-job"
	unknownJobID   = "00000000-0000-4000-8000-000000000000"
)

// newScene builds the scene at cluster level level: the latest, and 0 (a
// cluster still running a node of a build before the identity rules,
// where the service's checks alone must hold).
func newScene(t *testing.T, level int) *scene {
	t.Helper()
	n := 0
	e := newEnv(t, atLevel(level), func(c *envConfig) {
		// Ids no other id contains, for the search of answers.
		c.Queue.NewID = func() string { n++; return fmt.Sprintf("gen-%06d-id", n) }
	})
	if _, err := e.srv.queue.StartFeed(context.Background()); err != nil {
		t.Fatal(err)
	}
	sc := &scene{e: e}
	must := func(r resp) resp {
		t.Helper()
		if r.Code >= 300 {
			t.Fatalf("scene: %d %s", r.Code, r.Body)
		}
		return r
	}
	must(e.do("POST", "/v1/gateways", headTok, api.GatewayRegisterRequest{ID: "gw-r", Address: "http://10.0.0.7:7000", Capacity: 9}))
	must(e.do("POST", "/v1/workers", rightTok, api.WorkerRegisterRequest{ID: "rw", Gateway: "gw-r", Capacity: 2}))
	sc.forRight = e.create(map[string]interface{}{"stream": "r", "target": fsm.RoleRightClaw, "payload": map[string]string{"s": forRightSecret}})["id"].(string)
	sc.held = e.create(map[string]interface{}{"stream": "w", "target": "rw", "payload": map[string]string{"s": heldSecret}})["id"].(string)
	sc.shared = e.create(map[string]interface{}{"stream": "s"})["id"].(string)
	claim := func(stream string) (string, string, string) {
		var c api.WorkerClaim
		if err := json.Unmarshal(must(e.do("POST", "/internal/worker/claim", rightTok, api.WorkerClaimRequest{WorkerID: "rw", Streams: []string{stream}})).Body, &c); err != nil || !c.Claimed {
			t.Fatalf("scene claim of %s: %v %+v", stream, err, c)
		}
		return c.JobID, c.AttemptID, c.LeaseToken
	}
	var id string
	if id, sc.heldAttempt, sc.heldToken = claim("w"); id != sc.held {
		t.Fatalf("scene: rw claimed %s, not the held job", id)
	}
	if id, sc.sharedAttempt, sc.sharedToken = claim("s"); id != sc.shared {
		t.Fatalf("scene: rw claimed %s, not the shared job", id)
	}
	return sc
}

// secrets are what no answer to the left claw may carry, but for the id
// it named itself.
func (sc *scene) secrets(named string) []string {
	var out []string
	for _, s := range []string{sc.held, sc.forRight, heldSecret, forRightSecret, sc.heldToken, sc.sharedToken} {
		if s != named {
			out = append(out, s)
		}
	}
	return out
}

// theirs renders what a poser must never change: the jobs it may not
// read, and the lease and outcome of the one it may (a comment on it is
// its right).
func (sc *scene) theirs() string {
	r := sc.e.fc.fsm.Read()
	var out []string
	for _, id := range []string{sc.held, sc.forRight} {
		j, _ := r.Job(id)
		out = append(out, fmt.Sprintf("%s %s %d", id, j.State, j.ModifyIndex))
	}
	j, _ := r.Job(sc.shared)
	lease := "no lease"
	if j.Lease != nil {
		lease = j.Lease.Owner + "/" + j.Lease.WorkerID + " " + j.Lease.Token + " " + fmt.Sprint(j.Lease.ExpiresAt)
	}
	out = append(out, fmt.Sprintf("%s %s %s %s", j.ID, j.State, lease, j.Result))
	return strings.Join(out, "; ")
}

// pose is one way the left claw poses as the right claw.
type pose struct {
	name   string
	worker string // as worker_id, workerId, agent_id
	job    string // the job it aims at (path {id}, job_id)
	token  string // the lease token (and attempt) it carries
	atmpt  string
	// hidden: the job aimed at is one the left claw may not read, so the
	// answer must be the unknown id's.
	hidden bool
}

func (sc *scene) poses() []pose {
	return []pose{
		{"with the right claw's worker id", "rw", sc.held, sc.heldToken, sc.heldAttempt, true},
		{"with the right claw's role name as its worker id", fsm.RoleRightClaw, sc.held, sc.heldToken, sc.heldAttempt, true},
		{"aiming at a job targeted at the right claw", "lw", sc.forRight, "", "", true},
		{"with the right claw's lease token on a job both may read", "lw", sc.shared, sc.sharedToken, sc.sharedAttempt, false},
		{"with the right claw's lease token and worker id", "rw", sc.shared, sc.sharedToken, sc.sharedAttempt, false},
	}
}

// request is one call of a route, its path parameters filled in.
type request struct {
	method, path string
	fields       map[string]interface{} // the JSON body's fields (nil: no body)
}

// requestFor fills a route's template for a pose: the job id in {id} and
// job_id, the worker in worker and agent ids (fields and query), the lease
// in the lease fields.
func requestFor(route string, p pose) request {
	method, path, _ := strings.Cut(route, " ")
	path = strings.NewReplacer("{id}", p.job, "{name}", "r", "{op}", "list", "{$}", "").Replace(path)
	q := "worker_id=" + p.worker + "&agent_id=" + p.worker + "&streams=r,w,s&job=" + p.job + "&after=0"
	path += "?" + q
	req := request{method: method, path: path}
	if method != "GET" && method != "DELETE" {
		req.fields = map[string]interface{}{
			"worker_id": p.worker, "workerId": p.worker, "agent_id": p.worker, "job_id": p.job,
			"streams": []string{"r", "w", "s"}, "stream": "r", "result": map[string]string{"summary": "stolen"},
			"error": map[string]string{"message": "stolen"}, "text": "a comment", "payload": map[string]int{"n": 1},
		}
		if p.token != "" {
			for k, v := range map[string]string{"lease_token": p.token, "leaseToken": p.token, "attempt_id": p.atmpt, "attemptId": p.atmpt} {
				req.fields[k] = v
			}
		}
	}
	return req
}

var unknownFieldRE = regexp.MustCompile(`unknown field \\?"([^"\\]+)\\?"`)

// send sends req as token (or with the UI session cookie), dropping each
// field the route names as unknown until it takes the body's shape.
func (sc *scene) send(req request, token string, cookie *http.Cookie, csrf string) resp {
	fields := map[string]interface{}{}
	for k, v := range req.fields {
		fields[k] = v
	}
	for range 32 {
		var body interface{}
		hdr := []string{}
		if req.fields != nil {
			body = fields
		}
		if cookie != nil {
			hdr = append(hdr, "Cookie", cookie.Name+"="+cookie.Value)
			if req.method == "POST" {
				body = "csrf=" + csrf
				hdr = append(hdr, "Content-Type", "application/x-www-form-urlencoded")
			}
		}
		var r resp
		if strings.HasPrefix(req.path, "/v1/events") || strings.HasPrefix(req.path, "/ui/events") {
			r = sc.stream(req, token, hdr)
		} else {
			r = sc.e.do(req.method, req.path, token, body, hdr...)
		}
		m := unknownFieldRE.FindSubmatch(r.Body)
		if r.Code != http.StatusBadRequest || m == nil || fields[string(m[1])] == nil {
			return r
		}
		delete(fields, string(m[1]))
	}
	sc.e.t.Fatalf("%s %s: the body never took the route's shape", req.method, req.path)
	return resp{}
}

// stream reads an event stream's events so far: the request ends at its
// first flush, once it has sent the events the feed holds.
func (sc *scene) stream(req request, token string, hdr []string) resp {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr := httptest.NewRequest(req.method, req.path, nil).WithContext(ctx)
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		hr.Header.Set(hdr[i], hdr[i+1])
	}
	rec := &flushCancel{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
	sc.e.h.ServeHTTP(rec, hr)
	return resp{Code: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// flushCancel ends its request at the first flush after the stream's
// opening (the retry line).
type flushCancel struct {
	*httptest.ResponseRecorder
	cancel  func()
	flushes int
}

func (f *flushCancel) Flush() {
	f.ResponseRecorder.Flush()
	if f.flushes++; f.flushes >= 2 {
		f.cancel()
	}
}

func TestAuthorizationCoversEveryRoute(t *testing.T) {
	probe := newScene(t, fsm.LatestLevel)
	doc, _ := loadOpenAPI(t)
	documented := documentedRoutes(doc)
	routes := make([]string, 0, len(probe.e.srv.allowed))
	for r := range probe.e.srv.allowed {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	roles := map[string]string{fsm.HeadRole: headTok, fsm.RoleLeftClaw: leftTok, fsm.RoleRightClaw: rightTok}

	// Every API route's rule is the documented one.
	for _, route := range servedRoutes(t, probe.e.srv) {
		op, ok := documented[route]
		if !ok {
			continue // TestOpenAPIMatchesRouter names it
		}
		var want allow
		xr, ok := op["x-roles"].([]interface{})
		if !ok {
			t.Errorf("%s: docs/openapi.yaml gives it no x-roles", route)
			continue
		}
		for _, r := range xr {
			switch r {
			case fsm.HeadRole:
				want |= allowHead
			case fsm.RoleLeftClaw, fsm.RoleRightClaw:
				want |= allowClaws
			}
		}
		if want == 0 {
			want = allowPublic
		}
		if got := probe.e.srv.allowed[route] &^ allowGlobal; got != want {
			t.Errorf("%s: the route allows %v, docs/openapi.yaml says %v", route, got, xr)
		}
	}

	checked := 0
	for _, route := range routes {
		who := probe.e.srv.allowed[route]
		ui := strings.Contains(route, " /ui/")
		base := requestFor(route, pose{worker: "lw", job: unknownJobID})

		// Without a credential, with a wrong one, and with each role's.
		if who != allowPublic {
			for _, tok := range []string{"", "not-a-token"} {
				sc := newScene(t, fsm.LatestLevel)
				before := stateOf(sc.e, sc.held)
				var r resp
				if ui {
					r = sc.send(base, "", &http.Cookie{Name: sessionCookie, Value: tok}, "")
				} else {
					r = sc.send(base, tok, nil, "")
				}
				checked++
				switch {
				case ui && (r.Code == http.StatusSeeOther || r.Code == http.StatusUnauthorized):
				case !ui && r.Code == http.StatusUnauthorized && apiCode(r) == api.CodeUnauthorized:
				default:
					t.Errorf("%s with token %q: %d %s, want 401 (or the UI's login)", route, tok, r.Code, trim(r.Body))
				}
				if stateOf(sc.e, sc.held) != before {
					t.Errorf("%s with token %q changed the state", route, tok)
				}
			}
		}
		for role, tok := range roles {
			method, _, _ := strings.Cut(route, " ")
			if who.permits(queue.RoleCaller(role), method) || who == allowPublic {
				continue // allowed: what it may do is the queue's to say (below, and each route's tests)
			}
			sc := newScene(t, fsm.LatestLevel)
			before := stateOf(sc.e, sc.held)
			var r resp
			if ui {
				ck := uiLogin(t, sc.e, tok)
				r = sc.send(base, "", ck, csrfOf(t, sc.e, ck))
			} else {
				r = sc.send(base, tok, nil, "")
			}
			checked++
			if r.Code != http.StatusForbidden || (!ui && apiCode(r) != api.CodeForbidden) {
				t.Errorf("%s as %s: %d %s, want 403 forbidden", route, role, r.Code, trim(r.Body))
			}
			if stateOf(sc.e, sc.held) != before {
				t.Errorf("%s as %s (forbidden) changed the state", route, role)
			}
		}

		// The left claw posing as the right claw.
		if !who.permits(queue.RoleCaller(fsm.RoleLeftClaw), "POST") {
			continue
		}
		for _, level := range []int{fsm.LatestLevel, 0} {
			for _, p := range probe.poses() {
				sc := newScene(t, level)
				ps := sc.poses()
				p := ps[slicesIndex(probe.poses(), p.name)]
				req := requestFor(route, p)
				var ck *http.Cookie
				csrf := ""
				if ui {
					ck = uiLogin(t, sc.e, leftTok)
					csrf = csrfOf(t, sc.e, ck)
				}
				before, theirs := stateOf(sc.e, sc.held), sc.theirs()
				r := sc.send(req, leftTok, ck, csrf)
				checked++
				what := fmt.Sprintf("%s as the left claw %s (level %d)", route, p.name, level)
				for _, s := range sc.secrets(p.job) {
					if strings.Contains(string(r.Body), s) {
						t.Errorf("%s: %d answer carries %q: %s", what, r.Code, s, trim(r.Body))
					}
				}
				if sc.theirs() != theirs {
					t.Errorf("%s: %d %s: the right claw's jobs changed:\n%s\n%s", what, r.Code, trim(r.Body), theirs, sc.theirs())
				}
				if r.Code >= 300 && stateOf(sc.e, sc.held) != before {
					t.Errorf("%s: refused (%d) but the state changed", what, r.Code)
				}
				if r.Code >= 500 {
					t.Errorf("%s: %d %s", what, r.Code, trim(r.Body))
				}
				if !p.hidden || ui {
					continue
				}
				// About a job it may not read, the answer is the unknown id's.
				other := newScene(t, level)
				unknown := p
				unknown.job = unknownJobID
				u := other.send(requestFor(route, unknown), leftTok, nil, "")
				got := strings.ReplaceAll(string(r.Body), p.job, "ID")
				want := strings.ReplaceAll(string(u.Body), unknownJobID, "ID")
				if r.Code >= 300 || u.Code >= 300 {
					if r.Code != u.Code || got != want {
						t.Errorf("%s: answered %d %s; an unknown id %d %s", what, r.Code, trim([]byte(got)), u.Code, trim([]byte(want)))
					}
				}
			}
		}
	}
	if checked < 500 {
		t.Fatalf("the matrix checked only %d requests", checked)
	}
}

// apiCode is the code of an API error answer ("" if none).
func apiCode(r resp) string {
	var eb struct{ Error struct{ Code string } }
	_ = json.Unmarshal(r.Body, &eb)
	return eb.Error.Code
}

// csrfOf reads a UI session's CSRF token from a page.
func csrfOf(t *testing.T, e *env, ck *http.Cookie) string {
	t.Helper()
	m := csrfRE.FindSubmatch(e.page("GET", "/ui/cluster", ck, "").Body)
	if m == nil {
		t.Fatal("no CSRF token on the cluster page")
	}
	return string(m[1])
}

func slicesIndex(ps []pose, name string) int {
	for i, p := range ps {
		if p.name == name {
			return i
		}
	}
	return -1
}
