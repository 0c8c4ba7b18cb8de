package httpapi

import (
	"net/http"
	"testing"
)

// The pages and routes of flatPages examine the same jobs with ten times
// more queued: they read per-stream figures and the lanes of the jobs
// they show (the running, the dead letters), never the queued ones.
func TestFlatPagesDoNotWalkTheJobs(t *testing.T) {
	sizes := []int{2_000, 20_000}
	visits := map[string][]uint64{}
	for _, n := range sizes {
		e, ck := flatEnv(t, n)
		for _, p := range flatPages {
			before := e.fc.fsm.JobsVisited()
			if r := e.flatPage(p.path, ck); r.Code >= 300 && r.Code != http.StatusBadRequest {
				t.Fatalf("%s with %d jobs: %d %s", p.path, n, r.Code, r.Body)
			}
			visits[p.name] = append(visits[p.name], e.fc.fsm.JobsVisited()-before)
		}
	}
	for _, p := range flatPages {
		v := visits[p.name]
		if v[0] != v[1] || v[1] > 64 {
			t.Errorf("%s examined %d jobs with %d queued and %d with %d; want as few, and the same", p.path, v[0], sizes[0], v[1], sizes[1])
		}
	}
}
