package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// workerLoop is the playbook's loop as a script: signal idle, block on one
// line of the pipe, claim until the stream is empty, complete each with a
// summary, and wait again.
const workerLoop = `
S=$1
DONE=/tmp/spine-$S-done
PIPE=/tmp/spine-$S-pipe
for i in $(seq 400); do [ -p "$PIPE" ] && break; sleep 0.05; done
while true; do
  touch "$DONE"
  head -n 1 "$PIPE" > /dev/null || exit 1
  while T=$("$SPINE" claim --stream="$S") && [ -n "$T" ]; do
    ID=${T#\{\"id\":\"}
    ID=${ID%%\"*}
    sleep "${WORK_SECONDS:-0}"
    "$SPINE" complete "$ID" --result '{"summary":"done by the scripted worker"}' --stdout "ran $ID" || echo "complete $ID failed" >&2
  done
done
`

// startProc starts a bash process in its own process group and kills the
// group when the test ends.
func startProc(t testing.TB, env []string, logPath string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("==== %s ====\n%s", filepath.Base(logPath), b)
		}
	})
}

// The watcher and a scripted worker per stream (seed 004 §21 criterion 17):
// ten tasks in two streams are each completed once, woken by the watcher's
// long-poll peek, with the leader killed once in the middle of the work
// (the workers' claims and completes, and the watchers' peeks, move to
// the new leader; a claim whose answer the kill lost is repeated by its
// key and answers the task it took), and none is left stuck.
func TestWatcherWakesScriptedWorkers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	leader, fs := apiRoles(t, c)
	f := fs[0].URL
	apiWant(t, apiDo(t, "PUT", f+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}), 200)
	ses := wName("ses")
	apiWant(t, apiDo(t, "POST", f+"/api/sessions", apiHead, api.SessionCreateRequest{Name: ses}), 201)
	streams := []string{wName("wa"), wName("wb")}
	for _, s := range streams {
		apiWant(t, apiDo(t, "POST", f+"/api/streams", apiHead, api.StreamCreateRequest{Name: s, Session: ses,
			Instructions: "Run what you are given. Done when the queue is empty."}), 201)
		t.Cleanup(func() {
			for _, p := range []string{"-pipe", "-done", ".lock"} {
				os.Remove("/tmp/spine-" + s + p)
			}
		})
	}
	watcher, err := filepath.Abs("../scripts/spine-watcher.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "SPINE="+binary, "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiLeft,
		"SPINE_LEASE_DIR="+filepath.Join(dir, "leases"), "SPINE_WATCH_WAIT=5s", "WORK_SECONDS=0.2")
	for _, s := range streams {
		startProc(t, env, filepath.Join(dir, s+"-watcher.log"), watcher, s)
		startProc(t, env, filepath.Join(dir, s+"-worker.log"), "-c", workerLoop, "worker", s)
	}
	// A second watcher for the same stream is refused (once the first has
	// taken its lock).
	apiEventually(t, 10*time.Second, "the first watcher's lock", func() error {
		_, err := os.Stat("/tmp/spine-" + streams[0] + ".lock")
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", watcher, streams[0]).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already has active watcher") {
		t.Fatalf("a second watcher: %v %s", err, out)
	}

	var ids []string
	enqueue := func(base string, n int) {
		for i := 0; i < n; i++ {
			s := streams[len(ids)%2]
			r := devqRetry(t, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: "run-bash", Stream: s,
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, len(ids))), IdempotencyKey: fmt.Sprintf("%s-%d", s, len(ids))})
			ids = append(ids, devqTask(t, r, 201).ID)
		}
	}
	succeeded := func(base string) (int, error) {
		n := 0
		for _, id := range ids {
			r, err := apiRequest("GET", base+"/api/tasks/"+id, apiLeft, nil)
			if err != nil {
				return 0, err
			}
			var v api.Task
			if json.Unmarshal(r.Body, &v) == nil && v.Status == api.TaskSucceeded {
				n++
			}
		}
		return n, nil
	}
	enqueue(f, 10)
	// Kill the leader once the workers are in the middle of the ten.
	apiEventually(t, 60*time.Second, "three tasks completed", func() error {
		if n, err := succeeded(fs[1].URL); err != nil || n < 3 {
			return fmt.Errorf("%d completed (%v)", n, err)
		}
		return nil
	})
	if n, _ := succeeded(fs[1].URL); n == len(ids) {
		t.Fatal("the workers finished before the leader could be killed in the middle")
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	// Every task's timeout is MEDIUM_SCRIPT's (minutes): a task left running
	// by a lost claim would still be running at the deadline.
	apiEventually(t, 60*time.Second, "every task completed", func() error {
		if n, err := succeeded(fs[1].URL); err != nil || n != len(ids) {
			return fmt.Errorf("%d of %d completed (%v)", n, len(ids), err)
		}
		return nil
	})
	for _, id := range ids {
		n := 0
		for _, e := range apiEvents(t, fs[1].URL, apiHead, id) {
			if e.Type == "completed" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %s completed %d times", id, n)
		}
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}

	// spine status names the running watchers; spine stop stops one.
	watchers := func() map[string]bool {
		code, out, errOut := devCLI(t, c, dir, filepath.Join(dir, "leases"), apiLeft, "status")
		if code != 0 {
			t.Fatalf("status: exit %d %s", code, errOut)
		}
		var st struct {
			Watchers []struct{ Stream string } `json:"watchers"`
			Nodes    []struct{ Role string }   `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Nodes) != 3 {
			t.Fatalf("status: %v %s", err, out)
		}
		m := map[string]bool{}
		for _, w := range st.Watchers {
			m[w.Stream] = true
		}
		return m
	}
	if w := watchers(); !w[streams[0]] || !w[streams[1]] {
		t.Fatalf("status names watchers %v, want both", w)
	}
	if code, out, errOut := devCLI(t, c, dir, filepath.Join(dir, "leases"), apiLeft, "stop", "--stream", streams[0]); code != 0 || !strings.Contains(out, streams[0]) {
		t.Fatalf("stop --stream: exit %d %s %s", code, out, errOut)
	}
	apiEventually(t, 10*time.Second, "the first watcher to stop", func() error {
		if w := watchers(); w[streams[0]] || !w[streams[1]] {
			return fmt.Errorf("watchers %v", w)
		}
		return nil
	})
}
