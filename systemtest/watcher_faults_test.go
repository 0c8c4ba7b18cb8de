package systemtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

// Seed 004 §20's watcher failure modes: a deleted FIFO is made again and
// the agent is still woken; a watcher that died (SIGKILL, its lock left
// behind) is replaced by a new one, which takes over the stale lock.
func TestWatcherFailureModes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	base := c.Nodes[0].URL
	stream, ses := wName("wf"), wName("wfs")
	apiWant(t, apiDo(t, "PUT", base+"/api/registry", apiHead, api.Registry{Tools: []api.Tool{{Name: "run-bash", TaskClass: "MEDIUM_SCRIPT"}}}), 200)
	apiWant(t, apiDo(t, "POST", base+"/api/sessions", apiHead, api.SessionCreateRequest{Name: ses}), 201)
	apiWant(t, apiDo(t, "POST", base+"/api/streams", apiHead, api.StreamCreateRequest{Name: stream, Session: ses}), 201)
	pipe, done, lock := "/tmp/spine-"+stream+"-pipe", "/tmp/spine-"+stream+"-done", "/tmp/spine-"+stream+".lock"
	t.Cleanup(func() {
		for _, p := range []string{pipe, done, lock} {
			os.Remove(p)
		}
	})
	watcher, _ := filepath.Abs("../scripts/spine-watcher.sh")
	dir := t.TempDir()
	env := append(os.Environ(), "SPINE="+binary, "SPINE_ADDRS="+strings.Join(c.URLs(), ","), "SPINE_TOKEN="+apiLeft,
		"SPINE_WATCH_WAIT=2s", "SPINE_WATCH_BUSY=0.1")
	start := func(name string) *exec.Cmd {
		cmd := exec.Command("bash", watcher, stream)
		cmd.Env = env
		logf, _ := os.Create(filepath.Join(dir, name))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_, _ = cmd.Process.Wait()
			logf.Close()
		})
		return cmd
	}
	waitLock := func(pid int) {
		apiEventually(t, 10*time.Second, "the watcher's lock", func() error {
			b, err := os.ReadFile(lock)
			if err != nil {
				return err
			}
			if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != pid {
				return fmt.Errorf("lock names %d, want %d", got, pid)
			}
			return nil
		})
	}
	// wakeAfter signals idle, queues a task and reads one line from the
	// pipe (made again by the watcher if deleted), within 15 s.
	wakeAfter := func() {
		t.Helper()
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var f *os.File
		apiEventually(t, 10*time.Second, "the pipe", func() error {
			fi, err := os.Stat(pipe)
			if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				return fmt.Errorf("no pipe yet")
			}
			f, err = os.OpenFile(pipe, os.O_RDONLY, 0)
			return err
		})
		defer f.Close()
		devqTask(t, apiDo(t, "POST", base+"/api/tasks", apiHead, api.EnqueueRequest{ToolName: "run-bash", Stream: stream}), 201)
		got := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(f).ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			if strings.TrimSpace(line) != "wake" {
				t.Fatalf("read %q from the pipe", line)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the agent was not woken")
		}
		// Take the task so the next round starts from an empty stream.
		var tk api.Task
		apiDecode(t, apiWant(t, apiDo(t, "POST", base+"/api/claim", apiLeft, api.TaskClaimRequest{Stream: stream}), 200), &tk)
	}

	w1 := start("w1.log")
	waitLock(w1.Process.Pid)
	apiEventually(t, 10*time.Second, "the pipe", func() error { _, err := os.Stat(pipe); return err })
	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	wakeAfter()

	// The watcher dies without cleaning up; a new one takes its place.
	if err := syscall.Kill(-w1.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = w1.Process.Wait()
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed watcher's lock is gone (%v): nothing to take over", err)
	}
	w2 := start("w2.log")
	waitLock(w2.Process.Pid)
	wakeAfter()
}
