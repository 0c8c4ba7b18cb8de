package systemtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spine run and spine stop as a user runs them, in a project directory,
// with the data somewhere else (--data):
//   - spine run --nodes 1 with no session starts the node, prints no empty
//     session list, says how to create a session (the commands it prints
//     work as they are) and that the cluster keeps running and how to stop
//     it, and exits 0;
//   - spine run --session then starts a watcher per stream;
//   - spine stop --stream=X stops that watcher and takes its line out of
//     DATA/watchers, the other's stays;
//   - a plain spine stop from another directory finds nothing of this
//     project, says where it looked and names the watcher still running;
//   - a plain spine stop in the project directory finds what spine run
//     --data started there, stops the watcher and the node, and leaves no
//     record behind.
func TestRunAndStopAsAUserRunsThem(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	t.Parallel()
	dir, elsewhere, leases, state, bin := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	data := filepath.Join("var", "spine") // relative, as a user types it
	port := localPortBlock(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ses, quick, slow := wName("rses"), wName("rquick"), wName("rslow")
	if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(fmt.Sprintf("project:\n  name: runstop\nserver:\n  port: %d\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The user's PATH has spine on it, for the commands spine run prints.
	if err := os.Symlink(binary, filepath.Join(bin, "spine")); err != nil {
		t.Fatal(err)
	}
	userEnv := append(os.Environ(), "SPINE_ADDRS=", "SPINE_TOKEN=", "SPINE_LEASE_DIR="+leases,
		"XDG_STATE_HOME="+state, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(in string, name string, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = in
		cmd.Env = userEnv
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return 0, out.String()
	}
	spine := func(args ...string) (int, string) { t.Helper(); return run(dir, binary, args...) }
	lockPIDs := func() []int {
		b, _ := os.ReadFile(filepath.Join(dir, data, "spine.lock"))
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	var nodes []int
	t.Cleanup(func() {
		for _, s := range []string{quick, slow} {
			run(dir, binary, "stop", "--stream", s)
		}
		for _, pid := range nodes {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, s := range []string{quick, slow} {
			for _, p := range []string{"-pipe", "-done", ".lock", "-watcher.log"} {
				os.Remove("/tmp/spine-" + s + p)
			}
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, data, "n1.log")); err == nil {
				t.Logf("n1.log (tail):\n%s", tail(string(b), 3000))
			}
		}
	})
	gone := func(what string, pid int) {
		t.Helper()
		apiEventually(t, 30*time.Second, what+" to exit", func() error {
			if syscall.Kill(pid, 0) == nil {
				return fmt.Errorf("pid %d still runs", pid)
			}
			return nil
		})
	}

	// No session yet.
	code, out := spine("run", "--nodes", "1", "--data", data)
	nodes = lockPIDs()
	if code != 0 || !strings.Contains(out, "Starting a local 1-node cluster on "+url) || !strings.Contains(out, "No session to watch yet") ||
		strings.Contains(out, "Sessions") || !strings.Contains(out, "'spine stop --data "+data+"' stops it") {
		t.Fatalf("spine run with no session: exit %d\n%s", code, out)
	}
	if len(nodes) != 1 || syscall.Kill(nodes[0], 0) != nil {
		t.Fatalf("the node spine run started is not running (lock: %v)", nodes)
	}
	// The commands it prints, as printed, create the session and streams.
	var script []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "export ") || strings.HasPrefix(l, "spine ") {
			script = append(script, l)
		}
	}
	if len(script) != 3 || !strings.Contains(script[0], "SPINE_ADDRS="+url) {
		t.Fatalf("spine run printed no usable commands:\n%s", out)
	}
	sh := script[0] + "\n" +
		strings.ReplaceAll(script[1], "NAME", ses) + "\n" +
		strings.ReplaceAll(strings.ReplaceAll(script[2], "STREAM", quick), "NAME", ses) + "\n" +
		strings.ReplaceAll(strings.ReplaceAll(script[2], "STREAM", slow), "NAME", ses) + "\n"
	if code, out := run(dir, "sh", "-ec", sh); code != 0 {
		t.Fatalf("the printed commands:\n%s\nexit %d\n%s", sh, code, out)
	}

	// A watcher per stream.
	code, out = spine("run", "--nodes", "1", "--data", data, "--session", ses)
	if code != 0 || !strings.Contains(out, "Using the cluster at "+url) || !strings.Contains(out, "["+quick+"] Starting watcher") || !strings.Contains(out, "["+slow+"] Starting watcher") {
		t.Fatalf("spine run --session: exit %d\n%s", code, out)
	}
	quickPID, slowPID := lockPID(t, quick), lockPID(t, slow)
	record := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, data, "watchers"))
		return string(b)
	}
	if r := record(); !strings.Contains(r, fmt.Sprintf("%d %s\n", quickPID, quick)) || !strings.Contains(r, fmt.Sprintf("%d %s\n", slowPID, slow)) {
		t.Fatalf("DATA/watchers = %q", r)
	}

	// spine stop --stream=quick: its line leaves the record.
	if code, out := spine("stop", "--stream="+quick); code != 0 || !strings.Contains(out, fmt.Sprintf("stopped the watcher of %s (pid %d)", quick, quickPID)) {
		t.Fatalf("spine stop --stream: exit %d\n%s", code, out)
	}
	gone("the quick watcher", quickPID)
	if r := record(); strings.Contains(r, quick) || !strings.Contains(r, fmt.Sprintf("%d %s\n", slowPID, slow)) {
		t.Fatalf("after spine stop --stream=%s, DATA/watchers = %q", quick, r)
	}

	// From another directory, a plain spine stop finds none of it, and says so.
	code, out = run(elsewhere, binary, "stop")
	if code != 0 || !strings.Contains(out, "nothing started by spine run is running under data") || !strings.Contains(out, "'spine stop --data DIR' stops") ||
		!strings.Contains(out, fmt.Sprintf("%s (pid %d)", slow, slowPID)) {
		t.Fatalf("spine stop elsewhere: exit %d\n%s", code, out)
	}
	if syscall.Kill(slowPID, 0) != nil || syscall.Kill(nodes[0], 0) != nil {
		t.Fatal("spine stop in another directory stopped this project's watcher or node")
	}

	// In the project directory, a plain spine stop finds what spine run
	// --data started.
	code, out = spine("stop")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("stopped the watcher of %s (pid %d)", slow, slowPID)) ||
		!strings.Contains(out, fmt.Sprintf("stopped node pid %d", nodes[0])) {
		t.Fatalf("spine stop: exit %d\n%s", code, out)
	}
	gone("the slow watcher", slowPID)
	gone("the node", nodes[0])
	if _, err := os.Stat(filepath.Join(dir, data, "watchers")); err == nil {
		t.Fatalf("DATA/watchers outlives the watchers: %q", record())
	}
	if b, _ := os.ReadFile(filepath.Join(state, "spine", "runs")); strings.Contains(string(b), dir) {
		t.Fatalf("the record of spine run's data dirs still names this project: %q", b)
	}
	if code, out := spine("stop"); code != 0 || !strings.Contains(out, "nothing started by spine run is running") {
		t.Fatalf("a second spine stop: exit %d\n%s", code, out)
	}
}
