package systemtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A complete and a fail sent with the lease token alone, then sent again
// through another node after the leader that applied them was killed (as a
// worker does whose answer was lost with the leader), are answered as the
// first were and change nothing: one completed event, one failed one.
func TestRepeatByLeaseTokenAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "repeats"
	done := apiCreate(t, leader.URL, map[string]any{"stream": stream})
	again := apiCreate(t, leader.URL, map[string]any{"stream": stream, "maxAttempts": 3})
	claim := func(id string) apiJob {
		t.Helper()
		return apiJobOf(t, apiWant(t, apiDo(t, "POST", leader.URL+"/jobs/"+id+"/claim", apiLeft, map[string]any{}), http.StatusOK))
	}
	completeBody := map[string]any{"result": map[string]string{"by": "w"}, "leaseToken": claim(done.ID).LeaseToken}
	failBody := map[string]any{"error": "flaky", "requeue": true, "leaseToken": claim(again.ID).LeaseToken}
	apiWant(t, apiDo(t, "POST", leader.URL+"/jobs/"+done.ID+"/complete", apiLeft, completeBody), http.StatusOK)
	apiWant(t, apiDo(t, "POST", leader.URL+"/jobs/"+again.ID+"/fail", apiLeft, failBody), http.StatusOK)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}

	repeat := func(url, id, verb string, body map[string]any, wantStatus string) {
		t.Helper()
		apiEventually(t, 30*time.Second, verb+" repeated through "+url, func() error {
			r, err := apiRequest("POST", url+"/jobs/"+id+"/"+verb, apiLeft, body)
			if err != nil {
				return err
			}
			switch r.Status {
			case http.StatusServiceUnavailable: // no leader yet
				return fmt.Errorf("%s", r)
			case http.StatusOK:
				j := apiJobOf(t, r)
				if j.Status != wantStatus || j.Attempts != 1 {
					t.Fatalf("repeated %s answered %s after %d attempts, want %s after 1", verb, j.Status, j.Attempts, wantStatus)
				}
				return nil
			}
			t.Fatalf("repeated %s: %s", verb, r)
			return nil
		})
	}
	repeat(fs[0].URL, done.ID, "complete", completeBody, "done")
	repeat(fs[1].URL, again.ID, "fail", failBody, "queued")

	for id, want := range map[string]string{done.ID: "completed", again.ID: "failed"} {
		n := 0
		for _, ev := range apiEvents(t, fs[0].URL, apiHead, id) {
			if ev.Type == want {
				n++
			}
		}
		if n != 1 {
			t.Errorf("job %s has %d %s events, want 1", id, n, want)
		}
	}
}
