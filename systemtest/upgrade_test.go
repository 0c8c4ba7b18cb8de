package systemtest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/testcluster"
)

// upgradeBase is the build a rolling upgrade starts from: the last one
// that writes every entry in the positional encoding, with one command type
// per set of options (cluster level 2).
const upgradeBase = "7f1fafc1558b45a4bcee153d16ac4dacc5a2870f"

// buildAt builds cmd/spine as it was at commit into dir, from the
// repository's history (git archive: no worktree is left behind).
func buildAt(t *testing.T, commit, dir string) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("a rolling upgrade needs the repository's history: %v", err)
	}
	if err := exec.Command("git", "-C", strings.TrimSpace(string(root)), "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("a rolling upgrade needs commit %s in the repository's history (a shallow clone lacks it)", commit[:12])
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", strings.TrimSpace(string(root)), commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "spine-old")
	build := exec.Command("go", "build", "-o", bin, "./cmd/spine")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", commit[:12], err, out)
	}
	return bin
}

// A rolling upgrade from the last build of the positional encoding: three
// processes of the old build serve while each node in turn, the leader
// first, is stopped and started again on this build. Writes go on all along
// (creates with every kind of option, claims of one and of several jobs,
// heartbeats with progress, releases with a cooldown, completes), and none
// is refused but for a moment without a leader; once every node runs this
// build the leader raises the cluster to LevelTagged, and the same writes,
// now in the tagged encoding, go on. Every job acknowledged is there at the
// end, and the replicas agree (stopCluster compares their state hashes).
func TestRollingUpgradeFromThePositionalEncoding(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	t.Parallel()
	old := buildAt(t, upgradeBase, t.TempDir())
	c, err := testcluster.Start(testcluster.Options{Binary: old, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, c) })

	var acked []string
	round := 0
	// write runs one round of writes against any running node, retrying
	// what a node down or an election refuses (with an idempotency key, so
	// a retried create is not made twice).
	write := func(phase string) {
		t.Helper()
		round++
		do := func(what string, method, path, token string, body any, want int) *apiResp {
			t.Helper()
			var last *apiResp
			err := testcluster.Eventually(60*time.Second, 100*time.Millisecond, func() error {
				for _, n := range c.Nodes {
					if !n.Running() {
						continue
					}
					r, err := apiRequest(method, n.URL+path, token, body)
					if err != nil {
						continue
					}
					last = r
					if r.Status == want {
						return nil
					}
					if r.Status != http.StatusServiceUnavailable && r.Status != http.StatusGatewayTimeout {
						t.Fatalf("%s: %s: %s refused: %s", phase, what, path, r)
					}
				}
				return fmt.Errorf("%s: %s not answered: %v", phase, what, last)
			})
			if err != nil {
				t.Fatal(err)
			}
			return last
		}
		stream := fmt.Sprintf("up%d", round)
		bodies := []map[string]any{
			{"stream": stream, "payload": map[string]int{"n": 1}},
			{"stream": stream, "payload": map[string]int{"n": 2}, "priority": 5},
			{"stream": stream, "payload": map[string]int{"n": 3}, "requires": []string{"gpu"}},
			{"stream": stream, "payload": map[string]int{"n": 4}, "concurrencyKey": "k", "concurrencyLimit": 2},
		}
		var ids []string
		for i, b := range bodies {
			b["idempotencyKey"] = fmt.Sprintf("%s-%d", stream, i)
			j := apiJobOf(t, do("create", "POST", "/jobs", apiHead, b, http.StatusCreated))
			ids = append(ids, j.ID)
		}
		acked = append(acked, ids...)
		// A batch claim with capabilities takes all four, highest priority
		// first; one is heartbeated with progress, one released with a
		// cooldown, the rest completed.
		var wc api.WorkerClaim
		apiDecode(t, do("claim", "POST", "/internal/worker/claim", apiLeft,
			map[string]any{"worker_id": "w-" + stream, "streams": []string{stream}, "capabilities": []string{"gpu"}, "max_jobs": 4}, http.StatusOK), &wc)
		claimed := wc.Jobs
		if len(claimed) != 4 || claimed[0].JobID != ids[1] {
			t.Fatalf("%s: claimed %d jobs, first %s; want 4, first %s", phase, len(claimed), claimed[0].JobID, ids[1])
		}
		for i, cl := range claimed {
			lease := map[string]any{"worker_id": "w-" + stream, "job_id": cl.JobID, "attempt_id": cl.AttemptID, "lease_token": cl.LeaseToken}
			switch i {
			case 0:
				hb := map[string]any{"progress": map[string]int{"pct": 50}}
				for k, v := range lease {
					hb[k] = v
				}
				do("heartbeat", "POST", "/internal/worker/heartbeat", apiLeft, hb, http.StatusOK)
			case 1:
				rel := map[string]any{"cooldown_ms": 10}
				for k, v := range lease {
					rel[k] = v
				}
				do("release", "POST", "/internal/worker/release", apiLeft, rel, http.StatusOK)
				continue
			}
			done := map[string]any{"result": map[string]bool{"ok": true}}
			for k, v := range lease {
				done[k] = v
			}
			do("complete", "POST", "/internal/worker/complete", apiLeft, done, http.StatusOK)
		}
	}

	level := func(n *testcluster.Node) int {
		var st api.ClusterStatus
		apiDecode(t, apiWant(t, apiDo(t, "GET", n.URL+"/cluster/status?stale", apiHead, nil), http.StatusOK), &st)
		return st.Level
	}
	write("old build")
	// The leader first: a node of this build then leads nodes of the old
	// one (a new leader is elected among them while it restarts, and it
	// may win again later).
	leader, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	order := []*testcluster.Node{leader}
	for _, n := range c.Nodes {
		if n != leader {
			order = append(order, n)
		}
	}
	for i, n := range order {
		if err := c.Terminate(n); err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprintf("%s down", n.ID))
		if err := c.RestartWith(n, binary); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitVoters(3, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprintf("%s upgraded", n.ID))
		if i == 0 {
			// This build leads nodes of the old one.
			apiEventually(t, 60*time.Second, "leadership moved to "+n.ID, func() error {
				if l := c.Leader(); l == n {
					return nil
				}
				r, err := apiRequest("POST", n.URL+"/cluster/transfer-leader", apiHead, map[string]string{"to": n.ID})
				if err != nil {
					return err
				}
				return fmt.Errorf("transfer: %s", r)
			})
			write(fmt.Sprintf("%s leads the old build", n.ID))
		}
		if i < len(order)-1 {
			// Some node still runs the old build: the cluster stays below
			// LevelTagged, so the old nodes can read every entry.
			for _, m := range c.Nodes {
				if l := level(m); l >= fsm.LevelTagged {
					t.Fatalf("%s at level %d while a node runs the old build", m.ID, l)
				}
			}
		}
	}
	apiEventually(t, 30*time.Second, "the cluster raised to this build's level on every node", func() error {
		for _, n := range c.Nodes {
			if l := level(n); l != fsm.LatestLevel {
				return fmt.Errorf("%s at level %d", n.ID, l)
			}
		}
		return nil
	})
	write("new build")
	// The leader killed once more: the tagged log replays on restart.
	leader, err = c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	write("leader killed")
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		j := apiGetJob(t, leader.URL, apiHead, id, "")
		if j.ID != id {
			t.Fatalf("job %s acknowledged, then lost", id)
		}
	}
}
