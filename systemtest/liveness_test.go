package systemtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// nodeAlive asks n's /cluster/status whether it shows node id alive.
func nodeAlive(n *testcluster.Node, id string) (bool, error) {
	r, err := apiRequest("GET", n.URL+"/cluster/status", apiHead, nil)
	if err != nil {
		return false, err
	}
	if r.Status != 200 {
		return false, fmt.Errorf("%s", r)
	}
	var st coreStatus
	if err := json.Unmarshal(r.Body, &st); err != nil {
		return false, err
	}
	for _, ns := range st.Nodes {
		if ns.ID == id {
			return ns.Alive, nil
		}
	}
	return false, fmt.Errorf("%s does not list %s", n.ID, id)
}

// waitShows waits until every node of on shows id alive (or not alive).
func waitShows(t *testing.T, on []*testcluster.Node, id string, alive bool, since time.Time) {
	t.Helper()
	for _, n := range on {
		apiEventually(t, 20*time.Second, fmt.Sprintf("%s to show %s alive=%v", n.ID, id, alive), func() error {
			a, err := nodeAlive(n, id)
			if err != nil {
				return err
			}
			if a != alive {
				return fmt.Errorf("%s shows %s alive=%v", n.ID, id, a)
			}
			return nil
		})
		t.Logf("%s shows %s alive=%v %v after the signal", n.ID, id, alive, time.Since(since).Round(10*time.Millisecond))
	}
}

// A node killed with SIGKILL (no memberlist leave, no goodbye) shows as not
// alive in every survivor's cluster status, follower or leader, without
// waiting for memberlist to declare it dead: the leader sees its
// AppendEntries go unanswered and gossips it (cluster/reach.go). Restarted,
// it is alive again everywhere. The waits have generous deadlines; the
// times are logged, not asserted.
func TestKilledNodeShowsNotAlive(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)

	// A follower.
	victim := fs[0]
	at := time.Now()
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	waitShows(t, []*testcluster.Node{leader, fs[1]}, victim.ID, false, at)
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	waitShows(t, c.Nodes, victim.ID, true, at)

	// The leader: the survivors elect another one, which shows the old
	// leader not alive, as does the other survivor.
	at = time.Now()
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	waitShows(t, fs, leader.ID, false, at)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	waitShows(t, c.Nodes, leader.ID, true, at)
}
