package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const sampleSchedule = `{"name":"nightly","cron":"0 30 2 * * *","timezone":"Europe/Paris","overlap":"skip","catchup":"latest","catchupWindowSeconds":3600,
"job":{"payload":{"k":1},"stream":"reports"},"paused":false,"nextFireAt":"2026-01-03T01:30:00Z","runs":2,"skipped":0,
"recent":[{"tick":"2026-01-02T01:30:00Z","jobId":"j1"}],"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`

// spine schedule sends the template and spec as the API takes them, and
// each verb reaches its route.
func TestScheduleVerbs(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /v1/schedules":                 answer(201, sampleSchedule),
		"PUT /v1/schedules/nightly":          answer(200, sampleSchedule),
		"GET /v1/schedules":                  answer(200, `{"schedules":[`+sampleSchedule+`]}`),
		"GET /v1/schedules/nightly":          answer(200, sampleSchedule),
		"POST /v1/schedules/nightly/pause":   answer(200, sampleSchedule),
		"POST /v1/schedules/nightly/resume":  answer(200, sampleSchedule),
		"POST /v1/schedules/nightly/trigger": answer(201, `{"job":`+sampleJob+`,"schedule":`+sampleSchedule+`}`),
		"DELETE /v1/schedules/nightly":       func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "head-tok"}
	code, out, errOut := cliRun(t, env, "", "schedule", "create", "nightly", "--cron", "0 30 2 * * *", "--timezone", "Europe/Paris",
		"--overlap", "queue", "--catchup", "all", "--catchup-window", "10m", "--job", `{"stream":"reports","payload":{"k":1},"priority":4}`)
	if code != exitOK || !strings.Contains(out, `"nightly"`) {
		t.Fatalf("create: exit %d out %q err %q", code, out, errOut)
	}
	r := f.last()
	job, _ := r.body["job"].(map[string]any)
	if r.body["name"] != "nightly" || r.body["cron"] != "0 30 2 * * *" || r.body["timezone"] != "Europe/Paris" || r.body["overlap"] != "queue" ||
		r.body["catchupWindowSeconds"] != float64(600) || job["stream"] != "reports" || job["priority"] != float64(4) {
		t.Fatalf("create sent %v", r.body)
	}
	code, _, errOut = cliRun(t, env, `{"payload":2}`, "schedule", "replace", "nightly", "--every", "1h", "-")
	if r := f.last(); code != exitOK || r.body["intervalSeconds"] != float64(3600) || fmt.Sprint(r.body["job"]) != "map[payload:2]" {
		t.Fatalf("replace: exit %d err %q sent %v", code, errOut, r.body)
	}
	for _, verb := range []string{"get", "pause", "resume", "trigger", "delete"} {
		if code, _, errOut := cliRun(t, env, "", "schedule", verb, "nightly"); code != exitOK {
			t.Fatalf("%s: exit %d err %q", verb, code, errOut)
		}
	}
	if code, out, errOut := cliRun(t, env, "", "schedule", "list", "-o", "table"); code != exitOK || !strings.Contains(out, "0 30 2 * * * (Europe/Paris)") {
		t.Fatalf("list: exit %d out %q err %q", code, out, errOut)
	}
	// Usage errors never reach the server.
	before := len(f.req)
	for _, args := range [][]string{
		{"create"},
		{"create", "n"},
		{"create", "n", "--job", "{not json"},
		{"create", "n", "--job", `{"payload":1,"colour":"red"}`},
		{"create", "n", "--every", "1500ms", "--job", `{"payload":1}`},
	} {
		if code, _, errOut := cliRun(t, env, "", "schedule", args...); code != exitUsage || !strings.HasPrefix(errOut, "spine: ") {
			t.Errorf("%v: exit %d stderr %q, want 2", args, code, errOut)
		}
	}
	if len(f.req) != before {
		t.Fatal("a usage error reached the server")
	}
}
