package systemtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestRetentionPurgesDoneJobs: with a short retention, a done job
// disappears from every node (also after the leader is killed and a new one
// takes over the purging), while failed, dead, queued and running jobs stay.
func TestRetentionPurgesDoneJobs(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"SPINE_RETENTION": "2s", "SPINE_LEASE_GRACE_MS": "0"})
	leader, fs := apiRoles(t, c)

	finish := func(base string) apiJob {
		j := apiCreate(t, base, nil)
		apiPost(t, base, "/jobs/"+j.ID+"/claim", apiLeft, nil, http.StatusOK)
		apiPost(t, base, "/jobs/"+j.ID+"/complete", apiLeft, map[string]interface{}{"result": "ok"}, http.StatusOK)
		return j
	}
	done1 := finish(fs[0].URL)
	failed := apiCreate(t, fs[1].URL, nil)
	apiPost(t, leader.URL, "/jobs/"+failed.ID+"/claim", apiLeft, nil, http.StatusOK)
	apiPost(t, leader.URL, "/jobs/"+failed.ID+"/fail", apiLeft, map[string]interface{}{"error": "no", "requeue": false}, http.StatusOK)
	queued := apiCreate(t, leader.URL, nil)
	running := apiCreate(t, leader.URL, nil)
	apiPost(t, fs[0].URL, "/jobs/"+running.ID+"/claim", apiLeft, nil, http.StatusOK)

	gone := func(id string) func() error {
		return func() error {
			for _, n := range c.Nodes {
				if !n.Running() {
					continue
				}
				if r := apiDo(t, "GET", n.URL+"/jobs/"+id+"?stale", apiHead, nil); r.Status != http.StatusNotFound {
					return fmt.Errorf("%s still serves job %s (%d)", n.ID, id, r.Status)
				}
			}
			return nil
		}
	}
	apiEventually(t, 30*time.Second, "done job purged on every node", gone(done1.ID))
	for _, id := range []string{failed.ID, queued.ID, running.ID} {
		apiGetJob(t, leader.URL, apiHead, id, "")
	}

	// The new leader carries on purging.
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	nl, err := c.WaitLeader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done2 := finish(nl.URL)
	apiEventually(t, 30*time.Second, "done job purged by the new leader", gone(done2.ID))
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	apiCaughtUp(t, c)
	for _, n := range c.Nodes {
		for _, id := range []string{failed.ID, queued.ID, running.ID} {
			apiGetJob(t, n.URL, apiHead, id, "?stale")
		}
	}
	apiEventually(t, 10*time.Second, "restarted node agrees", gone(done1.ID))
}
