// Package systemtest runs real three-process Spine clusters on loopback.
package systemtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// binary is the spine executable built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spine-systemtest-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, err = testcluster.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCluster starts a cluster for one test and stops it (by pid) at the end,
// printing the nodes' logs if the test failed. A test that passed ends with
// the replicas compared (stopCluster).
func startCluster(t *testing.T, nodes int, env map[string]string) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	c, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: t.TempDir(), Nodes: nodes, Env: env, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopCluster(t, c) })
	return c
}

// convergeTimeout bounds the wait for the nodes to reach the same applied
// index at the end of a test.
const convergeTimeout = 30 * time.Second

// stopCluster ends a test's cluster: if the test has passed so far and some
// node is still running, every running node must reach the same applied
// index and then report the same state hash, with no hash mismatch seen
// (nodes the test killed and did not restart are left out); then every node
// is stopped, and the logs are printed if the test failed.
func stopCluster(tb testing.TB, c *testcluster.Cluster) {
	tb.Helper()
	if !tb.Failed() {
		if err := c.CheckConverged(convergeTimeout); err != nil {
			tb.Errorf("the replicas did not converge after the test: %v", err)
		}
	}
	c.Stop()
	if tb.Failed() {
		tb.Log(c.Logs(6000))
	}
}

// A node that exits while the cluster forms fails the start at once, with
// its log, instead of leaving the caller to wait out the start timeout.
func TestClusterStartReportsANodeThatExits(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process system test (skipped with -short)")
	}
	_, err := testcluster.Start(testcluster.Options{Binary: binary, Dir: t.TempDir(), Nodes: 3,
		Env: map[string]string{"LEASE_SECONDS": "-5"}, Logf: t.Logf})
	if err == nil {
		t.Fatal("a cluster of nodes that refuse their configuration started")
	}
	if msg := err.Error(); !strings.Contains(msg, "exited while the cluster was forming") || !strings.Contains(msg, "LEASE_SECONDS") {
		t.Fatalf("start error does not name the exit and its cause:\n%v", err)
	}
}
