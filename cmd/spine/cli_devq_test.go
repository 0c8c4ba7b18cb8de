package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spine-queue/spine/client"
)

const sampleTask = `{"id":"tsk_1","stream":{"id":"str_1","name":"auth","instructions":"JWT per PRD 4.2"},"tool_name":"run-bash","task_class":"FAST_SCRIPT","payload":{"n":1},"status":"running","timeout":30,"attempts":1,"attempt_id":"att-1","lease_token":"tok-1","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","started_at":"2026-01-02T03:04:06Z"}`

// The worker verbs print one line of JSON or nothing, and spine claim
// keeps the lease so spine complete needs neither token nor attempt id.
func TestDevqWorkerVerbs(t *testing.T) {
	empty := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /api/peek":                  answer(200, sampleTask),
		"POST /api/claim":                answer(200, sampleTask),
		"POST /api/tasks/tsk_1/complete": answer(200, strings.Replace(sampleTask, `"running"`, `"succeeded"`, 1)),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_TOKEN": "left", "SPINE_LEASE_DIR": t.TempDir()}
	code, out, errOut := cliRun(t, env, "", "peek", "--stream=auth")
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"id":"tsk_1"`) {
		t.Fatalf("peek: exit %d out %q err %q", code, out, errOut)
	}
	if r := f.last(); r.query != "stream=auth" {
		t.Fatalf("peek query %q", r.query)
	}
	code, out, errOut = cliRun(t, env, "", "claim", "--stream", "auth")
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"instructions":"JWT per PRD 4.2"`) {
		t.Fatalf("claim: exit %d out %q err %q", code, out, errOut)
	}
	// A complete without a summary never leaves the machine.
	before := len(f.req)
	if code, _, errOut := cliRun(t, env, "", "complete", "tsk_1", "--result", `{"ok":true}`); code != exitUsage || !strings.Contains(errOut, "summary") {
		t.Fatalf("complete without a summary: exit %d err %q", code, errOut)
	}
	if len(f.req) != before {
		t.Fatal("a complete without a summary was sent")
	}
	code, _, errOut = cliRun(t, env, "", "complete", "tsk_1", "--result", `{"summary":"done"}`, "--stdout", "out")
	if code != exitOK {
		t.Fatalf("complete: exit %d err %q", code, errOut)
	}
	r := f.last()
	if r.body["lease_token"] != "tok-1" || r.body["attempt_id"] != "att-1" || r.body["stdout"] != "out" {
		t.Fatalf("complete sent %v: the saved lease was not used", r.body)
	}

	// Nothing to peek or claim: no output, exit 0.
	f2 := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){"GET /api/peek": empty, "POST /api/claim": empty})
	env["SPINE_ADDRS"] = f2.srv.URL
	for _, args := range [][]string{{"peek", "--stream=auth"}, {"claim", "--stream=auth"}} {
		if code, out, errOut := cliRun(t, env, "", args[0], args[1:]...); code != exitOK || out != "" {
			t.Fatalf("%v with nothing queued: exit %d out %q err %q", args, code, out, errOut)
		}
	}
}

// spine claim without --stream claims nothing and lists the streams with
// queued tasks.
func TestDevqClaimWithoutStream(t *testing.T) {
	f := newFakeAPI(t, map[string]func(http.ResponseWriter, *http.Request){
		"POST /api/claim": answer(400, `{"error":{"code":"stream_required","message":"stream is required: name the stream to claim from; streams with queued tasks: auth (3 queued) stripe (1 queued)","streams":[{"name":"auth","queued":3},{"name":"stripe","queued":1}]}}`),
	})
	env := map[string]string{"SPINE_ADDRS": f.srv.URL, "SPINE_LEASE_DIR": t.TempDir()}
	code, out, errOut := cliRun(t, env, "", "claim")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "Error: --stream is required") ||
		!strings.Contains(errOut, "auth") || !strings.Contains(errOut, "3 queued") || !strings.Contains(errOut, "stripe") {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
}

func TestDevqUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"enqueue", "run-bash"},                           // no --stream
		{"enqueue", "run-bash", "{nope", "--stream", "a"}, // bad payload
		{"stream", "create", "auth"},                      // no --session
		{"fail", "tsk_1"},                                 // no --error
		{"peek"},                                          // no --stream
		{"session", "create"},                             // no name
		{"tasks", "--stale=maybe"},                        // bad flag value
	} {
		if code, _, errOut := cliRun(t, map[string]string{"SPINE_ADDRS": "http://127.0.0.1:1"}, "", args[0], args[1:]...); code != exitUsage || !strings.HasPrefix(errOut, "spine: ") {
			t.Errorf("%v: exit %d err %q", args, code, errOut)
		}
	}
}

// Seed 004 §20: a malformed result is refused before it is sent (the task
// stays running), and a cluster that is down is a clear exit 5.
func TestDevqFailureModes(t *testing.T) {
	env := map[string]string{"SPINE_ADDRS": "http://127.0.0.1:1", "SPINE_LEASE_DIR": t.TempDir()}
	if code, _, errOut := cliRun(t, env, "", "complete", "tsk_1", "--result", `{"summary": "unclosed`); code != exitUsage || !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("malformed result: exit %d %q", code, errOut)
	}
	if code, _, errOut := cliRun(t, env, "", "status", "--retry-for", "0"); code != exitUnavailable {
		t.Fatalf("status with the cluster down: exit %d %q", code, errOut)
	}
}

// The session and stream tables take one item or a list.
func TestDevqTablesTakeOneOrMany(t *testing.T) {
	var b strings.Builder
	sessionsTable(&b, &client.Session{Name: "one"})
	sessionsTable(&b, []*client.Session{{Name: "two"}, {Name: "three"}})
	streamsTable(&b, &client.Stream{Name: "s1", Session: "one"})
	for _, want := range []string{"one", "two", "three", "s1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, b.String())
		}
	}
}
