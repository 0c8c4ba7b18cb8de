package systemtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// repoRoot is the module's directory: the README and the scripts.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(root))
}

// readmeBlock is one ```sh block of the README: its text, the line it
// starts on, and the reason of the skip marker before it, if any.
type readmeBlock struct {
	line int
	text string
	skip string
}

// readmeBlocks returns the README's ```sh blocks in order. A block the
// README test cannot run (a foreground command, another program) is
// preceded by `<!-- readme-test: skip (why) -->` on the line before it.
func readmeBlocks(t *testing.T, root string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	marker := regexp.MustCompile(`<!-- readme-test: skip \((.+)\) -->\n$`)
	var out []readmeBlock
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatchIndex(s, -1) {
		blk := readmeBlock{line: strings.Count(s[:m[0]], "\n") + 1, text: s[m[2]:m[3]]}
		if mm := marker.FindStringSubmatch(s[:m[0]]); mm != nil {
			blk.skip = mm[1]
		}
		out = append(out, blk)
	}
	return out
}

// readmePorts rewrites the README's ports (make run's defaults, 36725 and
// up) to the same offsets from base.
func readmePorts(text string, base int) string {
	return regexp.MustCompile(`\b367[2-9][0-9]\b`).ReplaceAllStringFunc(text, func(p string) string {
		n, _ := strconv.Atoi(p)
		return strconv.Itoa(base + n - 36725)
	})
}

// project makes a project directory as a fresh clone has it after `make
// build`: the scripts and bin/spine (the binary under test).
func project(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", filepath.Join(root, "scripts"), filepath.Join(dir, "scripts")).CombinedOutput(); err != nil {
		t.Fatalf("copy scripts: %v %s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", binary, filepath.Join(dir, "bin", "spine")).CombinedOutput(); err != nil {
		t.Fatalf("copy the binary: %v %s", err, out)
	}
	return dir
}

// projectProcesses lists the live processes whose command line names dir:
// the nodes, watchers and scripts of that project directory, which only
// this test started.
func projectProcesses(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
	}
	return out
}

// killProject SIGKILLs, by pid, what is left of a project directory's
// processes after a failed test.
func killProject(dir string) {
	for _, p := range projectProcesses(dir) {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// makeRun starts scripts/run-cluster.sh in dir as `make run` does (BIN=bin/spine,
// DATA ./data) and waits until it says the cluster is up. The returned
// channel yields the script's exit.
func makeRun(t *testing.T, dir string, nodes, base int) (*lockedBuffer, *exec.Cmd, chan error) {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command("scripts/run-cluster.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BIN=bin/spine", "NODES="+strconv.Itoa(nodes), "BASE_PORT="+strconv.Itoa(base),
		"DATA=", "SPINE_ADDRS=", "SPINE_TOKEN=")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = testcluster.NodeProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	apiEventually(t, 90*time.Second, "make run to report the cluster up", func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("make run exited early: %v\n%s", err, tail(out.String(), 3000))
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C stops all nodes.") {
			return errors.New("not up yet")
		}
		return nil
	})
	return &out, cmd, exited
}

// waitExit waits (bounded) for make run's script to exit and returns its error.
func waitExit(t *testing.T, exited chan error, out *lockedBuffer, d time.Duration) error {
	t.Helper()
	select {
	case err := <-exited:
		exited <- err
		return err
	case <-time.After(d):
		t.Fatalf("make run did not exit within %v:\n%s", d, tail(out.String(), 3000))
		return nil
	}
}

// The README works top to bottom on a fresh clone: with make run's
// cluster up (as its first block says), its shell blocks run in order, in
// one shell as a user types them in a second terminal: the cluster from
// data/env, the operator walkthrough (a node joined and removed, the
// leader killed and restarted from nodes.txt), metrics and a snapshot, job
// control, the developer queue from `spine setup` on, the control plane,
// and teardown, which leaves no process and no data. A block the test
// cannot run says so with a marker.
func TestReadmeTopToBottom(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	root := repoRoot(t)
	blocks := readmeBlocks(t, root)
	dir := project(t, root)
	base := scriptBasePort(t, 4) // the walkthrough joins an n4 (ports only)
	var script strings.Builder
	script.WriteString("set -e\n")
	ran := 0
	for i, b := range blocks {
		if b.skip != "" {
			t.Logf("README block %d (line %d) skipped: %s", i+1, b.line, b.skip)
			continue
		}
		fmt.Fprintf(&script, "echo '=== README block %d (line %d)' >&2\n%s\n", i+1, b.line, readmePorts(b.text, base))
		ran++
	}
	if ran < 8 || !strings.Contains(script.String(), "scripts/teardown.sh") {
		t.Fatalf("the README has %d runnable shell blocks, the last with teardown expected; blocks: %+v", ran, blocks)
	}

	out, mr, exited := makeRun(t, dir, 3, base)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("make run's output:\n%s", tail(out.String(), 4000))
		}
		_ = mr.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
		killProject(dir)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = dir
	home := t.TempDir()
	sh.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "SPINE_ADDRS=", "SPINE_TOKEN=",
		"HEAD_TOKEN=", "LEFT_CLAW_TOKEN=", "RIGHT_CLAW_TOKEN=")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	// A node the blocks restarted in the background holds the output
	// pipes after a failed block ended the shell; the cleanup stops it.
	sh.WaitDelay = 5 * time.Second
	var so, se lockedBuffer
	sh.Stdout, sh.Stderr = &so, &se
	if err := sh.Run(); err != nil {
		t.Fatalf("the README's blocks, in order, failed: %v\nstdout:\n%s\nstderr:\n%s", err, tail(so.String(), 4000), tail(se.String(), 4000))
	}
	for _, want := range []string{"n1", `"summary": "migrated 12 users"`, "Cleaned up."} {
		if !strings.Contains(so.String()+se.String(), want) {
			t.Errorf("the README's blocks did not print %q:\n%s", want, tail(so.String(), 4000))
		}
	}

	// The teardown at the end: make run exited cleanly, nothing runs, no data.
	if err := waitExit(t, exited, out, 30*time.Second); err != nil {
		t.Errorf("make run exited with %v after the README's teardown", err)
	}
	apiEventually(t, 10*time.Second, "no process of the project", func() error {
		if ps := projectProcesses(dir); len(ps) > 0 {
			return fmt.Errorf("still running: %v", ps)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data is still there after teardown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "spine.yml")); err != nil {
		t.Errorf("teardown took spine.yml: %v", err)
	}
}

// startWatcher starts scripts/spine-watcher.sh of dir for stream, from
// dir, in its own process group, and waits until it holds its lock.
func startWatcher(t *testing.T, dir, stream string, env []string) *exec.Cmd {
	t.Helper()
	w := exec.Command("bash", "scripts/spine-watcher.sh", stream)
	w.Dir = dir
	w.Env = append(os.Environ(), env...)
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL)
		for _, f := range []string{".lock", "-pipe", "-done", "-watcher.log"} {
			os.Remove("/tmp/spine-" + stream + f)
		}
	})
	apiEventually(t, 10*time.Second, "the watcher of "+stream+" to take its lock", func() error {
		b, err := os.ReadFile("/tmp/spine-" + stream + ".lock")
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(w.Process.Pid) {
			return fmt.Errorf("lock %q %v", b, err)
		}
		return nil
	})
	return w
}

// runTeardown runs dir's scripts/teardown.sh (bounded) and returns its
// exit code and output.
func runTeardown(t *testing.T, dir string, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/teardown.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"DATA=", "TMPDIR_SPINE="}, env...)...)
	b, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// scripts/teardown.sh after make run stops exactly this project's
// processes (make run, which then exits 0; its nodes; a node restarted by
// hand from nodes.txt; a watcher spine run recorded; a watcher started from
// the project's scripts), waits for them, and only then deletes the data;
// another project's watcher keeps running. Run again, it has nothing to
// do; make run and teardown then work again as the first time.
func TestTeardownAfterMakeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	root := repoRoot(t)
	dir, other := project(t, root), project(t, root)
	t.Cleanup(func() { killProject(dir) })
	for round := 1; round <= 2; round++ {
		base := scriptBasePort(t, 2)
		out, mr, exited := makeRun(t, dir, 2, base)
		t.Cleanup(func() { _ = mr.Process.Signal(syscall.SIGTERM) })
		nodes := readNodesTxt(t, dir)
		if len(nodes) != 2 {
			t.Fatalf("nodes.txt: %+v", nodes)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "data", "run.pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(mr.Process.Pid) {
			t.Fatalf("data/run.pid: %q %v, want make run's pid %d", b, err, mr.Process.Pid)
		}
		// A second make run on the same data refuses.
		second := exec.Command("scripts/run-cluster.sh")
		second.Dir = dir
		second.Env = append(os.Environ(), "BIN=bin/spine", "NODES=2", "BASE_PORT="+strconv.Itoa(base), "DATA=")
		if b, err := second.CombinedOutput(); err == nil || !strings.Contains(string(b), "make run already runs") {
			t.Fatalf("a second make run on the same data: %v\n%s", err, b)
		}

		// n2 (the second time, every node) killed and restarted from its
		// nodes.txt command: no longer make run's.
		restart := nodes[1:]
		if round == 2 {
			restart = nodes
		}
		var restartedDone []chan struct{}
		for _, n := range restart {
			if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			apiEventually(t, 20*time.Second, "make run to report "+n.id+"'s death", func() error {
				if !strings.Contains(out.String(), fmt.Sprintf("%s (pid %d) was killed", n.id, n.pid)) {
					return errors.New("not reported")
				}
				return nil
			})
			restarted := exec.Command("bash", "-c", n.cmd)
			restarted.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := restarted.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = restarted.Wait(); close(done) }()
			restartedDone = append(restartedDone, done)
		}
		if round == 2 {
			// Every node make run started is gone: it exits 0 and names the
			// nodes still running on its data.
			if err := waitExit(t, exited, out, 30*time.Second); err != nil {
				t.Errorf("make run, all of its nodes restarted outside it, exited with %v", err)
			}
			if o := out.String(); !strings.Contains(o, "every node this script started has exited; these of") ||
				!strings.Contains(o, "node (data dir "+filepath.Join(dir, "data", "n1")) || !strings.Contains(o, "scripts/teardown.sh") {
				t.Errorf("make run's last words do not name the nodes still running:\n%s", tail(o, 2000))
			}
		}

		// Watchers: one spine run recorded in data/watchers, one started from
		// this project's scripts, one of another project.
		env := []string{"SPINE=" + filepath.Join(dir, "bin", "spine"), fmt.Sprintf("SPINE_ADDRS=http://127.0.0.1:%d", base), "SPINE_WATCH_WAIT=2s"}
		recorded, mine, foreign := wName("tdrec"), wName("tdown"), wName("tdfor")
		wr := startWatcher(t, dir, recorded, env)
		if err := os.WriteFile(filepath.Join(dir, "data", "watchers"), fmt.Appendf(nil, "%d %s\n", wr.Process.Pid, recorded), 0o644); err != nil {
			t.Fatal(err)
		}
		wm := startWatcher(t, dir, mine, env)
		wf := startWatcher(t, other, foreign, env)
		os.WriteFile("/tmp/spine-"+recorded+"-done", nil, 0o644)

		code, tout := runTeardown(t, dir)
		if code != 0 || !strings.Contains(tout, "Cleaned up.") {
			t.Fatalf("teardown: exit %d\n%s", code, tout)
		}
		for _, want := range []string{"make run's script", "node (data dir", "watcher of stream " + recorded, "watcher of stream " + mine} {
			if round == 2 && want == "make run's script" {
				continue // it has exited
			}
			if !strings.Contains(tout, want) {
				t.Errorf("teardown did not say it stopped %q:\n%s", want, tout)
			}
		}
		if err := waitExit(t, exited, out, 30*time.Second); err != nil {
			t.Errorf("make run exited with %v under teardown:\n%s", err, tail(out.String(), 2000))
		}
		for _, done := range restartedDone {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("a restarted node still runs after teardown")
			}
		}
		if ps := projectProcesses(dir); len(ps) > 0 {
			t.Errorf("still running after teardown: %v", ps)
		}
		for _, w := range []*exec.Cmd{wr, wm} {
			if processAlive(w.Process.Pid) {
				t.Errorf("watcher pid %d still runs", w.Process.Pid)
			}
		}
		if !processAlive(wf.Process.Pid) {
			t.Error("teardown stopped another project's watcher")
		}
		if _, err := os.Stat("/tmp/spine-" + foreign + ".lock"); err != nil {
			t.Errorf("another project's watcher lost its lock: %v", err)
		}
		for _, f := range []string{filepath.Join(dir, "data"), "/tmp/spine-" + recorded + "-done", "/tmp/spine-" + recorded + "-pipe"} {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is still there after teardown (%v)", f, err)
			}
		}
		_ = syscall.Kill(-wf.Process.Pid, syscall.SIGKILL)

		// Again: nothing to do.
		if code, tout := runTeardown(t, dir); code != 0 || !strings.Contains(tout, "Nothing to tear down") {
			t.Fatalf("teardown again: exit %d\n%s", code, tout)
		}
		if t.Failed() {
			return
		}
	}
}

// scripts/teardown.sh refuses, stopping and deleting nothing, when it
// cannot tell which processes are the project's (a record it cannot read)
// or when DATA holds nothing Spine wrote; a pid recorded in nodes.txt that
// now belongs to another process is left alone.
func TestTeardownRefusesWhenItCannotTell(t *testing.T) {
	t.Parallel()
	dir := project(t, repoRoot(t))
	data := filepath.Join(dir, "data")

	sleeper := exec.Command("sleep", "120")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-sleeper.Process.Pid, syscall.SIGKILL) })

	// nodes.txt with a line that names no pid: refused.
	os.MkdirAll(data, 0o755)
	os.WriteFile(filepath.Join(data, "tokens.env"), []byte("HEAD_TOKEN=x\n"), 0o600)
	os.WriteFile(filepath.Join(data, "nodes.txt"), []byte("# header\nn1 not-a-pid (exec spine serve)\n"), 0o644)
	code, out := runTeardown(t, dir)
	if code == 0 || !strings.Contains(out, "refusing") || !strings.Contains(out, "nodes.txt") {
		t.Fatalf("an unreadable nodes.txt: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(data, "tokens.env")); err != nil {
		t.Fatalf("the refused teardown deleted the data: %v", err)
	}

	// A DATA holding nothing Spine wrote: refused, kept.
	notSpine := t.TempDir()
	os.WriteFile(filepath.Join(notSpine, "thesis.tex"), []byte("\\begin{document}"), 0o644)
	code, out = runTeardown(t, dir, "DATA="+notSpine)
	if code == 0 || !strings.Contains(out, "refusing") {
		t.Fatalf("a DATA that is not Spine's: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(notSpine, "thesis.tex")); err != nil {
		t.Fatalf("the refused teardown deleted a file: %v", err)
	}

	// nodes.txt naming a pid that is now another process: left alone.
	os.WriteFile(filepath.Join(data, "nodes.txt"), fmt.Appendf(nil, "n1 %d (exec spine serve --data-dir %s/n1)\n", sleeper.Process.Pid, data), 0o644)
	code, out = runTeardown(t, dir)
	if code != 0 || !strings.Contains(out, "left alone") {
		t.Fatalf("a reused pid: exit %d\n%s", code, out)
	}
	if !processAlive(sleeper.Process.Pid) {
		t.Fatal("teardown signalled a process that is not a node")
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data is still there: %v", err)
	}
}
