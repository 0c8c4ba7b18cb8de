package systemtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// apiCreateJobs creates n jobs in stream through the nodes in turn (their
// payloads 0 to n-1) and returns their ids.
func apiCreateJobs(t testing.TB, nodes []*testcluster.Node, stream string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "POST", nodes[i%len(nodes)].URL+"/jobs", apiHead, map[string]any{"stream": stream, "payload": i}), http.StatusCreated), &j)
		ids = append(ids, j.ID)
	}
	return ids
}

// apiDoneOnce waits up to timeout for every job of ids (all of stream) to
// be done, read through base, then checks that each is done and was
// completed exactly once (one completed event in its history).
func apiDoneOnce(t testing.TB, base, stream string, ids []string, timeout time.Duration) {
	t.Helper()
	apiEventually(t, timeout, "every job to be done", func() error {
		var l api.JobList
		if err := apiGet(base+"/jobs?status=done&stream="+stream+"&limit=1000", apiHead, &l); err != nil {
			return err
		}
		if len(l.Jobs) != len(ids) {
			return fmt.Errorf("%d of %d done", len(l.Jobs), len(ids))
		}
		return nil
	})
	for _, id := range ids {
		var j api.Job
		apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/jobs/"+id+"?consistent", apiHead, nil), http.StatusOK), &j)
		var ev api.JobEventList
		apiDecode(t, apiWant(t, apiDo(t, "GET", base+"/jobs/"+id+"/events", apiHead, nil), http.StatusOK), &ev)
		completed := 0
		for _, e := range ev.Events {
			if e.Type == "completed" {
				completed++
			}
		}
		if j.Status != api.JobStatusDone || completed != 1 {
			t.Fatalf("job %s: %s, completed %d times", id, j.Status, completed)
		}
	}
}
