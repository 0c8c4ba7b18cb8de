package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// localPortBlock returns a base port p such that the ports spine run gives
// a local cluster of three nodes (p, p+10 and p+20 for HTTP, each +1 for
// raft and +2 for gossip) are free. It picks below the ephemeral range, so
// no outgoing connection takes one of them meanwhile.
func localPortBlock(t *testing.T) int {
	t.Helper()
	for tries := 0; tries < 200; tries++ {
		base := 20000 + rand.IntN(12000)
		free := true
		for i := 0; i < 3 && free; i++ {
			for k := 0; k < 3 && free; k++ {
				p := base + i*10 + k
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					free = false
					break
				}
				l.Close()
				if k == 2 {
					u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p))
					if err != nil {
						free = false
						break
					}
					u.Close()
				}
			}
		}
		if free {
			return base
		}
	}
	t.Fatal("no free block of ports for a local cluster")
	return 0
}

// Seed 004 §21 criteria 2, 14 and 19 on the cluster spine run starts
// itself: with nothing answering, spine run starts three nodes under the
// project's data dir behind a lockfile (a second start while they live,
// unanswering, is refused); asked again, it uses them, lists the sessions
// with queued tasks and their streams, and starts the watcher of the
// stream picked on stdin with its instructions and queue; spine stop stops
// this project's watcher and nodes and leaves another's watcher running;
// started again four days on (SPINE_CLOCK_OFFSET), the cluster purges the
// finished task past retention at startup, with no purge asked for, and
// the queued task is still queued.
func TestDevQueueRunStartsALocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	t.Parallel()
	dir, leases := t.TempDir(), t.TempDir()
	data := filepath.Join(dir, "data")
	port := localPortBlock(t)
	urls := []string{fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port+10), fmt.Sprintf("http://127.0.0.1:%d", port+20)}
	ses, picked, other := wName("lses"), wName("lapick"), wName("lbother") // picked lists first
	yml := fmt.Sprintf("project:\n  name: local\nserver:\n  port: %d\ntools:\n  run-bash:\n    task_class: MEDIUM_SCRIPT\n", port)
	if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	// spine runs in dir with no cluster named: SPINE_ADDRS and SPINE_TOKEN
	// are cleared so only spine.yml's port and data/tokens.env count.
	spine := func(stdin string, env []string, args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SPINE_ADDRS=", "SPINE_TOKEN=", "SPINE_LEASE_DIR="+leases)
		cmd.Env = append(cmd.Env, env...)
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatalf("spine %v: %v", args, err)
		}
		return 0, out.String()
	}
	nodePIDs := func() []int {
		b, err := os.ReadFile(filepath.Join(data, "spine.lock"))
		if err != nil {
			return nil
		}
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	waitGone := func(pids []int) {
		t.Helper()
		apiEventually(t, 30*time.Second, "the local cluster's nodes to exit", func() error {
			for _, pid := range pids {
				if syscall.Kill(pid, 0) == nil {
					return fmt.Errorf("pid %d still runs", pid)
				}
			}
			return nil
		})
	}
	var started [][]int
	t.Cleanup(func() {
		spine("", nil, "stop", "--data", data)
		for _, s := range []string{picked, other} {
			spine("", nil, "stop", "--stream", s)
		}
		for _, pids := range started {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		for _, s := range []string{picked, other} {
			for _, p := range []string{"-pipe", "-done", ".lock", "-watcher.log"} {
				os.Remove("/tmp/spine-" + s + p)
			}
		}
		if t.Failed() {
			for i := 1; i <= 3; i++ {
				if b, err := os.ReadFile(filepath.Join(data, fmt.Sprintf("n%d.log", i))); err == nil {
					t.Logf("n%d.log (tail):\n%s", i, tail(string(b), 3000))
				}
			}
		}
	})

	// Nothing answers: spine run starts three nodes, then finds no session
	// to pick from, says how to create one, and leaves the cluster running
	// for that.
	code, out := spine("", nil, "run", "--data", data)
	started = append(started, nodePIDs())
	if code != 0 || !strings.Contains(out, "Starting a local 3-node cluster on "+urls[0]) || !strings.Contains(out, "No session to watch yet") ||
		!strings.Contains(out, "The local cluster keeps running") {
		t.Fatalf("first spine run: exit %d\n%s", code, out)
	}
	if len(started[0]) != 3 {
		t.Fatalf("the lockfile names %v, want the three nodes' pids", started[0])
	}
	head := tokenFrom(t, filepath.Join(data, "tokens.env"), "HEAD_TOKEN")

	// A second start while the nodes live but do not answer is refused.
	for _, pid := range started[0] {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	code, out = spine("", nil, "run", "--data", data)
	for _, pid := range started[0] {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if code == 0 || !strings.Contains(out, "still running (pid ") {
		t.Fatalf("spine run while the lock's nodes live: exit %d\n%s", code, out)
	}

	// Work for the pick, a finished task for the purge, a queued one that
	// must outlive it.
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out := spine("", []string{"SPINE_ADDRS=" + strings.Join(urls, ","), "SPINE_TOKEN=" + head}, args...)
		if code != want {
			t.Fatalf("spine %s: exit %d (want %d)\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	cli(0, "reload")
	cli(0, "session", "create", ses)
	cli(0, "stream", "create", picked, "--session", ses, "--instructions", "Work the picked stream.\nDone when green.")
	cli(0, "stream", "create", other, "--session", ses)
	var finished, queued api.Task
	mustJSON(t, cli(0, "enqueue", "run-bash", "--stream", other), &finished)
	cli(0, "claim", "--stream", other)
	cli(0, "complete", finished.ID, "--result", `{"summary":"done before the break"}`)
	mustJSON(t, cli(0, "enqueue", "run-bash", "--stream", picked), &queued)

	// Asked again, spine run uses the cluster (its token from data/), lists
	// the session with its queued task and its streams, and starts the
	// watcher of the stream picked on stdin.
	code, out = spine("1\n1\n", nil, "run", "--data", data)
	if code != 0 || !strings.Contains(out, "Using the cluster at "+urls[0]) ||
		!strings.Contains(out, "1. "+ses+" (2 streams, 1 queued tasks)") || !strings.Contains(out, "1. "+picked+" (1 queued)") ||
		!strings.Contains(out, "["+picked+"] Work the picked stream.") || !strings.Contains(out, "["+picked+"] Done when green.") ||
		!strings.Contains(out, "["+picked+"] 1 queued tasks") {
		t.Fatalf("interactive spine run: exit %d\n%s", code, out)
	}
	watcherPID := lockPID(t, picked)
	// Criterion 18: the watcher shows its stream's instructions at start.
	apiEventually(t, 15*time.Second, "the watcher to print its stream's instructions", func() error {
		b, _ := os.ReadFile("/tmp/spine-" + picked + "-watcher.log")
		if !strings.Contains(string(b), "Work the picked stream.") {
			return fmt.Errorf("watcher log: %q", b)
		}
		return nil
	})
	// Another project's watcher on this machine: spine stop leaves it.
	script, _ := filepath.Abs("../scripts/spine-watcher.sh")
	ow := exec.Command("bash", script, other)
	ow.Env = append(os.Environ(), "SPINE="+binary, "SPINE_ADDRS="+strings.Join(urls, ","), "SPINE_TOKEN="+head)
	ow.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-ow.Process.Pid, syscall.SIGKILL); _, _ = ow.Process.Wait() })
	otherPID := lockPID(t, other)
	var status struct {
		Watchers []struct {
			Stream string `json:"stream"`
			PID    int    `json:"pid"`
		} `json:"watchers"`
	}
	out = cli(0, "status", "--output", "json")
	mustJSON(t, out, &status)
	seen := false
	for _, w := range status.Watchers {
		seen = seen || (w.Stream == picked && w.PID == watcherPID)
	}
	if !seen {
		t.Fatalf("status does not show the watcher spine run started (pid %d):\n%s", watcherPID, out)
	}
	if err := testcluster.CheckURLsConverged(urls, head, convergeTimeout); err != nil {
		t.Fatalf("before stop: %v", err)
	}

	code, out = spine("", nil, "stop", "--data", data)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("stopped the watcher of %s (pid %d)", picked, watcherPID)) ||
		strings.Contains(out, "watcher of "+other) || strings.Count(out, "stopped node pid") != 3 {
		t.Fatalf("spine stop: exit %d\n%s", code, out)
	}
	waitGone(append([]int{watcherPID}, started[0]...))
	if syscall.Kill(otherPID, 0) != nil {
		t.Fatal("spine stop stopped another project's watcher")
	}
	// The other watcher waits in a long poll (its agent idle, 30 s): a stop
	// ends it at once, lock freed, before spine stop answers.
	if err := os.WriteFile("/tmp/spine-"+other+"-done", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	apiEventually(t, 15*time.Second, "the other watcher to wait in its long poll", func() error {
		if !hasChild(otherPID, "peek") {
			return fmt.Errorf("watcher %d runs no spine peek", otherPID)
		}
		return nil
	})
	if code, out := spine("", nil, "stop", "--stream", other); code != 0 || !strings.Contains(out, other) {
		t.Fatalf("stop --stream: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile("/tmp/spine-" + other + ".lock"); err == nil {
		t.Fatalf("spine stop answered while the watcher still held its lock (%s)", b)
	}

	// Four days on, spine run starts the cluster again: the leader's purge
	// at startup deletes the finished task, and the queued one stays.
	offset := []string{"SPINE_CLOCK_OFFSET=96h"}
	code, out = spine("", offset, "run", "--data", data, "--session", ses)
	started = append(started, nodePIDs())
	if code != 0 || !strings.Contains(out, "Starting a local 3-node cluster") || !strings.Contains(out, "Starting watchers for session '"+ses+"'") {
		t.Fatalf("spine run after the break: exit %d\n%s", code, out)
	}
	apiEventually(t, 30*time.Second, "the startup purge to delete the finished task", func() error {
		r := apiDo(t, "GET", urls[1]+"/api/tasks/"+finished.ID, head, nil)
		if r.Status != 404 {
			return fmt.Errorf("the finished task answers %d", r.Status)
		}
		return nil
	})
	var q api.Task
	apiDecode(t, apiDo(t, "GET", urls[2]+"/api/tasks/"+queued.ID+"?consistent", head, nil), &q)
	if q.Status != api.TaskQueued {
		t.Fatalf("the queued task is %s after the restart", q.Status)
	}
	if err := testcluster.CheckURLsConverged(urls, head, convergeTimeout); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if code, out := spine("", nil, "stop", "--data", data); code != 0 || strings.Count(out, "stopped the watcher of") != 2 {
		t.Fatalf("final stop: exit %d\n%s", code, out)
	}
	waitGone(started[1])
}

// exitUsageCode is the CLI's exit code for a usage error.
const exitUsageCode = 2

func tokenFrom(t *testing.T, path, key string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return ""
}

// lockPID waits for the watcher of stream to hold its lock and returns
// the pid in it.
func lockPID(t *testing.T, stream string) int {
	t.Helper()
	var pid int
	apiEventually(t, 15*time.Second, "the watcher of "+stream+" to take its lock", func() error {
		b, err := os.ReadFile("/tmp/spine-" + stream + ".lock")
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	return pid
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %q", err, s)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// hasChild reports whether a child of pid runs a command line containing
// word (read from /proc).
func hasChild(pid int, word string) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses: state, ppid.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
		if strings.Contains(string(cmd), word) {
			return true
		}
	}
	return false
}
