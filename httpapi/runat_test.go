package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// A runAt the API does not document (before 1970, past 365 days ahead,
// past the year 2262 that once wrapped around into "now") is refused with
// the range, and creates no job; a past one from 1970 on means now.
func TestCreateRunAtRange(t *testing.T) {
	e := newEnv(t)
	for _, at := range []string{"2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1600-01-01T00:00:00Z", "1969-12-31T23:59:59Z",
		testNow.Add(366 * 24 * time.Hour).Format(time.RFC3339)} {
		er := e.do("POST", "/jobs", headTok, map[string]any{"payload": 1, "runAt": at}).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if msg := er["message"].(string); !strings.Contains(msg, "runAt must be between 1970-01-01T00:00:00Z and 365 days from now") {
			t.Errorf("runAt %s: %s", at, msg)
		}
	}
	e.do("POST", "/jobs", headTok, map[string]any{"payload": 1, "delaySeconds": 365*24*3600 + 1}).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if l := e.do("GET", "/jobs", headTok, nil).json(t); len(l["jobs"].([]any)) != 0 {
		t.Fatalf("refused creates made jobs: %v", l)
	}
	j := e.create(map[string]any{"runAt": "1970-01-01T00:00:01Z"})
	if j["status"] != "queued" || j["runAt"] != nil {
		t.Fatalf("runAt in 1970: %v, want a job claimable now", j)
	}
	j = e.create(map[string]any{"runAt": testNow.Add(364 * 24 * time.Hour).Format(time.RFC3339)})
	if j["runAt"] == nil {
		t.Fatalf("runAt 364 days ahead: %v, want it scheduled", j)
	}
}
