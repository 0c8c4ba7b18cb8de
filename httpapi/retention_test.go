package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// The registry's retention is bounded: a PUT past fsm.MaxPurgeDays is
// refused and changes nothing, and a registry that already holds more (an
// older version stored it) is shown and applied as MaxPurgeDays, so a purge
// keeps a task that finished a second ago.
func TestRegistryRetentionBounded(t *testing.T) {
	e, offset := devqEnv(t)
	before := e.do("GET", "/api/registry", headTok, nil)
	for _, days := range []int{fsm.MaxPurgeDays + 1, 1_000_000, -1} {
		reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}, PurgeOlderThanDays: days}
		er := e.do("PUT", "/api/registry", headTok, reg).apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(er["message"].(string), "purge_older_than_days must be 0 to 3650") {
			t.Errorf("%d days: %v", days, er["message"])
		}
	}
	if after := e.do("GET", "/api/registry", headTok, nil); string(after.Body) != string(before.Body) {
		t.Fatalf("a refused registry changed it:\n%s\n%s", before.Body, after.Body)
	}
	reg := api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}, PurgeOlderThanDays: fsm.MaxPurgeDays}
	if r := e.do("PUT", "/api/registry", headTok, reg); r.Code != http.StatusOK {
		t.Fatalf("%d days: %d %s", fsm.MaxPurgeDays, r.Code, r.Body)
	}

	// As an older version stored it, unchecked.
	cmd, err := fsm.Encode(fsm.CmdRegistrySet, &fsm.RegistrySetCommand{Now: testNow.UnixNano(),
		Registry: fsm.Registry{Tools: []fsm.Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}, PurgeDays: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.fc.Apply(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	if got := e.do("GET", "/api/registry", headTok, nil).json(t)["purge_older_than_days"]; got != float64(fsm.MaxPurgeDays) {
		t.Fatalf("a stored million days shows as %v", got)
	}
	done := e.enqueue("run-bash", "auth", 0)
	c := task(t, e.do("POST", "/api/claim", leftTok, api.TaskClaimRequest{Stream: "auth"}))
	e.do("POST", "/api/tasks/"+done.ID+"/complete", leftTok, api.TaskCompleteRequest{LeaseToken: c.LeaseToken, Result: json.RawMessage(`{"summary":"s"}`)})
	offset.Store(int64(time.Second))
	r := e.do("POST", "/api/purge", headTok, nil)
	var pr api.PurgeResult
	if err := json.Unmarshal(r.Body, &pr); err != nil || r.Code != http.StatusOK || pr.Purged != 0 {
		t.Fatalf("purge: %d %s", r.Code, r.Body)
	}
	if want := testNow.Add(time.Second - fsm.MaxPurgeDays*24*time.Hour); !pr.Before.Equal(want) {
		t.Fatalf("purge cut-off %v, want %v", pr.Before, want)
	}
	if g := e.do("GET", "/api/tasks/"+done.ID, leftTok, nil); g.Code != http.StatusOK {
		t.Fatalf("the purge took a task finished a second ago: %d %s", g.Code, g.Body)
	}
}
