package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// An operator's pause holds across a leader kill: a stream paused through
// a follower stays paused on the new leader (claims skip it, a claim by id
// is refused, producers still add jobs, GET /streams shows it on every
// node, the killed node included once back); the resume, through another
// follower, hands out the jobs in their order.
func TestStreamPauseAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	const stream = "pausable"
	create := func(url string) string {
		t.Helper()
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/jobs", apiHead, map[string]any{"stream": stream, "payload": map[string]int{"n": 1}}), http.StatusCreated), &j)
		return j.ID
	}
	var ids []string
	for range 3 {
		ids = append(ids, create(fs[0].URL))
	}
	var st api.StreamInfo
	apiDecode(t, apiWant(t, apiDo(t, "POST", fs[0].URL+"/streams/"+stream+"/pause", apiHead, map[string]string{"reason": "drill"}), http.StatusOK), &st)
	if !st.Paused || st.Queued != 3 || st.Pause.Reason != "drill" {
		t.Fatalf("pause answer %+v", st)
	}
	claim := func(url string) api.WorkerClaim {
		t.Helper()
		var wc api.WorkerClaim
		apiDecode(t, apiWant(t, apiDo(t, "POST", url+"/internal/worker/claim", apiLeft, api.WorkerClaimRequest{WorkerID: "w", Streams: []string{stream}}), http.StatusOK), &wc)
		return wc
	}
	if wc := claim(fs[1].URL); wc.Claimed {
		t.Fatalf("claimed %s from a paused stream", wc.JobID)
	}

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var other = fs[0]
	if other == nl {
		other = fs[1]
	}
	ids = append(ids, create(other.URL)) // producers go on
	if wc := claim(nl.URL); wc.Claimed {
		t.Fatalf("the new leader handed out %s from the paused stream", wc.JobID)
	}
	apiWantError(t, apiDo(t, "POST", other.URL+"/jobs/"+ids[0]+"/claim", apiLeft, map[string]any{}), http.StatusConflict, "stream_paused")
	apiDecode(t, apiWant(t, apiDo(t, "GET", nl.URL+"/streams/"+stream+"?consistent", apiRight, nil), http.StatusOK), &st)
	if !st.Paused || st.Queued != 4 {
		t.Fatalf("the new leader shows %+v", st)
	}

	// The killed node comes back with the pause, from its own log.
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the restarted node to show the pause", func() error {
		var l api.StreamList
		r, err := apiRequest("GET", leader.URL+"/streams?stale", apiHead, nil)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			return err
		}
		for _, s := range l.Streams {
			if s.Name == stream && s.Paused && s.Queued == 4 {
				return nil
			}
		}
		return fmt.Errorf("%s answers %s", leader.ID, r.Body)
	})

	apiDecode(t, apiWant(t, apiDo(t, "POST", other.URL+"/streams/"+stream+"/resume", apiHead, nil), http.StatusOK), &st)
	if st.Paused {
		t.Fatalf("resume answer %+v", st)
	}
	for i, want := range ids {
		if wc := claim(c.Nodes[i%3].URL); !wc.Claimed || wc.JobID != want {
			t.Fatalf("claim %d after the resume: %+v, want %s", i, wc, want)
		}
	}
}
