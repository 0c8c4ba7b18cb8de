//go:build linux

package systemtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
	"golang.org/x/sys/unix"
)

// ownTimerSlack is the timer slack of the calling thread of this test
// process: what a child started from it inherits.
func ownTimerSlack(t *testing.T) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Fatalf("prctl(PR_GET_TIMERSLACK): %v", err)
	}
	return time.Duration(v)
}

// slackOf asks every running node of c for its timer slack.
func slackOf(t *testing.T, c *testcluster.Cluster) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		h, err := c.Health(n)
		if err != nil {
			t.Fatal(err)
		}
		if h.TimerSlackNS == nil {
			t.Fatalf("%s: /health has no timer_slack_ns", n.ID)
		}
		out[n.ID] = time.Duration(*h.TimerSlackNS)
	}
	return out
}

// wantProcessName checks that n's process is named after the spine binary,
// as the kernel names a process after the file it executes: the re-exec
// must not turn every node into "exe" in ps, top and pkill.
func wantProcessName(t *testing.T, n *testcluster.Node) {
	t.Helper()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(n.Pid()) + "/comm")
	if err != nil {
		t.Fatalf("%s: %v", n.ID, err)
	}
	want := filepath.Base(binary)
	if len(want) > 15 { // TASK_COMM_LEN - 1
		want = want[:15]
	}
	if got := strings.TrimSpace(string(comm)); got != want {
		t.Errorf("%s: process name %q, want %q (the binary's name)", n.ID, got, want)
	}
}

// Every node runs with the configured timer slack (default 5 ms), which it
// can only give all its threads by re-executing itself at start: the /health
// handler's thread showing it proves the re-exec happened, and the node kept
// its pid (the harness still holds and kills it by that pid). A node that is
// killed and restarted comes back with the same slack and its data, and the
// cluster keeps serving writes across the kill.
func TestNodesRunWithTimerSlack(t *testing.T) {
	if own := ownTimerSlack(t); own == 5*time.Millisecond {
		t.Skipf("this test process already runs with 5ms of timer slack; the test could not tell a re-exec from inheritance")
	}
	c := startCluster(t, 3, nil)
	for id, d := range slackOf(t, c) {
		if d != 5*time.Millisecond {
			t.Errorf("%s: timer slack %v, want the default 5ms", id, d)
		}
	}
	for _, n := range c.Nodes {
		wantProcessName(t, n)
	}
	l, err := c.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(l); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(l); err == nil {
		t.Fatalf("%s still answers after SIGKILL of the pid the harness started: the re-exec moved the node to another process", l.ID)
	}
	if _, err := c.WaitLeader(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(l); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(3, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := slackOf(t, c)[l.ID]; got != 5*time.Millisecond {
		t.Errorf("restarted %s: timer slack %v, want 5ms", l.ID, got)
	}
	wantProcessName(t, l)
}

// SPINE_TIMER_SLACK sets the slack; 0 leaves the one the node inherited.
func TestTimerSlackSetting(t *testing.T) {
	c := startCluster(t, 1, map[string]string{"SPINE_TIMER_SLACK": "3ms"})
	if got := slackOf(t, c)["n1"]; got != 3*time.Millisecond {
		t.Errorf("SPINE_TIMER_SLACK=3ms: node reports %v", got)
	}
	own := ownTimerSlack(t)
	c0 := startCluster(t, 1, map[string]string{"SPINE_TIMER_SLACK": "0"})
	if got := slackOf(t, c0)["n1"]; got != own {
		t.Errorf("SPINE_TIMER_SLACK=0: node reports %v, want the inherited %v", got, own)
	}
}

// spine-bench shares the machine with the cluster it measures, so it takes
// the same timer slack as a node (SPINE_TIMER_SLACK, default 5ms), and says
// so in its JSON line; SPINE_TIMER_SLACK=0 leaves the inherited one.
func TestBenchRunsWithTimerSlack(t *testing.T) {
	own := ownTimerSlack(t)
	if own == 5*time.Millisecond {
		t.Skipf("this test process already runs with 5ms of timer slack; the test could not tell a re-exec from inheritance")
	}
	c := startCluster(t, 3, nil)
	benchBin, err := testcluster.BuildCommand(t.TempDir(), "spine-bench")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.URL)
	}
	run := func(env ...string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, benchBin, "--addr", strings.Join(addrs, ","), "--jobs", "50",
			"--producers", "2", "--workers", "2", "--phase", "lifecycle", "--timeout", "50s")
		cmd.Env = append(os.Environ(), "HEAD_TOKEN="+testcluster.HeadToken, "LEFT_CLAW_TOKEN="+testcluster.LeftToken)
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("spine-bench: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var res struct {
			OK          bool    `json:"ok"`
			Errors      int     `json:"errors"`
			ClientSlack int64   `json:"client_timer_slack_ns"`
			AppendMs    float64 `json:"lifecycle_append_ms"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("last line of spine-bench is not its JSON result: %v\n%s", err, out)
		}
		if !res.OK || res.Errors != 0 {
			t.Fatalf("bench failed: %s", lines[len(lines)-1])
		}
		// The nodes' time per fsync'ed append comes through too.
		if res.AppendMs <= 0 || !strings.Contains(string(out), " ms each), ") {
			t.Errorf("lifecycle_append_ms = %v, want the nodes' mean append time, also on the raft log line:\n%s", res.AppendMs, out)
		}
		return time.Duration(res.ClientSlack)
	}
	if got := run(); got != 5*time.Millisecond {
		t.Errorf("spine-bench ran with timer slack %v, want the default 5ms", got)
	}
	if got := run("SPINE_TIMER_SLACK=0"); got != own {
		t.Errorf("SPINE_TIMER_SLACK=0: spine-bench ran with timer slack %v, want the inherited %v", got, own)
	}
}
