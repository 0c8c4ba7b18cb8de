package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// Schedules through the API: created, read, paused, resumed, triggered and
// deleted by head; every bad request is refused in the API's terms and
// changes nothing.
func TestScheduleRoutes(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	good := `{"name":"nightly","cron":"0 30 2 * * *","timezone":"Europe/Paris","overlap":"queue","catchup":"all","catchupWindowSeconds":600,
		"note":"n","job":{"payload":{"k":1},"stream":"reports","priority":5,"maxAttempts":2,"requires":["gpu"]}}`
	r := e.do("POST", "/v1/schedules", headTok, good)
	if r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	var sc api.Schedule
	decodeAs(r, &sc)
	if sc.Name != "nightly" || sc.NextFireAt.IsZero() || sc.Job.Stream != "reports" || sc.Job.Priority != 5 || sc.Overlap != "queue" ||
		sc.CatchupWindowSeconds != 600 || sc.Paused || len(sc.Recent) != 0 {
		t.Fatalf("created: %+v", sc)
	}
	if h, m, _ := sc.NextFireAt.In(mustZone(t, "Europe/Paris")).Clock(); h != 2 || m != 30 {
		t.Fatalf("next fire %v, want 02:30 in Paris", sc.NextFireAt)
	}
	e.do("POST", "/v1/schedules", headTok, good).apiErr(t, http.StatusConflict, api.CodeAlreadyExists)

	before := e.fc.fsm.AppliedIndex()
	bad := []struct{ body, want string }{
		{`{"name":"b","cron":"0 61 * * *","job":{"payload":1}}`, "cron"},
		{`{"name":"b","cron":"0 1 * * *","timezone":"Nowhere/Town","job":{"payload":1}}`, "IANA time zone"},
		{`{"name":"b","cron":"0 1 * * *","intervalSeconds":60,"job":{"payload":1}}`, "not both"},
		{`{"name":"b","job":{"payload":1}}`, "needs cron or intervalSeconds"},
		{`{"name":"b","intervalSeconds":60}`, "job is required"},
		{`{"name":"b","intervalSeconds":60,"job":{"payload":1},"colour":"red"}`, "colour"},
		{`{"name":"b","intervalSeconds":60,"job":{"payload":1,"colour":"red"}}`, "colour"},
		{`{"name":"b","intervalSeconds":60,"job":{"payload":1,"delaySeconds":5}}`, "delaySeconds"},
		{`{"name":"b","intervalSeconds":60,"job":{"payload":1,"idempotencyKey":"k"}}`, "idempotencyKey"},
		{`{"name":"b","intervalSeconds":60,"job":{"payload":1,"priority":500}}`, "priority"},
		{`{"name":"b","intervalSeconds":0.5,"job":{"payload":1}}`, "intervalSeconds"},
		{`{"name":"b","intervalSeconds":60,"overlap":"sometimes","job":{"payload":1}}`, "overlap"},
		{`{"name":"b","intervalSeconds":60,"catchup":"everything","job":{"payload":1}}`, "catchup"},
		{`{"name":"b","intervalSeconds":60,"catchupWindowSeconds":99999999,"job":{"payload":1}}`, "catchupWindowSeconds"},
		{`{"name":"b c","intervalSeconds":60,"job":{"payload":1}}`, "name"},
		{`{"name":"b","cron":"@every 5s","job":{"payload":1}}`, "intervalSeconds"},
	}
	for _, b := range bad {
		er := e.do("POST", "/v1/schedules", headTok, b.body).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		msg := er["message"].(string)
		if !strings.Contains(msg, b.want) || strings.Contains(msg, "fsm.") || strings.Contains(msg, "Command") {
			t.Errorf("%s: %q, want it to name %q", b.body, msg, b.want)
		}
	}
	big := `{"name":"big","intervalSeconds":60,"job":{"payload":"` + strings.Repeat("x", 400<<10) + `"}}`
	if r := e.do("POST", "/v1/schedules", headTok, big); r.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a template over a job's size: %d %s", r.Code, r.Body[:min(len(r.Body), 300)])
	}
	// A create may not take a schedule's key (it would stand for a tick).
	e.do("POST", "/jobs", headTok, `{"payload":1,"idempotencyKey":"schedule:nightly:1800000000"}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	e.do("PUT", "/v1/schedules/other", headTok, `{"name":"nightly","intervalSeconds":60,"job":{"payload":1}}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	e.do("PUT", "/v1/schedules/nope", headTok, `{"intervalSeconds":60,"job":{"payload":1}}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	if after := e.fc.fsm.AppliedIndex(); after != before+1 { // the refused replace of nope is an entry
		t.Fatalf("bad requests wrote %d entries", after-before)
	}

	// Read, pause, trigger, resume, replace, delete.
	var list api.ScheduleList
	decodeAs(e.do("GET", "/v1/schedules", headTok, nil), &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" {
		t.Fatalf("list: %+v", list)
	}
	sc = api.Schedule{}
	decodeAs(e.do("POST", "/v1/schedules/nightly/pause", headTok, nil), &sc)
	if !sc.Paused || !sc.NextFireAt.IsZero() {
		t.Fatalf("paused: %+v", sc)
	}
	r = e.do("POST", "/v1/schedules/nightly/trigger", headTok, nil)
	if r.Code != http.StatusCreated {
		t.Fatalf("trigger: %d %s", r.Code, r.Body)
	}
	var tr api.ScheduleTrigger
	decodeAs(r, &tr)
	if tr.Job.Schedule != "nightly" || tr.Job.Stream != "reports" || !strings.HasPrefix(tr.Job.IdempotencyKey, "schedule:nightly:trigger:") ||
		len(tr.Schedule.Recent) != 1 || tr.Schedule.Recent[0].JobID != tr.Job.ID || !tr.Schedule.Recent[0].Trigger {
		t.Fatalf("trigger: %+v", tr)
	}
	sc = api.Schedule{}
	decodeAs(e.do("POST", "/v1/schedules/nightly/resume", headTok, nil), &sc)
	if sc.Paused || sc.NextFireAt.IsZero() {
		t.Fatalf("resumed: %+v", sc)
	}
	e.do("POST", "/v1/schedules/nightly/pause", headTok, `{"why":1}`).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	sc = api.Schedule{}
	decodeAs(e.do("PUT", "/v1/schedules/nightly", headTok, `{"intervalSeconds":3600,"job":{"payload":2}}`), &sc)
	if sc.IntervalSeconds != 3600 || sc.Cron != "" || sc.Runs != 1 || sc.Overlap != "skip" || sc.Catchup != "latest" {
		t.Fatalf("replaced: %+v", sc)
	}
	if r := e.do("DELETE", "/v1/schedules/nightly", headTok, nil); r.Code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Code, r.Body)
	}
	for _, rq := range [][2]string{{"GET", "/v1/schedules/nightly"}, {"DELETE", "/v1/schedules/nightly"}, {"POST", "/v1/schedules/nightly/pause"},
		{"POST", "/v1/schedules/nightly/resume"}, {"POST", "/v1/schedules/nightly/trigger"}} {
		er := e.do(rq[0], rq[1], headTok, nil).apiErr(t, http.StatusNotFound, api.CodeNotFound)
		if msg := er["message"].(string); !strings.Contains(msg, "schedule nightly") {
			t.Errorf("%s %s: %q", rq[0], rq[1], msg)
		}
	}
	// The job it made stays, says which schedule made it, and is listed
	// by the schedule's name.
	if j := e.job(tr.Job.ID); j == nil || j.Extra().Schedule != "nightly" {
		t.Fatal("the triggered job is gone")
	}
	e.create(map[string]interface{}{"stream": "reports"})
	var jl api.JobList
	decodeAs(e.do("GET", "/jobs?schedule=nightly", headTok, nil), &jl)
	if len(jl.Jobs) != 1 || jl.Jobs[0].ID != tr.Job.ID {
		t.Fatalf("GET /jobs?schedule=nightly: %+v", jl.Jobs)
	}
}

// Below the level that has them, schedules are refused as an upgrade in
// progress.
func TestSchedulesNeedTheLevel(t *testing.T) {
	e := newEnv(t)
	e.fc.setSupported(fsm.LevelTagged)
	e.do("POST", "/v1/schedules", headTok, `{"name":"a","intervalSeconds":60,"job":{"payload":1}}`).apiErr(t, http.StatusServiceUnavailable, api.CodeUpgradeInProgress)
}

func decodeAs(r resp, v any) {
	if r.Code >= 300 {
		panic(string(r.Body))
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		panic(err)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The schedules page: head sees each schedule with its next fire and its
// recent jobs, and pauses, runs, resumes and deletes it from there; a
// claw may not open it.
func TestUISchedulesPage(t *testing.T) {
	e := newEnv(t, atLevel(fsm.LatestLevel))
	if r := e.do("POST", "/v1/schedules", headTok, `{"name":"hourly-report","cron":"@hourly","job":{"payload":1,"stream":"reports"}}`); r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	ck := uiLogin(t, e, headTok)
	page := e.page("GET", "/ui/schedules", ck, "")
	if page.Code != http.StatusOK || !strings.Contains(string(page.Body), "hourly-report") || !strings.Contains(string(page.Body), "@hourly") {
		t.Fatalf("page: %d %s", page.Code, page.Body)
	}
	csrf := csrfOf(t, e, ck)
	for _, verb := range []string{"pause", "trigger", "resume"} {
		if r := e.page("POST", "/ui/schedules/hourly-report/"+verb, ck, "csrf="+csrf); r.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", verb, r.Code, r.Body)
		}
	}
	sc := e.fc.fsm.Read().Schedule("hourly-report")
	if sc == nil || sc.Paused || len(sc.Recent) != 1 {
		t.Fatalf("after pause, trigger, resume: %+v", sc)
	}
	if body := string(e.page("GET", "/ui/schedules", ck, "").Body); !strings.Contains(body, "/ui/tasks/"+sc.Recent[0].JobID) {
		t.Fatal("the page does not link the triggered job")
	}
	if r := e.page("POST", "/ui/schedules/hourly-report/delete", ck, "csrf="+csrf); r.Code != http.StatusSeeOther || e.fc.fsm.Read().Schedule("hourly-report") != nil {
		t.Fatalf("delete: %d", r.Code)
	}
	if r := e.page("GET", "/ui/schedules", uiLogin(t, e, leftTok), ""); r.Code != http.StatusForbidden {
		t.Fatalf("a claw opened the schedules page: %d", r.Code)
	}
}
