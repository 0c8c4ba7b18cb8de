package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// A create or complete whose command would be a large Raft entry is refused
// with 413 and changes nothing, even though its JSON body is under 1 MiB.
func TestLargeEntriesRefused(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", queue.MaxEntryBytes)
	r := e.do("POST", "/jobs", headTok, fmt.Sprintf(`{"payload":%q}`, big))
	er := r.apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	// In the API's terms: the job and its payload, never the command
	// that would carry them.
	if msg := er["message"].(string); !strings.Contains(msg, "the job is too large") || !strings.Contains(msg, "its payload") {
		t.Errorf("create refusal: %q", msg)
	}
	for _, with := range []string{`"requires":["gpu"]`, `"priority":1`, `"runAt":"2026-01-02T15:04:05Z"`} {
		r := e.do("POST", "/jobs", headTok, fmt.Sprintf(`{"payload":%q,%s}`, big, with))
		msg := r.apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)["message"].(string)
		if !strings.Contains(msg, "the job is too large") || strings.Contains(msg, "create") {
			t.Errorf("create with %s: %q", with, msg)
		}
	}
	r = e.do("GET", "/jobs", headTok, "")
	if r.Code != http.StatusOK || strings.Contains(string(r.Body), `"id"`) {
		t.Fatalf("a job exists after a refused create: %d %s", r.Code, string(r.Body))
	}
	// A completion too large names its result and outputs.
	id := e.create(map[string]interface{}{})["id"].(string)
	c := e.do("POST", "/jobs/"+id+"/claim", leftTok, "{}").json(t)
	r = e.do("POST", "/jobs/"+id+"/complete", leftTok, fmt.Sprintf(`{"leaseToken":%q,"result":{"x":%q}}`, c["leaseToken"], big))
	msg := r.apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)["message"].(string)
	if !strings.Contains(msg, "the completion is too large") || !strings.Contains(msg, "its result, stdout and stderr") {
		t.Errorf("complete refusal: %q", msg)
	}
	if j := e.job(id); j.State != "running" {
		t.Fatalf("a refused completion left the job %s", j.State)
	}
	// Just under the limit is accepted.
	ok := strings.Repeat("y", queue.MaxEntryBytes-1024)
	if r := e.do("POST", "/jobs", headTok, fmt.Sprintf(`{"payload":%q}`, ok)); r.Code != http.StatusCreated {
		t.Fatalf("create under the limit: %d %s", r.Code, string(r.Body))
	}
}
