package testcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeCluster is a Cluster whose nodes are `sleep` processes (so that
// Running, Pause, Kill and Stop act on real pids) and whose HTTP URLs are
// test servers answering /cluster/status with status(i).
func fakeCluster(t *testing.T, n int, status func(i int) map[string]any) *Cluster {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "fake-spine")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: Options{Binary: script, Dir: dir, Logf: t.Logf}, client: &http.Client{Timeout: 5 * time.Second}}
	for i := 0; i < n; i++ {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/cluster/status" || r.Header.Get("Authorization") != "Bearer "+HeadToken {
				http.Error(w, "no", http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(status(i))
		}))
		t.Cleanup(srv.Close)
		node := &Node{ID: "n" + string(rune('1'+i)), URL: srv.URL,
			DataDir: filepath.Join(dir, "d"+string(rune('1'+i))), LogPath: filepath.Join(dir, "log"+string(rune('1'+i)))}
		c.Nodes = append(c.Nodes, node)
		if err := c.launch(node); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.Stop)
	return c
}

func st(applied, hashIndex uint64, hash string, mismatches uint64) map[string]any {
	return map[string]any{"node_id": "x", "state": "Follower", "applied_index": applied, "commit_index": applied,
		"hash_index": hashIndex, "state_hash": hash, "hash_mismatches": mismatches}
}

var (
	hashA = strings.Repeat("ab", 32)
	hashB = strings.Repeat("cd", 32)
)

func TestCheckConvergedAgree(t *testing.T) {
	c := fakeCluster(t, 3, func(int) map[string]any { return st(42, 40, hashA, 0) })
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestCheckConvergedReportsDivergence(t *testing.T) {
	c := fakeCluster(t, 3, func(i int) map[string]any {
		if i == 1 {
			return st(42, 40, hashB, 0)
		}
		return st(42, 40, hashA, 0)
	})
	err := c.CheckConverged(5 * time.Second)
	if err == nil {
		t.Fatal("different hashes at the same index passed")
	}
	for _, want := range []string{"n1 and n2 hold different states", hashA, hashB, "applied_index 42"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

func TestCheckConvergedReportsMismatchCounter(t *testing.T) {
	c := fakeCluster(t, 2, func(i int) map[string]any { return st(42, 40, hashA, uint64(i)*3) })
	err := c.CheckConverged(5 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "n2: hash_mismatches 3") {
		t.Fatalf("hash_mismatches > 0 not reported: %v", err)
	}
}

// A node that does not report the hash fields fails the check, by name.
func TestCheckConvergedReportsMissingFields(t *testing.T) {
	c := fakeCluster(t, 3, func(i int) map[string]any {
		m := st(42, 40, hashA, 0)
		if i == 2 {
			delete(m, "state_hash")
			delete(m, "hash_index")
			delete(m, "hash_mismatches")
		}
		return m
	})
	err := c.CheckConverged(5 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "n3: /cluster/status has no hash_index, state_hash, hash_mismatches") {
		t.Fatalf("missing fields not reported: %v", err)
	}
	c2 := fakeCluster(t, 1, func(int) map[string]any { return st(42, 40, "nothex", 0) })
	if err := c2.CheckConverged(5 * time.Second); err == nil || !strings.Contains(err.Error(), "not 64 hex digits") {
		t.Fatalf("bad hash not reported: %v", err)
	}
}

// The check waits for the applied indexes to meet, and times out naming
// each node's values when they do not.
func TestCheckConvergedWaitsForTheSameAppliedIndex(t *testing.T) {
	var polls atomic.Int64
	c := fakeCluster(t, 3, func(i int) map[string]any {
		if i == 0 && polls.Add(1) < 5 {
			return st(41, 40, hashA, 0)
		}
		return st(42, 40, hashA, 0)
	})
	if err := c.CheckConverged(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if polls.Load() < 5 {
		t.Fatalf("polled %d times, want the wait to go on until n1 caught up", polls.Load())
	}

	stuck := fakeCluster(t, 2, func(i int) map[string]any { return st(uint64(40+i), 40, hashA, 0) })
	err := stuck.CheckConverged(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not reach the same applied_index") ||
		!strings.Contains(err.Error(), "n1: state Follower, term 0, applied_index 40") || !strings.Contains(err.Error(), "n2: state Follower, term 0, applied_index 41") {
		t.Fatalf("timeout error does not name each node's values: %v", err)
	}
}

// Killed nodes are left out; a paused node is an error.
func TestCheckConvergedSkipsKilledNodesAndRefusesPaused(t *testing.T) {
	c := fakeCluster(t, 3, func(i int) map[string]any {
		if i == 2 {
			return st(10, 9, hashB, 0) // stale, but killed below
		}
		return st(42, 40, hashA, 0)
	})
	if err := c.Kill(c.Nodes[2]); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatalf("a killed node was compared: %v", err)
	}
	if err := c.Pause(c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConverged(time.Second); err == nil || !strings.Contains(err.Error(), "n1 is paused") {
		t.Fatalf("paused node not reported: %v", err)
	}
	if err := c.Resume(c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckConverged(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// procState is the state letter of /proc/<pid>/stat (T: stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return strings.Fields(s[i+1:])[0]
}

// Pause stops the process, Resume wakes it, and Stop wakes a paused node
// before terminating it, so that nothing is left stopped.
func TestPauseResumeStop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	c := fakeCluster(t, 2, func(int) map[string]any { return st(1, 1, hashA, 0) })
	n := c.Nodes[0]
	pid := n.Pid()
	if err := c.Pause(n); err != nil {
		t.Fatal(err)
	}
	if !n.Paused() || !n.Running() {
		t.Fatalf("paused %v running %v, want both", n.Paused(), n.Running())
	}
	if err := Eventually(5*time.Second, 10*time.Millisecond, func() error {
		if s := procState(t, pid); s != "T" {
			return fmt.Errorf("state %s", s)
		}
		return nil
	}); err != nil {
		t.Fatalf("not stopped after Pause: %v", err)
	}
	if err := c.Resume(n); err != nil {
		t.Fatal(err)
	}
	if err := Eventually(5*time.Second, 10*time.Millisecond, func() error {
		if s := procState(t, pid); s == "T" {
			return errors.New("still stopped")
		}
		return nil
	}); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if n.Paused() {
		t.Fatal("still marked paused")
	}

	// Paused nodes (one of them twice) are stopped by Stop within its bound.
	if err := c.Pause(c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(c.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Stop did not return: a paused node was not woken")
	}
	for _, n := range c.Nodes {
		if n.Running() || n.Paused() {
			t.Errorf("%s after Stop: running %v, paused %v", n.ID, n.Running(), n.Paused())
		}
	}
	if err := c.Pause(c.Nodes[0]); err == nil {
		t.Error("pausing a stopped node succeeded")
	}
}
