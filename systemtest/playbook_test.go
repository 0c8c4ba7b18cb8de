package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// playbookBlocks returns the shell blocks of docs/WORKER_PLAYBOOK.md, in
// order.
func playbookBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/WORKER_PLAYBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```bash\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// The worker playbook works as written: its commands, run verbatim (with
// the stream and task id filled in) in a project directory on a three-node
// cluster, start the watcher, wait and claim, do the task, heartbeat,
// complete one task and fail another.
func TestWorkerPlaybookVerbatim(t *testing.T) {
	t.Parallel()
	blocks := playbookBlocks(t)
	if len(blocks) != 8 {
		t.Fatalf("the playbook has %d shell blocks; this test runs 8 (setup, check, instructions, wait+claim, work, heartbeat, complete, fail)", len(blocks))
	}
	c := startCluster(t, 3, nil)
	base := c.Nodes[1].URL
	stream := wName("pb")
	apiWant(t, apiDo(t, "PUT", base+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}), 200)
	ses := wName("pbs")
	apiWant(t, apiDo(t, "POST", base+"/api/sessions", apiHead, api.SessionCreateRequest{Name: ses}), 201)
	apiWant(t, apiDo(t, "POST", base+"/api/streams", apiHead, api.StreamCreateRequest{Name: stream, Session: ses, Instructions: "Run the scripts you are given."}), 201)

	// The project: the watcher where the playbook expects it, and the
	// script its example runs.
	proj := t.TempDir()
	watcher, _ := os.ReadFile("../scripts/spine-watcher.sh")
	os.MkdirAll(filepath.Join(proj, "scripts"), 0o755)
	os.WriteFile(filepath.Join(proj, "scripts", "spine-watcher.sh"), watcher, 0o755)
	os.WriteFile(filepath.Join(proj, "scripts", "migrate.sh"), []byte("echo migrating \"$@\"\necho note >&2\n"), 0o755)
	bin := filepath.Dir(binary) // the spine binary, as "spine" on PATH
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SPINE_ADDRS="+strings.Join(c.URLs(), ","),
		"SPINE_TOKEN="+apiLeft, "SPINE_LEASE_DIR="+filepath.Join(proj, ".leases"), "SPINE_WATCH_WAIT=5s")
	t.Cleanup(func() {
		if b, err := os.ReadFile("/tmp/spine-" + stream + ".lock"); err == nil {
			exec.Command("kill", strings.TrimSpace(string(b))).Run()
		}
		for _, p := range []string{"-pipe", "-done", ".lock", "-watcher.log"} {
			os.Remove("/tmp/spine-" + stream + p)
		}
	})
	run := func(block, taskID string) string {
		t.Helper()
		script := strings.ReplaceAll(strings.ReplaceAll(block, "<STREAM>", stream), "<TASK_ID>", taskID)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
		cmd.Dir, cmd.Env = proj, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("playbook block failed: %v\n%s\nstdout %s\nstderr %s", err, script, out.String(), errb.String())
		}
		return out.String()
	}
	enqueue := func() string {
		return devqTask(t, apiDo(t, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: "run-bash", Stream: stream,
			Payload: json.RawMessage(`{"script_path":"scripts/migrate.sh","args":["--dry-run"]}`)}), 201).ID
	}
	claimed := func(out string) string {
		var v api.Task
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &v); err != nil || v.ID == "" || v.Stream.Instructions == "" {
			t.Fatalf("the claim printed %q: %v", out, err)
		}
		return v.ID
	}

	run(blocks[0], "") // setup: clean up, start the watcher
	apiEventually(t, 10*time.Second, "the watcher", func() error {
		_, err := os.Stat("/tmp/spine-" + stream + ".lock")
		return err
	})
	if out := run(blocks[1], ""); !strings.Contains(out, "LEADER") {
		t.Fatalf("check: %s", out)
	}
	if out := run(blocks[2], ""); !strings.Contains(out, "Run the scripts you are given.") {
		t.Fatalf("instructions: %s", out)
	}
	first := enqueue()
	if id := claimed(run(blocks[3], "")); id != first {
		t.Fatalf("claimed %s, want %s", id, first)
	}
	run(blocks[4], first) // the work: runs scripts/migrate.sh into /tmp/task.out and .err
	run(blocks[5], first) // heartbeat
	run(blocks[6], first) // complete with a summary and the output
	second := enqueue()
	if id := claimed(run(blocks[3], "")); id != second {
		t.Fatalf("claimed %s, want %s", id, second)
	}
	run(blocks[7], second) // fail
	var a, b api.Task
	apiDecode(t, apiDo(t, "GET", base+"/api/tasks/"+first, apiLeft, nil), &a)
	apiDecode(t, apiDo(t, "GET", base+"/api/tasks/"+second, apiLeft, nil), &b)
	if a.Status != api.TaskSucceeded || !strings.Contains(a.Stdout, "migrating --dry-run") || b.Status != api.TaskFailed || b.Error == "" {
		t.Fatalf("after the playbook: %+v / %+v", a, b)
	}
}
