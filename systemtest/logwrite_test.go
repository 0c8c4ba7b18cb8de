package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/spine-queue/spine/internal/testcluster"
)

// TestLeaderLogWriteModes runs a 3-process cluster with the leader's log
// write overlapping replication (the default) and with it serial
// (SPINE_SERIAL_LOG_WRITE): /health says which one the leader did, and in
// both every create acknowledged before a SIGKILL of the leader is on every
// node afterwards, the killed one included once it is back.
func TestLeaderLogWriteModes(t *testing.T) {
	for _, mode := range []struct {
		name       string
		env        map[string]string
		overlapped bool
	}{
		{"overlapped", nil, true},
		{"serial", map[string]string{"SPINE_SERIAL_LOG_WRITE": "true"}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			c := startCluster(t, 3, mode.env)
			leader, _ := apiRoles(t, c)

			// Concurrent creates through every node, so the leader gets batches.
			var (
				mu   sync.Mutex
				ids  []string
				errs []string
				wg   sync.WaitGroup
			)
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						r, err := apiRequest("POST", c.Nodes[(g+i)%3].URL+"/jobs", apiHead, map[string]interface{}{"payload": map[string]int{"g": g, "i": i}})
						var j apiJob
						if err == nil && r.Status == http.StatusCreated {
							err = json.Unmarshal(r.Body, &j)
						} else if err == nil {
							err = fmt.Errorf("%s", r)
						}
						mu.Lock()
						if err != nil || j.ID == "" {
							errs = append(errs, fmt.Sprint(err))
						} else {
							ids = append(ids, j.ID)
						}
						mu.Unlock()
					}
				}(g)
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d creates failed on a healthy cluster, first: %s", len(errs), errs[0])
			}

			var h struct {
				Role       string `json:"role"`
				Overlapped uint64 `json:"log_writes_overlapped"`
			}
			apiDecode(t, apiWant(t, apiDo(t, "GET", leader.URL+"/health", "", nil), http.StatusOK), &h)
			if h.Role != "leader" {
				t.Fatalf("%s answered role %q, want leader", leader.ID, h.Role)
			}
			if (h.Overlapped > 0) != mode.overlapped {
				t.Fatalf("leader wrote %d batches overlapped with replication; want overlapped=%v", h.Overlapped, mode.overlapped)
			}

			if err := c.Kill(leader); err != nil {
				t.Fatal(err)
			}
			next, _ := apiRoles(t, c)
			ids = append(ids, apiCreate(t, next.URL, nil).ID)
			if err := c.Restart(leader); err != nil {
				t.Fatal(err)
			}
			apiCaughtUp(t, c)
			for _, n := range c.Nodes {
				checkHasJobs(t, n, ids)
			}
		})
	}
}

// checkHasJobs wants every id readable from n's own state.
func checkHasJobs(t *testing.T, n *testcluster.Node, ids []string) {
	t.Helper()
	missing := 0
	for _, id := range ids {
		if r := apiDo(t, "GET", n.URL+"/jobs/"+id+"?stale", apiHead, nil); r.Status != http.StatusOK {
			missing++
			if missing == 1 {
				t.Errorf("%s: acknowledged job %s: %s", n.ID, id, r)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%s lacks %d of %d acknowledged jobs", n.ID, missing, len(ids))
	}
}
