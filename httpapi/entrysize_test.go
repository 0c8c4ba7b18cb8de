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
	r.apiErr(t, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	r = e.do("GET", "/jobs", headTok, "")
	if r.Code != http.StatusOK || strings.Contains(string(r.Body), `"id"`) {
		t.Fatalf("a job exists after a refused create: %d %s", r.Code, string(r.Body))
	}
	// Just under the limit is accepted.
	ok := strings.Repeat("y", queue.MaxEntryBytes-1024)
	if r := e.do("POST", "/jobs", headTok, fmt.Sprintf(`{"payload":%q}`, ok)); r.Code != http.StatusCreated {
		t.Fatalf("create under the limit: %d %s", r.Code, string(r.Body))
	}
}
