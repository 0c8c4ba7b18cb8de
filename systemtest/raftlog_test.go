package systemtest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A snapshot restore, then a node that comes back with its data dir wiped
// and joins again: the leader sends each follower the snapshot (raft's
// expected "failed to get log ... log not found", then "installing
// snapshot on"), and no node logs that at ERROR.
func TestRestoreAndJoinLogNoErrorForTheSnapshotFallback(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	dir := t.TempDir()
	_, fs := apiRoles(t, c)
	for i := range 5 {
		apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"payload": map[string]int{"n": i}}), http.StatusCreated)
	}
	file := filepath.Join(dir, "backup.snap")
	if code, out, errOut := opsCLI(t, c.URLs(), dir, "snapshot", "save", file); code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errOut)
	}
	for i := range 5 {
		apiWant(t, apiDo(t, "POST", fs[0].URL+"/jobs", apiHead, map[string]any{"payload": map[string]int{"later": i}}), http.StatusCreated)
	}
	if code, out, errOut := opsCLI(t, []string{fs[1].URL}, dir, "snapshot", "restore", file); code != 0 {
		t.Fatalf("snapshot restore: exit %d\n%s%s", code, out, errOut)
	}
	apiCaughtUp(t, c)

	// A follower loses its data and comes back: it joins again and is
	// brought up to date from the snapshot.
	_, fs = apiRoles(t, c)
	gone := fs[0]
	if err := c.Terminate(gone); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(gone); err != nil {
		t.Fatal(err)
	}
	apiWant(t, apiDo(t, "POST", fs[1].URL+"/jobs", apiHead, map[string]any{"payload": "after the join"}), http.StatusCreated)
	apiCaughtUp(t, c)

	installs := 0
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "[ERROR]") && strings.Contains(l, "failed to get log") {
				t.Errorf("%s logs the expected snapshot fallback as an error: %s", n.ID, l)
			}
			if strings.Contains(l, "raft: installing snapshot on") {
				installs++
			}
		}
	}
	if installs < 2 {
		t.Errorf("the leaders sent %d snapshots to followers, want one per follower after the restore and one after the join", installs)
	}
	// Give the end-of-test convergence check the rejoined node as well.
	if err := c.WaitVoters(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
