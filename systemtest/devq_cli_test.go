package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/internal/testcluster"
)

// devCLI runs the spine binary against c with token, in dir, and returns
// its exit code, stdout and stderr.
func devCLI(t *testing.T, c *testcluster.Cluster, dir, leases, token string, args ...string) (int, string, string) {
	t.Helper()
	return spineCLI(t, c.URLs(), dir, []string{"SPINE_TOKEN=" + token, "SPINE_LEASE_DIR=" + leases}, args...)
}

// spineCLI runs the spine binary against addrs in dir, with env added to
// the process's, and returns its exit code, stdout and stderr.
func spineCLI(t *testing.T, addrs []string, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "SPINE_ADDRS="+strings.Join(addrs, ",")), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("spine %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

// Seed 004's developer workflow through the spine binary on three nodes:
// reload spine.yml (a broken one changes nothing), sessions and streams,
// enqueue, peek, claim with instructions, complete with a summary (the
// lease kept by claim), fail, requeue, and the claim without a stream.
func TestDevQueueCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, map[string]string{"REAPER_INTERVAL_MS": "100", "SPINE_LEASE_GRACE_MS": "0"})
	dir, leases := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/bash\n# name: deploy-staging\n# description: Deploys current branch to staging\n# tags: deploy, staging\nset -e\n"
	if err := os.WriteFile(filepath.Join(dir, "scripts", "deploy.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	yml := "project:\n  name: demo\nscript_dirs:\n  - scripts\ntools:\n  run-bash:\n    description: Execute a bash script\n    task_class: MEDIUM_SCRIPT\n  run-migrations:\n    task_class: MEDIUM_SCRIPT\n    timeout: 1800\n  tiny:\n    task_class: FAST_SCRIPT\n    timeout: 1\n  brief:\n    task_class: FAST_SCRIPT\n    timeout: 3\n"
	if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(token string, want int, args ...string) string {
		t.Helper()
		code, out, errOut := devCLI(t, c, dir, leases, token, args...)
		if code != want {
			t.Fatalf("spine %s: exit %d (want %d)\nstdout %s\nstderr %s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	run(apiHead, 0, "reload")
	var reg api.Registry
	apiDecode(t, apiDo(t, "GET", c.Nodes[2].URL+"/api/registry", apiLeft, nil), &reg)
	if len(reg.Tools) != 4 || len(reg.Scripts) != 1 || reg.Scripts[0].Name != "deploy-staging" || reg.Project.Name != "demo" {
		t.Fatalf("registry after reload: %+v", reg)
	}
	// A broken file (an unknown class, invalid YAML) names its line and
	// changes nothing.
	for _, c := range []struct{ tail, want string }{
		{"  broken:\n    task_class: NOPE\n", "spine.yml:19"},
		{"  broken: [unclosed\n", "invalid YAML"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "spine.yml"), []byte(yml+c.tail), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := run(apiHead, 2, "reload"); !strings.Contains(out, c.want) || !strings.Contains(out, "unchanged") {
			t.Fatalf("broken reload: %s", out)
		}
	}
	apiDecode(t, apiDo(t, "GET", c.Nodes[1].URL+"/api/registry", apiLeft, nil), &reg)
	if len(reg.Tools) != 4 {
		t.Fatalf("a broken reload changed the registry: %+v", reg.Tools)
	}

	run(apiHead, 0, "session", "create", "api-v2", "--description", "v2")
	run(apiHead, 0, "stream", "create", "auth", "--session=api-v2", "--instructions", "JWT per PRD 4.2. Done when tests pass.")
	var tk api.Task
	if err := json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "run-migrations", `{"script_path":"scripts/deploy.sh"}`, "--stream=auth")), &tk); err != nil || tk.Timeout != 1800 {
		t.Fatalf("enqueue: %+v %v", tk, err)
	}
	if out := run(apiLeft, 0, "peek", "--stream", "auth"); strings.Count(out, "\n") != 1 || !strings.Contains(out, tk.ID) {
		t.Fatalf("peek: %q", out)
	}
	if out := run(apiLeft, 2, "claim"); !strings.Contains(out, "--stream is required") || !strings.Contains(out, "auth") || !strings.Contains(out, "1 queued") {
		t.Fatalf("claim without a stream: %q", out)
	}
	var cl api.Task
	if err := json.Unmarshal([]byte(run(apiLeft, 0, "claim", "--stream=auth")), &cl); err != nil || cl.ID != tk.ID ||
		cl.Status != api.TaskRunning || cl.Stream.Instructions != "JWT per PRD 4.2. Done when tests pass." {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if out := run(apiLeft, 0, "claim", "--stream=auth"); out != "" {
		t.Fatalf("claim of an empty stream printed %q", out)
	}
	run(apiLeft, 2, "complete", tk.ID, "--result", `{"rows":12}`)
	run(apiLeft, 0, "complete", tk.ID, "--result", `{"summary":"migrated 12 users"}`, "--stdout", "ok")
	var list api.TaskList
	if err := json.Unmarshal([]byte(run(apiLeft, 0, "tasks", "--status", "succeeded")), &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].Stdout != "ok" {
		t.Fatalf("succeeded tasks: %+v %v", list, err)
	}

	// Fail, then requeue as a clone.
	var t2 api.Task
	json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "run-bash", "--stream", "auth")), &t2)
	run(apiRight, 0, "claim", "--stream", "auth")
	run(apiRight, 0, "fail", t2.ID, "--error", "permission denied", "--stdout", "started", "--stderr", "EACCES")
	var failed api.Task
	if err := json.Unmarshal([]byte(run(apiLeft, 0, "task", t2.ID)), &failed); err != nil || failed.Status != api.TaskFailed ||
		failed.Error != "permission denied" || failed.Stdout != "started" || failed.Stderr != "EACCES" {
		t.Fatalf("failed task: %+v %v", failed, err)
	}
	var clone api.Task
	if err := json.Unmarshal([]byte(run(apiHead, 0, "requeue", t2.ID)), &clone); err != nil || clone.ClonedFrom != t2.ID || clone.Status != api.TaskQueued {
		t.Fatalf("requeue: %+v %v", clone, err)
	}
	// A tool with a 1 s timeout in spine.yml: claimed and abandoned, the
	// task is auto-failed at 2 s.
	var ab api.Task
	json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "tiny", "--stream", "auth")), &ab)
	for {
		var next api.Task
		json.Unmarshal([]byte(run(apiLeft, 0, "claim", "--stream", "auth")), &next)
		if next.ID == ab.ID {
			break
		}
		run(apiLeft, 0, "complete", next.ID, "--result", `{"summary":"cleared the way"}`)
	}
	apiEventually(t, 20*time.Second, "the abandoned task to be auto-failed", func() error {
		var v api.Task
		json.Unmarshal([]byte(run(apiLeft, 0, "task", ab.ID)), &v)
		if !v.AutoFailed || v.Status != api.TaskFailed {
			return fmt.Errorf("task %s auto-failed=%v", v.Status, v.AutoFailed)
		}
		return nil
	})
	// Purge now: finished tasks go (the clone was cleared out of the way
	// above); a queued task stays.
	var waiting api.Task
	json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "run-bash", "--stream", "auth")), &waiting)
	if out := run(apiHead, 0, "purge", "--older-than", "0s"); !strings.Contains(out, `"purged"`) {
		t.Fatalf("purge: %s", out)
	}
	run(apiLeft, 3, "task", ab.ID)
	run(apiLeft, 0, "task", waiting.ID)

	// Criterion 12: spine tasks --stale lists a running task past its
	// timeout (3 s), and not one within it.
	run(apiHead, 0, "stream", "create", "ops", "--session=api-v2")
	var late, fresh api.Task
	json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "brief", "--stream", "ops")), &late)
	run(apiLeft, 0, "claim", "--stream", "ops")
	apiEventually(t, 20*time.Second, "the task past its timeout to be listed as stale", func() error {
		var l api.TaskList
		if err := json.Unmarshal([]byte(run(apiLeft, 0, "tasks", "--stale")), &l); err != nil {
			return err
		}
		if len(l.Tasks) != 1 || l.Tasks[0].ID != late.ID || !l.Tasks[0].Stale {
			return fmt.Errorf("stale tasks: %+v", l.Tasks)
		}
		return nil
	})
	json.Unmarshal([]byte(run(apiHead, 0, "enqueue", "run-bash", "--stream", "ops")), &fresh)
	run(apiLeft, 0, "claim", "--stream", "ops")
	var stale api.TaskList
	json.Unmarshal([]byte(run(apiLeft, 0, "tasks", "--stale", "--stream", "ops")), &stale)
	for _, tk := range stale.Tasks {
		if tk.ID == fresh.ID {
			t.Fatalf("a task within its timeout is listed as stale: %+v", tk)
		}
	}
	if out := run(apiLeft, 0, "tasks", "--status", "running", "--stream", "ops", "--output", "table"); !strings.Contains(out, fresh.ID) ||
		strings.Count(out, "(stale)") > 1 {
		t.Fatalf("running tasks table: %s", out)
	}

	// Ending the stream: enqueue is refused (exit 4), the waiting task stays
	// queued.
	run(apiHead, 0, "stream", "end", "auth")
	run(apiHead, 4, "enqueue", "run-bash", "--stream", "auth")
	if out := run(apiLeft, 0, "task", waiting.ID, "--output", "table"); !strings.Contains(out, "queued") {
		t.Fatalf("task table: %s", out)
	}
}

// spine run on a cluster that answers: it starts a watcher for every active
// stream of --session and prints their instructions and queues; spine stop
// stops them, and a task queued meanwhile stays queued.
func TestDevQueueRunAndStop(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	dir, leases := t.TempDir(), t.TempDir()
	base := c.Nodes[0].URL
	ses := wName("run")
	apiWant(t, apiDo(t, "PUT", base+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}), 200)
	apiWant(t, apiDo(t, "POST", base+"/api/sessions", apiHead, api.SessionCreateRequest{Name: ses}), 201)
	streams := []string{wName("ra"), wName("rb")}
	for _, s := range streams {
		apiWant(t, apiDo(t, "POST", base+"/api/streams", apiHead, api.StreamCreateRequest{Name: s, Session: ses, Instructions: "Instructions of " + s}), 201)
		t.Cleanup(func() {
			devCLI(t, c, dir, leases, apiHead, "stop", "--stream", s, "--data", filepath.Join(dir, "data"))
			for _, p := range []string{"-pipe", "-done", ".lock", "-watcher.log"} {
				os.Remove("/tmp/spine-" + s + p)
			}
		})
	}
	devqTask(t, apiDo(t, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: "run-bash", Stream: streams[0]}), 201)
	code, out, errOut := devCLI(t, c, dir, leases, apiHead, "run", "--session", ses, "--data", filepath.Join(dir, "data"))
	if code != 0 || !strings.Contains(out, "Using the cluster") || !strings.Contains(out, "Instructions of "+streams[1]) ||
		!strings.Contains(out, "["+streams[0]+"] 1 queued tasks") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, s := range streams {
		apiEventually(t, 10*time.Second, "the watcher of "+s, func() error {
			_, err := os.Stat("/tmp/spine-" + s + ".lock")
			return err
		})
		if code, out, errOut := devCLI(t, c, dir, leases, apiHead, "stop", "--stream", s); code != 0 || !strings.Contains(out, s) {
			t.Fatalf("stop --stream %s: exit %d %s %s", s, code, out, errOut)
		}
	}
	var tk api.TaskList
	apiDecode(t, apiDo(t, "GET", base+"/api/tasks?stream="+streams[0], apiLeft, nil), &tk)
	if len(tk.Tasks) != 1 || tk.Tasks[0].Status != api.TaskQueued {
		t.Fatalf("after stop: %+v", tk.Tasks)
	}
}
