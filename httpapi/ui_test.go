package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/spine-queue/spine/cluster"
	"github.com/spine-queue/spine/fsm"
)

// uiLogin logs in with token through the form and returns the session
// cookie.
func uiLogin(t *testing.T, e *env, token string) *http.Cookie {
	t.Helper()
	r := e.do("POST", "/ui/login", "", "token="+url.QueryEscape(token)+"&next=/ui/cluster", "Content-Type", "application/x-www-form-urlencoded")
	if r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/ui/cluster" {
		t.Fatalf("login: %d %s %s", r.Code, r.Header.Get("Location"), r.Body)
	}
	res := http.Response{Header: r.Header}
	for _, c := range res.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

func (e *env) page(method, path string, ck *http.Cookie, form string, hdr ...string) resp {
	e.t.Helper()
	h := append([]string{"Cookie", ck.Name + "=" + ck.Value}, hdr...)
	if form != "" {
		h = append(h, "Content-Type", "application/x-www-form-urlencoded")
		return e.do(method, path, "", form, h...)
	}
	return e.do(method, path, "", nil, h...)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// The UI's login: a wrong token gets the form again and no cookie; a
// right one an HttpOnly, SameSite=Strict session cookie valid for the UI;
// pages without a session send the browser to the login form; a forged or
// rotated-out session is refused.
func TestUILogin(t *testing.T) {
	e := newEnv(t)
	if r := e.do("GET", "/", "", nil); r.Code != http.StatusSeeOther || r.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /: %d %s", r.Code, r.Header.Get("Location"))
	}
	if r := e.do("GET", "/ui/tasks?state=dead", "", nil); r.Code != http.StatusSeeOther ||
		r.Header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/tasks?state=dead") {
		t.Fatalf("no session: %d %s", r.Code, r.Header.Get("Location"))
	}
	bad := e.do("POST", "/ui/login", "", "token=nope", "Content-Type", "application/x-www-form-urlencoded")
	if bad.Code != http.StatusUnauthorized || !strings.Contains(string(bad.Body), "not accepted") || bad.Header.Get("Set-Cookie") != "" {
		t.Fatalf("wrong token: %d %q %s", bad.Code, bad.Header.Get("Set-Cookie"), bad.Body)
	}
	ck := uiLogin(t, e, headTok)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.MaxAge <= 0 {
		t.Fatalf("cookie: %+v", ck)
	}
	if r := e.page("GET", "/ui/", ck, ""); r.Code != 200 || !strings.Contains(string(r.Body), "Dashboard") {
		t.Fatalf("dashboard: %d %s", r.Code, r.Body)
	}
	forged := *ck
	forged.Value = strings.Replace(ck.Value, ".", ".x", 1)
	if r := e.page("GET", "/ui/cluster", &forged, ""); r.Code != http.StatusSeeOther {
		t.Fatalf("forged session: %d", r.Code)
	}
	// The session names its role: a claw's cookie relabelled head fails.
	claw := uiLogin(t, e, leftTok)
	enc, mac, _ := strings.Cut(claw.Value, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(enc)
	relabelled := *claw
	relabelled.Value = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), RoleLeftClaw, RoleHead, 1))) + "." + mac
	if r := e.page("GET", "/ui/cluster", &relabelled, ""); r.Code != http.StatusSeeOther {
		t.Fatalf("relabelled session: %d", r.Code)
	}
	// A live refresh gets the page's main part only.
	if r := e.page("GET", "/ui/tasks", claw, "", "X-Spine-Fragment", "1"); r.Code != 200 || strings.Contains(string(r.Body), "<html") ||
		!strings.Contains(string(r.Body), "<h1>Tasks</h1>") {
		t.Fatalf("fragment: %d %.80s", r.Code, r.Body)
	}
	// Logging out clears the cookie.
	csrf := csrfRE.FindStringSubmatch(string(e.page("GET", "/ui/", ck, "").Body))[1]
	if r := e.page("POST", "/ui/logout", ck, "csrf="+url.QueryEscape(csrf)); r.Code != http.StatusSeeOther || !strings.Contains(r.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %q", r.Code, r.Header.Get("Set-Cookie"))
	}
	if r := e.page("POST", "/ui/logout", ck, "csrf=forged"); r.Code != http.StatusForbidden {
		t.Fatalf("logout without the CSRF token: %d", r.Code)
	}
}

// Forms: a redrive needs head (the server says so, whatever the page
// shows) and the session's CSRF token, and changes nothing otherwise.
func TestUIRedriveIsHeadsAndNeedsCSRF(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]interface{}{"maxAttempts": 1})["id"].(string)
	e.do("POST", "/jobs/"+id+"/claim", leftTok, nil)
	e.do("POST", "/jobs/"+id+"/fail", leftTok, map[string]interface{}{"error": map[string]string{"message": "x"}, "requeue": false})
	if j := e.job(id); j.State != fsm.StateFailed {
		t.Fatalf("setup: %s", j.State)
	}
	head, claw := uiLogin(t, e, headTok), uiLogin(t, e, leftTok)
	page := string(e.page("GET", "/ui/cluster", head, "").Body)
	if !strings.Contains(page, `action="/ui/tasks/`+id+`/redrive"`) {
		t.Fatalf("the dead letters miss the job:\n%s", page)
	}
	if strings.Contains(string(e.page("GET", "/ui/cluster", claw, "").Body), "/redrive") {
		t.Fatal("a claw's cluster page offers a redrive")
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	clawCSRF := csrfRE.FindStringSubmatch(string(e.page("GET", "/ui/", claw, "").Body))[1]
	if r := e.page("POST", "/ui/tasks/"+id+"/redrive", claw, "csrf="+url.QueryEscape(clawCSRF)); r.Code != http.StatusForbidden {
		t.Fatalf("a claw's redrive: %d", r.Code)
	}
	if r := e.page("POST", "/ui/tasks/"+id+"/redrive", head, "csrf="+url.QueryEscape(clawCSRF)); r.Code != http.StatusForbidden {
		t.Fatalf("head's redrive with another session's token: %d", r.Code)
	}
	if j := e.job(id); j.State != fsm.StateFailed {
		t.Fatalf("a refused redrive changed the job: %s", j.State)
	}
	if r := e.page("POST", "/ui/tasks/"+id+"/redrive", head, "csrf="+url.QueryEscape(csrf)+"&back=/ui/cluster"); r.Code != http.StatusSeeOther ||
		r.Header.Get("Location") != "/ui/cluster" {
		t.Fatalf("redrive: %d %s %s", r.Code, r.Header.Get("Location"), r.Body)
	}
	if j := e.job(id); j.State != fsm.StateQueued {
		t.Fatalf("after the redrive: %s", j.State)
	}
	if r := e.page("GET", "/ui/tasks/nope", head, ""); r.Code != http.StatusNotFound || !strings.Contains(string(r.Body), "not found") {
		t.Fatalf("unknown task: %d", r.Code)
	}
	if r := e.page("GET", "/ui/tasks?state=bogus", head, ""); r.Code != http.StatusBadRequest {
		t.Fatalf("bad filter: %d", r.Code)
	}
}

// The task list marks a running task past its timeout stale (yellow) and
// one auto-failed at twice it (red); only head gets the requeue button.
func TestUITaskMarks(t *testing.T) {
	e := newEnv(t)
	apply := func(ct fsm.CommandType, cmd interface{}) {
		t.Helper()
		res, _, err := e.fc.Apply(context.Background(), fsm.MustEncode(ct, cmd))
		if err != nil || res.(*fsm.Result).Err != nil {
			t.Fatalf("%v: %v %v", ct, err, res)
		}
	}
	now, head := testNow.UnixNano(), fsm.Actor{Role: fsm.HeadRole}
	apply(fsm.CmdRegistrySet, &fsm.RegistrySetCommand{Now: now, Actor: head, Registry: fsm.Registry{Classes: fsm.DefaultTaskClasses,
		Tools: []fsm.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}})
	apply(fsm.CmdSessionCreate, &fsm.SessionCreateCommand{Now: now, ID: "ses_1", Name: "s", Actor: head})
	apply(fsm.CmdStreamCreate, &fsm.StreamCreateCommand{Now: now, ID: "str_1", Name: "web", Session: "s", Actor: head})
	// tsk_stale: claimed 90 s ago with a 60 s timeout (lease 120 s): stale.
	// tsk_dead: claimed 200 s ago, its lease gone 80 s ago: auto-failed.
	for _, tk := range []struct {
		id  string
		ago int64
	}{{"tsk_stale", 90}, {"tsk_dead", 200}} {
		at := now - tk.ago*1e9
		apply(fsm.CmdTaskCreate, &fsm.TaskCreateCommand{Now: at, ID: tk.id, Stream: "web", ToolName: "run-bash", Timeout: 60,
			Payload: []byte(`{}`), Actor: head})
		apply(fsm.CmdClaim, &fsm.ClaimCommand{Now: at, JobID: tk.id, Targets: []string{"left_claw"}, Actor: fsm.Actor{Role: "left_claw"},
			AttemptID: "a-" + tk.id, LeaseToken: "t-" + tk.id, LeaseNanos: 120e9})
	}
	apply(fsm.CmdReap, &fsm.ReapCommand{Now: now, Max: 10})
	page := string(e.page("GET", "/ui/tasks?stream=web", uiLogin(t, e, headTok), "").Body)
	for id, class := range map[string]string{"tsk_stale": "stale", "tsk_dead": "autofailed"} {
		if !regexp.MustCompile(`<tr data-id="` + id + `" data-status="[a-z]+" class="` + class + `">`).MatchString(page) {
			t.Fatalf("%s is not marked %s:\n%s", id, class, page)
		}
	}
	if !strings.Contains(page, `action="/ui/tasks/tsk_dead/requeue"`) {
		t.Fatal("no requeue for head on the auto-failed task")
	}
	if claw := string(e.page("GET", "/ui/tasks?stream=web", uiLogin(t, e, leftTok), "").Body); strings.Contains(claw, "/requeue") {
		t.Fatal("a claw is offered a requeue")
	}
}

// The cluster page says how each gateway gets its tasks, and never shows
// a push gateway's signing secret.
func TestUIClusterShowsGatewayDelivery(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	r := e.do("POST", "/v1/gateways", headTok, map[string]any{"id": "gw-push", "address": "http://10.0.0.7:7000/tasks", "capacity": 2,
		"delivery": "push", "role": fsm.RoleRightClaw, "secret": "a-secret-of-twenty-bytes"})
	if r.Code != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Code, r.Body)
	}
	e.do("POST", "/v1/gateways", headTok, map[string]any{"id": "gw-pull", "address": "http://10.0.0.8:7000", "capacity": 2})
	page := string(e.page("GET", "/ui/cluster", uiLogin(t, e, headTok), "").Body)
	if !strings.Contains(page, "push to right_claw") || !strings.Contains(page, "<td>pull</td>") || strings.Contains(page, "a-secret-of-twenty-bytes") {
		t.Fatalf("cluster page:\n%s", page)
	}
}

// The cluster page shows the cluster's level in force and the highest
// level each node's build supports (— for a node not heard from).
func TestUIClusterShowsLevels(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LevelIdentity))
	two := 2
	e.fc.mu.Lock()
	e.fc.status.Nodes[0].SupportedLevel = &two
	e.fc.status.Nodes = append(e.fc.status.Nodes, cluster.NodeStatus{ID: "n2", RaftAddr: "127.0.0.1:1", Suffrage: "voter"})
	e.fc.mu.Unlock()
	page := string(e.page("GET", "/ui/cluster", uiLogin(t, e, headTok), "").Body)
	for _, want := range []string{`<dd id="level">1</dd>`, `<td class="level">up to 2</td>`, `<td class="level">—</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("cluster page lacks %s:\n%s", want, page)
		}
	}
}
