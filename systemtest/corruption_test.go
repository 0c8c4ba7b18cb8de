package systemtest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// A flipped byte in a follower's raft log: the node refuses to start,
// naming the file; the other two go on taking writes; removed from the
// configuration, emptied and started again (a dead disk's cure), it
// rejoins, catches up, and every replica agrees (the state hashes are
// compared when the test ends).
func TestCorruptLogIsRefusedAndTheClusterGoesOn(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	victim := fs[0]
	if victim.ID == "n1" { // n1 bootstraps: emptied, it would start a cluster of its own
		victim = fs[1]
	}
	other := fs[0]
	if other == victim {
		other = fs[1]
	}
	var ids []string
	for i := range 40 {
		var j apiJob
		apiDecode(t, apiWant(t, apiDo(t, "POST", leader.URL+"/jobs", apiHead, map[string]interface{}{"payload": map[string]string{"filler": strings.Repeat("z", 200), "n": fmt.Sprint(i)}}), http.StatusCreated), &j)
		ids = append(ids, j.ID)
	}
	apiEventually(t, 20*time.Second, "the victim to apply every write", func() error {
		h, err := c.Health(victim)
		if err != nil {
			return err
		}
		lh, err := c.Health(leader)
		if err != nil {
			return err
		}
		if h.AppliedIndex < lh.CommitIndex {
			return fmt.Errorf("victim at %d, leader at %d", h.AppliedIndex, lh.CommitIndex)
		}
		return nil
	})
	if err := c.Terminate(victim); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(victim.DataDir, "raft", "wal", "*.wal"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no log segment in the victim's data dir")
	}
	// Flip a byte of the first payload: the filler, far from the last batch.
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(b), strings.Repeat("z", 200))
	if at < 0 {
		t.Fatal("no job payload in the first segment")
	}
	b[at+100] ^= 0x01
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the damaged node to refuse to start, naming the file", func() error {
		if victim.Running() {
			return fmt.Errorf("still running")
		}
		logb, _ := os.ReadFile(victim.LogPath)
		if !strings.Contains(string(logb), filepath.Base(seg)) || !strings.Contains(string(logb), "cannot be trusted") {
			return fmt.Errorf("its log does not name %s", filepath.Base(seg))
		}
		return nil
	})
	// The others go on.
	for i := range 10 {
		apiWant(t, apiDo(t, "POST", other.URL+"/jobs", apiHead, map[string]interface{}{"payload": map[string]int{"after": i}}), http.StatusCreated)
	}
	// The cure, as for a dead disk: out of the configuration first (the
	// survivors then hold every committed entry), then empty, then back.
	apiWant(t, apiDo(t, "POST", other.URL+"/cluster/remove", apiHead, map[string]string{"node_id": victim.ID}), http.StatusOK)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 30*time.Second, "the rebuilt node to hold every job", func() error {
		for _, id := range ids {
			r, err := apiRequest("GET", victim.URL+"/jobs/"+id+"?stale", apiHead, nil)
			if err != nil {
				return err
			}
			if r.Status != http.StatusOK {
				return fmt.Errorf("job %s: %d", id, r.Status)
			}
		}
		return nil
	})
}
