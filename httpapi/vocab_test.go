package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A claim by id of a job scheduled for later, by its runAt or by a retry
// backoff, is 409 not_yet_claimable: the message says it is scheduled and
// from when it can be claimed, error.job has that runAt, and nothing is
// claimed.
func TestClaimByIDOfAScheduledJob(t *testing.T) {
	e := newEnv(t)
	refused := func(id string) string {
		t.Helper()
		body := e.do("POST", "/jobs/"+id+"/claim", leftTok, "{}").apiErr(t, http.StatusConflict, api.CodeNotYetClaimable)
		job, _ := body["job"].(map[string]any)
		runAt, _ := job["runAt"].(string)
		msg, _ := body["message"].(string)
		if job["id"] != id || runAt == "" || !strings.Contains(msg, "scheduled") || !strings.Contains(msg, runAt) {
			t.Fatalf("claim of scheduled %s: %v", id, body)
		}
		if j := e.do("GET", "/jobs/"+id, headTok, nil).json(t); j["status"] != "queued" || j["runAt"] != runAt {
			t.Fatalf("after the refused claim: %v", j)
		}
		return runAt
	}

	at := testNow.Add(time.Hour).Truncate(time.Second).UTC()
	id := e.create(map[string]any{"runAt": at.Format(time.RFC3339)})["id"].(string)
	if got := refused(id); got != at.Format(time.RFC3339Nano) {
		t.Fatalf("runAt %s, want %s", got, at.Format(time.RFC3339Nano))
	}
	if j := e.do("GET", "/jobs/"+id, headTok, nil).json(t); j["attempts"] != 0.0 {
		t.Fatalf("a refused claim counted an attempt: %v", j)
	}

	// A failed attempt waits for its retry backoff.
	id = e.create(map[string]any{"backoff": map[string]any{"base": 60}, "maxAttempts": 3})["id"].(string)
	c := e.claim(id, leftTok)
	if r := e.do("POST", "/jobs/"+id+"/fail", leftTok, map[string]any{"leaseToken": c["leaseToken"], "error": "flaky"}); r.Code != http.StatusOK {
		t.Fatalf("fail: %d %s", r.Code, r.Body)
	}
	refused(id)
}
