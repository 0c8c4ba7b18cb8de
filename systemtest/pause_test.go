package systemtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// A default read that reaches a leader while it is paused (SIGSTOP) is
// answered on SIGCONT, before raft's own lease check has run. It must not
// be answered from the state the node had when it was paused: a claim the
// new leader acknowledged meanwhile must show, or the read must fail
// (docs/api.md, consistency of reads).
func TestDefaultReadAfterLeaderPauseIsNotStale(t *testing.T) {
	c := startCluster(t, 3, nil)
	old, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	job := apiCreate(t, old.URL, map[string]interface{}{"payload": "p", "stream": "pause"})

	if err := c.Pause(old); err != nil {
		t.Fatal(err)
	}
	defer c.Resume(old)
	var others []*testcluster.Node
	for _, n := range c.Nodes {
		if n != old {
			others = append(others, n)
		}
	}
	var leader *testcluster.Node
	err = testcluster.Eventually(20*time.Second, 50*time.Millisecond, func() error {
		for _, n := range others {
			if h, err := c.Health(n); err == nil && h.Role == "leader" {
				leader = n
				return nil
			}
		}
		return errors.New("no new leader yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	apiPost(t, leader.URL, "/jobs/"+job.ID+"/claim", apiLeft, map[string]interface{}{}, 200)

	// Reads queued on the paused node's socket are served the moment it
	// wakes.
	const reads = 6
	var wg sync.WaitGroup
	answers := make([]*apiResp, reads)
	errs := make([]error, reads)
	for i := range reads {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			answers[i], errs[i] = apiRequest("GET", old.URL+"/jobs/"+job.ID, apiHead, nil)
		}(i)
	}
	// Give the requests time to reach the paused node's socket (they are
	// queued by the kernel; nothing here depends on how soon).
	time.Sleep(200 * time.Millisecond)
	if err := c.Resume(old); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	answered := 0
	for i := range reads {
		if errs[i] != nil {
			t.Logf("read %d: %v", i, errs[i])
			continue
		}
		a := answers[i]
		if a.Status != http.StatusOK {
			t.Logf("read %d refused: %s", i, a)
			continue
		}
		answered++
		var j struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(a.Body, &j); err != nil {
			t.Fatal(err)
		}
		if j.Status != "running" {
			t.Errorf("read %d through the woken former leader: status %q, but the claim was acknowledged before the read was sent: %s", i, j.Status, a)
		}
	}
	t.Logf("%d of %d reads answered, none stale", answered, reads)
	if answered == 0 {
		// Every read refused is no stale read, but a read a moment later
		// must be answered (by the new leader, through forwarding).
		apiEventually(t, 20*time.Second, "a read through the woken node", func() error {
			r, err := apiRequest("GET", old.URL+"/jobs/"+job.ID, apiHead, nil)
			if err != nil {
				return err
			}
			if r.Status != http.StatusOK {
				return fmt.Errorf("%s", r)
			}
			return nil
		})
	}
}
